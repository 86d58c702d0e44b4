"""The match listing's times and hand: when each match was created and started, and its hand.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02

The listing is emptied and its position set back to 0, so that a server folds the stored
events into it again, each row's times and hand included (as when 0002 created it): a row
folded before this revision has no way to learn them but the fold. Pages list what has been
folded meanwhile. The events table is not touched.

Stop every replica of an earlier version before starting one of this version: the earlier
code cannot fill the new columns, so its folds fail (and its listing pages with them) until
it is replaced.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _refold() -> None:
    op.execute("DELETE FROM match_list_players")
    op.execute("DELETE FROM match_list")
    op.execute("UPDATE projection_positions SET position = 0 WHERE name = 'match_list'")


def upgrade() -> None:
    _refold()
    columns = (
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("hand", sa.Integer(), nullable=False),
    )
    if op.get_bind().dialect.name == "sqlite":
        # SQLite adds a NOT NULL column only with a default, even to an empty table: the
        # table is made again (it has no triggers, and no grants on SQLite to lose).
        with op.batch_alter_table("match_list", recreate="always") as batch:
            for column in columns:
                batch.add_column(column)
    else:
        # The table is empty: PostgreSQL adds NOT NULL columns without a default, and the
        # table (with its grants) stays.
        for column in columns:
            op.add_column("match_list", column)


def downgrade() -> None:
    _refold()
    # Plain ALTER TABLE on both backends (SQLite 3.35+).
    for name in ("hand", "started_at", "created_at"):
        op.execute(f"ALTER TABLE match_list DROP COLUMN {name}")
