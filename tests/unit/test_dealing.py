"""RULES.md section 8: the fair deal reproduces every case of test-vectors/deals.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bergen.domain import dealing
from bergen.domain.commands import TakeSeat
from bergen.domain.errors import InvalidArgument
from bergen.domain.events import Dealt, MatchCreated
from bergen.domain.tiles import ALL_TILES

from .support import Game

# A copy of ../shared/test-vectors/deals.json, so that a fresh clone alone runs these tests.
VECTORS = Path(__file__).with_name("vectors") / "deals.json"
SHARED = Path(__file__).resolve().parents[3] / "shared" / "test-vectors" / "deals.json"

DATA = json.loads(VECTORS.read_text(encoding="utf-8"))
CASES = DATA["cases"]


def names(tiles):
    return [str(t) for t in tiles]


@pytest.mark.skipif(not SHARED.exists(), reason="no ../shared beside this clone")
def test_the_copied_vectors_are_the_shared_ones():
    assert json.loads(SHARED.read_text(encoding="utf-8")) == DATA


def test_the_vectors_name_this_algorithm():
    assert DATA["algorithm"] == dealing.DEAL_ALGORITHM == "bergen-deal-v1"
    assert len(CASES) >= 6


@pytest.mark.parametrize(
    "case", CASES, ids=lambda c: f"{c['match_id'][:8]}-h{c['hand']}a{c['attempt']}"
)
def test_deal_vector_is_reproduced_exactly(case):
    seed = bytes.fromhex(case["server_seed"])
    assert dealing.commitment(seed) == case["commitment"]
    key = dealing.deal_key(
        seed, case["match_id"], case["hand"], case["attempt"], case["client_seeds"]
    )
    assert key.hex() == case["key"]
    assert names(dealing.shuffle(key)) == case["shuffled"]
    hands, boneyard = dealing.deal(
        seed, case["match_id"], case["hand"], case["attempt"], case["client_seeds"]
    )
    assert [names(h) for h in hands] == case["hands"]
    assert names(boneyard) == case["boneyard"]


def test_the_engine_deals_the_first_vector_and_commits_to_its_seed():
    case = CASES[0]
    assert (case["hand"], case["attempt"], case["client_seeds"]) == (1, 1, ["", ""])
    g = Game(server_seed=bytes.fromhex(case["server_seed"]), match_id=case["match_id"]).create()
    created = g.events[0]
    assert isinstance(created, MatchCreated)
    assert created.commitment == case["commitment"]
    for seat in range(2):
        g.do(TakeSeat(name=f"p{seat}", client_seed="", seat=seat))
    dealt = next(e for e in g.events if isinstance(e, Dealt))
    assert [names(h) for h in dealt.hands] == case["hands"]
    assert names(dealt.boneyard) == case["boneyard"]


def test_shuffle_is_a_permutation_of_the_28_tiles():
    for i in range(50):
        assert sorted(dealing.shuffle(i.to_bytes(32, "big"))) == list(ALL_TILES)


def test_canonical_order_of_the_set():
    assert names(ALL_TILES)[:8] == ["0-0", "0-1", "0-2", "0-3", "0-4", "0-5", "0-6", "1-1"]
    assert names(ALL_TILES)[-1] == "6-6"
    assert len(ALL_TILES) == 28


def test_client_seeds_change_the_deal():
    seed = bytes(32)
    a = dealing.deal(seed, "m", 1, 1, ["", ""])
    b = dealing.deal(seed, "m", 1, 1, ["x", ""])
    assert a != b


def test_parse_seed_accepts_64_hex_digits_only():
    assert dealing.parse_seed("00" * 32) == bytes(32)
    for bad in ["00" * 31, "zz" * 32, "", "00" * 33]:
        with pytest.raises(InvalidArgument):
            dealing.parse_seed(bad)
