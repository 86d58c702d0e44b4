"""The store alone gives each event its global position and transaction id.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03

`position` is an identity column and `tx_id` defaults to the writing transaction's id, but a
role that may INSERT can still name both (`OVERRIDING SYSTEM VALUE`): rows put at the next
thousands of positions made every later append fail on the unique position, and a made-up
tx_id would slip a row past the feed's in-order reading. A row trigger now overwrites both
with the sequence's next value and the transaction's own id, whatever the INSERT says
(ALWAYS: in replica mode too). PostgreSQL only: a SQLite file has no roles.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_FUNCTION = """
CREATE FUNCTION bergen_events_own_position() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.position := nextval(pg_get_serial_sequence('events', 'position'));
    NEW.tx_id := pg_current_xact_id()::text::bigint;
    RETURN NEW;
END
$$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(_FUNCTION)
    op.execute(
        "CREATE TRIGGER events_own_position BEFORE INSERT ON events"
        " FOR EACH ROW EXECUTE FUNCTION bergen_events_own_position()"
    )
    op.execute("ALTER TABLE events ENABLE ALWAYS TRIGGER events_own_position")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP TRIGGER events_own_position ON events")
    op.execute("DROP FUNCTION bergen_events_own_position()")
