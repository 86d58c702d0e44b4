"""The ratings' rows carry authenticators.

Revision ID: 0009
Revises: 0008
Create Date: 2027-02-01

Each row of the four ratings tables gets the key id and HMAC that a server seals it with
(bergen.server.store.sealed). The migration holds no log key, so it empties the tables and
sets the ratings' position back to 0: a server folds every rated match into them again on
start. The events table is not touched.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TABLES = ("player_ratings", "rating_history", "rated_matches", "rated_pending")


def upgrade() -> None:
    for table in _TABLES:
        op.add_column(table, sa.Column("key_id", sa.String(32), nullable=True))
        op.add_column(table, sa.Column("mac", sa.LargeBinary(32), nullable=True))
        op.execute(f"DELETE FROM {table}")
    op.execute("DELETE FROM projection_positions WHERE name = 'ratings'")


def downgrade() -> None:
    # Plain ALTER TABLE on both backends (SQLite 3.35+).
    for table in _TABLES:
        op.execute(f"ALTER TABLE {table} DROP COLUMN mac")
        op.execute(f"ALTER TABLE {table} DROP COLUMN key_id")
