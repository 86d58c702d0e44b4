"""Players and ratings: the listing's players and rated flag, and the ratings read model.

Revision ID: 0007
Revises: 0006
Create Date: 2027-01-15

The listing's new columns only add (NULL: a match listed before them, which had no
registered player), so replicas of the earlier version go on working during a rolling
restart. The ratings' tables start empty, their projection at position 0: a server folds
the stored events into them on start (before this version no match was rated, so the fold
finds nothing to rate in the older log). The events table is not touched.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _id() -> sa.types.TypeEngine[str]:
    return sa.String(200).with_variant(sa.String(200, collation="C"), "postgresql")


def upgrade() -> None:
    op.add_column("match_list", sa.Column("player_ids", sa.Text()))
    op.add_column("match_list", sa.Column("bots", sa.Text()))
    op.add_column(
        "match_list", sa.Column("rated", sa.Boolean(), nullable=False, server_default=sa.false())
    )
    op.create_table(
        "player_ratings",
        sa.Column("player_id", _id(), nullable=False),
        sa.Column("pool", sa.String(8), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("bot", sa.Boolean(), nullable=False),
        sa.Column("mu", sa.Double(), nullable=False),
        sa.Column("sigma", sa.Double(), nullable=False),
        sa.Column("matches", sa.Integer(), nullable=False),
        sa.Column("shown", sa.Boolean(), nullable=False),
        sa.Column("rank_rating", sa.Integer(), nullable=False),
        sa.Column("rank_conservative", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("player_id", "pool", name=op.f("pk_player_ratings")),
    )
    op.create_index(
        "ix_player_ratings_board",
        "player_ratings",
        ["pool", "shown", "rank_rating", "rank_conservative", "matches", "player_id"],
    )
    op.create_table(
        "rating_history",
        sa.Column("player_id", _id(), nullable=False),
        sa.Column("pool", sa.String(8), nullable=False),
        sa.Column("match_id", _id(), nullable=False),
        sa.Column("rated_order", sa.BigInteger(), nullable=False),
        sa.Column("seat", sa.Integer(), nullable=False),
        sa.Column("place", sa.Integer(), nullable=False),
        sa.Column("mu_before", sa.Double(), nullable=False),
        sa.Column("sigma_before", sa.Double(), nullable=False),
        sa.Column("mu_after", sa.Double(), nullable=False),
        sa.Column("sigma_after", sa.Double(), nullable=False),
        sa.Column("matches", sa.Integer(), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("player_id", "pool", "match_id", name=op.f("pk_rating_history")),
    )
    op.create_index(
        "ix_rating_history_player_id_rated_order", "rating_history", ["player_id", "rated_order"]
    )
    op.create_index(
        "ix_rating_history_player_id_pool_rated_order",
        "rating_history",
        ["player_id", "pool", "rated_order"],
    )
    op.create_index("ix_rating_history_match_id", "rating_history", ["match_id"])
    op.create_table(
        "rated_matches",
        sa.Column("match_id", _id(), nullable=False),
        sa.Column("pool", sa.String(8), nullable=False),
        sa.Column("rated_order", sa.BigInteger(), nullable=False),
        sa.Column("seats", sa.Text(), nullable=False),
        sa.Column("sides", sa.Text(), nullable=False),
        sa.Column("places", sa.Text(), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("match_id", name=op.f("pk_rated_matches")),
        sa.UniqueConstraint("rated_order", name=op.f("uq_rated_matches_rated_order")),
    )
    op.create_index("ix_rated_matches_pool_rated_order", "rated_matches", ["pool", "rated_order"])
    op.create_table(
        "rated_pending",
        sa.Column("match_id", _id(), nullable=False),
        sa.Column("pool", sa.String(8), nullable=False),
        sa.Column("seats", sa.Text(), nullable=False),
        sa.Column("sides", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("match_id", name=op.f("pk_rated_pending")),
    )


def downgrade() -> None:
    for table in ("rated_pending", "rated_matches", "rating_history", "player_ratings"):
        op.drop_table(table)
    op.execute("DELETE FROM projection_positions WHERE name = 'ratings'")
    # Plain ALTER TABLE on both backends (SQLite 3.35+).
    for name in ("rated", "bots", "player_ids"):
        op.execute(f"ALTER TABLE match_list DROP COLUMN {name}")
