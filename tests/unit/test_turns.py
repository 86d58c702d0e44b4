"""RULES.md sections 1-3, 6 and 7: the deal, the lead, turns, draws, passes, blocks, going out,
the end of a hand and of the match."""

from __future__ import annotations

import pytest

from bergen.domain import dealing
from bergen.domain.commands import Play
from bergen.domain.errors import MatchNotInProgress
from bergen.domain.events import (
    Dealt,
    DealVoided,
    HandEnded,
    MatchEnded,
    Passed,
    PointsScored,
    SeedRevealed,
    TileDrawn,
    TilePlayed,
)
from bergen.domain.state import ENDED, fold
from bergen.domain.tiles import ALL_TILES, Tile

from . import deals
from .support import Game, T, all_tiles_accounted, of_type, points, rules_for


def kinds(events):
    return [type(e).__name__ for e in events]


@pytest.mark.parametrize(
    ("seats", "partnerships", "size", "boneyard", "drawable"),
    [(2, False, 6, 16, 14), (3, False, 6, 10, 8), (4, False, 5, 8, 6), (4, True, 5, 8, 6)],
)
def test_hand_sizes_boneyard_and_drawable_tiles(seats, partnerships, size, boneyard, drawable):
    g = Game(seats, partnerships).start()
    dealt = of_type(g.events, Dealt)[-1]
    assert [len(h) for h in dealt.hands] == [size] * seats
    assert len(dealt.boneyard) == boneyard
    assert sorted([t for h in dealt.hands for t in h] + list(dealt.boneyard)) == list(ALL_TILES)
    # The lead takes nothing from the boneyard; the reserve of 2 is never drawable.
    assert len(g.s.boneyard) == boneyard
    assert g.s.drawable == drawable


def test_the_deal_is_the_fair_deal_of_the_seeds(crafted_deals):
    g = Game(3).start()
    dealt = of_type(g.events, Dealt)[0]
    hands, boneyard = dealing.deal(g.server_seed, g.match_id, 1, dealt.attempt, ["c0", "c1", "c2"])
    assert (dealt.hands, dealt.boneyard) == (hands, boneyard)


def test_a_deal_without_doubles_is_void_and_dealt_again(crafted_deals):
    asked = crafted_deals({(1, 1): deals.VOID2})
    g = Game().start()
    assert kinds(g.last)[:4] == ["SeatTaken", "Dealt", "DealVoided", "Dealt"]
    voided = of_type(g.last, DealVoided)[0]
    assert (voided.hand, voided.attempt) == (1, 1)
    dealt = of_type(g.last, Dealt)
    assert [(d.hand, d.attempt) for d in dealt] == [(1, 1), (1, 2)]
    assert asked == [(1, 1), (1, 2)]
    assert of_type(g.last, TilePlayed)[0].tile.is_double


def test_three_seats_void_deal_is_dealt_again(crafted_deals):
    crafted_deals({(1, 1): deals.VOID3, (1, 2): deals.VOID3, (1, 3): deals.PASS3})
    g = Game(3).start()
    assert [(e.hand, e.attempt) for e in of_type(g.events, DealVoided)] == [(1, 1), (1, 2)]
    assert of_type(g.events, TilePlayed)[0].tile == T("6-6")
    assert g.s.attempt == 3


def _void_seed(client_seeds, match_id="m-1"):
    for i in range(5000):
        seed = i.to_bytes(32, "big")
        hands, _ = dealing.deal(seed, match_id, 1, 1, client_seeds)
        if not any(t.is_double for h in hands for t in h):
            return seed
    raise AssertionError("no void deal among 5000 seeds")


def test_a_real_seed_with_a_void_first_deal_is_redealt_with_attempt_2():
    seed = _void_seed(["c0", "c1"])
    g = Game(server_seed=seed).start()
    dealt = of_type(g.events, Dealt)
    assert [(d.hand, d.attempt) for d in dealt][:2] == [(1, 1), (1, 2)]
    assert next((e.hand, e.attempt) for e in of_type(g.events, DealVoided)) == (1, 1)
    for d in dealt:
        assert (d.hands, d.boneyard) == dealing.deal(seed, "m-1", 1, d.attempt, ["c0", "c1"])


def test_the_lead_is_forced_the_lowest_double_leads_and_play_goes_clockwise(crafted_deals):
    crafted_deals({(1, 1): deals.LEAD_SEAT1_OF_3})
    g = Game(3).start()
    assert kinds(g.last) == ["SeatTaken", "Dealt", "TilePlayed", "PointsScored"]
    lead = of_type(g.last, TilePlayed)[0]
    assert (lead.seat, lead.tile, lead.end) == (1, T("0-0"), None)
    assert g.s.turn == 2
    assert g.s.ends == (0, 0, True, True)


def test_a_seat_holding_a_fitting_tile_neither_draws_nor_passes(crafted_deals):
    crafted_deals({(1, 1): deals.CASE2})
    g = Game().start()
    assert not of_type(g.last, TileDrawn) and not of_type(g.last, Passed)
    assert g.s.turn == 1
    assert {t for t, _ in g.s.legal_plays(1)} == {T("3-5"), T("1-3")}


def test_forced_draws_one_at_a_time_until_a_tile_fits_then_it_must_be_played(crafted_deals):
    crafted_deals({(1, 1): deals.ONE_THEN_PASS})
    g = Game().start()
    drawn = of_type(g.last, TileDrawn)
    assert [(e.seat, e.tile) for e in drawn] == [(1, T("0-4")), (1, T("3-5"))]
    assert g.s.legal_plays(1) == ((T("3-5"), "left"), (T("3-5"), "right"))
    assert g.s.boneyard[0] != T("0-4")
    g.play(1, "3-5", "left")
    assert g.s.ends == (5, 3, False, True)


def test_a_seat_that_cannot_fit_draws_to_the_reserve_then_passes(crafted_deals):
    crafted_deals({(1, 1): deals.PASS3})
    g = Game(3).start()
    tail = kinds(g.last)[-10:]
    assert tail == ["TileDrawn"] * 8 + ["Passed", "Passed"]
    assert [e.seat for e in of_type(g.last, Passed)] == [1, 2]
    assert all(e.seat == 1 for e in of_type(g.last, TileDrawn))
    # Seat 2 faced the reserve alone: it passed without drawing.
    assert g.s.boneyard == (T("4-5"), T("5-6"))
    assert g.s.turn == 0
    assert len(g.s.hands[1]) == 14 and len(g.s.hands[2]) == 6


def test_block_the_moment_only_the_reserve_is_left_and_nobody_fits(crafted_deals):
    crafted_deals({(1, 1): deals.RESERVE_BLOCK})
    g = Game().start()
    for seat, tile, at in deals.RESERVE_BLOCK_PLAYS:
        after = g.play(seat, tile, at)
    hand1 = [e for e in after if getattr(e, "hand", None) == 1]
    assert kinds(hand1) == [
        "TilePlayed",
        "PointsScored",
        *["TileDrawn"] * 14,
        "PointsScored",
        "HandEnded",
    ]
    blocked = of_type(hand1, HandEnded)[0]
    assert (blocked.reason, blocked.side, blocked.points) == ("blocked", 0, 2)


def test_a_dead_line_is_drawn_down_to_the_reserve_before_it_blocks(crafted_deals):
    crafted_deals({(1, 1): deals.DEAD_LINE})
    g = Game().start()
    for seat, tile, at in deals.DEAD_LINE_PLAYS:
        after = g.play(seat, tile, at)
    hand1 = [e for e in after if getattr(e, "hand", None) == 1]
    # After the tenth tile every 6 is on the line at 6|6: nothing unplayed can fit.
    line = [Tile.of(a, b) for a, b in fold(g.events[: g.events.index(hand1[0]) + 1]).line]
    assert sorted(t for t in line if t.has(6)) == [t for t in ALL_TILES if t.has(6)]
    assert kinds(hand1) == [
        "TilePlayed",
        "PointsScored",
        *["TileDrawn"] * 14,
        "PointsScored",
        "HandEnded",
    ]
    assert {e.seat for e in of_type(hand1, TileDrawn)} == {0}


def test_going_out_scores_its_header_first_then_the_domino_points(crafted_deals):
    crafted_deals({(1, 1): deals.GO_OUT})
    g = Game().start()
    for seat, tile, at in deals.GO_OUT_PLAYS:
        g.play(seat, tile, at)
    after = g.play(*deals.GO_OUT_LAST)
    hand1 = [e for e in after if getattr(e, "hand", None) == 1]
    assert kinds(hand1) == ["TilePlayed", "PointsScored", "PointsScored", "HandEnded"]
    assert points(hand1) == [(0, 2, "double_header", 2), (0, 2, "domino", 2)]
    assert of_type(hand1, PointsScored)[1].seat == 0


def test_the_next_hand_is_dealt_afresh_and_led_by_its_lowest_double(crafted_deals):
    crafted_deals({(1, 1): deals.GO_OUT})
    g = Game().start()
    for seat, tile, at in deals.GO_OUT_PLAYS:
        g.play(seat, tile, at)
    after = g.play(*deals.GO_OUT_LAST)
    nxt = [e for e in after if getattr(e, "hand", None) == 2]
    dealt = [e for e in nxt if isinstance(e, Dealt)][-1]
    assert (dealt.hands, dealt.boneyard) == dealing.deal(
        g.server_seed, g.match_id, 2, dealt.attempt, ["c0", "c1"]
    )
    doubles = sorted(t for h in dealt.hands for t in h if t.is_double)
    holder = next(s for s, h in enumerate(dealt.hands) if doubles[0] in h)
    lead = of_type(nxt, TilePlayed)[0]
    assert (lead.seat, lead.tile, lead.end) == (holder, doubles[0], None)
    assert of_type(after, HandEnded)[0].scores == (6, 0)


def test_going_out_in_a_partnership_scores_for_the_side(crafted_deals):
    crafted_deals({(1, 1): deals.LEAD_SEAT3_OF_4})
    g = Game(4, True).start()
    lead = of_type(g.last, PointsScored)[0]
    assert (lead.side, lead.seat, lead.points) == (1, 3, 2)
    assert g.s.scores == (0, 2)
    assert g.s.turn == 0


def test_reduction_in_partnerships_uses_the_side_score(crafted_deals):
    crafted_deals({(1, 1): deals.LEAD_SEAT3_OF_4})
    g = Game(4, True).create()
    g.sit([0, 1, 2])
    g.set_score(1, 14)
    after = g.sit([3])
    assert points(after) == [(1, 1, "double_header", 2)]
    assert of_type(after, MatchEnded)[0].scores == (0, 15)
    assert of_type(after, MatchEnded)[0].winner_side == 1


def test_four_individual_seats_each_is_a_side_target_10(crafted_deals):
    crafted_deals({(1, 1): deals.LEAD_SEAT3_OF_4})
    g = Game(4).create()
    g.sit([0, 1, 2])
    g.set_score(3, 9)
    after = g.sit([3])
    assert points(after) == [(3, 1, "double_header", 2)]
    assert of_type(after, MatchEnded)[0].scores == (0, 0, 0, 10)


def test_the_match_ends_the_instant_the_target_is_reached_and_nothing_is_scored_after(
    crafted_deals,
):
    crafted_deals({(1, 1): deals.CASE2})
    g = Game().start()
    g.play(1, "3-5", "left")
    g.play(0, "1-5", "left")
    g.set_score(1, 13)
    after = g.play(1, "1-3", "left")  # triple, reduced to 1: 14
    assert g.s.phase != ENDED
    assert points(after) == [(1, 1, "triple_header", 3)]
    g2 = Game()
    crafted_deals({(1, 1): deals.CASE2})
    g2.start()
    g2.play(1, "3-5", "left")
    g2.play(0, "1-5", "left")
    g2.set_score(1, 14)
    after = g2.play(1, "1-3", "left")
    assert kinds(after)[-3:] == ["HandEnded", "MatchEnded", "SeedRevealed"]
    assert isinstance(after[-1], SeedRevealed)
    assert after[-1].server_seed == g2.server_seed.hex()
    before = g2.s
    for seat in range(2):
        for tile in g2.s.hands[seat]:
            with pytest.raises(MatchNotInProgress):
                g2.do(Play(seat, tile, None))
    assert g2.s is before


def test_every_tile_is_somewhere_after_each_step_of_a_hand(crafted_deals):
    crafted_deals({(1, 1): deals.RESERVE_BLOCK})
    g = Game().start()
    for seat, tile, at in deals.RESERVE_BLOCK_PLAYS[:-1]:
        g.play(seat, tile, at)
        assert sorted(all_tiles_accounted(g.s)) == list(ALL_TILES)


def test_draws_come_from_the_front_of_the_boneyard(crafted_deals):
    crafted_deals({(1, 1): deals.PASS2})
    g = Game(rules=rules_for(2)).start()
    dealt = of_type(g.events, Dealt)[0]
    drawn = [e.tile for e in of_type(g.last, TileDrawn)]
    assert tuple(drawn) == dealt.boneyard[:14]
