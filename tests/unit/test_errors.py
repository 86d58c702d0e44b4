"""Commands the rules refuse: each raises its named error and leaves the match as it was."""

from __future__ import annotations

import pytest

from bergen.domain.commands import Abandon, CreateMatch, Play, Resign, TakeSeat
from bergen.domain.engine import decide, execute
from bergen.domain.errors import (
    BergenError,
    IllegalPlay,
    InvalidArgument,
    MatchNotInProgress,
    NotYourTurn,
    RuleViolation,
    SeatUnavailable,
)
from bergen.domain.events import MatchEnded, SeedRevealed
from bergen.domain.rules import make_rules
from bergen.domain.state import ENDED, SEATING, fold
from bergen.domain.tiles import End

from . import deals
from .support import SEED, Game, T


def refused(g: Game, command, error):
    """`command` raises `error`; the state and the stream are as before."""
    before_state, before_events = g.state, list(g.events)
    with pytest.raises(error) as info:
        decide(g.state, command)
    assert g.state is before_state
    assert g.events == before_events
    assert fold(g.events) == g.state
    return str(info.value)


@pytest.fixture
def case2(crafted_deals) -> Game:
    # Lead 3-3 by seat 0; seat 1 to play, holding 3-5 1-3 0-6 2-6 5-6 0-1.
    crafted_deals({(1, 1): deals.CASE2})
    return Game().start()


def test_playing_out_of_turn_is_not_your_turn(case2):
    message = refused(case2, Play(0, T("1-5"), End.LEFT), NotYourTurn)
    assert "seat 1 is to play" in message and "m-1" in message


def test_a_tile_not_held_is_an_illegal_play(case2):
    message = refused(case2, Play(1, T("3-4"), End.LEFT), IllegalPlay)
    assert "does not hold 3-4" in message


def test_a_tile_that_fits_no_end_is_an_illegal_play(case2):
    message = refused(case2, Play(1, T("0-6"), None), IllegalPlay)
    assert "0-6" in message and "3|3" in message


def test_a_tile_laid_at_an_end_it_does_not_fit_is_an_illegal_play(case2):
    case2.play(1, "3-5", "left")  # 5|3*
    message = refused(case2, Play(0, T("1-5"), End.RIGHT), IllegalPlay)
    assert "right" in message
    case2.play(0, "1-5", "left")  # 1|3*
    refused(case2, Play(1, T("0-1"), End.RIGHT), IllegalPlay)


def test_a_tile_fitting_both_ends_needs_an_end(case2):
    message = refused(case2, Play(1, T("3-5"), None), IllegalPlay)
    assert "say which" in message
    case2.play(1, "3-5", "left")
    # 1-5 fits only the left end: the end may be left out.
    case2.play(0, "1-5", None)
    assert case2.s.ends == (1, 3, False, True)


def test_the_drawn_tile_must_be_played(crafted_deals):
    crafted_deals({(1, 1): deals.ONE_THEN_PASS})
    g = Game().start()
    assert g.s.must_play == T("3-5")
    message = refused(g, Play(1, T("0-4"), End.LEFT), IllegalPlay)
    assert "must play the tile it drew, 3-5" in message


def test_play_after_the_end_of_the_match(case2):
    case2.do(Abandon("test"))
    assert case2.s.phase == ENDED
    refused(case2, Play(1, T("3-5"), End.LEFT), MatchNotInProgress)
    refused(case2, Abandon(), MatchNotInProgress)
    refused(case2, Resign(0), MatchNotInProgress)
    refused(case2, TakeSeat("late"), MatchNotInProgress)


def test_play_before_every_seat_is_taken():
    g = Game().create()
    g.sit([0])
    refused(g, Play(0, T("0-0"), None), MatchNotInProgress)
    refused(g, Resign(0), MatchNotInProgress)


def test_commands_without_a_match():
    for command in (TakeSeat("a"), Play(0, T("0-0")), Resign(0), Abandon()):
        with pytest.raises(MatchNotInProgress):
            decide(None, command)


def test_creating_a_match_twice(case2):
    refused(case2, CreateMatch("m-1", 2, False, make_rules(2, False), SEED), MatchNotInProgress)


def test_a_taken_seat_is_unavailable():
    g = Game(3).create()
    g.sit([1])
    message = refused(g, TakeSeat("bob", "", 1), SeatUnavailable)
    assert "seat 1 is taken" in message
    # Without a seat number the lowest free seat is taken.
    g.do(TakeSeat("carol"))
    assert g.s.players[0] is not None and g.s.players[0].name == "carol"


def test_every_seat_taken(case2):
    refused(case2, TakeSeat("late"), SeatUnavailable)
    refused(case2, TakeSeat("late", "", 0), SeatUnavailable)


@pytest.mark.parametrize("seat", [-1, 2, 9, True, "0", 1.0])
def test_a_seat_out_of_range_or_not_a_number(seat):
    g = Game().create()
    refused(g, TakeSeat("bob", "", seat), InvalidArgument)


@pytest.mark.parametrize("name", ["", "   ", "a\x00b", "tab\tname", "x" * 65, None, 7, "\ud800"])
def test_bad_names(name):
    g = Game().create()
    refused(g, TakeSeat(name, ""), InvalidArgument)


@pytest.mark.parametrize("seed", ["x" * 257, "new\nline", None, b"bytes", 3])
def test_bad_client_seeds(seed):
    g = Game().create()
    refused(g, TakeSeat("bob", seed), InvalidArgument)


def test_good_names_and_client_seeds_are_kept():
    g = Game().create()
    g.do(TakeSeat("  żółw 🀱 ", "Δ" * 256, 0))
    player = g.s.players[0]
    assert player is not None and (player.name, player.client_seed) == ("żółw 🀱", "Δ" * 256)
    assert g.s.phase == SEATING


@pytest.mark.parametrize(
    "command",
    [
        CreateMatch("", 2, False, make_rules(2, False), SEED),
        CreateMatch("m" * 65, 2, False, make_rules(2, False), SEED),
        CreateMatch("m\x01", 2, False, make_rules(2, False), SEED),
        CreateMatch("m", 2, False, make_rules(2, False), b"short"),
        CreateMatch("m", 2, False, make_rules(2, False), "00" * 32),  # type: ignore[arg-type]
        CreateMatch("m", 2, False, make_rules(2, False), SEED, name="n" * 101),
    ],
)
def test_bad_create_match(command):
    with pytest.raises(InvalidArgument):
        decide(None, command)


def test_bad_play_arguments(case2):
    refused(case2, Play(1, "3-5", End.LEFT), InvalidArgument)  # type: ignore[arg-type]
    refused(case2, Play(1, T("3-5"), "left"), InvalidArgument)  # type: ignore[arg-type]
    # True == 1, but a seat is a number: the event would not decode.
    refused(case2, Play(True, T("3-5"), End.LEFT), InvalidArgument)  # type: ignore[arg-type]
    refused(case2, Play("1", T("3-5"), End.LEFT), InvalidArgument)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("partnerships", "rules"),
    [(1, make_rules(4, True)), (None, make_rules(4, False)), (False, {"lead": "lowest_double"})],
)
def test_create_match_needs_a_bool_and_a_rules_value(partnerships, rules):
    with pytest.raises(InvalidArgument):
        decide(None, CreateMatch("m", 4, partnerships, rules, SEED))


def test_resign_ends_the_match_and_reveals_the_seed(case2):
    events = case2.do(Resign(1))
    ended = events[0]
    assert isinstance(ended, MatchEnded)
    assert (ended.reason, ended.winner_side, ended.resigned_seat) == ("abandoned", None, 1)
    assert isinstance(events[-1], SeedRevealed) and events[-1].server_seed == SEED.hex()
    refused(case2, Resign(0), MatchNotInProgress)


@pytest.mark.parametrize("seat", [-1, 2, True])
def test_resign_of_a_seat_not_in_the_match(case2, seat):
    refused(case2, Resign(seat), InvalidArgument)


def test_errors_are_one_hierarchy():
    for error in (NotYourTurn, IllegalPlay, MatchNotInProgress, SeatUnavailable):
        assert issubclass(error, RuleViolation)
    assert issubclass(RuleViolation, BergenError) and issubclass(InvalidArgument, BergenError)


def test_execute_returns_the_state_its_events_fold_to(case2):
    events, state = execute(case2.s, Play(1, T("3-5"), End.LEFT))
    assert fold(events, case2.s) == state
