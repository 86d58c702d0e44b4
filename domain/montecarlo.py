"""A Monte Carlo play policy that knows only what its seat has seen.

The seat's knowledge is the fold of its redacted event stream (hidden tiles are None) plus
what the stream implies about the hidden tiles:

- a seat that draws or passes facing ends `L|R` holds no tile showing L or R at that moment;
  tiles it draws afterwards are not covered by that fact;
- the forced lead tells which doubles (or tiles) no dealt hand held.

Each hidden tile of another seat is a *slot* with the set of tiles it cannot be (a bit mask,
as `Tile.bit`). Every fact applies to all the slots a seat holds at the time, so a seat's
slots, oldest first, have shrinking masks. When the seat plays a known tile, its oldest slot
that may hold it is removed: any other choice leaves a stricter set of slots, so the possible
worlds stay exactly those consistent with what was seen.

A decision samples worlds (every hidden tile given a place, consistent with the slots), then
plays out each legal play in each world to the end of the hand with the greedy policy for
every seat, on the rules core (`fastplay.Board`), and picks the play with the best average of
(my side's points - the best other side's points) over the rest of the hand, with a bonus
for winning the match.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from . import fastplay
from .commands import Play
from .dealing import split
from .events import Dealt, Event, HandEnded, MatchEnded, Passed, PointsScored, TileDrawn, TilePlayed
from .frozen import fast_init
from .rules import Rules
from .scoring import place, play_award
from .state import ENDED, PLAYING, MatchInfo, State, evolve
from .tiles import ALL_BITS, ALL_TILES, FITS, End, Tile

PLAYOUT_SEED = "00" * 32
"""A stand-in server seed so the engine can run past a hand's end; nothing after it counts."""
MAX_BUDGET_S = 0.9
"""A decision never takes longer than this (the goal is under one second)."""

MATCH_WIN_BONUS = 10.0
"""Value of ending the match as its winner inside a playout, on top of the points."""


@dataclass(frozen=True, slots=True)
class Settings:
    """How hard the policy thinks.

    `samples`: worlds sampled per decision (each play is tried in every world); None for as
    many as `budget_s` allows. `budget_s`: wall time per decision, capped at MAX_BUDGET_S
    when `samples` is None; with `samples` set it only caps the time, uncapped (give
    `math.inf` for a run that does not depend on the machine's speed). `horizon`: plays
    per playout after the candidate (None: to the end of the hand).
    """

    samples: int | None = None
    budget_s: float = 0.3
    horizon: int | None = None
    min_samples: int = 4


@dataclass(frozen=True, slots=True)
class Knowledge:
    """What seat `seat` knows: the fold of its redacted stream, and per seat the forbidden
    masks of that seat's hidden tiles, oldest first (empty for the seat itself).

    `passed_over`: what the other seats' choices suggest, for policies that infer from them
    (`ismcts`): (seat, mask) for each play of another seat in this hand, since that seat
    last drew, that scored less at once than some other tile would have; the mask holds
    those tiles. A seat that plays greedily held none of them, and still holds none: it has
    drawn nothing since. These are hints, not facts: no world is ruled out by them."""

    seat: int
    state: State | None
    slots: tuple[tuple[int, ...], ...] = ()
    passed_over: tuple[tuple[int, int], ...] = ()


fast_init(Knowledge)


def _lead_forbidden(lead_rule: str, tile: Tile) -> int:
    """Tiles no dealt hand held, given the forced lead `tile`."""
    if lead_rule == "highest_double":
        return sum(t.bit for t in ALL_TILES if t.is_double and t > tile)
    if tile.is_double:
        return sum(t.bit for t in ALL_TILES if t.is_double and t < tile)
    # lowest_double_else_lowest_tile without a double dealt: no double, nothing lower.
    return sum(t.bit for t in ALL_TILES if t.is_double or t < tile)


def _without_slot(slots: tuple[int, ...], tile: Tile) -> tuple[int, ...]:
    """`slots` less the oldest one that may hold `tile` (the newest if none may)."""
    for i, mask in enumerate(slots):
        if not mask & tile.bit:
            return slots[:i] + slots[i + 1 :]
    return slots[:-1]


def learn(k: Knowledge, event: Event) -> Knowledge:
    """Knowledge after one more event of the seat's redacted stream."""
    before = k.state
    state = evolve(before, event)
    slots = k.slots
    seat = k.seat
    passed_over = k.passed_over
    if isinstance(event, Dealt):
        slots = tuple(() if s == seat else (0,) * len(h) for s, h in enumerate(event.hands))
        passed_over = ()
    elif isinstance(event, TilePlayed) and slots:
        assert before is not None
        if before.ends is None:
            forbid = _lead_forbidden(before.rules.lead, event.tile)
            slots = tuple(tuple(m | forbid for m in ms) for ms in slots)
        if event.seat != seat:
            slots = _replace_at(slots, event.seat, _without_slot(slots[event.seat], event.tile))
            if before.ends is not None and before.must_play is None and event.end is not None:
                better = _better_plays(before, event.seat, event.tile, event.end)
                if better:
                    passed_over += ((event.seat, better),)
    elif isinstance(event, (TileDrawn, Passed)) and event.seat != seat and slots:
        assert before is not None
        ends = before.ends
        forbid = FITS[ends[0]] | FITS[ends[1]] if ends is not None else 0
        held = tuple(m | forbid for m in slots[event.seat])
        if isinstance(event, TileDrawn):
            held += (0,) if event.tile is None else (ALL_BITS & ~event.tile.bit,)
            passed_over = tuple(p for p in passed_over if p[0] != event.seat)
        slots = _replace_at(slots, event.seat, held)
    return Knowledge(seat, state, slots, passed_over)


def _better_plays(before: State, seat: int, tile: Tile, end: End) -> int:
    """The tiles that would have scored more at once than `tile` at `end`, played by `seat`
    in `before`: a mask."""
    ends = before.ends
    assert ends is not None
    rules = before.rules
    score = before.scores[before.side_of(seat)]
    on_line = len(before.line) + 1
    played = play_award(rules, tile, place(ends, tile, end is End.LEFT), on_line, score)[0]
    left, right = ends[0], ends[1]
    better = 0
    for t in ALL_TILES:
        if t.bit == tile.bit:
            continue
        points = -1
        if t.bit & FITS[left]:
            points = play_award(rules, t, place(ends, t, True), on_line, score)[0]
        if t.bit & FITS[right]:
            points = max(points, play_award(rules, t, place(ends, t, False), on_line, score)[0])
        if points > played:
            better |= t.bit
    return better


def _replace_at(
    slots: tuple[tuple[int, ...], ...], seat: int, new: tuple[int, ...]
) -> tuple[tuple[int, ...], ...]:
    return (*slots[:seat], new, *slots[seat + 1 :])


def knowledge(events: Iterable[Event], seat: int) -> Knowledge:
    """Fold a seat's redacted stream into its knowledge. Raises CorruptRecord as `fold`."""
    k = Knowledge(seat, None)
    for e in events:
        k = learn(k, e)
    return k


def unseen_tiles(k: Knowledge) -> list[Tile]:
    """Tiles the seat cannot place: not in its hand and not on the line."""
    s = k.state
    assert s is not None
    known = 0
    for t in s.hands[k.seat]:
        if t is not None:
            known |= t.bit
    for a, b in s.line:
        known |= Tile.of(a, b).bit
    return [t for t in ALL_TILES if not known & t.bit]


class Sampler:
    """Deals the hidden tiles into worlds consistent with a seat's knowledge.

    Built once per decision. Slots with constraints are filled first, most constrained
    first, each a random allowed tile (moving earlier ones along an augmenting path when
    none is left); the free slots take the rest in random order; then
    random swaps that keep every constraint mix the result towards uniform.

    Raises ValueError when the knowledge does not add up (slots and hidden tiles differ in
    number, or no world satisfies it).
    """

    def __init__(self, k: Knowledge) -> None:
        s = k.state
        if s is None or s.phase != PLAYING or not s.hands:
            raise ValueError("no hand is being played")
        self.k = k
        self.pool = unseen_tiles(k)
        pool_bits = sum(t.bit for t in self.pool)
        owners: list[int] = []
        masks: list[int] = []
        for seat, ms in enumerate(k.slots):
            for m in ms:
                owners.append(seat)
                masks.append(m & pool_bits)
        for _ in s.boneyard:
            owners.append(-1)
            masks.append(0)
        if len(owners) != len(self.pool):
            raise ValueError(
                f"match {s.match_id}, hand {s.hand}: {len(owners)} hidden places for "
                f"{len(self.pool)} hidden tiles"
            )
        self.owners = owners
        self.masks = masks
        self.allowed = [[t for t in self.pool if not m & t.bit] for m in masks]
        # Most constrained first: fewer augmenting paths needed.
        self.constrained = sorted(
            (i for i, m in enumerate(masks) if m), key=lambda i: len(self.allowed[i])
        )
        self.free = [i for i, m in enumerate(masks) if not m]

    def assignment(self, rng: random.Random) -> list[Tile]:
        """One tile per slot (indexed like `owners`). Raises ValueError if none exists."""
        n = len(self.owners)
        out: list[Tile | None] = [None] * n
        holder: dict[Tile, int] = {}
        allowed = self.allowed

        def place(i: int, seen: set[Tile]) -> bool:
            # Kuhn's augmenting path: a free allowed tile, else move a holder elsewhere.
            options = allowed[i][:]
            rng.shuffle(options)
            for t in options:
                if t not in holder:
                    out[i], holder[t] = t, i
                    return True
            for t in options:
                if t in seen:
                    continue
                seen.add(t)
                if place(holder[t], seen):
                    out[i], holder[t] = t, i
                    return True
            return False

        for i in self.constrained:
            if not place(i, set()):
                s = self.k.state
                assert s is not None
                raise ValueError(f"match {s.match_id}, hand {s.hand}: no world fits what was seen")
        rest = [t for t in self.pool if t not in holder]
        rng.shuffle(rest)
        for i, t in zip(self.free, rest, strict=True):
            out[i] = t
        tiles = [t for t in out if t is not None]
        self._mix(tiles, rng)
        return tiles

    def _mix(self, tiles: list[Tile], rng: random.Random) -> None:
        if not self.constrained:
            return  # already a uniform shuffle
        n = len(tiles)
        masks = self.masks
        if getattr(type(rng), "_randbelow", None) is not _RANDBELOW:
            # randrange(n) is _randbelow(n) after checks of its arguments: the same numbers.
            below = getattr(rng, "_randbelow", rng.randrange)
            for _ in range(4 * n):
                i = below(n)
                j = below(n)
                a, b = tiles[i], tiles[j]
                if not masks[i] & b.bit and not masks[j] & a.bit:
                    tiles[i], tiles[j] = b, a
            return
        # random.Random's _randbelow written out (the same numbers from the same stream):
        # two calls of it per swap were a third of a world's cost.
        bits = rng.getrandbits
        k = n.bit_length()
        for _ in range(4 * n):
            i = bits(k)
            while i >= n:
                i = bits(k)
            j = bits(k)
            while j >= n:
                j = bits(k)
            a, b = tiles[i], tiles[j]
            if not masks[i] & b.bit and not masks[j] & a.bit:
                tiles[i], tiles[j] = b, a

    def world(self, rng: random.Random) -> State:
        """A full state: the seat's state with every hidden tile filled in."""
        s = self.k.state
        assert s is not None
        tiles = self.assignment(rng)
        hands: list[list[Tile]] = [[] for _ in range(s.seats)]
        boneyard: list[Tile] = []
        for owner, t in zip(self.owners, tiles, strict=True):
            (boneyard if owner < 0 else hands[owner]).append(t)
        hands[self.k.seat] = [t for t in s.hands[self.k.seat] if t is not None]
        rng.shuffle(boneyard)
        full = tuple(tuple(h) for h in hands)
        masks = tuple(sum(t.bit for t in h) for h in full)
        info = s.info
        info = MatchInfo(
            info.match_id, info.seats, info.partnerships, info.rules, info.commitment,
            info.name, PLAYOUT_SEED, info.players, info.sides, info.rated,
        )  # fmt: skip
        # The playouts are imagined plays: without the clocks, the engine asks them no time.
        return s._replace(
            info=info,
            hands=full,
            masks=masks,
            boneyard=tuple(boneyard),
            clocks=(),
            clock_since=None,
            timeouts=(),
        )


_RANDBELOW = getattr(random.Random, "_randbelow", None)
"""random.Random's own _randbelow (getrandbits with rejection), which `_mix` writes out."""


def stand_in_deal(
    server_seed: bytes, match_id: str, hand: int, attempt: int, client_seeds: Sequence[str]
) -> tuple[tuple[tuple[Tile, ...], ...], tuple[Tile, ...]]:
    """The deal a playout's engine makes after the hand it plays out, which the playout
    never looks at: the tiles in canonical order, without the fair deal's HMACs."""
    return split(ALL_TILES, len(client_seeds))


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a playout ended: the points each side gained in it, and the match's winning side
    when the match ended in it (None: it did not, or the playout stopped at its horizon)."""

    gained: tuple[int, ...]
    winner: int | None


def playout(
    world: State, seat: int, tile: Tile, end: End, rng: random.Random, horizon: int | None = None
) -> float:
    """Play `tile` at `end` for `seat` in `world`, then greedy for everyone to the end of the
    hand (or `horizon` more plays). Returns my side's points minus the best other side's,
    plus MATCH_WIN_BONUS for a match won (minus it for one lost)."""
    return _value(play_out(world, seat, tile, end, rng, horizon), world.side_of(seat))


def _value(outcome: Outcome, me: int) -> float:
    margin = float(_margin(outcome.gained, me))
    if outcome.winner is None:
        return margin
    return margin + (MATCH_WIN_BONUS if outcome.winner == me else -MATCH_WIN_BONUS)


def play_out(
    world: State, seat: int, tile: Tile, end: End, rng: random.Random, horizon: int | None = None
) -> Outcome:
    """Play `tile` at `end` for `seat` in `world`, then greedy for everyone to the end of the
    hand (or `horizon` more plays): the points each side gained, and the match's winner if it
    ended.

    The plays are made on one mutable board (fastplay), with no State built between them;
    `play_out_by_states` is the same with a State for each play."""
    if world.clocks or world.phase != PLAYING or world.hand_over:
        return play_out_by_states(world, seat, tile, end, rng, horizon)
    gained = [0] * len(world.scores)
    board = fastplay.Board(world, stand_in_deal)
    events = board.events
    rules = world.info.rules
    partnerships = world.info.partnerships
    plays = 0
    while True:
        first = len(events)
        board.play(seat, tile, end)
        for i in range(first, len(events)):
            e: Any = events[i]
            kind = type(e)
            if kind is PointsScored:
                gained[e.side] += e.points
            elif kind is MatchEnded:
                return Outcome(tuple(gained), e.winner_side)
            elif kind is HandEnded:
                # A match won at the hand's end is announced after it; look ahead for it.
                won: Any = next((x for x in events[i:] if type(x) is MatchEnded), None)
                return Outcome(tuple(gained), None if won is None else won.winner_side)
        plays += 1
        if board.phase == ENDED or (horizon is not None and plays > horizon):
            return Outcome(tuple(gained), None)
        turn = board.turn
        assert turn is not None
        legal = board.legal_plays(turn)
        if len(legal) == 1:
            tile, end = legal[0]
        else:
            side = turn % 2 if partnerships else turn
            tile, end = greedy_play(
                rules, board.scores[side], board.ends, board.line_length() + 1,
                one_tile(board.masks[turn]), legal, rng,
            )  # fmt: skip
        seat = turn


def one_tile(mask: int) -> bool:
    """Whether a seat whose known tiles are `mask` holds one (it goes out with it)."""
    return mask != 0 and not mask & (mask - 1)


def playout_by_states(
    world: State, seat: int, tile: Tile, end: End, rng: random.Random, horizon: int | None = None
) -> float:
    """`playout` with a State for each play (`play_out_by_states`)."""
    return _value(play_out_by_states(world, seat, tile, end, rng, horizon), world.side_of(seat))


def play_out_by_states(
    world: State, seat: int, tile: Tile, end: End, rng: random.Random, horizon: int | None = None
) -> Outcome:
    """`play_out` with a State for each play, each play checked as a client's on a Board of
    its own: the reference for the one-board path, and the path of a world with clocks."""
    gained = [0] * len(world.scores)
    state = world
    command = Play(seat=seat, tile=tile, end=end)
    plays = 0
    while True:
        board = fastplay.Board(state, stand_in_deal)
        board.execute(command)
        events, state = tuple(board.events), board.state()
        for e in events:
            if isinstance(e, PointsScored):
                gained[e.side] += e.points
            elif isinstance(e, MatchEnded):
                return Outcome(tuple(gained), e.winner_side)
            elif isinstance(e, HandEnded):
                # A match won at the hand's end is announced after it; look ahead for it.
                won = next((x for x in events if isinstance(x, MatchEnded)), None)
                return Outcome(tuple(gained), None if won is None else won.winner_side)
        plays += 1
        if state.phase == ENDED or (horizon is not None and plays > horizon):
            return Outcome(tuple(gained), None)
        turn = state.turn
        assert turn is not None
        legal = state.legal_plays(turn)
        if len(legal) == 1:
            t, e2 = legal[0]
        else:
            t, e2 = greedy_on_state(state, turn, legal, rng)
        command = Play(turn, t, e2)


def greedy_on_state(
    state: State, seat: int, legal: Sequence[tuple[Tile, End]], rng: random.Random
) -> tuple[Tile, End]:
    """`greedy_policy(view(state, seat), rng)` for the seat to play, whose legal plays are
    `legal`, without building its view: the same scores, the same ties, the same draw from
    `rng`."""
    side = seat % 2 if state.info.partnerships else seat
    going_out = sum(1 for t in state.hands[seat] if t is not None) == 1
    return greedy_play(
        state.info.rules, state.scores[side], state.ends, len(state.line) + 1, going_out, legal,
        rng,
    )  # fmt: skip


def greedy_play(
    rules: Rules,
    score: int,
    ends: tuple[int, int, bool, bool] | None,
    tiles_on_line: int,
    going_out: bool,
    legal: Sequence[tuple[Tile, End]],
    rng: random.Random,
) -> tuple[Tile, End]:
    best = -1
    choices: list[tuple[Tile, End]] = []
    for t, e in legal:
        points = play_award(rules, t, place(ends, t, e is End.LEFT), tiles_on_line, score)[0]
        if going_out:
            points += rules.domino_points
        if points > best:
            best = points
            choices = [(t, e)]
        elif points == best:
            choices.append((t, e))
    return rng.choice(choices)


def _margin(gained: Sequence[int], me: int) -> int:
    others = [g for side, g in enumerate(gained) if side != me]
    return gained[me] - max(others)


@dataclass(frozen=True, slots=True)
class Decision:
    """A play and how it was found: worlds sampled and each legal play's mean value."""

    tile: Tile
    end: End
    samples: int
    values: tuple[tuple[Tile, End, float], ...]
    seconds: float


def budgeted(settings: Settings, start: float) -> Iterator[None]:
    """One step for each sample (or iteration) a decision begun at `start` may take:
    `settings.samples` of them when set (a fixed number is for reproducible runs: only an
    explicit budget caps it), else until the next would likely overrun the budget (at most
    MAX_BUDGET_S), never fewer than `settings.min_samples`."""
    budget = (
        settings.budget_s if settings.samples is not None else min(settings.budget_s, MAX_BUDGET_S)
    )
    deadline = start + budget
    n = 0
    slowest = 0.0
    while settings.samples is None or n < settings.samples:
        now = time.perf_counter()
        if n >= settings.min_samples and now + slowest >= deadline:
            return
        yield
        n += 1
        slowest = max(slowest, time.perf_counter() - now)


def legal_now(k: Knowledge) -> tuple[tuple[Tile, End], ...]:
    """The legal plays of the seat of `k`, which must be the seat to play. Raises ValueError
    when there is no match or the seat has no legal play."""
    s = k.state
    if s is None:
        raise ValueError("no match")
    legal = s.legal_plays(k.seat)
    if not legal:
        raise ValueError(f"match {s.match_id}: seat {k.seat} has no legal play now")
    return legal


def decide_play(k: Knowledge, rng: random.Random, settings: Settings = Settings()) -> Decision:
    """The Monte Carlo play for the seat of `k`, which must be the seat to play.

    Raises ValueError when the seat has no legal play or its knowledge does not add up.
    """
    start = time.perf_counter()
    legal = legal_now(k)
    if len(legal) == 1:
        t, e = legal[0]
        return Decision(t, e, 0, ((t, e, 0.0),), time.perf_counter() - start)
    sampler = Sampler(k)
    totals = [0.0] * len(legal)
    n = 0
    for _ in budgeted(settings, start):
        world = sampler.world(rng)
        for i, (t, e) in enumerate(legal):
            totals[i] += playout(world, k.seat, t, e, rng, settings.horizon)
        n += 1
    best = max(totals)
    choices = [i for i, v in enumerate(totals) if v == best]
    i = rng.choice(choices)
    values = tuple((t, e, v / n) for (t, e), v in zip(legal, totals, strict=True))
    return Decision(legal[i][0], legal[i][1], n, values, time.perf_counter() - start)


def montecarlo_play(
    k: Knowledge, rng: random.Random, settings: Settings = Settings()
) -> tuple[Tile, End]:
    """`decide_play`, as (tile, end)."""
    d = decide_play(k, rng, settings)
    return d.tile, d.end
