"""Match state and the one way to build it: `evolve` each event, `fold` a stream.

`evolve` applies a fact and never checks it; the checks live in `engine.decide`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from typing import Any, TypeVar

from .errors import CorruptRecord
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
)
from .rules import Rules
from .scoring import place
from .tiles import RESERVE, End, Tile, side_of, sides_of

SEATING = "seating"
PLAYING = "playing"
ENDED = "ended"


@dataclass(frozen=True, slots=True)
class Player:
    name: str
    client_seed: str


@dataclass(frozen=True, slots=True)
class State:
    """Everything known about a match after some prefix of its events.

    Tiles unknown to the viewer whose events were folded are `None`.
    """

    match_id: str
    seats: int
    partnerships: bool
    rules: Rules
    commitment: str
    name: str
    server_seed: str | None
    players: tuple[Player | None, ...]
    phase: str = SEATING
    hand: int = 0
    attempt: int = 0
    hands: tuple[tuple[Tile | None, ...], ...] = ()
    boneyard: tuple[Tile | None, ...] = ()
    line: tuple[tuple[int, int], ...] = ()
    ends: tuple[int, int, bool, bool] | None = None
    turn: int | None = None
    must_play: Tile | None = None
    scores: tuple[int, ...] = ()
    hand_over: bool = True
    result: MatchEnded | None = None
    version: int = 0

    @property
    def sides(self) -> tuple[tuple[int, ...], ...]:
        return sides_of(self.seats, self.partnerships)

    def side_of(self, seat: int) -> int:
        return side_of(seat, self.partnerships)

    @property
    def drawable(self) -> int:
        """Tiles that may still be drawn: the boneyard less the reserve."""
        return max(0, len(self.boneyard) - RESERVE)

    def fits(self, tile: Tile) -> bool:
        ends = self.ends
        return ends is not None and (tile.has(ends[0]) or tile.has(ends[1]))

    def holds_fitting(self, seat: int) -> bool:
        ends = self.ends
        if ends is None:
            return False
        left, right = ends[0], ends[1]
        for t in self.hands[seat]:
            if t is not None and (t.low in (left, right) or t.high in (left, right)):
                return True
        return False

    def legal_plays(self, seat: int) -> tuple[tuple[Tile, End], ...]:
        """Every (tile, end) the seat may play now; empty when it is not its move."""
        if self.phase != PLAYING or self.turn != seat or self.hand_over or self.ends is None:
            return ()
        left, right = self.ends[0], self.ends[1]
        candidates = (self.must_play,) if self.must_play is not None else self.hands[seat]
        plays: list[tuple[Tile, End]] = []
        for t in candidates:
            if t is None:
                continue
            if t.has(left):
                plays.append((t, End.LEFT))
            if t.has(right):
                plays.append((t, End.RIGHT))
        return tuple(plays)


_T = TypeVar("_T")


def _slot_replacer(cls: type[_T]) -> Callable[..., _T]:
    """`dataclasses.replace` for one frozen, slotted dataclass with no `__post_init__`.

    `evolve` builds a new State for every event, and the generic `replace` (a loop over
    fields, then a keyword `__init__`) was a third of the engine's time; this one, generated
    once like dataclasses' own methods, fills the new object's slots directly, about three
    times faster, with the same result (an unknown field is a TypeError).
    """
    names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    if hasattr(cls, "__post_init__") or {"old", "new"} & set(names):
        raise TypeError(f"{cls.__name__} cannot use a slot replacer")
    params = ", ".join(f"{n}=_KEEP" for n in names)
    body = "".join(f"    _set_{n}(new, old.{n} if {n} is _KEEP else {n})\n" for n in names)
    source = f"def replace(old, *, {params}):\n    new = _new(_cls)\n{body}    return new\n"
    namespace: dict[str, Any] = {"_KEEP": object(), "_new": object.__new__, "_cls": cls}
    namespace.update({f"_set_{n}": getattr(cls, n).__set__ for n in names})
    exec(source, namespace)
    replacer: Callable[..., _T] = namespace["replace"]
    return replacer


_replace = _slot_replacer(State)


def _next(state: State, seat: int) -> int:
    return (seat + 1) % state.seats


def _on_created(state: State | None, e: MatchCreated) -> State:
    if state is not None:
        raise CorruptRecord("MatchCreated on a stream that already has a match")
    n_sides = 2 if e.partnerships else e.seats
    return State(
        match_id=e.match_id,
        seats=e.seats,
        partnerships=e.partnerships,
        rules=e.rules,
        commitment=e.commitment,
        name=e.name,
        server_seed=e.server_seed,
        players=(None,) * e.seats,
        scores=(0,) * n_sides,
        version=1,
    )


def _on_seat(state: State, e: SeatTaken) -> State:
    players = list(state.players)
    players[e.seat] = Player(e.name, e.client_seed)
    return _replace(state, players=tuple(players), version=state.version + 1)


def _on_dealt(state: State, e: Dealt) -> State:
    return _replace(
        state,
        phase=PLAYING,
        hand=e.hand,
        attempt=e.attempt,
        hands=e.hands,
        boneyard=e.boneyard,
        line=(),
        ends=None,
        turn=None,
        must_play=None,
        hand_over=False,
        version=state.version + 1,
    )


def _on_voided(state: State, e: DealVoided) -> State:
    return _replace(state, version=state.version + 1)


def _remove(hand: tuple[Tile | None, ...], tile: Tile) -> tuple[Tile | None, ...]:
    # One scan, not `in` then `index`: Tile equality is a Python call, on every play.
    try:
        i = hand.index(tile)
    except ValueError:
        if None not in hand:
            raise CorruptRecord(f"tile {tile} played from a hand that does not hold it") from None
        i = hand.index(None)
    return hand[:i] + hand[i + 1 :]


def _on_played(state: State, e: TilePlayed) -> State:
    tile = e.tile
    hands = list(state.hands)
    hands[e.seat] = _remove(hands[e.seat], tile)
    at_left = e.end is End.LEFT
    ends = place(state.ends, tile, at_left)
    if state.ends is None:
        line: tuple[tuple[int, int], ...] = ((tile.low, tile.high),)
    elif at_left:
        line = ((ends[0], state.ends[0]), *state.line)
    else:
        line = (*state.line, (state.ends[1], ends[1]))
    return _replace(
        state,
        hands=tuple(hands),
        line=line,
        ends=ends,
        turn=_next(state, e.seat),
        must_play=None,
        version=state.version + 1,
    )


def _on_drawn(state: State, e: TileDrawn) -> State:
    if not state.boneyard:
        raise CorruptRecord(f"seat {e.seat} drew from an empty boneyard")
    hands = list(state.hands)
    hands[e.seat] = (*hands[e.seat], e.tile)
    must = e.tile if e.tile is not None and state.fits(e.tile) else None
    return _replace(
        state,
        hands=tuple(hands),
        boneyard=state.boneyard[1:],
        turn=e.seat,
        must_play=must,
        version=state.version + 1,
    )


def _on_passed(state: State, e: Passed) -> State:
    return _replace(state, turn=_next(state, e.seat), must_play=None, version=state.version + 1)


def _on_points(state: State, e: PointsScored) -> State:
    scores = list(state.scores)
    scores[e.side] += e.points
    return _replace(state, scores=tuple(scores), version=state.version + 1)


def _on_hand_ended(state: State, e: HandEnded) -> State:
    return _replace(
        state,
        scores=e.scores,
        turn=None,
        must_play=None,
        hand_over=True,
        version=state.version + 1,
    )


def _on_match_ended(state: State, e: MatchEnded) -> State:
    return _replace(
        state,
        phase=ENDED,
        turn=None,
        must_play=None,
        hand_over=True,
        result=e,
        version=state.version + 1,
    )


def _on_revealed(state: State, e: SeedRevealed) -> State:
    return _replace(state, server_seed=e.server_seed, version=state.version + 1)


_HANDLERS: dict[type, Callable[[State, Any], State]] = {
    SeatTaken: _on_seat,
    Dealt: _on_dealt,
    DealVoided: _on_voided,
    TilePlayed: _on_played,
    TileDrawn: _on_drawn,
    Passed: _on_passed,
    PointsScored: _on_points,
    HandEnded: _on_hand_ended,
    MatchEnded: _on_match_ended,
    SeedRevealed: _on_revealed,
}


def evolve(state: State | None, event: Event) -> State:
    """Apply one event: the one place that dispatches on event type.

    Raises CorruptRecord for an event that cannot start or follow the state.
    """
    if type(event) is MatchCreated:
        return _on_created(state, event)
    if state is None:
        raise CorruptRecord(f"{type(event).__name__} before MatchCreated")
    handler = _HANDLERS.get(type(event))
    if handler is None:
        raise CorruptRecord(f"unknown event type {type(event).__name__}")
    return handler(state, event)


def fold(events: Iterable[Event], state: State | None = None) -> State:
    """The state after `events`, from nothing or from `state`.

    Raises CorruptRecord for an empty stream or one that does not fold.
    """
    for event in events:
        state = evolve(state, event)
    if state is None:
        raise CorruptRecord("an empty stream holds no match")
    return state
