"""The feed delivers the events this process wrote once, when written (`observe`), and its
follower passes over them when it reads them back; what another replica wrote it checks and
delivers."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bergen.server.app import Settings, build_application
from bergen.server.feed import EventFeed
from bergen.server.identity import Caller
from bergen.server.keys import LogKeys
from bergen.server.projections import FOLD_EVERY_S
from bergen.server.store import Append, EventStore, NewEvent, open_store


class CountingStore:
    """A store whose global order is read through, counting the reads."""

    def __init__(self, store: EventStore) -> None:
        self._store = store
        self.read = 0

    def read_all(self, after_position: int = 0, limit: int = 1000, types: Any = None) -> Any:
        batch = self._store.read_all(after_position, limit, types)
        self.read += len(batch)
        return batch

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


@pytest.fixture
def stores(sqlite_url: str) -> Iterator[tuple[EventStore, EventStore]]:
    keys = LogKeys.generate()
    a = open_store(sqlite_url, upgrade=True, log_keys=keys)
    b = open_store(sqlite_url, log_keys=keys)
    yield a, b
    a.close()
    b.close()


WAIT_S = 60.0
"""The deadline of a wait for the feed's threads to do something."""


def _until(condition: Callable[[], bool], what: str) -> None:
    """Wait until `condition()` holds. Raises AssertionError saying `what` did not happen."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"not within {WAIT_S:g} s: {what}"
        time.sleep(0.01)


def test_own_writes_are_delivered_once_and_another_replicas_are_delivered_too(
    stores: tuple[EventStore, EventStore],
) -> None:
    store_a, store_b = stores
    counting = CountingStore(store_a)
    feed = EventFeed(counting, poll_interval=0.02)  # type: ignore[arg-type]
    told: Counter[tuple[str, int]] = Counter()
    lock = threading.Lock()

    def listener(events: Any) -> None:
        with lock:
            told.update((e.stream_id, e.seq) for e in events)

    feed.listen(listener)
    app = build_application(counting, feed, Settings())  # type: ignore[arg-type]
    feed.start()
    try:
        mine = app.commands.create_match(Caller(), 2, False, "standard", {}, "mine")
        app.commands.join_match(mine.match_id, None, "p0", "")
        other = build_application(store_b, EventFeed(store_b), Settings())  # replica B
        theirs = other.commands.create_match(Caller(), 2, False, "standard", {}, "theirs")

        def delivered_theirs() -> bool:
            with lock:
                return told[(theirs.match_id, 1)] > 0

        # The follower delivers what it reads in order: once it has delivered the event of
        # replica B, written last, it is done with the two of this process before it.
        _until(delivered_theirs, "the event written by replica B delivered")
        assert counting.read >= 3
        with lock:
            assert told[(mine.match_id, 1)] == 1 and told[(mine.match_id, 2)] == 1, told
            assert told[(theirs.match_id, 1)] == 1, told
    finally:
        feed.stop()


class AlwaysAheadStore(CountingStore):
    """A store written to by this process as fast as its follower reads: before each of the
    follower's reads one more event is appended (and delivered as this process's own)."""

    def __init__(self, store: EventStore) -> None:
        super().__init__(store)
        self.feed: EventFeed | None = None
        self.follower_reads = 0
        self._version = 0

    def read_all(self, after_position: int = 0, limit: int = 1000, types: Any = None) -> Any:
        if threading.current_thread().name == "bergen-feed" and self.feed is not None:
            self.follower_reads += 1
            written = self._store.append(Append("busy", self._version, [NewEvent("Noted", 1, {})]))
            self._version = written.last_seq
            self.feed.observe(written.events)
        return super().read_all(after_position, limit, types)


def test_the_follower_reads_once_a_poll_while_this_process_keeps_writing(
    stores: tuple[EventStore, EventStore],
) -> None:
    # Every read finds a row written since the last: a follower that read again whenever it
    # found rows would chase this process's own appends a row at a time.
    busy = AlwaysAheadStore(stores[0])
    feed = EventFeed(busy, poll_interval=0.2)  # type: ignore[arg-type]
    busy.feed = feed
    feed.start()
    try:
        _until(lambda: busy.follower_reads >= 1, "the follower read")
        began, before = time.monotonic(), busy.follower_reads
        time.sleep(0.5)  # how many reads in a while: how long does not matter
        _until(lambda: busy.follower_reads > before, "the follower read again")
        reads = busy.follower_reads - before
        took = time.monotonic() - began
    finally:
        feed.stop()
    assert reads <= 2 * (took / 0.2) + 2, (reads, took)


def test_the_listing_folds_at_most_every_fold_interval_however_often_it_is_woken(
    stores: tuple[EventStore, EventStore],
) -> None:
    # Several replicas wake each other's followers many times a second, and each read used to
    # wake the listing into a fold: a transaction on the listing all replicas share.
    feed = EventFeed(stores[0], poll_interval=0.05)
    folds = 0
    catch_up = feed.listing.catch_up

    def counted(max_batches: int | None = None) -> int:
        nonlocal folds
        if threading.current_thread().name == "bergen-listing":
            folds += 1
        return catch_up(max_batches)

    feed.listing.catch_up = counted  # type: ignore[method-assign]
    began = time.monotonic()
    feed.start()
    try:
        # Woken many times a second, for a while (0.6 s at least) and until it has folded
        # twice.
        deadline = began + WAIT_S
        while time.monotonic() < began + 0.6 or folds < 2:
            assert time.monotonic() < deadline, f"folded {folds} times in {WAIT_S:g} s"
            feed.wake()  # as a NOTIFY from another replica does
            time.sleep(0.001)
        seen = folds
        took = time.monotonic() - began
    finally:
        feed.stop()
    assert 2 <= seen <= took / FOLD_EVERY_S + 2, (seen, took)


def test_an_own_write_the_follower_reads_back_before_its_writer_delivers_it_is_delivered_once(
    stores: tuple[EventStore, EventStore],
) -> None:
    # The commit is visible to the follower before the writing thread hands its events to
    # `observe`: whichever of the two comes first delivers the event, the other passes over it.
    store = stores[0]
    feed = EventFeed(store)
    told: Counter[tuple[str, int]] = Counter()
    feed.listen(lambda events: told.update((e.stream_id, e.seq) for e in events))
    written = store.append(Append("raced", 0, [NewEvent("Noted", 1, {}), NewEvent("Noted", 1, {})]))
    assert feed._catch_up() >= 2  # the follower first
    feed.observe(written.events)  # then the writer
    assert told[("raced", 1)] == 1 and told[("raced", 2)] == 1, told
    later = store.append(Append("raced", 2, [NewEvent("Noted", 1, {})]))
    feed.observe(later.events)  # the writer first, as a rule
    feed._catch_up()
    assert told[("raced", 3)] == 1, told
