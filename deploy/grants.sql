-- After `BERGEN_DATABASE_URL=postgresql://bergen_owner:...@host/bergen bergen migrate`,
-- as bergen_owner (or a superuser):  psql -d bergen -v ON_ERROR_STOP=1 -f deploy/grants.sql
-- (PostgreSQL 15 grants USAGE on schema public to everyone already.)
-- What the role can do, table by table, is docs/security.md's table, and is tested
-- (tests/security/test_read_models.py).
GRANT SELECT, INSERT ON events TO bergen_app;
GRANT USAGE ON SEQUENCE events_position_seq TO bergen_app;
GRANT SELECT ON alembic_version TO bergen_app;
-- The read models, folded from the events. The role writes them, so it could change them:
-- every row carries an authenticator under the log keys, which the database never holds,
-- and a row that does not verify is rebuilt from the events (docs/security.md). UPDATE and
-- DELETE are granted only where the server updates or deletes rows.
-- The match listing (a match's row is updated as its events are folded, and deleted when it
-- is no match of the log; a player's rows are deleted and written again), with the
-- position each projection reached.
GRANT SELECT, INSERT, UPDATE, DELETE ON match_list TO bergen_app;
GRANT SELECT, INSERT, DELETE ON match_list_players TO bergen_app;
GRANT SELECT, INSERT, UPDATE ON projection_positions TO bergen_app;
-- The players' ratings (emptied to be folded again when a row does not verify).
GRANT SELECT, INSERT, UPDATE, DELETE ON player_ratings TO bergen_app;
GRANT SELECT, INSERT, DELETE ON rating_history, rated_matches TO bergen_app;
-- The transparency log's tree: folded from the events, never changed once written (no
-- UPDATE or DELETE: a server checks it against the checkpoints it signed all the same).
GRANT SELECT, INSERT ON tlog_leaves, tlog_nodes TO bergen_app;
-- The records of ended matches, kept once made: a cache, each row sealed and checked before
-- it is served (a row that does not verify is made again from the events and written over).
GRANT SELECT, INSERT, UPDATE ON match_records TO bergen_app;
-- The matches archived by `bergen archive` (run as the owner): read, to answer a call on
-- one with MATCH_ARCHIVED. Only the owner lists a match there, which is what lets the owner
-- delete its rows before its end (migration 0016's guard).
GRANT SELECT ON archived_matches TO bergen_app;
