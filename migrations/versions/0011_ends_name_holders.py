"""The ratings no longer keep rated matches in play: rated_pending is dropped.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03

A rated match's end now names its seat holders, and an end that names none (one written
before) is looked up in its own stream, so the ratings hold nothing about a match until it
ends. The ratings' other tables and their position are kept: they are what they were. Stop
the servers of the earlier version before upgrading (they fold rated matches through the
dropped table). A downgrade makes the table again, empty, and sets the ratings back to
position 0, since the earlier version needs it filled: its servers rebuild the ratings on
start. The events table is not touched.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_table("rated_pending")


def downgrade() -> None:
    op.create_table(
        "rated_pending",
        sa.Column(
            "match_id",
            sa.String(200).with_variant(sa.String(200, collation="C"), "postgresql"),
            nullable=False,
        ),
        sa.Column("pool", sa.String(8), nullable=False),
        sa.Column("seats", sa.Text(), nullable=False),
        sa.Column("sides", sa.Text(), nullable=False),
        sa.Column("key_id", sa.String(32), nullable=True),
        sa.Column("mac", sa.LargeBinary(32), nullable=True),
        sa.PrimaryKeyConstraint("match_id", name=op.f("pk_rated_pending")),
    )
    for table in ("player_ratings", "rating_history", "rated_matches"):
        op.execute(f"DELETE FROM {table}")
    op.execute("DELETE FROM projection_positions WHERE name = 'ratings'")
