"""Clocks (issue 11): timeouts on time, idle clocks that cost nothing, Play/s that clocks keep.

    python -m bench clocks          (or: python -m bench.clocks_bench --matches 200 --idle 10)

Every server is `bergen serve` with its default settings, its own process, on a PostgreSQL
database made for each part (from BERGEN_BENCH_DATABASE_URL, default
postgresql://postgres@127.0.0.1:5432/postgres) and dropped afterwards; every client is a
thread of this process.

1. Timeout delay (goal: p99 under 250 ms). Two replicas on one database; `--matches` (200)
   clocked 2-seat matches whose seats never play (clock_initial 1 to 3 s, clock_increment 0,
   timeouts_to_forfeit 2) are created and seated through either replica in turn, so that
   timeouts fall due while the later ones are made. Each match calls for three timeouts:
   seat A's (an automatic play), seat B's, then A's again, its second in a row, a forfeit.
   Once every match has ended, each stream is read from the store and folded: a timeout's
   delay is its row's `recorded_at` minus the instant its clock fell (the match's epoch,
   metadata `clock_epoch_ms` on the dealing join's rows, plus the state's `due_at_ms` just
   before the timeout). Figures: p50/p99/max, and every match must hold exactly three
   timeouts, none before its clock fell, and end by forfeit. A second run kills one replica
   (SIGKILL) when half the matches are made (`--no-kill` leaves it out): the other must
   apply its share.
2. Idle CPU (goal: under 2% of one core). One server; its CPU time (utime + stime from
   /proc/<pid>/stat, children excluded) over an `--idle` window (10 s) while it holds
   `--idle-matches` (1,000) seated clocked matches whose clocks are far from due
   (clock_initial 86400), against the same process over a window before any match existed.
   A window opens once the listing shows every match in play.
3. Play/s with clocks on against clocks off (goal: at least 0.95). One server; 8 clients play
   clocked matches (86400+0: no timeout interferes) and 8 others unclocked ones, each its own
   2-seat match, both seats (`grpc_bench.Player`), played to 1000 points so that no match is
   created while timed. The two groups take turns, one window each per round (`--rounds` 8
   of `--seconds` 2), in an order that alternates by round, so that the drift of a shared
   machine falls on both alike; Play/s is a condition's Play calls over its windows' time,
   pooled. Reported beside it: the server's CPU time per Play (GetMatch calls included),
   the median of a condition's windows, which the other load on the machine sways less.

`--parts` runs some of the three parts only.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import psycopg

from bench import harness
from bench.abuse_bench import WINDOW_WARMUP, Window, honest_window
from bench.grpc_bench import (
    CALL_TIMEOUT,
    SERVICE,
    START_TIMEOUT,
    Calls,
    Player,
    Server,
    open_channel,
    servers,
)
from bench.harness import SERVICE_TABLE, ExitStatus, Line, cpu_seconds, percentile
from bench.harness import say as _say
from bench.store_bench import bench_database
from bergen.domain import codec
from bergen.domain.events import MatchEnded
from bergen.domain.vocabulary import MatchEndReason
from bergen.server.clocks import expiries
from bergen.server.store import StoredEvent, open_store
from bergen.v1 import bergen_pb2 as pb

TIMEOUTS_PER_MATCH = 3
DELAY_GOAL_MS = 250.0
IDLE_GOAL_PERCENT = 2.0
PLAY_GOAL_RATIO = 0.95
CLIENTS = 8
TARGET = 1000
"""Points a Play/s match is played to: no client starts another match in a run."""
LONG_CLOCK_S = 86400
SETUP_THREADS = 4
"""Clients creating and seating matches at once."""
TIMEOUTS, IDLE, PLAY = "timeouts", "idle", "play"
PARTS = [TIMEOUTS, IDLE, PLAY]
END_PATIENCE_S = 60.0
"""How long after the last match is seated its timeouts may take before the run gives up."""


# --- matches -------------------------------------------------------------------------------


def never_played(initial: int) -> pb.RuleOptions:
    """A Fischer clock of `initial` s without increment, forfeiting at a seat's second
    timeout in a row: two seats that never play make three timeouts."""
    return pb.RuleOptions(
        clock=pb.CLOCK_FISCHER,
        clock_initial=initial,
        clock_increment=0,
        timeouts_to_forfeit=2,
    )


def seat_match(calls: Calls, options: pb.RuleOptions | None) -> str:
    """A 2-seat match with `options`, both seats taken (so its first hand is dealt); its id."""
    request = pb.CreateMatchRequest(seats=2, name="clocks bench")
    if options is not None:
        request.options.CopyFrom(options)
    match_id: str = calls.create(request, timeout=CALL_TIMEOUT).match_id
    for seat in range(2):
        calls.join(
            pb.JoinMatchRequest(match_id=match_id, name=f"bench{seat}"), timeout=CALL_TIMEOUT
        )
    return match_id


def seat_many(target: str, options: Sequence[pb.RuleOptions | None]) -> list[str]:
    """One seated match per entry of `options`, made by SETUP_THREADS clients at once."""
    ids: list[str] = [""] * len(options)
    errors: list[BaseException] = []

    def work(first: int) -> None:
        channel = open_channel(target)
        try:
            calls = Calls(channel)
            for i in range(first, len(options), SETUP_THREADS):
                ids[i] = seat_match(calls, options[i])
        except BaseException as e:
            errors.append(e)
        finally:
            channel.close()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(SETUP_THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"a match could not be made: {errors[0]!r}") from errors[0]
    return ids


def playing(target: str) -> int:
    """Matches the server's listing shows in play."""
    channel = open_channel(target)
    try:
        call = channel.unary_unary(
            SERVICE + "ListMatches",
            request_serializer=pb.ListMatchesRequest.SerializeToString,
            response_deserializer=pb.ListMatchesResponse.FromString,
        )
        count, token = 0, ""
        while True:
            page = call(
                pb.ListMatchesRequest(phase=pb.PHASE_PLAYING, page_size=100, page_token=token),
                timeout=CALL_TIMEOUT,
            )
            count += len(page.matches)
            token = page.next_page_token
            if not token:
                return count
    finally:
        channel.close()


# --- 1. timeout delay ----------------------------------------------------------------------


def _timeouts_written(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM events WHERE type = 'TimedOut'").fetchone()
    return int(row[0]) if row else 0


@dataclass
class Delays:
    delays_ms: list[float]
    matches: int
    wrong: list[str]
    """A line per match whose timeouts are not the three its clocks call for."""

    @property
    def expected(self) -> int:
        return self.matches * TIMEOUTS_PER_MATCH

    def ms(self, p: int) -> float:
        return percentile(self.delays_ms, p) if len(self.delays_ms) >= 2 else float("nan")


def check_match(match_id: str, stored: Sequence[StoredEvent]) -> tuple[list[float], str | None]:
    """The delays (ms) of a match's timeouts, and what is wrong with them, if anything."""
    try:
        found = expiries(stored)
    except ValueError as e:
        return [], f"{match_id}: {e}"
    delays = [float(x.delay_ms) for x in found]
    if len(found) != TIMEOUTS_PER_MATCH:
        return delays, f"{match_id}: {len(found)} timeouts, {TIMEOUTS_PER_MATCH} expected"
    last = codec.decode(stored[-2].type, stored[-2].schema_version, stored[-2].payload)
    if not isinstance(last, MatchEnded) or last.reason is not MatchEndReason.FORFEIT:
        return delays, f"{match_id}: did not end by forfeit ({type(last).__name__})"
    return delays, None


def timeout_delay(admin_url: str, folder: Path, matches: int, kill: bool) -> Delays:
    """Part 1 on a database of its own. Raises RuntimeError when a server does not start or
    a match cannot be made."""
    rng = random.Random(11)
    with bench_database(admin_url) as url, servers(url, folder, ["replica0", "replica1"]) as found:
        replicas = [found["replica0"], found["replica1"]]
        channels = [open_channel(r.target) for r in replicas]
        try:
            calls = [Calls(ch) for ch in channels]
            ids = []
            for i in range(matches):
                if kill and i == matches // 2:
                    # Half the matches in play, timeouts due all the while: replica 1 dies
                    # holding its share of them.
                    replicas[1].process.kill()
                    replicas[1].process.wait()
                via = 0 if kill and i >= matches // 2 else i % 2
                ids.append(seat_match(calls[via], never_played(rng.randint(1, 3))))
        finally:
            for ch in channels:
                ch.close()
        deadline = time.monotonic() + END_PATIENCE_S
        expected = matches * TIMEOUTS_PER_MATCH
        while _timeouts_written(url) < expected and time.monotonic() < deadline:
            time.sleep(0.25)
        # A moment more, so that a timeout written twice would be seen.
        time.sleep(0.5)
        store = open_store(url)
        try:
            streams = {m: store.read_stream(m) for m in ids}
        finally:
            store.close()
    delays: list[float] = []
    wrong = []
    for match_id, stored in streams.items():
        match_delays, problem = check_match(match_id, stored)
        delays += match_delays
        if problem is not None:
            wrong.append(problem)
    return Delays(delays, matches, wrong)


def delay_line(what: str, d: Delays) -> Line:
    counted = len(d.delays_ms)
    note = f"{counted}/{d.expected} timeouts, {d.matches} matches"
    if d.wrong:
        note += f", {len(d.wrong)} WRONG"
    max_ms = max(d.delays_ms) if d.delays_ms else float("nan")
    return Line(
        f"Timeout delay p50/p99/max ms, {what}",
        f"{d.ms(50):.0f}/{d.ms(99):.0f}/{max_ms:.0f}",
        note,
        None,
        f"p99 < {DELAY_GOAL_MS:.0f}",
        d.ms(99) < DELAY_GOAL_MS and not d.wrong and counted == d.expected,
    )


# --- 2. idle CPU ---------------------------------------------------------------------------


def idle_percent(server: Server, seconds: float) -> float:
    """The server's CPU over the next `seconds`, in % of one core."""
    pid = server.process.pid
    used, start = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    used, elapsed = cpu_seconds(pid) - used, time.monotonic() - start
    return 100 * used / elapsed


@dataclass
class Idle:
    empty: float
    clocked: float
    matches: int


def idle_cpu(admin_url: str, folder: Path, matches: int, seconds: float) -> Idle:
    """Part 2 on a database of its own. Raises RuntimeError when the server does not start,
    a match cannot be made or the listing never shows them all."""
    with bench_database(admin_url) as url, servers(url, folder, ["idle"]) as found:
        server = found["idle"]
        playing(server.target)  # it answers: its start-up is over
        _say(f"  idle CPU: {seconds:g} s before any match")
        empty = idle_percent(server, seconds)
        _say(f"    {empty:.2f}% of a core; making {matches:,} clocked matches")
        seat_many(server.target, [never_played(LONG_CLOCK_S)] * matches)
        deadline = time.monotonic() + START_TIMEOUT
        while (listed := playing(server.target)) < matches:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the listing shows {listed} of {matches} matches in play")
            time.sleep(0.2)
        _say(f"  idle CPU: {seconds:g} s holding {matches:,} clocked matches")
        clocked = idle_percent(server, seconds)
        _say(f"    {clocked:.2f}% of a core")
    return Idle(empty, clocked, matches)


def idle_line(idle: Idle) -> Line:
    return Line(
        f"Idle CPU, % of a core, {idle.matches:,} clocked matches",
        f"{idle.clocked:.2f}%",
        f"{idle.empty:.2f}% no match ({idle.clocked - idle.empty:+.2f})",
        None,
        f"< {IDLE_GOAL_PERCENT:g}%",
        idle.clocked < IDLE_GOAL_PERCENT,
    )


# --- 3. Play/s, clocks on and off ----------------------------------------------------------


class _OptionCalls(Calls):
    """The Play benchmark's calls, its matches created with `options` and played to TARGET."""

    def __init__(self, channel: grpc.Channel, options: pb.RuleOptions) -> None:
        super().__init__(channel)
        create = self.create

        def with_options(request: pb.CreateMatchRequest, **kwargs: Any) -> Any:
            request.options.CopyFrom(options)
            request.options.target = TARGET
            return create(request, **kwargs)

        self.create = with_options


ON, OFF = "clocks on", "clocks off"
CLOCKS: dict[str, pb.RuleOptions] = {
    ON: pb.RuleOptions(clock=pb.CLOCK_FISCHER, clock_initial=LONG_CLOCK_S, clock_increment=0),
    OFF: pb.RuleOptions(),
}


@dataclass
class Played:
    """One window of a condition, and the server's CPU time over it."""

    window: Window
    cpu_s: float
    """The server's CPU seconds from the first untimed call of the window to its end."""

    @property
    def cpu_ms_per_play(self) -> float:
        plays = len(self.window.latencies) + CLIENTS * WINDOW_WARMUP
        return 1000 * self.cpu_s / plays


def play_rates(
    admin_url: str, folder: Path, seconds: float, rounds: int
) -> dict[str, list[Played]]:
    """Part 3 on a database of its own; the windows of each condition. Raises RuntimeError
    when the server does not start or a client fails."""
    with bench_database(admin_url) as url, servers(url, folder, ["play"]) as found:
        server = found["play"]
        channels = [open_channel(server.target) for _ in range(2 * CLIENTS)]
        try:
            players = {
                condition: [
                    Player(_OptionCalls(channels[c * CLIENTS + i], options), random.Random(i))
                    for i in range(CLIENTS)
                ]
                for c, (condition, options) in enumerate(CLOCKS.items())
            }
            for group in players.values():
                honest_window(group, 2.0, 5)  # discarded: the server and caches warm up

            def measure(condition: str, _: int) -> Played:
                before = cpu_seconds(server.process.pid)
                window = honest_window(players[condition], seconds)
                one = Played(window, cpu_seconds(server.process.pid) - before)
                if window.failed:
                    raise RuntimeError(f"{condition}: Play failed: {window.failed[:3]}")
                return one

            def said(r: int, got: dict[str, Played]) -> None:
                parts = [
                    f"{condition} {one.window.rate:,.0f}/s ({one.cpu_ms_per_play:.2f} ms CPU)"
                    for condition, one in got.items()
                ]
                _say(f"  Play/s, round {r + 1}: " + ", ".join(parts))

            return harness.rounds((ON, OFF), rounds, measure, after_round=said)
        finally:
            for ch in channels:
                ch.close()


def play_lines(played: dict[str, list[Played]]) -> list[Line]:
    """Play/s pooled over a condition's windows; the server's CPU per Play likewise."""
    rate = {
        c: sum(len(p.window.latencies) for p in played[c])
        / sum(p.window.seconds for p in played[c])
        for c in (ON, OFF)
    }
    cpu = {c: statistics.median(p.cpu_ms_per_play for p in played[c]) for c in (ON, OFF)}

    def ms(condition: str) -> str:
        lat = [x for p in played[condition] for x in p.window.latencies]
        return f"{percentile(lat, 50) * 1000:.2f}/{percentile(lat, 99) * 1000:.2f}"

    ratio = rate[ON] / rate[OFF]
    return [
        Line(
            f"Play/s, {CLIENTS} clients, clocks on vs off",
            f"{rate[ON]:,.0f}/s",
            f"{rate[OFF]:,.0f}/s",
            ratio,
            f">= {PLAY_GOAL_RATIO:g}",
            ratio >= PLAY_GOAL_RATIO,
        ),
        Line(
            f"Play p50/p99 ms, {CLIENTS} clients, clocks on (off)",
            ms(ON),
            ms(OFF),
            None,
            "",
            None,
        ),
        Line(
            "Server CPU ms per Play, clocks on (off)",
            f"{cpu[ON]:.2f}",
            f"{cpu[OFF]:.2f}",
            cpu[ON] / cpu[OFF],
            "",
            None,
        ),
    ]


# --- the run -------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.clocks_bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    harness.add_database_url(parser, "each part's database")
    quick_or = harness.quick_or
    parser.add_argument(
        "--matches", type=int, default=quick_or(200, 6), help="clocked matches timed out"
    )
    parser.add_argument(
        "--no-kill", action="store_true", help="leave out the run that kills a replica"
    )
    parser.add_argument(
        "--idle-matches",
        type=int,
        default=quick_or(1000, 20),
        help="clocked matches the idle server holds",
    )
    parser.add_argument(
        "--idle", type=float, default=quick_or(10.0, 1.0), help="seconds of each idle window"
    )
    parser.add_argument(
        "--seconds", type=float, default=quick_or(2.0, 0.5), help="per Play/s window"
    )
    parser.add_argument(
        "--rounds", type=int, default=quick_or(8, 2), help="Play/s windows per condition"
    )
    parser.add_argument(
        "--parts",
        nargs="+",
        choices=PARTS,
        default=PARTS,
        help="the parts to run (all by default)",
    )
    args = parser.parse_args(argv)

    _say(
        f"{os.cpu_count()} cores; servers are `bergen serve` processes on PostgreSQL, clients"
        " threads of this process."
    )
    lines: list[Line] = []
    with tempfile.TemporaryDirectory(prefix="bergen-clocks-bench-") as tmp:
        folder = Path(tmp)

        def part(name: str) -> Path:
            """A folder of its own for each part's servers (their port files)."""
            path = folder / name
            path.mkdir()
            return path

        runs = [(False, "2 replicas")] if TIMEOUTS in args.parts else []
        if runs and not args.no_kill:
            runs.append((True, "2 replicas, 1 killed"))
        for kill, what in runs:
            _say(f"  timeouts: {args.matches} matches that never play, {what}")
            delays = timeout_delay(
                args.database_url, part(f"timeouts-{len(lines)}"), args.matches, kill
            )
            lines.append(delay_line(what, delays))
            for problem in delays.wrong[:10]:
                _say(f"    WRONG: {problem}")
        if IDLE in args.parts:
            idle = idle_cpu(args.database_url, part("idle"), args.idle_matches, args.idle)
            lines.append(idle_line(idle))
        if PLAY in args.parts:
            played = play_rates(args.database_url, part("play"), args.seconds, args.rounds)
            lines += play_lines(played)
    print()
    SERVICE_TABLE.print(lines)
    return ExitStatus.OK


if __name__ == "__main__":
    sys.exit(main())
