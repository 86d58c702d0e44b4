"""Events: the facts of a match, in the order they happened. Frozen; tuples inside.

Hidden content is `None` in a redacted copy of an event (see `views.redact_event`), so one
`fold` serves full and partial knowledge alike.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .frozen import fast_init
from .rules import Rules
from .tiles import End, Tile
from .vocabulary import ForfeitCause, HandEndReason, MatchEndReason, PointsReason


@dataclass(frozen=True, slots=True)
class MatchCreated:
    """A match with its seats, rules and the commitment to its server seed.

    `server_seed` (hex) is the server's secret: no viewer sees it before `SeedRevealed`.
    `rated`: its end counts for its players' ratings (RATINGS.md section 2): every seat must
    be taken by a registered player, none twice.
    """

    match_id: str
    seats: int
    partnerships: bool
    rules: Rules
    commitment: str
    name: str
    server_seed: str | None
    rated: bool = False


@dataclass(frozen=True, slots=True)
class SeatTaken:
    """`player`: the registered player who took the seat (its `player_id`, RATINGS.md), and
    `bot` whether that player is a program; "" and false for a seat taken by a name alone."""

    seat: int
    name: str
    client_seed: str
    player: str = ""
    bot: bool = False


@dataclass(frozen=True, slots=True)
class Dealt:
    """One deal attempt of a hand: each seat's tiles and the boneyard in draw order."""

    hand: int
    attempt: int
    hands: tuple[tuple[Tile | None, ...], ...]
    boneyard: tuple[Tile | None, ...]


@dataclass(frozen=True, slots=True)
class DealVoided:
    """The attempt left no seat a double to lead (RULES.md section 2): it is dealt again."""

    hand: int
    attempt: int


@dataclass(frozen=True, slots=True)
class TilePlayed:
    """A tile laid on the line; `end` is None for the first tile of a hand (the lead).

    In a clocked match (RULES.md section 11) `at_ms` is when it was recorded, `clock_ms` the
    seat's time left after it (increment included; unchanged by the forced lead), and `auto`
    marks the play a timeout made for the seat. All three are unset without a clock.
    """

    hand: int
    seat: int
    tile: Tile
    end: End | None
    at_ms: int | None = None
    clock_ms: int | None = None
    auto: bool = False


@dataclass(frozen=True, slots=True)
class TileDrawn:
    """`at_ms` is set in a clocked match only, as for every action."""

    hand: int
    seat: int
    tile: Tile | None
    at_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Passed:
    """`at_ms` is set in a clocked match only, as for every action."""

    hand: int
    seat: int
    at_ms: int | None = None


@dataclass(frozen=True, slots=True)
class TimedOut:
    """`seat`'s clock ran out before its play (RULES.md section 11); what follows is the
    automatic play, or the forfeit of its side. `at_ms` is when the server recorded it, at
    or after the instant the clock fell."""

    hand: int
    seat: int
    at_ms: int


@dataclass(frozen=True, slots=True)
class PointsScored:
    """Points to a side, and why. `base` is the value before the near-target reduction
    (RULES.md section 5)."""

    hand: int
    side: int
    points: int
    reason: PointsReason
    base: int
    seat: int | None


@dataclass(frozen=True, slots=True)
class HandEnded:
    """`side` won `points` (None / 0 when nobody)."""

    hand: int
    reason: HandEndReason
    side: int | None
    points: int
    scores: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class MatchEnded:
    """`resigned_seat` is set when a seat resigned.

    A forfeit (RULES.md section 11) names the `forfeited_side` and its `cause`, and in a
    clocked match `at_ms`; those three are unset for any other end. `holders` is set at the
    end of a rated match by its target or a forfeit.
    """

    reason: MatchEndReason
    winner_side: int | None
    scores: tuple[int, ...]
    resigned_seat: int | None
    note: str
    forfeited_side: int | None = None
    cause: ForfeitCause | None = None
    at_ms: int | None = None
    holders: tuple[tuple[str, str, bool], ...] = ()
    """A rated match's seat holders, seat by seat: each one's player id, name and bot flag
    as its SeatTaken gave them, at an end that rates it (by its target or a forfeit; empty
    at any other end, and in a match not rated).
    The end of a rated match thus says on its own who it rates: the ratings read it alone."""


@dataclass(frozen=True, slots=True)
class SeedRevealed:
    server_seed: str


Event = (
    MatchCreated
    | SeatTaken
    | Dealt
    | DealVoided
    | TilePlayed
    | TileDrawn
    | Passed
    | TimedOut
    | PointsScored
    | HandEnded
    | MatchEnded
    | SeedRevealed
)

EVENT_TYPES: tuple[type[Event], ...] = (
    MatchCreated,
    SeatTaken,
    Dealt,
    DealVoided,
    TilePlayed,
    TileDrawn,
    Passed,
    PointsScored,
    HandEnded,
    MatchEnded,
    SeedRevealed,
    TimedOut,
)


for _cls in EVENT_TYPES:
    fast_init(_cls)


INTERNED_HANDS = 64
"""Plays, draws and passes without a clock in the first hands of a match are built once and
shared (`played`, `drawn`, `passed`): an event is a frozen value, so one object serves every
match that records the same fact, and building one costs about as much as a fifth of a move.
At most 64 x 4 seats x (84 plays + 29 draws + 1 pass) small objects."""

PLAYED_BY_HAND: list[list[TilePlayed | None]] = [[None] * (4 * 84) for _ in range(INTERNED_HANDS)]
"""By hand, then (seat * 28 + tile index) * 3 + (0 for the lead, 1 left, 2 right)."""
DRAWN_BY_HAND: list[list[TileDrawn | None]] = [[None] * (4 * 29) for _ in range(INTERNED_HANDS)]
"""By hand, then seat * 29 + tile index (28 for a hidden tile)."""
PASSED_BY_HAND: list[list[Passed]] = [
    [Passed(h, s) for s in range(4)] for h in range(INTERNED_HANDS)
]
_DRAWN = DRAWN_BY_HAND
_PASSED = PASSED_BY_HAND
_LEFT = End.LEFT
_RIGHT = End.RIGHT


def played(hand: int, seat: int, tile: Tile, end: End | None) -> TilePlayed:
    """`TilePlayed(hand, seat, tile, end)` of a match without a clock."""
    if 0 <= hand < INTERNED_HANDS and 0 <= seat < 4 and type(tile) is Tile:
        row = PLAYED_BY_HAND[hand]
        k = (seat * 28 + tile.index) * 3 + (0 if end is None else 1 if end is _LEFT else 2)
        event = row[k]
        if event is None:
            event = row[k] = TilePlayed(hand, seat, tile, end)
        return event
    return TilePlayed(hand, seat, tile, end)


def drawn(hand: int, seat: int, tile: Tile | None) -> TileDrawn:
    """`TileDrawn(hand, seat, tile)` of a match without a clock."""
    if 0 <= hand < INTERNED_HANDS and 0 <= seat < 4 and (tile is None or type(tile) is Tile):
        row = _DRAWN[hand]
        k = seat * 29 + (28 if tile is None else tile.index)
        event = row[k]
        if event is None:
            event = row[k] = TileDrawn(hand, seat, tile)
        return event
    return TileDrawn(hand, seat, tile)


def passed(hand: int, seat: int) -> Passed:
    """`Passed(hand, seat)` of a match without a clock."""
    if 0 <= hand < INTERNED_HANDS and 0 <= seat < 4:
        return _PASSED[hand][seat]
    return Passed(hand, seat)


def as_logged_then(logged: Event, given: Event) -> Event:
    """`given` (what the rules give) as it was written when `logged` was: a rated match's end
    without its holders where the logged end has none, written before ends named them.
    Anything else as given."""
    if type(logged) is MatchEnded and not logged.holders and type(given) is MatchEnded:
        return replace(given, holders=())
    return given
