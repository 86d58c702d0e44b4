"""Whole matches played in process between policies, each seeing only its seat's view."""

from __future__ import annotations

import random
from collections.abc import Sequence

from .commands import CreateMatch, Play, TakeSeat
from .engine import execute
from .events import Event
from .policies import Policy
from .rules import Rules
from .state import ENDED, State
from .views import view

MAX_PLAYS = 10_000
"""A match plays far fewer; a bound so that a broken rule cannot loop for ever."""


def play_match(
    match_id: str,
    rules: Rules,
    seats: int,
    partnerships: bool,
    server_seed: bytes,
    policies: Sequence[Policy],
    rng: random.Random,
    names: Sequence[str] | None = None,
) -> tuple[list[Event], State]:
    """Create a match, seat one policy per seat, play it to the end.

    Returns every event and the final state. Raises RuntimeError if the match does not end
    within MAX_PLAYS plays.
    """
    events: list[Event] = []
    created, state = execute(
        None, CreateMatch(match_id, seats, partnerships, rules, server_seed, "")
    )
    events.extend(created)
    for seat in range(seats):
        name = names[seat] if names else f"seat{seat}"
        new, state = execute(state, TakeSeat(name=name, client_seed=f"{name}", seat=seat))
        events.extend(new)
    for _ in range(MAX_PLAYS):
        if state.phase == ENDED:
            return events, state
        assert state.turn is not None
        seat = state.turn
        tile, end = policies[seat](view(state, seat), rng)
        new, state = execute(state, Play(seat=seat, tile=tile, end=end))
        events.extend(new)
    raise RuntimeError(f"match {match_id} did not end within {MAX_PLAYS} plays")
