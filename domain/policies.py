"""Play policies that see only a seat's view: random and greedy."""

from __future__ import annotations

import random
from collections.abc import Callable

from .scoring import place, play_award
from .tiles import End, Tile
from .views import View

Policy = Callable[[View, random.Random], tuple[Tile, End]]


def immediate_points(v: View, tile: Tile, end: End) -> int:
    """What playing `tile` at `end` scores at once: its header or bonus, and going out."""
    side = v.my_side
    assert side is not None and v.ends is not None
    ends = place(v.ends, tile, end is End.LEFT)
    points, _, _ = play_award(v.rules, tile, ends, len(v.line) + 1, v.scores[side])
    if len(v.tiles) == 1:
        points += v.rules.domino_points
    return points


def random_policy(v: View, rng: random.Random) -> tuple[Tile, End]:
    """Any legal play, uniformly. Raises IndexError when the view has none."""
    return rng.choice(v.legal_plays)


def greedy_policy(v: View, rng: random.Random) -> tuple[Tile, End]:
    """The legal play with the most immediate points, ties broken at random."""
    scored = [(immediate_points(v, t, e), t, e) for t, e in v.legal_plays]
    best = max(p for p, _, _ in scored)
    t, e = rng.choice([(t, e) for p, t, e in scored if p == best])
    return t, e


POLICIES: dict[str, Policy] = {"random": random_policy, "greedy": greedy_policy}
