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


@pytest.mark.parametrize("rejecting", [False, True], ids=["written-out", "via-permute"])
def test_a_matchs_dealer_reproduces_every_vector(rejecting, monkeypatch):
    """dealing.dealer (the Board's deals) gives each vector's hands and boneyard byte for
    byte, on its written-out shuffle and on the general one it falls back to when an
    integer of the stream may be rejected."""
    general = []
    permute = dealing.permute

    def counted(items, key):
        general.append(key)
        return permute(items, key)

    monkeypatch.setattr(dealing, "permute", counted)
    if rejecting:
        monkeypatch.setattr(dealing, "_BELOW_EVERY_LIMIT", 0)  # every integer may be
    for case in CASES:
        seed = bytes.fromhex(case["server_seed"])
        deal = dealing.dealer(seed, case["match_id"], case["client_seeds"])
        hands, boneyard = deal(case["hand"], case["attempt"])
        assert [names(h) for h in hands] == case["hands"]
        assert names(boneyard) == case["boneyard"]
    assert len(general) == (len(CASES) if rejecting else 0)


def test_a_matchs_dealer_deals_as_deal_does():
    """Random seeds, match ids and client seeds (empty, non-ASCII, with the separator)."""
    import random

    rng = random.Random("dealer")
    for _ in range(300):
        seed = rng.randbytes(32)
        match_id = rng.choice(["m", "ü-match", "a|b", str(rng.random())])
        seats = rng.choice((2, 3, 4))
        client_seeds = [rng.choice(["", "é", "x|y", str(rng.random())]) for _ in range(seats)]
        deal = dealing.dealer(seed, match_id, client_seeds)
        for hand, attempt in ((1, 1), (2, 3), (17, 1), (100, 2)):
            expected = dealing.deal(seed, match_id, hand, attempt, client_seeds)
            assert deal(hand, attempt) == expected
