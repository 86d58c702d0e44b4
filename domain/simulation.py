"""Whole matches played in process between policies, each seeing only its seat's view.

With `Timing`, the match is played against the clock in simulated time (RULES.md section
11): each seat's thinking time is drawn from the seeded random source, a seat may stop
answering (and is timed out when its clock falls, as the server would), and a seat may
resign. No clock is read: the same seed gives the same match.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from .commands import Command, CreateMatch, Play, Resign, TakeSeat, Timeout
from .engine import execute
from .events import Event
from .policies import Policy
from .rules import Rules
from .state import ENDED, State
from .views import view

MAX_PLAYS = 10_000
"""A match plays far fewer; a bound so that a broken rule cannot loop for ever."""


@dataclass(frozen=True, slots=True)
class Timing:
    """How simulated seats spend time. `think_ms`: the bounds of a seat's thinking time for
    a play, drawn uniformly; `stall`: the chance that a seat to play does not answer at all
    (it is then timed out when its clock falls; without a clock, it plays anyway);
    `resign`: the chance that a seat to play resigns instead; `lag_ms`: the most by which
    the server's timeout follows the instant the clock falls."""

    think_ms: tuple[int, int] = (200, 5000)
    stall: float = 0.0
    resign: float = 0.0
    lag_ms: int = 0


def play_match(
    match_id: str,
    rules: Rules,
    seats: int,
    partnerships: bool,
    server_seed: bytes,
    policies: Sequence[Policy],
    rng: random.Random,
    names: Sequence[str] | None = None,
    timing: Timing | None = None,
    client_seeds: Sequence[str] | None = None,
) -> tuple[list[Event], State]:
    """Create a match, seat one policy per seat, play it to the end. Each seat's client
    seed is `client_seeds[seat]`, else its name.

    Without `timing` each seat plays at once (and no time is drawn from `rng`). Returns
    every event and the final state. Raises RuntimeError if the match does not end within
    MAX_PLAYS plays.
    """
    events: list[Event] = []
    created, state = execute(
        None, CreateMatch(match_id, seats, partnerships, rules, server_seed, "")
    )
    events.extend(created)
    for seat in range(seats):
        name = names[seat] if names else f"seat{seat}"
        client_seed = client_seeds[seat] if client_seeds is not None else name
        new, state = execute(state, TakeSeat(name=name, client_seed=client_seed, seat=seat))
        events.extend(new)
    now = 0
    for _ in range(MAX_PLAYS):
        if state.phase == ENDED:
            return events, state
        assert state.turn is not None
        seat = state.turn
        command: Command
        if timing is None:
            tile, end = policies[seat](view(state, seat), rng)
            command = Play(seat=seat, tile=tile, end=end)
        else:
            command, now = timed_move(state, seat, policies[seat], rng, timing, now)
        new, state = execute(state, command)
        events.extend(new)
    raise RuntimeError(f"match {match_id} did not end within {MAX_PLAYS} plays")


def timed_move(
    state: State, seat: int, policy: Policy, rng: random.Random, timing: Timing, now: int
) -> tuple[Command, int]:
    """What happens next at simulated time `now`, and the time it happens at."""
    low, high = timing.think_ms
    think = rng.randint(low, high)
    stalled = rng.random() < timing.stall
    resigns = rng.random() < timing.resign
    due = state.due_at_ms
    if due is not None and (stalled or now + think >= due):
        at = due + (rng.randint(0, timing.lag_ms) if timing.lag_ms else 0)
        return Timeout(seat, at), at
    at = now + think
    if resigns:
        return Resign(seat, at), at
    tile, end = policy(view(state, seat), rng)
    return Play(seat=seat, tile=tile, end=end, at_ms=at), at
