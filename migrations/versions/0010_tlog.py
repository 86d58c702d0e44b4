"""The transparency log: the Merkle tree's leaves and complete subtrees.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03

The tables start empty, the tree's position at 0: a server folds the stored events into
the tree on start. Replicas of the earlier version go on working during a rolling restart
(they neither read nor write these tables). The events table is not touched.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "tlog_leaves",
        sa.Column("idx", sa.BigInteger(), nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.Column(
            "stream_id",
            sa.String(200).with_variant(sa.String(200, collation="C"), "postgresql"),
            nullable=False,
        ),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("hash", sa.LargeBinary(32), nullable=False),
        sa.PrimaryKeyConstraint("idx", name=op.f("pk_tlog_leaves")),
        sa.UniqueConstraint("position", name=op.f("uq_tlog_leaves_position")),
        sa.UniqueConstraint("stream_id", "seq", name=op.f("uq_tlog_leaves_stream_id_seq")),
    )
    op.create_table(
        "tlog_nodes",
        sa.Column("level", sa.SmallInteger(), nullable=False),
        sa.Column("idx", sa.BigInteger(), nullable=False),
        sa.Column("hash", sa.LargeBinary(32), nullable=False),
        sa.PrimaryKeyConstraint("level", "idx", name=op.f("pk_tlog_nodes")),
    )


def downgrade() -> None:
    op.drop_table("tlog_nodes")
    op.drop_table("tlog_leaves")
    op.execute("DELETE FROM projection_positions WHERE name = 'tlog'")
