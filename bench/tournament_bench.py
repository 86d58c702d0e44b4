"""Tournaments (issue 12): pairing a Swiss round, standings after a result, a Swiss played by bots.

    python -m bench tournament      (or: python -m bench.tournament_bench --parts pairing)

1. Pairing one Swiss round (goal: under 1 s with 1,000 entrants; 10,000 reported), at 2-seat
   tables (two-sided: depth-first pairing without rematches) and at 4-seat tables (filled by
   fewest earlier meetings). The state is real: a tournament aggregate is created, filled and
   started through `decide_tournament`, and its rounds are paired by it and given random
   results (scores 0 to 20 a side, one table in fifty a forfeit); `pair_round`, the pure
   function the aggregate's PairRound calls, is timed on the state before each round from the
   second on (the first only sorts by seeding), and its median and max over those rounds are
   reported.
2. Standings after a result, 1,000 entrants at 2-seat tables (goal: under 10 ms), after
   `--standing-rounds` (5) rounds played: each result of the next round is timed twice, through
   the aggregate (decide RecordResult, evolve, the standings of the new state's tally) and
   through the pure functions alone (score the result, `Tally.with_table`, `Tally.standings`);
   the median, p99 (held to the goal: a collection of the garbage collector now and then is no
   cost of a result) and max over the round's results.
3. A 64-entrant 6-round Swiss at 2-seat tables (the table's default rules: 15 points) on a
   `bergen serve` process with its default settings, on a PostgreSQL database made for the
   part (from BERGEN_BENCH_DATABASE_URL, default postgresql://postgres@127.0.0.1:5432/postgres)
   and dropped afterwards. `--clients` (8) client threads, one channel each, play it with the
   entrants' tokens: each round's tables go to a queue, a client takes the next, waits until
   the server has seated it (GetTournament with the token of its last seat, then
   WatchTournament until it is), and plays both seats of it as `grpc_bench.Player` plays a
   match, at random among the legal plays, until it ends; then the next table. Between rounds
   the clients wait on WatchTournament for the server to record the results and pair the next
   round; nobody else acts. Around it the same clients play ordinary 2-seat matches of the
   same rules (created and joined as `grpc_bench.Player` does) for `--plain-seconds` (20)
   before each tournament and after the last: `--swisses` (3) Swisses one after another, each
   measured against the two plain windows around it, pooled, so that a machine growing busier
   or quieter in the course of the run moves both figures alike; the goal is judged on the
   median Swiss's ratio, and every Swiss's ratio is printed.
   Figures: the wall time; Play/s of each run (Play calls over the wall time, the goal's
   figure: at least 0.9 of the plain run's); the rate inside the Play calls (summed over
   clients, as `grpc_bench` counts it), which leaves out the clients' waits; the time
   from a round's last play to the first play of the next; and the cores the rest of the
   machine kept busy (PostgreSQL, and on a shared machine whatever else runs) during the
   tournament and during the plain windows: where these differ, the machine, not the server,
   moved the ratio.

Parts 1 and 2 count the CPU time of the thread (`time.thread_time`): what the functions cost,
without the time other processes on a shared machine take from it (the garbage collector's
is counted).

`--parts` runs some of the three parts only.
"""

from __future__ import annotations

import argparse
import os
import queue
import random
import secrets
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from bench import harness
from bench.abuse_bench import Window, honest_window
from bench.grpc_bench import (
    CALL_TIMEOUT,
    SERVICE,
    START_TIMEOUT,
    Calls,
    Player,
    bearer,
    open_channel,
    servers,
)
from bench.harness import SERVICE_TABLE, ExitStatus, Line, cpu_seconds, percentile
from bench.harness import say as _say
from bench.store_bench import bench_database
from bergen.domain.tournament_engine import (
    CreateTournament,
    PairRound,
    RecordResult,
    Register,
    Start,
    TournamentCommand,
    TournamentState,
    decide_tournament,
    evolve_tournament,
    fold_tournament,
)
from bergen.domain.tournament_pairing import SWISS, Settings, pair_round
from bergen.domain.tournament_standings import (
    FORFEIT,
    TARGET,
    TableResult,
    Tally,
    score_result,
)
from bergen.server.auth import new_organiser_token
from bergen.v1 import bergen_pb2 as pb

PAIRING_GOAL_S = 1.0
STANDINGS_GOAL_MS = 10.0
PLAY_GOAL_RATIO = 0.9
ORGANISER_ENV = "BERGEN_ORGANISER_TOKEN"
MAX_SCORE = 20
FORFEIT_ONE_IN = 50
PAIRING, STANDINGS, PLAY = "pairing", "standings", "play"
PARTS = [PAIRING, STANDINGS, PLAY]


# --- the aggregate, driven as the server drives it -----------------------------------------


class Aggregate:
    """A tournament's state, moved on by `decide_tournament` and `evolve_tournament` only."""

    def __init__(self, settings: Settings, entrants: int) -> None:
        self.seed = secrets.token_bytes(32)
        tournament_id = str(uuid.uuid4())
        (created,) = decide_tournament(
            None, CreateTournament(tournament_id, settings, self.seed, "bench")
        )
        self.state: TournamentState = fold_tournament([created])
        players = 2 if settings.partnerships else 1
        for i in range(entrants):
            names = tuple(f"e{i}p{p}" for p in range(players))
            self.apply(Register(names, f"seed{i}"))
        self.apply(Start(self.seed))

    def apply(self, command: TournamentCommand) -> None:
        """Decide `command` and evolve the state by its events. Raises as `decide_tournament`."""
        for event in decide_tournament(self.state, command):
            self.state = evolve_tournament(self.state, event)

    @property
    def tally(self) -> Tally:
        assert self.state.tally is not None
        return self.state.tally

    def pair_next(self) -> float:
        """Pair the next round through the aggregate; the seconds `pair_round` takes on the
        same state (timed apart, so that the aggregate's event and fold are not counted)."""
        s = self.state
        assert s.seeding is not None
        t0 = time.thread_time()
        pair_round(s.settings, s.seeding, s.withdrawn_after(), self.tally, s.round + 1)
        seconds = time.thread_time() - t0
        self.apply(PairRound())
        return seconds

    def pending(self) -> list[tuple[int, int]]:
        """(table, number of sides) of the latest round's tables without a result."""
        latest = self.state.rounds[-1]
        return [(t.table, len(t.sides)) for t in latest.tables if t.result is None]


def random_result(rng: random.Random, round_number: int, table: int, sides: int) -> RecordResult:
    """A table's result: random scores 0..MAX_SCORE, one table in FORFEIT_ONE_IN a forfeit."""
    scores = tuple(rng.randint(0, MAX_SCORE) for _ in range(sides))
    if rng.randrange(FORFEIT_ONE_IN) == 0:
        return RecordResult(round_number, table, FORFEIT, scores, rng.randrange(sides))
    return RecordResult(round_number, table, TARGET, scores)


def play_results(agg: Aggregate, rng: random.Random) -> None:
    """Give every table of the latest round its random result."""
    r = agg.state.round
    for table, sides in agg.pending():
        agg.apply(random_result(rng, r, table, sides))


# --- 1. pairing ----------------------------------------------------------------------------


@dataclass
class Pairings:
    entrants: int
    seats: int
    seconds: list[float]
    """`pair_round` on the state before each round from the second."""

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def max(self) -> float:
        return max(self.seconds)


def swiss(seats: int, rounds: int) -> Settings:
    return Settings(format=SWISS, seats=seats, rounds=rounds)


def pairing_times(entrants: int, seats: int, rounds: int, seed: int) -> Pairings:
    """Pair `rounds` Swiss rounds of `entrants`, each given random results; the times of
    rounds 2..`rounds`."""
    rng = random.Random(seed)
    agg = Aggregate(swiss(seats, rounds), entrants)
    times = []
    for r in range(1, rounds + 1):
        seconds = agg.pair_next()
        if r > 1:
            times.append(seconds)
        play_results(agg, rng)
    return Pairings(entrants, seats, times)


def pairing_line(p: Pairings, goal: bool) -> Line:
    table = "2-seat (two-sided)" if p.seats == 2 else f"{p.seats}-seat"
    return Line(
        f"Swiss pairing s, {p.entrants:,} entrants, {table}",
        f"{p.median:.3f}",
        f"max {p.max:.3f}, {len(p.seconds)} rounds",
        None,
        f"< {PAIRING_GOAL_S:g} s" if goal else "",
        p.max < PAIRING_GOAL_S if goal else None,
    )


# --- 2. standings after a result -----------------------------------------------------------


@dataclass
class Standings:
    entrants: int
    aggregate_ms: list[float]
    pure_ms: list[float]


def standings_times(entrants: int, rounds_before: int, seed: int) -> Standings:
    """Time each result of round `rounds_before + 1`, through the aggregate and the pure
    functions, with the standings after it."""
    rng = random.Random(seed)
    agg = Aggregate(swiss(2, rounds_before + 1), entrants)
    for _ in range(rounds_before):
        agg.pair_next()
        play_results(agg, rng)
    agg.pair_next()
    r = agg.state.round
    sides_of = {t.table: t.sides for t in agg.state.rounds[-1].tables}
    through_aggregate, pure = [], []
    for table, count in agg.pending():
        command = random_result(rng, r, table, count)
        tally = agg.tally
        t0 = time.thread_time()
        scored = score_result(TableResult(command.reason, command.scores, command.forfeited_side))
        tally.with_table(sides_of[table], scored).standings()
        t1 = time.thread_time()
        agg.apply(command)
        agg.tally.standings()
        t2 = time.thread_time()
        pure.append((t1 - t0) * 1000)
        through_aggregate.append((t2 - t1) * 1000)
    return Standings(entrants, through_aggregate, pure)


def standings_lines(s: Standings) -> list[Line]:
    def line(what: str, ms: list[float]) -> Line:
        p99 = percentile(ms, 99)
        return Line(
            f"Standings after a result ms, {s.entrants:,}, {what}",
            f"{statistics.median(ms):.2f}",
            f"p99 {p99:.2f}, max {max(ms):.2f}",
            None,
            f"p99 < {STANDINGS_GOAL_MS:g} ms",
            p99 < STANDINGS_GOAL_MS,
        )

    return [
        line("aggregate", s.aggregate_ms),
        line("pure functions", s.pure_ms),
    ]


# --- 3. a Swiss played by bots over gRPC ---------------------------------------------------


@contextmanager
def organiser_token() -> Iterator[str]:
    """A fresh organiser token, in the environment the servers started meanwhile inherit."""
    token = new_organiser_token()
    before = os.environ.get(ORGANISER_ENV)
    os.environ[ORGANISER_ENV] = token
    try:
        yield token
    finally:
        if before is None:
            del os.environ[ORGANISER_ENV]
        else:
            os.environ[ORGANISER_ENV] = before


def machine_busy_s() -> float | None:
    """CPU seconds every core of the machine has been busy so far (/proc/stat), None where
    the system does not tell."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            values = [int(v) for v in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    idle = values[3] + values[4]  # idle, iowait
    return (sum(values) - idle) / os.sysconf("SC_CLK_TCK")


class Elsewhere:
    """The CPU the rest of the machine uses from now on: every process but the server and
    this one (PostgreSQL included, and whatever else the machine runs meanwhile). A shared
    machine growing busier during one part of the run than in the other takes the cores
    from that part: this tells such runs apart."""

    def __init__(self, server_pid: int) -> None:
        self._pid = server_pid
        self._start = self._now()

    def _now(self) -> tuple[float | None, float, float, float]:
        mine = os.times()
        return (
            machine_busy_s(),
            cpu_seconds(self._pid),
            mine.user + mine.system,
            time.perf_counter(),
        )

    def cores(self) -> float | None:
        """Cores busy elsewhere on average since this was made (None where unknown)."""
        end = self._now()
        if end[0] is None or self._start[0] is None:
            return None
        busy = (end[0] - self._start[0]) - (end[1] - self._start[1]) - (end[2] - self._start[2])
        return max(0.0, busy) / (end[3] - self._start[3])


class _TournamentCalls(Calls):
    """A client's calls, the tournament's among them."""

    def __init__(self, channel: grpc.Channel) -> None:
        super().__init__(channel)

        def unary(name: str, response: Any) -> Any:
            return channel.unary_unary(
                SERVICE + name,
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=response.FromString,
            )

        self.create_tournament = unary("CreateTournament", pb.CreateTournamentResponse)
        self.register = unary("RegisterEntrant", pb.RegisterEntrantResponse)
        self.start = unary("StartTournament", pb.StartTournamentResponse)
        self.get_tournament = unary("GetTournament", pb.GetTournamentResponse)
        self.watch_tournament = channel.unary_stream(
            SERVICE + "WatchTournament",
            request_serializer=pb.WatchTournamentRequest.SerializeToString,
            response_deserializer=pb.WatchTournamentResponse.FromString,
        )


class TablePlayer(Player):
    """Plays both seats of a tournament's table with its entrants' tokens, as `Player` plays
    a match of its own; it creates no match."""

    def new_match(self) -> None:
        """A tournament's client is given its tables (`sit`): it makes none."""

    def sit(self, match_id: str, tokens: Sequence[str]) -> None:
        self.match_id = match_id
        self._tokens = list(tokens)
        self._hands = [None] * len(tokens)
        self._view = pb.MatchView()
        self._fetch(0)

    @property
    def ended(self) -> bool:
        return self._view.phase == pb.PHASE_ENDED


@dataclass(frozen=True)
class Table:
    round: int
    match_id: str
    tokens: tuple[str, ...]
    """Each seat's player token (side i on seat i)."""


@dataclass
class Clocked:
    """What the clients did in the tournament: Play latencies, and by round the instants
    (perf_counter) of its first Play's start and its last Play's return."""

    latencies: list[float] = field(default_factory=list)
    waiting_s: float = 0.0
    """Summed over clients: waiting for a table (the round's others still in play)."""
    seating_s: float = 0.0
    """Summed over clients: waiting for the server to seat a table taken."""
    looked_up: list[float] = field(default_factory=list)
    """GetTournament's latency, once per table, to see whether it is seated."""
    watched: int = 0
    """Tables not seated then, awaited on WatchTournament."""
    first: dict[int, float] = field(default_factory=dict)
    last: dict[int, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def played(self, round_number: int, start: float, end: float) -> None:
        with self.lock:
            self.latencies.append(end - start)
            self.first[round_number] = min(start, self.first.get(round_number, start))
            self.last[round_number] = max(end, self.last.get(round_number, end))

    def waited(self, for_table: float, for_seats: float, looked_up: float, watched: bool) -> None:
        with self.lock:
            self.waiting_s += for_table
            self.seating_s += for_seats
            self.looked_up.append(looked_up)
            self.watched += watched


def wait_seated(calls: _TournamentCalls, tournament_id: str, table: Table) -> tuple[float, bool]:
    """Return once the server has seated the table's last seat (and so dealt its first hand):
    at once if GetTournament with that seat's token shows it, else when WatchTournament with
    it does. Returns GetTournament's latency, and whether the table was awaited. Raises
    RuntimeError if the tournament ends first."""
    request = pb.GetTournamentRequest(tournament_id=tournament_id)
    token = bearer(table.tokens[-1])
    t0 = time.perf_counter()
    got = calls.get_tournament(request, metadata=token, timeout=CALL_TIMEOUT)
    looked_up = time.perf_counter() - t0
    if got.assignment.match_id == table.match_id:
        return looked_up, False
    stream = calls.watch_tournament(
        pb.WatchTournamentRequest(tournament_id=tournament_id),
        metadata=tuple(token),
        timeout=START_TIMEOUT,
    )
    try:
        for seen in stream:
            if seen.assignment.match_id == table.match_id:
                return looked_up, True
    finally:
        stream.cancel()
    raise RuntimeError(f"table {table.match_id} was never seated")


def wait_round(calls: _TournamentCalls, tournament_id: str, after: int) -> pb.TournamentView:
    """The tournament once it has paired a round after `after` or ended (WatchTournament)."""
    stream = calls.watch_tournament(
        pb.WatchTournamentRequest(tournament_id=tournament_id), timeout=START_TIMEOUT
    )
    try:
        for seen in stream:
            view: pb.TournamentView = seen.tournament
            if view.round > after or view.phase == pb.TOURNAMENT_PHASE_ENDED:
                return view
    finally:
        stream.cancel()
    raise RuntimeError(f"tournament {tournament_id} did not move on after round {after}")


@dataclass
class Hosted:
    entrants: int
    rounds: int
    clients: int
    wall_s: float
    tournament: Clocked
    plain_latencies: list[float]
    plain_s: float
    """The plain windows' time, before and after the tournament together."""
    tournament_cpu_s: float
    plain_cpu_s: float
    paired_after_s: list[float]
    """By round from the second: from the last Play of the round before to the pairing seen."""
    first_play_after_s: list[float]
    """By round from the second: from the last Play of the round before to its first Play."""
    tables: int
    elsewhere_t: float | None
    """Cores the rest of the machine kept busy during the tournament (None where unknown)."""
    elsewhere_p: float | None
    """The same during the plain windows (their mean)."""
    plain_rates: list[float]
    """Play/s of each plain window: before the tournament, after it."""

    def tournament_rate(self) -> float:
        """Play/s over the tournament's wall time."""
        return len(self.tournament.latencies) / self.wall_s

    def plain_rate(self) -> float:
        """Play/s over the plain windows' time."""
        return len(self.plain_latencies) / self.plain_s

    def inside(self, latencies: Sequence[float]) -> float:
        """Play/s inside the Play calls, summed over clients (grpc_bench's figure)."""
        return self.clients * len(latencies) / sum(latencies)


def create_swiss(org: str, calls: _TournamentCalls, rounds: int) -> str:
    """A Swiss at 2-seat tables with the default rules, created by the organiser."""
    created = calls.create_tournament(
        pb.CreateTournamentRequest(
            name="bench swiss",
            settings=pb.TournamentSettings(
                format=pb.TOURNAMENT_FORMAT_SWISS,
                seats=2,
                preset=pb.PRESET_STANDARD,
                rounds=rounds,
            ),
        ),
        metadata=bearer(org),
        timeout=CALL_TIMEOUT,
    )
    tournament_id: str = created.tournament_id
    return tournament_id


def register_all(calls: _TournamentCalls, tournament_id: str, entrants: int) -> dict[int, str]:
    """Register `entrants` one-player entrants; each one's player token by entrant number."""
    tokens: dict[int, str] = {}
    for i in range(entrants):
        reply = calls.register(
            pb.RegisterEntrantRequest(
                tournament_id=tournament_id, players=[f"bot{i}"], client_seed=f"bot{i}"
            ),
            timeout=CALL_TIMEOUT,
        )
        (tokens[reply.entrant],) = reply.player_tokens
    return tokens


def play_tables(
    calls: _TournamentCalls,
    tournament_id: str,
    rng: random.Random,
    tables: queue.Queue[Table | None],
    done: queue.Queue[BaseException | None],
    clocked: Clocked,
) -> None:
    """A client: take the next table, play it to its end, say so; until given None. An error
    is put on `done` instead of a table finished."""
    player = TablePlayer(calls, rng)
    try:
        while True:
            t0 = time.perf_counter()
            table = tables.get()
            t1 = time.perf_counter()
            if table is None:
                return
            looked_up, watched = wait_seated(calls, tournament_id, table)
            clocked.waited(t1 - t0, time.perf_counter() - t1, looked_up, watched)
            player.sit(table.match_id, table.tokens)
            while not player.ended:
                request, metadata = player.next_request()
                t0 = time.perf_counter()
                answered = player.play(request, metadata)
                t1 = time.perf_counter()
                if answered is not None:
                    clocked.played(table.round, t0, t1)
            done.put(None)
    except BaseException as e:
        done.put(e)


def run_swiss(
    org: str,
    calls: Sequence[_TournamentCalls],
    entrants: int,
    rounds: int,
    cpu: Callable[[], float],
) -> tuple[Clocked, float, float, dict[int, float], int]:
    """Create, fill and start a Swiss, and play it to its end with a client thread per
    `calls`. Returns what the clients did, the wall time from the start to the end, the
    server's CPU seconds over it, when each round was seen paired, and the tables played.
    Raises RuntimeError when a client fails or the tournament does not move on."""
    tournament_id = create_swiss(org, calls[0], rounds)
    tokens = register_all(calls[0], tournament_id, entrants)
    clocked = Clocked()
    tables: queue.Queue[Table | None] = queue.Queue()
    done: queue.Queue[BaseException | None] = queue.Queue()
    threads = [
        threading.Thread(
            target=play_tables,
            args=(c, tournament_id, random.Random(100 + i), tables, done, clocked),
            daemon=True,
        )
        for i, c in enumerate(calls)
    ]
    for t in threads:
        t.start()
    paired: dict[int, float] = {}
    played = 0
    try:
        cpu_before, start = cpu(), time.perf_counter()
        calls[0].start(
            pb.StartTournamentRequest(tournament_id=tournament_id),
            metadata=bearer(org),
            timeout=CALL_TIMEOUT,
        )
        latest = 0
        while True:
            view = wait_round(calls[0], tournament_id, latest)
            if view.phase == pb.TOURNAMENT_PHASE_ENDED:
                break
            latest = view.round
            paired[latest] = time.perf_counter()
            round_tables = view.rounds[-1].tables
            for paired_table in round_tables:
                sides = paired_table.sides
                tables.put(Table(latest, paired_table.match_id, tuple(tokens[e] for e in sides)))
            for _ in round_tables:
                error = done.get()
                if error is not None:
                    raise RuntimeError(f"a client failed: {error!r}") from error
            played += len(round_tables)
        wall, cpu_s = time.perf_counter() - start, cpu() - cpu_before
    finally:
        for _ in threads:
            tables.put(None)
        for t in threads:
            t.join(timeout=2 * CALL_TIMEOUT)
    if latest != rounds:
        raise RuntimeError(f"the tournament ended after round {latest} of {rounds}")
    return clocked, wall, cpu_s, paired, played


def host_swiss(
    admin_url: str,
    folder: Path,
    entrants: int,
    rounds: int,
    clients: int,
    plain_s: float,
    swisses: int = 1,
) -> list[Hosted]:
    """Part 3 on a database of its own: `swisses` Swisses one after another, a plain window
    before each and after the last, each Swiss measured against the two windows around it.
    Raises RuntimeError when the server does not start, a client fails or the tournament does
    not move on."""
    found_all: list[Hosted] = []
    with (
        organiser_token() as org,
        bench_database(admin_url) as url,
        servers(url, folder, ["swiss"]) as found,
    ):
        server = found["swiss"]
        pid = server.process.pid
        channels = [open_channel(server.target) for _ in range(clients)]
        try:
            calls = [_TournamentCalls(ch) for ch in channels]
            plain = [Player(c, random.Random(i)) for i, c in enumerate(calls)]
            honest_window(plain, 2.0, 5)  # discarded: the server and caches warm up

            def window() -> tuple[Window, float, float | None]:
                _say(f"  {plain_s:g} s of ordinary matches, {clients} clients")
                before, rest = cpu_seconds(pid), Elsewhere(pid)
                played = honest_window(plain, plain_s)
                if played.failed:
                    raise RuntimeError(f"plain matches: Play failed: {played.failed[:3]}")
                return played, cpu_seconds(pid) - before, rest.cores()

            previous = window()
            for n in range(swisses):
                _say(f"  Swiss {n + 1} of {swisses}: {entrants} entrants, {rounds} rounds")
                rest = Elsewhere(pid)
                clocked, wall, cpu_t, paired, played = run_swiss(
                    org, calls, entrants, rounds, lambda: cpu_seconds(pid)
                )
                rest_t = rest.cores()
                _say(f"    ended in {wall:.1f} s, {len(clocked.latencies):,} plays")
                following = window()
                windows = [previous[0], following[0]]
                busy = [previous[2], following[2]]
                later = range(2, rounds + 1)
                found_all.append(
                    Hosted(
                        entrants,
                        rounds,
                        clients,
                        wall,
                        clocked,
                        [x for w in windows for x in w.latencies],
                        2 * plain_s,
                        cpu_t,
                        previous[1] + following[1],
                        [paired[r] - clocked.last[r - 1] for r in later],
                        [clocked.first[r] - clocked.last[r - 1] for r in later],
                        played,
                        rest_t,
                        None if None in busy else sum(b for b in busy if b is not None) / 2,
                        [w.rate for w in windows],
                    )
                )
                previous = following
        finally:
            for ch in channels:
                ch.close()
    return found_all


def swisses_lines(hosted: Sequence[Hosted]) -> list[Line]:
    """The median Swiss's lines (the goal judged on its ratio), then every Swiss's ratio."""
    ranked = sorted(hosted, key=lambda h: h.tournament_rate() / h.plain_rate())
    lines = hosted_lines(ranked[(len(ranked) - 1) // 2])
    if len(hosted) > 1:
        ratios = [h.tournament_rate() / h.plain_rate() for h in hosted]
        lines.insert(
            2,
            Line(
                f"  each Swiss's ratio, in order (the line above: the median of {len(hosted)})",
                ", ".join(f"{r:.2f}" for r in ratios),
                "",
                None,
                "",
                None,
            ),
        )
    return lines


def hosted_lines(h: Hosted) -> list[Line]:
    t, p = h.tournament.latencies, h.plain_latencies
    ratio = h.tournament_rate() / h.plain_rate()
    inside = h.inside(t) / h.inside(p)
    cpu_t, cpu_p = 1000 * h.tournament_cpu_s / len(t), 1000 * h.plain_cpu_s / len(p)
    busy = sum(t) / (h.clients * h.wall_s)
    plain_busy = sum(p) / (h.clients * h.plain_s)
    waiting = h.tournament.waiting_s / (h.clients * h.wall_s)
    seating = h.tournament.seating_s / (h.clients * h.wall_s)

    def ms(values: Sequence[float]) -> str:
        return f"{1000 * statistics.median(values):.0f}/{1000 * max(values):.0f}"

    return [
        Line(
            f"Swiss of {h.entrants}, {h.rounds} rounds, by bots: wall s",
            f"{h.wall_s:.1f}",
            f"{h.tables} matches, {len(t):,} plays",
            None,
            "",
            None,
        ),
        Line(
            f"Play/s, {h.clients} clients, tournament vs plain",
            f"{h.tournament_rate():,.0f}/s",
            f"{h.plain_rate():,.0f}/s",
            ratio,
            f">= {PLAY_GOAL_RATIO:g}",
            ratio >= PLAY_GOAL_RATIO,
        ),
        Line(
            "Play/s of the plain windows, before vs after",
            f"{h.plain_rates[0]:,.0f}/s",
            f"{h.plain_rates[-1]:,.0f}/s",
            h.plain_rates[0] / h.plain_rates[-1],
            "",
            None,
        ),
        Line(
            "Play/s inside Play calls, tournament vs plain",
            f"{h.inside(t):,.0f}/s",
            f"{h.inside(p):,.0f}/s",
            inside,
            "",
            None,
        ),
        Line(
            "Server CPU ms per Play, tournament (plain)",
            f"{cpu_t:.2f}",
            f"{cpu_p:.2f}",
            cpu_t / cpu_p,
            "",
            None,
        ),
        Line(
            "A round's last play to the next paired, ms p50/max",
            ms(h.paired_after_s),
            f"first play {ms(h.first_play_after_s)}",
            None,
            "",
            None,
        ),
        Line(
            "Clients' time in Play, tournament (plain)",
            f"{100 * busy:.0f}%",
            f"{100 * plain_busy:.0f}%",
            None,
            "",
            None,
        ),
        Line(
            "Clients' time waiting for a table (for seating)",
            f"{100 * waiting:.1f}%",
            f"{100 * seating:.1f}%",
            None,
            "",
            None,
        ),
        Line(
            "Cores busy elsewhere (PostgreSQL, other work)",
            "?" if h.elsewhere_t is None else f"{h.elsewhere_t:.2f}",
            "?" if h.elsewhere_p is None else f"{h.elsewhere_p:.2f}",
            None,
            "",
            None,
        ),
        Line(
            "GetTournament ms p50/max, a table's seating",
            ms(h.tournament.looked_up),
            f"{h.tournament.watched} of {h.tables} watched",
            None,
            "",
            None,
        ),
    ]


# --- the run -------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.tournament_bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    harness.add_database_url(parser, "the played part's database")
    quick_or = harness.quick_or
    parser.add_argument(
        "--pairing-rounds",
        type=int,
        default=quick_or(8, 2),
        help="Swiss rounds paired, 1,000 entrants",
    )
    parser.add_argument(
        "--large-rounds",
        type=int,
        default=quick_or(5, 2),
        help="Swiss rounds paired, 10,000 entrants",
    )
    parser.add_argument(
        "--standing-rounds",
        type=int,
        default=quick_or(5, 1),
        help="rounds played before the timed results",
    )
    parser.add_argument(
        "--entrants", type=int, default=quick_or(64, 8), help="of the Swiss played by bots"
    )
    parser.add_argument(
        "--rounds", type=int, default=quick_or(6, 2), help="of the Swiss played by bots"
    )
    parser.add_argument("--clients", type=int, default=8, help="client threads playing")
    parser.add_argument(
        "--plain-seconds",
        type=float,
        default=quick_or(20.0, 2.0),
        help="ordinary matches played before the Swiss, and as long after it",
    )
    parser.add_argument(
        "--swisses",
        type=int,
        default=quick_or(3, 1),
        help="Swisses played one after another, each between two plain windows; the goal is"
        " judged on the median one's ratio",
    )
    parser.add_argument(
        "--parts", nargs="+", choices=PARTS, default=PARTS, help="the parts to run (all)"
    )
    args = parser.parse_args(argv)

    _say(f"{os.cpu_count()} cores; pairing and standings in this process (pure Python).")
    lines: list[Line] = []
    if PAIRING in args.parts:
        for entrants, rounds in ((1000, args.pairing_rounds), (10000, args.large_rounds)):
            for seats in (2, 4):
                _say(f"  pairing: {entrants:,} entrants, {seats}-seat tables, {rounds} rounds")
                found = pairing_times(entrants, seats, rounds, seed=seats)
                lines.append(pairing_line(found, goal=entrants == 1000))
    if STANDINGS in args.parts:
        _say(f"  standings: 1,000 entrants, after {args.standing_rounds} rounds")
        lines += standings_lines(standings_times(1000, args.standing_rounds, seed=5))
    if PLAY in args.parts:
        with tempfile.TemporaryDirectory(prefix="bergen-tournament-bench-") as tmp:
            hosted = host_swiss(
                args.database_url,
                Path(tmp),
                args.entrants,
                args.rounds,
                args.clients,
                args.plain_seconds,
                args.swisses,
            )
        lines += swisses_lines(hosted)
    print()
    SERVICE_TABLE.print(lines)
    return ExitStatus.OK


if __name__ == "__main__":
    sys.exit(main())
