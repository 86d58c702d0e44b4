"""TOURNAMENT.md section 4 as properties: Swiss pairs as the literal depth-first search does
(no rematch when one is avoidable), every active entrant is seated once or has the bye, the
bye goes to the lowest-ranked entrant without one, a round robin meets everyone once (twice,
sides swapped, in a double one), multi-sided tables fill by fewest meetings."""

from __future__ import annotations

import random
from collections import Counter
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bergen.domain.errors import InvalidArgument
from bergen.domain.tournament_pairing import (
    Settings,
    pair_round,
    round_robin_round,
    seats_of,
    swiss_multi_sided,
    swiss_two_sided,
    table_sizes,
)
from bergen.domain.tournament_standings import TableResult, Tally, score_result


def tally_with_meetings(n: int, meetings: list[tuple[int, int]]) -> Tally:
    """A tally of entrants 1..n (seeded in number order, no points) where each pair of
    `meetings` has shared a table, nobody having taken a first side."""
    opponents: list[list[int]] = [[] for _ in range(n + 1)]
    for a, b in meetings:
        opponents[a].append(b)
        opponents[b].append(a)
    zeros = (0,) * (n + 1)
    return Tally(
        tuple(range(n + 1)),
        zeros,
        zeros,
        zeros,
        zeros,
        zeros,
        zeros,
        tuple(tuple(o) for o in opponents),
    )


def literal_search(players: list[int], met: dict[int, set[int]]) -> list[tuple[int, int]] | None:
    """Section 4's procedure word for word: the highest unpaired with the highest it has not
    met, the next candidate when the rest cannot be paired."""
    if not players:
        return []
    u = players[0]
    for i in range(1, len(players)):
        c = players[i]
        if c in met[u]:
            continue
        rest = literal_search(players[1:i] + players[i + 1 :], met)
        if rest is not None:
            return [(u, c), *rest]
    return None


@settings(max_examples=300, deadline=None)
@given(
    n=st.sampled_from([2, 4, 6, 8, 10, 12]),
    density=st.floats(min_value=0.0, max_value=0.9),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_swiss_pairs_exactly_as_the_depth_first_search(n, density, seed):
    rng = random.Random(seed)
    meetings = [(a, b) for a, b in combinations(range(1, n + 1), 2) if rng.random() < density]
    tally = tally_with_meetings(n, meetings)
    order = list(range(1, n + 1))
    met = {e: set(tally.opponents[e]) for e in order}
    byes, tables = swiss_two_sided(order, tally)
    assert byes == ()
    expected = literal_search(order, met)
    if expected is None:
        # No pairing without rematches: the same procedure with rematches allowed.
        expected = [(order[i], order[i + 1]) for i in range(0, n, 2)]
    else:
        assert all(b not in met[a] for a, b in tables)
    assert list(tables) == expected


def test_backtracking_avoids_a_rematch_greedy_pairing_would_force():
    # 4, 5 and 6 have all met: each needs a partner among 1, 2 and 3, so 1-2 and 1-3 leave
    # the rest impossible and 1 takes 4; then 2-3 would leave 5-6, so 2 takes 5.
    tally = tally_with_meetings(6, [(5, 6), (4, 6), (4, 5)])
    _, tables = swiss_two_sided([1, 2, 3, 4, 5, 6], tally)
    assert tables == ((1, 4), (2, 5), (3, 6))


def test_a_field_that_cannot_avoid_rematches_is_paired_in_standing_order():
    # Four entrants who have all met: rematches are allowed, top with next.
    tally = tally_with_meetings(4, list(combinations(range(1, 5), 2)))
    assert swiss_two_sided([1, 2, 3, 4], tally) == ((), ((1, 2), (3, 4)))


def test_large_field_late_round_is_paired_without_rematches():
    # 400 entrants who have each met 30 others: the tail needs the exact search.
    rng = random.Random(7)
    n = 400
    order = list(range(1, n + 1))
    meetings: set[tuple[int, int]] = set()
    for _ in range(30):
        shuffled = order[:]
        rng.shuffle(shuffled)
        for i in range(0, n, 2):
            a, b = sorted(shuffled[i : i + 2])
            meetings.add((a, b))
    tally = tally_with_meetings(n, sorted(meetings))
    _, tables = swiss_two_sided(order, tally)
    assert sorted(e for t in tables for e in t) == order
    assert all(b not in tally.opponents[a] for a, b in tables)


def play_swiss(
    settings_: Settings, n: int, withdrawals: dict[int, int], seed: int
) -> list[tuple[Tally, object]]:
    """Every round of a Swiss tournament with random scores, returning each round's tally
    before it and its pairing."""
    rng = random.Random(seed)
    seeding = list(range(1, n + 1))
    rng.shuffle(seeding)
    withdrawn_after = tuple([None] + [withdrawals.get(e) for e in range(1, n + 1)])
    tally = Tally.start(seeding)
    rounds = []
    assert settings_.rounds is not None
    for r in range(1, settings_.rounds + 1):
        pairing = pair_round(settings_, seeding, withdrawn_after, tally, r)
        rounds.append((tally, pairing))
        for b in pairing.byes:
            tally = tally.with_bye(b)
        for t in pairing.tables:
            scores = tuple(rng.randint(0, 17) for _ in t.sides)
            tally = tally.with_table(t.sides, score_result(TableResult("target", scores)))
    return rounds


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(min_value=3, max_value=21),
    seed=st.integers(min_value=0, max_value=2**32),
    withdrawer=st.integers(min_value=1, max_value=21),
    after=st.integers(min_value=0, max_value=4),
)
def test_swiss_seats_every_active_entrant_once_and_gives_the_bye_to_the_lowest_without_one(
    n, seed, withdrawer, after
):
    rounds_n = min(5, n - 1)
    withdrawals = {withdrawer: after} if withdrawer <= n else {}
    plays = play_swiss(Settings("swiss", 2, rounds=rounds_n), n, withdrawals, seed)
    for r, (tally, pairing) in enumerate(plays, start=1):
        active_ = [e for e in range(1, n + 1) if withdrawals.get(e, r) >= r]
        seated = [e for t in pairing.tables for e in t.sides] + list(pairing.byes)
        assert sorted(seated) == active_
        assert len(pairing.byes) == len(active_) % 2
        if pairing.byes:
            order = tally.order(active_)
            without = [e for e in order if tally.byes[e] == 0]
            assert pairing.byes[0] == (without[-1] if without else order[-1])
        assert [t.table for t in pairing.tables] == list(range(1, len(pairing.tables) + 1))
        for t in pairing.tables:
            a, b = t.sides
            fa, fb = tally.first_sides[a], tally.first_sides[b]
            order = tally.order(active_)
            assert fa < fb or (fa == fb and order.index(a) < order.index(b))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(min_value=4, max_value=14), seed=st.integers(min_value=0, max_value=2**32))
def test_swiss_never_rematches_while_the_field_is_large_enough(n, seed):
    # With more than twice as many entrants as rounds, a pairing without rematches exists.
    rounds_n = max(1, (n - 1) // 2)
    plays = play_swiss(Settings("swiss", 2, rounds=rounds_n), n, {}, seed)
    for tally, pairing in plays:
        for t in pairing.tables:
            a, b = t.sides
            assert b not in tally.opponents[a]


@pytest.mark.parametrize("n", range(2, 13))
def test_round_robin_meets_everyone_exactly_once(n):
    m = n + n % 2
    pairs: Counter[frozenset[int]] = Counter()
    for r in range(1, m):
        byes, tables = round_robin_round(n, r)
        seated = [e for t in tables for e in t] + list(byes)
        assert sorted(seated) == list(range(1, n + 1))
        assert len(byes) == n % 2
        pairs.update(frozenset(t) for t in tables)
    assert set(pairs) == {frozenset(p) for p in combinations(range(1, n + 1), 2)}
    assert set(pairs.values()) == {1}


@pytest.mark.parametrize("n", range(2, 13))
def test_double_round_robin_repeats_every_round_with_the_sides_swapped(n):
    single = n + n % 2 - 1
    for r in range(1, single + 1):
        byes, tables = round_robin_round(n, r)
        back_byes, back_tables = round_robin_round(n, r + single)
        assert back_byes == byes
        assert back_tables == tuple((b, a) for a, b in tables)
    with pytest.raises(InvalidArgument):
        round_robin_round(n, 2 * single + 1)


@pytest.mark.parametrize("n", range(2, 13))
def test_round_robin_sides_alternate_by_round_parity(n):
    firsts = Counter()
    for r in range(1, n + n % 2):
        _, tables = round_robin_round(n, r)
        for a, b in tables:
            assert (a < b) == (r % 2 == 1)
            firsts[a] += 1
    assert sum(firsts.values()) == n * (n - 1) // 2


def test_round_robin_tables_of_a_withdrawn_entrant_are_listed_as_its_forfeits():
    seeding = [3, 1, 4, 2]
    withdrawn_after = (None, None, 1, None, None)  # entrant 2 withdraws after round 1
    s = Settings("round_robin", 2)
    tally = Tally.start(seeding)
    first = pair_round(s, seeding, withdrawn_after, tally, 1)
    assert all(t.played for t in first.tables)
    second = pair_round(s, seeding, withdrawn_after, tally, 2)
    assert len(second.tables) == 2
    gone = [t for t in second.tables if not t.played]
    assert len(gone) == 1
    assert gone[0].sides[gone[0].withdrawn[0]] == 2


@pytest.mark.parametrize(
    ("n", "seats", "sizes"),
    [(10, 4, (4, 3, 3)), (5, 4, (3, 2)), (2, 3, (2,)), (7, 3, (3, 2, 2)), (12, 4, (4, 4, 4))],
)
def test_multi_sided_table_sizes(n, seats, sizes):
    assert table_sizes(n, seats) == sizes


def test_a_lone_entrant_at_multi_sided_tables_has_a_bye():
    tally = Tally.start([1])
    assert swiss_multi_sided([1], tally, 4) == ((1,), ())


def test_multi_sided_tables_fill_by_fewest_meetings_then_rank():
    # 1 has met 2 twice and 3 once; 4 never. Table 1: 1, then 4 (0 meetings), then 3 or 5.
    tally = tally_with_meetings(8, [(1, 2), (1, 2), (1, 3), (4, 5)])
    _, tables = swiss_multi_sided(list(range(1, 9)), tally, 4)
    # After 1 and 4: meetings 2 -> 2, 3 -> 1, 5 -> 1, 6 -> 0: 6 joins; then 7.
    assert tables == ((1, 4, 6, 7), (2, 3, 5, 8))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(min_value=2, max_value=23), seed=st.integers(min_value=0, max_value=2**32))
def test_multi_sided_seats_everyone_once(n, seed):
    plays = play_swiss(Settings("swiss", 4, rounds=4), n, {}, seed)
    for _, pairing in plays:
        seated = [e for t in pairing.tables for e in t.sides]
        assert sorted(seated) == list(range(1, n + 1))
        sizes = [len(t.sides) for t in pairing.tables]
        assert sizes == list(table_sizes(n, 4))


def test_partnership_sides_take_seats_0_2_and_1_3():
    s = Settings("swiss", 4, partnerships=True, rounds=3)
    assert seats_of(s, (7, 9)) == ((7, 0), (9, 0), (7, 1), (9, 1))
    assert seats_of(Settings("swiss", 3, rounds=3), (5, 2, 8)) == ((5, 0), (2, 0), (8, 0))
