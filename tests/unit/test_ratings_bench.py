"""The ratings benchmark: its matches, its figures' verdicts, and its parts at a tiny size on
real PostgreSQL and real servers."""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

import pytest

# The benchmarks are not part of the installed package: import them from the checkout.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench import harness
from bench import ratings_bench as bench
from bench.harness import ExitStatus, Timing
from bench.store_bench import bench_database
from bergen.domain import codec
from bergen.domain.events import MatchEnded
from bergen.domain.ratings import RatedMatch, Rating, places_of, recompute
from bergen.server.keys import LogKeys


def test_the_matches_follow_from_their_seed_across_the_pools_with_ties_and_forfeits() -> None:
    made = bench.generate(600, 30, seed=5, at_once=10)
    assert made == bench.generate(600, 30, seed=5, at_once=10)
    assert made != bench.generate(600, 30, seed=6, at_once=10)
    pools = Counter(m.pool for m in made.matches)
    assert set(pools) == {"2", "3", "4", "pairs"} and pools["2"] > pools["3"]
    assert any(m.reason == "forfeit" for m in made.matches)
    assert any(m.reason == "target" and sorted(m.places)[:2] == [1, 1] for m in made.matches)
    for m in made.matches:
        assert len(set(m.seats)) == len(m.seats)  # no player on two seats
        assert m.places == places_of(m.reason, m.scores, m.forfeited_side)
    # Every event of every match once, each match's in order, the matches interleaved.
    assert len(made.steps) == sum(bench.event_count(m) for m in made.matches)
    assert sorted(made.steps) == sorted(set(made.steps))
    seen: dict[int, int] = {}
    for k, e in made.steps:
        assert seen.get(k, -1) == e - 1
        seen[k] = e
    first_ends = made.steps.index((0, len(made.matches[0].seats) + 1))
    assert any(k != 0 for k, _ in made.steps[:first_ends])
    # The ends in the order their MatchEnded is written.
    assert sorted(made.ends) == list(range(600))
    written = [k for k, e in made.steps if e == len(made.matches[k].seats) + 1]
    assert made.ends == written


def test_a_matchs_events_are_the_servers_with_its_players_and_its_end() -> None:
    made = bench.generate(60, 8, seed=1)
    kinds = {m.reason: m for m in made.matches}
    assert set(kinds) == {"target", "forfeit"}
    for m in kinds.values():
        events = bench.match_events(m, made.players)
        assert len(events) == bench.event_count(m)
        decoded = [codec.decode(*codec.encode(e)) for e in events]
        assert decoded == events
        assert [e.player for e in events[1:-2]] == [  # type: ignore[union-attr]
            made.players[p].player_id for p in m.seats
        ]
        end = events[-2]
        assert isinstance(end, MatchEnded)
        assert places_of(str(end.reason), end.scores, end.forfeited_side) == m.places


def times(wall: float, cpu: float) -> Timing:
    return Timing(wall, cpu)


def test_the_fold_lines_give_each_goal_its_verdict() -> None:
    parts = [bench.Stage(s, times(0.1, 0.05)) for s in bench.STAGE_NAMES]
    runs = {bench.FOLD: [times(10.0, 8.0)] * 3, bench.OPENSKILL: [times(8.0, 8.0)] * 3}
    lines = bench.fold_lines(60_000, runs, 1e-12, parts)
    assert [line.passed for line in lines[:4]] == [True, True, None, True]
    assert lines[0].ours == "6,000/s" and lines[1].ratio == pytest.approx(1.25)
    slow = {bench.FOLD: [times(30.0, 8.0), times(9.0, 8.0), times(31.0, 8.0)],
            bench.OPENSKILL: [times(8.0, 8.0)] * 3}  # fmt: skip
    lines = bench.fold_lines(60_000, slow, 2e-9, parts)
    assert [line.passed for line in lines[:4]] == [False, False, None, False]
    assert lines[0].ours == "2,000/s"  # the median round's, not the best
    assert lines[-1].ours == f"{(30.0 - 0.4) / 60_000 * 1e6:,.0f} µs"


def test_the_board_and_fresh_lines_give_each_goal_its_verdict() -> None:
    fast, slow = [1.0] * 99 + [2.0], [1.0] * 90 + [50.0] * 10
    rounds = {(who, kind): [fast, fast, slow] for who in (bench.OURS, bench.WORK, bench.ECHO,
              bench.SQL) for kind in (bench.FIRST, bench.DEEP)}  # fmt: skip
    lines = bench.board_lines(1000, 700, rounds)
    assert [line.passed for line in lines] == [None, None, True, None] * 2
    rounds[bench.OURS, bench.DEEP] = [slow, slow, fast]
    lines = bench.board_lines(1000, 700, rounds)
    assert lines[6].passed is False and "rank 701" in lines[6].measure
    tally = bench.Freshness(plays=[5.0] * 50, shown=[20.0] * 49 + [150.0], after_answer=[15.0] * 50,
                            visible=[1.0] * 50, polls=[1] * 50)  # fmt: skip
    lines = bench.fresh_lines(tally)
    assert [line.passed for line in lines[:2]] == [None, True]  # p99 of 50 is not the worst
    tally.shown[-5:] = [150.0] * 5
    assert bench.fresh_lines(tally)[1].passed is False


@pytest.mark.timeout(300)
def test_the_rebuild_gives_the_ratings_of_the_update_and_a_difference_is_found(
    pg_admin_url: str,
) -> None:
    """The fold part's rebuild and agreement check, against the domain's own update (the
    test tools install no openskill)."""
    made = bench.generate(150, 12, seed=3, at_once=8)
    ends = bench.reference_ends(made)
    keys = LogKeys.generate()
    theirs = recompute(RatedMatch(*end) for end in ends)
    with bench_database(pg_admin_url) as url:
        assert bench.seed_events(url, made, keys) == len(made.steps)
        for _ in range(2):  # a second rebuild starts again from nothing
            took = bench.rebuild(url, keys)
            assert took.wall > 0
            assert bench.disagreement(url, ends, theirs) < 1e-9  # type: ignore[arg-type]
        players = theirs["2"]
        player, rating = next(iter(players.items()))
        players[player] = Rating(rating.mu + 1e-6, rating.sigma, rating.matches)
        assert bench.disagreement(url, ends, theirs) > 9e-7  # type: ignore[arg-type]
        del players[player]
        with pytest.raises(RuntimeError, match="rated"):
            bench.disagreement(url, ends, theirs)  # type: ignore[arg-type]
        names = [s.name for s in bench.stages(url, keys, ends)]
        assert names == list(bench.STAGE_NAMES)


def test_the_bare_loop_agrees_with_the_update() -> None:
    pytest.importorskip("openskill")
    made = bench.generate(120, 10, seed=4)
    ends = bench.reference_ends(made)
    ours = recompute(RatedMatch(*end) for end in ends)
    _, theirs = bench.reference(ends)
    for pool, ratings in ours.items():
        assert theirs[pool].keys() == ratings.keys()
        for p, r in ratings.items():
            assert abs(theirs[pool][p].mu - r.mu) < 1e-9
            assert abs(theirs[pool][p].sigma - r.sigma) < 1e-9


@pytest.mark.timeout(300)
def test_a_quick_run_prints_every_figure_with_its_verdict(
    pg_admin_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(harness.QUICK_ENV, "1")
    parts = ["board", "fresh"]
    try:
        import openskill  # noqa: F401

        parts.insert(0, "fold")
    except ImportError:
        pass  # the fold's reference is a benchmark's package, not a test tool
    assert bench.main(["--database-url", pg_admin_url, "--parts", *parts]) == ExitStatus.OK
    out = capsys.readouterr().out
    verdict = r"(PASS|MISSED)"
    for kind, rank in (("first page", "1"), ("deep page", "301")):
        found = re.search(
            rf"ListLeaderboard {kind} \(from rank {rank}\) of 500 players, p99\s+([\d.]+) ms"
            rf"\s+echo ([\d.]+); SQL [\d.]+\s+([\d.]+)\s+< 10 ms\s+{verdict}",
            out,
        )
        assert found, out
        assert (float(found[1]) < 10) == (found[4] == "PASS")
    found = re.search(
        r"last Play sent to its rating in GetPlayer, p99\s+([\d.]+) ms\s+Play round trip [\d.]+ ms"
        rf".*< 100 ms\s+{verdict}",
        out,
    )
    assert found, out
    assert (float(found[1]) < 100) == (found[2] == "PASS")
    if "fold" in parts:
        assert re.search(rf"rebuild of 300 rated matches, matches/s .*>= 5,000/s\s+{verdict}", out)
        assert re.search(r"largest difference in mu or sigma.*<= 1e-09\s+PASS", out), out
    assert re.search(r"goals: \d+ of \d+ passed", out)
