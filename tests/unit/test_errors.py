"""Commands the rules refuse: each raises its named error and leaves the match as it was."""

from __future__ import annotations

import pickle
import re

import pytest

from bergen.domain import errors
from bergen.domain.commands import Abandon, CreateMatch, Play, Resign, TakeSeat
from bergen.domain.engine import decide, execute
from bergen.domain.errors import (
    BergenError,
    IllegalPlay,
    InvalidArgument,
    InvalidOptions,
    MatchNotInProgress,
    NotYourTurn,
    RuleViolation,
    SeatUnavailable,
    shown,
)
from bergen.domain.events import MatchEnded, SeedRevealed
from bergen.domain.rules import make_rules
from bergen.domain.state import ENDED, SEATING, fold
from bergen.domain.tiles import End

from . import deals
from .support import SEED, Game, T


def refused(g: Game, command, error, reason: str | None = None):
    """`command` raises `error` (with `reason`, when given); the state and the stream are as
    before."""
    before_state, before_events = g.state, list(g.events)
    with pytest.raises(error) as info:
        decide(g.state, command)
    assert g.state is before_state
    assert g.events == before_events
    assert fold(g.events) == g.state
    if reason is not None:
        assert info.value.reason == reason
    return str(info.value)


@pytest.fixture
def case2(crafted_deals) -> Game:
    # Lead 3-3 by seat 0; seat 1 to play, holding 3-5 1-3 0-6 2-6 5-6 0-1.
    crafted_deals({(1, 1): deals.CASE2})
    return Game().start()


def test_playing_out_of_turn_is_not_your_turn(case2):
    with pytest.raises(NotYourTurn) as info:
        decide(case2.state, Play(0, T("1-5"), End.LEFT))
    assert (info.value.reason, info.value.metadata) == (
        "NOT_YOUR_TURN",
        {"match_id": "m-1", "seat": "0"},
    )
    message = refused(case2, Play(0, T("1-5"), End.LEFT), NotYourTurn, "NOT_YOUR_TURN")
    assert "seat 1 is to play" in message and "m-1" in message


def test_a_tile_not_held_is_an_illegal_play(case2):
    message = refused(case2, Play(1, T("3-4"), End.LEFT), IllegalPlay, "TILE_NOT_HELD")
    assert "does not hold 3-4" in message


def test_a_tile_that_fits_no_end_is_an_illegal_play(case2):
    message = refused(case2, Play(1, T("0-6"), None), IllegalPlay, "TILE_DOES_NOT_FIT")
    assert "0-6" in message and "3|3" in message


def test_a_tile_laid_at_an_end_it_does_not_fit_is_an_illegal_play(case2):
    case2.play(1, "3-5", "left")  # 5|3*
    message = refused(case2, Play(0, T("1-5"), End.RIGHT), IllegalPlay, "TILE_DOES_NOT_FIT")
    assert "right" in message
    case2.play(0, "1-5", "left")  # 1|3*
    refused(case2, Play(1, T("0-1"), End.RIGHT), IllegalPlay)


def test_a_tile_fitting_both_ends_needs_an_end(case2):
    message = refused(case2, Play(1, T("3-5"), None), IllegalPlay, "END_REQUIRED")
    assert "say which" in message
    case2.play(1, "3-5", "left")
    # 1-5 fits only the left end: the end may be left out.
    case2.play(0, "1-5", None)
    assert case2.s.ends == (1, 3, False, True)


def test_the_drawn_tile_must_be_played(crafted_deals):
    crafted_deals({(1, 1): deals.ONE_THEN_PASS})
    g = Game().start()
    assert g.s.must_play == T("3-5")
    message = refused(g, Play(1, T("0-4"), End.LEFT), IllegalPlay, "MUST_PLAY_DRAWN_TILE")
    assert "must play the tile it drew, 3-5" in message


def test_play_after_the_end_of_the_match(case2):
    case2.do(Abandon("test"))
    assert case2.s.phase == ENDED
    refused(case2, Play(1, T("3-5"), End.LEFT), MatchNotInProgress, "MATCH_ENDED")
    refused(case2, Abandon(), MatchNotInProgress, "MATCH_ENDED")
    refused(case2, Resign(0), MatchNotInProgress, "MATCH_ENDED")
    refused(case2, TakeSeat("late"), MatchNotInProgress, "MATCH_ENDED")


def test_play_before_every_seat_is_taken():
    g = Game().create()
    g.sit([0])
    refused(g, Play(0, T("0-0"), None), MatchNotInProgress, "MATCH_NOT_IN_PROGRESS")
    refused(g, Resign(0), MatchNotInProgress, "MATCH_NOT_IN_PROGRESS")


def test_commands_without_a_match():
    for command in (TakeSeat("a"), Play(0, T("0-0")), Resign(0), Abandon()):
        with pytest.raises(MatchNotInProgress) as info:
            decide(None, command)
        assert info.value.reason == "MATCH_NOT_FOUND"


def test_creating_a_match_twice(case2):
    refused(
        case2,
        CreateMatch("m-1", 2, False, make_rules(2, False), SEED),
        MatchNotInProgress,
        "MATCH_EXISTS",
    )


def test_a_taken_seat_is_unavailable():
    g = Game(3).create()
    g.sit([1])
    message = refused(g, TakeSeat("bob", "", 1), SeatUnavailable, "SEAT_TAKEN")
    assert "seat 1 is taken" in message
    # Without a seat number the lowest free seat is taken.
    g.do(TakeSeat("carol"))
    assert g.s.players[0] is not None and g.s.players[0].name == "carol"


def test_every_seat_taken(case2):
    refused(case2, TakeSeat("late"), SeatUnavailable, "MATCH_FULL")
    refused(case2, TakeSeat("late", "", 0), SeatUnavailable, "MATCH_FULL")


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
    assert (ended.reason, ended.winner_side, ended.resigned_seat) == ("forfeit", 0, 1)
    assert (ended.forfeited_side, ended.cause) == (1, "resigned")
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


STATUS_AND_REASON = {
    errors.InvalidArgument: ("INVALID_ARGUMENT", "INVALID_ARGUMENT"),
    errors.InvalidOptions: ("INVALID_ARGUMENT", "INVALID_OPTIONS"),
    errors.CorruptRecord: ("DATA_LOSS", "CORRUPT_RECORD"),
    errors.LogTampered: ("DATA_LOSS", "LOG_TAMPERED"),
    errors.LogRolledBack: ("DATA_LOSS", "LOG_ROLLED_BACK"),
    errors.OutOfRange: ("OUT_OF_RANGE", "OUT_OF_RANGE"),
    errors.Unimplemented: ("UNIMPLEMENTED", "UNIMPLEMENTED"),
    errors.NotFound: ("NOT_FOUND", "NOT_FOUND"),
    errors.AlreadyExists: ("ALREADY_EXISTS", "ALREADY_EXISTS"),
    errors.Unauthenticated: ("UNAUTHENTICATED", "UNAUTHENTICATED"),
    errors.PermissionDenied: ("PERMISSION_DENIED", "PERMISSION_DENIED"),
    errors.RuleViolation: ("FAILED_PRECONDITION", "RULE_VIOLATION"),
    errors.MatchNotInProgress: ("FAILED_PRECONDITION", "MATCH_NOT_IN_PROGRESS"),
    errors.SeatUnavailable: ("FAILED_PRECONDITION", "SEAT_TAKEN"),
    errors.NotYourTurn: ("FAILED_PRECONDITION", "NOT_YOUR_TURN"),
    errors.IllegalPlay: ("FAILED_PRECONDITION", "ILLEGAL_PLAY"),
    errors.ClockViolation: ("FAILED_PRECONDITION", "CLOCK_EXPIRED"),
    errors.MatchArchived: ("FAILED_PRECONDITION", "MATCH_ARCHIVED"),
    errors.ConcurrencyConflict: ("ABORTED", "STALE_VERSION"),
    errors.StorageUnavailable: ("UNAVAILABLE", "STORAGE_UNAVAILABLE"),
    errors.ResourceExhausted: ("RESOURCE_EXHAUSTED", "RESOURCE_EXHAUSTED"),
    errors.DeadlineExceeded: ("DEADLINE_EXCEEDED", "DEADLINE_EXCEEDED"),
}


def _every_error_class() -> set[type[BergenError]]:
    found: set[type[BergenError]] = set()
    todo = [BergenError]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub.__module__ == errors.__name__:
                found.add(sub)
                todo.append(sub)
    return found


def test_every_error_class_carries_its_status_and_reason():
    assert _every_error_class() == set(STATUS_AND_REASON)
    for kind, (status, reason) in STATUS_AND_REASON.items():
        error = kind("why")
        assert (kind.status, error.reason, str(error)) == (status, reason, "why")
        assert status in errors.STATUSES


def test_a_raise_site_names_its_own_reason_and_what_it_concerns():
    error = IllegalPlay("no", reason="TILE_DOES_NOT_FIT", match_id="m-1", seat=2, void=None)
    assert (error.status, error.reason) == ("FAILED_PRECONDITION", "TILE_DOES_NOT_FIT")
    assert error.metadata == {"match_id": "m-1", "seat": "2"}
    assert IllegalPlay("no").reason == "ILLEGAL_PLAY"


def test_reasons_are_upper_snake_words():
    for kind in STATUS_AND_REASON:
        assert re.fullmatch(r"[A-Z][A-Z0-9_]*[A-Z0-9]", kind.default_reason), kind


def test_an_error_keeps_its_reason_and_metadata_through_pickling():
    error = NotYourTurn("seat 1 is to play", reason="NOT_YOUR_TURN", match_id="m", seat=0)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is NotYourTurn
    assert (str(copy), copy.reason, copy.metadata) == (str(error), error.reason, error.metadata)


def test_a_long_value_is_never_repeated_whole():
    assert shown("short") == "'short'"
    long = shown("x" * 60_000)
    assert len(long) < 80 and "60002 characters" in long


def test_an_unknown_preset_of_60_kb_comes_back_short():
    with pytest.raises(InvalidOptions) as info:
        make_rules(2, False, "p" * 60_000)
    assert info.value.reason == "UNKNOWN_PRESET"
    assert len(str(info.value)) < 200
    with pytest.raises(InvalidOptions) as info:
        make_rules(2, False, None, {"o" * 60_000: 1})
    assert info.value.reason == "UNKNOWN_OPTION"
    assert len(str(info.value)) < 300
