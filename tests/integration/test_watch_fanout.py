"""MatchQueries.watch with many watchers of one match: each event is redacted and made ready
(`prepare`) once per audience, and that one result is handed to every watcher of the
audience, each still getting every event once and in order; a batch holds the events ready
together."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence

import pytest
from conftest import Backend

from bergen.domain.events import Event
from bergen.domain.state import PLAYING
from bergen.domain.views import View, redact_event
from bergen.server.app import Application, Settings, build_application
from bergen.server.feed import EventFeed
from bergen.server.identity import Caller
from bergen.server.store import open_store

Ready = tuple[int, tuple[Event, ...]]


@pytest.fixture
def app(backend: Backend) -> Iterator[Application]:
    store = open_store(backend.url)
    yield build_application(store, EventFeed(store), Settings())
    store.close()


class Prepare:
    """A `prepare` that counts its calls."""

    def __init__(self) -> None:
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, seq: int, events: Sequence[Event]) -> Ready:
        with self._lock:
            self.calls += 1
        return seq, tuple(events)


class Watching(threading.Thread):
    def __init__(
        self, app: Application, caller: Caller, match_id: str, prepare: Prepare, batch: int
    ) -> None:
        super().__init__(daemon=True)
        self.got: list[Ready] = []
        self.view: View | None = None
        self.token = caller.token
        self.done = threading.Event()
        self._items = app.queries.watch(
            caller, match_id, 0, lambda: not self.done.is_set(), prepare, batch
        )
        self.failed: BaseException | None = None
        self.moved = threading.Condition()

    def run(self) -> None:
        try:
            for item in self._items:
                with self.moved:
                    if isinstance(item, tuple):
                        self.got.append(item)
                    else:
                        self.view = item
                    self.moved.notify_all()
        except BaseException as e:
            self.failed = e
        finally:
            with self.moved:
                self.done.set()
                self.moved.notify_all()

    def seen(self) -> int:
        if self.got:
            seq, events = self.got[-1]
            return seq + len(events) - 1
        return self.view.version if self.view is not None else 0

    def wait_for(self, version: int) -> None:
        with self.moved:
            assert self.moved.wait_for(
                lambda: self.seen() >= version or self.done.is_set(), timeout=60
            )
        assert self.seen() >= version, (self.seen(), version, self.failed)


def _play_one(app: Application, match_id: str, tokens: list[str]) -> int:
    """The first legal play of the seat to play; the match's version after it."""
    v = app.queries.get_view(Caller(tokens[0]), match_id)
    assert v.phase == PLAYING and v.turn is not None
    caller = Caller(tokens[v.turn])
    tile, end = app.queries.get_view(caller, match_id).legal_plays[0]
    return app.commands.play(caller, match_id, tile, end, None, None).view.version


@pytest.mark.parametrize("batch", [1, 64])
def test_forty_watchers_of_three_audiences_share_one_prepared_message_per_audience(
    app: Application, batch: int
) -> None:
    state = app.commands.create_match(Caller(), 2, False, "standard", {}, "fan-out")
    match_id = state.match_id
    tokens = [app.commands.join_match(match_id, None, f"p{i}", "")[1] for i in range(2)]
    prepare = Prepare()
    callers = [Caller(tokens[0])] * 10 + [Caller(tokens[1])] * 10 + [Caller()] * 20
    watchers = [Watching(app, c, match_id, prepare, batch) for c in callers]
    for w in watchers:
        w.start()
    version = app.queries.get_view(Caller(), match_id).version
    for w in watchers:
        w.wait_for(version)
    start = version
    for _ in range(12):
        version = _play_one(app, match_id, tokens)
        for w in watchers:
            w.wait_for(version)
    for w in watchers:
        w.done.set()
    for w in watchers:
        w.join(60)
        assert not w.is_alive(), "a watcher did not stop"
        assert w.failed is None, w.failed

    match = app.repository.load(match_id)
    messages = 0
    for w, caller in zip(watchers, callers, strict=True):
        assert w.view is not None and w.view.version == start
        viewer = None if caller.token is None else tokens.index(caller.token)
        seqs = [seq + i for seq, events in w.got for i in range(len(events))]
        assert seqs == list(range(start + 1, version + 1)), "missed, repeated or out of order"
        shown = [e for _, events in w.got for e in events]
        assert shown == [redact_event(e, viewer) for e in match.events[start:version]]
        assert all(len(events) <= batch for _, events in w.got)
        messages = max(messages, len(w.got))
    if batch > 1:
        assert messages < version - start, "no play's events were sent together"
    # Made once per audience (three here), not once per watcher (forty): at worst two
    # watchers of an audience that ask at the same instant both make it.
    assert prepare.calls <= 2 * 3 * messages
    assert prepare.calls < len(watchers) * messages / 4


def test_a_watcher_told_of_its_streams_end_stops_at_once_without_asking_active(
    app: Application,
) -> None:
    # With `on_end` a quiet watcher asks `active()` once a minute only: the end it is told
    # of must wake it, or a closed stream would hold its thread that long.
    state = app.commands.create_match(Caller(), 2, False, "standard", {}, "ended")
    match_id = state.match_id
    for i in range(2):
        app.commands.join_match(match_id, None, f"p{i}", "")
    ends: list[Callable[[], None]] = []
    items = app.queries.watch(Caller(), match_id, 0, lambda: True, Prepare(), on_end=ends.append)
    got: list[object] = []
    watcher = threading.Thread(target=lambda: got.extend(items), daemon=True)
    watcher.start()
    deadline = time.monotonic() + 30
    while not (got and ends) and time.monotonic() < deadline:
        watcher.join(0.01)
    assert got and ends, "no view, or no end registered"
    ends[0]()
    watcher.join(30)
    assert not watcher.is_alive(), "the watcher did not stop when told its stream ended"
    assert len(got) == 1 and isinstance(got[0], View)
