"""The append-only events table, with its guards against UPDATE, DELETE and TRUNCATE.

Revision ID: 0001
Revises:
Create Date: 2025-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_PG_GUARD = """
CREATE FUNCTION bergen_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'events are append-only: % on %', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END;
$$
"""

_SQLITE_GUARDS = (
    """CREATE TRIGGER events_no_update BEFORE UPDATE ON events
       BEGIN SELECT RAISE(ABORT, 'events are append-only: UPDATE on events'); END""",
    """CREATE TRIGGER events_no_delete BEFORE DELETE ON events
       BEGIN SELECT RAISE(ABORT, 'events are append-only: DELETE on events'); END""",
)


def upgrade() -> None:
    op.create_table(
        "events",
        sa.Column(
            "stream_id",
            sa.String(200).with_variant(sa.String(200, collation="C"), "postgresql"),
            nullable=False,
        ),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("position", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("type", sa.String(200), nullable=False),
        sa.Column("schema_version", sa.Integer(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("metadata", sa.JSON(), nullable=False),
        sa.Column("command_id", sa.String(200), nullable=True),
        sa.Column("prev_hash", sa.LargeBinary(32), nullable=False),
        sa.Column("hash", sa.LargeBinary(32), nullable=False),
        sa.Column("salt", sa.LargeBinary(16), nullable=False),
        sa.Column("tx_id", sa.BigInteger(), nullable=True),
        sa.Column(
            "recorded_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.func.current_timestamp(),
        ),
        sa.PrimaryKeyConstraint("stream_id", "seq", name=op.f("pk_events")),
        sa.UniqueConstraint("position", name=op.f("uq_events_position")),
        sa.CheckConstraint("seq >= 1", name=op.f("ck_events_seq_positive")),
    )
    op.create_index(
        op.f("ix_events_stream_id_command_id"), "events", ["stream_id", "command_id"], unique=True
    )
    op.create_index(op.f("ix_events_tx_id_position"), "events", ["tx_id", "position"])

    dialect = op.get_bind().dialect.name
    if dialect == "postgresql":
        # The xid8 of the writing transaction, as a bigint (xid8 has no direct cast).
        op.execute(
            "ALTER TABLE events ALTER COLUMN tx_id SET DEFAULT pg_current_xact_id()::text::bigint"
        )
        op.execute(_PG_GUARD)
        op.execute(
            "CREATE TRIGGER events_no_update_delete BEFORE UPDATE OR DELETE ON events"
            " FOR EACH STATEMENT EXECUTE FUNCTION bergen_events_append_only()"
        )
        op.execute(
            "CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events"
            " FOR EACH STATEMENT EXECUTE FUNCTION bergen_events_append_only()"
        )
        # ALWAYS: the guards fire in replica mode too (session_replication_role = replica).
        op.execute("ALTER TABLE events ENABLE ALWAYS TRIGGER events_no_update_delete")
        op.execute("ALTER TABLE events ENABLE ALWAYS TRIGGER events_no_truncate")
    elif dialect == "sqlite":
        for statement in _SQLITE_GUARDS:
            op.execute(statement)


def downgrade() -> None:
    # Dropping the table is the one way to remove events; it is deliberate and explicit.
    dialect = op.get_bind().dialect.name
    op.drop_table("events")
    if dialect == "postgresql":
        op.execute("DROP FUNCTION bergen_events_append_only()")
