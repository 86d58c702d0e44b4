"""A player's history is read from the rated matches' rows: `rating_history` goes.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-04

A rated match's sealed row names its seats' holders (`seats`), and a player's history is
read from those rows alone: on PostgreSQL by a GIN index over the holders
(`ix_rated_matches_players`, on `jsonb_path_query_array(seats::jsonb, '$[*][0]')`), on
SQLite by the matches' order backwards. `rating_history`, a row a seat that a rebuild
wrote (and PostgreSQL indexed) for every seat of every rated match, is dropped: it held
nothing the matches' rows do not. No ratings change and nothing is folded again. Stop the
servers of the earlier version before upgrading (they write and read that table). A
downgrade makes the table again from the matches' rows and drops the index.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_INDEX = "ix_rated_matches_players"
_HOLDERS = "jsonb_path_query_array(seats::jsonb, '$[*][0]')"


def _id() -> sa.types.TypeEngine[str]:
    return sa.String(200).with_variant(sa.String(200, collation="C"), "postgresql")


def upgrade() -> None:
    op.drop_table("rating_history")
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"CREATE INDEX {_INDEX} ON rated_matches USING gin (({_HOLDERS}))")


def downgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    if postgres:
        op.execute(f"DROP INDEX {_INDEX}")
    op.create_table(
        "rating_history",
        sa.Column("player_id", _id(), nullable=False),
        sa.Column("pool", sa.String(8), nullable=False),
        sa.Column("rated_order", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("player_id", "pool", "rated_order", name="pk_rating_history"),
    )
    holder = "s.value ->> 0" if postgres else "json_extract(s.value, '$[0]')"
    seats = "json_array_elements(m.seats::json) AS s" if postgres else "json_each(m.seats) AS s"
    op.execute(
        "INSERT INTO rating_history (player_id, pool, rated_order)"
        f" SELECT {holder}, m.pool, m.rated_order FROM rated_matches AS m, {seats}"
    )
