"""The analysis of a finished match: how long it takes, and how well its win model is
calibrated.

- **match**: `--matches` (3) two-seat matches simulated from a seed (greedy against random),
  each analysed as `bergen-replay --analyse` does at the default budget (every decision
  judged, every hand's open-hands par, on every core: `cli_client.analysis.analyse_match`).
  Reported: the wall time of each and its median, and the CPU time it used beside it (its
  worker processes' included). Goal:
  under 20 s of wall time a match.
- **calibration**: the win model (`domain.analysis.WinModel`, fitted on 1,000 simulated hands
  from its own seed) against a model from the score difference alone (a logistic curve of
  the difference, fitted on the training matches), on held-out positions: the scores at the
  start of every hand of `--held-out` (400) simulated two-seat matches (greedy for both seats,
  seeds of their own) and whether side 0 went on to win. Reported: each model's Brier score
  (the mean squared error of the chance given; lower is better), and the win model's
  reliability table (the positions by the chance it gave, in tenths: the chance given and the
  share won). Goal: the win model's Brier score below the score-difference model's.

`python -m bench analysis` runs both; `python -m bench.analysis_bench --parts calibration`
one.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import random
import resource
import statistics
import sys
from collections.abc import Sequence
from time import perf_counter, process_time

from bench import harness
from bench.harness import Column, ExitStatus, Line, Row, Table
from bergen.cli_client.analysis import DEFAULT_BUDGET_S, analyse_match
from bergen.domain import make_rules
from bergen.domain.analysis import WinModel
from bergen.domain.events import Dealt, Event, MatchEnded, PointsScored
from bergen.domain.policies import greedy_policy, random_policy
from bergen.domain.simulation import play_match

GOAL_MATCH_S = 20.0
TWO = make_rules(2, False)


def simulated(seed: str, policies: Sequence[object]) -> list[Event]:
    digest = hashlib.sha256(f"analysis-bench|{seed}".encode()).digest()
    events, _ = play_match(
        f"bench-{seed}", TWO, 2, False, digest, list(policies),  # type: ignore[arg-type]
        random.Random(digest),
    )  # fmt: skip
    return events


def run_match(matches: int) -> list[Line]:
    harness.say(f"match: {matches} two-seat matches analysed at the default budget")
    wall: list[float] = []
    cpu: list[float] = []
    for i in range(matches):
        events = simulated(f"match-{i}", [greedy_policy, random_policy])
        started, started_cpu = perf_counter(), _cpu()
        analysed = analyse_match(events, "0", DEFAULT_BUDGET_S)
        wall.append(perf_counter() - started)
        cpu.append(_cpu() - started_cpu)
        harness.say(
            f"  match {i + 1}: {len(analysed.analysis.decisions)} decisions, "
            f"{analysed.worlds} worlds each, {wall[-1]:.1f} s"
        )
    middle = statistics.median(wall)
    return [
        Line(
            "a two-seat match analysed (default budget), wall, median",
            f"{middle:.1f} s",
            f"slowest {max(wall):.1f} s; CPU (all processes) {statistics.median(cpu):.1f} s",
            goal=f"< {GOAL_MATCH_S:g} s",
            passed=middle < GOAL_MATCH_S,
        )
    ]


def _cpu() -> float:
    """CPU seconds of this process and of its children that ended (the analysis's workers)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return process_time() + children.ru_utime + children.ru_stime


Position = tuple[int, int, int]
"""A hand's start: side 0's score, side 1's, and 1 when side 0 won the match (else 0)."""


def positions(events: Sequence[Event]) -> list[Position]:
    """The scores at the start of each hand of a whole match, and who won it."""
    scores = [0, 0]
    starts: list[tuple[int, int]] = []
    winner = None
    for e in events:
        if isinstance(e, Dealt) and e.attempt == 1:
            starts.append((scores[0], scores[1]))
        elif isinstance(e, PointsScored):
            scores[e.side] += e.points
        elif isinstance(e, MatchEnded):
            winner = e.winner_side
    assert winner is not None
    return [(a, b, 1 if winner == 0 else 0) for a, b in starts]


def logistic_fit(rows: Sequence[Position]) -> tuple[float, float]:
    """The logistic curve of side 0's chance from the score difference, P = 1 / (1 +
    exp(-(a + b d))), fitted by Newton's method on `rows`."""
    a = b = 0.0
    for _ in range(50):
        ga = gb = haa = hab = hbb = 0.0
        for s0, s1, won in rows:
            d = s0 - s1
            p = 1.0 / (1.0 + math.exp(-(a + b * d)))
            ga += won - p
            gb += (won - p) * d
            w = p * (1 - p)
            haa += w
            hab += w * d
            hbb += w * d * d
        det = haa * hbb - hab * hab
        if det <= 1e-12:
            break
        a += (hbb * ga - hab * gb) / det
        b += (haa * gb - hab * ga) / det
    return a, b


def run_calibration(held_out: int) -> tuple[list[Line], list[Row]]:
    harness.say(f"calibration: the win model against the score difference, {held_out} matches")
    both = [greedy_policy, greedy_policy]
    training = [p for i in range(held_out) for p in positions(simulated(f"train-{i}", both))]
    testing = [p for i in range(held_out) for p in positions(simulated(f"test-{i}", both))]
    a, b = logistic_fit(training)
    model = WinModel.fitted(TWO, 2, False, seed="calibration")
    ours = [model.chances([s0, s1])[0] for s0, s1, _ in testing]
    theirs = [1.0 / (1.0 + math.exp(-(a + b * (s0 - s1)))) for s0, s1, _ in testing]
    won = [w for *_, w in testing]
    brier = statistics.fmean((p - w) ** 2 for p, w in zip(ours, won, strict=True))
    brier_diff = statistics.fmean((p - w) ** 2 for p, w in zip(theirs, won, strict=True))
    lines = [
        Line(
            f"the win model's Brier score, {len(testing)} held-out positions",
            f"{brier:.4f}",
            f"score difference alone: {brier_diff:.4f}",
            goal="below the reference",
            passed=brier < brier_diff,
        )
    ]
    table: list[Row] = []
    for tenth in range(10):
        low, high = tenth / 10, (tenth + 1) / 10
        bucket = [
            (p, w)
            for p, w in zip(ours, won, strict=True)
            if low <= p < high or (tenth == 9 and p == 1.0)
        ]
        if bucket:
            given = statistics.fmean(p for p, _ in bucket)
            share = statistics.fmean(w for _, w in bucket)
            table.append(
                Row((f"{low:.1f} to {high:.1f}", str(len(bucket)), f"{given:.3f}", f"{share:.3f}"))
            )
    return lines, table


LINES = harness.SERVICE_TABLE
RELIABILITY = Table(
    (
        Column("chance given", align="<"),
        Column("positions"),
        Column("mean given"),
        Column("share won"),
    ),
    gap="  ",
    verdicts=False,
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.analysis_bench")
    parser.add_argument(
        "--parts", nargs="+", choices=("match", "calibration"), default=["match", "calibration"]
    )
    parser.add_argument("--matches", type=int, default=harness.quick_or(3, 1))
    parser.add_argument("--held-out", type=int, default=harness.quick_or(400, 40))
    args = parser.parse_args(argv)
    lines: list[Line] = []
    reliability: list[Row] = []
    if "match" in args.parts:
        lines += run_match(args.matches)
    if "calibration" in args.parts:
        found, reliability = run_calibration(args.held_out)
        lines += found
    LINES.print(lines)
    if reliability:
        RELIABILITY.print(reliability, "the win model's reliability on the held-out positions:")
    print(harness.goals_line(lines))
    sys.stdout.flush()
    return ExitStatus.OK


if __name__ == "__main__":
    sys.exit(main())
