"""The play policies by name, each as a function of what its seat knows: random and greedy
(`policies`, from the seat's view), Monte Carlo (`montecarlo`) and ISMCTS (`ismcts`), from
the seat's knowledge (the fold of its redacted stream and what it implies of hidden tiles).

Every place that names a policy (`bergen bots --policy`, `bergen play --bot-policy`, the web
play's computer seats, the benchmarks) takes its names and its functions from here.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from .ismcts import ismcts_play
from .montecarlo import Knowledge, Settings, montecarlo_play
from .policies import POLICIES
from .tiles import End, Tile
from .views import view

Decider = Callable[[Knowledge, random.Random], tuple[Tile, End]]
"""A policy as a function of what its seat knows."""

POLICY_NAMES = ("random", "greedy", "montecarlo", "ismcts")

DEFAULT = Settings()

SEARCHING = ("montecarlo", "ismcts")
"""The policies that think for a time (`Settings.budget_s`) rather than answer at once."""


def decider(name: str, settings: Settings = DEFAULT) -> Decider:
    """The decision function of a policy by name: random and greedy play from the seat's
    view (the fold of its redacted stream), montecarlo and ismcts from its whole knowledge.

    Raises KeyError for an unknown name.
    """
    if name == "montecarlo":
        return lambda k, rng: montecarlo_play(k, rng, settings)
    if name == "ismcts":
        return lambda k, rng: ismcts_play(k, rng, settings)
    policy = POLICIES[name]

    def from_view(k: Knowledge, rng: random.Random) -> tuple[Tile, End]:
        assert k.state is not None
        return policy(view(k.state, k.seat), rng)

    return from_view
