"""The reference `evolve`: each event applied to a new State, one handler per event type,
written plainly. The production fold (`bergen.domain.state.fold`) is checked against it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bergen.domain.errors import CorruptRecord
from bergen.domain.events import (
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
from bergen.domain.state import ENDED, PLAYING, SEATING, MatchInfo, Player, State
from bergen.domain.tiles import ALL_BITS, FITS, End, Tile, sides_of

_new = tuple.__new__


def _mask(tiles: tuple[Tile | None, ...]) -> int:
    m = 0
    for t in tiles:
        if t is not None:
            m |= t.bit
    return m


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
