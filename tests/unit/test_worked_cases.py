"""RULES.md section 10: every worked case, one test each (target 15 unless said)."""

from __future__ import annotations

import pytest

from bergen.domain.events import HandEnded, MatchEnded, SeedRevealed, TileDrawn, TilePlayed
from bergen.domain.scoring import blocked_winner
from bergen.domain.state import ENDED, PLAYING

from . import deals
from .support import Game, T, of_type, points, rules_for, tiles


def two_seats(crafted_deals, deal, **options) -> Game:
    crafted_deals({(1, 1): deal})
    return Game(rules=rules_for(2, **options)).start()


def test_case1_headers_made_along_a_line_of_doubles_and_draws(crafted_deals):
    g = two_seats(crafted_deals, deals.CASE1)
    # The lead 6-6 is forced: 6*|6* +2.
    assert [(e.seat, str(e.tile), e.end) for e in of_type(g.last, TilePlayed)] == [(0, "6-6", None)]
    assert points(g.last) == [(0, 2, "double_header", 2)]
    assert g.s.ends == (6, 6, True, True)

    assert points(g.play(1, "2-6", "left")) == []
    assert g.s.ends == (2, 6, False, True)
    assert points(g.play(0, "4-6", "right")) == []
    assert g.s.ends == (2, 4, False, False)

    after = g.play(1, "2-4", "right")
    assert points(after) == [(1, 2, "double_header", 2)]
    assert g.s.ends == (2, 2, False, False)
    # Seat 0 holds no 2: it draws 2-2, which fits, and must play it.
    assert [(e.seat, str(e.tile)) for e in of_type(after, TileDrawn)] == [(0, "2-2")]
    assert g.s.must_play == T("2-2")

    assert points(g.play(0, "2-2", "right")) == [(0, 3, "triple_header", 3)]
    assert g.s.ends == (2, 2, False, True)
    assert g.s.scores == (5, 2)


def test_case2_triple_header_made_by_a_single_tile(crafted_deals):
    g = two_seats(crafted_deals, deals.CASE2)
    assert points(g.last) == [(0, 2, "double_header", 2)]
    assert g.s.ends == (3, 3, True, True)
    assert points(g.play(1, "3-5", "left")) == []
    assert g.s.ends == (5, 3, False, True)
    assert points(g.play(0, "1-5", "left")) == []
    assert g.s.ends == (1, 3, False, True)
    assert points(g.play(1, "1-3", "left")) == [(1, 3, "triple_header", 3)]
    assert g.s.ends == (3, 3, False, True)


@pytest.mark.parametrize(
    ("at", "ends"),
    [("left", (5, 5, False, False)), ("right", (3, 3, False, False))],
)
def test_case3_a_tile_matching_both_ends_makes_a_double_header_at_either(crafted_deals, at, ends):
    g = two_seats(crafted_deals, deals.CASE3)
    g.play(1, "1-3", "left")
    g.play(0, "1-5", "right")
    assert g.s.ends == (3, 5, False, False)
    assert points(g.play(1, "3-5", at)) == [(1, 2, "double_header", 2)]
    assert g.s.ends == ends


def _case2_before_triple(crafted_deals, score: int) -> Game:
    g = two_seats(crafted_deals, deals.CASE2)
    g.play(1, "3-5", "left")
    g.play(0, "1-5", "left")
    g.set_score(1, score)
    return g


def _case1_before_double(crafted_deals, score: int) -> Game:
    g = two_seats(crafted_deals, deals.CASE1)
    g.play(1, "2-6", "left")
    g.play(0, "4-6", "right")
    g.set_score(1, score)
    return g


def test_case4_reduction_a_triple_from_12_scores_2(crafted_deals):
    g = _case2_before_triple(crafted_deals, 12)
    assert points(g.play(1, "1-3", "left")) == [(1, 2, "triple_header", 3)]
    assert g.s.scores[1] == 14
    assert g.s.phase == PLAYING


def test_case4_reduction_a_double_from_13_scores_1(crafted_deals):
    g = _case1_before_double(crafted_deals, 13)
    assert points(g.play(1, "2-4", "right")) == [(1, 1, "double_header", 2)]
    assert g.s.scores[1] == 14
    assert g.s.phase == PLAYING


def test_case4_reduction_a_triple_from_14_scores_1_and_ends_the_match(crafted_deals):
    g = _case2_before_triple(crafted_deals, 14)
    after = g.play(1, "1-3", "left")
    assert points(after) == [(1, 1, "triple_header", 3)]
    assert g.s.scores[1] == 15
    assert g.s.phase == ENDED
    assert [type(e).__name__ for e in after] == [
        "TilePlayed",
        "PointsScored",
        "HandEnded",
        "MatchEnded",
        "SeedRevealed",
    ]
    ended = of_type(after, MatchEnded)[0]
    assert (ended.reason, ended.winner_side, ended.scores) == ("target", 1, (2, 15))


def test_case4_no_reduction_a_triple_from_11_scores_3(crafted_deals):
    g = _case2_before_triple(crafted_deals, 11)
    assert points(g.play(1, "1-3", "left")) == [(1, 3, "triple_header", 3)]
    assert g.s.scores[1] == 14


def test_case5_a_side_on_14_leads_the_lowest_double_and_wins_before_anyone_plays(
    crafted_deals,
):
    crafted_deals({(1, 1): deals.CASE2})
    g = Game(rules=rules_for(2)).create()
    g.sit([1])
    g.set_score(0, 14)
    after = g.sit([0])
    assert [type(e).__name__ for e in after] == [
        "SeatTaken",
        "Dealt",
        "TilePlayed",
        "PointsScored",
        "HandEnded",
        "MatchEnded",
        "SeedRevealed",
    ]
    assert points(after) == [(0, 1, "double_header", 2)]
    assert len(of_type(after, TilePlayed)) == 1
    hand_end = of_type(after, HandEnded)[0]
    assert (hand_end.reason, hand_end.side, hand_end.points) == ("match_over", None, 0)
    assert of_type(after, MatchEnded)[0].scores == (15, 0)
    assert g.s.phase == ENDED


def _go_out_before_last(crafted_deals, score: int, **options) -> Game:
    crafted_deals({(1, 1): deals.GO_OUT})
    g = Game(rules=rules_for(2, **options)).start()
    for seat, tile, at in deals.GO_OUT_PLAYS:
        g.play(seat, tile, at)
    assert g.s.hands[0] == (T("0-5"),)
    g.set_score(0, score)
    return g


def test_case6_going_out_with_a_double_header_from_10(crafted_deals):
    g = _go_out_before_last(crafted_deals, 10)
    after = g.play(*deals.GO_OUT_LAST)
    this_hand = [e for e in after if getattr(e, "hand", None) == 1]
    assert points(this_hand) == [(0, 2, "double_header", 2), (0, 2, "domino", 2)]
    hand_end = of_type(after, HandEnded)[0]
    assert (hand_end.reason, hand_end.side, hand_end.points, hand_end.scores) == (
        "domino",
        0,
        2,
        (14, 0),
    )
    assert not of_type(after, MatchEnded)
    assert g.s.hand == 2


def test_case6_going_out_with_a_reduced_header_from_13_ends_the_match_at_16(crafted_deals):
    g = _go_out_before_last(crafted_deals, 13)
    after = g.play(*deals.GO_OUT_LAST)
    assert points(after) == [(0, 1, "double_header", 2), (0, 2, "domino", 2)]
    ended = of_type(after, MatchEnded)[0]
    assert (ended.reason, ended.winner_side, ended.scores) == ("target", 0, (16, 0))
    assert of_type(after, HandEnded)[0].reason == "domino"
    assert isinstance(after[-1], SeedRevealed)


def test_case6_a_header_reaching_the_target_on_going_out_ends_the_match_without_the_bonus(
    crafted_deals,
):
    g = _go_out_before_last(crafted_deals, 14)
    after = g.play(*deals.GO_OUT_LAST)
    assert points(after) == [(0, 1, "double_header", 2)]
    hand_end = of_type(after, HandEnded)[0]
    assert (hand_end.reason, hand_end.side, hand_end.points) == ("match_over", None, 0)
    assert of_type(after, MatchEnded)[0].scores == (15, 0)


# Cases 7 to 10 are about who wins a blocked hand given what is left in the hands. Case 7's
# hands cannot arise from a real block (between them they show every number 0..6, so some
# tile would fit any end), so these cases are checked on the scoring rule itself; the engine
# applies the same rule to real blocks in test_turns.py and in the property tests.

CASE7 = [tiles("5-5 0-1"), tiles("6-4 3-2 2-0")]


@pytest.mark.parametrize(("rule", "winner"), [("german", 1), ("pips", 0), ("american", 1)])
def test_case7_blocked_two_seats_winner_under_each_rule(rule, winner):
    assert blocked_winner(rules_for(2, blocked=rule), CASE7) == winner


def test_case8_blocked_three_seats_german_tie_for_best_scores_nothing():
    p0 = tiles("5-6 4-5")  # 0 doubles, 20 pips
    p1 = tiles("2-6 3-6 0-3")  # 0 doubles, 20 pips
    p2 = tiles("0-0 1-2")  # 1 double, 3 pips
    assert sum(t.pips for t in p0) == sum(t.pips for t in p1) == 20
    assert blocked_winner(rules_for(3), [p0, p1, p2]) is None


def test_case9_blocked_partnership_german_counts_both_partners():
    side0 = tiles("1-1") + tiles("0-2 3-4")  # seats 0 and 2: 1 double, 11 pips
    side1 = tiles("2-2") + tiles("5-5")  # seats 1 and 3: 2 doubles
    assert blocked_winner(rules_for(4, True), [side0, side1]) == 0


def test_case10_blocked_american_every_side_holds_a_double_lowest_double_wins():
    a = tiles("4-4 6-5")
    b = tiles("1-1 6-6 5-4")
    assert sum(t.pips for t in b) > sum(t.pips for t in a)
    assert blocked_winner(rules_for(2, blocked="american"), [a, b]) == 1


def test_case11_two_seats_draw_at_most_14_and_pass_facing_the_reserve(crafted_deals):
    g = two_seats(crafted_deals, deals.PASS2)
    after = g.last
    assert len(of_type(after, TileDrawn)) == 14
    assert [type(e).__name__ for e in after][-15:] == ["TileDrawn"] * 14 + ["Passed"]
    assert len(g.s.boneyard) == 2
    assert g.s.boneyard == tiles("4-5 5-6")
    assert g.s.turn == 0
    dealt = g.events[3]
    assert len(dealt.boneyard) == 16


def test_case11_two_seats_a_hand_draws_14_then_blocks_and_never_touches_the_reserve(
    crafted_deals,
):
    g = two_seats(crafted_deals, deals.RESERVE_BLOCK)
    for seat, tile, at in deals.RESERVE_BLOCK_PLAYS:
        after = g.play(seat, tile, at)
    drawn = of_type(after, TileDrawn)
    assert len(drawn) == 14
    assert all(e.seat == 1 for e in drawn)
    assert T("0-6") not in [e.tile for e in drawn]
    assert T("5-6") not in [e.tile for e in drawn]


# The same blocked cases through the engine, from crafted positions: each seat holds the case's
# tiles plus, for the leader, a double no one can follow, and the boneyard is only the reserve;
# the forced lead then blocks the hand at once. (Not a realistic deal: hands are short.)


def position(*hands: str, reserve: str = "1-6 2-6"):
    return tuple(tiles(h) for h in hands), tiles(reserve)


def blocked_at_the_lead(crafted_deals, deal, seats=2, partnerships=False, **options):
    crafted_deals({(1, 1): deal})
    g = Game(seats, partnerships, rules_for(seats, partnerships, **options)).start()
    return [e for e in g.events if getattr(e, "hand", None) == 1]


def test_case7_hands_hold_every_number_so_they_cannot_block():
    numbers = {n for side in CASE7 for t in side for n in (t.low, t.high)}
    assert numbers == set(range(7))


def test_case8_engine_three_seats_german_tie_on_doubles_and_pips_scores_nothing(crafted_deals):
    # P0 {5-6, 4-5}, P1 {4-6, 2-6, 0-2}: no double, 20 pips each; P2 {1-1, 0-1}: 1 double, 3
    # pips. P0 leads 3-3 (highest double): no 3 is held.
    deal = position("3-3 5-6 4-5", "4-6 2-6 0-2", "1-1 0-1", reserve="1-6 3-4")
    hand1 = blocked_at_the_lead(crafted_deals, deal, 3, lead="highest_double")
    assert points(hand1) == [(0, 2, "double_header", 2)]
    end = of_type(hand1, HandEnded)[0]
    assert (end.reason, end.side, end.points, end.scores) == ("blocked", None, 0, (2, 0, 0))


def test_case9_engine_partnership_german_side_with_fewer_doubles_wins(crafted_deals):
    # Seat 0 leads 6-6 (highest double) and keeps {1-1}; seat 2 {0-2, 3-4}; seats 1 and 3
    # {2-2} and {5-5}. No 6 is held.
    deal = position("6-6 1-1", "2-2", "0-2 3-4", "5-5", reserve="1-6 2-6")
    hand1 = blocked_at_the_lead(crafted_deals, deal, 4, True, lead="highest_double")
    assert points(hand1) == [(0, 2, "double_header", 2), (0, 2, "blocked", 2)]
    end = of_type(hand1, HandEnded)[0]
    assert (end.reason, end.side, end.points, end.scores) == ("blocked", 0, 2, (4, 0))


def test_case10_engine_american_every_side_holds_a_double_lowest_double_wins(crafted_deals):
    # A leads 0-0 (lowest double) and keeps {4-4, 6-5}; B {1-1, 6-6, 5-4}. No 0 is held.
    deal = position("0-0 4-4 5-6", "1-1 6-6 4-5", reserve="0-1 0-2")
    hand1 = blocked_at_the_lead(crafted_deals, deal, blocked="american")
    assert points(hand1) == [(0, 2, "double_header", 2), (1, 2, "blocked", 2)]
    end = of_type(hand1, HandEnded)[0]
    assert (end.reason, end.side, end.points, end.scores) == ("blocked", 1, 2, (2, 2))
    # The same position under german: A holds fewer doubles and wins.
    hand1 = blocked_at_the_lead(crafted_deals, deal, blocked="german")
    assert points(hand1)[-1] == (0, 2, "blocked", 2)
