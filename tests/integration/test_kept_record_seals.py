"""The authenticators of kept records (`match_records`): packed columns, and rows sealed by an
earlier version over their columns as JSON still served; on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from conftest import Backend

from bergen.server.keys import LogKeys
from bergen.server.store import Append, EventStore, NewEvent, open_store
from bergen.server.store.records import RECORDS_TABLE, Kept, record_message
from bergen.server.store.sealed import Seals

KEY = "ab" * 32
TEXT = '{"match_id":"m","note":"quotes \\" and ünïcode"}'


@pytest.fixture
def keys() -> LogKeys:
    return LogKeys.generate()


@pytest.fixture
def keyed(backend: Backend, keys: LogKeys) -> Iterator[EventStore]:
    store = open_store(backend.url, log_keys=keys)
    store.append(Append("m", 0, [NewEvent("TilePlayed", 1, {"n": n}) for n in range(3)]))
    yield store
    store.close()


def kept(store: EventStore) -> Kept:
    head = store.read_stream("m")[-1]
    return Kept("m", head.seq, head.hash, TEXT, ",".join(sorted(store.key_ids("m", head.seq))))


def reseal(backend: Backend, mac: bytes) -> None:
    backend.tamper("UPDATE match_records SET mac = %s WHERE match_id = 'm'", (mac,))


def test_a_kept_record_is_served_under_its_packed_seal_and_only_unchanged(
    backend: Backend, keyed: EventStore, keys: LogKeys
) -> None:
    record = kept(keyed)
    keyed.records().keep([record], KEY)
    assert keyed.records().load(["m"], KEY) == {"m": TEXT}
    values = ("m", KEY, record.events, record.head.hex(), TEXT, record.log_keys)
    seals = Seals(keys)
    changed = (*values[:4], TEXT.replace("m", "n"), *values[5:])
    reseal(backend, seals.seal_message(record_message(changed))[1])  # sealed over another text
    assert keyed.records().load(["m"], KEY) == {}
    assert keyed.records().repairs[RECORDS_TABLE] == 1


def test_a_record_kept_by_an_earlier_version_is_still_served(
    backend: Backend, keyed: EventStore, keys: LogKeys
) -> None:
    record = kept(keyed)
    keyed.records().keep([record], KEY)
    values = ("m", KEY, record.events, record.head.hex(), TEXT, record.log_keys)
    reseal(backend, Seals(keys).seal(RECORDS_TABLE, values)[1])  # as JSON, as before
    assert keyed.records().load(["m"], KEY) == {"m": TEXT}
    # Neither layout seals another text: a packed message is never a JSON array.
    assert not record_message(values).startswith(b"[")
    reseal(backend, Seals(keys).seal(RECORDS_TABLE, (*values[:4], "{}", values[5]))[1])
    assert keyed.records().load(["m"], KEY) == {}
