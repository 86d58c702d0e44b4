"""The rules core: a match played on one mutable `Board`, with one State built only when
asked for. Every path decides here: the server's commands (`engine.execute` plays each Play,
Timeout, Resign and Abandon on a Board: the one that made the State, kept, or one built for
it), simulations, bots, Monte Carlo playouts, the re-check of a stored log and the audit.

A `Board` holds the match as it stands: 28-bit masks of the tiles each seat holds, beside
the tiles in the order each seat got them (its hand is those still in its mask), the ends as
four fields and the line as the state's plus the plays since. "Does this seat hold a
fitting tile" is one `&` with the precomputed mask of the tiles showing an end's number,
and the blocked hand's doubles and pips come from the masks and a table. Everything a
command causes (the lead, draws, passes, points, the end of the hand, the next deal, the
end of the match) is an event in `events`, in order, and `state()` is what `fold` gives for
them. tests/unit/test_bitboard_reference.py checks both against a plain reference of the
rules and against the reference engine kept in tests/unit/reference, command by command.

A simulation plays a whole match on one Board (`legal_plays`, then `play` of one of them,
or `play_checked` of any play a client could send, refused with the rules' error).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from operator import attrgetter

from . import dealing
from .commands import Abandon, Command, Play, Resign, Timeout
from .errors import (
    ClockViolation,
    IllegalPlay,
    InvalidArgument,
    MatchNotInProgress,
    NotYourTurn,
    shown,
)
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
    TimedOut,
)
from .rules import Rules
from .scoring import BLOCKED_POINTS
from .state import ENDED, PLAYING, PLAYS, MatchInfo, State
from .text import check_text
from .tiles import ALL_TILES, DOUBLES, FITS, RESERVE, TILE_OF_BIT, End, Tile, mask_pips
from .vocabulary import ForfeitCause, HandEndReason, MatchEndReason, PointsReason

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
    """A match being played, mutable: the rules core.

    `Board(state, deal)` takes a match as it stands (`deal` is dealing.deal, or a stand-in
    for playouts that never look past the hand). Then, until `phase` is ENDED, with `turn`
    the seat to move:

    - `legal_plays(turn)` lists its plays, as `State.legal_plays` does, in the same order;
    - `play(seat, tile, end)` makes a play known to be legal (one of `legal_plays`) in a
      match without clocks, with no check: the trusted fast path;
    - `play_checked(seat, tile, end, at_ms)` makes any play a client could send, `end` None
      when the tile fits one end only, and refuses an illegal one with the rules' error
      (nothing is changed then);
    - `execute(command)` does what a Play, Timeout, Resign or Abandon does, or refuses it.

    Everything the rules force after a play (draws, passes, points, the end of the hand,
    the next deal and its lead, the end of the match) is played at once. `events` holds
    the events made since the Board was built, the engine's own in its order, and
    `state()` is the State they lead to: `fold(events, state)`.
    """

    __slots__ = (
        "_nones",
        "at",
        "at_ms",
        "attempt",
        "base",
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
        self.at: int | None = None
        """The time of the command being played in a clocked match (None without clocks),
        given to every event it causes."""
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
        self._nones: list[int] | None = None
        """Each seat's hidden tiles still held (only a redacted state has any), counted when
        first asked for (`nones`): most commands never need them."""
        self.base: State | None = s
        """The State the Board stands on (None after a deal): `state()` keeps a seat's hand
        while its mask and its tiles are this one's."""
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
        (
            self.rules, self.seats, self.sides, self.partnerships, self.next_seat,
            self.double_bonus, self.instant, self.target, self.one_then_pass, self.reduction,
        ) = _setup_of(info)  # fmt: skip
        self.dealer: Callable[[int, int], Hands] | None = None
        self.played_row = _played_row(self.hand)

    @property
    def nones(self) -> list[int]:
        """Each seat's hidden tiles still held: its tiles less the known ones, its mask's
        (`h.count(None)` compares each Tile with None through Tile's Python-level
        comparisons, about 60 ns a tile). A seat never holds fewer tiles than its mask, so
        equal totals mean no seat holds a hidden one."""
        nones = self._nones
        if nones is None:
            # Counted on the state the Board was built from (a deal since sets them): a
            # play or draw of a hidden tile counts itself once they are known.
            assert self.base is not None
            held, masks = self.base.hands, self.base.masks
            nones = self._nones = (
                [0] * len(held)
                if sum(map(len, held)) == sum(map(int.bit_count, masks))
                else [len(h) - m.bit_count() for h, m in zip(held, masks, strict=True)]
            )
        return nones

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
        """The State the board's events lead to: `fold(events, state)`."""
        masks = self.masks
        base = self.base
        events = self.events
        if base is not None and self._nones is None:
            # No deal and no hidden tile played or drawn since the Board was built: a seat
            # whose mask and tiles are the state's keeps its hand, and one that has only
            # played a tile from it loses that tile.
            held = self.held
            base_hands, base_masks = base.hands, base.masks
            hands = list(base_hands)
            for seat, m in enumerate(masks):
                was = base_masks[seat]
                if m == was and held[seat] is base_hands[seat]:
                    continue
                h = base_hands[seat]
                gone = was ^ m
                if held[seat] is h and m & was == m and not gone & (gone - 1):
                    tile = TILE_OF_BIT[gone]
                    i = 0
                    while h[i] is not tile:  # by identity: Tile's == is Python-level
                        i += 1
                    hands[seat] = h[:i] + h[i + 1 :]
                else:
                    hands[seat] = self.hand_of(seat)
        else:
            hand_of = self.hand_of
            # A seat with as many tiles as its mask has bits holds all it got (hand_of's
            # first case, checked here without the call).
            hands = [
                h if m.bit_count() == len(h) else hand_of(seat)
                for seat, (h, m) in enumerate(zip(self.held, masks, strict=True))
            ]
        ends = (
            (self.left, self.right, self.left_double, self.right_double) if self.on_line else None
        )
        return _new(State, (
            self.info, self.phase, self.hand, self.attempt, tuple(hands), tuple(masks),
            self.boneyard[self.drawn :] if self.drawn else self.boneyard,
            self.line(), ends, self.turn,
            self.must_play, tuple(self.scores), self.hand_over, self.result,
            self.version + len(events), self.clocks, self.clock_since, self.timeouts,
            self.at_ms,
        ))  # fmt: skip

    def commit(self) -> tuple[tuple[Event, ...], State]:
        """The events made since the Board was built (or last committed) and the State they
        lead to; the Board then stands for that State, as if built from it, and may take the
        next command on it (`engine.execute` keeps it for the State it returns)."""
        made = self.events
        events = tuple(made)
        base = self.base
        if len(made) == 1 and base is not None and self._nones is None:
            played = made[0]
            if type(played) is TilePlayed and played.end is not None:
                # The common command, one play at an end and nothing forced: the base
                # State with the tile out of the seat's hand and on the line.
                seat = played.seat
                tile = played.tile
                hands = base.hands
                held = hands[seat]
                i = 0
                while held[i] is not tile:  # by identity (tiles are interned)
                    i += 1
                hand = held[:i] + held[i + 1 :]
                line = base.line
                pips = tile.pips  # the tile's other number is its pips less the end's
                if played.end is LEFT:
                    number = line[0][0]
                    line = ((pips - number, number),) + line  # noqa: RUF005 (one new tuple)
                else:
                    number = line[-1][1]
                    line = line + ((number, pips - number),)  # noqa: RUF005
                version = self.version = self.version + 1
                state = _new(State, (
                    self.info, self.phase, self.hand, self.attempt,
                    (*hands[:seat], hand, *hands[seat + 1 :]), tuple(self.masks),
                    self.boneyard, line,
                    (self.left, self.right, self.left_double, self.right_double), self.turn,
                    self.must_play, base.scores, self.hand_over, self.result, version,
                    self.clocks, self.clock_since, self.timeouts, self.at_ms,
                ))  # fmt: skip
                self.held[seat] = hand
                self.base = state
                self.line0 = line
                made.clear()
                self.at = None
                return events, state
        state = self.state()
        self._nones = None
        self.hand_start = 0
        self.boneyard = state.boneyard
        self.drawn = 0
        self.base = state
        self.held = list(state.hands)
        self.line0 = state.line
        made.clear()
        self.version = state.version
        self.at = None
        return events, state

    def legal_plays(self, seat: int) -> tuple[tuple[Tile, End], ...]:
        """State.legal_plays: the seat's plays, in the order of its hand, the left end
        first; empty when it is not its move."""
        mover = self.mover
        if seat != mover or mover is None:
            return ()
        key = self.key
        must = self.must_play
        if must is not None:
            return PLAYS[key].get(must, ())
        fitting = self.masks[seat] & _FIT_OF_ENDS[key]
        if not fitting & (fitting - 1):
            # None or one tile fits: its plays, precomputed.
            return _PLAYS_BY_BIT[key][fitting % 29]
        row = PLAYS[key]
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
        base = self.line0 if not self.hand_start else ()
        left_part: list[tuple[int, int]] = []
        right_part: list[tuple[int, int]] = []
        left = base[0][0] if base else -1
        right = base[-1][1] if base else -1
        for e in self.events[self.hand_start :]:
            if type(e) is TilePlayed:
                t = e.tile
                if e.end is None:
                    left, right = t.low, t.high
                    base = ((left, right),)
                    left_part = []
                    right_part = []
                elif e.end is LEFT:
                    number = t.high if t.low == left else t.low
                    left_part.append((number, left))
                    left = number
                else:
                    number = t.high if t.low == right else t.low
                    right_part.append((right, number))
                    right = number
        # Concatenation: the common command adds one tile at one end of a long line.
        if right_part:
            base += tuple(right_part)
        if left_part:
            left_part.reverse()
            base = tuple(left_part) + base
        return base

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

    def play_checked(
        self, seat: int, tile: Tile, end: End | None = None, at_ms: int | None = None
    ) -> None:
        """`Play(seat, tile, end, at_ms)` on the board: the play made, as `play` makes it, if
        the rules accept it; else their error (NotYourTurn, IllegalPlay, MatchNotInProgress,
        ClockViolation, InvalidArgument), raised with the board unchanged. `end` None: the
        one end the tile fits (END_REQUIRED when it fits both); `at_ms` the command's time,
        required in a clocked match only."""
        # `mover` is the seat to play while the hand is being played on a line, else None.
        if (
            type(seat) is int
            and seat == self.mover
            and not self.clocks
            and type(tile) is Tile
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
        self._checked(seat, tile, end, at_ms)

    def execute(self, command: Command) -> None:
        """What `command` (a Play, Timeout, Resign or Abandon) does, played on the board;
        else the rules' error, raised with the board unchanged: InvalidArgument for a
        malformed command, RuleViolation (NotYourTurn, IllegalPlay, MatchNotInProgress,
        ClockViolation) for one the rules refuse now."""
        if isinstance(command, Play):
            self.play_checked(command.seat, command.tile, command.end, command.at_ms)
        elif isinstance(command, Timeout):
            self.timeout(command.seat, command.at_ms)
        elif isinstance(command, Resign):
            self.resign(command.seat, command.at_ms, command.note)
        elif isinstance(command, Abandon):
            self.abandon(command.reason, command.resigned_seat)
        else:
            raise InvalidArgument(
                f"unknown command {type(command).__name__}", reason="UNKNOWN_COMMAND"
            )

    def timeout(self, seat: int, at_ms: int | None) -> None:
        """`seat`'s clock has fallen by `at_ms` (RULES.md section 11): its timeout, then the
        forfeit it may cause or the first legal play made for it. Raises ClockViolation
        (NO_CLOCK, CLOCK_NOT_RUNNING, CLOCK_NOT_EXPIRED), MatchNotInProgress,
        InvalidArgument."""
        state = self.state()
        if not state.clocks:
            raise ClockViolation(
                f"match {state.match_id} is not played on a clock",
                reason="NO_CLOCK",
                match_id=state.match_id,
            )
        if state.phase != PLAYING or state.hand_over:
            raise not_being_played(state)
        seat = seat_number(state, seat)
        at = clock_time(state, at_ms)
        due = state.due_at_ms
        if state.running != seat or due is None:
            raise ClockViolation(
                f"match {state.match_id}, hand {state.hand}: seat {seat}'s clock is not "
                f"running (seat {state.running} is to play)",
                reason="CLOCK_NOT_RUNNING",
                match_id=state.match_id,
                seat=seat,
            )
        if at < due:
            raise ClockViolation(
                f"match {state.match_id}, hand {state.hand}: seat {seat} has {due - at} ms "
                f"left at {at} ms; its time runs out at {due} ms",
                reason="CLOCK_NOT_EXPIRED",
                match_id=state.match_id,
                seat=seat,
                due_at_ms=due,
                at_ms=at,
            )
        self.at = at
        self.events.append(TimedOut(self.hand, seat, at))
        clocks, timeouts = self.clocks, self.timeouts
        self.clocks = (*clocks[:seat], 0, *clocks[seat + 1 :])
        self.timeouts = (*timeouts[:seat], timeouts[seat] + 1, *timeouts[seat + 1 :])
        self.clock_since = self.at_ms = at
        rules = self.rules
        if rules.on_timeout == "forfeit" or self.timeouts[seat] >= rules.timeouts_to_forfeit:
            note = f"seat {seat} ran out of time"
            self._forfeit(self.side_of(seat), ForfeitCause.TIMEOUT, None, note)
            return
        plays = self.legal_plays(seat)
        assert plays, "a running clock belongs to a seat with a play"
        tile, end = _first(plays)
        self.play(seat, tile, end, rules.clock_increment * 1000, auto=True)

    def resign(self, seat: int, at_ms: int | None, note: str) -> None:
        """`seat` resigns: its side forfeits (RULES.md section 11). Raises
        MatchNotInProgress, ClockViolation (its time ran out first), InvalidArgument."""
        state = self.state()
        if state.phase != PLAYING:
            raise not_being_played(state)
        seat = seat_number(state, seat)
        if state.clocks:
            at = clock_time(state, at_ms)
            check_not_fallen(state, at)
            self.at = at
        note = check_text(note, "note", 240) or f"seat {seat} resigned"
        self._forfeit(self.side_of(seat), ForfeitCause.RESIGNED, seat, note)

    def abandon(self, reason: str, seat: int | None) -> None:
        """The match is abandoned (by the server), at any phase before its end; `seat` the
        one that resigned, if one did. Raises MatchNotInProgress, InvalidArgument."""
        info = self.info
        if self.phase == ENDED:
            raise MatchNotInProgress(
                f"match {info.match_id} has already ended",
                reason="MATCH_ENDED",
                match_id=info.match_id,
            )
        if seat is not None and (
            isinstance(seat, bool) or not isinstance(seat, int) or not 0 <= seat < self.seats
        ):
            raise InvalidArgument(
                f"match {info.match_id} has no seat {shown(seat)}",
                reason="NO_SUCH_SEAT",
                match_id=info.match_id,
            )
        note = check_text(reason, "reason", 200)
        ended = MatchEnded(MatchEndReason.ABANDONED, None, tuple(self.scores), seat, note)
        self._end(ended)

    def _forfeit(self, side: int, cause: ForfeitCause, resigned: int | None, note: str) -> None:
        """RULES.md section 11: the match ends at once, scores stand, and the winner is the
        best of the other sides (none on a tie for best)."""
        scores = self.scores
        others = [i for i in range(len(scores)) if i != side]
        top = max(scores[i] for i in others)
        leaders = [i for i in others if scores[i] == top]
        winner = leaders[0] if len(leaders) == 1 else None
        reason = MatchEndReason.FORFEIT
        self._end(MatchEnded(reason, winner, tuple(scores), resigned, note, side, cause, self.at))

    def _checked(self, seat: int, tile: Tile, end: End | None, at_ms: int | None) -> None:
        """`play_checked` by the rules' checks on the state as it stands (each raises what it
        finds), for what the fast checks did not take: a refusal, a clocked match, or an int
        or Tile subclass (played as plain values)."""
        command = Play(seat, tile, end, at_ms)
        state = self.state()
        check_play(state, command)
        end = choose_end(state, command)
        seat, tile = int(seat), Tile.of(tile.low, tile.high)
        if not state.clocks:
            self.play(seat, tile, end)
            return
        at = clock_time(state, at_ms)
        check_not_fallen(state, at)
        self.at = at
        self.play(seat, tile, end, state.clock_left(seat, at) + self.rules.clock_increment * 1000)

    def play(
        self,
        seat: int,
        tile: Tile,
        end: End | None,
        clock_ms: int | None = None,
        auto: bool = False,
    ) -> None:
        """A legal play (as `legal_plays` gives them) and all it forces; `end` None for the
        lead. In a clocked match (`at` set), `clock_ms` is the seat's time left after it
        (None: as it was, for the lead) and `auto` whether its timeout made it."""
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
        if self.at is not None:
            self._clock_play(seat, tile, end, clock_ms, auto)
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

    def _clock_play(
        self, seat: int, tile: Tile, end: End | None, clock_ms: int | None, auto: bool
    ) -> None:
        """The play just made, at `at` with its clock: the seat's time left, and its
        timeouts in a row forgotten when it chose the play itself."""
        at = self.at
        assert at is not None
        clocks = self.clocks
        if clock_ms is None:
            clock_ms = clocks[seat]  # the forced lead takes no time and earns none
        self.events[-1] = TilePlayed(self.hand, seat, tile, end, at, clock_ms, auto)
        self.clocks = (*clocks[:seat], clock_ms, *clocks[seat + 1 :])
        self.clock_since = self.at_ms = at
        timeouts = self.timeouts
        if not auto and end is not None and timeouts[seat]:
            self.timeouts = (*timeouts[:seat], 0, *timeouts[seat + 1 :])

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
        """Everything forced after a play until a seat has a choice: draws and passes (at
        `at` in a clocked match), or the block."""
        fit = _FIT_OF_ENDS[self.key]
        masks = self.masks
        seat = self.turn
        assert seat is not None
        events = self.events
        hand = self.hand
        boneyard = self.boneyard
        at = self.at
        interned = 0 <= hand < INTERNED_HANDS and at is None
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
                        events.append(TileDrawn(hand, seat, tile, at))
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
            events.append(PASSED_BY_HAND[hand][seat] if interned else Passed(hand, seat, at))
            seat = self.next_seat[seat]
            self.turn = self.mover = seat
        self.drawn = drawn

    def block(self) -> None:
        """The blocked hand's end: its winner from the sides' masks."""
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
        """The hand's end, then the match's (a single leader at the target) or the next
        hand (a tie for highest plays another, RULES.md section 7)."""
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
        """The match's end at the target, won by side `winner`."""
        self._end(MatchEnded(MatchEndReason.TARGET, winner, tuple(self.scores), None, ""))

    def _end(self, ended: MatchEnded) -> None:
        """The match's end, `ended`, and the seed's reveal."""
        info = self.info
        assert info.server_seed is not None
        if (
            info.rated
            and ended.reason != MatchEndReason.ABANDONED
            and all(p is not None for p in info.players)
        ):
            ended = replace(
                ended,
                holders=tuple((p.player_id, p.name, p.bot) for p in info.players if p is not None),
            )
        self.events.append(ended)
        if ended.at_ms is not None:
            self.at_ms = ended.at_ms
        self.phase = ENDED
        self.turn = self.mover = None
        self.must_play = None
        self.hand_over = True
        self.result = ended
        self.events.append(SeedRevealed(info.server_seed))
        self.info = MatchInfo(
            info.match_id, info.seats, info.partnerships, info.rules, info.commitment,
            info.name, info.server_seed, info.players, info.sides, info.rated,
        )  # fmt: skip

    def start_hand(self, number: int) -> None:
        """Deal hand `number` (again while void), then its forced lead."""
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
            self._nones = [0] * len(hands)
            self.base = None
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


_Setup = tuple[
    Rules, int, tuple[tuple[int, ...], ...], bool, tuple[int, ...], int, bool, int, bool, bool
]


def _setup_of(info: MatchInfo) -> _Setup:
    """What a Board reads from the match's rules, as its fields: rules, seats, sides,
    partnerships, next_seat, double_bonus, instant, target, one_then_pass, reduction. The
    last one made is kept: every state of a match shares its MatchInfo object, so a Board
    built for each command of the match reads them once."""
    global _last_setup
    last = _last_setup
    if last[0] is info:
        return last[1]
    rules = info.rules
    setup: _Setup = (
        rules, info.seats, info.sides, info.partnerships, _NEXT_SEAT[info.seats],
        rules.double_bonus, rules.match_end == "instant", rules.target,
        rules.draw == "one_then_pass", rules.endgame_reduction != "off",
    )  # fmt: skip
    _last_setup = (info, setup)
    return setup


_last_setup: tuple[MatchInfo | None, _Setup] = (None, None)  # type: ignore[assignment]


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
    [() if t is None else row[t] for t in _TILE_BY_BIT] for row in PLAYS
]
"""PLAYS by the ends' numbers, then by the tile's bit % 29 (0: no tile, no plays)."""

_NEXT_SEAT = ((), (0,), (1, 0), (1, 2, 0), (1, 2, 3, 0))
"""The seat after each seat, by the number of seats."""


def check_play(state: State, c: Play) -> None:
    """Raises what refuses `c` in `state`, but for its end and its time: MatchNotInProgress,
    InvalidArgument, NotYourTurn, IllegalPlay (TILE_NOT_HELD, MUST_PLAY_DRAWN_TILE,
    TILE_DOES_NOT_FIT)."""
    if state.phase != PLAYING or state.hand_over:
        raise not_being_played(state)
    if isinstance(c.seat, bool) or not isinstance(c.seat, int):
        raise InvalidArgument(f"seat must be a number, got {shown(c.seat)}")
    if not isinstance(c.tile, Tile):
        raise InvalidArgument("a play needs a tile", reason="TILE_REQUIRED")
    if c.end is not None and not isinstance(c.end, End):
        raise InvalidArgument("end must be left or right", reason="INVALID_END")
    if state.turn != c.seat:
        raise NotYourTurn(
            f"match {state.match_id}, hand {state.hand}: seat {state.turn} is to play, "
            f"not seat {c.seat}",
            reason="NOT_YOUR_TURN",
            match_id=state.match_id,
            seat=c.seat,
        )
    if c.tile not in state.hands[c.seat]:
        raise IllegalPlay(
            f"match {state.match_id}, hand {state.hand}: seat {c.seat} does not hold {c.tile}",
            reason="TILE_NOT_HELD",
            match_id=state.match_id,
            seat=c.seat,
        )
    if state.must_play is not None and c.tile != state.must_play:
        raise IllegalPlay(
            f"match {state.match_id}, hand {state.hand}: seat {c.seat} must play the tile it "
            f"drew, {state.must_play}",
            reason="MUST_PLAY_DRAWN_TILE",
            match_id=state.match_id,
            seat=c.seat,
        )
    if not state.fits(c.tile):
        assert state.ends is not None
        raise IllegalPlay(
            f"match {state.match_id}, hand {state.hand}: {c.tile} fits neither end "
            f"({state.ends[0]}|{state.ends[1]})",
            reason="TILE_DOES_NOT_FIT",
            match_id=state.match_id,
            seat=c.seat,
        )


def not_being_played(state: State) -> MatchNotInProgress:
    return MatchNotInProgress(
        f"match {state.match_id} is not being played ({state.phase})",
        reason="MATCH_ENDED" if state.phase == ENDED else "MATCH_NOT_IN_PROGRESS",
        match_id=state.match_id,
    )


def choose_end(state: State, c: Play) -> End:
    """The end `c` plays at, one `check_play` passed: its own, or the one end its tile
    fits. Raises IllegalPlay (TILE_DOES_NOT_FIT at the end named, END_REQUIRED)."""
    assert state.ends is not None
    left, right = state.ends[0], state.ends[1]
    on_left, on_right = c.tile.has(left), c.tile.has(right)
    if (c.end is End.LEFT and not on_left) or (c.end is End.RIGHT and not on_right):
        raise IllegalPlay(
            f"match {state.match_id}, hand {state.hand}: {c.tile} does not fit the "
            f"{c.end.value} end ({left if c.end is End.LEFT else right})",
            reason="TILE_DOES_NOT_FIT",
            match_id=state.match_id,
            seat=c.seat,
        )
    if c.end is not None:
        return c.end
    if on_left and on_right:
        raise IllegalPlay(
            f"match {state.match_id}, hand {state.hand}: {c.tile} fits both ends "
            f"({left}|{right}); say which",
            reason="END_REQUIRED",
            match_id=state.match_id,
            seat=c.seat,
        )
    return End.LEFT if on_left else End.RIGHT


def clock_time(state: State, at_ms: object) -> int:
    """The command's time in a clocked match: `at_ms`, or the latest time recorded if that
    is later. Raises InvalidArgument when it is missing or not a whole number >= 0."""
    if at_ms is None:
        raise InvalidArgument(
            f"match {state.match_id} is played on a clock: the command needs its at_ms",
            reason="AT_MS_REQUIRED",
            match_id=state.match_id,
        )
    if isinstance(at_ms, bool) or not isinstance(at_ms, int) or at_ms < 0:
        raise InvalidArgument(
            f"at_ms must be a whole number of milliseconds >= 0, got {shown(at_ms)}",
            reason="INVALID_AT_MS",
            match_id=state.match_id,
        )
    return at_ms if at_ms > state.at_ms else state.at_ms


def check_not_fallen(state: State, at_ms: int) -> None:
    """Raises ClockViolation CLOCK_EXPIRED when the running clock has fallen by `at_ms`:
    only the timeout may be recorded then."""
    due = state.due_at_ms
    if due is not None and at_ms >= due:
        raise ClockViolation(
            f"match {state.match_id}, hand {state.hand}: seat {state.running}'s time ran out "
            f"at {due} ms (now {at_ms} ms); its timeout comes first",
            reason="CLOCK_EXPIRED",
            match_id=state.match_id,
            seat=state.running,
            due_at_ms=due,
            at_ms=at_ms,
        )


def seat_number(state: State, seat: object) -> int:
    """`seat`, a seat of the match. Raises InvalidArgument NO_SUCH_SEAT."""
    if isinstance(seat, bool) or not isinstance(seat, int) or not 0 <= seat < state.seats:
        raise InvalidArgument(
            f"match {state.match_id} has no seat {shown(seat)}",
            reason="NO_SUCH_SEAT",
            match_id=state.match_id,
        )
    return seat


def first_legal_play(state: State, seat: int) -> tuple[Tile, End] | None:
    """The play a timeout makes for `seat` (RULES.md section 11): its first legal play in
    canonical order, tiles 0-0 .. 6-6 and the left end before the right; None when it has
    none."""
    plays = state.legal_plays(seat)
    return _first(plays) if plays else None


def _first(plays: Sequence[tuple[Tile, End]]) -> tuple[Tile, End]:
    return min(plays, key=lambda p: (p[0].index, p[1] is not End.LEFT))
