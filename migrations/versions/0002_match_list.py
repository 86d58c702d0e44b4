"""The match listing read model and the positions its projection has folded up to.

Revision ID: 0002
Revises: 0001
Create Date: 2026-01-20

The listing starts empty at position 0; a server folds the stored events into it on start
(in the background) and keeps it current. The events table is not touched.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _match_id() -> sa.types.TypeEngine[str]:
    return sa.String(200).with_variant(sa.String(200, collation="C"), "postgresql")


def upgrade() -> None:
    positions = op.create_table(
        "projection_positions",
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_projection_positions")),
    )
    op.bulk_insert(positions, [{"name": "match_list", "position": 0}])
    op.create_table(
        "match_list",
        sa.Column("match_id", _match_id(), nullable=False),
        sa.Column("listed", sa.BigInteger(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("phase", sa.String(20), nullable=False),
        sa.Column("seats", sa.Integer(), nullable=False),
        sa.Column("partnerships", sa.Boolean(), nullable=False),
        sa.Column("preset", sa.Text(), nullable=False),
        sa.Column("players", sa.Text(), nullable=False),
        sa.Column("scores", sa.Text(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("match_id", name=op.f("pk_match_list")),
        sa.UniqueConstraint("listed", name=op.f("uq_match_list_listed")),
    )
    op.create_index(op.f("ix_match_list_phase_listed"), "match_list", ["phase", "listed"])
    op.create_table(
        "match_list_players",
        sa.Column("match_id", _match_id(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("phase", sa.String(20), nullable=False),
        sa.Column("listed", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("match_id", "name", name=op.f("pk_match_list_players")),
    )
    op.create_index(
        op.f("ix_match_list_players_name_listed"), "match_list_players", ["name", "listed"]
    )
    op.create_index(
        op.f("ix_match_list_players_name_phase_listed"),
        "match_list_players",
        ["name", "phase", "listed"],
    )


def downgrade() -> None:
    op.drop_table("match_list_players")
    op.drop_table("match_list")
    op.drop_table("projection_positions")
