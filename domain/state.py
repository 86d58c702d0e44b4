"""Match state and the one way to build it: `fold` a stream (`evolve` is the fold of one
event).

The fold applies facts and never checks them against the rules (the checks live in the
rules core, `fastplay.Board`); it refuses only a stream it cannot apply.

State is built once per event, so it is shaped for that: what never changes during play
(the match's identity, rules and seats) sits in one `MatchInfo` shared by every state of
the match, and the state itself is a named tuple (immutable, and built in C: about three
times cheaper than a frozen dataclass of the same fields, which made a third of a fold).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
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
from .tiles import ALL_TILES, FITS, RESERVE, TILE_OF_BIT, End, Tile, side_of, sides_of
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
    """Who holds a seat: its name and client seed, and the registered player (`player_id`,
    "" for none) and whether it is a program."""

    name: str
    client_seed: str
    player_id: str = ""
    bot: bool = False


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
    rated: bool = False
    """Created rated: its seats are registered players' (RATINGS.md section 2)."""


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
    def rated(self) -> bool:
        return self.info.rated

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
        row = PLAYS[ends[0] * 7 + ends[1]]
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


PLAYS: list[dict[Tile, tuple[tuple[Tile, End], ...]]] = [
    {t: ((t, LEFT),) * t.has(left) + ((t, RIGHT),) * t.has(right) for t in ALL_TILES}
    for left in range(7)
    for right in range(7)
]
"""legal_plays of one tile by the ends' numbers (left * 7 + right): its plays, left first,
for each tile that fits."""


def _on_created(e: MatchCreated) -> State:
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
        rated=e.rated,
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


def evolve(state: State | None, event: Event) -> State:
    """Apply one event: `fold` of that one event.

    Raises CorruptRecord for an event that cannot start or follow the state.
    """
    return fold((event,), state)


def fold(events: Iterable[Event], state: State | None = None) -> State:
    """The state after `events`, from nothing or from `state`: the one place that applies
    events, dispatching on event type, on mutable locals with one State built at the end.

    Raises CorruptRecord, naming the event (its number in the match and its type) and why,
    for an empty stream or one that does not fold.
    """
    stream: Sequence[Any] = events if isinstance(events, (list, tuple)) else list(events)
    if state is None:
        if not stream:
            raise CorruptRecord("an empty stream holds no match")
        first = stream[0]
        if type(first) is not MatchCreated:
            raise _corrupt(1, first, f"{type(first).__name__} before MatchCreated")
        state = _on_created(first)
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
            if not 0 <= seat < len(hands):
                raise _corrupt(version + 1, e, f"no seat {seat} holds tiles")
            held = hands[seat]
            try:
                held.remove(tile)
            except ValueError:
                try:
                    held.remove(None)
                except ValueError:
                    why = f"tile {tile} played from a hand that does not hold it"
                    raise _corrupt(version + 1, e, why) from None
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
            if drawn >= len(boneyard):
                raise _corrupt(version + 1, e, f"seat {seat} drew from an empty boneyard")
            if not 0 <= seat < len(hands):
                raise _corrupt(version + 1, e, f"no seat {seat} holds tiles")
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
                raise _corrupt(version + 1, e, f"no side {side} scores")
            scores[side] += e.points
        elif kind is Passed:
            seat = e.seat
            if not 0 <= seat < seats:
                raise _corrupt(version + 1, e, f"no seat {seat} in a match of {seats}")
            turn = seat + 1 if seat + 1 < seats else 0
            must_play = None
            at = e.at_ms
            if at is not None:
                clock_since = at_ms = at
        elif kind is HandEnded:
            scores = list(e.scores)
            turn = must_play = None
            hand_over = True
        elif kind is Dealt:
            hand = e.hand
            attempt = e.attempt
            hands = [list(h) for h in e.hands]
            masks = [_mask(h) for h in e.hands]
            boneyard = tuple(e.boneyard)
            drawn = 0
            left_part = []
            right_part = []
            phase = PLAYING
            ends = turn = must_play = clock_since = None
            hand_over = False
        elif kind is DealVoided:
            pass
        elif kind is TimedOut:
            seat = e.seat
            if not clocks:
                why = f"a timeout of seat {seat} in a match without clocks"
                raise _corrupt(version + 1, e, why)
            if not 0 <= seat < len(clocks):
                raise _corrupt(version + 1, e, f"no seat {seat} has a clock")
            clocks = (*clocks[:seat], 0, *clocks[seat + 1 :])
            timeouts = (*timeouts[:seat], timeouts[seat] + 1, *timeouts[seat + 1 :])
            clock_since = at_ms = e.at_ms
        elif kind is MatchEnded:
            phase = ENDED
            turn = must_play = None
            hand_over = True
            result = e
            if e.at_ms is not None:
                at_ms = e.at_ms
        elif kind is SeatTaken:
            seat = e.seat
            if not 0 <= seat < seats:
                raise _corrupt(version + 1, e, f"no seat {seat} in a match of {seats}")
            players = list(info.players)
            players[seat] = Player(e.name, e.client_seed, e.player, e.bot)
            info = MatchInfo(
                info.match_id, info.seats, info.partnerships, info.rules, info.commitment,
                info.name, info.server_seed, tuple(players), info.sides, info.rated,
            )  # fmt: skip
        elif kind is SeedRevealed:
            info = MatchInfo(
                info.match_id, info.seats, info.partnerships, info.rules, info.commitment,
                info.name, e.server_seed, info.players, info.sides, info.rated,
            )  # fmt: skip
        elif kind is MatchCreated:
            raise _corrupt(version + 1, e, "MatchCreated on a stream that already has a match")
        else:
            raise _corrupt(version + 1, e, f"unknown event type {kind.__name__}")
        version += 1
    return _new(State, (
        info, phase, hand, attempt, tuple([tuple(h) for h in hands]), tuple(masks),
        boneyard[drawn:] if drawn else boneyard, (*reversed(left_part), *right_part), ends,
        turn, must_play, tuple(scores), hand_over, result, version, clocks, clock_since,
        timeouts, at_ms,
    ))  # fmt: skip


def _corrupt(seq: int, event: object, why: str) -> CorruptRecord:
    """The error for event number `seq` of a match's stream, which does not fold."""
    return CorruptRecord(f"event {seq} ({type(event).__name__}): {why}")
