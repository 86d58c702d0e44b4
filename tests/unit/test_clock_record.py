"""The record of a clocked match (RECORD.md: at_ms, clock_ms, auto, the forfeit result) and
the offline verifier's checks of its clocks."""

from __future__ import annotations

import copy
import hashlib
import random
from typing import Any

import pytest

from bergen.domain.audit import replay_record
from bergen.domain.events import Event, TimedOut
from bergen.domain.policies import greedy_policy, random_policy
from bergen.domain.record import build_record
from bergen.domain.simulation import Timing, play_match

from .support import rules_for


def simulated(
    n: int, *, clock: bool = True, stall: float = 0.1, resign: float = 0.0, **options: object
) -> tuple[list[Event], dict[str, Any]]:
    rules = rules_for(2, **({"clock": "fischer", **options} if clock else {}))
    seed = hashlib.sha256(f"clock-record-{n}".encode()).digest()
    events, _ = play_match(
        f"clocked-{n}",
        rules,
        2,
        False,
        seed,
        [greedy_policy, random_policy],
        random.Random(n),
        timing=Timing(think_ms=(100, 4000), stall=stall, resign=resign),
    )
    return events, build_record(events)


# A match with automatic plays that ends by a timeout's forfeit, and one that ends on target.
TIMED_OUT = simulated(1, clock_initial=20, clock_increment=1, timeouts_to_forfeit=3)
ON_TARGET = simulated(2, stall=0.0, clock_initial=600, clock_increment=5)
RESIGNED = simulated(3, stall=0.0, resign=0.05, clock_initial=600)


def actions(record: dict[str, Any]) -> list[tuple[int, int, dict[str, Any]]]:
    return [
        (h + 1, a + 1, action)
        for h, hand in enumerate(record["hands"])
        for a, action in enumerate(hand["actions"])
    ]


def first(record: dict[str, Any], test) -> tuple[int, int, dict[str, Any]]:
    return next(x for x in actions(record) if test(x[2]))


def rejected(record: dict[str, Any]) -> tuple[str, str]:
    verdict = replay_record(record)
    assert not verdict.ok
    return verdict.where, verdict.why


def test_the_simulations_cover_timeouts_forfeits_and_target():
    events, record = TIMED_OUT
    assert any(isinstance(e, TimedOut) for e in events)
    assert record["result"]["reason"] == "forfeit" and record["result"]["cause"] == "timeout"
    assert any(a.get("auto") for _, _, a in actions(record))
    assert ON_TARGET[1]["result"]["reason"] == "target"
    assert RESIGNED[1]["result"]["cause"] == "resigned"


@pytest.mark.parametrize(
    "match", [TIMED_OUT, ON_TARGET, RESIGNED], ids=["timeout", "target", "resign"]
)
def test_an_honest_clocked_record_passes_and_gives_back_its_events(match):
    events, record = match
    verdict = replay_record(record)
    assert verdict.ok, verdict.line()
    assert list(verdict.events)[1:] == events[1:]  # the match's name is not in a record


def test_a_clocked_record_times_every_action_and_clocks_every_play():
    _, record = TIMED_OUT
    assert record["rules"]["clock"] == "fischer" and record["rules"]["clock_initial"] == 20
    for _, _, action in actions(record):
        assert type(action["at_ms"]) is int
        if action["act"] == "play":
            assert type(action["clock_ms"]) is int and action["clock_ms"] >= 0
            assert action.get("auto", True) is True
        else:
            assert "clock_ms" not in action and "auto" not in action
    result = record["result"]
    assert set(result) == {"reason", "winner_side", "scores", "forfeited_side", "cause", "at_ms"}
    assert result["winner_side"] == 1 - result["forfeited_side"]


def test_an_unclocked_record_carries_no_clock_field():
    _, record = simulated(4, clock=False, stall=0.0, resign=0.05)
    assert "clock" not in record["rules"]
    for _, _, action in actions(record):
        assert not {"at_ms", "clock_ms", "auto"} & set(action)
    assert "at_ms" not in record["result"]
    assert replay_record(record).ok


def test_a_tampered_clock_ms_is_rejected_with_the_place():
    record = copy.deepcopy(ON_TARGET[1])
    h, a, action = first(record, lambda x: x["act"] == "play" and x["end"] is not None)
    action["clock_ms"] += 1000
    where, why = rejected(record)
    assert where == f"hand {h}, action {a}"
    assert (
        f"clock {action['clock_ms']} ms" in why and f"clock {action['clock_ms'] - 1000} ms" in why
    )


@pytest.mark.parametrize("act", ["play", "draw"])
def test_a_moved_at_ms_is_rejected_with_the_place(act):
    record = copy.deepcopy(TIMED_OUT[1])
    h, a, action = first(
        record, lambda x: x["act"] == act and x.get("end", "") is not None and not x.get("auto")
    )
    action["at_ms"] += 1
    where, why = rejected(record)
    assert where == f"hand {h}, action {a}"
    # A play's clock then disagrees; a forced draw is at the time of the play before it.
    assert "the rules give" in why
    if act == "draw":
        assert f"at {action['at_ms'] - 1} ms" in why.split("the rules give")[1]


def test_a_timeout_before_the_time_was_out_is_rejected():
    record = copy.deepcopy(TIMED_OUT[1])
    h, a, action = first(record, lambda x: x.get("auto"))
    action["at_ms"] -= 1
    where, why = rejected(record)
    assert where == f"hand {h}, action {a}"
    assert "runs out at" in why or "left at" in why


def test_an_automatic_play_that_is_not_the_canonical_one_is_rejected():
    events, record = TIMED_OUT
    record = copy.deepcopy(record)
    from bergen.domain.state import fold

    # Find an automatic play made where the seat had another legal play, and swap it.
    for i, e in enumerate(events):
        if isinstance(e, TimedOut):
            state = fold(events[: i + 1])
            plays = state.legal_plays(e.seat)
            if len(plays) > 1:
                break
    else:
        pytest.skip("no automatic play with a choice in this match")
    h, a, action = first(
        record, lambda x: x.get("auto") and x["at_ms"] == e.at_ms and x["seat"] == e.seat
    )
    other = plays[-1]
    action["tile"], action["end"] = str(other[0]), other[1].value
    where, _ = rejected(record)
    assert where == f"hand {h}, action {a}"


def test_a_play_recorded_once_the_clock_fell_is_rejected():
    record = copy.deepcopy(TIMED_OUT[1])
    h, a, action = first(record, lambda x: x.get("auto"))
    del action["auto"]  # as if the seat had played it itself, at the timeout's time
    where, why = rejected(record)
    assert where == f"hand {h}, action {a}"
    assert "time ran out" in why


@pytest.mark.parametrize(
    ("field", "value"),
    [("cause", "resigned"), ("forfeited_side", 0), ("winner_side", None), ("at_ms", 1)],
)
def test_a_tampered_forfeit_is_rejected(field, value):
    record = copy.deepcopy(TIMED_OUT[1])
    if record["result"][field] == value:
        value = 1
    record["result"][field] = value
    where, _ = rejected(record)
    assert where.startswith(("result", "hand"))


@pytest.mark.parametrize(
    "change",
    [
        lambda r: r["hands"][0]["actions"][1].pop("at_ms"),
        lambda r: r["hands"][0]["actions"][0].pop("clock_ms"),
        lambda r: r["result"].pop("at_ms"),
        lambda r: r["hands"][0]["actions"][0].update(auto=False),
    ],
    ids=["no-at-ms", "no-clock-ms", "no-result-at-ms", "auto-false"],
)
def test_a_clocked_record_missing_a_clock_field_is_rejected(change):
    record = copy.deepcopy(TIMED_OUT[1])
    change(record)
    assert not replay_record(record).ok


def test_an_unclocked_record_with_a_clock_field_is_rejected():
    _, record = simulated(5, clock=False, stall=0.0)
    record["hands"][0]["actions"][1]["at_ms"] = 5
    where, why = rejected(record)
    assert where == "hand 1, action 2" and "at_ms" in why
