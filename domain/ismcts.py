"""Information Set Monte Carlo Tree Search: a play policy that knows only what its seat has
seen, and searches its own later plays as a tree.

The flat Monte Carlo policy (`montecarlo`) tries each of its plays in many sampled worlds
and plays every later move greedily: it values a play as if the seat itself will then play
greedily. This policy (single-observer ISMCTS, Cowling, Powley and Whitehouse 2012) grows
one tree of plays, as the seat to decide sees them, shared by all the worlds:

- each iteration samples one world consistent with what the seat saw (`montecarlo.Sampler`,
  the same constraints), so no decision is taken on a hidden tile: a node is a sequence of
  plays, the same node whatever the world, and the seat's play there is chosen without
  knowing the world (which keeps it from the strategy fusion of solving each world apart);
- from the root it descends while the seat's plays in this world all have nodes, choosing
  by UCB1 with availability counts (a play is scored against the iterations in which it
  could be made, since the seat's later tiles, drawn ones, differ from world to world);
  the other seats play as the playout policy plays on their tiles in the world, and each
  play of theirs is a node (the seat sees it);
- it then adds one node and plays the hand out greedily (`montecarlo.greedy_play`);
- the outcome (the seat's side's points gained minus the best other side's, plus a bonus
  for winning the match) is added to each of the seat's nodes on the way.

`SEARCH_OTHERS` makes the other seats choose by UCB1 in the tree too, as the plain
single-observer ISMCTS does; their nodes then mix the worlds of their own hidden tiles, so
each plays as if it did not know its tiles, and in the strength benchmark that was no
stronger.

The worlds are weighted by what the other seats' plays tell (inference): a seat that played
a tile scoring less than another it held probably did not hold that one (it would have
taken the points). The sampler proposes up to INFERENCE_TRIES worlds; one is kept with a
probability of INFERENCE_FACTOR to the number of such plays it implies. The facts come from
the seat's own stream (`Knowledge.passed_over`).

The result is the root play made most often. The policy is deterministic for a given `rng`
when the number of iterations is fixed (`Settings.samples`), and else depends on the time.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from . import fastplay
from .events import HandEnded, MatchEnded, PointsScored
from .montecarlo import (
    MATCH_WIN_BONUS,
    Knowledge,
    Sampler,
    Settings,
    budgeted,
    greedy_play,
    legal_now,
    one_tile,
    stand_in_deal,
)
from .rules import Rules
from .state import ENDED, State
from .tiles import End, Tile

INFERENCE_FACTOR = 0.3
"""How much less likely a world is for each play of another seat it makes a passed-over
better one (`Knowledge.passed_over`)."""
INFERENCE_TRIES = 6
"""Worlds proposed at most for one iteration; the least unlikely is kept if none is."""
SEARCH_OTHERS = False
"""Whether the other seats' plays are chosen by UCB1 in the tree too (the plain
single-observer ISMCTS), rather than by the playout policy on their tiles in the world."""
EXPLORATION = 0.7
"""UCB1's exploration constant, in units of `VALUE_SCALE` points."""
VALUE_SCALE = 10.0
"""Points of margin that count as one unit of reward in UCB1."""

DEFAULT = Settings()

Play = tuple[int, Tile, End]
"""A play in the tree: the seat, the tile and the end."""


@dataclass(slots=True, eq=False)
class Node:
    """A sequence of plays from the decision. `visits` counts the iterations that made the
    play into it, `available` those in which it could have been made, `total` the sum of
    their values for the side that made it."""

    visits: int = 0
    available: int = 0
    total: float = 0.0
    children: dict[Play, Node] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Decision:
    """A play, the iterations that found it, and each root play's visits and mean value."""

    tile: Tile
    end: End
    iterations: int
    values: tuple[tuple[Tile, End, int, float], ...]
    seconds: float


def _value(gained: list[int], winner: int | None, side: int) -> float:
    best_other = max(g for s, g in enumerate(gained) if s != side)
    v = float(gained[side] - best_other)
    if winner is not None:
        v += MATCH_WIN_BONUS if winner == side else -MATCH_WIN_BONUS
    return v


def _play(board: fastplay.Board, seat: int, tile: Tile, end: End, gained: list[int]) -> bool | int:
    """Make a legal play on `board`, adding the points scored to `gained`. Returns False
    while the hand goes on, True when it ended with no match winner, else the winning side
    plus 2 (so that side 0 is not confused with False)."""
    events = board.events
    first = len(events)
    board.play(seat, tile, end)
    for i in range(first, len(events)):
        e: Any = events[i]
        kind = type(e)
        if kind is PointsScored:
            gained[e.side] += e.points
        elif kind is MatchEnded:
            return int(e.winner_side) + 2 if e.winner_side is not None else True
        elif kind is HandEnded:
            won: Any = next((x for x in events[i:] if type(x) is MatchEnded), None)
            if won is None or won.winner_side is None:
                return True
            return int(won.winner_side) + 2
    return board.phase == ENDED


def _rollout(
    board: fastplay.Board,
    turn: int,
    partnerships: bool,
    rules: Rules,
    legal: Sequence[tuple[Tile, End]],
    rng: random.Random,
) -> tuple[Tile, End]:
    """The playout policy's play for `turn`."""
    side = turn % 2 if partnerships else turn
    return greedy_play(
        rules, board.scores[side], board.ends, board.line_length() + 1,
        one_tile(board.masks[turn]), legal, rng,
    )  # fmt: skip


def iterate(root: Node, world: State, seat: int, rng: random.Random) -> None:
    """One iteration of the search in `world` (seat `seat` to play): select, expand, play
    out greedily, and add the outcome to the nodes on the way."""
    board = fastplay.Board(world, stand_in_deal)
    partnerships = world.info.partnerships
    rules = world.info.rules
    gained = [0] * len(world.scores)
    path: list[tuple[Node, int]] = []
    node: Node | None = root
    turn = seat
    ended: bool | int = False
    while not ended:
        legal = board.legal_plays(turn)
        if node is not None and turn != seat and not SEARCH_OTHERS:
            # Another seat's play: made by the playout policy, a node for each play seen.
            if len(legal) == 1:
                tile, end = legal[0]
            else:
                tile, end = _rollout(board, turn, partnerships, rules, legal, rng)
            key = (turn, tile, end)
            nxt_node = node.children.get(key)
            if nxt_node is None:
                nxt_node = node.children[key] = Node()
            node = nxt_node
        elif node is not None:
            children = node.children
            untried = [p for p in legal if (turn, p[0], p[1]) not in children]
            if untried:
                tile, end = untried[0] if len(untried) == 1 else rng.choice(untried)
                child = Node()
                children[(turn, tile, end)] = child
                for t, e in legal:
                    c = children.get((turn, t, e))
                    if c is not None:
                        c.available += 1
                path.append((child, turn % 2 if partnerships else turn))
                node = None  # out of the tree: the rest is the playout
            else:
                best = -math.inf
                chosen: list[tuple[Tile, End, Node]] = []
                for t, e in legal:
                    c = children[(turn, t, e)]
                    c.available += 1
                    score = c.total / (c.visits * VALUE_SCALE) + EXPLORATION * math.sqrt(
                        math.log(c.available) / c.visits
                    )
                    if score > best:
                        best = score
                        chosen = [(t, e, c)]
                    elif score == best:
                        chosen.append((t, e, c))
                tile, end, node = chosen[0] if len(chosen) == 1 else rng.choice(chosen)
                path.append((node, turn % 2 if partnerships else turn))
        elif len(legal) == 1:
            tile, end = legal[0]
        else:
            tile, end = _rollout(board, turn, partnerships, rules, legal, rng)
        ended = _play(board, turn, tile, end, gained)
        if not ended:
            nxt = board.turn
            assert nxt is not None
            turn = nxt
    winner = ended - 2 if ended is not True and ended >= 2 else None
    values: dict[int, float] = {}
    for n, side in path:
        v = values.get(side)
        if v is None:
            v = values[side] = _value(gained, winner, side)
        n.visits += 1
        n.total += v


def sample(sampler: Sampler, passed_over: tuple[tuple[int, int], ...], rng: random.Random) -> State:
    """A world, kept with probability INFERENCE_FACTOR to the number of the passed-over
    plays it implies (rejection sampling, at most INFERENCE_TRIES worlds proposed)."""
    world = sampler.world(rng)
    if not passed_over:
        return world
    best = world
    fewest = len(passed_over) + 1
    for attempt in range(INFERENCE_TRIES):
        if attempt:
            world = sampler.world(rng)
        masks = world.masks
        count = sum(1 for seat, mask in passed_over if masks[seat] & mask)
        if not count or rng.random() < INFERENCE_FACTOR**count:
            return world
        if count < fewest:
            best, fewest = world, count
    return best


def decide_play(k: Knowledge, rng: random.Random, settings: Settings = DEFAULT) -> Decision:
    """The ISMCTS play for the seat of `k`, which must be the seat to play. `settings.samples`
    is the number of iterations (None: as many as `budget_s` allows, capped at
    MAX_BUDGET_S); `min_samples` the fewest.

    Raises ValueError when the seat has no legal play or its knowledge does not add up.
    """
    start = time.perf_counter()
    legal = legal_now(k)
    if len(legal) == 1:
        t, e = legal[0]
        return Decision(t, e, 0, ((t, e, 0, 0.0),), time.perf_counter() - start)
    sampler = Sampler(k)
    root = Node()
    n = 0
    # Iterations stop as Monte Carlo's worlds do: the two then think for the same time.
    for _ in budgeted(settings, start):
        iterate(root, sample(sampler, k.passed_over, rng), k.seat, rng)
        n += 1
    stats = []
    for t, e in legal:
        c = root.children.get((k.seat, t, e))
        stats.append((t, e, 0, 0.0) if c is None else (t, e, c.visits, c.total / c.visits))
    most = max(v for _, _, v, _ in stats)
    best = max(m for _, _, v, m in stats if v == most)
    choices = [(t, e) for t, e, v, m in stats if v == most and m == best]
    tile, end = choices[0] if len(choices) == 1 else rng.choice(choices)
    return Decision(tile, end, n, tuple(stats), time.perf_counter() - start)


def ismcts_play(k: Knowledge, rng: random.Random, settings: Settings = DEFAULT) -> tuple[Tile, End]:
    """`decide_play`, as (tile, end)."""
    d = decide_play(k, rng, settings)
    return d.tile, d.end
