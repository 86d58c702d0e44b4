"""Match state and the one way to build it: `evolve` each event, `fold` a stream.

`evolve` applies a fact and never checks it; the checks live in `engine.decide`.

State is built once per event, so it is shaped for that: what never changes during play
(the match's identity, rules and seats) sits in one `MatchInfo` shared by every state of
the match, and the state itself is a named tuple (immutable, and built in C: about three
times cheaper than a frozen dataclass of the same fields, which made a third of a fold).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

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
    TimedOut,
)
from .frozen import fast_init
from .rules import Rules
from .tiles import ALL_BITS, ALL_TILES, FITS, RESERVE, TILE_OF_BIT, End, Tile, side_of, sides_of
from .vocabulary import Phase

_new = tuple.__new__
"""Builds a State from its fields in C, without NamedTuple's Python-level `__new__`."""

LEFT = End.LEFT
RIGHT = End.RIGHT
SEATING = Phase.SEATING
PLAYING = Phase.PLAYING
ENDED = Phase.ENDED


@dataclass(frozen=True, slots=True)
class Player:
    name: str
    client_seed: str


@dataclass(frozen=True, slots=True)
class MatchInfo:
    """What a match is: set at creation, changed only by seating and the seed's reveal."""

    match_id: str
    seats: int
    partnerships: bool
    rules: Rules
    commitment: str
    name: str
    server_seed: str | None
    players: tuple[Player | None, ...]
    sides: tuple[tuple[int, ...], ...]


fast_init(Player)
fast_init(MatchInfo)


def _mask(tiles: Iterable[Tile | None]) -> int:
    m = 0
    for t in tiles:
        if t is not None:
            m |= t.bit
    return m


class State(NamedTuple):
    """Everything known about a match after some prefix of its events.

    Tiles unknown to the viewer whose events were folded are `None`. `masks` holds each
    seat's known tiles as bits (Tile.bit), so "does this seat hold a fitting tile" is one
    operation.

    Clocks (a clocked match only; empty tuples and None otherwise): `clocks` holds each
    seat's time left in ms as of the last action, `clock_since` the `at_ms` of that action,
    from when the seat to move (`turn`) spends its time, `timeouts` each seat's timeouts in
    a row, and `at_ms` the latest `at_ms` recorded.
    """

    info: MatchInfo
    phase: Phase = SEATING
    hand: int = 0
    attempt: int = 0
    hands: tuple[tuple[Tile | None, ...], ...] = ()
    masks: tuple[int, ...] = ()
    boneyard: tuple[Tile | None, ...] = ()
    line: tuple[tuple[int, int], ...] = ()
    ends: tuple[int, int, bool, bool] | None = None
    turn: int | None = None
    must_play: Tile | None = None
    scores: tuple[int, ...] = ()
    hand_over: bool = True
    result: MatchEnded | None = None
    version: int = 0
    clocks: tuple[int, ...] = ()
    clock_since: int | None = None
    timeouts: tuple[int, ...] = ()
    at_ms: int = 0

    @property
    def match_id(self) -> str:
        return self.info.match_id

    @property
    def seats(self) -> int:
        return self.info.seats

    @property
    def partnerships(self) -> bool:
        return self.info.partnerships

    @property
    def rules(self) -> Rules:
        return self.info.rules

    @property
    def commitment(self) -> str:
        return self.info.commitment

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def server_seed(self) -> str | None:
        return self.info.server_seed

    @property
    def players(self) -> tuple[Player | None, ...]:
        return self.info.players

    @property
    def sides(self) -> tuple[tuple[int, ...], ...]:
        return self.info.sides

    @property
    def clocked(self) -> bool:
        return bool(self.clocks)

    @property
    def running(self) -> int | None:
        """The seat whose clock runs now (it must choose a play), or None."""
        if (
            not self.clocks
            or self.clock_since is None
            or self.turn is None
            or self.hand_over
            or self.phase != PLAYING
        ):
            return None
        return self.turn

    @property
    def due_at_ms(self) -> int | None:
        """The `at_ms` at which the running clock falls (a timeout is then due), or None
        when no clock runs."""
        seat = self.running
        if seat is None:
            return None
        assert self.clock_since is not None
        return self.clock_since + self.clocks[seat]

    def clock_left(self, seat: int, at_ms: int) -> int:
        """`seat`'s time left in ms at `at_ms` (never below 0). Raises IndexError without
        clocks."""
        left = self.clocks[seat]
        if seat == self.running:
            assert self.clock_since is not None
            left -= max(0, at_ms - self.clock_since)
        return left if left > 0 else 0

    def side_of(self, seat: int) -> int:
        return side_of(seat, self.info.partnerships)

    @property
    def drawable(self) -> int:
        """Tiles that may still be drawn: the boneyard less the reserve."""
        n = len(self.boneyard) - RESERVE
        return n if n > 0 else 0

    def fits(self, tile: Tile) -> bool:
        ends = self.ends
        return ends is not None and (tile.has(ends[0]) or tile.has(ends[1]))

    def holds_fitting(self, seat: int) -> bool:
        ends = self.ends
        return ends is not None and bool(self.masks[seat] & (FITS[ends[0]] | FITS[ends[1]]))

    def legal_plays(self, seat: int) -> tuple[tuple[Tile, End], ...]:
        """Every (tile, end) the seat may play now, in the order of its hand, the left end
        first; empty when it is not its move."""
        ends = self.ends
        if self.turn != seat or self.hand_over or ends is None or self.phase != PLAYING:
            return ()
        row = _PLAYS[ends[0] * 7 + ends[1]]
        must = self.must_play
        if must is not None:
            return row.get(must, ())
        fitting = self.masks[seat] & (FITS[ends[0]] | FITS[ends[1]])
        if not fitting & (fitting - 1):
            # None or one tile fits: its plays, precomputed.
            return row[TILE_OF_BIT[fitting]] if fitting else ()
        plays: tuple[tuple[Tile, End], ...] = ()
        for t in self.hands[seat]:
            if t in row:
                plays += row[t]
        return plays


_PLAYS: list[dict[Tile, tuple[tuple[Tile, End], ...]]] = [
    {t: ((t, LEFT),) * t.has(left) + ((t, RIGHT),) * t.has(right) for t in ALL_TILES}
    for left in range(7)
    for right in range(7)
]
"""legal_plays of one tile by the ends' numbers (left * 7 + right): its plays, left first,
for each tile that fits."""


def _on_created(state: State | None, e: MatchCreated) -> State:
    if state is not None:
        raise CorruptRecord("MatchCreated on a stream that already has a match")
    info = MatchInfo(
        match_id=e.match_id,
        seats=e.seats,
        partnerships=e.partnerships,
        rules=e.rules,
        commitment=e.commitment,
        name=e.name,
        server_seed=e.server_seed,
        players=(None,) * e.seats,
        sides=sides_of(e.seats, e.partnerships),
    )
    rules = info.rules
    if rules.clock == "none":
        return _new(State, (
            info, SEATING, 0, 0, (), (), (), (), None, None, None, (0,) * len(info.sides),
            True, None, 1, (), None, (), 0,
        ))  # fmt: skip
    return State(
        info,
        scores=(0,) * len(info.sides),
        version=1,
        clocks=(rules.clock_initial * 1000,) * e.seats,
        timeouts=(0,) * e.seats,
    )


def _on_seat(s: State, e: SeatTaken) -> State:
    players = list(s.info.players)
    players[e.seat] = Player(e.name, e.client_seed)
    info = s.info
    info = MatchInfo(
        info.match_id, info.seats, info.partnerships, info.rules, info.commitment, info.name,
        info.server_seed, tuple(players), info.sides,
    )  # fmt: skip
    return _new(State, (info, *s[1:14], s[14] + 1, *s[15:]))


def _on_dealt(s: State, e: Dealt) -> State:
    return _new(State, (
        s.info, PLAYING, e.hand, e.attempt, e.hands, tuple([_mask(h) for h in e.hands]),
        e.boneyard, (), None, None, None, s.scores, False, s.result, s.version + 1,
        s.clocks, None, s.timeouts, s.at_ms,
    ))  # fmt: skip


def _on_voided(s: State, e: DealVoided) -> State:
    return s._replace(version=s.version + 1)


def _remove(hand: tuple[Tile | None, ...], tile: Tile) -> tuple[Tile | None, ...]:
    try:
        i = hand.index(tile)
    except ValueError:
        try:
            i = hand.index(None)
        except ValueError:
            raise CorruptRecord(f"tile {tile} played from a hand that does not hold it") from None
    return hand[:i] + hand[i + 1 :]


def _on_played(s: State, e: TilePlayed) -> State:
    tile = e.tile
    seat = e.seat
    hands = list(s.hands)
    hands[seat] = _remove(hands[seat], tile)
    masks = list(s.masks)
    masks[seat] &= ALL_BITS ^ tile.bit
    old = s.ends
    d = tile.is_double
    if old is None:
        ends = (tile.low, tile.high, d, d)
        line: tuple[tuple[int, int], ...] = ((tile.low, tile.high),)
    elif e.end is End.LEFT:
        left = tile.high if tile.low == old[0] else tile.low
        ends = (left, old[1], d, old[3])
        line = ((left, old[0]), *s.line)
    else:
        right = tile.high if tile.low == old[1] else tile.low
        ends = (old[0], right, old[2], d)
        line = (*s.line, (old[1], right))
    clocks, since, timeouts, at = s.clocks, s.clock_since, s.timeouts, s.at_ms
    if e.at_ms is not None:
        since = at = e.at_ms
        if e.clock_ms is not None and clocks:
            clocks = (*clocks[:seat], e.clock_ms, *clocks[seat + 1 :])
        if not e.auto and e.end is not None and timeouts and timeouts[seat]:
            timeouts = (*timeouts[:seat], 0, *timeouts[seat + 1 :])
    return _new(State, (
        s.info, s.phase, s.hand, s.attempt, tuple(hands), tuple(masks), s.boneyard, line,
        ends, (seat + 1) % s.info.seats, None, s.scores, s.hand_over, s.result, s.version + 1,
        clocks, since, timeouts, at,
    ))  # fmt: skip


def _on_drawn(s: State, e: TileDrawn) -> State:
    if not s.boneyard:
        raise CorruptRecord(f"seat {e.seat} drew from an empty boneyard")
    tile = e.tile
    hands = list(s.hands)
    hands[e.seat] = (*hands[e.seat], tile)
    masks = s.masks
    must = None
    if tile is not None:
        m = list(masks)
        m[e.seat] |= tile.bit
        masks = tuple(m)
        ends = s.ends
        if ends is not None and tile.bit & (FITS[ends[0]] | FITS[ends[1]]):
            must = tile
    return _new(State, (
        s.info, s.phase, s.hand, s.attempt, tuple(hands), masks, s.boneyard[1:], s.line,
        s.ends, e.seat, must, s.scores, s.hand_over, s.result, s.version + 1,
        s.clocks, s.clock_since if e.at_ms is None else e.at_ms, s.timeouts,
        s.at_ms if e.at_ms is None else e.at_ms,
    ))  # fmt: skip


def _on_passed(s: State, e: Passed) -> State:
    at = e.at_ms
    return _new(State, (
        s.info, s.phase, s.hand, s.attempt, s.hands, s.masks, s.boneyard, s.line, s.ends,
        (e.seat + 1) % s.info.seats, None, s.scores, s.hand_over, s.result, s.version + 1,
        s.clocks, s.clock_since if at is None else at, s.timeouts, s.at_ms if at is None else at,
    ))  # fmt: skip


def _on_timed_out(s: State, e: TimedOut) -> State:
    if not s.clocks:
        raise CorruptRecord(f"a timeout of seat {e.seat} in a match without clocks")
    seat = e.seat
    clocks = (*s.clocks[:seat], 0, *s.clocks[seat + 1 :])
    timeouts = (*s.timeouts[:seat], s.timeouts[seat] + 1, *s.timeouts[seat + 1 :])
    return s._replace(
        clocks=clocks,
        timeouts=timeouts,
        clock_since=e.at_ms,
        at_ms=e.at_ms,
        version=s.version + 1,
    )


def _on_points(s: State, e: PointsScored) -> State:
    scores = list(s.scores)
    scores[e.side] += e.points
    return _new(State, (
        s.info, s.phase, s.hand, s.attempt, s.hands, s.masks, s.boneyard, s.line, s.ends,
        s.turn, s.must_play, tuple(scores), s.hand_over, s.result, s.version + 1,
        s.clocks, s.clock_since, s.timeouts, s.at_ms,
    ))  # fmt: skip


def _on_hand_ended(s: State, e: HandEnded) -> State:
    return _new(State, (
        s.info, s.phase, s.hand, s.attempt, s.hands, s.masks, s.boneyard, s.line, s.ends,
        None, None, e.scores, True, s.result, s.version + 1,
        s.clocks, s.clock_since, s.timeouts, s.at_ms,
    ))  # fmt: skip


def _on_match_ended(s: State, e: MatchEnded) -> State:
    return s._replace(
        phase=ENDED,
        turn=None,
        must_play=None,
        hand_over=True,
        result=e,
        version=s.version + 1,
        at_ms=s.at_ms if e.at_ms is None else e.at_ms,
    )


def _on_revealed(s: State, e: SeedRevealed) -> State:
    info = s.info
    info = MatchInfo(
        info.match_id, info.seats, info.partnerships, info.rules, info.commitment, info.name,
        e.server_seed, info.players, info.sides,
    )  # fmt: skip
    return s._replace(info=info, version=s.version + 1)


_HANDLERS: dict[type, Callable[[State, Any], State]] = {
    SeatTaken: _on_seat,
    Dealt: _on_dealt,
    DealVoided: _on_voided,
    TilePlayed: _on_played,
    TileDrawn: _on_drawn,
    Passed: _on_passed,
    TimedOut: _on_timed_out,
    PointsScored: _on_points,
    HandEnded: _on_hand_ended,
    MatchEnded: _on_match_ended,
    SeedRevealed: _on_revealed,
}


def evolve(state: State | None, event: Event) -> State:
    """Apply one event: the one place that dispatches on event type.

    Raises CorruptRecord for an event that cannot start or follow the state.
    """
    handler = _HANDLERS.get(type(event))
    if handler is not None and state is not None:
        return handler(state, event)
    if type(event) is MatchCreated:
        return _on_created(state, event)
    if state is None:
        raise CorruptRecord(f"{type(event).__name__} before MatchCreated")
    raise CorruptRecord(f"unknown event type {type(event).__name__}")


def fold(events: Iterable[Event], state: State | None = None) -> State:
    """The state after `events`, from nothing or from `state`.

    Raises CorruptRecord for an empty stream or one that does not fold.
    """
    if not isinstance(events, (list, tuple)):
        events = list(events)
    try:
        return _fast_fold(events, state)
    except Exception:  # the reference below raises what applies
        pass
    # The stream does not fold on the fast path: `evolve`, event by event, says why.
    for event in events:
        state = evolve(state, event)
    if state is None:
        raise CorruptRecord("an empty stream holds no match")
    return state


class _Unusual(Exception):
    """An event the fast fold leaves to `evolve`'s handlers."""


def _fast_fold(events: list[Event] | tuple[Event, ...], state: State | None) -> State:
    """`fold` on mutable locals: the same state as `evolve` event by event, one State built
    at the end instead of one per event. Events other than plays, draws, passes, points,
    the end of a hand and deals go through `evolve` itself. Raises on anything out of the
    ordinary (the caller then folds with `evolve`, which says why)."""
    stream: Sequence[Any] = events
    if state is None:
        if not stream or type(stream[0]) is not MatchCreated:
            raise _Unusual
        state = _on_created(None, stream[0])
        stream = stream[1:]
    start: Any = state
    (
        info, phase, hand, attempt, hands_t, masks_t, boneyard, line, ends, turn, must_play,
        scores_t, hand_over, result, version, clocks, clock_since, timeouts, at_ms,
    ) = start  # fmt: skip
    seats = info.seats
    hands = [list(h) for h in hands_t]
    masks = list(masks_t)
    scores = list(scores_t)
    # The line as two lists: the left part newest first, the right part oldest first.
    left_part: list[tuple[int, int]] = []
    right_part = list(line)
    drawn = 0  # tiles drawn from the front of `boneyard`
    for e in stream:
        kind = type(e)
        if kind is TilePlayed:
            tile = e.tile
            seat = e.seat
            if not 0 <= seat < seats:
                raise _Unusual
            held = hands[seat]
            try:
                held.remove(tile)
            except ValueError:
                held.remove(None)  # raises ValueError when none is hidden either
            masks[seat] &= ~tile.bit
            d = tile.is_double
            if ends is None:
                ends = (tile.low, tile.high, d, d)
                left_part = []
                right_part = [(tile.low, tile.high)]
            elif e.end is LEFT:
                old = ends[0]
                new = tile.high if tile.low == old else tile.low
                ends = (new, ends[1], d, ends[3])
                left_part.append((new, old))
            else:
                old = ends[1]
                new = tile.high if tile.low == old else tile.low
                ends = (ends[0], new, ends[2], d)
                right_part.append((old, new))
            at = e.at_ms
            if at is not None:
                clock_since = at_ms = at
                clock_ms = e.clock_ms
                if clock_ms is not None and clocks:
                    clocks = (*clocks[:seat], clock_ms, *clocks[seat + 1 :])
                if not e.auto and e.end is not None and timeouts and timeouts[seat]:
                    timeouts = (*timeouts[:seat], 0, *timeouts[seat + 1 :])
            turn = seat + 1 if seat + 1 < seats else 0
            must_play = None
        elif kind is TileDrawn:
            seat = e.seat
            if not 0 <= seat < seats or drawn >= len(boneyard):
                raise _Unusual
            drawn += 1
            tile = e.tile
            hands[seat].append(tile)
            must_play = None
            if tile is not None:
                masks[seat] |= tile.bit
                if ends is not None and tile.bit & (FITS[ends[0]] | FITS[ends[1]]):
                    must_play = tile
            turn = seat
            at = e.at_ms
            if at is not None:
                clock_since = at_ms = at
        elif kind is PointsScored:
            side = e.side
            if not 0 <= side < len(scores):
                raise _Unusual
            scores[side] += e.points
        elif kind is Passed:
            seat = e.seat
            if not 0 <= seat < seats:
                raise _Unusual
            turn = seat + 1 if seat + 1 < seats else 0
            must_play = None
            at = e.at_ms
            if at is not None:
                clock_since = at_ms = at
        elif kind is HandEnded:
            if type(e.scores) is not tuple:
                raise _Unusual
            scores = list(e.scores)
            turn = must_play = None
            hand_over = True
        elif kind is Dealt:
            if type(e.boneyard) is not tuple or type(e.hands) is not tuple:
                raise _Unusual
            if any(type(h) is not tuple for h in e.hands):
                raise _Unusual
            hand = e.hand
            attempt = e.attempt
            hands = [list(h) for h in e.hands]
            masks = [_mask(h) for h in e.hands]
            boneyard = e.boneyard
            drawn = 0
            left_part = []
            right_part = []
            phase = PLAYING
            ends = turn = must_play = clock_since = None
            hand_over = False
        else:
            handler = _HANDLERS.get(kind)
            if handler is None:
                raise _Unusual
            # A rare event: through its handler, on the state as it stands.
            before = _new(State, (
                info, phase, hand, attempt, tuple([tuple(h) for h in hands]), tuple(masks),
                boneyard[drawn:], (*reversed(left_part), *right_part), ends, turn, must_play,
                tuple(scores), hand_over, result, version, clocks, clock_since, timeouts, at_ms,
            ))  # fmt: skip
            (
                info, phase, hand, attempt, hands_t, masks_t, boneyard, line, ends, turn,
                must_play, scores_t, hand_over, result, version, clocks, clock_since, timeouts,
                at_ms,
            ) = handler(before, e)  # fmt: skip
            hands = [list(h) for h in hands_t]
            masks = list(masks_t)
            scores = list(scores_t)
            left_part = []
            right_part = list(line)
            drawn = 0
            seats = info.seats
            continue
        version += 1
    return _new(State, (
        info, phase, hand, attempt, tuple([tuple(h) for h in hands]), tuple(masks),
        boneyard[drawn:] if drawn else boneyard, (*reversed(left_part), *right_part), ends,
        turn, must_play, tuple(scores), hand_over, result, version, clocks, clock_since,
        timeouts, at_ms,
    ))  # fmt: skip
