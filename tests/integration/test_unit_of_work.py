"""The command side's one unit of work, on a real store of each backend: two applications on
one database stand for two replicas, each with its own cache of folded matches."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from conftest import Backend

from bergen.domain.errors import (
    ConcurrencyConflict,
    InvalidArgument,
    NotFound,
    NotYourTurn,
    PermissionDenied,
    SeatUnavailable,
)
from bergen.domain.state import PLAYING
from bergen.server.app import Application, Settings, build_application
from bergen.server.feed import EventFeed
from bergen.server.identity import Caller
from bergen.server.store import EventStore, open_store


@pytest.fixture
def replicas(backend: Backend) -> Iterator[tuple[Application, Application, EventStore]]:
    stores = [open_store(backend.url) for _ in range(2)]
    apps = [build_application(s, EventFeed(s), Settings()) for s in stores]
    yield apps[0], apps[1], stores[0]
    for s in stores:
        s.close()


def _seated(app: Application) -> tuple[str, list[str]]:
    state = app.commands.create_match(Caller(), 2, False, "standard", {}, "uow")
    tokens = [app.commands.join_match(state.match_id, None, f"p{i}", "")[1] for i in range(2)]
    return state.match_id, tokens


def _turn(app: Application, match_id: str, tokens: list[str]) -> tuple[int, Caller]:
    v = app.queries.get_view(Caller(tokens[0]), match_id)
    assert v.phase == PLAYING and v.turn is not None
    return v.turn, Caller(tokens[v.turn])


def _first_legal(app: Application, match_id: str, caller: Caller) -> tuple[object, object]:
    v = app.queries.get_view(caller, match_id)
    assert v.legal_plays, "the seat to play always has a legal play after forced draws"
    return v.legal_plays[0]


def test_a_play_decided_on_a_stale_cache_is_decided_again_on_the_latest_state(
    replicas: tuple[Application, Application, EventStore],
) -> None:
    a, b, store = replicas
    match_id, tokens = _seated(a)
    b.queries.get_view(Caller(), match_id)  # b caches the match at this version
    _, caller = _turn(a, match_id, tokens)
    tile, end = _first_legal(a, match_id, caller)
    a.commands.play(caller, match_id, tile, end, None, None)  # type: ignore[arg-type]
    # b's cache is a play behind, where the next seat may not play yet: the play sent to b
    # must be decided again on the latest state and applied.
    _, caller2 = _turn(a, match_id, tokens)
    tile2, end2 = _first_legal(a, match_id, caller2)
    before = store.stream_version(match_id)
    out = b.commands.play(caller2, match_id, tile2, end2, None, None)  # type: ignore[arg-type]
    assert out.events[0][0] == before + 1
    assert store.stream_version(match_id) == out.view.version


def test_a_stale_expected_version_is_refused_with_its_reason_and_writes_nothing(
    replicas: tuple[Application, Application, EventStore],
) -> None:
    a, _, store = replicas
    match_id, tokens = _seated(a)
    _, caller = _turn(a, match_id, tokens)
    tile, end = _first_legal(a, match_id, caller)
    version = store.stream_version(match_id)
    with pytest.raises(ConcurrencyConflict) as refused:
        a.commands.play(caller, match_id, tile, end, version - 1, None)  # type: ignore[arg-type]
    assert refused.value.reason == "STALE_VERSION"
    assert store.stream_version(match_id) == version


def test_a_repeated_command_id_is_answered_alike_on_either_replica_and_written_once(
    replicas: tuple[Application, Application, EventStore],
) -> None:
    a, b, store = replicas
    match_id, tokens = _seated(a)
    _, caller = _turn(a, match_id, tokens)
    tile, end = _first_legal(a, match_id, caller)
    first = a.commands.play(caller, match_id, tile, end, None, "cmd-1")  # type: ignore[arg-type]
    version = store.stream_version(match_id)
    again = b.commands.play(caller, match_id, tile, end, None, "cmd-1")  # type: ignore[arg-type]
    assert again.replayed and not first.replayed
    assert again.events == first.events
    assert store.stream_version(match_id) == version
    with pytest.raises(InvalidArgument) as reused:
        a.commands.resign(caller, match_id, "cmd-1")
    assert reused.value.reason == "COMMAND_ID_REUSED"


def test_refusals_come_from_the_latest_state_not_from_a_stale_cache(
    replicas: tuple[Application, Application, EventStore],
) -> None:
    a, b, _ = replicas
    match_id, tokens = _seated(a)
    _, caller = _turn(a, match_id, tokens)
    other = Caller(tokens[1 - tokens.index(caller.token or "")])
    tile, end = _first_legal(a, match_id, caller)
    with pytest.raises(NotYourTurn):
        b.commands.play(other, match_id, tile, end, None, None)  # type: ignore[arg-type]
    with pytest.raises(PermissionDenied):
        b.commands.play(Caller("bgs_" + "x" * 43), match_id, tile, end, None, None)  # type: ignore[arg-type]
    with pytest.raises(SeatUnavailable):
        b.commands.join_match(match_id, None, "late", "")
    with pytest.raises(NotFound):
        b.commands.resign(caller, "00000000-0000-4000-8000-000000000000", None)


def test_joins_on_two_replicas_take_distinct_seats(
    replicas: tuple[Application, Application, EventStore],
) -> None:
    a, b, _ = replicas
    state = a.commands.create_match(Caller(), 3, False, "standard", {}, "uow")
    b.queries.get_view(Caller(), state.match_id)  # b caches the empty match
    seats = [
        a.commands.join_match(state.match_id, None, "p0", "")[0],
        b.commands.join_match(state.match_id, None, "p1", "")[0],
        b.commands.join_match(state.match_id, None, "p2", "")[0],
    ]
    assert sorted(seats) == [0, 1, 2]
