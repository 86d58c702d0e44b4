"""Rated matches and seats held by registered players (RATINGS.md section 2, RECORD.md): who
may sit, what the events and the record say of them, and what the record's checker accepts."""

from __future__ import annotations

import copy
import uuid
from typing import Any

import pytest

from bergen.domain.audit import replay_record
from bergen.domain.codec import decode, encode
from bergen.domain.commands import Abandon, CreateMatch, Play, Resign, TakeSeat
from bergen.domain.engine import command_of, execute
from bergen.domain.errors import InvalidArgument, RuleViolation
from bergen.domain.events import Event, MatchCreated, SeatTaken
from bergen.domain.fastplay import first_legal_play
from bergen.domain.record import build_record, rated_pool
from bergen.domain.state import ENDED, PLAYING, State, fold
from bergen.domain.views import redact_event, view

from .support import SEED, rules_for

ANN, BOB, CY, DEE = (str(uuid.uuid5(uuid.NAMESPACE_OID, n)) for n in ("ann", "bob", "cy", "dee"))


def create(seats: int = 2, partnerships: bool = False, rated: bool = True) -> list[Event]:
    command = CreateMatch(
        "m-1", seats, partnerships, rules_for(seats, partnerships), SEED, "", rated
    )
    return list(execute(None, command)[0])


def step(events: list[Event], command: Any) -> State:
    new, state = execute(fold(events), command)
    events.extend(new)
    return state


def seated(players: tuple[str, ...], rated: bool = True, partnerships: bool = False) -> list[Event]:
    events = create(len(players), partnerships, rated)
    for i, p in enumerate(players):
        step(events, TakeSeat(f"n{i}", f"seed {i}", i, p, bot=i == 1 and bool(p)))
    return events


def play_out(events: list[Event]) -> State:
    state = fold(events)
    while state.phase == PLAYING:
        seat = state.turn
        assert seat is not None
        play = first_legal_play(state, seat)
        assert play is not None
        state = step(events, Play(seat, *play))
    return state


def test_a_rated_match_seats_registered_players_and_says_so() -> None:
    events = seated((ANN, BOB))
    created, ann, bob = events[0], events[1], events[2]
    assert isinstance(created, MatchCreated) and created.rated
    assert isinstance(ann, SeatTaken) and (ann.player, ann.bot) == (ANN, False)
    assert isinstance(bob, SeatTaken) and (bob.player, bob.bot) == (BOB, True)
    shown = view(fold(events))
    assert (shown.rated, shown.player_ids, shown.bots) == (True, (ANN, BOB), (False, True))
    # What a spectator is shown of the events says as much (the seed alone is hidden).
    hidden = redact_event(created, None)
    assert isinstance(hidden, MatchCreated) and hidden.rated and hidden.server_seed is None
    assert redact_event(bob, None) == bob


def test_a_rated_match_refuses_a_seat_without_a_player() -> None:
    events = create()
    with pytest.raises(RuleViolation) as refused:
        step(events, TakeSeat("ann", "", 0))
    assert (refused.value.status, refused.value.reason) == (
        "FAILED_PRECONDITION",
        "PLAYER_REQUIRED",
    )


@pytest.mark.parametrize("rated", [True, False])
def test_a_player_holds_one_seat_of_a_match(rated: bool) -> None:
    events = create(3, rated=rated)
    step(events, TakeSeat("ann", "", 0, ANN))
    with pytest.raises(RuleViolation) as refused:
        step(events, TakeSeat("ann again", "", 2, ANN))
    assert refused.value.reason == "PLAYER_ALREADY_SEATED"
    assert refused.value.metadata["seat"] == "0"


def test_an_unrated_match_seats_names_and_players_alike() -> None:
    events = seated(("", BOB), rated=False)
    assert view(fold(events)).player_ids == ("", BOB)


@pytest.mark.parametrize(
    "command",
    [
        TakeSeat("ann", "", 0, "not a uuid"),
        TakeSeat("ann", "", 0, ANN.upper()),
        TakeSeat("ann", "", 0, "", bot=True),
        TakeSeat("ann", "", 0, ANN, bot=1),  # type: ignore[arg-type]
    ],
)
def test_a_malformed_player_or_bot_flag_is_refused(command: TakeSeat) -> None:
    with pytest.raises(InvalidArgument):
        step(create(rated=False), command)


def test_rated_must_be_a_bool() -> None:
    with pytest.raises(InvalidArgument):
        execute(None, CreateMatch("m", 2, False, rules_for(), SEED, "", 1))  # type: ignore[arg-type]


def test_the_new_fields_go_through_the_codec_and_leave_old_events_as_they_were() -> None:
    events = seated((ANN, BOB))
    for e in events[:3]:
        assert decode(*encode(e)) == e
    assert encode(events[0])[1] == 2 and encode(events[1])[1] == 2
    plain = seated(("", ""), rated=False)
    assert [encode(e)[1] for e in plain[:3]] == [1, 1, 1]
    assert "player" not in encode(plain[1])[2] and "rated" not in encode(plain[0])[2]


def test_the_commands_decided_again_from_the_events_are_the_same() -> None:
    events = seated((ANN, BOB))
    assert command_of(events[0]) == CreateMatch("m-1", 2, False, rules_for(2), SEED, "", True)
    assert command_of(events[2]) == TakeSeat("n1", "seed 1", 1, BOB, True)


def test_the_record_of_a_rated_match_names_its_players_pool_and_order() -> None:
    events = seated((ANN, BOB))
    state = play_out(events)
    assert rated_pool(state) == "2"
    record = build_record(events, rated_order=41)
    assert [s.get("player") for s in record["seats"]] == [ANN, BOB]
    assert "bot" not in record["seats"][1]
    assert record["rated"] == {"pool": "2", "order": 41}
    assert replay_record(record).ok, replay_record(record).line()
    with pytest.raises(InvalidArgument):
        build_record(events)


@pytest.mark.parametrize(
    ("seats", "partnerships", "pool"), [(3, False, "3"), (4, False, "4"), (4, True, "pairs")]
)
def test_each_table_rates_in_its_pool(seats: int, partnerships: bool, pool: str) -> None:
    events = seated((ANN, BOB, CY, DEE)[:seats], partnerships=partnerships)
    step(events, Resign(2))
    assert rated_pool(fold(events)) == pool
    record = build_record(events, rated_order=7)
    assert record["rated"]["pool"] == pool and replay_record(record).ok


def test_an_abandoned_rated_match_is_not_rated() -> None:
    events = seated((ANN, BOB))
    state = step(events, Abandon("no show"))
    assert state.phase == ENDED and rated_pool(state) is None
    record = build_record(events)
    assert "rated" not in record and replay_record(record).ok
    claimed = {**record, "rated": {"pool": "2", "order": 3}}
    assert replay_record(claimed).where == "rated"


def test_an_unrated_match_has_no_rated_field() -> None:
    events = seated((ANN, BOB), rated=False)
    play_out(events)
    record = build_record(events, rated_order=5)
    assert "rated" not in record and record["seats"][0]["player"] == ANN


def _rated_record() -> dict[str, Any]:
    events = seated((ANN, BOB))
    step(events, Resign(0))
    return build_record(events, rated_order=12)


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda r: r["rated"].update(pool="3"), "rated.pool"),
        (lambda r: r["rated"].update(pool="5"), "rated.pool"),
        (lambda r: r["rated"].update(order=0), "rated.order"),
        (lambda r: r["rated"].update(order="12"), "rated.order"),
        (lambda r: r["rated"].update(extra=1), "rated"),
        (lambda r: r["seats"][0].update(player="ann"), "seats[0].player"),
        (lambda r: r["seats"][0].pop("player"), "seats[0]"),
        (lambda r: r["seats"][1].update(player=ANN), "seats[1]"),
        (lambda r: r["seats"][0].update(bot=True), "seats[0]"),
    ],
)
def test_the_checker_refuses_a_rated_record_that_does_not_hold(change: Any, where: str) -> None:
    record = copy.deepcopy(_rated_record())
    change(record)
    verdict = replay_record(record)
    assert not verdict.ok and verdict.where == where, verdict.line()
