"""Creating and seating a match, the way to its first Board: `execute` takes a well-formed
CreateMatch or TakeSeat on a short path (its checks in one test, no `_Run`), and gives the
same events and State as `execute_evolving`, the engine's path event by event, or raises the
same error for anything else."""

from __future__ import annotations

import random

import pytest

from bergen.domain import engine
from bergen.domain.commands import CreateMatch, TakeSeat
from bergen.domain.engine import execute, execute_evolving
from bergen.domain.errors import BergenError
from bergen.domain.rules import PRESETS, make_rules
from bergen.domain.state import State


class Text(str):
    """A str subclass: accepted by the checks, left to the engine's own path."""


def outcome(state: State | None, command: object) -> object:
    """What a command gives: the events and State, or the error's type, reason and text."""
    try:
        return execute(state, command)  # type: ignore[arg-type]
    except BergenError as e:
        return (type(e), e.reason, str(e))


def reference(state: State | None, command: object) -> object:
    try:
        return execute_evolving(state, command)  # type: ignore[arg-type]
    except BergenError as e:
        return (type(e), e.reason, str(e))


def creations() -> list[CreateMatch]:
    seed = random.Random("seating").randbytes(32)
    out = []
    for preset in PRESETS:
        for seats, partnerships in ((2, False), (3, False), (4, False), (4, True)):
            rules = make_rules(seats, partnerships, preset)
            out.append(CreateMatch(f"m-{preset}-{seats}", seats, partnerships, rules, seed))
    clocked = make_rules(2, False, "standard", options={"clock": "fischer"})
    out.append(CreateMatch("clocked", 2, False, clocked, seed, "a clocked match"))
    return out


def test_well_formed_creations_take_the_short_path_and_give_the_engines_result() -> None:
    for c in creations():
        assert engine._create_plainly(c) is not None
        assert outcome(None, c) == reference(None, c)


def test_odd_creations_give_the_engines_error_or_result() -> None:
    rules = make_rules(2, False, "standard")
    seed = bytes(32)
    odd = [
        CreateMatch("", 2, False, rules, seed),
        CreateMatch("   ", 2, False, rules, seed),
        CreateMatch("x" * 65, 2, False, rules, seed),
        CreateMatch("x" * 64, 2, False, rules, seed),
        CreateMatch("tab\there", 2, False, rules, seed),
        CreateMatch("caf\u00e9", 2, False, rules, seed),
        CreateMatch("zero\u200bwidth", 2, False, rules, seed),
        CreateMatch(Text("sub"), 2, False, rules, seed),
        CreateMatch("m", 2, False, rules, seed, "n" * 101),
        CreateMatch("m", 2, False, rules, seed, "\u202ereversed"),
        CreateMatch("m", 2, False, rules, seed[:31]),
        CreateMatch("m", 2, False, rules, bytearray(seed)),  # type: ignore[arg-type]
        CreateMatch("m", 2, 0, rules, seed),  # type: ignore[arg-type]
        CreateMatch("m", True, False, rules, seed),  # type: ignore[arg-type]
        CreateMatch("m", 5, False, rules, seed),
        CreateMatch("m", 2, True, rules, seed),
        CreateMatch("m", 2, False, "standard", seed),  # type: ignore[arg-type]
    ]
    short = 0
    for c in odd:
        short += engine._create_plainly(c) is not None
        assert outcome(None, c) == reference(None, c)
    assert short == 1  # only the 64-character id is plain
    created = execute(None, creations()[0])[1]
    again = creations()[0]
    assert outcome(created, again) == reference(created, again)


def test_seating_in_any_order_takes_the_short_path_and_gives_the_engines_result() -> None:
    rng = random.Random("seating-orders")
    for c in creations():
        state = execute(None, c)[1]
        order = list(range(c.seats))
        rng.shuffle(order)
        for n, seat in enumerate(order):
            command = TakeSeat(f" player {seat} ", f"seed-{seat}", seat)
            if not state.clocks:
                assert engine._seat_plainly(state, command) is not None
            done = outcome(state, command)
            assert done == reference(state, command)
            assert isinstance(done, tuple) and isinstance(done[1], State)
            state = done[1]
            assert state.info.players[seat] is not None
            assert state.info.players[seat].name == f"player {seat}"  # type: ignore[union-attr]
            assert (state.hand == 1) == (n == c.seats - 1)  # the last seat deals


@pytest.mark.parametrize(
    "command",
    [
        TakeSeat("p", "c", 0),  # taken
        TakeSeat("p", "c", 3),  # no such seat
        TakeSeat("p", "c", -1),
        TakeSeat("p", "c", True),  # type: ignore[arg-type]
        TakeSeat("p", "c", "1"),  # type: ignore[arg-type]
        TakeSeat("p", "c", None),  # the first free seat
        TakeSeat("   ", "c", 1),
        TakeSeat("", "c", 1),
        TakeSeat("x" * 65, "c", 1),
        TakeSeat("x" * 64, "c" * 257, 1),
        TakeSeat("x" * 64, "c" * 256, 1),
        TakeSeat("bell\a", "c", 1),
        TakeSeat("\u00e9mile", "c", 1),
        TakeSeat("rtl\u202e", "c", 1),
        TakeSeat("p", "seed\x00", 1),
        TakeSeat(Text("p"), "c", 1),
        TakeSeat(7, "c", 1),  # type: ignore[arg-type]
        TakeSeat("p", None, 1),  # type: ignore[arg-type]
    ],
)
def test_odd_seating_gives_the_engines_error_or_result(command: TakeSeat) -> None:
    rules = make_rules(2, False, "standard")
    created = execute(None, CreateMatch("m", 2, False, rules, bytes(32)))[1]
    state = execute(created, TakeSeat("first", "c", 0))[1]
    assert outcome(state, command) == reference(state, command)


def test_seating_a_full_or_ended_match_gives_the_engines_error() -> None:
    rules = make_rules(2, False, "standard")
    state = execute(None, CreateMatch("m", 2, False, rules, bytes(32)))[1]
    for seat in range(2):
        state = execute(state, TakeSeat(f"p{seat}", "c", seat))[1]
    command = TakeSeat("late", "c", 1)
    assert engine._seat_plainly(state, command) is None
    assert outcome(state, command) == reference(state, command)
