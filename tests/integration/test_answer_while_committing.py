"""A command's answer made while its append is in flight: on PostgreSQL the store runs the
caller's `meanwhile` between sending the INSERT and its commit's answer, and the unit of work
keeps what was made only if that append wrote."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any, cast

import psycopg
import pytest
from conftest import Backend

from bergen.domain.errors import ConcurrencyConflict
from bergen.domain.state import PLAYING
from bergen.server.app import Application, Settings, build_application
from bergen.server.commands import Outcome
from bergen.server.feed import EventFeed
from bergen.server.identity import Caller
from bergen.server.store import EventStore, NewEvent, open_store


def ev(n: int) -> NewEvent:
    return NewEvent("TilePlayed", 1, {"n": n})


@pytest.fixture
def pg_store(pg_database: str) -> Iterator[EventStore]:
    s = open_store(pg_database)
    yield s
    s.close()


@pytest.mark.postgres
def test_on_postgresql_meanwhile_runs_while_the_insert_is_in_flight(
    pg_store: EventStore, pg_database: str
) -> None:
    pg_store.append("m", 0, [ev(1)])
    with psycopg.connect(pg_database) as blocker:
        # An uncommitted row at seq 2 holds the append's INSERT on the primary key until the
        # blocker rolls back: meanwhile sees that INSERT waiting, then lets it through.
        blocker.execute(
            "INSERT INTO events (stream_id, seq, type, schema_version, payload, metadata,"
            " prev_hash, hash, salt) SELECT stream_id, 2, type, schema_version, payload,"
            " metadata, prev_hash, hash, salt FROM events WHERE stream_id = 'm' AND seq = 1"
        )
        seen: list[int] = []

        def meanwhile() -> None:
            with psycopg.connect(pg_database) as watcher:
                deadline = time.monotonic() + 60
                waiting = 0
                while not waiting and time.monotonic() < deadline:
                    # This database's: the server is shared with other tests.
                    row = watcher.execute(
                        "SELECT count(*) FROM pg_locks WHERE NOT granted AND pid IN"
                        " (SELECT pid FROM pg_stat_activity WHERE datname = current_database())"
                    )
                    waiting = row.fetchone()[0]  # type: ignore[index]
                    time.sleep(0.01)
            seen.append(waiting)
            blocker.rollback()

        # Should meanwhile not run, the blocker gives way by itself (and the test fails).
        safety = threading.Timer(90, blocker.rollback)
        safety.start()
        try:
            result = pg_store.append("m", 1, [ev(2)], meanwhile=meanwhile)
        finally:
            safety.cancel()
    assert len(seen) == 1 and seen[0] >= 1, "meanwhile did not run while the INSERT waited"
    assert result.last_seq == 2 and pg_store.stream_version("m") == 2


@pytest.mark.postgres
def test_on_postgresql_what_meanwhile_raises_comes_once_the_append_is_settled(
    pg_store: EventStore,
) -> None:
    pg_store.append("m", 0, [ev(1)])

    def broken() -> None:
        raise RuntimeError("the answer could not be made")

    with pytest.raises(RuntimeError, match="could not be made"):
        pg_store.append("m", 1, [ev(2)], meanwhile=broken)
    # Written all the same, and the connection is left ready for the next append.
    assert pg_store.stream_version("m") == 2
    assert pg_store.append("m", 2, [ev(3)]).last_seq == 3


@pytest.mark.postgres
def test_on_postgresql_a_lost_race_is_raised_before_what_meanwhile_raised(
    pg_store: EventStore,
) -> None:
    pg_store.append("m", 0, [ev(1), ev(2)])

    def broken() -> None:
        raise RuntimeError("the answer could not be made")

    with pytest.raises(ConcurrencyConflict):
        pg_store.append("m", 1, [ev(9)], meanwhile=broken)
    assert pg_store.stream_version("m") == 2
    assert pg_store.append("m", 2, [ev(3)]).last_seq == 3


class _LosesFirstRace:
    """A store whose first append makes the caller's answer, then loses its race."""

    def __init__(self, inner: EventStore) -> None:
        self._inner = inner
        self.lost = False

    def append(self, *args: Any, **kwargs: Any) -> Any:
        if not self.lost:
            self.lost = True
            if kwargs.get("meanwhile") is not None:
                kwargs["meanwhile"]()
            raise ConcurrencyConflict("lost", reason="VERSION_CONFLICT")
        return self._inner.append(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_an_answer_made_for_an_append_that_lost_its_race_is_dropped(backend: Backend) -> None:
    inner = open_store(backend.url)
    try:
        app: Application = build_application(inner, EventFeed(inner), Settings())
        state = app.commands.create_match(Caller(), 2, False, "standard", {}, "race")
        match_id = state.match_id
        tokens = [app.commands.join_match(match_id, None, f"p{i}", "")[1] for i in range(2)]
        view = app.queries.get_view(Caller(tokens[0]), match_id)
        assert view.phase == PLAYING and view.turn is not None
        caller = Caller(tokens[view.turn])
        tile, end = app.queries.get_view(caller, match_id).legal_plays[0]
        racing = _LosesFirstRace(inner)
        app.work._store = cast(EventStore, racing)
        made: list[Outcome] = []

        def present(out: Outcome) -> tuple[int, Outcome]:
            made.append(out)
            return len(made), out

        number, out = app.commands.play_as(present, caller, match_id, tile, end, None, None)
    finally:
        inner.close()
    assert racing.lost
    # The answer of the append that wrote, not the one made for the append that lost.
    assert len(made) == 2 and number == 2
    assert out.view.version == out.events[-1][0] == inner_version(backend, match_id)


def inner_version(backend: Backend, match_id: str) -> int:
    s = open_store(backend.url)
    try:
        return s.stream_version(match_id)
    finally:
        s.close()
