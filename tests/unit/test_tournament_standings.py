"""TOURNAMENT.md section 5: places, match points, abandoned matches, byes, walkovers,
margins, Buchholz, wins, and the ranking's tie-breaks down to seeding rank."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bergen.domain.errors import InvalidArgument
from bergen.domain.tournament_pairing import Settings, pair_round
from bergen.domain.tournament_standings import (
    TableResult,
    Tally,
    fraction_text,
    parse_fraction,
    score_result,
    walkover,
)


def F(text: str) -> Fraction:
    return Fraction(text)


def test_two_sides_win_one_and_lose_nothing():
    r = score_result(TableResult("target", (15, 9)))
    assert r.places == (1, 2)
    assert r.match_points == (1, 0)
    assert r.margins == (6, -6)
    assert r.winner == 0


def test_four_sides_score_three_two_one_nothing():
    r = score_result(TableResult("target", (3, 16, 9, 12)))
    assert r.places == (4, 1, 3, 2)
    assert r.match_points == (0, 3, 1, 2)
    assert r.margins == (-13, 4, -7, -4)


def test_equal_scores_share_a_place_and_half_a_point_each():
    r = score_result(TableResult("target", (16, 12, 12, 1)))
    assert r.places == (1, 2, 2, 4)
    assert r.match_points == (3, F("3/2"), F("3/2"), 0)
    assert [fraction_text(p) for p in r.match_points] == ["3", "3/2", "3/2", "0"]


def test_a_shared_first_place_is_no_win():
    r = score_result(TableResult("target", (15, 15, 4)))
    assert r.places == (1, 1, 3)
    assert r.winner is None
    tally = Tally.start([1, 2, 3]).with_table((1, 2, 3), r)
    assert tally.wins == (0, 0, 0, 0)


def test_a_forfeiting_side_is_placed_last_whatever_its_score():
    r = score_result(TableResult("forfeit", (8, 0, 14), forfeited_side=2))
    assert r.places == (1, 2, 3)
    assert r.match_points == (2, 1, 0)
    # The margin is still the score against the best other.
    assert r.margins == (-6, -14, 6)


def test_an_abandoned_match_gives_every_side_half_of_the_others_and_no_margin():
    r = score_result(TableResult("abandoned", (12, 4, 9)))
    assert r.match_points == (1, 1, 1)
    assert r.margins == (0, 0, 0)
    assert r.winner is None
    two = score_result(TableResult("abandoned", (3, 10)))
    assert two.match_points == (F("1/2"), F("1/2"))


def test_a_round_robin_table_not_played_is_the_withdrawn_side_forfeit_with_margin_zero():
    r = walkover(2, [1])
    assert r.reason == "forfeit"
    assert r.forfeited_side == 1
    assert r.match_points == (1, 0)
    assert r.margins == (0, 0)
    both = walkover(2, [0, 1])
    assert both.match_points == (F("1/2"), F("1/2"))


@pytest.mark.parametrize(
    "result",
    [
        TableResult("timeout", (1, 2)),
        TableResult("target", (1,)),
        TableResult("forfeit", (1, 2)),
        TableResult("forfeit", (1, 2), forfeited_side=2),
        TableResult("target", (1, 2), forfeited_side=0),
    ],
)
def test_a_malformed_result_is_refused(result):
    with pytest.raises(InvalidArgument) as caught:
        score_result(result)
    assert caught.value.reason == "INVALID_RESULT"


def test_a_bye_gives_one_point_no_margin_and_no_opponents():
    tally = Tally.start([1, 2, 3]).with_bye(3)
    assert tally.points[3] == 2  # halves
    assert tally.margin[3] == 0
    assert tally.opponents[3] == ()
    assert tally.byes[3] == 1
    [line] = [s for s in tally.standings() if s.entrant == 3]
    assert line.match_points == 1
    assert line.buchholz == 0
    assert line.wins == 0


def test_buchholz_counts_opponents_current_points_and_byes_add_nothing():
    tally = Tally.start([1, 2, 3, 4])
    tally = tally.with_table((1, 2), score_result(TableResult("target", (15, 3))))
    # 2 has 0 points: 1's Buchholz is 0; 1 has 1: 2's Buchholz is 1.
    assert (tally.buchholz[1], tally.buchholz[2]) == (0, 2)
    # 2 wins later: 1's Buchholz grows with it, current totals while running.
    tally = tally.with_table((2, 3), score_result(TableResult("target", (15, 3))))
    assert tally.buchholz[1] == 2
    assert tally.buchholz[3] == 2 * 1
    tally = tally.with_bye(2)
    assert tally.buchholz[1] == 4
    assert tally.buchholz[2] == 2 * (1 + 0)


def naive_standings(seeding, events):
    """Section 5 computed from scratch at the end, for comparison."""
    n = len(seeding)
    points = [Fraction(0)] * (n + 1)
    margin = [0] * (n + 1)
    wins = [0] * (n + 1)
    meetings: list[list[int]] = [[] for _ in range(n + 1)]
    for kind, sides, result in events:
        if kind == "bye":
            points[sides] += 1
            continue
        for i, e in enumerate(sides):
            points[e] += result.match_points[i]
            margin[e] += result.margins[i]
            meetings[e].extend(o for o in sides if o != e)
        if result.winner is not None:
            wins[sides[result.winner]] += 1
    buchholz = [sum((points[o] for o in meetings[e]), Fraction(0)) for e in range(n + 1)]
    rank = {e: i for i, e in enumerate(seeding)}
    order = sorted(
        range(1, n + 1),
        key=lambda e: (-points[e], -margin[e], -buchholz[e], -wins[e], rank[e]),
    )
    return [(e, points[e], margin[e], buchholz[e], wins[e]) for e in order]


@settings(max_examples=80, deadline=None)
@given(
    n=st.integers(min_value=2, max_value=12),
    seed=st.integers(min_value=0, max_value=2**32),
    tables=st.integers(min_value=0, max_value=40),
)
def test_standings_kept_one_result_at_a_time_equal_the_ones_computed_from_scratch(n, seed, tables):
    rng = random.Random(seed)
    seeding = list(range(1, n + 1))
    rng.shuffle(seeding)
    tally = Tally.start(seeding)
    events = []
    for _ in range(tables):
        if rng.random() < 0.15:
            e = rng.randint(1, n)
            tally = tally.with_bye(e)
            events.append(("bye", e, None))
            continue
        sides = tuple(rng.sample(range(1, n + 1), rng.randint(2, min(4, n))))
        reason = rng.choice(["target", "target", "forfeit", "abandoned"])
        scores = tuple(rng.randint(0, 6) for _ in sides)
        forfeited = rng.randrange(len(sides)) if reason == "forfeit" else None
        result = score_result(TableResult(reason, scores, forfeited))
        tally = tally.with_table(sides, result)
        events.append(("table", sides, result))
    got = [(s.entrant, s.match_points, s.margin, s.buchholz, s.wins) for s in tally.standings()]
    assert got == naive_standings(seeding, events)
    assert [s.rank for s in tally.standings()] == list(range(1, n + 1))


def two_player_tally(seeding, results):
    tally = Tally.start(seeding)
    for sides, scores in results:
        tally = tally.with_table(sides, score_result(TableResult("target", scores)))
    return tally


def test_ranking_is_match_points_first():
    tally = two_player_tally([1, 2, 3, 4], [((1, 2), (10, 0)), ((3, 4), (15, 14))])
    assert tally.order()[:2] == [1, 3]
    assert tally.order([4, 3, 2, 1]) == [1, 3, 4, 2]


def test_then_margin():
    tally = two_player_tally([1, 2, 3, 4], [((1, 2), (15, 14)), ((3, 4), (15, 5))])
    assert tally.order() == [3, 1, 2, 4]


def test_then_buchholz():
    # 1 and 3 win by 5; 1's opponent 2 then wins, 3's opponent 4 loses to 2 by 5.
    tally = two_player_tally(
        [3, 1, 4, 2, 5, 6],
        [((1, 2), (15, 10)), ((3, 4), (15, 10)), ((2, 5), (15, 10)), ((4, 6), (10, 15))],
    )
    standings = {s.entrant: s for s in tally.standings()}
    assert standings[1].match_points == standings[3].match_points == 1
    assert standings[1].margin == standings[3].margin == 5
    assert standings[1].buchholz > standings[3].buchholz
    order = tally.order()
    assert order.index(1) < order.index(3)


def test_then_wins():
    # Same points (1), margin (0), Buchholz: a shared first is no win.
    tally = Tally.start([2, 1, 3, 4])
    tally = tally.with_table((1, 3), score_result(TableResult("target", (10, 5))))
    tally = tally.with_table((1, 3), score_result(TableResult("target", (5, 10))))
    tally = tally.with_table((2, 4), score_result(TableResult("abandoned", (0, 0))))
    tally = tally.with_table((2, 4), score_result(TableResult("abandoned", (0, 0))))
    s = {x.entrant: x for x in tally.standings()}
    assert (s[1].match_points, s[1].margin, s[1].buchholz) == (1, 0, 2)
    assert (s[2].match_points, s[2].margin, s[2].buchholz) == (1, 0, 2)
    assert (s[1].wins, s[2].wins) == (1, 0)
    assert tally.order()[0] == 1


def test_then_seeding_rank():
    tally = Tally.start([4, 2, 3, 1])
    assert tally.order() == [4, 2, 3, 1]
    assert [s.entrant for s in tally.standings()] == [4, 2, 3, 1]


def test_figures_are_written_as_exact_fractions():
    assert fraction_text(Fraction(3, 2)) == "3/2"
    assert fraction_text(Fraction(2)) == "2"
    assert parse_fraction("91/2") == Fraction(91, 2)
    with pytest.raises(InvalidArgument):
        parse_fraction("4/2")
    with pytest.raises(InvalidArgument):
        parse_fraction("1.5")


def test_a_seeding_must_name_every_entrant_once():
    with pytest.raises(InvalidArgument):
        Tally.start([1, 1, 3])


def test_buchholz_comes_before_wins():
    # 1: two abandoned matches against strong opponents; 2: a win and a loss against weak ones.
    seeding = [2, 1, 3, 4, 5, 6, 7, 8]
    tally = Tally.start(seeding)
    for sides, reason, scores in [
        ((1, 3), "abandoned", (0, 0)),
        ((1, 4), "abandoned", (0, 0)),
        ((2, 5), "target", (15, 10)),
        ((2, 6), "target", (10, 15)),
        ((3, 7), "target", (15, 15 - 5)),
        ((4, 8), "target", (15, 15 - 5)),
    ]:
        tally = tally.with_table(sides, score_result(TableResult(reason, scores)))
    s = {x.entrant: x for x in tally.standings()}
    assert (s[1].match_points, s[1].margin, s[1].wins) == (1, 0, 0)
    assert (s[2].match_points, s[2].margin, s[2].wins) == (1, 0, 1)
    assert s[1].buchholz == 3 > s[2].buchholz == 1
    order = tally.order()
    assert order.index(1) < order.index(2)
    assert tally.order([2, 1]) == [1, 2]


# Section 5's ranking, criterion by criterion: each figure higher first, seeding rank lower.
RANKING = ("points", "margin", "buchholz", "wins", "seeding_rank")


def tally_deciding_on(criterion: str) -> Tally:
    """Entrants 1, 2 and 3 where 2 and 1 are equal on every criterion before `criterion`, 2
    is ahead on it, and 1 on every criterion after it (seeding rank included); 3 is last on
    match points. Only `criterion` puts 2 before 1: leaving it out, or turning it round,
    puts 1 first."""
    decisive = RANKING.index(criterion)
    columns: dict[str, tuple[int, int, int, int]] = {}
    for i, name in enumerate(RANKING):
        ahead, behind = (1, 2) if name == "seeding_rank" else (3, 1)
        if i < decisive:
            one, two = ahead, ahead
        elif i == decisive:
            one, two = behind, ahead
        else:
            one, two = ahead, behind
        # Index 0 is unused; entrant 3 has no match points and the third seeding rank.
        columns[name] = (0, one, two, 3 if name == "seeding_rank" else 0)
    zeros = (0, 0, 0, 0)
    return Tally(
        columns["seeding_rank"],
        columns["points"],
        columns["margin"],
        columns["buchholz"],
        columns["wins"],
        zeros,
        zeros,
        ((), (), (), ()),
    )


@pytest.mark.parametrize("criterion", RANKING)
def test_standings_and_swiss_pairing_rank_by_each_criterion_in_turn(criterion):
    tally = tally_deciding_on(criterion)
    assert [s.entrant for s in tally.standings()] == [2, 1, 3]
    assert tally.order() == [2, 1, 3]
    assert tally.order([3, 1, 2]) == [2, 1, 3]
    assert tally.order([1, 2]) == [2, 1]
    # The Swiss pairing takes the same order: the bye to the last, and at the table the
    # higher-ranked (neither has taken a first side) takes the first side.
    seeding = sorted((1, 2, 3), key=lambda e: tally.seeding_rank[e])
    pairing = pair_round(Settings(format="swiss", seats=2, rounds=2), seeding, [None] * 4, tally, 2)
    assert pairing.byes == (3,)
    assert [t.sides for t in pairing.tables] == [(2, 1)]
