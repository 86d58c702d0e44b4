"""Auditing a record with the rules alone (bergen.domain.audit): honest records pass with the
events the rules give, any change is named by its place, and no input makes it raise."""

from __future__ import annotations

import copy
import hashlib
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bergen.domain.audit import check_shape, replay_record
from bergen.domain.commands import Abandon, Resign
from bergen.domain.engine import execute
from bergen.domain.errors import CorruptRecord
from bergen.domain.events import Event
from bergen.domain.policies import greedy_policy, random_policy
from bergen.domain.record import build_record
from bergen.domain.rules import make_rules
from bergen.domain.simulation import play_match

SETUPS = [
    (2, False, "standard"),
    (3, False, "eastern"),
    (4, True, "american"),
    (4, False, "pips"),
    (2, False, "eastern"),
    (3, False, "standard"),
]


def simulated(n: int) -> tuple[list[Event], dict[str, Any]]:
    seats, partnerships, preset = SETUPS[n % len(SETUPS)]
    rules = make_rules(seats, partnerships, preset)
    seed = hashlib.sha256(f"audit-{n}".encode()).digest()
    policies = [greedy_policy if s % 2 else random_policy for s in range(seats)]
    events, _ = play_match(
        f"audit-{n}", rules, seats, partnerships, seed, policies, random.Random(n)
    )
    return events, build_record(events)


MATCHES = [simulated(n) for n in range(len(SETUPS))]
RECORDS = [record for _, record in MATCHES]


def stopped(how: str) -> tuple[list[Event], dict[str, Any]]:
    """A match stopped after a few plays: resigned, or abandoned by the organiser."""
    events, _ = MATCHES[0]
    cut = next(i for i, e in enumerate(events) if type(e).__name__ == "TilePlayed") + 3
    from bergen.domain.state import fold

    state = fold(events[:cut])
    command = Resign(seat=1) if how == "resign" else Abandon("the hall closes")
    new, _ = execute(state, command)
    kept = [*events[:cut], *new]
    return kept, build_record(kept)


def record_of(n: int = 0) -> dict[str, Any]:
    return copy.deepcopy(RECORDS[n])


def first(record: dict[str, Any], act: str) -> tuple[int, int, dict[str, Any]]:
    for h, hand in enumerate(record["hands"]):
        for a, action in enumerate(hand["actions"]):
            if action["act"] == act and (act != "play" or action["end"] is not None):
                return h + 1, a + 1, action
    raise AssertionError(f"no {act}")


# ----- honest records ---------------------------------------------------------------------


@pytest.mark.parametrize("n", range(len(SETUPS)), ids=[f"{s}-{p}" for s, _, p in SETUPS])
def test_an_honest_record_passes_and_gives_back_the_match_events(n: int) -> None:
    events, record = MATCHES[n]
    verdict = replay_record(record)
    assert verdict.ok, verdict.line()
    assert verdict.line() == "OK"
    assert list(verdict.events) == events


@pytest.mark.parametrize("how", ["resign", "abandon"])
def test_a_resigned_or_abandoned_match_passes(how: str) -> None:
    events, record = stopped(how)
    assert record["result"]["reason"] == ("forfeit" if how == "resign" else "abandoned")
    verdict = replay_record(record)
    assert verdict.ok, verdict.line()
    assert len(verdict.events) == len(events)


def test_a_match_abandoned_while_seats_are_still_free_passes() -> None:
    rules = make_rules(3, False, "standard")
    from bergen.domain.commands import CreateMatch, TakeSeat

    events: list[Event] = []
    new, state = execute(None, CreateMatch("early", 3, False, rules, bytes(32), "cup"))
    events += new
    new, state = execute(state, TakeSeat("ann", "a", 0))
    events += new
    new, state = execute(state, Abandon("nobody came"))
    events += new
    verdict = replay_record(build_record(events))
    assert verdict.ok, verdict.line()


# ----- every kind of change is named by its place -----------------------------------------


def _swap_deal_tile(r: dict[str, Any]) -> None:
    deal = r["hands"][0]["deals"][0]
    deal["hands"][0][0], deal["boneyard"][0] = deal["boneyard"][0], deal["hands"][0][0]


def _play_tile(r: dict[str, Any]) -> None:
    first(r, "play")[2]["tile"] = "6-6" if first(r, "play")[2]["tile"] != "6-6" else "0-0"


def _points(r: dict[str, Any]) -> None:
    first(r, "play")[2]["points"] += 2


def _drop_action(r: dict[str, Any]) -> None:
    h, a, _ = first(r, "draw")
    del r["hands"][h - 1]["actions"][a - 1]


def _pass_instead_of_play(r: dict[str, Any]) -> None:
    h, a, action = first(r, "play")
    r["hands"][h - 1]["actions"][a - 1] = {"seat": action["seat"], "act": "pass"}


CHANGES = {
    "deal tile": (_swap_deal_tile, "hand 1, deal 1", "seat 1 holds"),
    "play tile": (_play_tile, "hand {h}, action {a}", ""),
    "points": (_points, "hand {h}, action {a}", "the rules give"),
    "a draw left out": (_drop_action, "hand {h}, action {a}", ""),
    "a pass for a play": (_pass_instead_of_play, "hand {h}, action {a}", "must play"),
    "server seed": (
        lambda r: r.update(server_seed="00" * 32),
        "commitment",
        "not SHA-256 of the revealed server seed",
    ),
    "client seed": (lambda r: r["seats"][0].update(client_seed="other"), "hand 1, deal 1", ""),
    "hand score": (lambda r: r["hands"][0]["scores"].__setitem__(0, 99), "hand 1: scores", ""),
    "hand end": (lambda r: r["hands"][0]["end"].update(points=42), "hand 1: end", ""),
    "result": (lambda r: r["result"]["scores"].__setitem__(0, 99), "result", ""),
    "extra hand": (
        lambda r: r["hands"].append(copy.deepcopy(r["hands"][-1])),
        "hand {n}",
        "the match was over",
    ),
    "sides": (lambda r: r.update(sides=[[1], [0]]), "sides", ""),
    "rules": (lambda r: r["rules"].update(lead="whoever"), "rules", ""),
    "format": (lambda r: r.update(format="bergen-match-record/2"), "format", ""),
    "missing key": (lambda r: r.pop("hands"), "record", "missing field(s) hands"),
    "bad tile text": (
        lambda r: r["hands"][0]["deals"][0]["boneyard"].__setitem__(0, "7-7"),
        "hand 1, deal 1: boneyard",
        "",
    ),
}


@pytest.mark.parametrize("change", CHANGES)
def test_a_changed_record_is_rejected_at_the_first_place_that_differs(change: str) -> None:
    # The 2-seat standard match: it has draws.
    record = record_of(0)
    fn, where, why = CHANGES[change]
    try:
        h, a, _ = first(record, "draw" if change == "a draw left out" else "play")
    except AssertionError:
        h, a = 0, 0
    fn(record)
    verdict = replay_record(record)
    assert not verdict.ok
    assert verdict.where == where.format(h=h, a=a, n=len(record.get("hands", ()))), verdict.line()
    assert why in verdict.why
    assert verdict.line() == f"REJECTED at {verdict.where}: {verdict.why}"


def test_a_rejected_record_carries_the_events_the_rules_gave_before_the_difference() -> None:
    events, _ = MATCHES[0]
    record = record_of(0)
    _, _, action = first(record, "play")
    action["tile"] = "6-6" if action["tile"] != "6-6" else "0-0"
    verdict = replay_record(record)
    assert not verdict.ok and verdict.events
    assert list(verdict.events) == events[: len(verdict.events)]


def test_check_shape_names_the_field() -> None:
    record = record_of(1)
    record["hands"][0]["actions"][0]["seat"] = "zero"
    with pytest.raises(CorruptRecord, match=r"hand 1, action 1: seat"):
        check_shape(record)
    check_shape(record_of(1))


# ----- anything at all --------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=16,
)
LEAVES = st.one_of(
    JSON,
    st.sampled_from(["0-0", "6-6", "3-2", "left", "right", "play", "draw", "pass", "7-1"]),
    st.integers(-2, 30),
)


@st.composite
def mutated_records(draw: st.DrawFn) -> tuple[dict[str, Any], Any]:
    """(an honest record, the same with one to three random changes)."""
    original = RECORDS[draw(st.integers(0, len(RECORDS) - 1))]
    r = copy.deepcopy(original)
    for _ in range(draw(st.integers(1, 3))):
        parent: Any = None
        key: Any = None
        node: Any = r
        while isinstance(node, dict | list) and node and draw(st.integers(0, 4)):
            keys = sorted(node) if isinstance(node, dict) else list(range(len(node)))
            parent, key = node, draw(st.sampled_from(keys))
            node = node[key]
        if parent is None:
            continue
        how = draw(st.sampled_from(["drop", "replace", "nudge", "duplicate"]))
        if how == "drop":
            del parent[key]
        elif how == "nudge" and type(node) is int:
            parent[key] = node + draw(st.sampled_from([-1, 1, 2**64]))
        elif how == "duplicate" and isinstance(parent, list):
            parent.insert(key, copy.deepcopy(node))
        else:
            parent[key] = draw(LEAVES)
    return original, r


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(JSON, mutated_records()))
def test_no_input_makes_the_audit_raise(value: Any) -> None:
    record = value[1] if isinstance(value, tuple) else value
    verdict = replay_record(record)
    if isinstance(value, tuple) and not verdict.ok:
        assert verdict.where or verdict.why
    if not isinstance(value, tuple):
        assert not verdict.ok and verdict.why


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_records())
def test_a_changed_deal_action_score_or_seed_is_never_accepted(
    pair: tuple[dict[str, Any], Any],
) -> None:
    original, record = pair
    verdict = replay_record(record)
    if not verdict.ok:
        return

    # What passes the rules may differ from the original only where the rules do not look:
    # names, the rules' preset label, the log and the signature (which the signature covers).
    # A rule may differ too when the original match is as legal under it (a target of 16 for
    # a match won at 15 with 17 points): only the signature tells the two records apart.
    rules = record.get("rules") if isinstance(record, dict) else None
    if isinstance(rules, dict) and rules != original["rules"]:
        alike = copy.deepcopy(original)
        alike["rules"] = rules
        assert replay_record(alike).ok
        record = {**record, "rules": original["rules"]}

    def checked(r: dict[str, Any]) -> Any:
        return (
            r["match_id"],
            {k: v for k, v in r["rules"].items() if k != "preset"},
            [s["client_seed"] for s in r["seats"]],
            r["sides"],
            r["commitment"],
            r["server_seed"],
            r["hands"],
            r["result"],
        )

    assert checked(record) == checked(original)
