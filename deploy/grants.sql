-- After `BERGEN_DATABASE_URL=postgresql://bergen_owner:...@host/bergen bergen migrate`,
-- as bergen_owner (or a superuser):  psql -d bergen -v ON_ERROR_STOP=1 -f deploy/grants.sql
-- (PostgreSQL 15 grants USAGE on schema public to everyone already.)
GRANT SELECT, INSERT ON events TO bergen_app;
GRANT USAGE ON SEQUENCE events_position_seq TO bergen_app;
GRANT SELECT ON alembic_version TO bergen_app;
-- The match listing: a read model folded from the events, with the position it reached.
GRANT SELECT, INSERT, UPDATE, DELETE ON match_list, match_list_players TO bergen_app;
GRANT SELECT, INSERT, UPDATE ON projection_positions TO bergen_app;
-- The players' ratings: a read model folded from the events, with its position above.
GRANT SELECT, INSERT, UPDATE, DELETE ON player_ratings, rating_history, rated_matches,
    rated_pending TO bergen_app;
-- The transparency log's tree: folded from the events, never changed once written (no
-- UPDATE or DELETE: a server checks it against the checkpoints it signed all the same).
GRANT SELECT, INSERT ON tlog_leaves, tlog_nodes TO bergen_app;
