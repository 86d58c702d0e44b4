"""Creating and seating a match, the way to its first Board: `execute` builds the State of a
CreateMatch or TakeSeat directly (the last seat's first hand on a Board), which must be the
State its events give evolved one at a time; anything malformed is refused with its own
reason."""

from __future__ import annotations

import random

import pytest

from bergen.domain.commands import CreateMatch, TakeSeat
from bergen.domain.engine import execute
from bergen.domain.errors import BergenError
from bergen.domain.rules import PRESETS, make_rules
from bergen.domain.state import State, evolve


class Text(str):
    """A str subclass: text, accepted as any text is."""


def outcome(state: State | None, command: object) -> object:
    """What a command gives: the events and State, or the error's type, reason and text."""
    try:
        return execute(state, command)  # type: ignore[arg-type]
    except BergenError as e:
        return (type(e), e.reason, str(e))


def reference(state: State | None, command: object) -> object:
    """What `outcome` must be for a command `execute` accepts: its events, and the State
    they give evolved one at a time from `state`."""
    result = outcome(state, command)
    if not isinstance(result, tuple) or not isinstance(result[1], State):
        return result  # refused: the reason is checked by each test
    events = result[0]
    for e in events:
        state = evolve(state, e)
    return events, state


def reason(result: object) -> str:
    """The refusal's reason, "ok" for a command accepted."""
    assert isinstance(result, tuple)
    return "ok" if isinstance(result[1], State) else str(result[1])


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


def test_well_formed_creations_give_the_state_of_their_events() -> None:
    for c in creations():
        assert reason(outcome(None, c)) == "ok"
        assert outcome(None, c) == reference(None, c)


def test_odd_creations_are_refused_with_their_reason_or_give_the_state_of_their_events() -> None:
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
    expected = [
        "TEXT_BLANK", "TEXT_BLANK", "TEXT_TOO_LONG", "ok", "CONTROL_CHARACTER", "ok",
        "INVISIBLE_CHARACTER", "ok", "TEXT_TOO_LONG", "INVISIBLE_CHARACTER", "INVALID_ARGUMENT",
        "INVALID_ARGUMENT", "INVALID_ARGUMENT", "INVALID_SEATS", "INVALID_SEATS",
        "INVALID_OPTIONS", "INVALID_ARGUMENT",
    ]  # fmt: skip
    for c, why in zip(odd, expected, strict=True):
        assert reason(outcome(None, c)) == why, c
        assert outcome(None, c) == reference(None, c)
    created = execute(None, creations()[0])[1]
    assert reason(outcome(created, creations()[0])) == "MATCH_EXISTS"


def test_seating_in_any_order_gives_the_state_of_its_events() -> None:
    rng = random.Random("seating-orders")
    for c in creations():
        state = execute(None, c)[1]
        order = list(range(c.seats))
        rng.shuffle(order)
        for n, seat in enumerate(order):
            command = TakeSeat(f" player {seat} ", f"seed-{seat}", seat)
            done = outcome(state, command)
            assert done == reference(state, command)
            assert isinstance(done, tuple) and isinstance(done[1], State)
            state = done[1]
            assert state.info.players[seat] is not None
            assert state.info.players[seat].name == f"player {seat}"  # type: ignore[union-attr]
            assert (state.hand == 1) == (n == c.seats - 1)  # the last seat deals


@pytest.mark.parametrize(
    ("command", "why"),
    [
        (TakeSeat("p", "c", 0), "SEAT_TAKEN"),  # taken
        (TakeSeat("p", "c", 3), "NO_SUCH_SEAT"),  # no such seat
        (TakeSeat("p", "c", -1), "NO_SUCH_SEAT"),
        (TakeSeat("p", "c", True), "INVALID_ARGUMENT"),  # type: ignore[arg-type]
        (TakeSeat("p", "c", "1"), "INVALID_ARGUMENT"),  # type: ignore[arg-type]
        (TakeSeat("p", "c", None), "ok"),  # the first free seat
        (TakeSeat("   ", "c", 1), "TEXT_BLANK"),
        (TakeSeat("", "c", 1), "TEXT_BLANK"),
        (TakeSeat("x" * 65, "c", 1), "TEXT_TOO_LONG"),
        (TakeSeat("x" * 64, "c" * 257, 1), "TEXT_TOO_LONG"),
        (TakeSeat("x" * 64, "c" * 256, 1), "ok"),
        (TakeSeat("bell\a", "c", 1), "CONTROL_CHARACTER"),
        (TakeSeat("\u00e9mile", "c", 1), "ok"),
        (TakeSeat("rtl\u202e", "c", 1), "INVISIBLE_CHARACTER"),
        (TakeSeat("p", "seed\x00", 1), "CONTROL_CHARACTER"),
        (TakeSeat(Text("p"), "c", 1), "ok"),
        (TakeSeat(7, "c", 1), "INVALID_ARGUMENT"),  # type: ignore[arg-type]
        (TakeSeat("p", None, 1), "INVALID_ARGUMENT"),  # type: ignore[arg-type]
    ],
)
def test_odd_seating_is_refused_with_its_reason_or_gives_the_state_of_its_events(
    command: TakeSeat, why: str
) -> None:
    rules = make_rules(2, False, "standard")
    created = execute(None, CreateMatch("m", 2, False, rules, bytes(32)))[1]
    state = execute(created, TakeSeat("first", "c", 0))[1]
    assert reason(outcome(state, command)) == why
    assert outcome(state, command) == reference(state, command)


def test_seating_a_full_match_is_refused() -> None:
    rules = make_rules(2, False, "standard")
    state = execute(None, CreateMatch("m", 2, False, rules, bytes(32)))[1]
    for seat in range(2):
        state = execute(state, TakeSeat(f"p{seat}", "c", seat))[1]
    assert reason(outcome(state, TakeSeat("late", "c", 1))) == "MATCH_FULL"
