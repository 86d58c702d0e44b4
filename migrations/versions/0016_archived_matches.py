"""Archived matches: the one kind of event the append-only guard lets go.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-04

`bergen archive` (run as the owner) writes the signed records of old ended matches to a
folder, then lists each match in `archived_matches` and deletes its events before its end.
The guard on `events` refuses UPDATE and TRUNCATE as before, and now judges a DELETE row by
row (the trigger `events_no_update_delete` keeps its name): refused unless its stream is
listed in `archived_matches` and the row comes before the seq listed there (the match's
`MatchEnded`). The end and what follows it stay, so that the ratings, the projections'
positions and the transparency log's last leaf still find them. `archived_matches` is
append-only too (no UPDATE, DELETE or TRUNCATE), and the server's role may only read it
(deploy/grants.sql). Nothing stored is changed by the upgrade.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_PG_GUARD = """
CREATE FUNCTION bergen_events_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND EXISTS (SELECT 1 FROM archived_matches a
                                    WHERE a.match_id = OLD.stream_id AND OLD.seq < a.end_seq) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'events are append-only: % on % (stream %, seq %)',
        TG_OP, TG_TABLE_NAME, OLD.stream_id, OLD.seq
        USING ERRCODE = 'insufficient_privilege';
END;
$$
"""

_SQLITE_DELETE_GUARD = """
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
WHEN NOT EXISTS (SELECT 1 FROM archived_matches a
                 WHERE a.match_id = OLD.stream_id AND OLD.seq < a.end_seq)
BEGIN SELECT RAISE(ABORT, 'events are append-only: DELETE on events'); END
"""

_SQLITE_ARCHIVED_GUARDS = (
    """CREATE TRIGGER archived_matches_no_update BEFORE UPDATE ON archived_matches
       BEGIN SELECT RAISE(ABORT, 'archived_matches is append-only: UPDATE'); END""",
    """CREATE TRIGGER archived_matches_no_delete BEFORE DELETE ON archived_matches
       BEGIN SELECT RAISE(ABORT, 'archived_matches is append-only: DELETE'); END""",
)


def upgrade() -> None:
    op.create_table(
        "archived_matches",
        sa.Column(
            "match_id",
            sa.String(200).with_variant(sa.String(200, collation="C"), "postgresql"),
            nullable=False,
        ),
        sa.Column("end_seq", sa.BigInteger(), nullable=False),
        sa.Column("events", sa.BigInteger(), nullable=False),
        sa.Column("head", sa.LargeBinary(32), nullable=False),
        sa.Column("record_sha256", sa.Text(), nullable=False),
        sa.Column(
            "archived_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.func.current_timestamp(),
        ),
        sa.PrimaryKeyConstraint("match_id", name=op.f("pk_archived_matches")),
    )
    dialect = op.get_bind().dialect.name
    if dialect == "postgresql":
        op.execute(_PG_GUARD)
        # The same name as before (row by row now, so that a DELETE can be judged a row at
        # a time): tools that switch the guard off and on by name keep working.
        op.execute("DROP TRIGGER events_no_update_delete ON events")
        op.execute(
            "CREATE TRIGGER events_no_update_delete BEFORE UPDATE OR DELETE ON events"
            " FOR EACH ROW EXECUTE FUNCTION bergen_events_guard()"
        )
        op.execute("ALTER TABLE events ENABLE ALWAYS TRIGGER events_no_update_delete")
        op.execute(
            "CREATE TRIGGER archived_matches_append_only BEFORE UPDATE OR DELETE OR TRUNCATE"
            " ON archived_matches FOR EACH STATEMENT EXECUTE FUNCTION bergen_events_append_only()"
        )
        op.execute(
            "ALTER TABLE archived_matches ENABLE ALWAYS TRIGGER archived_matches_append_only"
        )
    elif dialect == "sqlite":
        op.execute("DROP TRIGGER events_no_delete")
        op.execute(_SQLITE_DELETE_GUARD)
        for statement in _SQLITE_ARCHIVED_GUARDS:
            op.execute(statement)


def downgrade() -> None:
    # The archived matches' deleted rows are not brought back (their records are in the
    # archive folder); the guard refuses every DELETE again.
    dialect = op.get_bind().dialect.name
    if dialect == "postgresql":
        op.execute("DROP TRIGGER events_no_update_delete ON events")
        op.execute(
            "CREATE TRIGGER events_no_update_delete BEFORE UPDATE OR DELETE ON events"
            " FOR EACH STATEMENT EXECUTE FUNCTION bergen_events_append_only()"
        )
        op.execute("ALTER TABLE events ENABLE ALWAYS TRIGGER events_no_update_delete")
        op.execute("DROP TRIGGER archived_matches_append_only ON archived_matches")
        op.execute("DROP FUNCTION bergen_events_guard()")
    elif dialect == "sqlite":
        op.execute("DROP TRIGGER events_no_delete")
        op.execute(
            "CREATE TRIGGER events_no_delete BEFORE DELETE ON events"
            " BEGIN SELECT RAISE(ABORT, 'events are append-only: DELETE on events'); END"
        )
    op.drop_table("archived_matches")
