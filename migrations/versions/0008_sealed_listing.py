"""The listing's rows and the projections' positions carry authenticators.

Revision ID: 0008
Revises: 0007
Create Date: 2027-02-01

Each row of `match_list` and of `projection_positions` gets the key id and HMAC that a server
seals it with (bergen.server.store.sealed); a row without them is never served as is. The
migration holds no log key, so it cannot seal the rows already there: it empties the listing
and drops its position, and a server folds the stored events into it again on start (its
pages answer from what is folded meanwhile). The events table is not touched.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TABLES = ("match_list", "projection_positions")


def upgrade() -> None:
    for table in _TABLES:
        op.add_column(table, sa.Column("key_id", sa.String(32), nullable=True))
        op.add_column(table, sa.Column("mac", sa.LargeBinary(32), nullable=True))
    op.execute("DELETE FROM match_list_players")
    op.execute("DELETE FROM match_list")
    op.execute("DELETE FROM projection_positions WHERE name = 'match_list'")


def downgrade() -> None:
    # Plain ALTER TABLE on both backends (SQLite 3.35+).
    for table in _TABLES:
        op.execute(f"ALTER TABLE {table} DROP COLUMN mac")
        op.execute(f"ALTER TABLE {table} DROP COLUMN key_id")
