"""Strength of the bots: Monte Carlo against greedy, and greedy against random.

Two seats, standard preset, matches played in process through `engine.execute`, each seat
deciding from the fold of its own redacted stream (`redact_event`, as the server sends it)
with the same decision functions the gRPC bots use (`montecarlo.decider`). Seats alternate
every match. The Monte Carlo bot samples a fixed number of worlds per decision (not a time
budget), so a run is reproducible from its seed whatever the machine; matches are spread
over worker processes.

Reported: the first policy's win rate with its 95% Wilson interval, and the Monte Carlo
time per decision (decisions with more than one legal play; a single legal play is
answered at once), as CPU time (what the decision costs) and wall time (which other load
on the machine inflates). Goal: Monte Carlo beats greedy with the whole interval above 55%, at
under one second per decision. A missed goal prints MISSED; it does not fail the run.

`python -m bench bots` runs it in full; `python -m bench.bots_bench --matches 200` runs
fewer (`--samples`, `--workers`, `--seed`, `--pairing` too).
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import random
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

from bench import harness
from bench.harness import ExitStatus
from bergen.domain import CreateMatch, HandEnded, Play, TakeSeat, execute, make_rules
from bergen.domain.deciders import decider
from bergen.domain.montecarlo import Knowledge, Settings, decide_play, learn
from bergen.domain.state import ENDED
from bergen.domain.views import redact_event

PAIRINGS = (("montecarlo", "greedy"), ("greedy", "random"))
DEFAULT_MATCHES = 1000
DEFAULT_SAMPLES = 30
GOAL_RATE = 0.55
GOAL_DECISION_S = 1.0
Z95 = 1.959964
MAX_PLAYS = 10_000


def wilson(wins: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion (95% by default)."""
    if n == 0:
        return 0.0, 1.0
    p = wins / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return centre - half, centre + half


@dataclass(frozen=True)
class MatchResult:
    winner: str | None
    hands: int
    decision_seconds: tuple[float, ...]
    """Wall time of the Monte Carlo decisions that had a choice."""
    decision_cpu: tuple[float, ...]
    """Their CPU time (the worker's own, unaffected by other load on the machine)."""


def play_one(job: tuple[str, str, int, int, str]) -> MatchResult:
    """One match: policy `a` against `b`, `a` in seat `index % 2`."""
    a, b, index, samples, seed = job
    names = [a, b] if index % 2 == 0 else [b, a]
    digest = hashlib.sha256(f"bergen-bots-bench|{seed}|{a}|{b}|{index}".encode()).digest()
    rng = random.Random(digest)
    settings = Settings(samples=samples, budget_s=math.inf, min_samples=1)
    deciders = [decider(n, settings) for n in names]
    rules = make_rules(2, False, "standard")
    knowledge = [Knowledge(0, None), Knowledge(1, None)]
    times: list[float] = []
    cpu: list[float] = []

    def see(events: Sequence[object]) -> None:
        for e in events:
            for seat in (0, 1):
                knowledge[seat] = learn(knowledge[seat], redact_event(e, seat))  # type: ignore[arg-type]

    new, state = execute(None, CreateMatch(f"bench-{index}", 2, False, rules, digest, "bots bench"))
    see(new)
    for seat in (0, 1):
        new, state = execute(state, TakeSeat(name=names[seat], client_seed=str(seat), seat=seat))
        see(new)
    hands = 0
    for _ in range(MAX_PLAYS):
        if state.phase == ENDED:
            break
        turn = state.turn
        assert turn is not None
        k = knowledge[turn]
        if names[turn] == "montecarlo":
            before = time.process_time()
            d = decide_play(k, rng, settings)
            tile, end = d.tile, d.end
            if d.samples:
                times.append(d.seconds)
                cpu.append(time.process_time() - before)
        else:
            tile, end = deciders[turn](k, rng)
        new, state = execute(state, Play(seat=turn, tile=tile, end=end))
        hands += sum(isinstance(e, HandEnded) for e in new)
        see(new)
    assert state.result is not None
    w = state.result.winner_side
    return MatchResult(None if w is None else names[w], hands, tuple(times), tuple(cpu))


@dataclass
class Pairing:
    wins: int = 0
    decided: int = 0
    hands: int = 0
    seconds: float = 0.0
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


def run_pairing(a: str, b: str, matches: int, samples: int, workers: int, seed: str) -> Pairing:
    """Play `matches` matches of `a` against `b`; `wins` are a's."""
    start = time.perf_counter()
    jobs = [(a, b, i, samples, seed) for i in range(matches)]
    out = Pairing()
    done = 0
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for r in pool.map(play_one, jobs, chunksize=4):
            done += 1
            out.hands += r.hands
            out.wall.extend(r.decision_seconds)
            out.cpu.extend(r.decision_cpu)
            if r.winner is not None:
                out.decided += 1
                out.wins += r.winner == a
            if sys.stdout.isatty() and done % 50 == 0:
                print(f"  {a} vs {b}: {done}/{matches}", end="\r", flush=True)
    out.seconds = time.perf_counter() - start
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench bots", description=__doc__)
    parser.add_argument("--matches", type=int, default=harness.quick_or(DEFAULT_MATCHES, 8))
    parser.add_argument(
        "--samples",
        type=int,
        default=harness.quick_or(DEFAULT_SAMPLES, 4),
        help="MC worlds per decision",
    )
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--seed", default="bench")
    parser.add_argument("--pairing", choices=[f"{a}-{b}" for a, b in PAIRINGS], action="append")
    args = parser.parse_args(argv)
    wanted = [p for p in PAIRINGS if args.pairing is None or f"{p[0]}-{p[1]}" in args.pairing]
    print(
        f"2 seats, standard preset, {args.matches} matches per pairing, seats alternate; "
        f"montecarlo: {args.samples} worlds per decision, playouts greedy to the hand's end; "
        f"{args.workers} worker process(es), seed {args.seed!r}"
    )
    total = time.perf_counter()
    for a, b in wanted:
        r = run_pairing(a, b, args.matches, args.samples, args.workers, args.seed)
        low, high = wilson(r.wins, r.decided)
        rate = r.wins / r.decided if r.decided else 0.0
        print(
            f"{a} vs {b}: {a} won {r.wins} of {r.decided} = {rate:.1%}, "
            f"95% Wilson [{low:.1%}, {high:.1%}]; {r.hands} hands; {r.seconds:.0f} s"
        )
        for what, times in (("CPU", r.cpu), ("wall", r.wall)):
            if times:
                print(
                    f"  montecarlo {what} time per decision ({len(times)} decisions with a "
                    f"choice): mean {sum(times) / len(times) * 1000:.0f} ms, "
                    f"max {max(times) * 1000:.0f} ms"
                )
        if a == "montecarlo" and b == "greedy":
            met = low > GOAL_RATE and (not r.cpu or max(r.cpu) < GOAL_DECISION_S)
            print(
                f"  goal: interval above {GOAL_RATE:.0%} at under {GOAL_DECISION_S:.0f} s "
                f"per decision: {harness.verdict(met, 'met')}"
            )
    print(f"total {time.perf_counter() - total:.0f} s")
    return ExitStatus.OK


if __name__ == "__main__":
    sys.exit(main())
