"""Ratings (RATINGS.md) against its binding test vectors (test-vectors/ratings.json): every
player's mu and sigma within 1e-9 after each match, the rating shown and the provisional
flag, the places from the scores, a newcomer's sigma over 30 matches; and the leaderboard's
order and the refusals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bergen.domain.errors import InvalidArgument
from bergen.domain.ratings import (
    NEWCOMER,
    RatedMatch,
    Rating,
    leaderboard,
    pool_of,
    rate,
    rated_table,
    recompute,
)
from bergen.domain.tournament_standings import TableResult, score_result

# A copy of ../shared/test-vectors/ratings.json, so that a fresh clone alone runs these tests.
VECTORS_PATH = Path(__file__).with_name("vectors") / "ratings.json"
SHARED = Path(__file__).resolve().parents[3] / "shared" / "test-vectors" / "ratings.json"
VECTORS: dict[str, Any] = json.loads(VECTORS_PATH.read_text(encoding="utf-8"))
SETS = {"by_hand": VECTORS["by_hand"], "generated": VECTORS["generated"]["matches"]}


@pytest.mark.skipif(not SHARED.exists(), reason="no ../shared beside this clone")
def test_the_copied_vectors_are_the_shared_ones() -> None:
    assert json.loads(SHARED.read_text(encoding="utf-8")) == VECTORS


def test_the_model_is_the_one_the_vectors_name() -> None:
    model = VECTORS["model"]
    assert (model["mu"], model["sigma"]) == (NEWCOMER.mu, NEWCOMER.sigma)
    assert (model["beta"], model["tau"], model["kappa"]) == (25 / 6, 25 / 300, 0.0001)


@pytest.mark.parametrize("name", list(SETS))
def test_every_rating_after_every_match_is_the_vectors(name: str) -> None:
    matches = SETS[name]
    assert len(matches) >= 10
    done: list[RatedMatch] = []
    for k, m in enumerate(matches):
        # The places follow from the scores as TOURNAMENT.md section 5 places sides.
        forfeited = m.get("forfeited_side")
        result = TableResult("forfeit" if forfeited is not None else "target",
                             tuple(m["scores"]), forfeited)  # fmt: skip
        assert list(score_result(result).places) == m["places"], k
        done.append(RatedMatch(m["pool"], tuple(map(tuple, m["sides"])), tuple(m["places"])))
        pools = recompute(done)
        for player, want in m["after"].items():
            got = pools[m["pool"]][player]
            assert got.mu == pytest.approx(want["mu"], abs=1e-9), (k, player)
            assert got.sigma == pytest.approx(want["sigma"], abs=1e-9), (k, player)
            assert (got.display, got.provisional) == (want["display"], want["provisional"])


def test_the_vectors_cover_every_pool_ties_and_forfeits() -> None:
    matches = [m for ms in SETS.values() for m in ms]
    assert {m["pool"] for m in matches} == {"2", "3", "4", "pairs"}
    assert any(len(set(m["places"])) < len(m["places"]) for m in matches)
    assert any(m.get("forfeited_side") is not None for m in matches)


def test_a_newcomers_sigma_over_alternating_two_seat_matches() -> None:
    series = VECTORS["sigma_after_alternating_two_seat_matches"]
    me = NEWCOMER
    for k, want in enumerate(series):
        # Against a newcomer each time, won and lost in turn.
        me = rate([[me], [NEWCOMER]], (1, 2) if k % 2 == 0 else (2, 1))[0][0]
        assert want["matches"] == me.matches == k + 1
        assert me.sigma == pytest.approx(want["sigma"], abs=1e-9), k
    provisional = [w["matches"] for w in series if w["sigma"] > 6.0]
    assert me.provisional is False and provisional  # about a dozen matches, then shown


def test_a_newcomer_shows_1500_and_is_provisional() -> None:
    assert (NEWCOMER.display, NEWCOMER.provisional) == (1500, True)


def test_the_leaderboard_leaves_out_the_provisional_and_breaks_ties_in_order() -> None:
    ratings = {
        "ann": Rating(30.0, 5.0, 20),  # 1800
        "bob": Rating(30.0, 4.0, 20),  # 1800, a higher mu - 3 sigma
        "cy": Rating(30.0, 4.0, 12),  # as bob, fewer matches
        "dee": Rating(30.0, 4.0, 12),  # as cy: by player id
        "eve": Rating(40.0, 6.5, 9),  # provisional
        "fay": Rating(20.0, 5.0, 30),  # 1200
    }
    assert leaderboard(ratings) == ["cy", "dee", "bob", "ann", "fay"]


def test_pools() -> None:
    assert [pool_of(2, False), pool_of(3, False), pool_of(4, False), pool_of(4, True)] == [
        "2",
        "3",
        "4",
        "pairs",
    ]
    with pytest.raises(InvalidArgument):
        pool_of(3, True)


@pytest.mark.parametrize(
    ("teams", "places"),
    [
        ([[NEWCOMER]], [1]),
        ([[NEWCOMER], []], [1, 2]),
        ([[NEWCOMER], [NEWCOMER]], [1]),
        ([[NEWCOMER], [NEWCOMER]], [0, 1]),
    ],
)
def test_a_match_that_cannot_be_rated_is_refused(teams: Any, places: Any) -> None:
    with pytest.raises(InvalidArgument):
        rate(teams, places)


def test_a_player_on_two_seats_or_an_unknown_pool_is_refused() -> None:
    with pytest.raises(InvalidArgument):
        recompute([RatedMatch("2", (("ann",), ("ann",)), (1, 2))])
    with pytest.raises(InvalidArgument):
        recompute([RatedMatch("5", (("ann",), ("bob",)), (1, 2))])


def test_a_rated_end_gives_its_pool_and_sides_from_its_holders_and_scores() -> None:
    # Twice: the second time from the tables made the first (a refusal is never kept).
    for _ in range(2):
        assert rated_table(["a", "b"], 2) == ("2", ((0,), (1,)))
        assert rated_table(["a", "b", "c"], 3) == ("3", ((0,), (1,), (2,)))
        assert rated_table(["a", "b", "c", "d"], 4) == ("4", ((0,), (1,), (2,), (3,)))
        assert rated_table(["a", "b", "c", "d"], 2) == ("pairs", ((0, 2), (1, 3)))
        for players, sides in (
            (["a"], 1), (["a", "b", "c"], 2), (["a", "a"], 2), (["a", ""], 2), (["a", "b"], 3),
        ):  # fmt: skip
            with pytest.raises(InvalidArgument):
                rated_table(players, sides)
