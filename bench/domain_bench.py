"""The rules engine's benchmark: moves per second against the peer `dominoes` package,
folding a recorded match, whole random matches per second, and the Monte Carlo policy's
worlds per decision.

Random moves are measured on two paths of ours, both creating and seating each match
through `execute` (its first deal included) and recording every event:

- "one Board" (the goal): the match played out on one `fastplay.Board`, the rules core of a
  simulation: `board.play(seat, *choice(board.legal_plays(seat)))` until it ends, the
  events the engine's own, in its order, without a State between moves;
- "per command" (reported beside it, no goal): each move one `execute(state, Play(...))`,
  as the server decides a client's play, a new immutable State per command.

Every figure is measured in this one run, on this machine, with seeded generators, so the
moves played are the same from run to run; only the time varies. Moves per second are
measured as whole games played for a fixed wall-time budget, both engines alike, in rounds
that alternate between them (so that drift in the machine's speed falls on both), and the
median round is reported. Each round is timed twice: by the wall clock and by the process's
CPU time. The goals are judged on CPU time, which is what the engines cost: on a shared
machine the wall clock also counts the time other processes took the core (both are
printed; on an idle machine they agree).

A missed goal is printed as MISSED; it does not fail the run (`main` returns 0 unless the
benchmark itself breaks).
"""

from __future__ import annotations

import math
import os
import platform
import random
import statistics
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from time import perf_counter, process_time
from typing import Protocol

from bench import harness
from bench.harness import Column, ExitStatus, Row, Stopwatch, Table
from bergen.domain import (
    ENDED,
    CreateMatch,
    Event,
    Play,
    State,
    TakeSeat,
    decode,
    encode,
    execute,
    fold,
    make_rules,
    random_policy,
)
from bergen.domain.dealing import SEED_BYTES, deal
from bergen.domain.events import TilePlayed
from bergen.domain.fastplay import Board
from bergen.domain.montecarlo import Knowledge, Settings, decide_play, knowledge
from bergen.domain.simulation import MAX_PLAYS, play_match
from bergen.domain.views import redact_stream

ROUNDS = 5
ROUND_SECONDS = 1.2
"""Each engine's budget per round: ROUNDS x ROUND_SECONDS of play each."""
WARMUP_SECONDS = 0.3
MATCH_ROUNDS = 3
MATCH_ROUND_SECONDS = 1.0
FOLD_EVENTS = 300
FOLD_TARGET = 60
"""A 2-seat match to 60 points is about 450 events; its first 300 are the recorded match."""
FOLD_REPEATS = 7

GOAL_RATIO = 1.5
GOAL_FOLD_SECONDS = 0.3e-3
GOAL_LOAD_SECONDS = 0.6e-3
PEER = "dominoes"
MC_BUDGET_S = 0.1
MC_POSITIONS = 12
"""Decisions per seat count (2 and 4 seats) on which the Monte Carlo policy is timed."""
MC_FIXED_WORLDS = 20


@dataclass(frozen=True)
class Sample:
    """What one engine did in one timed stretch of whole games."""

    moves: int
    games: int
    seconds: float
    cpu_seconds: float = 0.0

    @classmethod
    def of(cls, moves: int, games: int, took: harness.Timing) -> Sample:
        return cls(moves, games, took.wall, took.cpu)

    @property
    def moves_per_second(self) -> float:
        return self.moves / self.seconds

    @property
    def moves_per_cpu_second(self) -> float:
        return self.moves / self.cpu_seconds if self.cpu_seconds > 0 else 0.0

    @property
    def games_per_second(self) -> float:
        return self.games / self.seconds


class Player(Protocol):
    tag: str
    label: str

    def run(self, budget: float) -> Sample: ...


class OurMatches:
    """Bergen matches between random players, per command: a move is one
    `execute(state, Play(...))`, decide and evolve with every forced event, the play chosen
    uniformly among `state.legal_plays(seat)`. Creating and seating each match (its first
    deal included) counts in the time, as the peer's `Game.new()` does."""

    path = "per command"

    def __init__(self, seats: int, partnerships: bool, seed: str) -> None:
        self.seats = seats
        self.partnerships = partnerships
        self.rules = make_rules(seats, partnerships, "standard")
        self.rng = random.Random(seed)
        self.matches = 0
        kind = "partnerships" if partnerships else "each for themselves"
        self.tag = f"ours {self.path} {seats} seats"
        self.label = f"ours {self.path}, {seats} seats ({kind})"

    def _new_match(self) -> State:
        self.matches += 1
        create = CreateMatch(
            f"bench-{self.matches}",
            self.seats,
            self.partnerships,
            self.rules,
            self.rng.randbytes(SEED_BYTES),
        )
        state = execute(None, create)[1]
        for seat in range(self.seats):
            state = execute(state, TakeSeat(f"p{seat}", f"c{seat}", seat))[1]
        return state

    def run(self, budget: float) -> Sample:
        choice = self.rng.choice
        moves = games = 0
        watch = Stopwatch()
        deadline = watch.started + budget
        while True:
            state = self._new_match()
            plays = 0
            while state.phase != ENDED:
                seat = state.turn
                assert seat is not None
                tile, end = choice(state.legal_plays(seat))
                state = execute(state, Play(seat, tile, end))[1]
                plays += 1
                if plays > MAX_PLAYS:
                    raise RuntimeError(f"match {state.match_id} did not end")
            moves += plays
            games += 1
            now = perf_counter()
            if now >= deadline:
                return Sample.of(moves, games, watch.read(now))


class OurBoardMatches(OurMatches):
    """Bergen matches between random players on one Board: created and seated through
    `execute` as `OurMatches` does, then `fastplay.Board(state, deal)` plays the match out,
    `board.play(seat, tile, end)` with the play chosen uniformly among
    `board.legal_plays(seat)`, until `board.phase` is ENDED. The forced events are played
    as the engine plays them and recorded in `board.events`; a move is one `play`."""

    path = "on one Board"

    def run(self, budget: float) -> Sample:
        choice = self.rng.choice
        moves = games = 0
        watch = Stopwatch()
        deadline = watch.started + budget
        while True:
            board = Board(self._new_match(), deal)
            # A seated match has a play to make; the count is read after the loop.
            for plays in range(1, MAX_PLAYS + 1):  # noqa: B007
                seat = board.turn
                assert seat is not None
                tile, end = choice(board.legal_plays(seat))
                board.play(seat, tile, end)
                if board.phase is ENDED:
                    break
            else:
                raise RuntimeError(f"match {board.info.match_id} did not end")
            moves += plays
            games += 1
            now = perf_counter()
            if now >= deadline:
                return Sample.of(moves, games, watch.read(now))


class PeerGames:
    """The peer package's 4-player game with random legal moves: `Game.new()`, then
    `make_move(*choice(valid_moves))` until `result`; a move is one `make_move`."""

    def __init__(self, seed: str) -> None:
        import dominoes  # type: ignore[import-untyped]

        self.new_game = dominoes.Game.new
        self.rng = random.Random(seed)
        # The peer deals with the global `random`: give it a seeded stream of its own.
        saved = random.getstate()
        random.seed(f"{seed}-deal")
        self.deal_state = random.getstate()
        random.setstate(saved)
        self.tag = "peer"
        self.label = f"peer {PEER} {metadata.version(PEER)}, 4 players"

    def run(self, budget: float) -> Sample:
        saved = random.getstate()
        random.setstate(self.deal_state)
        try:
            return self._run(budget)
        finally:
            self.deal_state = random.getstate()
            random.setstate(saved)

    def _run(self, budget: float) -> Sample:
        choice = self.rng.choice
        new_game = self.new_game
        moves = games = 0
        watch = Stopwatch()
        deadline = watch.started + budget
        while True:
            game = new_game()
            while game.result is None:
                game.make_move(*choice(game.valid_moves))
                moves += 1
            games += 1
            now = perf_counter()
            if now >= deadline:
                return Sample.of(moves, games, watch.read(now))


def interleaved(
    players: Sequence[Player], rounds: int, seconds: float, warmup: float
) -> list[list[Sample]]:
    """Samples per player, one per round; each round runs every player, in rotated order."""

    def said(r: int, got: dict[int, Sample]) -> None:
        line = ", ".join(
            f"{p.tag} {got[i].moves_per_second:,.0f}/s ({got[i].moves_per_cpu_second:,.0f}/cpu s)"
            for i, p in enumerate(players)
        )
        harness.say(f"  round {r + 1}/{rounds}: {line}")

    samples = harness.rounds(
        range(len(players)),
        rounds,
        lambda i, _: players[i].run(seconds),
        warmup=lambda i: players[i].run(warmup),
        after_round=said,
    )
    return [samples[i] for i in range(len(players))]


def recorded_match(n: int) -> list[Event]:
    """The first `n` events of a random 2-seat match long enough to have them (a prefix of
    a stream is a valid stream). Raises RuntimeError if no seeded match is that long."""
    rules = make_rules(2, False, "standard", options={"target": FOLD_TARGET})
    for attempt in range(20):
        rng = random.Random(f"bergen-bench-fold-{attempt}")
        events, _ = play_match(
            f"fold-{attempt}",
            rules,
            2,
            False,
            rng.randbytes(SEED_BYTES),
            [random_policy, random_policy],
            rng,
        )
        if len(events) >= n:
            return events[:n]
    raise RuntimeError(f"no seeded match reached {n} events")


def random_matches(rounds: int, seconds: float) -> list[Sample]:
    """Whole 2-seat standard matches, random policy on both seats, via `play_match`."""
    rules = make_rules(2, False, "standard")
    rng = random.Random("bergen-bench-matches")
    policies = [random_policy, random_policy]
    samples = []
    count = 0
    for _ in range(rounds):
        matches = events = 0
        watch = Stopwatch()
        deadline = watch.started + seconds
        while True:
            count += 1
            played, _ = play_match(
                f"m{count}", rules, 2, False, rng.randbytes(SEED_BYTES), policies, rng
            )
            matches += 1
            events += len(played)
            now = perf_counter()
            if now >= deadline:
                break
        samples.append(Sample(events, matches, watch.read(now).wall))
    return samples


def mc_positions(seats: int, partnerships: bool, n: int, seed: str) -> list[Knowledge]:
    """The first `n` decisions with a choice of a seeded random match, as the seat to play
    knows them (the fold of its redacted stream)."""
    rules = make_rules(seats, partnerships, "standard")
    rng = random.Random(seed)
    events, _ = play_match(
        f"mc-{seats}", rules, seats, partnerships, rng.randbytes(SEED_BYTES),
        [random_policy] * seats, rng,
    )  # fmt: skip
    out: list[Knowledge] = []
    for i, e in enumerate(events):
        if not isinstance(e, TilePlayed) or e.end is None:
            continue  # a lead is forced
        k = knowledge(redact_stream(events[:i], e.seat, ended=False), e.seat)
        if k.state is not None and len(k.state.legal_plays(e.seat)) >= 2:
            out.append(k)
            if len(out) == n:
                break
    return out


def montecarlo(scale: float) -> tuple[float, float, float]:
    """(CPU ms per world sampled and played out, median worlds per decision at MC_BUDGET_S
    of wall time, those worlds per MC_BUDGET_S of CPU time) over fixed decisions at 2 and 4
    seats."""
    positions = mc_positions(2, False, MC_POSITIONS, "bergen-bench-mc-2")
    positions += mc_positions(4, True, MC_POSITIONS, "bergen-bench-mc-4")
    rng = random.Random("bergen-bench-mc")
    fixed = Settings(samples=max(4, round(MC_FIXED_WORLDS * min(scale, 1.0))), budget_s=math.inf)
    best = math.inf
    for _ in range(3):
        cpu = process_time()
        worlds = sum(decide_play(k, rng, fixed).samples for k in positions)
        best = min(best, (process_time() - cpu) / worlds)
    budget = Settings(budget_s=MC_BUDGET_S)
    counts = [decide_play(k, rng, budget).samples for k in positions]
    return best * 1e3, statistics.median(counts), MC_BUDGET_S / best


TABLE = Table(
    (
        Column("figure", align="<"),
        Column("measured"),
        Column("rounds min..max"),
        Column("goal", align="<"),
    ),
    gap="  ",
    verdict_title="result",
)
"""A row's cells: the figure, what was measured, the range over rounds (min..max), the goal."""


def _row(
    figure: str, measured: str, spread: str = "", goal: str = "", passed: bool | None = None
) -> Row:
    return Row((figure, measured, spread, goal), passed)


def machine() -> str:
    cores = os.cpu_count()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next(
                (ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu
            )
    except OSError:
        pass
    return (
        f"{platform.python_implementation()} {platform.python_version()} on "
        f"{platform.system()} {platform.machine()}, {cores} cores ({usable} usable)"
        + (f", {cpu}" if cpu else "")
    )


def _rate(samples: Sequence[Sample], per: Callable[[Sample], float]) -> tuple[float, str]:
    values = [per(s) for s in samples]
    return harness.median(values), harness.spread(values)


def main(scale: float | None = None) -> int:
    """Run every measurement and print the table. `scale` shortens the budgets (a smoke run;
    by default 0.1 in a quick run, else 1)."""
    if scale is None:
        scale = harness.quick_or(1.0, 0.1)
    print(f"Python {sys.version.split()[0]}: {machine()}")
    started = perf_counter()

    board4 = OurBoardMatches(4, True, "bergen-bench-4")
    board2 = OurBoardMatches(2, False, "bergen-bench-2")
    ours4 = OurMatches(4, True, "bergen-bench-4")
    ours2 = OurMatches(2, False, "bergen-bench-2")
    peer = PeerGames("bergen-bench-peer")
    rounds = max(1, round(ROUNDS * min(scale, 1.0)))
    print(
        f"\n1. random moves: {rounds} rounds of {ROUND_SECONDS * scale:.2f} s per player "
        "(whole games, rotated order; median round). Ours on one Board: a match played out "
        "on one fastplay.Board (the goal); ours per command: a State per execute(Play) "
        "(reported)"
    )
    ours: list[OurMatches] = [board4, board2, ours4, ours2]
    players: list[Player] = [*ours, peer]
    samples = interleaved(players, rounds, ROUND_SECONDS * scale, WARMUP_SECONDS * scale)
    wall = [_rate(ss, lambda s: s.moves_per_second) for ss in samples]
    cpu = [_rate(ss, lambda s: s.moves_per_cpu_second) for ss in samples]
    per_game = [sum(s.moves for s in ss) / sum(s.games for s in ss) for ss in samples]
    print(
        f"  moves per match: ours 4 seats {per_game[0]:.1f}, ours 2 seats {per_game[1]:.1f}; "
        f"per peer game {per_game[4]:.1f}"
    )

    print(f"\n2. folding the first {FOLD_EVENTS} events of a recorded 2-seat match")
    events = recorded_match(FOLD_EVENTS)
    stored = [encode(e) for e in events]
    final = fold(events)
    if fold(decode(*s) for s in stored) != final:
        raise RuntimeError("decode(encode(events)) does not fold to the same state")
    kinds = Counter(type(e).__name__ for e in events)
    print("  events: " + ", ".join(f"{n} {k}" for k, n in kinds.most_common()))
    repeats = FOLD_REPEATS if scale >= 1.0 else 3
    fold_s = harness.per_call(lambda: fold(events), repeats)
    load_s = harness.per_call(lambda: fold([decode(t, v, p) for t, v, p in stored]), repeats)
    fold_cpu = harness.per_call(lambda: fold(events), repeats, process_time)
    load_cpu = harness.per_call(
        lambda: fold([decode(t, v, p) for t, v, p in stored]), repeats, process_time
    )

    m_rounds = max(1, round(MATCH_ROUNDS * min(scale, 1.0)))
    print(f"\n3. random 2-seat matches: {m_rounds} rounds of {MATCH_ROUND_SECONDS * scale:.2f} s")
    sm = random_matches(m_rounds, MATCH_ROUND_SECONDS * scale)
    mps, spread_m = _rate(sm, lambda s: s.games_per_second)
    events_per_match = sum(s.moves for s in sm) / sum(s.games for s in sm)

    print(
        f"\n4. the Monte Carlo policy on {2 * MC_POSITIONS} decisions (2 and 4 seats): "
        f"{MC_FIXED_WORLDS} worlds each, then a {MC_BUDGET_S:g} s budget each"
    )
    mc_ms, mc_worlds, mc_cpu_worlds = montecarlo(scale)

    rp, cp = wall[4][0], cpu[4][0]
    rows = [
        _row(f"moves/s, {p.label}", f"{r:,.0f}/s ({1e6 / r:.1f} µs)", spread)
        for p, (r, spread) in zip(players, wall, strict=True)
    ]
    rows += [
        _row(f"moves/cpu s, {p.label}", f"{c:,.0f}/s ({1e6 / c:.1f} µs)", spread)
        for p, (c, spread) in zip(players, cpu, strict=True)
    ]
    for i, o in enumerate(ours):
        rows.append(_row(f"ratio ours {o.path}/peer, {o.seats} seats, wall",
                        f"{wall[i][0] / rp:.2f}", "", "(the goal is on CPU)"))  # fmt: skip
    for i, o in enumerate(ours):
        ratio = cpu[i][0] / cp
        if isinstance(o, OurBoardMatches):
            rows.append(_row(f"ratio ours {o.path}/peer, {o.seats} seats, CPU", f"{ratio:.2f}",
                            "", f">= {GOAL_RATIO}", ratio >= GOAL_RATIO))  # fmt: skip
        else:
            rows.append(_row(f"ratio ours {o.path}/peer, {o.seats} seats, CPU", f"{ratio:.2f}",
                            "", "(reported: the server's path, no goal)"))  # fmt: skip
    rows += [
        _row(f"fold, {FOLD_EVENTS} events, wall", f"{fold_s * 1e3:.3f} ms", "", "(goal on CPU)"),
        _row(
            f"fold, {FOLD_EVENTS} events, CPU",
            f"{fold_cpu * 1e3:.3f} ms",
            "",
            f"< {GOAL_FOLD_SECONDS * 1e3:g} ms",
            fold_cpu < GOAL_FOLD_SECONDS,
        ),
        _row(
            f"decode + fold, {FOLD_EVENTS} stored payloads, wall",
            f"{load_s * 1e3:.3f} ms",
            "",
            "(goal on CPU)",
        ),
        _row(
            f"decode + fold, {FOLD_EVENTS} stored payloads, CPU",
            f"{load_cpu * 1e3:.3f} ms",
            "",
            f"< {GOAL_LOAD_SECONDS * 1e3:g} ms",
            load_cpu < GOAL_LOAD_SECONDS,
        ),
        _row(
            "random 2-seat matches/s (play_match)",
            f"{mps:,.1f}/s ({events_per_match:.0f} events each)",
            spread_m,
            "(no goal)",
        ),
        _row("Monte Carlo: CPU per world", f"{mc_ms:.3f} ms", "", "(no goal)"),
        _row(
            f"Monte Carlo: worlds per {MC_BUDGET_S:g} s of CPU",
            f"{mc_cpu_worlds:,.0f}",
            "",
            "(goal 3x the code before bitboards)",
        ),
        _row(
            f"Monte Carlo: worlds per decision at {MC_BUDGET_S:g} s, wall (median)",
            f"{mc_worlds:,.1f}",
            "",
            "(no goal)",
        ),
    ]
    print()
    TABLE.print(rows)
    print(f"\n{harness.goals_line(rows)}  ({perf_counter() - started:.1f} s)")
    return ExitStatus.OK


if __name__ == "__main__":
    sys.exit(main())
