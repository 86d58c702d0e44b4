"""Each event row's authenticator: the id of the servers' log key and an HMAC-SHA256.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30

Rows written before this revision have no authenticator (NULL), and a server refuses to fold
them (LOG_TAMPERED): finish or abandon the live matches before upgrading. The events table is
not rewritten.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Adding nullable columns touches no row, so the append-only triggers never fire.
    op.add_column("events", sa.Column("key_id", sa.String(32), nullable=True))
    op.add_column("events", sa.Column("mac", sa.LargeBinary(32), nullable=True))


def downgrade() -> None:
    # Plain ALTER TABLE on both backends (SQLite 3.35+): a batch copy of the table would drop
    # its append-only triggers.
    op.execute("ALTER TABLE events DROP COLUMN mac")
    op.execute("ALTER TABLE events DROP COLUMN key_id")
