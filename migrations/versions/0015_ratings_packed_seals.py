"""The ratings' rows are sealed over their columns packed, not as JSON: folded again.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04

The authenticator of a `player_ratings`, `rating_history` or `rated_matches` row now covers
its columns packed in a fixed binary layout (`bergen.server.store.ratings`) instead of their
JSON text, which cost a rebuild most of its sealing time. Rows sealed the earlier way would
not verify, and a server would log each as tampered with before folding the ratings again:
the upgrade empties the three tables and sets the ratings back to position 0 instead, and
the servers fold every rated match again on start (as after `bergen migrate
--rebuild-ratings`). The schema is unchanged. Stop the servers of the earlier version before
upgrading (theirs would take the new rows as tampered with, and the other way round). A
downgrade empties them the same way, for the earlier version to fold them again.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _fold_again() -> None:
    for table in ("player_ratings", "rating_history", "rated_matches"):
        op.execute(f"DELETE FROM {table}")
    op.execute(
        "UPDATE projection_positions SET position = 0, key_id = NULL, mac = NULL"
        " WHERE name = 'ratings'"
    )


def upgrade() -> None:
    _fold_again()


def downgrade() -> None:
    _fold_again()
