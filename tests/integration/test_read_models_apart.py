"""The read models keep up apart: none waits for another's pass over the log, and pages do
not wait for the listing's audit nor for its first pass.

On SQLite and PostgreSQL (the `backend` fixture), against real stores; the plans of the
audit's search and the ratings' read on PostgreSQL.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from conftest import Backend
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from test_match_list import fold_all, real_match, write

from bergen.api.signing import RecordSigner
from bergen.server.feed import EventFeed
from bergen.server.projections import MATCH_LIST, PAGE_LOCK_WAIT_S, MatchListProjection
from bergen.server.store import EventStore, StoredEvent, open_store
from bergen.server.store.postgres import typed_reads
from bergen.server.store.statements import POSTGRES, Statements
from bergen.server.tlog import CHECKPOINT_FILE, TransparencyLog

WAIT_S = 60.0
"""The deadline of a wait for another thread to do something."""


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"not within {WAIT_S:g} s: {what}"
        time.sleep(0.01)


def _in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """`call()` started in a thread of its own; its result lands in the list."""
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(call()), daemon=True)
    t.start()
    return t, out


def _matches(store: EventStore, n: int) -> StoredEvent:
    """`n` matches written (ended, playing or seating); the last event written."""
    last = None
    for i in range(n):
        last = write(store, f"match-{i}", real_match(i))[-1]
    assert last is not None
    return last


def test_pages_are_served_while_the_audit_looks_for_deleted_rows(
    store: EventStore, backend: Backend
) -> None:
    projection = MatchListProjection(store)
    fold_all(projection, store, _matches(store, 4))
    backend.tamper("DELETE FROM match_list_players WHERE match_id = 'match-2'")
    backend.tamper("DELETE FROM match_list WHERE match_id = 'match-2'")
    searching, go_on = threading.Event(), threading.Event()
    search = projection._list.missing

    def held_search(folded: int) -> list[str]:
        found = search(folded)
        searching.set()
        assert go_on.wait(WAIT_S)
        return found

    projection._list.missing = held_search  # type: ignore[method-assign]
    audit, rebuilt = _in_thread(projection.audit)
    assert searching.wait(WAIT_S)
    page, served = _in_thread(lambda: projection.page(None, "", 100, ""))
    page.join(WAIT_S)
    go_on.set()
    audit.join(WAIT_S)
    assert served, "a page waited for the audit's search"
    assert {s.match_id for s in served[0][0]} == {"match-0", "match-1", "match-3"}
    assert rebuilt == [1]
    assert "match-2" in {s.match_id for s in projection.page(None, "", 100, "")[0]}


def test_a_match_listed_again_during_the_audit_s_search_is_not_rebuilt_twice(
    store: EventStore, backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    projection = MatchListProjection(store)
    fold_all(projection, store, _matches(store, 3))
    backend.tamper("DELETE FROM match_list_players WHERE match_id = 'match-1'")
    backend.tamper("DELETE FROM match_list WHERE match_id = 'match-1'")
    search = projection._list.missing
    replica = open_store(backend.url)
    other = MatchListProjection(replica)
    other.catch_up()

    def search_then_repaired_elsewhere(folded: int) -> list[str]:
        found = search(folded)
        assert other.audit() == 1  # another replica's audit, between the search and the lock
        return found

    projection._list.missing = search_then_repaired_elsewhere  # type: ignore[method-assign]
    try:
        assert projection.audit() == 0
    finally:
        replica.close()
    assert sum("READ MODEL TAMPERED" in r.message for r in caplog.records) == 1


def test_a_page_is_answered_from_what_is_folded_while_the_listing_s_pass_holds_it(
    store: EventStore,
) -> None:
    projection = MatchListProjection(store)
    fold_all(projection, store, _matches(store, 2))
    held, release = threading.Event(), threading.Event()

    def long_pass() -> None:
        with projection._lock:  # as the follower's first pass over a long log holds it
            held.set()
            release.wait(WAIT_S)

    passing, _ = _in_thread(long_pass)
    assert held.wait(WAIT_S)
    began = time.monotonic()
    page, served = _in_thread(lambda: projection.page(None, "", 100, ""))
    page.join(WAIT_S)
    release.set()
    passing.join(WAIT_S)
    assert served, "a page waited for the listing's pass"
    assert time.monotonic() - began >= PAGE_LOCK_WAIT_S
    assert {s.match_id for s in served[0][0]} == {"match-0", "match-1"}


def test_a_pass_over_every_batch_stops_between_two_once_the_server_stops(
    store: EventStore,
) -> None:
    last = _matches(store, 3)
    projection = MatchListProjection(store, batch=5)
    projection.stopping = stopping = threading.Event()
    fold = projection._fold
    folds = 0

    def fold_then_stop(batch: Any, upto: int) -> int:
        nonlocal folds
        folds += 1
        stopping.set()
        return fold(batch, upto)

    projection._fold = fold_then_stop  # type: ignore[method-assign]
    assert projection.catch_up() == 5
    assert folds == 1
    assert store.match_list().position(MATCH_LIST) != last.position
    assert projection.catch_up(2) == 10  # a page's catch-up still folds
    assert folds == 3


@pytest.fixture
def tlog_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "keys"
    folder.mkdir()
    return folder


def test_each_read_model_catches_up_in_a_thread_of_its_own(
    store: EventStore, tlog_dir: Path
) -> None:
    last = _matches(store, 3)
    tlog = TransparencyLog(
        store, RecordSigner(Ed25519PrivateKey.generate()), tlog_dir / CHECKPOINT_FILE
    )
    tlog.open()
    feed = EventFeed(store, poll_interval=0.05, tlog=tlog)
    listing_held, release = threading.Event(), threading.Event()
    catch_up = feed.listing.catch_up

    def long_pass(max_batches: int | None = None) -> int:
        if threading.current_thread().name == "bergen-listing":
            listing_held.set()
            release.wait(WAIT_S)  # a first start's pass over a long log
        return catch_up(max_batches)

    feed.listing.catch_up = long_pass  # type: ignore[method-assign]
    feed.start()
    try:
        assert listing_held.wait(WAIT_S)
        ratings = store.ratings()
        _until(lambda: ratings.position("ratings") == last.position, "the ratings caught up")
        _until(lambda: tlog._position == last.position, "the transparency log caught up")
        assert store.match_list().position(MATCH_LIST) == 0  # still in its pass
    finally:
        release.set()
        feed.ask_to_stop()
        assert feed.wait_stopped(time.monotonic() + WAIT_S), "a read model's thread is left"
    names = {t.name for t in feed._threads}
    assert {"bergen-listing", "bergen-ratings", "bergen-tlog"} <= names


def test_a_read_model_s_failure_is_logged_and_holds_up_no_other(
    store: EventStore, caplog: pytest.LogCaptureFixture
) -> None:
    last = _matches(store, 2)
    feed = EventFeed(store, poll_interval=0.05)

    def failing(max_batches: int | None = None) -> int:
        raise RuntimeError("the listing's fold failed")

    feed.listing.catch_up = failing  # type: ignore[method-assign]
    feed.start()
    try:
        ratings = store.ratings()
        _until(lambda: ratings.position("ratings") == last.position, "the ratings caught up")
        _until(
            lambda: any("match list: folding failed" in r.message for r in caplog.records),
            "the listing's failure logged",
        )
    finally:
        feed.stop()


# --- the plans on PostgreSQL -----------------------------------------------------------------


@pytest.fixture
def pg_store(pg_database: str) -> Iterator[tuple[EventStore, str]]:
    s = open_store(pg_database)
    yield s, pg_database
    s.close()


def _plan(url: str, sql: str, params: tuple[Any, ...]) -> str:
    """The plan of `sql`, with sequential scans made as dear as they get (the test's tables
    are small enough for one to be cheapest: a log's is not)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET enable_seqscan = off")
        conn.execute("ANALYZE events")
        rows = conn.execute(f"EXPLAIN {sql}", params).fetchall()
    return "\n".join(r[0] for r in rows)


@pytest.mark.postgres
def test_on_postgresql_the_audit_reads_the_index_of_openings_not_the_log(
    pg_store: tuple[EventStore, str],
) -> None:
    store, url = pg_store
    last = _matches(store, 4)
    plan = _plan(url, Statements(POSTGRES).missing, (last.position,))
    assert "ix_events_match_opened" in plan, plan
    assert "Seq Scan on events" not in plan, plan


@pytest.mark.postgres
def test_on_postgresql_the_ratings_read_the_index_of_ends_not_the_log(
    pg_store: tuple[EventStore, str],
) -> None:
    store, url = pg_store
    first = _matches(store, 4)
    start, after = typed_reads(frozenset({"MatchEnded"}))
    for sql, params in ((start, (1000, 1000)), (after, (first.position, 1000, 1000))):
        plan = _plan(url, sql, params)
        assert "ix_events_match_ended" in plan, plan
        assert "Seq Scan on events" not in plan, plan


def test_the_ends_read_alone_are_each_match_s_end_and_then_the_last_row(
    store: EventStore,
) -> None:
    last = _matches(store, 8)
    # On PostgreSQL the global order waits out every older transaction of the cluster.
    deadline = time.monotonic() + WAIT_S
    while last.position not in {e.position for e in store.read_all(0, 2000)}:
        assert time.monotonic() < deadline, "the last event never joined the global order"
        time.sleep(0.05)
    ends = [e for e in store.read_all(0, 1000) if e.type == "MatchEnded"]
    assert ends, "no match of the sample ended"
    read = store.read_all(0, 1000, {"MatchEnded"})
    assert [e.position for e in read] == [e.position for e in ends] + (
        [] if ends[-1].position == last.position else [last.position]
    )
    assert store.read_all(0, 1, {"MatchEnded"}) == read[:1]
    after = store.read_all(ends[0].position, 1000, {"MatchEnded"})
    assert after == read[1:]
    assert store.read_all(last.position, 1000, {"MatchEnded"}) == ()
