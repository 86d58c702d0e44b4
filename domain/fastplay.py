"""The rules core on bitboards: an unclocked match played out on one mutable `Board`, with
one State built only when asked for.

The engine's own path emits each event and evolves a new State for it (the lead, draws,
passes, points, the end of the hand, the next deal, the end of the match), so a move costs
a State per event. A `Board` holds the match as it stands: 28-bit masks of the tiles each
seat holds, beside the tiles in the order each seat got them (its hand is those still in
its mask), the ends as four fields and the line as the state's plus the plays since.
"Does this seat hold a fitting tile" is one `&` with the precomputed mask of the tiles
showing an end's number, and the blocked hand's doubles and pips come from the masks and a
table. The events are the engine's, in the same order, built as it builds them; `state()`
is what `fold` gives for them (tests/unit/test_bitboard_reference.py compares both, and a
plain reference of the rules, move by move).

A simulation plays a whole match on one Board (`legal_plays`, then `play` of one of them,
or `play_checked` of any play a client could send, refused with the engine's error);
`engine.execute` plays a client's move here too (`play_command`), after the same checks.
Matches without clocks only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import attrgetter

from . import dealing
from .commands import Play
from .events import (
    DRAWN_BY_HAND,
    INTERNED_HANDS,
    PASSED_BY_HAND,
    PLAYED_BY_HAND,
    Dealt,
    DealVoided,
    Event,
    HandEnded,
    MatchEnded,
    Passed,
    PointsScored,
    SeedRevealed,
    TileDrawn,
    TilePlayed,
)
from .events import drawn as interned_draw
from .events import passed as interned_pass
from .rules import Rules
from .scoring import BLOCKED_POINTS, play_award
from .state import _PLAYS, ENDED, PLAYING, MatchInfo, State
from .tiles import ALL_TILES, DOUBLES, FITS, RESERVE, TILE_OF_BIT, End, Tile, mask_pips
from .vocabulary import HandEndReason, MatchEndReason, PointsReason

Hands = tuple[tuple[tuple[Tile, ...], ...], tuple[Tile, ...]]
"""A deal: each seat's tiles and the boneyard in draw order."""
Deal = Callable[[bytes, str, int, int, Sequence[str]], Hands]
"""dealing.deal's signature."""

_new = tuple.__new__
_bit = attrgetter("bit")
LEFT = End.LEFT
RIGHT = End.RIGHT
DOMINO = PointsReason.DOMINO
BLOCKED = PointsReason.BLOCKED
DOUBLE_HEADER = PointsReason.DOUBLE_HEADER
TRIPLE_HEADER = PointsReason.TRIPLE_HEADER
DOUBLE_BONUS = PointsReason.DOUBLE_BONUS


class Board:
    """A match being played, mutable: the rules core of a simulation, and of a play.

    `Board(state, deal)` takes an unclocked match as it stands, its seats taken (`deal` is
    the engine's, dealing.deal, or a stand-in for playouts that never look past the hand).
    Then, until `phase` is ENDED, with `turn` the seat to move:

    - `legal_plays(turn)` lists its plays, as `State.legal_plays` does, in the same order;
    - `play(seat, tile, end)` makes a play known to be legal (one of `legal_plays`), with
      no check: the trusted fast path;
    - `play_checked(seat, tile, end)` makes any play a client could send, `end` None when
      the tile fits one end only, and refuses an illegal one with the engine's own error
      (nothing is changed then).

    Everything the rules force after a play (draws, passes, points, the end of the hand,
    the next deal and its lead, the end of the match) is played at once. `events` holds
    the events made since the Board was built, the engine's own in its order, and
    `state()` is the State they lead to: `fold(events, state)`.
    """

    __slots__ = (
        "at_ms",
        "attempt",
        "boneyard",
        "clock_since",
        "clocks",
        "deal",
        "dealer",
        "double_bonus",
        "drawn",
        "events",
        "hand",
        "hand_over",
        "hand_start",
        "held",
        "info",
        "instant",
        "key",
        "left",
        "left_double",
        "line0",
        "masks",
        "mover",
        "must_play",
        "next_seat",
        "nones",
        "on_line",
        "one_then_pass",
        "partnerships",
        "phase",
        "played_row",
        "reduction",
        "result",
        "right",
        "right_double",
        "rules",
        "scores",
        "seats",
        "sides",
        "target",
        "timeouts",
        "turn",
        "version",
    )

    def __init__(self, s: State, deal: Deal) -> None:
        self.deal = deal
        (
            info, self.phase, self.hand, self.attempt, hands, masks, self.boneyard, line,
            ends, self.turn, self.must_play, scores, self.hand_over, self.result,
            self.version, self.clocks, self.clock_since, self.timeouts, self.at_ms,
        ) = s  # fmt: skip
        self.info: MatchInfo = info
        # The ends as State.ends holds them, while the line has tiles (`on_line`).
        self.left, self.right, self.left_double, self.right_double = ends or (0, 0, False, False)
        self.key = self.left * 7 + self.right
        """The ends' numbers as one index (left * 7 + right) into the tables by ends."""
        # Each seat's tiles as dealt and drawn, in order, played ones included: its hand is
        # those still in its mask, and the hidden ones (None) less `hidden played`.
        self.held: list[tuple[Tile | None, ...]] = list(hands)
        self.nones: list[int] = [len(h) - m.bit_count() for h, m in zip(hands, masks, strict=True)]
        """Each seat's hidden tiles still held (only a redacted state has any): its tiles
        less the known ones, its mask's (`h.count(None)` compares each Tile with None
        through Tile's Python-level comparisons, about 60 ns a tile)."""
        self.masks: list[int] = list(masks)
        self.scores: list[int] = list(scores)
        # The line is the state's and the plays since (`line()`); `on_line` counts its tiles.
        self.line0: tuple[tuple[int, int], ...] = line
        self.on_line = len(line)
        self.mover: int | None = (
            self.turn if self.phase is PLAYING and not self.hand_over and line else None
        )
        """`turn` while the seat has a move to make (the hand is being played), else None."""
        self.hand_start = 0
        """Where in `events` the plays on the line begin (after the hand's deal)."""
        self.drawn = 0
        self.events: list[Event] = []
        rules = info.rules
        self.rules: Rules = rules
        self.seats: int = info.seats
        self.sides = info.sides
        self.partnerships: bool = info.partnerships
        self.next_seat: tuple[int, ...] = _NEXT_SEAT[info.seats]
        self.double_bonus: int = rules.double_bonus
        self.instant: bool = rules.match_end == "instant"
        self.target: int = rules.target
        self.one_then_pass: bool = rules.draw == "one_then_pass"
        self.reduction: bool = rules.endgame_reduction != "off"
        self.dealer: Callable[[int, int], Hands] | None = None
        self.played_row = _played_row(self.hand)

    @property
    def hands(self) -> list[tuple[Tile | None, ...]]:
        """Each seat's tiles, as State.hands."""
        return [self.hand_of(seat) for seat in range(len(self.held))]

    def hand_of(self, seat: int) -> tuple[Tile | None, ...]:
        """The seat's tiles in the order it got them, as State.hands[seat]."""
        mask = self.masks[seat]
        held = self.held[seat]
        if mask.bit_count() == len(held):
            return held  # every tile it got, none played, none hidden
        hidden = len(held) - len(tuple(filter(None, held)))  # a Tile is always true
        if not hidden:
            return tuple([t for t in held if t.bit & mask])  # type: ignore[union-attr]
        played = hidden - self.nones[seat]  # the first hidden tiles were the ones played
        out: list[Tile | None] = []
        for t in held:
            if t is None:
                if played:
                    played -= 1
                else:
                    out.append(None)
            elif t.bit & mask:
                out.append(t)
        return tuple(out)

    def state(self) -> State:
        return _new(State, (
            self.info, self.phase, self.hand, self.attempt,
            tuple(self.hands), tuple(self.masks),
            self.boneyard[self.drawn :] if self.drawn else self.boneyard,
            self.line(), self.ends, self.turn,
            self.must_play, tuple(self.scores), self.hand_over, self.result,
            self.version + len(self.events), self.clocks, self.clock_since, self.timeouts,
            self.at_ms,
        ))  # fmt: skip

    def legal_plays(self, seat: int) -> tuple[tuple[Tile, End], ...]:
        """State.legal_plays: the seat's plays, in the order of its hand, the left end
        first; empty when it is not its move."""
        mover = self.mover
        if seat != mover or mover is None:
            return ()
        key = self.key
        must = self.must_play
        if must is not None:
            return _PLAYS[key].get(must, ())
        fitting = self.masks[seat] & _FIT_OF_ENDS[key]
        if not fitting & (fitting - 1):
            # None or one tile fits: its plays, precomputed.
            return _PLAYS_BY_BIT[key][fitting % 29]
        row = _PLAYS[key]
        plays: tuple[tuple[Tile, End], ...] = ()
        for t in self.held[seat]:
            if t is not None and t.bit & fitting:
                plays += row[t]
        return plays

    @property
    def ends(self) -> tuple[int, int, bool, bool] | None:
        """State.ends: the numbers at the left and right ends and whether each is a double."""
        if not self.on_line:
            return None
        return (self.left, self.right, self.left_double, self.right_double)

    def line_length(self) -> int:
        return self.on_line

    def line(self) -> tuple[tuple[int, int], ...]:
        """State.line: the state's line (or none after a new deal) and the plays since."""
        right_part = list(self.line0) if not self.hand_start else []
        left_part: list[tuple[int, int]] = []
        left = right_part[0][0] if right_part else -1
        right = right_part[-1][1] if right_part else -1
        for e in self.events[self.hand_start :]:
            if type(e) is TilePlayed:
                t = e.tile
                if e.end is None:
                    left, right = t.low, t.high
                    left_part = []
                    right_part = [(left, right)]
                elif e.end is LEFT:
                    number = t.high if t.low == left else t.low
                    left_part.append((number, left))
                    left = number
                else:
                    number = t.high if t.low == right else t.low
                    right_part.append((right, number))
                    right = number
        return (*reversed(left_part), *right_part)

    def side_of(self, seat: int) -> int:
        return seat % 2 if self.partnerships else seat

    def holds_fitting(self, seat: int) -> bool:
        return bool(self.on_line and self.masks[seat] & (FITS[self.left] | FITS[self.right]))

    def blocked(self) -> bool:
        if len(self.boneyard) - self.drawn > RESERVE:
            return False
        if not self.on_line:
            return True
        fit = FITS[self.left] | FITS[self.right]
        return not any(m & fit for m in self.masks)

    def play_checked(self, seat: int, tile: Tile, end: End | None = None) -> None:
        """`engine.execute` of `Play(seat, tile, end)` on the board: the play made, as
        `play` makes it, if the engine accepts it; else the engine's error (NotYourTurn,
        IllegalPlay, MatchNotInProgress, InvalidArgument), raised with the board unchanged.
        `end` None: the one end the tile fits (END_REQUIRED when it fits both)."""
        if (
            self.on_line
            and not self.clocks
            and type(seat) is int
            and seat == self.turn
            and type(tile) is Tile
            and not self.hand_over
            and self.phase is PLAYING
            and self.masks[seat] & tile.bit
            and (self.must_play is None or self.must_play is tile)
        ):
            bit = tile.bit
            on_left = bit & FITS[self.left]
            on_right = bit & FITS[self.right]
            if end is None:
                if on_left and not on_right:
                    self.play(seat, tile, LEFT)
                    return
                if on_right and not on_left:
                    self.play(seat, tile, RIGHT)
                    return
            elif (end is LEFT and on_left) or (end is RIGHT and on_right):
                self.play(seat, tile, end)
                return
        self._refuse(seat, tile, end)

    def _refuse(self, seat: int, tile: Tile, end: End | None) -> None:
        """The engine's own checks on the state as it stands, which raise what they find."""
        from . import engine  # the engine plays through this module

        command = Play(seat, tile, end)
        state = self.state()
        engine.execute_evolving(state, command)
        # The engine took a play the fast checks did not (an int or Tile subclass): the
        # same play, in plain values.
        end = engine._choose_end(state, command)
        self.play(int(seat), Tile.of(tile.low, tile.high), end)

    def play(self, seat: int, tile: Tile, end: End | None) -> None:
        """engine._play without a clock, of a legal play (as `legal_plays` gives them);
        `end` None for the lead."""
        masks = self.masks
        mask = masks[seat]
        bit = tile.bit
        if mask & bit:
            mask ^= bit
            masks[seat] = mask
        else:
            self._play_hidden(seat, tile)
        d = tile.is_double
        # A play at an end shows the tile's other number there: its pips less the end's.
        if end is LEFT:
            right = self.right
            left = self.left = tile.pips - self.left
            self.left_double = d
            self.on_line += 1
            k = (seat * 28 + tile.index) * 3 + 1  # events.played's key
            scoring = left == right
        elif end is RIGHT:
            left = self.left
            right = self.right = tile.pips - self.right
            self.right_double = d
            self.on_line += 1
            k = (seat * 28 + tile.index) * 3 + 2
            scoring = left == right
        else:  # the lead
            if self.on_line:
                raise ValueError(f"a play of {tile} on the line needs an end")
            left = self.left = tile.low
            right = self.right = tile.high
            self.left_double = self.right_double = d
            self.on_line = 1
            k = (seat * 28 + tile.index) * 3
            scoring = d  # the lead scores as a double header, if a double
        key = self.key = left * 7 + right
        row = self.played_row
        event = row[k]
        if event is None:
            event = row[k] = TilePlayed(self.hand, seat, tile, end)
        self.events.append(event)
        turn = self.next_seat[seat]
        self.turn = self.mover = turn
        self.must_play = None
        if (scoring or (d and self.double_bonus)) and self._award(seat, tile):
            return
        if not mask and not self.nones[seat]:
            side = seat % 2 if self.partnerships else seat
            dp = self.rules.domino_points
            self.events.append(PointsScored(self.hand, side, dp, DOMINO, dp, seat))
            self.scores[side] += dp
            self.end_hand(HandEndReason.DOMINO, side, dp)
            return
        fit = _FIT_OF_ENDS[key]
        if masks[turn] & fit:
            return  # the next seat has a play: nothing is forced
        if len(self.boneyard) - self.drawn <= RESERVE and not any(m & fit for m in masks):
            self.block()
            return
        self.advance()

    def _play_hidden(self, seat: int, tile: Tile) -> None:
        """A play of a tile the state shows as hidden: one of the seat's hidden tiles."""
        if not self.nones[seat]:
            raise ValueError(f"seat {seat} does not hold {tile}")
        self.nones[seat] -= 1

    def _award(self, seat: int, tile: Tile) -> bool:
        """scoring.play_award written out: the points of a play that may score, if any;
        True when they end the match at once."""
        if self.on_line == 1:
            base, reason = (2, DOUBLE_HEADER) if self.left_double else (0, None)
        elif self.left != self.right:
            base, reason = 0, None
        elif self.left_double != self.right_double:
            base, reason = 3, TRIPLE_HEADER
        else:
            base, reason = 2, DOUBLE_HEADER
        bonus = self.double_bonus
        if bonus and tile.is_double and bonus > base:
            base, reason = bonus, DOUBLE_BONUS
        if not base or reason is None:
            return False
        side = seat % 2 if self.partnerships else seat
        scores = self.scores
        points = base
        if self.reduction:
            distance = self.target - scores[side]
            if distance <= 2:
                points = 1
            elif distance == 3 and points > 2:
                points = 2
        if points:
            self.events.append(PointsScored(self.hand, side, points, reason, base, seat))
            scores[side] += points
            if self.instant and max(scores) >= self.target:
                self.hand_ended(HandEndReason.MATCH_OVER, None, 0)
                self.end_match(scores.index(max(scores)))
                return True
        return False

    def advance(self) -> None:
        """engine._advance: everything forced until a seat has a choice."""
        fit = _FIT_OF_ENDS[self.key]
        masks = self.masks
        seat = self.turn
        assert seat is not None
        events = self.events
        hand = self.hand
        boneyard = self.boneyard
        interned = 0 <= hand < INTERNED_HANDS
        drawn_row = DRAWN_BY_HAND[hand] if interned else None
        stock = len(boneyard) - RESERVE  # the boneyard's tiles that may be drawn, in all
        drawn = self.drawn
        while not masks[seat] & fit:
            # `seat` is `turn`, and nobody must play a drawn tile.
            if drawn < stock:
                held = self.held[seat]
                for _ in range(1 if self.one_then_pass else stock - drawn):
                    tile = boneyard[drawn]
                    drawn += 1
                    if drawn_row is None:
                        events.append(TileDrawn(hand, seat, tile))
                    else:
                        k = seat * 29 + (28 if tile is None else tile.index)
                        event = drawn_row[k]
                        if event is None:
                            event = drawn_row[k] = TileDrawn(hand, seat, tile)
                        events.append(event)
                    held += (tile,)
                    if tile is None:
                        self.nones[seat] += 1
                    else:
                        masks[seat] |= tile.bit
                        if tile.bit & fit:
                            self.held[seat] = held
                            self.drawn = drawn
                            self.must_play = tile
                            return
                    if drawn >= stock and not any(m & fit for m in masks):
                        self.held[seat] = held
                        self.drawn = drawn
                        self.block()
                        return
                self.held[seat] = held
            events.append(PASSED_BY_HAND[hand][seat] if interned else Passed(hand, seat))
            seat = self.next_seat[seat]
            self.turn = self.mover = seat
        self.drawn = drawn

    def block(self) -> None:
        """engine._block: the blocked hand's winner from the sides' masks."""
        masks = self.masks
        side_masks = []
        for seats in self.sides:
            m = 0
            for s in seats:
                m |= masks[s]
            side_masks.append(m)
        winner = blocked_winner_of_masks(self.rules, side_masks)
        if winner is not None:
            self.events.append(
                PointsScored(self.hand, winner, BLOCKED_POINTS, BLOCKED, BLOCKED_POINTS, None)
            )
            self.scores[winner] += BLOCKED_POINTS
        self.end_hand(HandEndReason.BLOCKED, winner, BLOCKED_POINTS if winner is not None else 0)

    def hand_ended(self, reason: HandEndReason, side: int | None, points: int) -> None:
        self.events.append(HandEnded(self.hand, reason, side, points, tuple(self.scores)))
        self.turn = self.mover = None
        self.must_play = None
        self.hand_over = True

    def end_hand(self, reason: HandEndReason, side: int | None, points: int) -> None:
        """engine._end_hand."""
        self.hand_ended(reason, side, points)
        scores = self.scores
        top = max(scores)
        if top >= self.target:
            leaders = [i for i, s in enumerate(scores) if s == top]
            if len(leaders) == 1:
                self.end_match(leaders[0])
                return
        self.start_hand(self.hand + 1)

    def end_match(self, winner: int) -> None:
        """engine._end_match at the target: the end and the seed's reveal."""
        info = self.info
        assert info.server_seed is not None
        ended = MatchEnded(MatchEndReason.TARGET, winner, tuple(self.scores), None, "")
        self.events.append(ended)
        self.phase = ENDED
        self.turn = self.mover = None
        self.must_play = None
        self.hand_over = True
        self.result = ended
        self.events.append(SeedRevealed(info.server_seed))
        self.info = MatchInfo(
            info.match_id, info.seats, info.partnerships, info.rules, info.commitment,
            info.name, info.server_seed, info.players, info.sides,
        )  # fmt: skip

    def start_hand(self, number: int) -> None:
        """engine._start_hand: deal (again while void), then the forced lead."""
        dealer = self.dealer
        if dealer is None:
            dealer = self.dealer = _dealer(self.info, self.deal)
        attempt = 1
        while True:
            hands, boneyard = dealer(number, attempt)
            self.events.append(Dealt(number, attempt, hands, boneyard))
            self.phase = PLAYING
            self.hand = number
            self.played_row = _played_row(number)
            self.attempt = attempt
            self.held = list(hands)
            self.nones = [0] * len(hands)
            masks = self.masks = [sum(map(_bit, h)) for h in hands]  # a deal's tiles are distinct
            self.boneyard = boneyard
            self.drawn = 0
            self.hand_start = len(self.events)
            self.on_line = 0
            self.turn = self.mover = None
            self.must_play = None
            self.hand_over = False
            self.clock_since = None
            lead = self.lead()
            if lead:
                break
            self.events.append(DealVoided(number, attempt))
            attempt += 1
        seat = 0
        while not masks[seat] & lead:
            seat += 1
        self.play(seat, TILE_OF_BIT[lead], None)

    def lead(self) -> int:
        """scoring.lead_of on the masks: the bit of the tile that leads, 0 for a void deal."""
        dealt = 0
        for m in self.masks:
            dealt |= m
        doubles = dealt & DOUBLES
        rule = self.rules.lead
        if doubles:
            if rule == "highest_double":
                return 1 << (doubles.bit_length() - 1)
            return doubles & -doubles
        if rule == "lowest_double_else_lowest_tile":
            return dealt & -dealt  # the lowest tile in canonical order
        return 0


def _played_row(hand: int) -> list[TilePlayed | None]:
    """events.played's shared plays of the hand, or a row of the Board's own for a hand
    past those (its plays then shared within the hand only)."""
    return PLAYED_BY_HAND[hand] if 0 <= hand < INTERNED_HANDS else [None] * (4 * 84)


def _dealer(info: MatchInfo, deal: Deal) -> Callable[[int, int], Hands]:
    """The deals of a match by (hand, attempt): the engine's `deal` on the match's seeds.
    The last one made is kept for the same match's next Board (its first hand is dealt on
    one Board in `engine.execute`, the rest on the next): the same MatchInfo object and
    `deal`, so the same deals."""
    global _last_dealer
    last = _last_dealer
    if last is not None and last[0] is info and last[1] is deal:
        return last[2]
    made = _new_dealer(info, deal)
    _last_dealer = (info, deal, made)
    return made


_last_dealer: tuple[MatchInfo, Deal, Callable[[int, int], Hands]] | None = None


def _new_dealer(info: MatchInfo, deal: Deal) -> Callable[[int, int], Hands]:
    assert info.server_seed is not None
    seed = bytes.fromhex(info.server_seed)
    client_seeds = [p.client_seed if p is not None else "" for p in info.players]
    if deal is dealing.deal:
        return dealing.dealer(seed, info.match_id, client_seeds)
    match_id = info.match_id

    def dealt(number: int, attempt: int) -> Hands:
        return deal(seed, match_id, number, attempt, client_seeds)

    return dealt


def blocked_winner_of_masks(rules: Rules, side_masks: list[int]) -> int | None:
    """scoring.blocked_winner over the sides' tiles as masks."""
    blocked = rules.blocked
    if blocked == "german":
        keys: list[object] = [((m & DOUBLES).bit_count(), mask_pips(m)) for m in side_masks]
        return _unique_best(keys)
    if blocked == "pips":
        return _unique_best([mask_pips(m) for m in side_masks])
    # american and eastern
    without = [i for i, m in enumerate(side_masks) if not m & DOUBLES]
    if len(without) == 1:
        return without[0]
    if without:
        if blocked == "american":
            keys2 = {i: (side_masks[i].bit_count(), mask_pips(side_masks[i])) for i in without}
        else:
            keys2 = {i: (0, mask_pips(side_masks[i])) for i in without}
        best = min(keys2.values())
        winners = [i for i, k in keys2.items() if k == best]
        return winners[0] if len(winners) == 1 else None
    # Every side holds a double: the lowest double's holder (the lowest bit among doubles).
    lowest = min(((m & DOUBLES) & -(m & DOUBLES), i) for i, m in enumerate(side_masks))
    return lowest[1]


def _unique_best(keys: list[object]) -> int | None:
    best = min(keys)  # type: ignore[type-var]
    winners = [i for i, k in enumerate(keys) if k == best]
    return winners[0] if len(winners) == 1 else None


def first_hand(state: State, deal: Deal) -> tuple[tuple[Event, ...], State]:
    """The first deal of an unclocked match whose seats are all taken, and its lead.
    `deal` is the engine's (dealing.deal)."""
    board = Board(state, deal)
    board.start_hand(1)
    return tuple(board.events), board.state()


_FIT_OF_ENDS: tuple[int, ...] = tuple(
    FITS[left] | FITS[right] for left in range(7) for right in range(7)
)
"""The tiles that fit either end, by the ends' numbers (left * 7 + right)."""
_BY_BIT = 29
"""A tile's bit modulo 29 is unique among the 28 tiles and not 0 (2 has order 28 modulo 29):
tables by bit are lists indexed by `bit % 29`, 0 for no tile (a dict keyed by the bits,
all powers of two, puts most of them in one hash slot)."""
_TILE_BY_BIT: list[Tile | None] = [None] * _BY_BIT
for _t in ALL_TILES:
    _TILE_BY_BIT[_t.bit % _BY_BIT] = _t
_PLAYS_BY_BIT: list[list[tuple[tuple[Tile, End], ...]]] = [
    [() if t is None else row[t] for t in _TILE_BY_BIT] for row in _PLAYS
]
"""_PLAYS by the ends' numbers, then by the tile's bit % 29 (0: no tile, no plays)."""

_NEXT_SEAT = ((), (0,), (1, 0), (1, 2, 0), (1, 2, 3, 0))
"""The seat after each seat, by the number of seats."""


def play_command(state: State, command: Play, deal: Deal) -> tuple[tuple[Event, ...], State] | None:
    """`execute` of a play in an unclocked match, checked on the masks: None when the play
    is not plainly legal (the engine's own checks then say why). `deal` is the engine's
    (dealing.deal).

    The common move (the hand goes on, and what follows it is draws and passes
    until a seat holds a fitting tile) is played here on locals, with the one State built
    at the end; anything else (the last tile of a hand, a block, the target reached, hidden
    tiles) is played by a Board."""
    seat = command.seat
    tile = command.tile
    end = command.end
    (
        info, phase, hand, attempt, hands, masks, boneyard, line, ends, turn, must_play,
        scores, hand_over, result, version, clocks, clock_since, timeouts, at_ms,
    ) = state  # fmt: skip
    if (
        phase is not PLAYING
        or hand_over
        or type(seat) is not int
        or type(tile) is not Tile
        or turn != seat
        or ends is None
    ):
        return None
    bit = tile.bit
    mask = masks[seat]
    if not mask & bit or (must_play is not None and must_play is not tile):
        return None
    left, right, left_double, right_double = ends
    on_left = bit & FITS[left]
    on_right = bit & FITS[right]
    if end is None:
        if on_left and on_right:
            return None
        end = LEFT if on_left else RIGHT if on_right else None
        if end is None:
            return None
    elif not (on_left if end is LEFT else on_right if end is RIGHT else False):
        return None
    held = hands[seat]
    d = tile.is_double
    if end is LEFT:
        left = tile.high if tile.low == left else tile.low
        left_double = d
    else:
        right = tile.high if tile.low == right else tile.low
        right_double = d
    rules = info.rules
    if len(held) < 2 or len(held) != mask.bit_count():
        # The hand's last tile, or a hand with hidden tiles: the Board plays it.
        return _on_board(state, deal, seat, tile, end)
    # The tile's place in the hand (it holds it: its mask has it), found by identity
    # (`held.index` compares each Tile before it through Tile's Python-level comparisons).
    i = 0
    while held[i] is not tile:
        i += 1
    award = None
    if left == right or (d and rules.double_bonus):
        side = seat % 2 if info.partnerships else seat
        points, base, reason = play_award(
            rules, tile, (left, right, left_double, right_double), 2, scores[side]
        )
        if points and reason is not None:
            scored = list(scores)
            scored[side] += points
            if rules.match_end == "instant" and max(scored) >= rules.target:
                return _on_board(state, deal, seat, tile, end)
            scores = tuple(scored)
            award = PointsScored(hand, side, points, reason, base, seat)
    # Concatenation: one new tuple (unpacking into a display goes through a list).
    line = ((left, ends[0]),) + line if end is LEFT else line + ((ends[1], right),)  # noqa: RUF005
    seats = info.seats
    hands_l = list(hands)
    hands_l[seat] = held[:i] + held[i + 1 :]
    masks_l = list(masks)
    masks_l[seat] = mask ^ bit
    # events.played, written out on the hottest path (a known seat, a play at an end).
    if hand < INTERNED_HANDS:
        row = PLAYED_BY_HAND[hand]
        k = (seat * 28 + tile.index) * 3 + (1 if end is LEFT else 2)
        played = row[k]
        if played is None:
            played = row[k] = TilePlayed(hand, seat, tile, end)
    else:
        played = TilePlayed(hand, seat, tile, end)
    fit = FITS[left] | FITS[right]
    turn = _NEXT_SEAT[seats][seat]
    if award is None and masks_l[turn] & fit:
        # The next seat has a choice: the move is this one event.
        return (played,), _new(State, (
            info, phase, hand, attempt, tuple(hands_l), tuple(masks_l), boneyard, line,
            (left, right, left_double, right_double), turn, None, scores, False, result,
            version + 1, clocks, clock_since, timeouts, at_ms,
        ))  # fmt: skip
    events: list[Event] = [played]
    if award is not None:
        events.append(award)
    # Draws and passes until a seat holds a fitting tile; a block goes to the Board.
    drawn = 0
    stock = len(boneyard) - RESERVE
    if stock <= 0 and not any(m & fit for m in masks_l):
        return _on_board(state, deal, seat, tile, end)
    one_then_pass = rules.draw == "one_then_pass"
    must = None
    while not masks_l[turn] & fit:
        if stock > drawn:
            for _ in range(1 if one_then_pass else stock - drawn):
                drawn_tile = boneyard[drawn]
                drawn += 1
                if drawn_tile is None:
                    return _on_board(state, deal, seat, tile, end)
                events.append(interned_draw(hand, turn, drawn_tile))
                hands_l[turn] += (drawn_tile,)
                masks_l[turn] |= drawn_tile.bit
                if drawn_tile.bit & fit:
                    must = drawn_tile
                    break
                if stock <= drawn and not any(m & fit for m in masks_l):
                    return _on_board(state, deal, seat, tile, end)
            if must is not None:
                break
        events.append(interned_pass(hand, turn))
        turn = turn + 1 if turn + 1 < seats else 0
    return tuple(events), _new(State, (
        info, phase, hand, attempt, tuple(hands_l), tuple(masks_l),
        boneyard[drawn:] if drawn else boneyard, line,
        (left, right, left_double, right_double), turn, must, scores, False, result,
        version + len(events), clocks, clock_since, timeouts, at_ms,
    ))  # fmt: skip


def _on_board(
    state: State, deal: Deal, seat: int, tile: Tile, end: End
) -> tuple[tuple[Event, ...], State]:
    board = Board(state, deal)
    board.play(seat, tile, end)
    return tuple(board.events), board.state()
