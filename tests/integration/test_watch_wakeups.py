"""The event feed woken by another replica's notification before that replica's rows are in
the commit-safe order (an older transaction of any client still runs) reads again within
milliseconds, not on its next poll: a watcher is not held up by a poll interval."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bergen.server.app import Settings, build_application
from bergen.server.feed import EventFeed
from bergen.server.identity import Caller
from bergen.server.store import EventStore, open_store


class HidingStore:
    """A store whose global order shows nothing new while `hiding` is set, as PostgreSQL's
    does while a transaction older than the new rows' is still running."""

    def __init__(self, store: EventStore) -> None:
        self._store = store
        self.hiding = threading.Event()
        self.reads_while_hidden = 0

    def read_all(self, after_position: int = 0, limit: int = 1000, types: Any = None) -> Any:
        if self.hiding.is_set():
            self.reads_while_hidden += 1
            return ()
        return self._store.read_all(after_position, limit, types)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


@pytest.fixture
def stores(sqlite_url: str) -> Iterator[tuple[EventStore, EventStore]]:
    # SQLite: what the rows' visibility is, is up to HidingStore alone (on a shared PostgreSQL
    # any other client's transaction may hold it back longer).
    a, b = open_store(sqlite_url), open_store(sqlite_url)
    yield a, b
    a.close()
    b.close()


def test_a_wake_up_that_finds_nothing_yet_is_read_again_soon_not_on_the_next_poll(
    stores: tuple[EventStore, EventStore],
) -> None:
    store_a, store_b = stores
    writer = build_application(store_a, EventFeed(store_a), Settings())  # replica A
    created = writer.commands.create_match(Caller(), 2, False, "standard", {}, "wake")

    hiding = HidingStore(store_b)
    woken: list[Callable[[], None]] = []

    def listen(wake: Callable[[], None], stop: threading.Event) -> None:
        woken.append(wake)
        stop.wait()

    feed = EventFeed(hiding, poll_interval=30.0, listen=listen)  # type: ignore[arg-type]
    feed.start()
    try:
        sub = feed.subscribe(created.match_id)
        hiding.hiding.set()
        writer.commands.join_match(created.match_id, None, "p0", "")  # on A, notified to B
        deadline = time.monotonic() + 60
        while not woken:
            assert time.monotonic() < deadline, "the feed never started listening"
            time.sleep(0.01)
        woken[0]()
        # The rows are still hidden: the follower reads again meanwhile, not on its poll 30 s
        # away.
        deadline = time.monotonic() + 20
        while hiding.reads_while_hidden < 2:
            assert time.monotonic() < deadline, "the follower did not read again before its poll"
            time.sleep(0.001)
        hiding.hiding.clear()  # the older transaction ended
        shown = time.monotonic()
        assert sub.wait(lambda: time.monotonic() < shown + 5)
        assert time.monotonic() - shown < 1.0, "the follower waited for its poll"
        assert [e.seq for e in sub.take()] == [2]
    finally:
        feed.stop()
