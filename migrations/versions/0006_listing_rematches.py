"""The match listing's rematches: for a rematch, the match it follows.

Revision ID: 0006
Revises: 0005
Create Date: 2027-01-12

A rematch's free seats are kept for the players of the match it follows, so the listing says
which matches are rematches (their MatchCreated's metadata names the match) and a lobby offers
no stranger their seats. The column only adds, and no match listed before it is a rematch
(servers of earlier versions create none), so nothing is filled in. During a rolling
restart a replica of the earlier version lists a rematch as an ordinary match and, knowing
nothing of rematches, would seat anyone who joins it through that replica: rematches are
safe once every replica runs this version. The events table is not touched.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("match_list", sa.Column("rematch_of", sa.Text(), nullable=True))


def downgrade() -> None:
    # Plain ALTER TABLE on both backends (SQLite 3.35+).
    op.execute("ALTER TABLE match_list DROP COLUMN rematch_of")
