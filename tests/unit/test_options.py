"""RULES.md section 9: every option, every preset, and the validation of rule options."""

from __future__ import annotations

import pytest

from bergen.domain.commands import CreateMatch
from bergen.domain.engine import execute
from bergen.domain.errors import InvalidOptions
from bergen.domain.events import DealVoided, HandEnded, MatchEnded, Passed, TileDrawn, TilePlayed
from bergen.domain.rules import PRESETS, Rules, make_rules
from bergen.domain.scoring import blocked_winner
from bergen.domain.state import ENDED, PLAYING

from . import deals
from .support import SEED, Game, T, of_type, points, rules_for, tiles


def start(crafted_deals, deal, seats=2, partnerships=False, preset="standard", **options):
    asked = crafted_deals({(1, 1): deal})
    g = Game(seats, partnerships, rules_for(seats, partnerships, preset, **options)).start()
    return g, asked


def lead_of(events):
    lead = of_type(events, TilePlayed)[0]
    return lead.seat, str(lead.tile), lead.end


# --- lead ---------------------------------------------------------------------------------


def test_lead_lowest_double_goes_to_its_holder(crafted_deals):
    g, _ = start(crafted_deals, deals.LOW_HIGH)
    assert lead_of(g.last) == (0, "1-1", None)
    assert g.s.turn == 1


def test_lead_highest_double_goes_to_its_holder(crafted_deals):
    g, _ = start(crafted_deals, deals.LOW_HIGH, lead="highest_double")
    assert lead_of(g.last) == (1, "5-5", None)
    assert points(g.last) == [(1, 2, "double_header", 2)]
    assert g.s.turn == 0


def test_lead_highest_double_still_voids_a_deal_without_doubles(crafted_deals):
    g, asked = start(crafted_deals, deals.VOID2, lead="highest_double")
    assert [(e.hand, e.attempt) for e in of_type(g.events, DealVoided)] == [(1, 1)]
    assert asked[:2] == [(1, 1), (1, 2)]


def test_lead_lowest_double_else_lowest_tile_prefers_the_lowest_double(crafted_deals):
    g, _ = start(crafted_deals, deals.LOW_HIGH, lead="lowest_double_else_lowest_tile")
    assert lead_of(g.last) == (0, "1-1", None)


def test_lead_lowest_tile_without_doubles_no_redeal_and_no_points(crafted_deals):
    # Eastern also has double_bonus 2: a non-double lead still scores nothing.
    g, asked = start(crafted_deals, deals.VOID2, preset="eastern")
    assert asked == [(1, 1)]
    assert not of_type(g.events, DealVoided)
    assert lead_of(g.last) == (0, "0-1", None)
    assert points(g.last) == []
    assert g.s.ends == (0, 1, False, False)
    assert g.s.turn == 1


def test_lead_lowest_tile_compares_the_low_end_first(crafted_deals):
    # 0-6 leads before 1-2, though it has more pips.
    deal = deals.make_deal(["1-2 1-3 1-4 1-5 1-6 2-3", "2-4 2-5 2-6 3-4 3-5 0-6"])
    g, _ = start(crafted_deals, deal, lead="lowest_double_else_lowest_tile")
    assert lead_of(g.last) == (1, "0-6", None)


def test_lead_lowest_tile_compares_the_high_end_on_equal_low_ends(crafted_deals):
    deal = deals.make_deal(["0-5 1-3 1-4 1-5 1-6 2-3", "2-4 2-5 2-6 3-4 0-4 0-6"])
    g, _ = start(crafted_deals, deal, lead="lowest_double_else_lowest_tile")
    assert lead_of(g.last) == (1, "0-4", None)


# --- draw ---------------------------------------------------------------------------------


def test_draw_until_fits_draws_past_a_tile_that_does_not_fit(crafted_deals):
    g, _ = start(crafted_deals, deals.ONE_THEN_PASS)
    assert [(e.seat, str(e.tile)) for e in of_type(g.last, TileDrawn)] == [(1, "0-4"), (1, "3-5")]
    assert not of_type(g.last, Passed)
    assert (g.s.turn, g.s.must_play) == (1, T("3-5"))


def test_draw_one_then_pass_passes_when_the_tile_does_not_fit(crafted_deals):
    g, _ = start(crafted_deals, deals.ONE_THEN_PASS, draw="one_then_pass")
    assert [(e.seat, str(e.tile)) for e in of_type(g.last, TileDrawn)] == [(1, "0-4")]
    assert [e.seat for e in of_type(g.last, Passed)] == [1]
    assert g.s.turn == 0
    assert g.s.must_play is None


def test_draw_one_then_pass_plays_the_drawn_tile_when_it_fits(crafted_deals):
    g, _ = start(crafted_deals, deals.FIRST_DRAW_FITS, draw="one_then_pass")
    assert [(e.seat, str(e.tile)) for e in of_type(g.last, TileDrawn)] == [(1, "3-5")]
    assert (g.s.turn, g.s.must_play) == (1, T("3-5"))
    assert g.s.legal_plays(1) == ((T("3-5"), "left"), (T("3-5"), "right"))


# --- double_bonus -------------------------------------------------------------------------


def _bonus_play(crafted_deals, **options):
    g, _ = start(crafted_deals, deals.BONUS, **options)
    g.play(1, "3-5", "left")
    return g


def test_double_bonus_0_placing_a_double_without_header_scores_nothing(crafted_deals):
    g = _bonus_play(crafted_deals)
    assert points(g.play(0, "5-5", "left")) == []
    assert g.s.ends == (5, 3, True, True)


def test_double_bonus_2_placing_a_double_scores_2(crafted_deals):
    g = _bonus_play(crafted_deals, double_bonus=2)
    assert points(g.play(0, "5-5", "left")) == [(0, 2, "double_bonus", 2)]


def test_double_bonus_is_reduced_near_the_target(crafted_deals):
    g = _bonus_play(crafted_deals, double_bonus=2)
    g.set_score(0, 13)
    assert points(g.play(0, "5-5", "left")) == [(0, 1, "double_bonus", 2)]


def test_double_bonus_scores_only_the_best_award_a_triple_header(crafted_deals):
    g, _ = start(crafted_deals, deals.CASE1, double_bonus=2)
    g.play(1, "2-6", "left")
    g.play(0, "4-6", "right")
    g.play(1, "2-4", "right")
    assert points(g.play(0, "2-2", "right")) == [(0, 3, "triple_header", 3)]


def test_double_bonus_a_tie_with_the_lead_header_goes_to_the_header(crafted_deals):
    g, _ = start(crafted_deals, deals.CASE1, double_bonus=2)
    assert points(g.last) == [(0, 2, "double_header", 2)]


# --- domino_points ------------------------------------------------------------------------


@pytest.mark.parametrize("value", [2, 1, 5])
def test_domino_points_is_what_going_out_scores(crafted_deals, value):
    g, _ = start(crafted_deals, deals.GO_OUT, domino_points=value)
    for seat, tile, at in deals.GO_OUT_PLAYS:
        g.play(seat, tile, at)
    after = [e for e in g.play(*deals.GO_OUT_LAST) if getattr(e, "hand", None) == 1]
    assert points(after) == [(0, 2, "double_header", 2), (0, value, "domino", value)]
    end = of_type(after, HandEnded)[0]
    assert (end.reason, end.side, end.points, end.scores) == ("domino", 0, value, (4 + value, 0))


# --- blocked, through the engine ------------------------------------------------------------


def _blocked(crafted_deals, deal, plays, **options):
    g, _ = start(crafted_deals, deal, **options)
    for seat, tile, at in plays:
        after = g.play(seat, tile, at)
    return g, [e for e in after if getattr(e, "hand", None) == 1]


@pytest.mark.parametrize("rule", ["german", "american", "eastern", "pips"])
def test_blocked_with_the_fitting_tiles_in_the_reserve_every_rule(crafted_deals, rule):
    # Seat 0 keeps {0-1, 0-2}: no double, 3 pips. Seat 1 holds the rest, with 6 doubles.
    _g, after = _blocked(
        crafted_deals, deals.RESERVE_BLOCK, deals.RESERVE_BLOCK_PLAYS, blocked=rule
    )
    assert points(after) == [(0, 2, "double_header", 2), (0, 2, "blocked", 2)]
    end = of_type(after, HandEnded)[0]
    assert (end.reason, end.side, end.points, end.scores) == ("blocked", 0, 2, (6, 0))


@pytest.mark.parametrize("rule", ["german", "american", "eastern", "pips"])
def test_blocked_dead_line_every_rule(crafted_deals, rule):
    # Seat 1 keeps {2-3}; seat 0 holds 0-1 and the 14 drawn, 0-0..3-3 among them.
    _g, after = _blocked(crafted_deals, deals.DEAD_LINE, deals.DEAD_LINE_PLAYS, blocked=rule)
    assert points(after) == [(1, 2, "double_header", 2), (1, 2, "blocked", 2)]
    end = of_type(after, HandEnded)[0]
    assert (end.reason, end.side, end.points, end.scores) == ("blocked", 1, 2, (4, 4))


def test_blocked_hand_scores_2_whatever_domino_points(crafted_deals):
    _, after = _blocked(
        crafted_deals, deals.RESERVE_BLOCK, deals.RESERVE_BLOCK_PLAYS, domino_points=5
    )
    assert points(after)[-1] == (0, 2, "blocked", 2)


def test_blocked_hand_points_are_never_reduced(crafted_deals):
    g, _ = start(crafted_deals, deals.RESERVE_BLOCK)
    for seat, tile, at in deals.RESERVE_BLOCK_PLAYS[:-1]:
        g.play(seat, tile, at)
    g.set_score(0, 8)
    after = g.play(*deals.RESERVE_BLOCK_PLAYS[-1])
    # 8 + 2 (double header, d = 7) = 10, then the block: d = 5 but never reduced anyway.
    assert points(after)[:2] == [(0, 2, "double_header", 2), (0, 2, "blocked", 2)]
    g2, _ = start(crafted_deals, deals.RESERVE_BLOCK)
    for seat, tile, at in deals.RESERVE_BLOCK_PLAYS[:-1]:
        g2.play(seat, tile, at)
    g2.set_score(0, 11)
    after = g2.play(*deals.RESERVE_BLOCK_PLAYS[-1])
    # 11 -> 13 by the header (d = 4, full); the block's 2 from 13 (d = 2) stay 2: 15, over.
    assert points(after) == [(0, 2, "double_header", 2), (0, 2, "blocked", 2)]
    assert of_type(after, MatchEnded)[0].scores == (15, 0)


# --- blocked, the rule itself ---------------------------------------------------------------


def bw(rule, *sides, seats=None, partnerships=False):
    n = seats or len(sides)
    return blocked_winner(rules_for(n, partnerships, blocked=rule), [tiles(s) for s in sides])


def test_german_fewest_doubles_wins_before_pips():
    assert bw("german", "6-6", "5-6 4-6 3-6") == 1
    assert bw("german", "0-0 1-1", "6-6 5-6") == 1


def test_german_tie_on_doubles_fewest_pips_wins():
    assert bw("german", "1-1 5-6", "2-2 0-1") == 1
    assert bw("german", "0-1 0-2", "0-4") == 0


def test_german_full_tie_scores_nothing_two_three_and_four_sides():
    assert bw("german", "1-2", "0-3") is None
    assert bw("german", "1-2", "0-3", "6-6") is None
    assert bw("german", "1-2", "0-3", "5-6", "4-6") is None
    # A tie for best among four, whatever the others.
    assert bw("german", "1-2", "2-2 4-4", "0-3", "3-3") is None


def test_blocked_in_partnership_counts_both_partners_through_the_engine(crafted_deals):
    # Seat 0 leads 6-6 (highest double), keeping {0-1}; seat 2 holds {2-2}; seats 1 and 3 hold
    # {0-2} and {3-4}. Nobody holds a 6 and only the reserve is left: blocked at the lead.
    # Seat 0 alone would beat seat 1 alone (0 doubles each, 1 pip against 2), but side 0 holds
    # seat 2's double: side 1 wins under german and american; side 0 under pips (5 vs 9).
    deal = (tuple(tiles(h) for h in ("6-6 0-1", "0-2", "2-2", "3-4")), tiles("5-6 1-6"))
    for rule, winner in [("german", 1), ("american", 1), ("eastern", 1), ("pips", 0)]:
        crafted_deals({(1, 1): deal})
        rules = rules_for(4, True, lead="highest_double", blocked=rule)
        g = Game(4, True, rules).start()
        hand1 = [e for e in g.events if getattr(e, "hand", None) == 1]
        assert points(hand1) == [(0, 2, "double_header", 2), (winner, 2, "blocked", 2)], rule
        assert of_type(hand1, HandEnded)[0].side == winner


def test_blocked_rules_compare_side_totals():
    # blocked_winner is given each side's tiles, both partners together.
    assert bw("german", "0-1 2-2", "0-2 3-4", seats=4, partnerships=True) == 1
    assert bw("german", "1-1 0-3", "0-1 2-4", seats=4, partnerships=True) == 1
    assert bw("pips", "0-1 0-3", "0-1 2-4", seats=4, partnerships=True) == 0


def test_pips_fewest_pips_wins_doubles_do_not_matter():
    assert bw("pips", "5-5 0-1", "6-4 3-2 2-0") == 0
    assert bw("pips", "0-0 1-1 2-2", "0-1 1-2 3-4") == 0


def test_pips_tie_scores_nothing_with_three_and_four_sides():
    assert bw("pips", "2-3", "1-4", "6-6") is None
    assert bw("pips", "2-3", "1-4", "0-5", "6-6") is None
    assert bw("pips", "2-3", "6-6", "1-4", "0-5") is None


def test_american_the_only_side_without_a_double_wins():
    assert bw("american", "0-0", "6-5 6-4", "1-1 0-1") == 1


def test_american_several_without_a_double_fewest_tiles_then_pips():
    # Side 1 has more pips but fewer tiles.
    assert bw("american", "0-1 0-2", "5-6", "1-1") == 1
    assert bw("american", "0-1 0-2", "0-3 0-4", "1-1") == 0
    assert bw("american", "0-1 0-2", "0-3 0-0") == 0


def test_american_tie_among_sides_without_doubles_scores_nothing():
    assert bw("american", "0-1 2-3", "1-2 0-3", "0-0") is None
    assert bw("american", "0-1 2-3", "1-2 0-3", "0-3 1-2", "4-4") is None


def test_american_every_side_holds_a_double_the_lowest_double_wins():
    assert bw("american", "4-4 6-5", "1-1 6-6 5-4") == 1
    assert bw("american", "3-3", "2-2 6-6", "4-4 0-1", "5-5") == 1


def test_eastern_several_without_a_double_compared_by_pips_alone():
    # American would pick side 1 (one tile against two); eastern takes the fewest pips.
    assert bw("american", "0-1 0-2", "5-6", "1-1") == 1
    assert bw("eastern", "0-1 0-2", "5-6", "1-1") == 0


def test_eastern_only_side_without_a_double_and_lowest_double_rules():
    assert bw("eastern", "0-0", "6-5 6-4") == 1
    assert bw("eastern", "4-4 6-5", "1-1 6-6 5-4") == 1


def test_eastern_pip_tie_scores_nothing():
    assert bw("eastern", "0-3", "1-2", "1-1") is None
    assert bw("eastern", "0-3", "1-2", "0-1 0-2", "1-1") is None


def test_partnership_american_side_without_double_counts_both_partners():
    # Seat 0 holds no double but its partner does: side 0 holds a double.
    assert bw("american", "0-1 3-3", "1-2 2-4", seats=4, partnerships=True) == 1


# --- endgame_reduction ----------------------------------------------------------------------


def _triple_at(crafted_deals, score, **options):
    g, _ = start(crafted_deals, deals.CASE2, **options)
    g.play(1, "3-5", "left")
    g.play(0, "1-5", "left")
    g.set_score(1, score)
    return g.play(1, "1-3", "left"), g


@pytest.mark.parametrize(("before", "scored"), [(11, 3), (12, 2), (13, 1), (14, 1)])
def test_endgame_reduction_on(crafted_deals, before, scored):
    after, _ = _triple_at(crafted_deals, before)
    assert points(after)[0] == (1, scored, "triple_header", 3)


@pytest.mark.parametrize("before", [11, 12, 13, 14])
def test_endgame_reduction_off_scores_the_full_value(crafted_deals, before):
    after, _ = _triple_at(crafted_deals, before, endgame_reduction="off")
    assert points(after)[0] == (1, 3, "triple_header", 3)


def test_endgame_reduction_off_the_lead_scores_2_from_14(crafted_deals):
    crafted_deals({(1, 1): deals.CASE2})
    g = Game(rules=rules_for(2, endgame_reduction="off")).create()
    g.sit([1])
    g.set_score(0, 14)
    after = g.sit([0])
    assert points(after) == [(0, 2, "double_header", 2)]
    assert of_type(after, MatchEnded)[0].scores == (16, 0)


# --- match_end ------------------------------------------------------------------------------


def test_match_end_instant_ends_in_the_middle_of_a_hand(crafted_deals):
    after, g = _triple_at(crafted_deals, 14)
    assert g.s.phase == ENDED
    assert of_type(after, HandEnded)[0].reason == "match_over"


def test_match_end_end_of_hand_plays_on_after_the_target(crafted_deals):
    after, g = _triple_at(crafted_deals, 14, match_end="end_of_hand")
    assert points(after) == [(1, 1, "triple_header", 3)]
    assert g.s.scores[1] == 15
    assert g.s.phase == PLAYING
    assert not of_type(after, HandEnded)
    assert g.s.turn == 0


def _go_out(crafted_deals, scores, **options):
    g, _ = start(crafted_deals, deals.GO_OUT, **options)
    for seat, tile, at in deals.GO_OUT_PLAYS:
        g.play(seat, tile, at)
    g.set_score(0, scores[0])
    g.set_score(1, scores[1])
    return g.play(*deals.GO_OUT_LAST), g


def test_match_end_end_of_hand_adds_the_going_out_points_after_a_header_reaches_target(
    crafted_deals,
):
    after, _g = _go_out(crafted_deals, (14, 0), match_end="end_of_hand")
    assert points(after) == [(0, 1, "double_header", 2), (0, 2, "domino", 2)]
    ended = of_type(after, MatchEnded)[0]
    assert (ended.reason, ended.winner_side, ended.scores) == ("target", 0, (17, 0))


def test_match_end_end_of_hand_the_highest_score_wins_not_the_first_to_reach(crafted_deals):
    after, _g = _go_out(crafted_deals, (13, 15), match_end="end_of_hand")
    ended = of_type(after, MatchEnded)[0]
    assert (ended.winner_side, ended.scores) == (0, (16, 15))


def test_match_end_end_of_hand_a_tie_for_highest_plays_another_hand(crafted_deals):
    after, g = _go_out(crafted_deals, (13, 16), match_end="end_of_hand")
    assert of_type(after, HandEnded)[0].scores == (16, 16)
    assert not of_type(after, MatchEnded)
    assert g.s.hand == 2
    assert g.s.phase == PLAYING


# --- target ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seats", "partnerships", "target"),
    [(2, False, 15), (3, False, 10), (4, False, 10), (4, True, 15)],
)
def test_target_by_seats(seats, partnerships, target):
    assert make_rules(seats, partnerships).target == target
    assert make_rules(seats, partnerships, "eastern").target == target


def test_target_explicit_overrides_the_seat_default():
    assert make_rules(2, False, None, {"target": 7}).target == 7
    assert make_rules(3, False, "standard", {"target": "21"}).target == 21


def test_explicit_target_ends_the_match_and_sets_the_reduction(crafted_deals):
    g, _ = start(crafted_deals, deals.CASE2, target=3)
    # d = 3 for the lead: at most 2.
    assert points(g.last) == [(0, 2, "double_header", 2)]
    g.play(1, "3-5", "left")
    g.play(0, "1-5", "left")
    assert points(g.play(1, "1-3", "left")) == [(1, 2, "triple_header", 3)]
    g2, _ = start(crafted_deals, deals.CASE2, target=2, endgame_reduction="off")
    assert points(g2.last) == [(0, 2, "double_header", 2)]
    assert g2.s.phase == ENDED
    assert g2.s.result is not None and g2.s.result.scores == (2, 0)


def test_three_seats_target_10_ends_the_match(crafted_deals):
    crafted_deals({(1, 1): deals.PASS3})
    g = Game(3, rules=rules_for(3)).create()
    g.sit([1, 2])
    g.set_score(0, 9)
    after = g.sit([0])
    assert points(after) == [(0, 1, "double_header", 2)]
    assert of_type(after, MatchEnded)[0].scores == (10, 0, 0)


# --- presets --------------------------------------------------------------------------------

DEFAULTS = {
    "lead": "lowest_double",
    "draw": "until_fits",
    "double_bonus": 0,
    "domino_points": 2,
    "blocked": "german",
    "endgame_reduction": "on",
    "match_end": "instant",
}


@pytest.mark.parametrize(
    ("preset", "changes"),
    [
        ("standard", {}),
        ("american", {"blocked": "american"}),
        ("pips", {"blocked": "pips"}),
        (
            "eastern",
            {
                "lead": "lowest_double_else_lowest_tile",
                "draw": "one_then_pass",
                "double_bonus": 2,
                "blocked": "eastern",
                "endgame_reduction": "off",
            },
        ),
    ],
)
def test_preset_options(preset, changes):
    rules = make_rules(2, False, preset)
    assert rules.as_dict() == {"preset": preset, **DEFAULTS, **changes, "target": 15}


def test_presets_are_exactly_the_four_of_the_rule_book():
    assert set(PRESETS) == {"standard", "american", "pips", "eastern"}


def test_no_preset_is_recorded_as_custom_with_defaults():
    rules = make_rules(2, False, None, {"blocked": "pips"})
    assert rules.preset == "custom"
    assert rules.as_dict() == {"preset": "custom", **DEFAULTS, "blocked": "pips", "target": 15}


def test_options_override_a_preset():
    rules = make_rules(4, True, "eastern", {"blocked": "german", "double_bonus": "0"})
    assert (rules.preset, rules.blocked, rules.double_bonus, rules.draw) == (
        "eastern",
        "german",
        0,
        "one_then_pass",
    )


def test_rules_round_trip_through_their_record_form():
    for preset in PRESETS:
        rules = make_rules(3, False, preset)
        assert Rules.from_dict(rules.as_dict()) == rules


# --- validation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"preset": "german"}, ["preset", "'german'"]),
        ({"options": {"spinners": "on"}}, ["spinners"]),
        ({"options": {"lead": "random"}}, ["lead", "'random'"]),
        ({"options": {"draw": "never"}}, ["draw"]),
        ({"options": {"double_bonus": 3}}, ["double_bonus", "3"]),
        ({"options": {"double_bonus": True}}, ["double_bonus", "True"]),
        ({"options": {"domino_points": 3}}, ["domino_points"]),
        ({"options": {"domino_points": True}}, ["domino_points", "True"]),
        ({"options": {"domino_points": 2.0}}, ["domino_points"]),
        ({"options": {"blocked": "chinese"}}, ["blocked"]),
        ({"options": {"endgame_reduction": True}}, ["endgame_reduction"]),
        ({"options": {"endgame_reduction": "yes"}}, ["endgame_reduction"]),
        ({"options": {"match_end": "never"}}, ["match_end"]),
        ({"options": {"target": 0}}, ["target"]),
        ({"options": {"target": -5}}, ["target"]),
        ({"options": {"target": "-5"}}, ["target"]),
        ({"options": {"target": 1.5}}, ["target"]),
        ({"options": {"target": "ten"}}, ["target"]),
        ({"options": {"target": True}}, ["target"]),
        ({"options": {"target": None}}, ["target"]),
        ({"options": {"preset": "standard"}}, ["preset"]),
    ],
)
def test_make_rules_refuses_bad_options_with_a_clear_message(kwargs, words):
    with pytest.raises(InvalidOptions) as info:
        make_rules(2, False, kwargs.get("preset", "standard"), kwargs.get("options"))
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize(
    ("seats", "partnerships", "word"),
    [
        (2, True, "partnerships"),
        (3, True, "partnerships"),
        (1, False, "seats"),
        (5, False, "seats"),
        (0, False, "seats"),
        (True, False, "seats"),
        ("2", False, "seats"),
    ],
)
def test_make_rules_refuses_seat_counts_it_cannot_play(seats, partnerships, word):
    with pytest.raises(InvalidOptions, match=word):
        make_rules(seats, partnerships)


def test_rules_value_validates_itself():
    with pytest.raises(InvalidOptions, match="lead"):
        Rules(lead="lowest")
    with pytest.raises(InvalidOptions, match="preset"):
        Rules(preset="german")
    with pytest.raises(InvalidOptions, match="missing"):
        Rules.from_dict({"lead": "lowest_double"})
    with pytest.raises(InvalidOptions, match="unknown"):
        Rules.from_dict({**Rules().as_dict(), "spinner": 1})


@pytest.mark.parametrize(("seats", "partnerships"), [(5, False), (1, False), (2, True)])
def test_create_match_refuses_seats_the_rules_cannot_play(seats, partnerships):
    with pytest.raises(InvalidOptions):
        execute(None, CreateMatch("m", seats, partnerships, Rules(), SEED))


def test_rules_are_frozen():
    rules = make_rules(2, False)
    with pytest.raises(AttributeError):
        rules.target = 3  # type: ignore[misc]
