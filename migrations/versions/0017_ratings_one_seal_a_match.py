"""A rated match's row holds its seats' ratings; a history row is its key alone: folded again.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-04

`rated_matches` gains `ratings`: each seat's rating before the match and after it, packed,
covered by the row's authenticator. `rating_history` keeps its key alone (player, pool,
order), unsealed: a player's rated matches are read from their matches' sealed rows, and a
history row naming a match its player did not play is refused. A rebuild then seals and
writes one row a rated match where it sealed a row a seat besides.

Rows of the earlier layout cannot be carried over (their matches' rows hold no ratings): the
upgrade empties the three ratings tables and sets the ratings back to position 0, and the
servers fold every rated match again on start (as after `bergen migrate --rebuild-ratings`).
Stop the servers of the earlier version before upgrading. A downgrade empties them the same
way, for the earlier version to fold them again.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_HISTORY_DROPPED = (
    "match_id", "seat", "place", "mu_before", "sigma_before", "mu_after", "sigma_after",
    "matches", "ended_at", "key_id", "mac",
)  # fmt: skip


def _id() -> sa.types.TypeEngine[str]:
    return sa.String(200).with_variant(sa.String(200, collation="C"), "postgresql")


def _fold_again() -> None:
    for table in ("player_ratings", "rating_history", "rated_matches"):
        op.execute(f"DELETE FROM {table}")
    op.execute(
        "UPDATE projection_positions SET position = 0, key_id = NULL, mac = NULL"
        " WHERE name = 'ratings'"
    )


def upgrade() -> None:
    _fold_again()
    with op.batch_alter_table("rating_history") as batch:
        for column in _HISTORY_DROPPED:
            batch.drop_column(column)
    with op.batch_alter_table("rated_matches") as batch:
        batch.add_column(sa.Column("ratings", sa.LargeBinary(), nullable=False))


def downgrade() -> None:
    _fold_again()
    with op.batch_alter_table("rated_matches") as batch:
        batch.drop_column("ratings")
    with op.batch_alter_table("rating_history") as batch:
        batch.add_column(sa.Column("match_id", _id(), nullable=False))
        batch.add_column(sa.Column("seat", sa.Integer(), nullable=False))
        batch.add_column(sa.Column("place", sa.Integer(), nullable=False))
        for column in ("mu_before", "sigma_before", "mu_after", "sigma_after"):
            batch.add_column(sa.Column(column, sa.Double(), nullable=False))
        batch.add_column(sa.Column("matches", sa.Integer(), nullable=False))
        batch.add_column(sa.Column("ended_at", sa.DateTime(timezone=True), nullable=False))
        batch.add_column(sa.Column("key_id", sa.String(32), nullable=True))
        batch.add_column(sa.Column("mac", sa.LargeBinary(32), nullable=True))
