"""The server's time keeping on a real store of each backend, with a clock the test sets:
commands carry the servers' reading, a Play after its seat's time ran out is refused and the
timeout applied in its place, and the keeper applies each due timeout once, whichever of two
replicas gets there first, and sleeps while none is due."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from conftest import Backend

from bergen.domain.errors import ClockViolation
from bergen.domain.events import TimedOut
from bergen.domain.state import ENDED
from bergen.server.app import Application, Settings, build_application
from bergen.server.clocks import ClockKeeper
from bergen.server.feed import EventFeed
from bergen.server.identity import Caller
from bergen.server.store import EventStore, open_store

CLOCK = {"clock": "fischer", "clock_initial": 10, "clock_increment": 2, "timeouts_to_forfeit": 2}


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_800_000_000_000

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def replicas(backend: Backend, clock: FakeClock) -> Iterator[tuple[Application, Application]]:
    stores = [open_store(backend.url) for _ in range(2)]
    feeds = [EventFeed(s) for s in stores]
    apps = [
        build_application(s, f, Settings(), clock=clock) for s, f in zip(stores, feeds, strict=True)
    ]
    yield apps[0], apps[1]
    for s in stores:
        s.close()


def seated(app: Application) -> tuple[str, list[str]]:
    state = app.commands.create_match(Caller(), 2, False, "standard", dict(CLOCK), "clocks")
    tokens = [app.commands.join_match(state.match_id, None, f"p{i}", "")[1] for i in range(2)]
    return state.match_id, tokens


def timeouts(store_app: Application, match_id: str) -> list[TimedOut]:
    match = store_app.repository.load(match_id)
    return [e for e in match.events if isinstance(e, TimedOut)]


def test_commands_carry_the_servers_clock_and_the_increment_is_added(
    replicas: tuple[Application, Application], clock: FakeClock
) -> None:
    app, _ = replicas
    match_id, tokens = seated(app)
    match = app.repository.load(match_id)
    seat = match.state.running
    assert seat is not None and match.epoch_ms == clock.now
    clock.now += 3_500
    tile, end = app.queries.get_view(Caller(tokens[seat]), match_id).legal_plays[0]
    outcome = app.commands.play(Caller(tokens[seat]), match_id, tile, end, None, None)
    played = outcome.view
    # RULES.md section 11's worked case: 10 - 3.5 + 2 = 8.5 s.
    assert played.clocks[seat].left_ms == 8_500


def test_a_play_after_its_seats_time_ran_out_is_refused_and_the_timeout_applied(
    replicas: tuple[Application, Application], clock: FakeClock
) -> None:
    app, _ = replicas
    match_id, tokens = seated(app)
    seat = app.repository.load(match_id).state.running
    assert seat is not None
    tile, end = app.queries.get_view(Caller(tokens[seat]), match_id).legal_plays[0]
    clock.now += 10_000
    with pytest.raises(ClockViolation) as info:
        app.commands.play(Caller(tokens[seat]), match_id, tile, end, None, None)
    assert info.value.reason == "CLOCK_EXPIRED"
    found = timeouts(app, match_id)
    assert [(t.seat, t.at_ms) for t in found] == [(seat, 10_000)]


def test_a_timeout_is_not_applied_before_the_clock_falls(
    replicas: tuple[Application, Application], clock: FakeClock
) -> None:
    app, _ = replicas
    match_id, _tokens = seated(app)
    clock.now += 9_999
    assert app.commands.time_out(match_id) is None
    clock.now += 1
    assert app.commands.time_out(match_id) is not None
    assert len(timeouts(app, match_id)) == 1


def test_two_replicas_racing_for_one_expiry_write_one_timeout(
    replicas: tuple[Application, Application], clock: FakeClock
) -> None:
    a, b = replicas
    match_id, _tokens = seated(a)
    b.repository.load(match_id)
    clock.now += 10_000
    barrier = threading.Barrier(2)
    results: list[int | None] = []

    def race(app: Application) -> None:
        barrier.wait()
        results.append(app.commands.time_out(match_id))

    threads = [threading.Thread(target=race, args=(app,)) for app in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # One timeout (the autoplay hands the turn to the other seat, whose clock has not run).
    assert sum(r is not None for r in results) == 1, results
    assert len(timeouts(a, match_id)) == 1


class Scan:
    """The listing as the keeper sees it, telling what its start-up scan listed and when the
    scan's last page came back."""

    def __init__(self, listing: Any) -> None:
        self._listing = listing
        self.listed: list[str] = []
        self.done = threading.Event()

    def page(self, *args: Any) -> Any:
        rows, token = self._listing.page(*args)
        self.listed += [r.match_id for r in rows]
        if not token:
            self.done.set()
        return rows, token

    def __getattr__(self, name: str) -> Any:
        return getattr(self._listing, name)


@contextmanager
def running_keeper(url: str, clock: FakeClock) -> Iterator[tuple[Application, ClockKeeper, Scan]]:
    """A replica starting now on `url` (its cache cold), its keeper wired as `bergen serve`
    wires it: the start-up scan, then what the feed brings."""
    store: EventStore = open_store(url)
    feed = EventFeed(store)
    app = build_application(store, feed, Settings(), clock=clock)
    scan = Scan(feed.listing)
    keeper = ClockKeeper(store, app.repository, scan, app.commands, clock)  # type: ignore[arg-type]
    feed.listen(keeper.note)
    feed.start()
    keeper.start()
    try:
        yield app, keeper, scan
    finally:
        keeper.stop()
        feed.stop()
        store.close()


def test_the_keeper_applies_due_timeouts_until_the_forfeit_and_then_holds_nothing(
    backend: Backend, clock: FakeClock
) -> None:
    with running_keeper(backend.url, clock) as (app, keeper, _):
        match_id, _tokens = seated(app)
        wait_for(lambda: keeper.pending() == 1)
        # Seat A falls at 10 s (autoplay, +2 s), B at 20 s (autoplay), A at 22 s (forfeit).
        for expected, step in enumerate((10_000, 10_000, 2_000), 1):
            clock.now += step
            keeper.wake()
            wait_for(lambda n=expected: len(timeouts(app, match_id)) == n)
        assert app.repository.load(match_id).state.phase == ENDED
        wait_for(lambda: keeper.pending() == 0)
        # The keeper counts a timeout once its write returns, after the test may see it stored.
        wait_for(lambda: keeper.applied >= 3)
        assert keeper.applied == 3


@pytest.mark.postgres
def test_a_match_without_a_clock_that_the_feed_brings_is_not_loaded(
    pg_database: str, clock: FakeClock
) -> None:
    """A match hidden from the start-up scan by an open transaction comes by the feed; one
    without a clock is told by its first event and never loaded, as the scan's are."""
    writer_store = open_store(pg_database)
    app = build_application(writer_store, EventFeed(writer_store), Settings(), clock=clock)
    with psycopg.connect(pg_database, autocommit=False) as blocker:
        blocker.execute("SELECT pg_current_xact_id()")  # a writing transaction, left open
        clocked, _tokens = seated(app)
        plain = app.commands.create_match(Caller(), 2, False, "standard", {}, "plain").match_id
        for i in range(2):
            app.commands.join_match(plain, None, f"q{i}", "")
        with running_keeper(pg_database, clock) as (fresh, keeper, scan):
            wait_for(scan.done.is_set)
            assert not {clocked, plain} & set(scan.listed)  # both hidden from the scan
            assert keeper.pending() == 0
            blocker.rollback()
            wait_for(lambda: keeper.pending() == 1)
            # The keeper's turn over both matches is done: it has set the plain one aside.
            wait_for(lambda: plain in keeper._unclocked)
            assert fresh.repository.cached(clocked) is not None
            assert fresh.repository.cached(plain) is None
    writer_store.close()


def wait_for(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)


def test_on_start_the_keeper_schedules_the_clocked_matches_in_play_and_loads_no_other(
    backend: Backend, replicas: tuple[Application, Application], clock: FakeClock
) -> None:
    app, _ = replicas
    clocked, _tokens = seated(app)
    plain = app.commands.create_match(Caller(), 2, False, "standard", {}, "plain").match_id
    for i in range(2):
        app.commands.join_match(plain, None, f"q{i}", "")
    # A replica starting now: on PostgreSQL a match another open transaction hides from its
    # start-up scan comes by the feed.
    with running_keeper(backend.url, clock) as (fresh, keeper, _):
        wait_for(lambda: keeper.pending() == 1)
        assert fresh.repository.cached(clocked) is not None
        assert fresh.repository.cached(plain) is None


@pytest.mark.postgres
def test_a_match_hidden_from_the_start_up_scan_by_an_open_transaction_is_scheduled_once_seen(
    pg_database: str, clock: FakeClock
) -> None:
    """The global order shows a commit only once every older writing transaction has ended
    (so that no reader skips a late one): a writer left open anywhere on the database server
    hides the matches created after it from the keeper's start-up scan. They are not lost:
    the feed brings them as soon as it ends."""
    writer_store = open_store(pg_database)
    app = build_application(writer_store, EventFeed(writer_store), Settings(), clock=clock)
    with psycopg.connect(pg_database, autocommit=False) as blocker:
        blocker.execute("SELECT pg_current_xact_id()")  # a writing transaction, left open
        clocked, _tokens = seated(app)
        with running_keeper(pg_database, clock) as (fresh, keeper, scan):
            wait_for(scan.done.is_set)
            assert clocked not in scan.listed  # hidden while the older writer is open
            assert keeper.pending() == 0
            blocker.rollback()
            wait_for(lambda: keeper.pending() == 1)
            assert fresh.repository.cached(clocked) is not None
    writer_store.close()
