"""Clocks in the rules engine (RULES.md section 11): time as an input, Fischer increments,
timeouts, automatic plays and the counting of timeouts in a row."""

from __future__ import annotations

import pytest

from bergen.domain import codec
from bergen.domain.commands import Play, Resign, Timeout
from bergen.domain.engine import execute
from bergen.domain.errors import ClockViolation, InvalidArgument
from bergen.domain.events import (
    EVENT_TYPES,
    Dealt,
    MatchEnded,
    Passed,
    SeedRevealed,
    TileDrawn,
    TilePlayed,
    TimedOut,
)
from bergen.domain.state import ENDED, State, fold
from bergen.domain.tiles import End
from bergen.domain.views import view

from . import deals
from .support import Game, T, of_type, rules_for


def clocked(seats: int = 2, **options: object) -> Game:
    return Game(seats, rules=rules_for(seats, clock="fischer", **options))


def refused(state: State, command, reason: str) -> ClockViolation | InvalidArgument:
    with pytest.raises((ClockViolation, InvalidArgument)) as info:
        execute(state, command)
    assert info.value.reason == reason, info.value
    return info.value


# ----- the worked case of RULES.md section 11 ---------------------------------------------


@pytest.fixture
def worked(crafted_deals) -> Game:
    """clock_initial 10, clock_increment 2, timeouts_to_forfeit 2. Seat 0 leads 1-1 at 0;
    seat 1 plays 1-3 at 1000, so seat 0's choice (1-5, its only fitting tile) begins at
    1000."""
    crafted_deals({(1, 1): deals.CASE3})
    g = clocked(clock_initial=10, clock_increment=2, timeouts_to_forfeit=2).start()
    g.do(Play(1, T("1-3"), End.LEFT, at_ms=1000))
    return g


def test_worked_case_a_play_at_4500_leaves_8_5_seconds(worked):
    assert (worked.s.running, worked.s.due_at_ms) == (0, 11_000)
    events = worked.do(Play(0, T("1-5"), at_ms=4500))
    assert events[0] == TilePlayed(1, 0, T("1-5"), End.RIGHT, 4500, 8500)
    assert worked.s.clocks[0] == 8500


def test_worked_case_no_timeout_before_11000_and_no_play_from_then(worked):
    error = refused(worked.s, Timeout(0, 10_999), "CLOCK_NOT_EXPIRED")
    assert error.metadata["due_at_ms"] == "11000"
    error = refused(worked.s, Play(0, T("1-5"), at_ms=11_000), "CLOCK_EXPIRED")
    assert error.metadata["seat"] == "0"


@pytest.mark.parametrize("at", [11_000, 11_250])
def test_worked_case_timeout_autoplays_and_leaves_the_increment(worked, at):
    events = worked.do(Timeout(0, at))
    assert events[0] == TimedOut(1, 0, at)
    assert events[1] == TilePlayed(1, 0, T("1-5"), End.RIGHT, at, 2000, auto=True)
    assert worked.s.clocks[0] == 2000
    assert worked.s.timeouts[0] == 1
    assert worked.s.running == 1 and worked.s.clock_since == at


def test_worked_case_a_second_timeout_in_a_row_forfeits_the_side(worked):
    worked.do(Timeout(0, 11_000))
    seat1 = worked.s.legal_plays(1)[0]
    worked.do(Play(1, seat1[0], seat1[1], at_ms=12_000))
    assert worked.s.running == 0 and worked.s.due_at_ms == 14_000
    events = worked.do(Timeout(0, 14_000))
    assert events[0] == TimedOut(1, 0, 14_000)
    ended = events[1]
    assert isinstance(ended, MatchEnded)
    assert (ended.reason, ended.forfeited_side, ended.cause, ended.winner_side, ended.at_ms) == (
        "forfeit",
        0,
        "timeout",
        1,
        14_000,
    )
    assert ended.scores == worked.s.scores
    assert isinstance(events[2], SeedRevealed)
    assert worked.s.phase == ENDED and worked.s.running is None


# ----- automatic play -----------------------------------------------------------------------


def test_autoplay_takes_the_canonical_tile_and_the_left_end_first(crafted_deals):
    # Seat 1 holds 3-5 before 1-3; both fit 3|3 at either end. Canonical order: 1-3, left.
    crafted_deals({(1, 1): deals.CASE2})
    g = clocked(clock_initial=5).start()
    plays = g.s.legal_plays(1)
    assert plays[0][0] == T("3-5")
    events = g.do(Timeout(1, 5000))
    assert events[1] == TilePlayed(1, 1, T("1-3"), End.LEFT, 5000, 5000, auto=True)


def test_a_play_of_its_own_starts_the_count_again(crafted_deals):
    crafted_deals({(1, 1): deals.GO_OUT})
    g = clocked(clock_initial=5, clock_increment=1, timeouts_to_forfeit=2).start()
    g.do(Timeout(1, 5000))  # seat 1: 1 in a row, plays 0-1 left automatically
    assert g.s.timeouts == (0, 1)
    g.do(Play(0, T("1-2"), End.LEFT, at_ms=5100))
    g.do(Play(1, T("2-3"), End.LEFT, at_ms=5200))  # its own play: the count starts again
    assert g.s.timeouts == (0, 0)
    g.do(Play(0, T("3-4"), End.LEFT, at_ms=5300))
    events = g.do(Timeout(1, g.s.due_at_ms))
    assert not of_type(events, MatchEnded)
    assert g.s.timeouts == (0, 1)


def test_on_timeout_forfeit_forfeits_at_the_first_timeout(crafted_deals):
    crafted_deals({(1, 1): deals.CASE2})
    g = clocked(on_timeout="forfeit", clock_initial=1).start()
    seat = g.s.running
    events = g.do(Timeout(seat, 1000))
    assert [type(e) for e in events] == [TimedOut, MatchEnded, SeedRevealed]
    assert events[1].forfeited_side == seat


def test_a_timeout_of_a_partner_forfeits_for_the_partnership():
    g = clocked(4, partnerships=True, on_timeout="forfeit").start()
    seat = g.s.running
    ended = of_type(g.do(Timeout(seat, g.s.due_at_ms)), MatchEnded)[0]
    assert ended.forfeited_side == seat % 2
    assert ended.winner_side == 1 - seat % 2


# ----- time as an input ---------------------------------------------------------------------


def test_the_first_deal_is_at_0_and_the_forced_lead_takes_no_time():
    g = clocked(clock_initial=30).create()
    g.sit()
    lead = of_type(g.events, TilePlayed)[0]
    assert (lead.at_ms, lead.clock_ms, lead.auto) == (0, 30_000, False)
    assert g.s.clocks == (30_000, 30_000)
    assert g.s.due_at_ms == 30_000


def test_forced_draws_and_passes_carry_the_time_of_the_play_that_caused_them(crafted_deals):
    crafted_deals({(1, 1): deals.CASE1})
    g = clocked(clock_initial=60).start()
    for seat, tile, end, at in [(1, "2-6", "left", 100), (0, "4-6", "right", 200)]:
        g.do(Play(seat, T(tile), End(end), at_ms=at))
    events = g.do(Play(1, T("2-4"), End.RIGHT, at_ms=300))
    forced = [e for e in events if isinstance(e, TileDrawn | Passed)]
    assert forced and all(e.at_ms == 300 for e in forced)
    # The seat that drew a fitting tile starts its time at the draw: the same instant.
    assert g.s.running == 0 and g.s.clock_since == 300


def test_clocks_carry_over_to_the_next_hand_and_do_not_run_between_hands(crafted_deals):
    crafted_deals({(1, 1): deals.GO_OUT})
    g = clocked(clock_initial=60, clock_increment=1).start()
    at = 0
    for seat, tile, end in [*deals.GO_OUT_PLAYS, deals.GO_OUT_LAST]:
        at += 1000
        g.do(Play(seat, T(tile), End(end), at_ms=at))
    # Each seat took 1 s per play and earned 1 s: its clock is as it started.
    assert of_type(g.last, Dealt)[0].hand == 2
    lead = next(e for e in of_type(g.last, TilePlayed) if e.hand == 2)
    assert lead.at_ms == at and lead.clock_ms == 60_000
    assert g.s.clocks == (60_000, 60_000)
    assert g.s.clock_since == at


def test_an_earlier_at_ms_is_taken_as_the_latest_recorded(worked):
    events = worked.do(Play(0, T("1-5"), at_ms=500))
    assert events[0].at_ms == 1000
    assert events[0].clock_ms == 12_000


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        (Play(0, T("1-5")), "AT_MS_REQUIRED"),
        (Play(0, T("1-5"), at_ms=-1), "INVALID_AT_MS"),
        (Play(0, T("1-5"), at_ms=True), "INVALID_AT_MS"),  # type: ignore[arg-type]
        (Play(0, T("1-5"), at_ms=2.5), "INVALID_AT_MS"),  # type: ignore[arg-type]
        (Resign(0), "AT_MS_REQUIRED"),
        (Timeout(1, 20_000), "CLOCK_NOT_RUNNING"),
        (Timeout(0, None), "AT_MS_REQUIRED"),  # type: ignore[arg-type]
    ],
)
def test_commands_of_a_clocked_match_need_a_valid_time(worked, command, reason):
    refused(worked.s, command, reason)


def test_a_timeout_in_a_match_without_clocks_is_refused():
    g = Game().start()
    refused(g.s, Timeout(g.s.turn, 10**9), "NO_CLOCK")


def test_a_resignation_once_the_running_clock_fell_waits_for_the_timeout(worked):
    refused(worked.s, Resign(1, 11_000), "CLOCK_EXPIRED")
    ended = worked.do(Resign(1, 10_999))[0]
    assert (ended.reason, ended.forfeited_side, ended.cause, ended.at_ms) == (
        "forfeit",
        1,
        "resigned",
        10_999,
    )


# ----- state, view, fold, codec -------------------------------------------------------------


def test_the_view_shows_every_seats_clock(worked):
    clocks = view(worked.s, 1).clocks
    assert [(c.seat, c.left_ms, c.running, c.falls_at_ms) for c in clocks] == [
        (0, 10_000, True, 11_000),
        (1, 11_000, False, None),
    ]
    assert view(worked.s).at_ms == 1000
    assert view(Game().start().s).clocks == ()


def test_a_clocked_stream_with_every_event_type_folds_and_reads_back(crafted_deals):
    # Two void deals, a deal where seats draw and pass; the first seat to choose times out.
    crafted_deals({(1, 1): deals.VOID3, (1, 2): deals.PASS3})
    g = clocked(3, clock_initial=2, clock_increment=1).start()
    g.do(Timeout(g.s.running, g.s.due_at_ms))
    at = g.s.at_ms
    while g.s.phase != ENDED:
        at += 100
        tile, end = g.s.legal_plays(g.s.running)[-1]
        g.do(Play(g.s.running, tile, end, at_ms=at))
    assert {type(e) for e in g.events} == set(EVENT_TYPES)
    assert fold(g.events) == g.s
    back = [codec.decode(*codec.encode(e)) for e in g.events]
    assert back == g.events
    assert {codec.encode(e)[1] for e in of_type(g.events, TimedOut)} == {codec.BASE_VERSION}


def _clocked_play_payload() -> dict:
    name, version, payload = codec.encode(TilePlayed(1, 1, T("3-5"), End.LEFT, 4500, 8500))
    assert (name, version) == ("TilePlayed", codec.SCHEMA_VERSION)
    return payload


@pytest.mark.parametrize(
    ("version", "change"),
    [
        (1, {}),  # version 1 has no clock fields
        (2, {"at_ms": "4500"}),
        (2, {"clock_ms": None}),
        (2, {"auto": 1}),
        (2, {"at_ms": True}),
        (2, {"lag_ms": 3}),
        (3, {}),
    ],
)
def test_a_corrupt_clocked_payload_is_refused(version, change):
    from bergen.domain.errors import CorruptRecord

    with pytest.raises(CorruptRecord):
        codec.decode("TilePlayed", version, {**_clocked_play_payload(), **change})


def test_unclocked_events_are_written_as_version_1_with_no_clock_field():
    for event in (TilePlayed(1, 1, T("3-5"), End.LEFT), Passed(2, 0), TileDrawn(1, 0, None)):
        name, version, payload = codec.encode(event)
        assert version == codec.BASE_VERSION
        assert not {"at_ms", "clock_ms", "auto"} & set(payload)
        assert codec.decode(name, codec.SCHEMA_VERSION, payload) == event
