"""What each viewer may know: a seat's view, a spectator's, and redacted event streams.

Before the match ends a seat sees its own tiles and only counts of the others' and of the
boneyard; a spectator sees no tiles in hands. After the end everything is revealed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .events import Dealt, Event, MatchCreated, MatchEnded, TileDrawn
from .frozen import fast_init
from .rules import Rules
from .state import ENDED, State
from .tiles import End, Tile
from .vocabulary import Phase


@dataclass(frozen=True, slots=True)
class Clock:
    """A seat's clock as of the last action: `left_ms` then, and while it runs the `at_ms`
    it falls at (`left_ms` counts down from the last action's `at_ms` until then)."""

    seat: int
    left_ms: int
    running: bool
    falls_at_ms: int | None
    timeouts: int
    """Timeouts of this seat in a row."""


@dataclass(frozen=True, slots=True)
class View:
    """A viewer's knowledge of a match. `seat` is None for a spectator."""

    match_id: str
    name: str
    seat: int | None
    phase: Phase
    rules: Rules
    partnerships: bool
    sides: tuple[tuple[int, ...], ...]
    players: tuple[str | None, ...]
    commitment: str
    server_seed: str | None
    hand: int
    hand_sizes: tuple[int, ...]
    tiles: tuple[Tile, ...]
    """The viewer's own tiles (empty for a spectator)."""
    revealed_hands: tuple[tuple[Tile, ...], ...] | None
    """Every seat's tiles, once the match has ended."""
    boneyard_size: int
    drawable: int
    line: tuple[tuple[int, int], ...]
    ends: tuple[int, int, bool, bool] | None
    scores: tuple[int, ...]
    turn: int | None
    must_play: Tile | None
    legal_plays: tuple[tuple[Tile, End], ...]
    result: MatchEnded | None
    version: int
    clocks: tuple[Clock, ...] = ()
    """Every seat's clock in a clocked match (empty without a clock)."""
    at_ms: int = 0
    """The latest `at_ms` recorded: when the clocks were last read."""
    player_ids: tuple[str, ...] = ()
    """Each seat's registered player ("" for a seat held by a name alone, or free)."""
    bots: tuple[bool, ...] = ()
    """Whether each seat's registered player is a program."""
    rated: bool = False
    """A match for the players' ratings (RATINGS.md)."""

    @property
    def my_side(self) -> int | None:
        if self.seat is None:
            return None
        return self.seat % 2 if self.partnerships else self.seat


fast_init(View)
fast_init(Clock)


def view(state: State, seat: int | None = None) -> View:
    """The view of `seat` (None: a spectator). Raises IndexError for a seat not in the match."""
    if seat is not None and not 0 <= seat < state.seats:
        raise IndexError(f"match {state.match_id} has no seat {seat}")
    ended = state.phase == ENDED
    own: tuple[Tile, ...] = ()
    if seat is not None and state.hands:
        own = tuple(t for t in state.hands[seat] if t is not None)
    revealed = None
    if ended and state.hands:
        revealed = tuple(tuple(t for t in h if t is not None) for h in state.hands)
    mine = seat is not None and state.turn == seat
    return View(
        match_id=state.match_id,
        name=state.name,
        seat=seat,
        phase=state.phase,
        rules=state.rules,
        partnerships=state.partnerships,
        sides=state.sides,
        players=tuple(p.name if p is not None else None for p in state.players),
        commitment=state.commitment,
        server_seed=state.server_seed if ended else None,
        hand=state.hand,
        hand_sizes=tuple(len(h) for h in state.hands) if state.hands else (0,) * state.seats,
        tiles=own,
        revealed_hands=revealed,
        boneyard_size=len(state.boneyard),
        drawable=state.drawable,
        line=state.line,
        ends=state.ends,
        scores=state.scores,
        turn=state.turn,
        must_play=state.must_play if mine else None,
        legal_plays=state.legal_plays(seat) if seat is not None and mine else (),
        result=state.result,
        version=state.version,
        clocks=clocks_of(state),
        at_ms=state.at_ms,
        player_ids=tuple(p.player_id if p is not None else "" for p in state.players),
        bots=tuple(p is not None and p.bot for p in state.players),
        rated=state.info.rated,
    )


def clocks_of(state: State) -> tuple[Clock, ...]:
    """Every seat's clock (empty without a clock)."""
    if not state.clocks:
        return ()
    running = state.running
    due = state.due_at_ms
    return tuple(
        Clock(
            seat=seat,
            left_ms=left,
            running=seat == running,
            falls_at_ms=due if seat == running else None,
            timeouts=state.timeouts[seat],
        )
        for seat, left in enumerate(state.clocks)
    )


def redact_event(event: Event, viewer: int | None) -> Event:
    """The event as `viewer` (a seat, or None for a spectator) may see it during play."""
    if isinstance(event, MatchCreated):
        if event.server_seed is None:
            return event
        return MatchCreated(
            match_id=event.match_id,
            seats=event.seats,
            partnerships=event.partnerships,
            rules=event.rules,
            commitment=event.commitment,
            name=event.name,
            server_seed=None,
            rated=event.rated,
        )
    if isinstance(event, Dealt):
        return Dealt(
            hand=event.hand,
            attempt=event.attempt,
            hands=tuple(h if s == viewer else (None,) * len(h) for s, h in enumerate(event.hands)),
            boneyard=(None,) * len(event.boneyard),
        )
    if isinstance(event, TileDrawn) and event.seat != viewer:
        return TileDrawn(hand=event.hand, seat=event.seat, tile=None)
    return event


def redact_stream(
    events: Sequence[Event], viewer: int | None, *, ended: bool | None = None
) -> list[Event]:
    """The stream as `viewer` may see it: redacted while the match is live, whole after.

    `ended` says whether the match has ended; by default, whether `events` holds its end.
    """
    if ended is None:
        ended = any(isinstance(e, MatchEnded) for e in events)
    if ended:
        return list(events)
    return [redact_event(e, viewer) for e in events]


def hidden_tiles(events: Iterable[Event], viewer: int | None) -> set[Tile]:
    """Tiles a viewer has been shown in `events` that belong to a hand other than its own
    or to the boneyard; empty for a correctly redacted stream of a live match."""
    leaked: set[Tile] = set()
    for e in events:
        if isinstance(e, Dealt):
            for s, h in enumerate(e.hands):
                if s != viewer:
                    leaked.update(t for t in h if t is not None)
            leaked.update(t for t in e.boneyard if t is not None)
        elif isinstance(e, TileDrawn) and e.seat != viewer and e.tile is not None:
            leaked.add(e.tile)
    return leaked
