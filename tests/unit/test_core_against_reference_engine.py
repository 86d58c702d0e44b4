"""The rules core (`engine.execute`, on a `fastplay.Board`) against the reference engine
kept in tests/unit/reference: command by command, on random matches of every seat count
and every rules option the rules tests cover, with and without clocks, the same events and
the same state, or the same error (its kind, message and reason).

The commands are those a server decides: the moves a client makes (its plays in time, or
late), timeouts when a clock falls, resignations and abandons, and among them commands the
rules refuse (a play out of turn or of a tile not held, a timeout before the clock falls, a
seat that does not exist, a time missing or gone backwards).

BERGEN_BITBOARD_MATCHES=N plays N matches per configuration instead of the CI default.
"""

from __future__ import annotations

import os
import random

import pytest

from bergen.domain.commands import Abandon, Command, CreateMatch, Play, Resign, TakeSeat, Timeout
from bergen.domain.engine import execute
from bergen.domain.errors import BergenError
from bergen.domain.events import Event, MatchEnded, TimedOut
from bergen.domain.policies import random_policy
from bergen.domain.rules import make_rules
from bergen.domain.simulation import Timing, timed_move
from bergen.domain.state import ENDED, State, fold
from bergen.domain.tiles import ALL_TILES, End

from .reference.engine import execute_evolving
from .reference.evolve import evolve as reference_evolve
from .test_bitboard_reference import CONFIGS, config_id

MATCHES = int(os.environ.get("BERGEN_BITBOARD_MATCHES", "0"))

CLOCKS: list[dict[str, object]] = [
    {"clock": "fischer", "clock_initial": 20, "clock_increment": 1, "timeouts_to_forfeit": 3},
    {"clock": "fischer", "clock_initial": 60, "clock_increment": 2, "on_timeout": "forfeit"},
    {"clock": "fischer", "clock_initial": 30, "clock_increment": 5, "timeouts_to_forfeit": 1},
]
CLOCKED: list[tuple[int, bool, str, dict[str, object]]] = [
    (seats, partnerships, preset, {**options, **clock})
    for i, (seats, partnerships, preset, options) in enumerate(CONFIGS)
    for clock in (CLOCKS[i % len(CLOCKS)],)
]
"""Every configuration again, each on one of the clocks."""

TIMING = Timing(think_ms=(100, 6000), stall=0.05, resign=0.003, lag_ms=80)


def _outcome(state: State | None, command: Command, run: object) -> tuple[object, ...]:
    """What `run(state, command)` does: its events and state, or its error."""
    try:
        events, after = run(state, command)  # type: ignore[operator]
    except BergenError as e:
        return ("refused", type(e), str(e), e.reason)
    return ("done", events, after)


def both(state: State | None, command: Command) -> tuple[tuple[Event, ...], State] | None:
    """`command` on the core and on the reference: the same outcome; the core's events and
    state, None when both refused it."""
    core = _outcome(state, command, execute)
    reference = _outcome(state, command, execute_evolving)
    assert core == reference, command
    if core[0] == "refused":
        return None
    return core[1], core[2]  # type: ignore[return-value]


def wrong_command(state: State, rng: random.Random, now: int) -> Command:
    """A command a client or a server could send now, likely refused."""
    seat = rng.choice((*range(-1, state.seats + 1), True))
    at: int | None = rng.choice((None, -5, 0, now, now + rng.randint(0, 60_000)))
    kind = rng.random()
    if kind < 0.6:
        tile = rng.choice(ALL_TILES)
        return Play(seat, tile, rng.choice((None, End.LEFT, End.RIGHT)), at)  # type: ignore[arg-type]
    if kind < 0.8:
        return Timeout(seat, at)  # type: ignore[arg-type]
    # A resignation or an abandon that is wrong in one way at least (a right one ends the
    # match: those come rarely, below).
    bad_seat = rng.choice((-1, state.seats, True))
    if kind < 0.9:
        if rng.random() < 0.5:
            return Resign(bad_seat, at, "")  # type: ignore[arg-type]
        return Resign(rng.choice(range(state.seats)), at, rng.choice(("\u202e", "x" * 300)))
    if rng.random() < 0.5:
        return Abandon("", bad_seat)  # type: ignore[arg-type]
    return Abandon(rng.choice(("\x00", "y" * 201)), rng.choice((None, 0)))


def play_on_both(config: tuple[int, bool, str, dict[str, object]], rng: random.Random,
                 match_id: str) -> tuple[int, list[Event]]:  # fmt: skip
    """One random match decided on the core and the reference, command by command; returns
    the commands compared and the match's events."""
    seats, partnerships, preset, options = config
    rules = make_rules(seats, partnerships, preset, options)
    created = both(None, CreateMatch(match_id, seats, partnerships, rules, rng.randbytes(32)))
    assert created is not None
    events, state = list(created[0]), created[1]
    for s in range(seats):
        seated = both(state, TakeSeat(f"p{s}", f"seed{s}", s))
        assert seated is not None
        events += seated[0]
        state = seated[1]
    compared = 0
    now = 0
    while state.phase != ENDED and compared < 3000:
        compared += 1
        roll = rng.random()
        command: Command
        if roll < 0.15:
            command = wrong_command(state, rng, now)
        elif roll < 0.151:
            command = Abandon("the server is going away", rng.choice((None, 0)))
        else:
            seat = state.turn
            assert seat is not None
            if state.clocks:
                command, now = timed_move(state, seat, random_policy, rng, TIMING, now)
            else:
                tile, end = rng.choice(state.legal_plays(seat))
                resigns = rng.random() < 0.001
                command = Resign(seat, None, "") if resigns else Play(seat, tile, end)
        done = both(state, command)
        if done is not None:
            events += done[0]
            state = done[1]
    assert state.phase == ENDED
    return compared, events


def check_fold(events: list[Event]) -> None:
    """The match's stream folds to the reference evolve's state, after every event."""
    expected: State | None = None
    for i, e in enumerate(events, start=1):
        expected = reference_evolve(expected, e)
        if i % 5 == 0 or i == len(events):
            assert fold(events[:i]) == expected, (i, e)


@pytest.mark.parametrize("config", CONFIGS, ids=config_id)
def test_the_core_decides_unclocked_matches_as_the_reference(
    config: tuple[int, bool, str, dict[str, object]],
) -> None:
    rng = random.Random(f"core-{config_id(config)}")
    total = 0
    for m in range(MATCHES or 2):
        compared, events = play_on_both(config, rng, f"core-{m}")
        total += compared
        if m == 0:
            check_fold(events)
    assert total > 20


@pytest.mark.parametrize("config", CLOCKED, ids=config_id)
def test_the_core_decides_clocked_matches_as_the_reference(
    config: tuple[int, bool, str, dict[str, object]],
) -> None:
    rng = random.Random(f"core-clocked-{config_id(config)}")
    total = m = 0
    # A match on a forfeiting clock may end at its first timeout: more matches then.
    while m < (MATCHES or 2) or (total < 40 and m < 10):
        compared, events = play_on_both(config, rng, f"clocked-{m}")
        total += compared
        if m == 0:
            check_fold(events)
        m += 1
    assert total >= 40


def test_the_clocked_matches_see_timeouts_forfeits_and_resignations() -> None:
    """The random clocked matches above reach what they are there to compare."""
    rng = random.Random("core-clocked-coverage")
    causes: set[object] = set()
    timeouts = 0
    for m, config in enumerate(CLOCKED[:8]):
        _, events = play_on_both(config, rng, f"coverage-{m}")
        timeouts += sum(isinstance(e, TimedOut) for e in events)
        causes |= {(e.reason, e.cause) for e in events if isinstance(e, MatchEnded)}
    assert timeouts > 0
    reasons = {reason.value for reason, _ in causes}  # type: ignore[attr-defined]
    assert len(reasons) >= 2, causes
