"""An append's rows reach the table exactly as given, on both backends: the PostgreSQL store
sends them to libpq in binary form itself, so text, numbers, bytes and times are checked
here against what is read back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Backend, sqlite_tamper

from bergen.domain.errors import ConcurrencyConflict
from bergen.server.keys import LogKeys
from bergen.server.store import Append, EventStore, NewEvent, open_store

ODD = 'Ωmega ✓ "quoted" back\\slash tab\t 𝄞'


@pytest.fixture
def keyed(backend: Backend) -> Iterator[EventStore]:
    s = open_store(backend.url, log_keys=LogKeys.generate())
    yield s
    s.close()


def test_rows_read_back_as_appended(keyed: EventStore) -> None:
    stream = f"match-{ODD}"
    batches = [
        [NewEvent("TilePlayed", 1, {"seat": 1, "tile": "3-5", "note": ODD, "nul": "a\u0000b"})],
        [NewEvent(f"Type {ODD}"[:40], 7, {"n": i, "big": 2**53 - 1, "neg": -5}) for i in range(3)],
        [NewEvent("SeatTaken", 2, {"seat": 0, "list": [1, None, True, "x"]})],
    ]
    appended = []
    version = 0
    for i, batch in enumerate(batches):
        result = keyed.append(
            Append(stream, version, batch, command_id=f"cmd {ODD} {i}", actor=ODD, extra={"k": ODD})
        )
        version = result.last_seq
        appended.extend(result.events)
    read = keyed.read_stream(stream)
    assert [e.seq for e in read] == [1, 2, 3, 4, 5]
    assert len({e.position for e in read}) == 5
    assert [e.position for e in read] == sorted(e.position for e in read)
    for got, sent in zip(read, appended, strict=True):
        assert got.position == sent.position
        assert got.recorded_at == sent.recorded_at
        assert (got.type, got.schema_version, got.payload) == (
            sent.type,
            sent.schema_version,
            sent.payload,
        )
        assert (got.prev_hash, got.hash, got.salt, got.key_id, got.mac) == (
            sent.prev_hash,
            sent.hash,
            sent.salt,
            sent.key_id,
            sent.mac,
        )
        assert got.metadata == sent.metadata
        assert got.metadata.actor == ODD and got.metadata.extra["k"] == ODD
    assert keyed.verify_chain(stream).ok
    rows = keyed.read_rows(stream)  # every authenticator checked
    assert [r.payload for r in rows] == [e.payload for e in appended]
    assert [r.seq for r in keyed.read_rows(stream, 4)] == [4, 5]


def test_batches_of_every_size_on_one_connection(keyed: EventStore) -> None:
    version = 0
    for size in (1, 4, 1, 2, 4):
        events = [NewEvent("TilePlayed", 1, {"i": version + j}) for j in range(size)]
        result = keyed.append(Append("sizes", version, events))
        assert [e.seq for e in result.events] == list(range(version + 1, version + size + 1))
        version = result.last_seq
    assert [e.payload["i"] for e in keyed.read_stream("sizes")] == list(range(version))
    with pytest.raises(ConcurrencyConflict):
        keyed.append(Append("sizes", version - 1, [NewEvent("TilePlayed", 1, {})]))
    again = keyed.append(Append("sizes", version, [NewEvent("X", 1, {})], command_id="c"))
    replay = keyed.append(Append("sizes", version, [NewEvent("X", 1, {})], command_id="c"))
    assert replay.replayed and replay.events == again.events


def test_a_stream_id_is_never_cut_short(keyed: EventStore) -> None:
    """A NUL in a stream id is refused or kept: never the id cut at it."""
    try:
        keyed.append(Append("cut\u0000off", 0, [NewEvent("X", 1, {})]))
    except Exception:
        pass
    else:
        assert [e.stream_id for e in keyed.read_stream("cut\u0000off")] == ["cut\u0000off"]
    assert keyed.read_stream("cut") == ()


def test_a_sqlite_append_links_to_the_stored_head_not_to_the_one_remembered(
    sqlite_url: str, tmp_path: Path
) -> None:
    """A process remembers the heads it wrote; on SQLite it builds the rows before taking the
    write lock from that memory, and must still link to the head as stored under the lock.
    (On PostgreSQL the remembered hash is linked to: seq n's hash never changes there.)"""
    s = open_store(sqlite_url)
    try:
        s.append(Append("linked", 0, [NewEvent("X", 1, {"i": 1})]))
        changed = bytes(range(32))
        sqlite_tamper(tmp_path / "bergen.db")(
            "UPDATE events SET hash = %s WHERE stream_id = %s AND seq = 1", (changed, "linked")
        )
        s.append(Append("linked", 1, [NewEvent("X", 1, {"i": 2})]))
        second = s.read_stream("linked")[1]
        assert second.prev_hash == changed
    finally:
        s.close()
