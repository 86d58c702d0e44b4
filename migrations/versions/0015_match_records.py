"""The records of ended matches, kept once made.

Revision ID: 0015
Revises: 0012
Create Date: 2026-12-03

`match_records` starts empty: a record is kept the first time it is made (by GetRecord,
ExportRecords or a tournament's pack), and served from there afterwards. Replicas of the
earlier version go on working during a rolling restart (they neither read nor write it).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0012"
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
        sa.Column("key_id", sa.Text(), nullable=True),
        sa.Column("mac", sa.LargeBinary(), nullable=True),
        sa.PrimaryKeyConstraint("match_id", name=op.f("pk_match_records")),
    )


def downgrade() -> None:
    op.drop_table("match_records")
