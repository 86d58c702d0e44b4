"""Strength: a round robin of the bots at an equal time per decision.

Every pairing of random, greedy, Monte Carlo and ISMCTS plays two-seat matches (seats
alternate every match), and the three strongest (greedy, Monte Carlo, ISMCTS) play
three-seat matches (their seats rotate through all six orders). Standard preset, matches
played in process through `engine.execute`, each seat deciding from the fold of its own
redacted stream (`redact_event`, as the server sends it) with the decision functions the
bots use (`deciders.decider`). The searching policies (Monte Carlo, ISMCTS) are given the
same wall time per decision (`--time`, default 0.3 s); random and greedy answer at once.
Since the policies think for a time, a run depends on the machine and its load: run it on
a quiet machine, with no more workers than idle cores.

Reported: each pairing's win rate of its first policy over the matches with a winner, with
its 95% Wilson interval; in three seats, each policy's share of the wins. Goal: ISMCTS
beats Monte Carlo at two seats with the interval's lower end above 55%. A missed goal
prints MISSED; it does not fail the run.

`python -m bench strength` runs it in full (1,000 two-seat matches a pairing, 300
three-seat matches, 0.3 s a decision: hours of machine time); `python -m bench.strength_bench
--matches 200 --three 0 --time 0.05 --pairing ismcts-montecarlo` runs a part of it.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import os
import random
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

from bench import harness
from bench.bots_bench import wilson
from bench.harness import ExitStatus
from bergen.domain import CreateMatch, HandEnded, Play, TakeSeat, execute, make_rules
from bergen.domain.deciders import SEARCHING, decider
from bergen.domain.montecarlo import Knowledge, Settings, learn
from bergen.domain.state import ENDED
from bergen.domain.views import redact_event

ORDER = ("ismcts", "montecarlo", "greedy", "random")
"""The policies, the strongest first: a pairing's first policy is the stronger one."""
THREE = ("ismcts", "montecarlo", "greedy")
"""The three strongest, for the three-seat matches."""
DEFAULT_MATCHES = 1000
DEFAULT_THREE = 300
DEFAULT_TIME_S = 0.3
GOAL_PAIRING = ("ismcts", "montecarlo")
GOAL_RATE = 0.55
MAX_PLAYS = 10_000


@dataclass(frozen=True)
class MatchResult:
    names: tuple[str, ...]
    winner: str | None
    hands: int
    thinking: tuple[tuple[str, float], ...]
    """(policy, wall seconds) of each searching decision with a choice."""


def play_one(job: tuple[tuple[str, ...], int, float, str]) -> MatchResult:
    """One match between `names` (one a seat, in seat order)."""
    names, index, time_s, seed = job
    seats = len(names)
    digest = hashlib.sha256(
        f"bergen-strength-bench|{seed}|{'|'.join(names)}|{index}".encode()
    ).digest()
    rng = random.Random(digest)
    settings = Settings(samples=None, budget_s=time_s, min_samples=1)
    deciders = [decider(n, settings) for n in names]
    rules = make_rules(seats, False, "standard")
    knowledge = [Knowledge(s, None) for s in range(seats)]
    thinking: list[tuple[str, float]] = []

    def see(events: Sequence[object]) -> None:
        for e in events:
            for s in range(seats):
                knowledge[s] = learn(knowledge[s], redact_event(e, s))  # type: ignore[arg-type]

    new, state = execute(
        None, CreateMatch(f"strength-{index}", seats, False, rules, digest, "strength bench")
    )
    see(new)
    for s in range(seats):
        new, state = execute(state, TakeSeat(name=names[s], client_seed=str(s), seat=s))
        see(new)
    hands = 0
    for _ in range(MAX_PLAYS):
        if state.phase == ENDED:
            break
        seat = state.turn
        assert seat is not None
        k = knowledge[seat]
        choice = len(state.legal_plays(seat)) > 1
        before = time.perf_counter()
        tile, end = deciders[seat](k, rng)
        if choice and names[seat] in SEARCHING:
            thinking.append((names[seat], time.perf_counter() - before))
        new, state = execute(state, Play(seat=seat, tile=tile, end=end))
        hands += sum(isinstance(e, HandEnded) for e in new)
        see(new)
    assert state.result is not None
    w = state.result.winner_side
    return MatchResult(names, None if w is None else names[w], hands, tuple(thinking))


@dataclass
class Tally:
    """Wins by policy over `matches` matches, `decided` of them with a winner."""

    matches: int = 0
    decided: int = 0
    hands: int = 0
    wins: dict[str, int] = field(default_factory=dict)
    thinking: dict[str, list[float]] = field(default_factory=dict)
    seconds: float = 0.0

    def add(self, r: MatchResult) -> None:
        self.matches += 1
        self.hands += r.hands
        if r.winner is not None:
            self.decided += 1
            self.wins[r.winner] = self.wins.get(r.winner, 0) + 1
        for name, s in r.thinking:
            self.thinking.setdefault(name, []).append(s)


def play_all(jobs: list[tuple[tuple[str, ...], int, float, str]], workers: int) -> Tally:
    start = time.perf_counter()
    out = Tally()
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for r in pool.map(play_one, jobs, chunksize=1):
            out.add(r)
            if sys.stdout.isatty() and out.matches % 10 == 0:
                print(f"  {out.matches}/{len(jobs)}", end="\r", flush=True)
    out.seconds = time.perf_counter() - start
    return out


def two_seat_jobs(
    a: str, b: str, matches: int, time_s: float, seed: str
) -> list[tuple[tuple[str, ...], int, float, str]]:
    """`a` against `b`, `a` in seat `index % 2`."""
    return [((a, b) if i % 2 == 0 else (b, a), i, time_s, seed) for i in range(matches)]


def three_seat_jobs(
    names: Sequence[str], matches: int, time_s: float, seed: str
) -> list[tuple[tuple[str, ...], int, float, str]]:
    """The three policies in the six seat orders in turn."""
    orders = list(itertools.permutations(names))
    return [(orders[i % len(orders)], i, time_s, seed) for i in range(matches)]


def rate_line(name: str, wins: int, decided: int) -> tuple[str, float]:
    """`name won w of n = p%, 95% Wilson [lo, hi]`, and the interval's lower end."""
    low, high = wilson(wins, decided)
    rate = wins / decided if decided else 0.0
    return (
        f"{name} won {wins} of {decided} = {rate:.1%}, 95% Wilson [{low:.1%}, {high:.1%}]",
        low,
    )


def thinking_lines(t: Tally) -> list[str]:
    lines = []
    for name, times in sorted(t.thinking.items()):
        lines.append(
            f"  {name} wall time per decision ({len(times)} decisions with a choice): "
            f"mean {sum(times) / len(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench strength", description=__doc__)
    parser.add_argument(
        "--matches",
        type=int,
        default=harness.quick_or(DEFAULT_MATCHES, 4),
        help="two-seat matches a pairing (0: none)",
    )
    parser.add_argument(
        "--three",
        type=int,
        default=harness.quick_or(DEFAULT_THREE, 6),
        help="three-seat matches of the three strongest (0: none)",
    )
    parser.add_argument(
        "--time",
        type=float,
        default=harness.quick_or(DEFAULT_TIME_S, 0.02),
        metavar="SECONDS",
        help="wall time per decision of the searching policies",
    )
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--seed", default="strength")
    pairings = list(itertools.combinations(ORDER, 2))
    parser.add_argument(
        "--pairing",
        choices=[f"{a}-{b}" for a, b in pairings],
        action="append",
        help="play only these two-seat pairings (default: all six)",
    )
    args = parser.parse_args(argv)
    wanted = [p for p in pairings if args.pairing is None or f"{p[0]}-{p[1]}" in args.pairing]
    if args.matches <= 0:
        wanted = []
    print(
        f"standard preset; {args.matches} two-seat matches a pairing (seats alternate), "
        f"{args.three} three-seat matches of {', '.join(THREE)} (all six seat orders); "
        f"{args.time:g} s of wall time per decision for {' and '.join(SEARCHING)}; "
        f"{args.workers} worker process(es), seed {args.seed!r}; "
        f"load average at the start {os.getloadavg()[0]:.2f}"
    )
    total = time.perf_counter()
    goal_low: float | None = None
    for a, b in wanted:
        t = play_all(two_seat_jobs(a, b, args.matches, args.time, args.seed), args.workers)
        line, low = rate_line(a, t.wins.get(a, 0), t.decided)
        print(f"{a} vs {b}: {line}; {t.hands} hands; {t.seconds:.0f} s")
        for x in thinking_lines(t):
            print(x)
        if (a, b) == GOAL_PAIRING:
            goal_low = low
    if args.three > 0:
        t = play_all(three_seat_jobs(THREE, args.three, args.time, args.seed), args.workers)
        print(
            f"three seats, {t.matches} matches, {t.decided} with a winner; {t.hands} hands; "
            f"{t.seconds:.0f} s"
        )
        for name in THREE:
            line, _ = rate_line(name, t.wins.get(name, 0), t.decided)
            print(f"  {line}")
        for x in thinking_lines(t):
            print(x)
    a, b = GOAL_PAIRING
    if goal_low is not None:
        print(
            f"goal: {a} beats {b} at two seats with the interval's lower end above "
            f"{GOAL_RATE:.0%}: {harness.verdict(goal_low > GOAL_RATE, 'met')}"
        )
    print(
        f"load average at the end {os.getloadavg()[0]:.2f}; "
        f"total {time.perf_counter() - total:.0f} s"
    )
    return ExitStatus.OK


if __name__ == "__main__":
    sys.exit(main())
