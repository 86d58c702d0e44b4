"""The match record of RECORD.md, built by folding a finished match's events."""

from __future__ import annotations

import hashlib
import json
import random

import pytest

from bergen.domain import dealing
from bergen.domain.commands import Abandon
from bergen.domain.errors import MatchNotInProgress
from bergen.domain.events import PointsScored
from bergen.domain.policies import greedy_policy, random_policy
from bergen.domain.record import RECORD_FORMAT, build_record
from bergen.domain.rules import make_rules
from bergen.domain.scoring import lead_of
from bergen.domain.simulation import play_match
from bergen.domain.tiles import ALL_TILES, Tile

from . import deals
from .support import SEED, Game

DEFAULT_OPTIONS = (
    "lead",
    "draw",
    "double_bonus",
    "domino_points",
    "blocked",
    "endgame_reduction",
    "match_end",
    "target",
)
KEYS = {
    "format",
    "match_id",
    "rules",
    "seats",
    "sides",
    "commitment",
    "server_seed",
    "hands",
    "result",
}


def simulated(seats=2, partnerships=False, preset="standard", seed=SEED, rng=3):
    rules = make_rules(seats, partnerships, preset)
    policies = [greedy_policy, random_policy] * 2
    return play_match(
        "rec-1", rules, seats, partnerships, seed, policies[:seats], random.Random(rng)
    )


def reduced(rules, base, before):
    d = rules.target - before
    return 1 if d <= 2 else min(base, 2) if d == 3 else base


@pytest.mark.parametrize(
    ("seats", "partnerships", "preset"),
    [(2, False, "standard"), (3, False, "american"), (4, True, "pips"), (4, False, "eastern")],
)
def test_record_of_a_simulated_match_has_the_shape_of_record_md(seats, partnerships, preset):
    events, final = simulated(seats, partnerships, preset)
    record = build_record(events)
    assert json.loads(json.dumps(record)) == record
    assert set(record) == KEYS
    assert record["format"] == RECORD_FORMAT == "bergen-match-record/1"
    assert record["match_id"] == "rec-1"
    rules = final.rules
    assert record["rules"] == rules.as_dict()
    assert record["rules"]["preset"] == preset
    assert set(record["rules"]) == {"preset", *DEFAULT_OPTIONS}
    assert record["seats"] == [
        {"name": f"seat{s}", "client_seed": f"seat{s}"} for s in range(seats)
    ]
    assert record["sides"] == ([[0, 2], [1, 3]] if partnerships else [[s] for s in range(seats)])
    seed = bytes.fromhex(record["server_seed"])
    assert seed == SEED
    assert record["commitment"] == hashlib.sha256(seed).hexdigest()

    client_seeds = [s["client_seed"] for s in record["seats"]]
    side_of = {seat: i for i, side in enumerate(record["sides"]) for seat in side}
    scores = [0] * len(record["sides"])
    assert [h["number"] for h in record["hands"]] == list(range(1, len(record["hands"]) + 1))
    for hand in record["hands"]:
        # Every deal attempt, void ones included, re-derives from the revealed seed.
        assert [d["attempt"] for d in hand["deals"]] == list(range(1, len(hand["deals"]) + 1))
        assert [d["void"] for d in hand["deals"]] == [True] * (len(hand["deals"]) - 1) + [False]
        for d in hand["deals"]:
            hands, boneyard = dealing.deal(
                seed, record["match_id"], hand["number"], d["attempt"], client_seeds
            )
            assert d["hands"] == [[str(t) for t in h] for h in hands]
            assert d["boneyard"] == [str(t) for t in boneyard]
        last = hand["deals"][-1]
        dealt = [[Tile.parse(t) for t in h] for h in last["hands"]]
        lead_seat, lead_tile = lead_of(rules, dealt)
        first = hand["actions"][0]
        assert (first["seat"], first["act"], first["tile"], first["end"]) == (
            lead_seat,
            "play",
            str(lead_tile),
            None,
        )
        expected_lead = reduced(rules, 2, scores[side_of[lead_seat]]) if lead_tile.is_double else 0
        if rules.endgame_reduction == "off" and lead_tile.is_double:
            expected_lead = 2
        assert first["points"] == expected_lead
        for action in hand["actions"]:
            assert action["act"] in ("play", "draw", "pass")
            if action["act"] == "play":
                assert set(action) == {"seat", "act", "tile", "end", "points"}
                assert action["end"] in (None, "left", "right")
                scores[side_of[action["seat"]]] += action["points"]
            elif action["act"] == "draw":
                assert set(action) == {"seat", "act", "tile"} and Tile.parse(action["tile"])
            else:
                assert set(action) == {"seat", "act"}
        assert [a["end"] for a in hand["actions"] if a["act"] == "play"][1:].count(None) == 0
        end = hand["end"]
        assert end["reason"] in ("domino", "blocked", "match_over")
        if end["side"] is not None:
            scores[end["side"]] += end["points"]
        else:
            assert end["points"] == 0
        assert hand["scores"] == scores
    result = record["result"]
    assert result["reason"] == "target"
    assert result["scores"] == record["hands"][-1]["scores"] == list(final.scores)
    assert result["winner_side"] == scores.index(max(scores))
    assert max(scores) >= rules.target


def test_record_points_are_those_of_the_events():
    events, _ = simulated()
    record = build_record(events)
    headers = [
        e.points
        for e in events
        if isinstance(e, PointsScored) and e.reason not in ("domino", "blocked")
    ]
    in_record = [a["points"] for h in record["hands"] for a in h["actions"] if a.get("points")]
    assert in_record == headers


def test_record_is_refused_for_a_live_match():
    events, _ = simulated()
    for cut in (1, 5, len(events) // 2, len(events) - 2):
        with pytest.raises(MatchNotInProgress):
            build_record(events[:cut])


def test_record_lists_void_deals_and_an_abandoned_result(crafted_deals):
    crafted_deals({(1, 1): deals.VOID2})
    g = Game().start()
    g.do(Abandon("power cut"))
    record = build_record(g.events, log={"events": len(g.events), "head": "ab" * 32})
    first = record["hands"][0]
    assert [(d["attempt"], d["void"]) for d in first["deals"]] == [(1, True), (2, False)]
    assert first["deals"][0]["hands"] == [[str(t) for t in h] for h in deals.VOID2[0]]
    assert first["deals"][0]["boneyard"] == [str(t) for t in deals.VOID2[1]]
    void = first["deals"][0]
    dealt = [t for h in void["hands"] for t in h] + void["boneyard"]
    assert sorted(Tile.parse(t) for t in dealt) == list(ALL_TILES)
    assert record["result"] == {
        "reason": "abandoned",
        "winner_side": None,
        "scores": list(g.s.scores),
    }
    assert record["log"] == {"events": len(g.events), "head": "ab" * 32}
    assert set(record) == KEYS | {"log"}


def test_record_lead_action_has_a_null_end_and_its_points(crafted_deals):
    crafted_deals({(1, 1): deals.CASE1})
    g = Game().start()
    g.play(1, "2-6", "left")
    g.do(Abandon())
    actions = build_record(g.events)["hands"][0]["actions"]
    assert actions == [
        {"seat": 0, "act": "play", "tile": "6-6", "end": None, "points": 2},
        {"seat": 1, "act": "play", "tile": "2-6", "end": "left", "points": 0},
    ]


def test_record_draws_and_passes_are_actions(crafted_deals):
    crafted_deals({(1, 1): deals.PASS3})
    g = Game(3).start()
    g.do(Abandon())
    actions = build_record(g.events)["hands"][0]["actions"]
    assert [a["act"] for a in actions] == ["play"] + ["draw"] * 8 + ["pass", "pass"]
    assert [a["tile"] for a in actions if a["act"] == "draw"] == [
        "0-0",
        "1-1",
        "2-2",
        "3-3",
        "4-4",
        "5-5",
        "3-4",
        "3-5",
    ]
    assert [a["seat"] for a in actions if a["act"] == "pass"] == [1, 2]
