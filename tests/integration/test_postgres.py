"""What only PostgreSQL promises: append-only guards, a least-privilege role, and a global
order that a late commit cannot slip behind."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from helpers import read_all_until

from bergen.api.stored import GENESIS_HASH
from bergen.domain.errors import ConcurrencyConflict
from bergen.server.store import Append, EventMetadata, NewEvent, open_store
from bergen.server.store.batch import build_rows
from bergen.server.store.postgres import PostgresEventStore

pytestmark = pytest.mark.postgres

GUARDED = {
    "update": "UPDATE events SET type = 'Changed'",
    "delete": "DELETE FROM events WHERE seq = 1",
    "truncate": "TRUNCATE events",
}


@pytest.fixture
def stocked(pg_database: str) -> str:
    store = open_store(pg_database)
    store.append(Append("m", 0, [NewEvent("A", 1, {"n": 1}), NewEvent("B", 1, {"n": 2})]))
    store.close()
    return pg_database


@pytest.mark.parametrize("role", ["origin", "replica"])
@pytest.mark.parametrize("statement", GUARDED)
def test_changing_or_removing_stored_events_is_rejected_even_by_a_superuser(
    stocked: str, statement: str, role: str
) -> None:
    with psycopg.connect(stocked, autocommit=True) as conn:
        conn.execute(f"SET session_replication_role = {role}")
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
            conn.execute(GUARDED[statement])
        row = conn.execute("SELECT count(*) FROM events WHERE type IN ('A', 'B')").fetchone()
    assert row == (2,)


@pytest.fixture
def app_role(stocked: str) -> Iterator[str]:
    """A login role holding only what the README grants the server, and its URL."""
    role = f"bergen_app_{uuid.uuid4().hex[:10]}"
    db = urlsplit(stocked).path.lstrip("/")
    with psycopg.connect(stocked, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN")
        conn.execute(f"GRANT CONNECT ON DATABASE {db} TO {role}")
        conn.execute(f"GRANT USAGE ON SCHEMA public TO {role}")
        conn.execute(f"GRANT SELECT, INSERT ON events TO {role}")
        conn.execute(f"GRANT USAGE ON SEQUENCE events_position_seq TO {role}")
        conn.execute(f"GRANT SELECT ON alembic_version TO {role}")
    parts = urlsplit(stocked)
    host = parts.netloc.rpartition("@")[2]
    yield urlunsplit(parts._replace(netloc=f"{role}@{host}"))
    with psycopg.connect(stocked, autocommit=True) as conn:
        conn.execute(f"DROP OWNED BY {role}")
    with psycopg.connect(stocked, autocommit=True) as conn:
        conn.execute(f"REVOKE ALL ON DATABASE {db} FROM {role}")
        conn.execute(f"DROP ROLE {role}")


def test_a_role_with_only_insert_and_select_can_append_and_read_but_not_change(
    app_role: str,
) -> None:
    store = open_store(app_role)
    try:
        store.append(Append("m", 2, [NewEvent("C", 1, {"n": 3})], command_id="c"))
        assert store.append(Append("m", 2, [NewEvent("C", 1, {"n": 3})], command_id="c")).replayed
        with pytest.raises(ConcurrencyConflict):
            store.append(Append("m", 2, [NewEvent("D", 1, {})]))
        assert [e.payload["n"] for e in store.read_stream("m")] == [1, 2, 3]
        assert len(read_all_until(store, 3)) == 3
        assert store.verify_chain("m").ok
    finally:
        store.close()
    with psycopg.connect(app_role, autocommit=True) as conn:
        for statement in ("UPDATE events SET type = 'X'", "DELETE FROM events", "TRUNCATE events"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
                conn.execute(statement)


def _insert_uncommitted(conn: psycopg.Connection[tuple[Any, ...]], stream: str) -> int:
    """Begin a transaction that writes one event of `stream` and stays open; its position."""
    (row,) = build_rows(
        stream,
        0,
        [NewEvent("Late", 1, {"s": stream})],
        EventMetadata(None, None, "r"),
        GENESIS_HASH,
    )
    result = conn.execute(
        "INSERT INTO events (stream_id, seq, type, schema_version, payload, metadata,"
        " prev_hash, hash, salt) VALUES (%s, 1, 'Late', 1, %s, %s, %s, %s, %s)"
        " RETURNING position",
        (stream, row.payload_json, row.metadata_json, row.prev_hash, row.hash, row.salt),
    ).fetchone()
    assert result is not None
    return int(result[0])


@pytest.mark.parametrize("xid_order", ["xid-follows-position", "xid-against-position"])
def test_a_reader_of_the_global_order_never_skips_an_event_that_commits_late(
    pg_database: str, xid_order: str
) -> None:
    store = PostgresEventStore(pg_database)
    early = psycopg.connect(pg_database)  # takes the lower position, commits last
    late = psycopg.connect(pg_database)
    try:
        if xid_order == "xid-against-position":
            late.execute("SELECT pg_current_xact_id()")  # the later position gets the older xid
        early_position = _insert_uncommitted(early, "early")
        late_position = _insert_uncommitted(late, "late")
        assert early_position < late_position
        late.commit()

        seen = list(store.read_all())
        if xid_order == "xid-follows-position":
            assert seen == [], "an event was shown while an older writer is still open"
        early.commit()
        cursor = seen[-1].position if seen else 0
        seen += read_all_until(store, 2 - len(seen), after=cursor)
        assert sorted(e.stream_id for e in seen) == ["early", "late"]
        assert len(seen) == 2
    finally:
        early.close()
        late.close()
        store.close()


def test_a_transaction_running_in_another_database_holds_back_nothing(
    pg_database: str, pg_admin_url: str
) -> None:
    """A long transaction of another database of the cluster (another application's, a bulk
    load) cannot write these events, so the global order does not wait for it; one of this
    database still holds back what comes after it."""
    store = PostgresEventStore(pg_database)
    elsewhere = psycopg.connect(pg_admin_url)  # another database of the same cluster
    here = psycopg.connect(pg_database)
    try:
        elsewhere.execute("SELECT pg_current_xact_id()")  # older than every write below
        store.append(Append("a", 0, [NewEvent("A", 1, {"n": 1})]))
        # Shown while the other database's transaction is still open (it stays open throughout).
        (a,) = read_all_until(store, 1)
        assert a.stream_id == "a"
        assert store.head_position() == a.position

        here.execute("SELECT pg_current_xact_id()")  # this database's: it may still write
        store.append(Append("b", 0, [NewEvent("B", 1, {"n": 2})]))
        assert [e.stream_id for e in store.read_all()] == ["a"]
        here.rollback()
        assert [e.stream_id for e in read_all_until(store, 2)] == ["a", "b"]
    finally:
        elsewhere.close()
        here.close()
        store.close()
