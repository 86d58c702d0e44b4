"""The records of ended matches, kept once made.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03

`match_records` starts empty: a server makes the record of every ended match in the
background (and of each match as it ends), keeps it, and serves it from there afterwards.
Replicas of the earlier version go on working during a rolling restart (they neither read
nor write it).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "match_records",
        sa.Column(
            "match_id",
            sa.String(200).with_variant(sa.String(200, collation="C"), "postgresql"),
            nullable=False,
        ),
        sa.Column("public_key", sa.Text(), nullable=False),
        sa.Column("events", sa.BigInteger(), nullable=False),
        sa.Column("head", sa.LargeBinary(32), nullable=False),
        sa.Column("record", sa.Text(), nullable=False),
        sa.Column("log_keys", sa.Text(), nullable=False),
        sa.Column("key_id", sa.Text(), nullable=True),
        sa.Column("mac", sa.LargeBinary(), nullable=True),
        sa.PrimaryKeyConstraint("match_id", name=op.f("pk_match_records")),
    )


def downgrade() -> None:
    op.drop_table("match_records")
