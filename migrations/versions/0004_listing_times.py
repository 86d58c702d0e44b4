"""The match listing's times and hand: when each match was created and started, and its hand.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02

The columns only add, so replicas of the earlier version go on working during a rolling
restart (a match they list meanwhile has no creation time, and its start and hand only once
a replica of this version folds its deal). Matches listed before are given their times and
hand here, from their own stored rows: the recorded time of the MatchCreated (seq 1) and of
the first Dealt, and the latest Dealt's hand. The events table is not touched.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("match_list", sa.Column("created_at", sa.DateTime(timezone=True)))
    op.add_column("match_list", sa.Column("started_at", sa.DateTime(timezone=True)))
    op.add_column("match_list", sa.Column("hand", sa.Integer(), nullable=False, server_default="0"))
    if op.get_bind().dialect.name == "sqlite":
        hand = "CAST(json_extract(e.payload, '$.hand') AS INTEGER)"
    else:
        hand = "CAST(e.payload ->> 'hand' AS integer)"
    op.execute(
        "UPDATE match_list SET"
        " created_at = (SELECT e.recorded_at FROM events e"
        "   WHERE e.stream_id = match_list.match_id AND e.seq = 1),"
        " started_at = (SELECT min(e.recorded_at) FROM events e"
        "   WHERE e.stream_id = match_list.match_id AND e.type = 'Dealt'),"
        f" hand = COALESCE((SELECT max({hand}) FROM events e"
        "   WHERE e.stream_id = match_list.match_id AND e.type = 'Dealt'), 0)"
    )


def downgrade() -> None:
    # Plain ALTER TABLE on both backends (SQLite 3.35+).
    for name in ("hand", "started_at", "created_at"):
        op.execute(f"ALTER TABLE match_list DROP COLUMN {name}")
