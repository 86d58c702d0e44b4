"""A Play goes straight: the match is taken once, decided, appended in one unit of work, and
answered from what was decided, with no read of the store after the append."""

from __future__ import annotations

from typing import Any, cast

from conftest import Backend

from bergen.domain.errors import ConcurrencyConflict
from bergen.domain.state import PLAYING
from bergen.server.app import Application, Settings, build_application
from bergen.server.feed import EventFeed
from bergen.server.identity import Caller
from bergen.server.store import Append, AppendResult, EventStore, open_store


class _Counting:
    """A store that counts reads and appends; its first append may lose its race."""

    def __init__(self, inner: EventStore, lose_first: bool = False) -> None:
        self._inner = inner
        self.lose = lose_first
        self.lost = False
        self.reads = 0
        self.appends = 0

    def append(self, batch: Append) -> AppendResult:
        self.appends += 1
        if self.lose and not self.lost:
            self.lost = True
            raise ConcurrencyConflict("lost", reason="VERSION_CONFLICT")
        return self._inner.append(batch)

    def read_rows(self, *args: Any) -> Any:
        self.reads += 1
        return self._inner.read_rows(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _playing(app: Application) -> tuple[str, Caller]:
    state = app.commands.create_match(Caller(), 2, False, "standard", {}, "straight")
    match_id = state.match_id
    tokens = [app.commands.join_match(match_id, None, f"p{i}", "")[1] for i in range(2)]
    view = app.queries.get_view(Caller(tokens[0]), match_id)
    assert view.phase == PLAYING and view.turn is not None
    return match_id, Caller(tokens[view.turn])


def test_a_play_reads_nothing_after_its_append(backend: Backend) -> None:
    inner = open_store(backend.url)
    try:
        app = build_application(inner, EventFeed(inner), Settings())
        match_id, caller = _playing(app)
        tile, end = app.queries.get_view(caller, match_id).legal_plays[0]
        counting = _Counting(inner)
        app.work._store = cast(EventStore, counting)
        app.repository._store = cast(EventStore, counting)
        out = app.commands.play(caller, match_id, tile, end, None, None)
        assert (counting.reads, counting.appends) == (0, 1)  # the cached match, one append
        assert out.view.version == out.events[-1][0] == inner.stream_version(match_id)
    finally:
        inner.close()


def test_a_play_whose_append_lost_its_race_is_answered_from_the_append_that_wrote(
    backend: Backend,
) -> None:
    inner = open_store(backend.url)
    try:
        app = build_application(inner, EventFeed(inner), Settings())
        match_id, caller = _playing(app)
        tile, end = app.queries.get_view(caller, match_id).legal_plays[0]
        racing = _Counting(inner, lose_first=True)
        app.work._store = cast(EventStore, racing)
        out = app.commands.play(caller, match_id, tile, end, None, None)
        assert racing.lost and racing.appends == 2
        assert out.view.version == out.events[-1][0] == inner.stream_version(match_id)
    finally:
        inner.close()
