"""The rating history keeps one index: its key becomes (player, pool, order).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03

A player's rated matches in a pool, newest first, are a range of the key (player_id, pool,
rated_order) read backwards; those of every pool, the four ranges merged; a match's rows, by
its players. The key (player_id, pool, match_id) and the indexes on (player_id,
rated_order), (player_id, pool, rated_order) and (match_id) go, and so does the unique
constraint on rated_matches.rated_order (each is a global position, one a match by
construction, and every row is sealed): a rebuild writes a history row for every seat of
every rated match, and each index cost it as much as the row. The rows are kept as they
are: a player holds one seat of a match, so (player_id, pool, rated_order) names one row.
Replicas of the earlier version keep working on the new schema while the new ones start
(their lookups of a match's rows by match_id scan the table, which only an end folded late
makes). A downgrade puts the former key and indexes back.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_index("ix_rating_history_player_id_rated_order", table_name="rating_history")
    op.drop_index("ix_rating_history_player_id_pool_rated_order", table_name="rating_history")
    op.drop_index("ix_rating_history_match_id", table_name="rating_history")
    with op.batch_alter_table("rating_history") as batch:
        batch.drop_constraint("pk_rating_history", type_="primary")
        batch.create_primary_key("pk_rating_history", ["player_id", "pool", "rated_order"])
    with op.batch_alter_table("rated_matches") as batch:
        batch.drop_constraint("uq_rated_matches_rated_order", type_="unique")


def downgrade() -> None:
    with op.batch_alter_table("rated_matches") as batch:
        batch.create_unique_constraint("uq_rated_matches_rated_order", ["rated_order"])
    with op.batch_alter_table("rating_history") as batch:
        batch.drop_constraint("pk_rating_history", type_="primary")
        batch.create_primary_key("pk_rating_history", ["player_id", "pool", "match_id"])
    op.create_index(
        "ix_rating_history_player_id_rated_order", "rating_history", ["player_id", "rated_order"]
    )
    op.create_index(
        "ix_rating_history_player_id_pool_rated_order",
        "rating_history",
        ["player_id", "pool", "rated_order"],
    )
    op.create_index("ix_rating_history_match_id", "rating_history", ["match_id"])
