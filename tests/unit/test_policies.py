"""The play policies: they see only a seat's view; greedy takes the most immediate points."""

from __future__ import annotations

import random

from bergen.domain.policies import POLICIES, greedy_policy, immediate_points, random_policy
from bergen.domain.rules import make_rules
from bergen.domain.simulation import play_match
from bergen.domain.tiles import End
from bergen.domain.views import view

from . import deals
from .support import SEED, Game, T


def before_triple(crafted_deals) -> Game:
    # Ends 1|3*, seat 1 holds 1-3 (left: 3|3* triple 3; right: 1|1 double 2), 0-1 (left: 0)
    # and 0-6, 2-6, 5-6 (no fit).
    crafted_deals({(1, 1): deals.CASE2})
    g = Game().start()
    g.play(1, "3-5", "left")
    g.play(0, "1-5", "left")
    return g


def test_immediate_points_of_each_play(crafted_deals):
    v = view(before_triple(crafted_deals).s, 1)
    assert {(t, e): immediate_points(v, t, e) for t, e in v.legal_plays} == {
        (T("1-3"), End.LEFT): 3,
        (T("1-3"), End.RIGHT): 2,
        (T("0-1"), End.LEFT): 0,
    }


def test_greedy_picks_the_play_with_the_most_immediate_points(crafted_deals):
    v = view(before_triple(crafted_deals).s, 1)
    for seed in range(40):
        assert greedy_policy(v, random.Random(seed)) == (T("1-3"), End.LEFT)


def test_greedy_counts_the_points_for_going_out(crafted_deals):
    crafted_deals({(1, 1): deals.GO_OUT})
    g = Game().start()
    for seat, tile, at in deals.GO_OUT_PLAYS:
        g.play(seat, tile, at)
    v = view(g.s, 0)
    # 0-5 left: double header 2 + going out 2; right: triple 3 + going out 2.
    assert immediate_points(v, T("0-5"), End.LEFT) == 4
    assert immediate_points(v, T("0-5"), End.RIGHT) == 5
    assert greedy_policy(v, random.Random(0)) == (T("0-5"), End.RIGHT)


def test_greedy_breaks_ties_at_random_among_the_best(crafted_deals):
    crafted_deals({(1, 1): deals.CASE3})
    g = Game().start()
    g.play(1, "1-3", "left")
    g.play(0, "1-5", "right")  # 3|5: seat 1's 3-5 makes a double header at either end
    v = view(g.s, 1)
    picks = {greedy_policy(v, random.Random(seed)) for seed in range(60)}
    assert picks == {(T("3-5"), End.LEFT), (T("3-5"), End.RIGHT)}


def test_random_picks_only_legal_plays_and_all_of_them(crafted_deals):
    v = view(before_triple(crafted_deals).s, 1)
    picks = [random_policy(v, random.Random(seed)) for seed in range(200)]
    assert set(picks) == set(v.legal_plays)


def test_policies_are_deterministic_given_the_rng_seed(crafted_deals):
    v = view(before_triple(crafted_deals).s, 1)
    for policy in POLICIES.values():
        for seed in range(10):
            assert policy(v, random.Random(seed)) == policy(v, random.Random(seed))


def test_a_whole_simulated_match_is_deterministic_given_its_seeds():
    rules = make_rules(3, False, "standard")
    policies = [greedy_policy, random_policy, greedy_policy]
    a = play_match("m", rules, 3, False, SEED, policies, random.Random(5))
    b = play_match("m", rules, 3, False, SEED, policies, random.Random(5))
    c = play_match("m", rules, 3, False, SEED, policies, random.Random(6))
    assert a == b
    assert a[0] != c[0]


def test_policies_are_named():
    assert {"random": random_policy, "greedy": greedy_policy} == POLICIES
