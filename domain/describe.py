"""Events in English: the one place the words for what happened in a match come from.

`phrase(event)` gives the words with the seats and sides left as `SeatRef` / `SideRef`, so
that a caller names them its own way (a replay colours each side, the terminal client says
"you"); `describe(event)` joins them into one line with seats and sides by number. The
pieces a listing lays out on rows of their own (the points and why, how a hand or the match
ended) are here too, and `phrase` is built from them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .events import (
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
from .tiles import Tile
from .vocabulary import ForfeitCause, HandEndReason, MatchEndReason, PointsReason, StepKind


@dataclass(frozen=True, slots=True)
class SeatRef:
    """A seat, for the caller to name."""

    seat: int


@dataclass(frozen=True, slots=True)
class SideRef:
    """A side, for the caller to name."""

    side: int


Word = str | SeatRef | SideRef
Phrase = tuple[Word, ...]

POINTS_WORDS: Mapping[str, str] = {
    PointsReason.DOUBLE_HEADER: "double header",
    PointsReason.TRIPLE_HEADER: "triple header",
    PointsReason.DOUBLE_BONUS: "double bonus",
    PointsReason.DOMINO: "going out",
    PointsReason.BLOCKED: "blocked hand",
}
VOID_WORDS = "void, no seat holds a double; dealt again"


def seat_number(seat: int) -> str:
    """Seat index 0 as people read it: `seat 1` (the API and records count from 0)."""
    return f"seat {seat + 1}"


def side_number(side: int) -> str:
    """Side index 0 as people read it: `side 1`."""
    return f"side {side + 1}"


def step_kind(event: Event) -> StepKind | None:
    """The kind of step `event` is told as, or None for an event that is no step of its own
    (seating, a void deal, points, the seed's reveal)."""
    if isinstance(event, TilePlayed):
        return StepKind.LEAD if event.end is None else StepKind.PLAY
    if isinstance(event, TileDrawn):
        return StepKind.DRAW
    if isinstance(event, Passed):
        return StepKind.PASS
    if isinstance(event, TimedOut):
        return StepKind.TIMEOUT
    if isinstance(event, Dealt):
        return StepKind.DEAL
    if isinstance(event, HandEnded):
        return StepKind.HAND_END
    if isinstance(event, MatchEnded):
        return StepKind.MATCH_END
    return None


def points_words(e: PointsScored) -> str:
    """`+2 double header`, and `(3 cut to 2 near the target)` when the reduction cut them."""
    words = f"+{e.points} {POINTS_WORDS.get(e.reason, str(e.reason))}"
    if e.base > e.points:
        words += f" ({e.base} cut to {e.points} near the target)"
    return words


def draws_words(tiles: Sequence[Tile | None]) -> str:
    """`draws 3-5`, `draws a tile` (hidden), or for a run `draws 3 tiles: 0-1 2-4`."""
    if len(tiles) == 1:
        return f"draws {tiles[0] if tiles[0] is not None else 'a tile'}"
    shown = " ".join(str(t) for t in tiles if t is not None)
    return f"draws {len(tiles)} tiles" + (f": {shown}" if shown else "")


def hand_end_words(e: HandEnded) -> Phrase:
    """How the hand ended: `bob went out`, `blocked: ...`, `the target is reached: ...`."""
    if e.reason == HandEndReason.DOMINO:
        return ("a seat went out",) if e.side is None else (SideRef(e.side), " went out")
    if e.reason == HandEndReason.BLOCKED:
        if e.side is None:
            return ("blocked: only the reserve is left and nobody can play; a tie, nobody scores",)
        return ("blocked: only the reserve is left and nobody can play",)
    if e.reason == HandEndReason.MATCH_OVER:
        return ("the target is reached: the hand stops here",)
    return (f"the hand ends ({e.reason})",)


def clock_words(ms: int) -> str:
    """A clock reading: `8.5 s`, `2:05.0`."""
    tenths = ms // 100
    minutes, tenths = divmod(tenths, 600)
    if minutes:
        return f"{minutes}:{tenths // 10:02d}.{tenths % 10}"
    return f"{tenths // 10}.{tenths % 10} s"


def result_words(e: MatchEnded) -> Phrase:
    """Who won, or why nobody did: `bob wins`, `side 1 forfeits (ann resigned); side 0
    wins`, `abandoned, no winner`."""
    if e.reason == MatchEndReason.TARGET and e.winner_side is not None:
        return (SideRef(e.winner_side), " wins")
    if e.reason == MatchEndReason.FORFEIT and e.forfeited_side is not None:
        why: Phrase
        if e.cause == ForfeitCause.RESIGNED and e.resigned_seat is not None:
            why = (" (", SeatRef(e.resigned_seat), " resigned)")
        elif e.cause == ForfeitCause.TIMEOUT:
            why = (" (out of time)",)
        else:
            why = ()
        winner: Phrase = (
            (SideRef(e.winner_side), " wins") if e.winner_side is not None else ("no winner",)
        )
        return (SideRef(e.forfeited_side), " forfeits", *why, "; ", *winner)
    if e.reason == MatchEndReason.ABANDONED:
        if e.resigned_seat is not None:
            return ("abandoned, no winner (", SeatRef(e.resigned_seat), " resigned)")
        return ("abandoned, no winner" + (f" ({e.note})" if e.note else ""),)
    return (f"{e.reason}, no winner",)


def scores_words(scores: Sequence[int]) -> str:
    return "-".join(str(s) for s in scores)


def phrase(e: Event) -> Phrase:
    """The words that tell `e`, seats and sides left as references."""
    if isinstance(e, TilePlayed):
        if e.end is None:
            return (SeatRef(e.seat), f" leads {e.tile}")
        if e.auto:
            return (SeatRef(e.seat), f" plays {e.tile} {e.end.value} automatically")
        return (SeatRef(e.seat), f" plays {e.tile} {e.end.value}")
    if isinstance(e, TimedOut):
        return (SeatRef(e.seat), f" runs out of time ({clock_words(e.at_ms)} into the match)")
    if isinstance(e, TileDrawn):
        return (SeatRef(e.seat), f" {draws_words((e.tile,))}")
    if isinstance(e, Passed):
        return (SeatRef(e.seat), " passes")
    if isinstance(e, PointsScored):
        return (SideRef(e.side), f" scores {points_words(e)}")
    if isinstance(e, Dealt):
        return (f"hand {e.hand}, deal {e.attempt} dealt",)
    if isinstance(e, DealVoided):
        return (f"hand {e.hand}, deal {e.attempt}: {VOID_WORDS}",)
    if isinstance(e, HandEnded):
        return (f"hand {e.hand} ends: ", *hand_end_words(e))
    if isinstance(e, MatchEnded):
        return ("the match ends: ", *result_words(e), f"; scores {scores_words(e.scores)}")
    if isinstance(e, SeatTaken):
        return (f"{seat_number(e.seat)} taken by {e.name!r}",)
    if isinstance(e, MatchCreated):
        sides = " in partnerships" if e.partnerships else ""
        return (
            f"match {e.match_id} created: {e.seats} seats{sides}, preset {e.rules.preset}, "
            f"target {e.rules.target}",
        )
    if isinstance(e, SeedRevealed):
        return (f"the server seed revealed: {e.server_seed}",)
    return (type(e).__name__,)


def join(
    words: Phrase,
    seat_name: Callable[[int], str] = seat_number,
    side_name: Callable[[int], str] = side_number,
) -> str:
    """`words` as one string, each seat and side named by the functions given."""
    out: list[str] = []
    for w in words:
        if isinstance(w, SeatRef):
            out.append(seat_name(w.seat))
        elif isinstance(w, SideRef):
            out.append(side_name(w.side))
        else:
            out.append(w)
    return "".join(out)


_SAYS_ITS_HAND = (Dealt, DealVoided, HandEnded)


def describe(
    e: Event,
    seat_name: Callable[[int], str] = seat_number,
    side_name: Callable[[int], str] = side_number,
    with_hand: bool = False,
) -> str:
    """`e` in one line of English: `seat 1 plays 3-5 left`, `side 0 scores +2 double header`.

    With `with_hand`, an event of a hand that does not already say which starts with
    `hand N: `."""
    text = join(phrase(e), seat_name, side_name)
    hand = getattr(e, "hand", None)
    if with_hand and hand is not None and not isinstance(e, _SAYS_ITS_HAND):
        return f"hand {hand}: {text}"
    return text
