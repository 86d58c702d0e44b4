"""Two partial indexes of the events: each match's first row, and each match's end.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-03

The listing's audit looks for matches opened and not listed, and the ratings read the
matches' ends alone; with no index naming those rows, the first scanned the whole log and
the second passed over about a hundred rows for each end it read. Each index holds one row
a match (stream, transaction and position of its MatchCreated at seq 1; transaction and
position of its MatchEnded).

On PostgreSQL they are built with CREATE INDEX CONCURRENTLY, outside the migration's
transaction: the replicas keep appending while each is built (two passes over `events`, a
few seconds a gigabyte), and every migration before this one is committed first. A build
that fails leaves an index marked invalid: running the migration again drops it and builds
it anew. Replicas of the earlier version keep working on the new schema. A downgrade drops
both.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import context, op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OPENED = "seq = 1 AND type = 'MatchCreated'"
_ENDED = "type = 'MatchEnded'"
_INDEXES = (
    ("ix_events_match_opened", ["stream_id", "tx_id", "position"], _OPENED),
    ("ix_events_match_ended", ["tx_id", "position"], _ENDED),
)


def upgrade() -> None:
    if op.get_context().dialect.name != "postgresql":
        for name, columns, where in _INDEXES:
            op.create_index(name, "events", columns, sqlite_where=sa.text(where))
        return
    with op.get_context().autocommit_block():
        for name, columns, where in _INDEXES:
            if not context.is_offline_mode():
                _drop_if_invalid(name)
            op.create_index(
                name,
                "events",
                columns,
                postgresql_where=sa.text(where),
                postgresql_concurrently=True,
                if_not_exists=True,
            )


def _drop_if_invalid(name: str) -> None:
    """Drop `name` when an earlier build of it failed (PostgreSQL keeps such an index, marked
    invalid, and IF NOT EXISTS would take it as built)."""
    invalid = (
        op.get_bind()
        .execute(
            sa.text("SELECT NOT indisvalid FROM pg_index WHERE indexrelid = to_regclass(:name)"),
            {"name": name},
        )
        .scalar()
    )
    if invalid:
        op.drop_index(name, table_name="events", postgresql_concurrently=True)


def downgrade() -> None:
    if op.get_context().dialect.name != "postgresql":
        for name, _, _ in _INDEXES:
            op.drop_index(name, table_name="events")
        return
    with op.get_context().autocommit_block():
        for name, _, _ in _INDEXES:
            op.drop_index(name, table_name="events", postgresql_concurrently=True, if_exists=True)
