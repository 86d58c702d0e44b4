"""The contract every event store meets, run against SQLite and PostgreSQL alike."""

from __future__ import annotations

import hashlib
import hmac
import json
import random
import signal
import threading
from typing import Any

import pytest
import rfc8785
from conftest import Backend
from helpers import read_all_until, start_worker

from bergen.api.chain import micros
from bergen.api.stored import GENESIS_HASH
from bergen.domain.errors import ConcurrencyConflict, NotFound
from bergen.domain.rules import RULES_VERSION
from bergen.server.keys import LogKeys
from bergen.server.store import Append, ChainFault, EventMetadata, EventStore, NewEvent, open_store
from bergen.server.store.batch import build_rows


def ev(n: int, **payload: Any) -> NewEvent:
    return NewEvent("TilePlayed", 1, {"n": n, **payload})


def fill(store: EventStore, stream: str, count: int) -> None:
    for i in range(count):
        store.append(Append(stream, i, [ev(i + 1)]))


# --- appending and reading ---------------------------------------------------------------


def test_a_new_stream_starts_at_seq_one_and_its_version_follows_the_appends(
    store: EventStore,
) -> None:
    assert store.stream_version("m") == 0
    first = store.append(Append("m", 0, [ev(1)]))
    second = store.append(Append("m", 1, [ev(2), ev(3)]))
    assert (first.first_seq, first.last_seq) == (1, 1)
    assert (second.first_seq, second.last_seq) == (2, 3)
    assert store.stream_version("m") == 3


def test_events_read_back_as_they_were_appended_with_their_metadata(store: EventStore) -> None:
    appended = store.append(
        Append(
            "m",
            0,
            [NewEvent("MatchCreated", 2, {"seats": ["a", "b"], "target": 15, "x": None})],
            command_id="cmd-1",
            actor="alice",
            rules_version="bergen-rules/7",
            extra={"token_hash": "ab12"},
        ),
    )
    (event,) = store.read_stream("m")
    assert event == appended.events[0]
    assert (event.stream_id, event.seq, event.type, event.schema_version) == (
        "m",
        1,
        "MatchCreated",
        2,
    )
    assert event.payload == {"seats": ["a", "b"], "target": 15, "x": None}
    assert (event.metadata.actor, event.metadata.command_id) == ("alice", "cmd-1")
    assert event.metadata.rules_version == "bergen-rules/7"
    assert event.metadata.extra == {"token_hash": "ab12"}
    assert event.recorded_at.tzinfo is not None


def test_the_rules_version_defaults_to_the_rule_book_in_force(store: EventStore) -> None:
    store.append(Append("m", 0, [ev(1)]))
    assert store.read_stream("m")[0].metadata.rules_version == RULES_VERSION


def test_a_stream_reads_in_seq_order_and_from_a_given_seq(store: EventStore) -> None:
    fill(store, "m", 5)
    assert [e.seq for e in store.read_stream("m")] == [1, 2, 3, 4, 5]
    assert [e.payload["n"] for e in store.read_stream("m", from_seq=4)] == [4, 5]
    assert store.read_stream("m", from_seq=6) == ()


def test_rows_for_folding_hold_what_the_full_read_holds(store: EventStore) -> None:
    store.append(
        Append(
            "m",
            0,
            [ev(1, text="ünïcode"), ev(2, nested={"a": [1, None, True]})],
            command_id="c1",
            actor="seat:0",
            extra={"k": "v"},
        ),
    )
    store.append(Append("m", 2, [ev(3)], command_id="c2"))
    store.append(Append("other", 0, [ev(9)]))
    for start in (1, 2, 4):
        full = store.read_stream("m", start)
        rows = store.read_rows("m", start)
        assert [
            (e.stream_id, e.seq, e.type, e.schema_version, e.payload, e.metadata) for e in full
        ] == [tuple(r) for r in rows]
    assert store.read_rows("m", 4) == ()
    assert store.read_rows("nobody") == ()


def test_the_keys_of_a_streams_rows_are_named_up_to_a_seq(backend: Backend) -> None:
    old, new = b"\x01" * 32, b"\x02" * 32
    first = open_store(backend.url, log_keys=LogKeys({"k1": old}, "k1"))
    try:
        first.append(Append("m", 0, [ev(1), ev(2)]))
    finally:
        first.close()
    rotated = open_store(backend.url, log_keys=LogKeys({"k1": old, "k2": new}, "k2"))
    try:
        rotated.append(Append("m", 2, [ev(3)]))
        rotated.append(Append("other", 0, [ev(9)]))
        assert rotated.key_ids("m", 2) == {"k1"}
        assert rotated.key_ids("m", 3) == {"k1", "k2"}
        assert rotated.key_ids("other", 5) == {"k2"}
        assert rotated.key_ids("nobody", 5) == frozenset()
    finally:
        rotated.close()
    plain = open_store(backend.url)
    try:
        plain.append(Append("bare", 0, [ev(1)]))  # written without a log key
        assert plain.key_ids("bare", 1) == frozenset()
    finally:
        plain.close()


def test_an_unknown_stream_reads_empty_at_version_zero(store: EventStore) -> None:
    assert store.read_stream("nobody") == ()
    assert store.stream_version("nobody") == 0


def test_streams_do_not_see_each_others_events(store: EventStore) -> None:
    fill(store, "a", 2)
    fill(store, "b", 3)
    assert {e.stream_id for e in store.read_stream("a")} == {"a"}
    assert store.stream_version("a") == 2
    assert store.stream_version("b") == 3


def test_a_batch_is_stored_with_consecutive_seqs_and_positions(store: EventStore) -> None:
    result = store.append(Append("m", 0, [ev(i) for i in range(10)]))
    assert [e.seq for e in result.events] == list(range(1, 11))
    positions = [e.position for e in result.events]
    assert positions == sorted(positions) and len(set(positions)) == 10
    assert store.read_stream("m") == result.events


def test_an_empty_batch_is_refused(store: EventStore) -> None:
    with pytest.raises(ValueError, match="nothing to append"):
        store.append(Append("m", 0, []))


@pytest.mark.parametrize(
    "payload",
    [{"tiles": {1, 2}}, {"big": 2**60}, {"nan": float("nan")}, {"bad": "\udcff"}],
    ids=["set", "int-beyond-json", "nan", "lone-surrogate"],
)
def test_a_payload_that_is_not_json_is_refused_and_nothing_is_written(
    store: EventStore, payload: dict[str, Any]
) -> None:
    store.append(Append("m", 0, [ev(1)]))
    with pytest.raises(ValueError, match="seq 3: payload is not JSON-able"):
        store.append(Append("m", 1, [ev(2), NewEvent("Bad", 1, payload)]))
    assert store.stream_version("m") == 1


# --- conflicts ---------------------------------------------------------------------------


def test_appending_at_a_stale_version_raises_a_conflict_naming_both_versions(
    store: EventStore,
) -> None:
    fill(store, "m", 3)
    with pytest.raises(ConcurrencyConflict, match="stream m: expected version 2, actual 3"):
        store.append(Append("m", 2, [ev(99), ev(100)]))
    assert [e.payload["n"] for e in store.read_stream("m")] == [1, 2, 3]


def test_appending_ahead_of_the_stream_raises_a_conflict(store: EventStore) -> None:
    fill(store, "m", 2)
    with pytest.raises(ConcurrencyConflict, match="expected version 5, actual 2"):
        store.append(Append("m", 5, [ev(6)]))
    with pytest.raises(ConcurrencyConflict, match="expected version 1, actual 0"):
        store.append(Append("fresh", 1, [ev(1)]))
    assert store.stream_version("m") == 2
    assert store.read_stream("fresh") == ()


def test_a_second_writer_that_read_the_same_version_loses(backend: Backend) -> None:
    # Two store instances, as two server processes: neither has seen the other's append.
    one, two = open_store(backend.url), open_store(backend.url)
    try:
        one.append(Append("m", 0, [ev(1)]))
        two.read_stream("m")
        one.append(Append("m", 1, [ev(2)]))
        with pytest.raises(ConcurrencyConflict, match="expected version 1, actual 2"):
            two.append(Append("m", 1, [ev(3)]))
        two.append(Append("m", 2, [ev(3)]))
        assert [e.payload["n"] for e in one.read_stream("m")] == [1, 2, 3]
        assert one.verify_chain("m").ok
    finally:
        one.close()
        two.close()


def test_threads_racing_on_one_stream_have_exactly_one_winner_each_round(
    store: EventStore,
) -> None:
    threads_n, rounds = 4, 12
    barrier = threading.Barrier(threads_n)
    wins: list[list[int]] = [[] for _ in range(rounds)]
    errors: list[BaseException] = []

    def racer(me: int) -> None:
        for r in range(rounds):
            barrier.wait()
            try:
                store.append(Append("race", r, [ev(r, writer=me)]))
                wins[r].append(me)
            except ConcurrencyConflict:
                pass
            except BaseException as e:
                errors.append(e)
            barrier.wait()

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert [len(w) for w in wins] == [1] * rounds
    events = store.read_stream("race")
    assert [e.seq for e in events] == list(range(1, rounds + 1))
    assert [e.payload["writer"] for e in events] == [w[0] for w in wins]
    assert store.verify_chain("race").ok


def test_processes_racing_on_one_stream_have_exactly_one_winner_each_round(
    backend: Backend, store: EventStore
) -> None:
    workers = [start_worker(backend.url, "race", "race") for _ in range(3)]
    rounds = 12
    try:
        for w in workers:
            assert w.stdout is not None and w.stdout.readline().strip() == "ready"
        winners = []
        for r in range(rounds):
            for w in workers:
                assert w.stdin is not None
                w.stdin.write(f"append {r}\n")
                w.stdin.flush()
            answers = [w.stdout.readline().strip() for w in workers if w.stdout is not None]
            assert sorted(answers) == ["lost", "lost", "won"], f"round {r}: {answers}"
            winners.append(workers[answers.index("won")].pid)
    finally:
        for w in workers:
            if w.stdin is not None:
                w.stdin.close()
            w.wait(timeout=30)
    events = store.read_stream("race")
    assert [e.seq for e in events] == list(range(1, rounds + 1))
    assert [e.payload["pid"] for e in events] == winners
    assert store.verify_chain("race").ok


# --- idempotency -------------------------------------------------------------------------


def test_the_same_command_appended_twice_returns_the_first_result_and_writes_nothing(
    store: EventStore,
) -> None:
    first = store.append(Append("m", 0, [ev(1), ev(2)], command_id="c-1", actor="bob"))
    again = store.append(Append("m", 0, [ev(1), ev(2)], command_id="c-1", actor="bob"))
    assert not first.replayed and again.replayed
    assert again.events == first.events
    assert store.stream_version("m") == 2


def test_a_command_replays_even_after_the_stream_moved_on(store: EventStore) -> None:
    first = store.append(Append("m", 0, [ev(1)], command_id="c-1"))
    store.append(Append("m", 1, [ev(2), ev(3)], command_id="c-2"))
    store.append(Append("m", 3, [ev(4)]))
    for expected in (0, 1, 4, 9):
        again = store.append(Append("m", expected, [ev(1)], command_id="c-1"))
        assert again.replayed and again.events == first.events
    middle = store.append(Append("m", 0, [ev(2)], command_id="c-2"))
    assert [e.seq for e in middle.events] == [2, 3]
    assert store.stream_version("m") == 4


def test_a_command_id_is_scoped_to_its_stream(store: EventStore) -> None:
    store.append(Append("a", 0, [ev(1)], command_id="same"))
    other = store.append(Append("b", 0, [ev(1)], command_id="same"))
    assert not other.replayed
    assert store.stream_version("b") == 1


def test_a_new_command_at_a_stale_version_still_conflicts(store: EventStore) -> None:
    store.append(Append("m", 0, [ev(1)], command_id="c-1"))
    with pytest.raises(ConcurrencyConflict):
        store.append(Append("m", 0, [ev(1)], command_id="c-2"))


# --- the global order --------------------------------------------------------------------


def test_read_all_returns_every_stream_in_append_order_and_resumes_after_a_position(
    store: EventStore,
) -> None:
    store.append(Append("a", 0, [ev(1)]))
    store.append(Append("b", 0, [ev(2), ev(3)]))
    store.append(Append("a", 1, [ev(4)]))
    got = read_all_until(store, 4)
    assert [(e.stream_id, e.payload["n"]) for e in got] == [("a", 1), ("b", 2), ("b", 3), ("a", 4)]
    rest = store.read_all(got[1].position)
    assert [e.payload["n"] for e in rest] == [3, 4]
    assert store.read_all(got[-1].position) == ()


def test_read_all_honours_its_limit(store: EventStore) -> None:
    store.append(Append("a", 0, [ev(i) for i in range(7)]))
    got = read_all_until(store, 7)
    assert len(got) == 7
    page = store.read_all(0, limit=3)
    assert [e.seq for e in page] == [1, 2, 3]
    assert [e.seq for e in store.read_all(page[-1].position, limit=3)] == [4, 5, 6]


def test_read_all_of_some_types_passes_over_the_others_but_the_last(store: EventStore) -> None:
    """Read by type, the order gives the events of those types, and its last event whatever
    its type: how far the read went, for a reader to resume from."""
    store.append(Append("a", 0, [NewEvent("SeatTaken", 1, {"n": 1}), ev(2)]))
    store.append(Append("b", 0, [ev(3), NewEvent("MatchEnded", 1, {"n": 4}), ev(5), ev(6)]))
    every = read_all_until(store, 6)
    types = {"SeatTaken", "MatchEnded"}
    got = store.read_all(0, 1000, types)
    assert [e.payload["n"] for e in got] == [1, 4, 6]
    assert got[-1] == every[-1]
    assert [e.payload["n"] for e in store.read_all(0, 2, types)] == [1, 4]
    assert [e.payload["n"] for e in store.read_all(every[0].position, 1000, types)] == [4, 6]
    assert store.read_all(every[-1].position, 1000, types) == ()


def test_read_all_after_a_position_that_names_no_event_raises_not_found(
    store: EventStore,
) -> None:
    with pytest.raises(NotFound, match="position 12345"):
        store.read_all(12345)


def test_a_packed_read_gives_read_alls_rows_with_the_bytes_their_authenticators_cover(
    backend: Backend,
) -> None:
    keys = LogKeys.generate()
    store = open_store(backend.url, log_keys=keys)
    try:
        payload = {"名前": "Ærø 🁣", "controls": "nul\u0000 tab\t", "n": 2}
        store.append(Append("a-é", 0, [NewEvent("SeatTaken", 1, {"n": 1}), ev(2)], actor="Ł"))
        store.append(Append("b", 0, [ev(3), NewEvent("MatchEnded", 1, payload), ev(5)]))
        every = read_all_until(store, 5)
        types = {"SeatTaken", "MatchEnded"}
        for after, limit in ((0, 1000), (0, 1), (every[0].position, 1000), (every[-1].position, 9)):
            rows = store.read_all(after, limit, types)
            packed = store.read_all_packed(after, limit, types)
            assert [r.position for r in packed] == [e.position for e in rows]
            for e, r in zip(rows, packed, strict=True):
                assert (r.stream_id, r.seq, r.type, r.schema_version) == (
                    e.stream_id, e.seq, e.type, e.schema_version,
                )  # fmt: skip
                assert json.loads(r.payload) == e.payload
                assert (r.recorded_us, r.prev_hash, r.hash) == (
                    micros(e.recorded_at), e.prev_hash, e.hash,
                )  # fmt: skip
                assert (r.key_id, r.mac) == (e.key_id, e.mac) and e.mac is not None
                key = keys.key(r.key_id)
                assert key is not None
                assert hmac.digest(key, r.message, "sha256") == e.mac
        with pytest.raises(NotFound, match="position 12345"):
            store.read_all_packed(12345, 10, types)
    finally:
        store.close()


def test_list_streams_pages_through_stream_ids_with_their_versions(store: EventStore) -> None:
    for i, name in enumerate(["m-c", "m-a", "m-B", "m-b", "m-é"]):
        fill(store, name, i + 1)
    first = store.list_streams(limit=2)
    assert [(s.stream_id, s.version) for s in first] == [("m-B", 3), ("m-a", 2)]
    rest = store.list_streams(after=first[-1].stream_id, limit=10)
    assert [(s.stream_id, s.version) for s in rest] == [("m-b", 4), ("m-c", 1), ("m-é", 5)]
    assert store.list_streams(after="m-é") == ()


# --- payloads ----------------------------------------------------------------------------


def test_a_one_megabyte_payload_round_trips(store: EventStore) -> None:
    blob = random.Random(7).randbytes(1 << 19).hex()  # a megabyte of hex digits
    assert len(blob) == 1 << 20
    payload = {"blob": blob, "tiles": [[i, 6 - i] for i in range(7)]}
    store.append(Append("m", 0, [NewEvent("Big", 1, payload), ev(2)]))
    big, small = store.read_stream("m")
    assert big.payload == payload and small.payload["n"] == 2
    assert store.verify_chain("m").ok


def test_unicode_in_payloads_keys_types_actors_and_stream_ids_round_trips(
    store: EventStore,
) -> None:
    payload = {
        "名前": "Ærøskøbing 🁣🂓",
        "rtl": "שלום",
        "combining": "e\u0301",
        "controls": "nul\u0000 tab\t nl\n \u001f del\u007f",
        "line_sep": "\u2028\u2029",
        "quote": '"\\',
        "nested": [{"ß": True, "ø": None}, []],
    }
    stream = "match-ünï-🁣"
    store.append(
        Append(stream, 0, [NewEvent("Spielzug✓", 1, payload)], actor="Łukasz", command_id="ç")
    )
    (event,) = store.read_stream(stream)
    assert event.payload == payload
    assert (event.type, event.metadata.actor, event.metadata.command_id) == (
        "Spielzug✓",
        "Łukasz",
        "ç",
    )
    assert store.verify_chain(stream).ok


# --- the hash chain ----------------------------------------------------------------------


def test_hashes_chain_over_the_rfc8785_encoding_of_each_event_and_a_salt(
    store: EventStore,
) -> None:
    result = store.append(
        Append(
            "m", 0, [ev(1, z="ü", a=[1, None]), ev(2)], actor="x", command_id="c", extra={"k": "v"}
        )
    )
    prev = GENESIS_HASH
    for e in result.events:
        content: dict[str, Any] = {
            "stream_id": e.stream_id,
            "seq": e.seq,
            "type": e.type,
            "schema_version": e.schema_version,
            "payload": dict(e.payload),
            "metadata": {
                "actor": "x",
                "command_id": "c",
                "extra": {"k": "v"},
                "rules_version": RULES_VERSION,
            },
        }
        expected = hashlib.sha256(prev + e.salt + rfc8785.dumps(content)).digest()
        assert (e.prev_hash, e.hash, len(e.salt)) == (prev, expected, 16)
        prev = e.hash
    assert result.events[0].salt != result.events[1].salt


def test_an_untouched_stream_verifies_and_reports_its_head(store: EventStore) -> None:
    fill(store, "m", 4)
    report = store.verify_chain("m")
    assert report.ok and report.events == 4
    assert report.head_hash == store.read_stream("m")[-1].hash


def _tampered(backend: Backend, store: EventStore, sql: str, params: Any = ()) -> Any:
    for i in range(5):
        store.append(Append("m", i, [ev(i + 1)]))
    store.append(Append("other", 0, [ev(1)]))
    backend.tamper(sql, params)
    assert store.verify_chain("other").ok
    return store.verify_chain("m")


def test_a_changed_payload_is_reported_as_changed_content(
    backend: Backend, store: EventStore
) -> None:
    report = _tampered(
        backend,
        store,
        "UPDATE events SET payload = %s WHERE stream_id = 'm' AND seq = 3",
        ('{"n":33}',),
    )
    assert (report.bad_seq, report.fault) == (3, ChainFault.CHANGED)


def test_a_changed_actor_is_reported_as_changed_content(
    backend: Backend, store: EventStore
) -> None:
    report = _tampered(
        backend,
        store,
        "UPDATE events SET metadata = %s WHERE stream_id = 'm' AND seq = 2",
        (
            f'{{"actor":"mallory","command_id":null,"extra":{{}},"rules_version":"{RULES_VERSION}"}}',
        ),
    )
    assert (report.bad_seq, report.fault) == (2, ChainFault.CHANGED)


def test_a_removed_event_is_reported_as_a_missing_seq(backend: Backend, store: EventStore) -> None:
    report = _tampered(backend, store, "DELETE FROM events WHERE stream_id = 'm' AND seq = 2")
    assert (report.bad_seq, report.fault) == (3, ChainFault.MISSING)
    assert "seq 2 is missing" in report.detail


def test_swapped_events_are_reported_as_reordered(backend: Backend, store: EventStore) -> None:
    _tampered(
        backend, store, "UPDATE events SET seq = seq + 1000 WHERE stream_id = 'm' AND seq IN (2, 4)"
    )
    backend.tamper(
        "UPDATE events SET seq = CASE seq WHEN 1002 THEN 4 ELSE 2 END"
        " WHERE stream_id = 'm' AND seq > 1000"
    )
    report = store.verify_chain("m")
    assert (report.bad_seq, report.fault) == (2, ChainFault.REORDERED)
    assert "written as seq 4" in report.detail


def _forge(backend: Backend, store: EventStore, seq: int, payload: dict[str, Any]) -> None:
    """Insert a self-consistent event at `seq`, chained to the stored seq - 1."""
    prev = store.read_stream("m")[seq - 2].hash
    (row,) = build_rows(
        "m",
        seq - 1,
        [NewEvent("Forged", 1, payload)],
        EventMetadata(None, None, RULES_VERSION),
        prev,
    )
    overriding = "OVERRIDING SYSTEM VALUE" if backend.name == "postgresql" else ""
    backend.tamper(
        "INSERT INTO events (stream_id, seq, position, type, schema_version, payload, metadata,"
        f" prev_hash, hash, salt) {overriding} VALUES ('m', %s, %s, 'Forged', 1, %s, %s, %s, %s,"
        " %s)",
        (seq, 5000 + seq, row.payload_json, row.metadata_json, row.prev_hash, row.hash, row.salt),
    )


def test_an_event_slipped_in_by_renumbering_is_reported_as_inserted(
    backend: Backend, store: EventStore
) -> None:
    _tampered(
        backend, store, "UPDATE events SET seq = seq + 1001 WHERE stream_id = 'm' AND seq >= 3"
    )
    backend.tamper("UPDATE events SET seq = seq - 1000 WHERE stream_id = 'm' AND seq > 1000")
    _forge(backend, store, 3, {"n": 99})
    report = store.verify_chain("m")
    assert (report.bad_seq, report.fault) == (4, ChainFault.INSERTED)
    assert "written as seq 3" in report.detail


def test_an_event_replaced_by_a_forged_one_is_reported_as_a_wrong_prev_link_after_it(
    backend: Backend, store: EventStore
) -> None:
    _tampered(backend, store, "DELETE FROM events WHERE stream_id = 'm' AND seq = 3")
    _forge(backend, store, 3, {"n": 33})
    report = store.verify_chain("m")
    assert (report.bad_seq, report.fault) == (4, ChainFault.PREV_LINK)


def test_a_rewritten_prev_hash_is_reported_as_changed_content(
    backend: Backend, store: EventStore
) -> None:
    report = _tampered(
        backend,
        store,
        "UPDATE events SET prev_hash = %s WHERE stream_id = 'm' AND seq = 4",
        (bytes(32),),
    )
    assert (report.bad_seq, report.fault) == (4, ChainFault.CHANGED)


# --- crashes -----------------------------------------------------------------------------


def test_a_store_killed_mid_append_keeps_every_acknowledged_event_and_no_half_batch(
    backend: Backend,
) -> None:
    rng = random.Random(2024)
    acked: dict[int, str] = {}
    for _ in range(4):
        worker = start_worker(backend.url, "churn", "crash")
        assert worker.stdout is not None
        for _ in range(rng.randint(1, 25)):
            _, acked_seq, command_id = worker.stdout.readline().split()
            acked[int(acked_seq)] = command_id
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=30)
        assert worker.returncode == -signal.SIGKILL
    store = open_store(backend.url)
    try:
        events = store.read_stream("crash")
        by_seq = {e.seq: e for e in events}
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert len(events) % 3 == 0, "a batch of 3 was half written"
        for first in range(1, len(events), 3):
            batch = [by_seq[first + i].metadata.command_id for i in range(3)]
            assert len(set(batch)) == 1 and batch[0] is not None
        for seq, command_id in acked.items():
            assert by_seq[seq].metadata.command_id == command_id
        assert store.verify_chain("crash").ok
        store.append(Append("crash", len(events), [ev(0)]))
    finally:
        store.close()
