"""The open-hands par of a hand: its best result with every tile known, found by search, as
bridge's double-dummy solvers give a deal's par.

Once a match has ended every tile is known, the boneyard's order too. From any position of a
hand with two sides (two seats, or four in partnerships), `solve` finds the minimax value of
the rest of the hand, both sides playing perfectly with every tile in view, and a principal
line of play; `par` does it for a whole hand from its deal (the forced lead first), and
`shortfall` measures each play of a hand as it was played against the par.

The objective is one number: **side 0's points minus side 1's**, counted from the position
to the end of the hand, as the rules score them (headers with the near-target reduction, the
double bonus, going out, a blocked hand; nothing after the match ends at the target). Side 0
maximises it and side 1 minimises it; it does not value winning the match beyond those
points. Three sides or more (three seats, four seats each for themselves) are refused:
`TWO_SIDES_ONLY`.

The search is fail-soft alpha-beta in its minimax form (side 0 maximises, side 1
minimises: after a pass the same side plays again, so the sides do not simply alternate),
run as MTD(f) (null-window searches closing on the value, the points being small whole
numbers), over the choices of the hand: the draws,
passes and blocks the rules force, and any play that is a seat's only one, are made as part
of the play before, so a position is always a seat with a choice. A transposition table is
keyed on the position: each seat's tiles as a 28-bit mask, the ends and whether each is a
double (a line and its mirror image are one position), how far the boneyard has been drawn,
the seat to play and the tile it must play (a drawn one), and the sides' scores (which
decide the reduction and the match's end: a score so far from the target that no play of
its side to the hand's end can be reduced or end the match is keyed as the highest such
one). No count of passes is needed: passes are forced, and made with the play before.
Each entry keeps the bounds proven for the position and its best play, tried first
next time; the other plays' positions are looked up before any is searched (a known bound
may decide the window at once), then plays that score come first, doubles next, heavy
tiles next.

The plays and their points come from the rules' own tables (`state.PLAYS`, `scoring.place`,
`scoring.play_award`, `scoring.reduce`, `fastplay.blocked_winner_of_masks`); what the rules
force after a play (draws, passes, the block) is written out on the masks as
`fastplay.Board.advance` plays it. Every principal line is replayed on a `fastplay.Board`,
and its points there must be the value found; tests/unit/test_openhands.py checks every
step against the Board and the value against a full-tree search on the Board.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache

from .dealing import split
from .errors import BergenError, InvalidArgument
from .events import Dealt, Event, HandEnded, PointsScored, TilePlayed
from .fastplay import Board, blocked_winner_of_masks
from .rules import Rules
from .scoring import BLOCKED_POINTS, place, play_award, reduce
from .state import PLAYING, PLAYS, MatchInfo, State, fold
from .tiles import ALL_TILES, FITS, RESERVE, End, Tile, hand_size, side_of, sides_of

LEFT = End.LEFT
RIGHT = End.RIGHT
BOUND = 1000
"""More than any hand can score: the search's infinity."""
NEVER = 1 << 30
"""The score every side is keyed at under rules where the scores never change what a play
scores (no reduction, no match ended in the middle of a hand)."""
STAND_IN_SEED = "00" * 32
"""The server seed of the match a line is replayed in: the Board deals the next hand with it
when the line ends a hand, a deal nobody looks at."""

Play = tuple[int, Tile, End | None]
"""A play: the seat, its tile and the end it is laid at (None for the lead)."""
Step = tuple[int, End, int, int, int]
"""A play of one tile at one end, as the search holds it: (tile index, end, the ends after
it as a code, its points before the reduction, 1 when that code is the ends' mirror)."""
Position = tuple[tuple[int, ...], int, int, int, int, tuple[int, ...]]
"""A position with a choice: (each seat's tiles as a mask, the ends as a code, tiles drawn
from the boneyard, the seat to play, the bit of the tile it must play or 0, the sides'
scores)."""


@dataclass(frozen=True, slots=True)
class OpenDeal:
    """A hand's deal with every tile known: each seat's tiles and the boneyard in the order
    it is drawn, the rules it is played by, four seats in partnerships or not, and the
    sides' scores as the hand starts (None: all 0). The lead is the rules' (RULES.md
    section 2)."""

    hands: tuple[tuple[Tile, ...], ...]
    boneyard: tuple[Tile, ...]
    rules: Rules
    partnerships: bool = False
    scores: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class Par:
    """The open-hands par of a position: `value` is side 0's points minus side 1's from the
    position to the end of the hand with perfect play on both sides; `points` each side's
    points along the principal line `plays` (the forced lead included when from a deal),
    whose events on the rules core are `events`; `nodes` the positions searched."""

    value: int
    points: tuple[int, ...]
    plays: tuple[Play, ...]
    events: tuple[Event, ...]
    nodes: int


@dataclass(frozen=True, slots=True)
class Decision:
    """One play of a hand measured against the par. `before` is the par of the position the
    seat chose in and `after` the par once its play was made, the play's own points
    included (both side 0's points minus side 1's, to the hand's end); `loss` is what the
    seat's side gave up by it, in points, never below 0 (0 for a forced play); `options`
    every legal play with the par it leads to, canonical order; `best` those keeping the
    par."""

    seat: int
    side: int
    tile: Tile
    end: End
    before: int
    after: int
    loss: int
    options: tuple[tuple[Tile, End, int], ...]
    best: tuple[tuple[Tile, End], ...]


@dataclass(frozen=True, slots=True)
class Shortfall:
    """A hand as it was played against its par: `par` the par of the hand (side 0's points
    minus side 1's, the lead's points included), `played` what the hand actually gave
    (the same difference), each decision, and each side's loss over them. For a hand played
    to its end, `par - played == loss[0] - loss[1]`."""

    hand: int
    par: int
    played: int
    decisions: tuple[Decision, ...]
    loss: tuple[int, ...]
    nodes: int


def _code(ends: tuple[int, int, bool, bool]) -> int:
    left, right, left_double, right_double = ends
    return ((left * 7 + right) << 2) | (left_double << 1) | right_double


def _ends(code: int) -> tuple[int, int, bool, bool]:
    numbers = code >> 2
    return numbers // 7, numbers % 7, bool(code & 2), bool(code & 1)


def _mirror(code: int) -> int:
    """The ends read from the other side: a line and its mirror image play alike (the
    rules treat both ends the same), so the search holds one of the two."""
    left, right, left_double, right_double = _ends(code)
    return _code((right, left, right_double, left_double))


_CODES = range(49 * 4)
_CANONICAL: tuple[int, ...] = tuple(min(c, _mirror(c)) for c in _CODES)
"""By the ends' code: the code the search holds, the lower of it and its mirror's."""
_FIT: tuple[int, ...] = tuple(FITS[_ends(c)[0]] | FITS[_ends(c)[1]] for c in _CODES)
"""The tiles that fit either end, by the ends' code."""
_PLACED: tuple[tuple[tuple[tuple[End, int], ...], ...], ...] = tuple(
    tuple(
        tuple(
            (end, _code(place(_ends(c), t, end is LEFT))) for _, end in PLAYS[(c >> 2)].get(t, ())
        )
        for t in ALL_TILES
    )
    for c in _CODES
)
"""By the ends' code and a tile's index: its legal plays (the rules' `PLAYS`, left first),
each with the ends' code after it (`scoring.place`)."""


def _steps(rules: Rules, distinct: bool) -> list[list[tuple[Step, ...]]]:
    """`_PLACED` with each play's points before the reduction (`scoring.play_award` on a
    line of more than one tile: the search never plays the lead) and the ends after it as
    the search holds them. `distinct`: of a tile's two plays, only the first when both
    leave the same position."""
    out: list[list[tuple[Step, ...]]] = []
    for c in _CODES:
        row: list[tuple[Step, ...]] = []
        for t in ALL_TILES:
            plays: list[Step] = []
            for end, after in _PLACED[c][t.index]:
                held = _CANONICAL[after]
                if distinct and any(p[2] == held for p in plays):
                    continue
                base = play_award(rules, t, _ends(after), 2, 0)[1]
                plays.append((t.index, end, held, base, int(held != after)))
            row.append(tuple(plays))
        out.append(row)
    return out


_Tables = tuple[
    list[list[tuple[Step, ...]]],
    list[list[tuple[Step, ...]]],
    list[list[tuple[int, Step]]],
]


@lru_cache(maxsize=4)
def _tables(double_bonus: int) -> _Tables:
    """By the `double_bonus` option (the only one that changes what a play scores before
    the reduction): the plays of a tile by the ends (`_steps`), every play; the same with
    one of two plays leaving one position, for the search; and by the ends, every distinct
    play of any tile (with its bit) in the order the search tries them."""
    rules = Rules(double_bonus=double_bonus)
    steps = _steps(rules, False)
    distinct = _steps(rules, True)
    by_priority = [
        sorted(((1 << play[0], play) for plays in row for play in plays),
               key=lambda bit_play: _priority(bit_play[1]))
        for row in distinct
    ]  # fmt: skip
    return steps, distinct, by_priority


def _end(end: End, flipped: bool) -> End:
    """The line's end for `end` of the search's ends, mirrored or not."""
    return end if not flipped else RIGHT if end is LEFT else LEFT


def _priority(step: Step) -> int:
    """Plays tried first: those that score, then doubles, then heavy tiles."""
    tile = ALL_TILES[step[0]]
    return -(step[3] * 100 + tile.is_double * 50 + tile.pips)


class Solver:
    """The solver of one hand of two sides: its rules, seats and boneyard (in draw order,
    from its first tile or from any tile on), and the table it fills, kept from one
    position of the hand to the next. `node` gives the search's position for a State;
    `moves`, `step`, `exact`, `after` and `line` work on positions. Raises
    InvalidArgument (TWO_SIDES_ONLY) for three sides or more."""

    def __init__(
        self, rules: Rules, seats: int, partnerships: bool, boneyard: Sequence[Tile]
    ) -> None:
        sides = sides_of(seats, partnerships)
        if len(sides) != 2:
            raise InvalidArgument(
                f"the open-hands par is solved for two sides; this hand has {len(sides)}",
                reason="TWO_SIDES_ONLY",
            )
        self.rules = rules
        self.seats = seats
        self.partnerships = partnerships
        self.boneyard = tuple(boneyard)
        self.table: dict[Position, tuple[int, int, Step | None]] = {}
        self._counted = [0]
        tables = _tables(rules.double_bonus)
        self.steps = tables[0]
        self.step, self.search, self.scored = _searcher(
            rules, seats, partnerships, tuple(t.bit for t in boneyard), tables, self.table,
            self._counted,
        )  # fmt: skip

    @property
    def nodes(self) -> int:
        """The positions searched so far."""
        return self._counted[0]

    def clear(self) -> None:
        """Forget the table. The search's closures call themselves (a reference cycle), so
        without this the table would live on until the cyclic collector came by, and that
        collection would walk all of it."""
        self.table.clear()

    def node(self, state: State) -> Position:
        """The search's position for `state`, a seat with a choice in this hand. Raises
        InvalidArgument when it is not one, or hides a tile."""
        if state.phase != PLAYING or state.hand_over or state.turn is None or state.ends is None:
            raise InvalidArgument(
                f"match {state.match_id}: no seat has a play to choose now",
                reason="NO_DECISION",
                match_id=state.match_id,
            )
        _check_known(state)
        drawn = len(self.boneyard) - len(state.boneyard)
        if drawn < 0 or self.boneyard[drawn:] != state.boneyard:
            raise InvalidArgument(
                f"match {state.match_id}, hand {state.hand}: the boneyard is not this hand's",
                reason="OTHER_HAND",
                match_id=state.match_id,
            )
        must = state.must_play.bit if state.must_play is not None else 0
        code = _code(state.ends)
        scores = self.scored(list(state.masks), drawn, state.scores)
        return (state.masks, _CANONICAL[code], drawn, state.turn, must, scores)

    def flipped(self, state: State) -> bool:
        """Whether the search holds `state`'s ends as their mirror (its left is the
        line's right)."""
        assert state.ends is not None
        code = _code(state.ends)
        return _CANONICAL[code] != code

    def moves(self, node: Position) -> list[Step]:
        """The legal plays at `node`, in canonical order (tiles 0-0 .. 6-6, left first)."""
        hands, code, _, turn, must, _ = node
        row = self.steps[code]
        fitting = must or hands[turn] & _FIT[code]
        out: list[Step] = []
        while fitting:
            bit = fitting & -fitting
            fitting ^= bit
            out.extend(row[bit.bit_length() - 1])
        return out

    def exact(self, node: Position, guess: int = 0) -> int:
        """The par of `node`: side 0's points minus side 1's to the end of the hand. The
        search starts from `guess` (the closer, the fewer null-window searches)."""
        search = self.search
        low, high = -BOUND, BOUND
        while low < high:
            beta = guess + 1 if guess == low else guess
            guess = search(node, beta - 1, beta)
            if guess < beta:
                high = guess
            else:
                low = guess
        return guess

    def after(self, node: Position, step: Step, guess: int = 0) -> int:
        """The par once `step` is played at `node`, its own points included (`guess`:
        as `exact`'s, for that par)."""
        points, child = self.step(node, step)
        return points if child is None else points + self.exact(child, guess - points)

    def line(self, node: Position, value: int, flipped: bool) -> list[Play]:
        """A principal line from `node`, whose par is `value`, `flipped` when the search
        holds the line's ends as their mirror: at each position the best play the search
        found there if it keeps the par, else the first that does in canonical order.
        (Proving that a play falls short can cost as much as the search itself: trying
        the search's own first spares most of those proofs.)"""
        plays: list[Play] = []
        current: Position | None = node
        while current is not None:
            mirrored = flipped  # the line's left end is the search's right one
            entry = self.table.get(current)
            known = entry[2] if entry is not None else None
            steps = sorted(
                self.moves(current),
                key=lambda s: (s != known, s[0], _end(s[1], mirrored) is RIGHT),
            )
            for step in steps:
                points, child = self.step(current, step)
                rest = value - points
                if child is None:
                    kept = rest == 0
                else:
                    kept = self.search(child, rest - 1, rest + 1) == rest
                if kept:
                    end = _end(step[1], flipped)
                    plays.append((current[3], ALL_TILES[step[0]], end))
                    flipped ^= bool(step[4])
                    current, value = child, rest
                    break
            else:
                raise BergenError(f"no play keeps the par {value} at {current}")
        return plays


def _searcher(
    rules: Rules,
    seats: int,
    partnerships: bool,
    bone: tuple[int, ...],
    tables: _Tables,
    table: dict[Position, tuple[int, int, Step | None]],
    counted: list[int],
) -> tuple[
    Callable[[Position, Step], tuple[int, Position | None]],
    Callable[[Position, int, int], int],
    Callable[[list[int], int, tuple[int, ...]], tuple[int, ...]],
]:
    """The step and the search of a hand, as closures over its tables (locals are the
    fastest names CPython looks up)."""
    side_of_seat = tuple(side_of(s, partnerships) for s in range(seats))
    side_seats = sides_of(seats, partnerships)
    next_seat = tuple((s + 1) % seats for s in range(seats))
    stock = len(bone) - RESERVE
    instant = rules.match_end == "instant"
    target = rules.target
    domino = rules.domino_points
    one_then_pass = rules.draw == "one_then_pass"
    reduction = rules.endgame_reduction != "off"
    steps, ordered, by_priority = tables
    fit_of = _FIT
    top = max(step[3] for row in steps for plays in row for step in plays)
    partners = partnerships

    def safe(plays: int) -> int:
        """The highest score from which `plays` plays of a side can neither be reduced
        nor end the match (RULES.md sections 5 and 7)."""
        if reduction and instant:
            return min(target - 4 - top * (plays - 1), target - 1 - top * plays)
        if reduction:
            return target - 4 - top * (plays - 1)
        if instant:
            return target - 1 - top * plays
        return NEVER

    safe_of = [safe(plays) for plays in range(len(ALL_TILES) + 1)]
    never = not reduction and not instant
    two = seats == 2

    def scored(held: list[int], drawn: int, scores: tuple[int, ...]) -> tuple[int, ...]:
        """The scores as the position is keyed: a side's score at or below the highest
        from which no play of its own to the hand's end can be reduced or end the match
        is that highest score (the rest of the hand plays alike from any of them)."""
        if never:
            return (NEVER, NEVER)
        rest = stock - drawn
        if partners:
            safe0 = safe_of[(held[0] | held[2]).bit_count() + rest]
            safe1 = safe_of[(held[1] | held[3]).bit_count() + rest]
        else:
            safe0 = safe_of[held[0].bit_count() + rest]
            safe1 = safe_of[held[1].bit_count() + rest]
        s0, s1 = scores
        return (s0 if s0 > safe0 else safe0, s1 if s1 > safe1 else safe1)

    def blocked(hands: list[int]) -> int:
        masks = []
        for seats_of_side in side_seats:
            m = 0
            for s in seats_of_side:
                m |= hands[s]
            masks.append(m)
        winner = blocked_winner_of_masks(rules, masks)
        if winner is None:
            return 0
        return BLOCKED_POINTS if winner == 0 else -BLOCKED_POINTS

    def fits(held: list[int], fit: int) -> bool:
        """Whether any seat holds a tile of `fit`."""
        every = 0
        for m in held:
            every |= m
        return bool(every & fit)

    def step(node: Position, play: Step) -> tuple[int, Position | None]:
        """The play `play` at `node` and all it forces (fastplay.Board.play and advance):
        its points (side 0's minus side 1's) and the next position with a choice, None
        when the hand is over."""
        hands, _, drawn, seat, _, scores = node
        index, _, code, base, _ = play
        if two:
            # Two seats, each its own side, written out: the common play, after which
            # the other seat has a play, makes no list.
            h0, h1 = hands
            if seat:
                h1 ^= 1 << index
                mine, other = h1, h0
            else:
                h0 ^= 1 << index
                mine, other = h0, h1
        else:
            held = list(hands)
            mine = held[seat] ^ (1 << index)
            held[seat] = mine
        side = side_of_seat[seat]
        points = 0
        if base:
            score = scores[side]
            gained = reduce(rules, base, score)
            if gained:
                if not never:
                    scores = (
                        (score + gained, scores[1]) if side == 0 else (scores[0], score + gained)
                    )
                points = gained if side == 0 else -gained
                if instant and score + gained >= target:
                    return points, None  # the match is over: nothing more is scored
        if not mine:
            return points + (domino if side == 0 else -domino), None
        if two and not one_then_pass:
            fit = fit_of[code]
            turn, must = 1 - seat, 0
            if not other & fit:
                # The other seat draws until a tile fits, or passes when none is left to
                # draw; the hand is blocked when nobody can play and nothing can be drawn.
                while drawn < stock:
                    bit = bone[drawn]
                    drawn += 1
                    other |= bit
                    if bit & fit:
                        must = bit
                        break
                if seat:
                    h0 = other
                else:
                    h1 = other
                if not must:
                    if not (h0 | h1) & fit:
                        return points + blocked([h0, h1]), None
                    turn = seat  # the other seat passes
            if not never:
                rest = stock - drawn
                safe0 = safe_of[h0.bit_count() + rest]
                safe1 = safe_of[h1.bit_count() + rest]
                s0, s1 = scores
                if s0 < safe0 or s1 < safe1:
                    scores = (s0 if s0 > safe0 else safe0, s1 if s1 > safe1 else safe1)
            return points, ((h0, h1), code, drawn, turn, must, scores)
        if two:
            held = [h0, h1]
        return forced_after(held, code, drawn, next_seat[seat], scores, points)

    def forced_after(
        held: list[int], code: int, drawn: int, turn: int, scores: tuple[int, ...], points: int
    ) -> tuple[int, Position | None]:
        """What the rules force once a play has left the ends `code` and `turn` is to
        play: the step's end."""
        fit = fit_of[code]
        if held[turn] & fit:
            return points, (tuple(held), code, drawn, turn, 0, scored(held, drawn, scores))
        if drawn >= stock and not fits(held, fit):
            return points + blocked(held), None
        while not held[turn] & fit:
            if drawn < stock:
                for _ in range(1 if one_then_pass else stock - drawn):
                    bit = bone[drawn]
                    drawn += 1
                    held[turn] |= bit
                    if bit & fit:
                        after = scored(held, drawn, scores)
                        return points, (tuple(held), code, drawn, turn, bit, after)
                    if drawn >= stock and not fits(held, fit):
                        return points + blocked(held), None
            turn = next_seat[turn]  # a pass
        return points, (tuple(held), code, drawn, turn, 0, scored(held, drawn, scores))

    def forced(node: Position, play: Step) -> tuple[int, Position | None]:
        """`step`, then each play forced after it (a seat with one legal play): the search
        holds only positions with a choice."""
        points, child = step(node, play)
        while child is not None:
            hands, code, _, turn, must, _ = child
            bits = must or hands[turn] & fit_of[code]
            if bits & (bits - 1):
                break
            only = ordered[code][bits.bit_length() - 1]
            if len(only) != 1:
                break
            more, child = step(child, only[0])
            points += more
        return points, child

    def search(node: Position, alpha: int, beta: int) -> int:
        """The par of `node` if it lies strictly between `alpha` and `beta`; else a bound
        on the same side of the window (fail-soft alpha-beta)."""
        counted[0] += 1
        entry = table.get(node)
        if entry is not None:
            low, high, known = entry
            if low >= beta:
                return low
            if high <= alpha:
                return high
            if low == high:
                return low
            if low > alpha:
                alpha = low
            if high < beta:
                beta = high
        else:
            low, high, known = -BOUND, BOUND, None
        hands, code, _, turn, must, _ = node
        if must:
            plays = list(ordered[code][must.bit_length() - 1])
        else:
            fitting = hands[turn] & fit_of[code]
            if not fitting & (fitting - 1):
                plays = list(ordered[code][fitting.bit_length() - 1])
            else:
                plays = [play for bit, play in by_priority[code] if bit & fitting]
        if known is not None and plays[0] is not known and known in plays:
            plays.remove(known)
            plays.insert(0, known)
        alpha0, beta0 = alpha, beta
        chosen = known
        maximising = side_of_seat[turn] == 0
        # Each play's position is looked up first: one already known to decide the window
        # (an enhanced transposition cutoff) saves searching the others.
        kids = []
        for play in plays:
            points, child = forced(node, play)
            if child is None:
                found = points
                if (found >= beta) if maximising else (found <= alpha):
                    table[node] = (found, high, play) if maximising else (low, found, play)
                    return found
            else:
                seen = table.get(child)
                if seen is not None:
                    if maximising:
                        found = points + seen[0]
                        if found >= beta:
                            table[node] = (found, high, play)
                            return found
                    else:
                        found = points + seen[1]
                        if found <= alpha:
                            table[node] = (low, found, play)
                            return found
            kids.append((play, points, child))
        if maximising:
            best = -BOUND - 1
            for play, points, child in kids:
                value = (
                    points
                    if child is None
                    else points + search(child, alpha - points, beta - points)
                )
                if value > best:
                    best = value
                    chosen = play
                    if value > alpha:
                        alpha = value
                        if alpha >= beta:
                            break
        else:
            best = BOUND + 1
            for play, points, child in kids:
                value = (
                    points
                    if child is None
                    else points + search(child, alpha - points, beta - points)
                )
                if value < best:
                    best = value
                    chosen = play
                    if value < beta:
                        beta = value
                        if alpha >= beta:
                            break
        if best <= alpha0:
            table[node] = (low, best, known)
        elif best >= beta0:
            table[node] = (best, high, chosen)
        else:
            table[node] = (best, best, chosen)
        return best

    return step, search, scored


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector paused while a search runs: the search makes millions
    of short-lived tuples and no cycle, and each full collection would walk the whole
    table (a third of the time of a large search). The pause is the process's: another
    thread's collections wait for it too."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _check_known(state: State) -> None:
    """Raises InvalidArgument (TILES_HIDDEN) when `state` hides a tile."""
    if any(t is None for h in state.hands for t in h) or any(t is None for t in state.boneyard):
        raise InvalidArgument(
            f"match {state.match_id}, hand {state.hand}: the open-hands par needs every tile "
            "known (the full record, not a seat's view)",
            reason="TILES_HIDDEN",
            match_id=state.match_id,
        )


def _stand_in_deal(
    server_seed: bytes, match_id: str, hand: int, attempt: int, client_seeds: Sequence[str]
) -> tuple[tuple[tuple[Tile, ...], ...], tuple[Tile, ...]]:
    """The next hand's deal when a replayed line ends a hand: never looked at."""
    return split(ALL_TILES, len(client_seeds))


def _replay(state: State, plays: Sequence[Play]) -> tuple[tuple[Event, ...], tuple[int, ...]]:
    """`plays` made on the rules core from `state`, each checked legal: the events of the
    hand they make and each side's points in them. Raises BergenError for an illegal one."""
    board = Board(_replayable(state), _stand_in_deal)
    for seat, tile, end in plays:
        if end is None:  # the lead: the rules' tile, from its holder, on an empty table
            legal = not board.line_length() and board.lead() == tile.bit & board.masks[seat]
        else:
            legal = (tile, end) in board.legal_plays(seat)
        if not legal:
            raise BergenError(f"hand {state.hand}: {tile} {end} of seat {seat} is not legal")
        board.play(seat, tile, end)
    return _hand_points(state, board.events)


def _hand_points(
    state: State, events: Sequence[Event]
) -> tuple[tuple[Event, ...], tuple[int, ...]]:
    """The events of `state`'s hand among `events` (up to its end) and each side's points."""
    points = [0] * len(state.scores)
    kept: list[Event] = []
    for e in events:
        kept.append(e)
        if type(e) is PointsScored:
            points[e.side] += e.points
        elif type(e) is HandEnded:
            break
    return tuple(kept), tuple(points)


def _replayable(state: State) -> State:
    """`state` in a match the Board may end and go on from: a server seed to deal the
    next hand with, no clocks (the par has no time)."""
    info = state.info
    if info.server_seed is None:
        info = MatchInfo(
            info.match_id, info.seats, info.partnerships, info.rules, info.commitment,
            info.name, STAND_IN_SEED, info.players, info.sides, info.rated,
        )  # fmt: skip
    return state._replace(info=info, clocks=(), clock_since=None, timeouts=())


def _solved(search: Solver, state: State, lead: Sequence[Play] = ()) -> Par:
    """The par from `state`, after `lead` (plays already made from it): the search's value,
    checked against its principal line replayed on the rules core."""
    after = state
    if lead:
        board = Board(_replayable(state), _stand_in_deal)
        for seat, tile, end in lead:
            board.play(seat, tile, end)
        after = board.state()
    value = 0
    plays: list[Play] = list(lead)
    if after.phase == PLAYING and not after.hand_over and after.hand == state.hand:
        node = search.node(after)
        value = search.exact(node)
        plays += search.line(node, value, search.flipped(after))
    events, points = _replay(state, plays)
    _, lead_points = _replay(state, lead) if lead else ((), (0, 0))
    if points[0] - points[1] != value + lead_points[0] - lead_points[1]:
        raise BergenError(
            f"hand {state.hand}: the principal line scores {points} on the rules core, "
            f"not the par {value}"
        )
    return Par(value + lead_points[0] - lead_points[1], points, tuple(plays), events, search.nodes)


def solve(state: State) -> Par:
    """The open-hands par of `state`, a position of a hand with two sides where a seat has
    a play to choose and every tile is known. Raises InvalidArgument: NO_DECISION,
    TILES_HIDDEN, TWO_SIDES_ONLY."""
    search = Solver(state.rules, state.seats, state.partnerships, _known(state.boneyard))
    with _collector_paused():
        try:
            return _solved(search, state)
        finally:
            search.clear()


def _known(tiles: Sequence[Tile | None]) -> tuple[Tile, ...]:
    return tuple(t for t in tiles if t is not None)


def start_state(deal: OpenDeal) -> State:
    """The State of a match with `deal` dealt as its first hand, before the lead. Raises
    InvalidArgument (INVALID_DEAL) unless every seat holds its full hand and the 28 tiles
    are each dealt once."""
    seats = len(deal.hands)
    rules = deal.rules
    sides = sides_of(seats, deal.partnerships) if 2 <= seats <= 4 else ()
    tiles = [t for h in deal.hands for t in h] + list(deal.boneyard)
    if (
        not sides
        or (deal.partnerships and seats != 4)
        or any(len(h) != hand_size(seats) for h in deal.hands)
        or len(tiles) != len(ALL_TILES)
        or len(set(tiles)) != len(ALL_TILES)
        or not all(type(t) is Tile for t in tiles)
    ):
        raise InvalidArgument(
            "an open deal gives 2 to 4 seats their full hands and the rest of the 28 tiles "
            "to the boneyard, each tile once",
            reason="INVALID_DEAL",
        )
    scores = deal.scores if deal.scores is not None else (0,) * len(sides)
    if len(scores) != len(sides):
        raise InvalidArgument(
            f"an open deal of {len(sides)} sides needs {len(sides)} scores, got {len(scores)}",
            reason="INVALID_DEAL",
        )
    info = MatchInfo(
        "open-hands", seats, deal.partnerships, rules, "", "", STAND_IN_SEED,
        (None,) * seats, sides,
    )  # fmt: skip
    return State(
        info,
        phase=PLAYING,
        hand=1,
        attempt=1,
        hands=deal.hands,
        masks=tuple(sum(t.bit for t in h) for h in deal.hands),
        boneyard=deal.boneyard,
        scores=tuple(scores),
        hand_over=False,
        version=1,
    )


def par(deal: OpenDeal) -> Par:
    """The open-hands par of a hand from its deal: the forced lead, then perfect play by
    both sides. Raises InvalidArgument: INVALID_DEAL, VOID_DEAL (no seat may lead),
    TWO_SIDES_ONLY."""
    state = start_state(deal)
    search = Solver(deal.rules, len(deal.hands), deal.partnerships, deal.boneyard)
    board = Board(state, _stand_in_deal)
    lead = board.lead()
    if not lead:
        raise InvalidArgument(
            "no seat holds a double: the deal is void and is dealt again", reason="VOID_DEAL"
        )
    seat = next(s for s, m in enumerate(state.masks) if m & lead)
    tile = next(t for t in ALL_TILES if t.bit == lead)
    with _collector_paused():
        try:
            return _solved(search, state, [(seat, tile, None)])
        finally:
            search.clear()


def shortfall(events: Sequence[Event], hand: int, state: State | None = None) -> Shortfall:
    """Hand `hand` of a match's full stream (every tile shown, as the record holds it once
    the match has ended) against its open-hands par: each play a seat chose, what it gave
    up. `events` start at the match's creation, or follow `state`. Raises InvalidArgument:
    NO_SUCH_HAND, TILES_HIDDEN, TWO_SIDES_ONLY; CorruptRecord as `fold`."""
    search: Solver | None = None
    decisions: list[Decision] = []
    before_first = 0
    first: int | None = None
    played = 0
    dealt = state is not None and state.hand == hand
    for e in events:
        if type(e) is Dealt and e.hand == hand:
            dealt = True
        if type(e) is TilePlayed and e.hand == hand and e.end is not None and state is not None:
            if search is None:
                _check_known(state)
                search = Solver(state.rules, state.seats, state.partnerships,
                                 _known(state.boneyard))  # fmt: skip
            with _collector_paused():
                decision = _decision(search, state, e.seat, e.tile, e.end)
            if first is None:
                first = decision.before
                before_first = played
            decisions.append(decision)
        if type(e) is PointsScored and e.hand == hand:
            played += e.points if e.side == 0 else -e.points
        state = fold((e,), state)
    if not dealt:
        raise InvalidArgument(f"the stream has no hand {hand}", reason="NO_SUCH_HAND")
    if search is not None:
        search.clear()
    loss = [0, 0]
    for d in decisions:
        loss[d.side] += d.loss
    hand_par = played if first is None else before_first + first
    return Shortfall(
        hand, hand_par, played, tuple(decisions), tuple(loss),
        search.nodes if search is not None else 0,
    )  # fmt: skip


def _decision(search: Solver, state: State, seat: int, tile: Tile, end: End) -> Decision:
    node = search.node(state)
    flipped = search.flipped(state)
    value = search.exact(node)
    options = sorted(
        (
            (ALL_TILES[step[0]], _end(step[1], flipped), search.after(node, step, value))
            for step in search.moves(node)
        ),
        key=lambda o: (o[0].index, o[1] is RIGHT),
    )
    side = side_of(seat, state.partnerships)
    sign = 1 if side == 0 else -1
    before = sign * max(sign * v for _, _, v in options)
    after = next(v for t, e, v in options if t is tile and e is end)
    return Decision(
        seat, side, tile, end, before, after, sign * (before - after),
        tuple(options), tuple((t, e) for t, e, v in options if v == before),
    )  # fmt: skip
