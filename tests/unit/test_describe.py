"""`describe`: one line of English for every type of event, the words every client shows."""

from __future__ import annotations

import pytest

from bergen.domain.describe import (
    SeatRef,
    SideRef,
    describe,
    join,
    phrase,
    step_kind,
)
from bergen.domain.events import (
    EVENT_TYPES,
    Dealt,
    DealVoided,
    Event,
    HandEnded,
    MatchCreated,
    MatchEnded,
    Passed,
    PointsScored,
    SeatTaken,
    SeedRevealed,
    TileDrawn,
    TilePlayed,
    TimedOut,
)
from bergen.domain.rules import make_rules
from bergen.domain.tiles import End
from bergen.domain.vocabulary import (
    ForfeitCause,
    HandEndReason,
    MatchEndReason,
    PointsReason,
    StepKind,
)

from .support import T, tiles

SEED = "ab" * 32

CASES: list[tuple[Event, str]] = [
    (
        MatchCreated("m1", 4, True, make_rules(4, True, "eastern"), SEED, "", None),
        "match m1 created: 4 seats in partnerships, preset eastern, target 15",
    ),
    (SeatTaken(2, "ann", ""), "seat 3 taken by 'ann'"),
    (Dealt(1, 2, (tiles("0-0"), tiles("1-2")), tiles("3-3")), "hand 1, deal 2 dealt"),
    (DealVoided(3, 1), "hand 3, deal 1: void, no seat holds a double; dealt again"),
    (TilePlayed(1, 0, T("3-3"), None), "seat 1 leads 3-3"),
    (TilePlayed(1, 1, T("3-5"), End.LEFT), "seat 2 plays 3-5 left"),
    (TileDrawn(1, 1, T("0-4")), "seat 2 draws 0-4"),
    (TileDrawn(1, 1, None), "seat 2 draws a tile"),
    (Passed(2, 3), "seat 4 passes"),
    (
        PointsScored(1, 0, 2, PointsReason.TRIPLE_HEADER, 3, 2),
        "side 1 scores +2 triple header (3 cut to 2 near the target)",
    ),
    (PointsScored(1, 1, 2, PointsReason.DOMINO, 2, 1), "side 2 scores +2 going out"),
    (HandEnded(4, HandEndReason.DOMINO, 1, 2, (3, 6)), "hand 4 ends: side 2 went out"),
    (
        HandEnded(4, HandEndReason.BLOCKED, None, 0, (3, 4)),
        "hand 4 ends: blocked: only the reserve is left and nobody can play; a tie, nobody scores",
    ),
    (
        HandEnded(2, HandEndReason.MATCH_OVER, None, 0, (15, 4)),
        "hand 2 ends: the target is reached: the hand stops here",
    ),
    (
        MatchEnded(MatchEndReason.TARGET, 1, (9, 15), None, ""),
        "the match ends: side 2 wins; scores 9-15",
    ),
    (
        MatchEnded(MatchEndReason.ABANDONED, None, (0, 2), 1, "seat 1 resigned"),
        "the match ends: abandoned, no winner (seat 2 resigned); scores 0-2",
    ),
    (
        MatchEnded(
            MatchEndReason.FORFEIT, 0, (3, 2), 1, "seat 1 resigned", 1, ForfeitCause.RESIGNED
        ),
        "the match ends: side 2 forfeits (seat 2 resigned); side 1 wins; scores 3-2",
    ),
    (
        MatchEnded(
            MatchEndReason.FORFEIT, None, (4, 0, 4), None, "", 1, ForfeitCause.TIMEOUT, 9000
        ),
        "the match ends: side 2 forfeits (out of time); no winner; scores 4-0-4",
    ),
    (TimedOut(3, 1, 125_300), "seat 2 runs out of time (2:05.3 into the match)"),
    (
        TilePlayed(2, 0, T("0-1"), End.LEFT, 11_000, 2000, True),
        "seat 1 plays 0-1 left automatically",
    ),
    (
        MatchEnded(MatchEndReason.ABANDONED, None, (0, 0), None, "rain"),
        "the match ends: abandoned, no winner (rain); scores 0-0",
    ),
    (SeedRevealed(SEED), f"the server seed revealed: {SEED}"),
]


def test_the_cases_cover_every_event_type() -> None:
    assert {type(e) for e, _ in CASES} == set(EVENT_TYPES)


@pytest.mark.parametrize(("event", "words"), CASES, ids=[w for _, w in CASES])
def test_describe_tells_each_event_in_one_line(event: Event, words: str) -> None:
    assert describe(event) == words
    assert "\n" not in words


def test_seats_and_sides_are_named_by_the_caller() -> None:
    played = TilePlayed(1, 1, T("3-5"), End.RIGHT)
    assert phrase(played) == (SeatRef(1), " plays 3-5 right")
    assert describe(played, seat_name=lambda s: ["ann", "bob"][s]) == "bob plays 3-5 right"
    won = MatchEnded(MatchEndReason.TARGET, 0, (15, 3), None, "")
    assert SideRef(0) in phrase(won)
    assert join(phrase(won), side_name=lambda s: f"team {'AB'[s]}") == (
        "the match ends: team A wins; scores 15-3"
    )


def test_with_hand_puts_the_hand_in_front_of_an_event_that_does_not_say_it() -> None:
    assert describe(Passed(2, 3), with_hand=True) == "hand 2: seat 4 passes"
    assert describe(DealVoided(3, 1), with_hand=True).startswith("hand 3, deal 1")
    assert describe(SeatTaken(0, "ann", ""), with_hand=True) == "seat 1 taken by 'ann'"


def test_a_reason_given_as_its_plain_word_reads_the_same() -> None:
    # Events built from decoded text and from the enum are equal, and told alike.
    plain = PointsScored(1, 0, 2, "double_header", 2, 0)  # type: ignore[arg-type]
    assert describe(plain) == describe(PointsScored(1, 0, 2, PointsReason.DOUBLE_HEADER, 2, 0))


@pytest.mark.parametrize(
    ("event", "kind"),
    [
        (Dealt(1, 1, (), ()), StepKind.DEAL),
        (TilePlayed(1, 0, T("3-3"), None), StepKind.LEAD),
        (TilePlayed(1, 0, T("3-4"), End.LEFT), StepKind.PLAY),
        (TileDrawn(1, 0, None), StepKind.DRAW),
        (Passed(1, 0), StepKind.PASS),
        (HandEnded(1, HandEndReason.DOMINO, 0, 2, (2, 0)), StepKind.HAND_END),
        (MatchEnded(MatchEndReason.TARGET, 0, (15, 0), None, ""), StepKind.MATCH_END),
        (DealVoided(1, 1), None),
        (PointsScored(1, 0, 2, PointsReason.DOMINO, 2, 0), None),
        (SeedRevealed(SEED), None),
    ],
)
def test_step_kind_of_each_event(event: Event, kind: StepKind | None) -> None:
    assert step_kind(event) is kind
