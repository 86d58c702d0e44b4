"""The analysis of decisions: the win model between hands, each decision valued from what
its seat knew, marks, accuracy, and the same analysis for the same seed."""

from __future__ import annotations

import dataclasses
import random

import pytest

from bergen.domain.analysis import (
    Estimate,
    WinModel,
    accuracy,
    analyse,
    estimate,
    judge,
    mark_of,
    simulated_hands,
)
from bergen.domain.events import Dealt, Event, TileDrawn, TilePlayed
from bergen.domain.montecarlo import knowledge
from bergen.domain.policies import greedy_policy, random_policy
from bergen.domain.rules import make_rules
from bergen.domain.simulation import play_match
from bergen.domain.tiles import ALL_BITS, End, Tile
from bergen.domain.views import redact_event

TWO = make_rules(2, False)


@pytest.fixture(scope="module")
def model() -> WinModel:
    return WinModel.fitted(TWO, 2, False, 400, seed="tests")


def test_hand_made_hands_give_the_chances_worked_out_by_hand() -> None:
    # Each hand, one side scores 5 by a play, either side alike; target 10.
    rules = dataclasses.replace(TWO, target=10, endgame_reduction="off")
    hands = [((0, 5, True),), ((1, 5, True),)]
    m = WinModel(rules, 2, hands)
    assert m.chances([0, 0]) == pytest.approx((0.5, 0.5))
    assert m.chances([5, 0]) == pytest.approx((0.75, 0.25))  # 1/2 + 1/2 * 1/2
    assert m.chances([5, 5]) == pytest.approx((0.5, 0.5))
    assert m.chances([10, 3]) == (1.0, 0.0)


def test_the_near_target_reduction_is_applied_to_each_score() -> None:
    # 5 by a play is 1 two points short (RULES.md section 5): W(8, 0) worked out by hand is
    # 1/2 W(9, 0) + 1/2 W(8, 5) = 1/2 * 3/4 + 1/2 * 1/4.
    rules = dataclasses.replace(TWO, target=10, endgame_reduction="on")
    m = WinModel(rules, 2, [((0, 5, True),), ((1, 5, True),)])
    assert m.chances([9, 0]) == pytest.approx((0.75, 0.25))
    assert m.chances([8, 0]) == pytest.approx((0.5, 0.5))
    # Points for the hand's end are never reduced: from 8, going out's 5 wins at once.
    m = WinModel(rules, 2, [((0, 5, False),), ((1, 5, False),)])
    assert m.chances([8, 0]) == pytest.approx((0.75, 0.25))


def test_a_hand_that_scores_nothing_is_played_again() -> None:
    rules = dataclasses.replace(TWO, target=10, endgame_reduction="off")
    m = WinModel(rules, 2, [(), ((0, 10, False),), ((1, 10, False),)])
    assert m.chances([0, 0]) == pytest.approx((0.5, 0.5))


def test_ending_at_a_hands_end_plays_on_from_a_tie_at_the_top() -> None:
    rules = dataclasses.replace(TWO, target=10, endgame_reduction="off", match_end="end_of_hand")
    m = WinModel(rules, 2, [((0, 5, True), (1, 5, True)), ((0, 5, True),)])
    # From 5-5 the first hand ties them at 10 and another is played; the second wins.
    assert m.chances([5, 5]) == pytest.approx((1.0, 0.0))
    assert m.chances([12, 11]) == (1.0, 0.0)


@pytest.mark.parametrize(("seats", "partnerships"), [(2, False), (3, False), (4, True)])
def test_a_fitted_model_is_fair_at_the_start_and_rewards_points(
    seats: int, partnerships: bool
) -> None:
    rules = make_rules(seats, partnerships)
    sides = 2 if partnerships else seats
    m = WinModel.fitted(rules, seats, partnerships, 120 * sides, seed="fair")
    start = m.chances([0] * sides)
    assert sum(start) == pytest.approx(1.0)
    assert start == pytest.approx([1 / sides] * sides)  # the sides turned round
    ahead = m.chances([rules.target - 3] + [0] * (sides - 1))
    assert ahead[0] > 0.8
    assert sum(ahead) == pytest.approx(1.0)


def test_simulated_hands_are_the_same_for_the_same_seed() -> None:
    a = simulated_hands(TWO, 2, False, 40, "s")
    assert a == simulated_hands(TWO, 2, False, 40, "s")
    assert a != simulated_hands(TWO, 2, False, 40, "t")
    assert len(a) == 40 and all(all(p > 0 for _, p, _ in h) for h in a)


def test_marks_need_the_interval_to_exclude_no_loss() -> None:
    assert mark_of(Estimate(16.0, 2.0, 30.0)) == "blunder"
    assert mark_of(Estimate(12.0, 1.0, 23.0)) == "mistake"
    assert mark_of(Estimate(6.0, 0.5, 11.5)) == "inaccuracy"
    assert mark_of(Estimate(4.0, 1.0, 7.0)) is None
    assert mark_of(Estimate(20.0, -1.0, 41.0)) is None  # no loss is still possible


def test_accuracy_is_100_without_loss_and_falls_with_it() -> None:
    assert accuracy(0.0) == pytest.approx(100.0, abs=1e-3)
    assert 0 < accuracy(20.0) < accuracy(5.0) < 100
    assert accuracy(200.0) == 0.0
    e = estimate([1.0, 2.0, 3.0])
    assert e.mean == 2.0 and e.low < 2.0 < e.high


def a_match(seed: int) -> list[Event]:
    rng = random.Random(seed)
    events, _ = play_match(
        f"m{seed}", TWO, 2, False, bytes([seed]) * 32, [greedy_policy, random_policy], rng
    )
    return events


def test_every_unforced_play_is_judged_and_no_forced_one(model: WinModel) -> None:
    events = a_match(3)
    found = analyse(events, model, samples=6, seed="a")
    judged = [(d.seat, d.hand) for d in found.decisions]
    assert judged, "a whole match has decisions"
    for d in found.decisions:
        assert not d.forced and d.chosen is not None and d.loss is not None
        assert len(d.options) > 1 and 0 <= d.best < len(d.options)
        for o in d.options:
            assert o.win is not None and 0.0 <= o.win.mean <= 1.0
        assert d.loss.mean >= -1e-9 or d.chosen != d.best
    plays = [e for e in events if isinstance(e, TilePlayed) and e.end is not None]
    assert len(found.decisions) < len(plays)  # some were forced
    assert all(a is None or 0 <= a <= 100 for a in found.accuracy)


def test_the_same_seed_gives_the_same_analysis(model: WinModel) -> None:
    events = a_match(4)
    once = analyse(events, model, samples=5, seed="same")
    assert once == analyse(events, model, samples=5, seed="same")


def test_a_seats_analysis_never_depends_on_a_tile_it_could_not_see(model: WinModel) -> None:
    # The seat's knowledge is its redacted stream: a stream whose other seat's hidden
    # tiles and boneyard are changed (consistently with the public history) gives seat 0
    # the same analysis, decision by decision.
    events = a_match(5)
    first_hand_end = next(i for i, e in enumerate(events) if type(e).__name__ == "HandEnded")
    seat0 = [redact_event(e, 0) for e in events[:first_hand_end]]
    whole = analyse(events[:first_hand_end], model, samples=4, seed="v", seats=[0])
    # The same redacted view, from another world: seat 1's hidden tiles swapped for unseen
    # ones where the public history allows it cannot be told from seat 0's stream, so the
    # analysis is computed from `seat0` alone.
    alone = analyse(seat0, model, samples=4, seed="v", seats=[0])
    assert whole == alone
    assert any(isinstance(e, Dealt) and e.hands[1][0] is None for e in seat0)
    assert all(not (isinstance(e, TileDrawn) and e.seat == 1 and e.tile) for e in seat0)


def test_judging_out_of_turn_or_an_illegal_choice_is_refused(model: WinModel) -> None:
    events = a_match(6)
    k = knowledge([redact_event(e, 0) for e in events[:6]], 0)
    other = 1 if k.state is not None and k.state.turn == 0 else 0
    with pytest.raises(ValueError, match="turn"):
        judge(knowledge([redact_event(e, other) for e in events[:6]], other), model)


def test_handing_the_opponent_a_domino_that_wins_the_match_is_a_blunder(model: WinModel) -> None:
    # A real match (seed 36) at the moment seat 0 plays, the line's ends 2 and 3, seat 1
    # at 13 of 15 holding one tile, 4-5, the boneyard down to its reserve. 3-4 on the right
    # opens a 4 for seat 1's last tile (out: 2 points, the match); 3-3 does not. Seat 0 is
    # given to know seat 1's tile (its slot allows 4-5 alone, as its passes could show).
    events = a_match(36)
    at = 107
    play = events[at]
    assert isinstance(play, TilePlayed) and play.seat == 0
    k = knowledge([redact_event(e, 0) for e in events[:at]], 0)
    s = k.state
    assert s is not None and s.scores[1] >= 13 and s.ends is not None
    assert s.ends[:2] == (2, 3) and len(s.boneyard) == 2
    last = Tile.of(4, 5)
    assert len(k.slots[1]) == 1
    pinned = dataclasses.replace(k, slots=(k.slots[0], (ALL_BITS & ~last.bit,)))
    opens, keeps = (Tile.of(3, 4), End.RIGHT), (Tile.of(3, 3), End.RIGHT)
    bad = judge(pinned, model, opens, samples=16, seed="b")
    assert bad.mark == "blunder", bad
    best = bad.options[bad.best]
    assert (best.tile, best.end) == keeps and best.win is not None
    chosen = bad.options[bad.chosen or 0]
    assert chosen.win is not None and chosen.win.high == 0.0  # the match lost in every world
    # What it lost is all the chance the other option kept (seat 0 is behind, 7 to 13).
    assert bad.loss is not None and bad.loss.mean == pytest.approx(100 * best.win.mean)
    assert bad.loss.low > 15
    good = judge(pinned, model, keeps, samples=16, seed="b")
    assert good.mark is None and good.loss is not None and good.loss.mean == 0.0
