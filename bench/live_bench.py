"""Live load: 10,000 matches live at once, every seat watching, clocks running, 8 clients
playing other matches.

    python -m bench live       (or: python -m bench.live_bench --matches 10000 --idle 30)
    python -m bench.live_bench --watch streams      (a WatchMatch stream a seat)

One `bergen serve` (its own process, `--max-watchers` and `--max-follows` raised to hold a
stream and a follow for every seat) on a PostgreSQL database made for the run from
BERGEN_BENCH_DATABASE_URL (default postgresql://postgres@127.0.0.1:5432/postgres) and dropped
afterwards. In turn:

1. The reference: 8 clients' `Play` (`grpc_bench.measure_rate`: each its own new 2-seat
   matches, both seats) for `--seconds` on the idle server; p50 and p99. Then the server's
   CPU over a window of `--idle-empty` seconds with no match live.
2. The server's memory before: VmRSS (/proc/PID/status) and PSS (/proc/PID/smaps_rollup).
3. `--matches` 2-seat matches (Fischer clock of a day, so no clock runs out in the run) are
   created and both seats taken, and every seat watches with its own token, in one of two
   ways (`--watch`):
   - `follows` (the default): the matches are made `--follows-per-stream` / 2 (250) at a
     time, and the seats of each lot are the follows of one WatchMatches stream (500
     follows, each with its seat's token), read until every follow has had its view (a
     follow's view that does not come, comes twice or names another match fails the
     stream): 40 streams for 10,000 matches;
   - `streams`: a WatchMatch a seat, read up to its first message (its view): two streams
     a match.
   The streams are held by `--client-processes` client processes (grpc.aio, a connection
   per STREAMS_PER_CHANNEL streams, no thread per stream).
4. The server's memory after, once every seat has its view: (after - before) / matches is
   the memory of a live match (goal: under 20 KB). Beside it, where the memory lies, from
   /proc/PID/smaps: the threads' stacks (the 8 MiB mappings), the rest of the anonymous
   memory (the heaps), and the thread count.
5. At rest: nothing but the clocks running (no call made), the server's CPU (utime + stime
   of /proc/PID/stat) over `--idle` seconds, as a share of one core (goal: under 5%), split
   by thread name (the server names its threads), and the client processes' own CPU.
6. Under load: the same 8 clients' `Play` for `--seconds` while every stream stays open;
   p99 against the reference (goal: under 1.5x). Then every seat must still be watching on
   a stream still open (the seats of a WatchMatches stream that ended, or on which a
   follow's match ended, no longer count), and no timeout written.

The table is headed by the mode measured. The clients and PostgreSQL share the machine's
cores with the server: the load average is printed at the start and at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import psycopg

from bench import harness
from bench.grpc_bench import (
    CHANNEL_OPTIONS,
    OURS,
    SERVICE,
    bearer,
    measure_rate,
    thread_cpu,
)
from bench.harness import SERVICE_TABLE, ExitStatus, Line, cpu_seconds, percentile, say
from bench.listing_bench import serving
from bench.store_bench import bench_database
from bergen.v1 import bergen_pb2 as pb

MEMORY_GOAL_KB = 20.0
CPU_GOAL_PERCENT = 5.0
P99_GOAL_RATIO = 1.5
CLOCK_S = 86_400
"""Each seat's clock: a day, so that none runs out during a run."""
STREAMS_PER_CHANNEL = 500
"""Watch streams a client connection holds (HTTP/2 streams on one TCP connection)."""
FOLLOWS = "follows"
STREAMS = "streams"
WATCH_MODES = (FOLLOWS, STREAMS)
"""`--watch`: every seat a follow of a WatchMatches stream, or a WatchMatch stream of its own."""
FOLLOWS_PER_STREAM = 500
"""Follows a WatchMatches stream carries (the most a request may give): the seats of 250
matches."""
SETUP_CONCURRENCY = 16
"""Matches a client process creates, seats and watches at once."""
SPARE_WATCHERS = 64
"""Stream slots the server keeps beyond the benchmark's own."""
READY_TIMEOUT_S = 3600.0
SETUP_TIMEOUT_S = 60.0
"""A call making a live match, or a stream's first message, that takes longer has failed: the
matches held are those whose two streams opened."""
FOLLOWS_TIMEOUT_S = 600.0
"""A WatchMatches stream whose follows have not all had their view within this, waited for
once its client process has made all its matches, has failed."""
SETTLE_S = 3.0
"""Pause before a memory or CPU reading, for the work just asked of the server to finish."""
STACK_KB = 8192
"""The size of a thread's stack mapping (glibc's default, RLIMIT_STACK)."""


# --- the client processes ------------------------------------------------------------------


def _stub(channel: grpc.aio.Channel, name: str, response: Any, stream: bool = False) -> Any:
    make = channel.unary_stream if stream else channel.unary_unary
    return make(
        SERVICE + name,
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=response.FromString,
    )


async def _live_match(channel: grpc.aio.Channel, gate: asyncio.Semaphore) -> tuple[str, list[str]]:
    """A new 2-seat match with both seats taken: its id and the two seats' tokens."""
    options = pb.RuleOptions(clock=pb.CLOCK_FISCHER, clock_initial=CLOCK_S, clock_increment=0)
    async with gate:
        created = await _stub(channel, "CreateMatch", pb.CreateMatchResponse)(
            pb.CreateMatchRequest(seats=2, name="live bench", options=options),
            timeout=SETUP_TIMEOUT_S,
        )
        join = _stub(channel, "JoinMatch", pb.JoinMatchResponse)
        tokens = []
        for seat in range(2):
            joined = await join(
                pb.JoinMatchRequest(match_id=created.match_id, name=f"live{seat}"),
                timeout=SETUP_TIMEOUT_S,
            )
            tokens.append(joined.seat_token)
    return created.match_id, tokens


def _why(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"[:300]


async def _hold_streams(
    channels: list[grpc.aio.Channel], count: int, conn: Connection
) -> list[Any]:
    """`--watch streams`: a WatchMatch for every seat, each read up to its view. Tells the
    parent (seats watching, streams, matches failed, why) and returns the calls."""
    calls: list[Any] = []
    gate = asyncio.Semaphore(SETUP_CONCURRENCY)

    async def live(i: int) -> None:
        channel = channels[2 * i // STREAMS_PER_CHANNEL]
        match_id, tokens = await _live_match(channel, gate)
        watch = _stub(channel, "WatchMatch", pb.WatchMatchResponse, stream=True)
        for token in tokens:
            call = watch(pb.WatchMatchRequest(match_id=match_id), metadata=bearer(token))
            calls.append(call)
            first = await asyncio.wait_for(call.read(), SETUP_TIMEOUT_S)
            if first is grpc.aio.EOF or not first.HasField("view"):
                raise RuntimeError(f"match {match_id}: no view first")

    outcomes = await asyncio.gather(*(live(i) for i in range(count)), return_exceptions=True)
    failed = [o for o in outcomes if isinstance(o, BaseException)]
    open_ = sum(1 for c in calls if not c.done())
    conn.send(("ready", (open_, open_, len(failed), _why(failed[0]) if failed else "")))
    return calls


@dataclass
class Followed:
    """One WatchMatches stream of `--watch follows` and what it has received."""

    call: Any
    matches: list[str]
    """Each follow's match: follow 2k and 2k + 1 are the two seats of match k."""
    views: set[int] = field(default_factory=set)
    """The follows whose view came (a follow's first message)."""
    wrong: str = ""
    """Why the stream's seats no longer count: a message that was not what a follow should
    send, or the stream's end."""
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when every follow has its view, or the stream ended."""

    @property
    def open(self) -> bool:
        return not self.call.done() and not self.wrong

    async def read(self) -> None:
        """Read the stream until it ends (or is cancelled), checking every follow's view."""
        try:
            async for message in self.call:
                if message.HasField("view"):
                    if message.follow in self.views or message.match_id != (
                        self.matches[message.follow] if message.follow < len(self.matches) else ""
                    ):
                        self.wrong = f"follow {message.follow}: a second or misnamed view"
                    self.views.add(message.follow)
                elif message.follow not in self.views:
                    self.wrong = f"follow {message.follow}: no view first"
                elif message.ended:
                    self.wrong = f"follow {message.follow}: its match ended"
                if len(self.views) == len(self.matches):
                    self.settled.set()
            self.wrong = self.wrong or "the stream ended"
        except grpc.aio.AioRpcError as e:
            self.wrong = self.wrong or f"{e.code().name}: {e.details()}"
        finally:
            self.settled.set()

    def live_matches(self) -> int:
        """Matches both of whose seats have their view, on this stream still open."""
        if not self.open:
            return 0
        return sum(1 for k in range(0, len(self.matches), 2) if {k, k + 1} <= self.views)


async def _hold_follows(
    channels: list[grpc.aio.Channel], count: int, per_stream: int, conn: Connection
) -> tuple[list[Followed], list[asyncio.Task[None]]]:
    """`--watch follows`: the matches made `per_stream // 2` at a time, and each lot's seats
    followed on one WatchMatches stream, each follow with its seat's token, the stream read
    until every follow has its view. Tells the parent (seats with their view, streams open,
    matches failed, why) and returns the streams and their readers."""
    gate = asyncio.Semaphore(SETUP_CONCURRENCY)
    lot = max(1, per_stream // 2)
    streams: list[Followed] = []
    readers: list[asyncio.Task[None]] = []
    failures: list[BaseException] = []
    for first in range(0, count, lot):
        n = min(lot, count - first)
        made = await asyncio.gather(
            *(_live_match(channels[0], gate) for _ in range(n)), return_exceptions=True
        )
        live = [m for m in made if not isinstance(m, BaseException)]
        failures += [m for m in made if isinstance(m, BaseException)]
        if not live:
            continue
        follows = [
            pb.WatchMatchesRequest.Follow(match_id=match_id, seat_token=token)
            for match_id, tokens in live
            for token in tokens
        ]
        channel = channels[len(streams) // STREAMS_PER_CHANNEL]
        watch = _stub(channel, "WatchMatches", pb.WatchMatchesResponse, stream=True)
        call = watch(pb.WatchMatchesRequest(follows=follows))
        stream = Followed(call, [f.match_id for f in follows])
        streams.append(stream)
        readers.append(asyncio.create_task(stream.read()))
    for stream in streams:
        try:
            await asyncio.wait_for(stream.settled.wait(), FOLLOWS_TIMEOUT_S)
        except TimeoutError:
            stream.wrong = stream.wrong or f"not every view in {FOLLOWS_TIMEOUT_S:g} s"
    live_matches = sum(s.live_matches() for s in streams)
    why = _why(failures[0]) if failures else next((s.wrong for s in streams if s.wrong), "")
    seats = 2 * live_matches
    conn.send(("ready", (seats, sum(s.open for s in streams), count - live_matches, why)))
    return streams, readers


async def _hold(target: str, count: int, watch: str, per_stream: int, conn: Connection) -> None:
    """Make `count` live matches, watch both seats of each (`watch`: a WatchMatch a seat, or
    follows of WatchMatches streams of `per_stream` follows), tell the parent, hold them until
    it says stop, then tell it how many seats and streams are still open."""
    streams_wanted = 2 * count if watch == STREAMS else -(-2 * count // per_stream)
    channels = [
        grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS)
        for _ in range(max(1, -(-streams_wanted // STREAMS_PER_CHANNEL)))
    ]
    calls: list[Any] = []
    readers: list[asyncio.Task[None]] = []
    try:
        loop = asyncio.get_running_loop()
        if watch == STREAMS:
            calls = await _hold_streams(channels, count, conn)
            await loop.run_in_executor(None, conn.recv)  # the parent's "stop"
            open_ = sum(1 for c in calls if not c.done())
            conn.send(("open", (open_, open_)))
        else:
            streams, readers = await _hold_follows(channels, count, per_stream, conn)
            calls = [s.call for s in streams]
            await loop.run_in_executor(None, conn.recv)
            seats = sum(len(s.views) for s in streams if s.open)
            conn.send(("open", (seats, sum(s.open for s in streams))))
    finally:
        for c in calls:
            c.cancel()
        for r in readers:
            r.cancel()
        for ch in channels:
            await ch.close()


def hold_live(target: str, count: int, watch: str, per_stream: int, conn: Connection) -> None:
    """A client process's entry: `_hold`, any failure sent to the parent as text."""
    try:
        asyncio.run(_hold(target, count, watch, per_stream, conn))
    except BaseException as e:
        conn.send(("error", f"{type(e).__name__}: {e}"))
        raise


@dataclass
class Holders:
    """The client processes holding the live matches."""

    processes: list[Any]
    pipes: list[Connection]

    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def expect(self, what: str, timeout: float) -> list[Any]:
        """Every process's answer `what`; raises RuntimeError on an error."""
        answers = []
        deadline = time.monotonic() + timeout
        for pipe in self.pipes:
            if not pipe.poll(max(0.0, deadline - time.monotonic())):
                raise RuntimeError(f"a client process did not answer {what!r} in time")
            try:
                kind, value = pipe.recv()
            except EOFError:
                raise RuntimeError(f"a client process ended before {what!r}") from None
            if kind != what:
                raise RuntimeError(f"a client process: {value}")
            answers.append(value)
        return answers

    def stop(self) -> tuple[int, int]:
        """Seats still watching, and streams still open, when told to stop."""
        for pipe in self.pipes:
            pipe.send("stop")
        answers = self.expect("open", 60.0)
        return sum(a[0] for a in answers), sum(a[1] for a in answers)

    def close(self) -> None:
        for p in self.processes:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
                p.join()


def start_holders(
    target: str, matches: int, processes: int, watch: str, per_stream: int
) -> Holders:
    ctx = multiprocessing.get_context("spawn")
    shares = [
        matches // processes + (1 if i < matches % processes else 0) for i in range(processes)
    ]
    procs, pipes = [], []
    for share in shares:
        if share == 0:
            continue
        mine, theirs = ctx.Pipe()
        p = ctx.Process(
            target=hold_live, args=(target, share, watch, per_stream, theirs), daemon=True
        )
        p.start()
        procs.append(p)
        pipes.append(mine)
    return Holders(procs, pipes)


# --- /proc ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Memory:
    rss_kb: int
    pss_kb: int
    threads: int
    stacks_kb: int
    """Resident in the threads' stack mappings."""
    anon_kb: int
    """Resident anonymous memory outside them: the heaps (Python's, gRPC's, the C library's)."""


def _status(pid: int) -> dict[str, str]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        out[key] = value.strip()
    return out


def memory(pid: int) -> Memory:
    status = _status(pid)
    pss = 0
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            pss = int(line.split()[1])
    stacks = anon = 0
    size = 0
    named = False
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        fields = line.split()
        if "-" in fields[0] and not fields[0].endswith(":"):  # a mapping's header
            named = len(fields) >= 6
        elif fields[0] == "Size:":
            size = int(fields[1])
        elif fields[0] == "Anonymous:":
            if size == STACK_KB and not named:
                stacks += int(fields[1])
            else:
                anon += int(fields[1])
    return Memory(int(status["VmRSS"].split()[0]), pss, int(status["Threads"]), stacks, anon)


def cpu_percent(pid: int, seconds: float) -> tuple[float, dict[str, float]]:
    """The process's CPU over `seconds` as % of one core, and by thread name (%)."""
    by_thread = thread_cpu(pid)
    start_cpu, start = cpu_seconds(pid), time.perf_counter()
    time.sleep(seconds)
    used, wall = cpu_seconds(pid) - start_cpu, time.perf_counter() - start
    after = thread_cpu(pid)
    split = {k: 100 * (v - by_thread.get(k, 0.0)) / wall for k, v in after.items()}
    return 100 * used / wall, split


def _per_play(run: Any) -> dict[str, float]:
    """The server's CPU ms per Play in a `measure_rate` run, by thread name."""
    calls = len(run.latencies)
    return {k: 1000 * v / calls for k, v in (run.server_cpu or {}).items() if calls}


def _timeouts(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM events WHERE type = 'TimedOut'").fetchone()
    return int(row[0]) if row else 0


# --- the run -------------------------------------------------------------------------------


@dataclass
class Figures:
    matches: int
    watch: str = FOLLOWS
    per_stream: int = FOLLOWS_PER_STREAM
    idle_p50: float = 0.0
    idle_p99: float = 0.0
    idle_rate: float = 0.0
    empty_cpu: float = 0.0
    before: Memory | None = None
    after: Memory | None = None
    seats: int = 0
    """Seats watching with their view: a stream each (`streams`), or a follow each."""
    streams: int = 0
    """Watch streams open: one a seat, or one a `per_stream` follows."""
    failed: int = 0
    """Matches whose making or watching failed (SETUP_TIMEOUT_S, or refused)."""
    why: str = ""
    setup_s: float = 0.0
    rest_cpu: float = 0.0
    rest_split: dict[str, float] = field(default_factory=dict)
    clients_cpu: float = 0.0
    loaded_p50: float = 0.0
    loaded_p99: float = 0.0
    loaded_rate: float = 0.0
    idle_cpu: dict[str, float] = field(default_factory=dict)
    """The server's CPU ms per Play by thread name, on the idle server."""
    loaded_cpu: dict[str, float] = field(default_factory=dict)
    still_open: int = 0
    """Seats still watching at the end."""
    streams_open: int = 0
    timeouts: int = 0


def run(url: str, folder: Path, args: argparse.Namespace) -> Figures:
    f = Figures(args.matches, args.watch, args.follows_per_stream)
    # The same server in both modes: a stream slot and a follow for every seat.
    slots = str(2 * args.matches + SPARE_WATCHERS)
    extra = ["--max-watchers", slots, "--max-follows", slots]
    with serving(url, folder, "live", extra) as server:
        pid = server.process.pid
        say(f"  reference: {args.clients} clients' Play for {args.seconds:g} s, idle server")
        idle = measure_rate(OURS, server.target, args.clients, args.seconds, 1, pid)
        f.idle_p50 = percentile(idle.latencies, 50) * 1000
        f.idle_p99 = percentile(idle.latencies, 99) * 1000
        f.idle_rate = idle.rate
        f.idle_cpu = _per_play(idle)
        say(f"    p50/p99 {f.idle_p50:.2f}/{f.idle_p99:.2f} ms, {idle.rate:,.0f} Play/s")
        time.sleep(SETTLE_S)
        f.empty_cpu, _ = cpu_percent(pid, args.idle_empty)
        say(f"  CPU with no match live: {f.empty_cpu:.2f}% of a core")
        f.before = memory(pid)
        say(f"  memory before: {f.before}")
        say(f"  making {args.matches:,} live matches, {_watched(f)}, in"
            f" {args.client_processes} client processes")  # fmt: skip
        started = time.perf_counter()
        holders = start_holders(
            server.target, args.matches, args.client_processes, args.watch, f.per_stream
        )
        try:
            ready = holders.expect("ready", READY_TIMEOUT_S)
            f.setup_s = time.perf_counter() - started
            f.seats = sum(r[0] for r in ready)
            f.streams = sum(r[1] for r in ready)
            f.failed = sum(r[2] for r in ready)
            f.why = next((r[3] for r in ready if r[3]), "")
            say(f"    {f.seats:,} seats watching, each with its view, on {f.streams:,} streams,"
                f" in {f.setup_s:.0f} s")  # fmt: skip
            if f.failed:
                say(f"    {f.failed:,} matches could not be made live: {f.why}")
            time.sleep(SETTLE_S)
            f.after = memory(pid)
            say(f"  memory after: {f.after}")
            say(f"  at rest: the server's CPU over {args.idle:g} s")
            clients_before = sum(cpu_seconds(p) for p in holders.pids())
            t = time.perf_counter()
            f.rest_cpu, f.rest_split = cpu_percent(pid, args.idle)
            clients_used = sum(cpu_seconds(p) for p in holders.pids()) - clients_before
            f.clients_cpu = 100 * clients_used / (time.perf_counter() - t)
            say(f"    {f.rest_cpu:.2f}% of a core (the clients {f.clients_cpu:.2f}%)")
            say(f"  under load: {args.clients} clients' Play for {args.seconds:g} s")
            loaded = measure_rate(OURS, server.target, args.clients, args.seconds, 2, pid)
            f.loaded_p50 = percentile(loaded.latencies, 50) * 1000
            f.loaded_p99 = percentile(loaded.latencies, 99) * 1000
            f.loaded_rate = loaded.rate
            f.loaded_cpu = _per_play(loaded)
            say(f"    p50/p99 {f.loaded_p50:.2f}/{f.loaded_p99:.2f} ms, {loaded.rate:,.0f} Play/s")
            f.still_open, f.streams_open = holders.stop()
        finally:
            holders.close()
        f.timeouts = _timeouts(url)
    return f


def _watched(f: Figures) -> str:
    """How the seats are watched, in words."""
    if f.watch == STREAMS:
        return "every seat a WatchMatch stream of its own"
    return f"every seat a follow of a WatchMatches stream of up to {f.per_stream} follows"


def lines(f: Figures) -> list[Line]:
    assert f.before is not None and f.after is not None
    n = max(1, f.seats // 2)
    rss = (f.after.rss_kb - f.before.rss_kb) / n
    pss = (f.after.pss_kb - f.before.pss_kb) / n
    ratio = f.loaded_p99 / f.idle_p99
    return [
        Line(
            f"Server memory per live match (RSS), KB, {n:,} matches"
            + ("" if n == f.matches else f" of {f.matches:,}"),
            f"{rss:.1f}",
            f"{f.before.rss_kb / 1024:,.0f} MiB before",
            None,
            f"< {MEMORY_GOAL_KB:g} KB",
            rss < MEMORY_GOAL_KB,
        ),
        Line(
            "  the same by PSS, KB",
            f"{pss:.1f}",
            f"{f.before.pss_kb / 1024:,.0f} MiB before",
        ),
        Line(
            "  of which thread stacks, KB",
            f"{(f.after.stacks_kb - f.before.stacks_kb) / n:.1f}",
            f"{f.after.threads - f.before.threads:+,} threads",
        ),
        Line(
            "  of which the rest of the anonymous memory, KB",
            f"{(f.after.anon_kb - f.before.anon_kb) / n:.1f}",
        ),
        Line(
            "Server CPU at rest, clocks running, % of one core",
            f"{f.rest_cpu:.2f}%",
            f"{f.empty_cpu:.2f}% no match live",
            None,
            f"< {CPU_GOAL_PERCENT:g}%",
            f.rest_cpu < CPU_GOAL_PERCENT,
        ),
        Line(
            "Play p99, 8 clients, live load vs idle server, ms",
            f"{f.loaded_p99:.2f}",
            f"{f.idle_p99:.2f}",
            ratio,
            f"< {P99_GOAL_RATIO:g}x",
            ratio < P99_GOAL_RATIO,
        ),
        Line("Play p50, ms", f"{f.loaded_p50:.2f}", f"{f.idle_p50:.2f}", f.loaded_p50 / f.idle_p50),
        Line("Play/s", f"{f.loaded_rate:,.0f}", f"{f.idle_rate:,.0f}", f.loaded_rate / f.idle_rate),
        Line(
            "Server CPU per Play, ms",
            f"{sum(f.loaded_cpu.values()):.2f}",
            f"{sum(f.idle_cpu.values()):.2f}",
            sum(f.loaded_cpu.values()) / max(1e-9, sum(f.idle_cpu.values())),
        ),
    ]


def report(f: Figures) -> None:
    found = lines(f)
    print()
    SERVICE_TABLE.print(found, f"--watch {f.watch}: {_watched(f)}, {f.streams:,} streams")
    print(harness.goals_line(found))
    top = sorted(f.rest_split.items(), key=lambda kv: -kv[1])[:6]
    print("CPU at rest by thread: " + ", ".join(f"{k} {v:.2f}%" for k, v in top))
    for name, split in (("idle", f.idle_cpu), ("loaded", f.loaded_cpu)):
        top = sorted(split.items(), key=lambda kv: -kv[1])[:5]
        print(f"CPU ms per Play, {name}, by thread: " + ", ".join(f"{k} {v:.2f}" for k, v in top))
    print(
        f"seats watching: {f.seats:,} on {f.streams:,} streams, opened in {f.setup_s:.0f} s"
        f" ({f.failed:,} matches failed{': ' + f.why if f.why else ''}); at the end"
        f" {f.still_open:,} seats watching on {f.streams_open:,} streams still open;"
        f" timeouts written: {f.timeouts}; the client processes at rest:"
        f" {f.clients_cpu:.2f}% of a core"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.live_bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    harness.add_database_url(parser)
    quick_or = harness.quick_or
    parser.add_argument(
        "--matches", type=int, default=quick_or(10_000, 1_000), help="live matches held"
    )
    parser.add_argument("--clients", type=int, default=8, help="Play clients")
    parser.add_argument(
        "--seconds", type=float, default=quick_or(15.0, 2.0), help="of Play, each condition"
    )
    parser.add_argument(
        "--idle", type=float, default=quick_or(30.0, 3.0), help="CPU window at rest, s"
    )
    parser.add_argument(
        "--idle-empty", type=float, default=quick_or(10.0, 2.0), help="CPU window, no match, s"
    )
    parser.add_argument(
        "--client-processes", type=int, default=2, help="processes holding the streams"
    )
    parser.add_argument(
        "--watch",
        choices=WATCH_MODES,
        default=FOLLOWS,
        help="how the seats are watched: follows of WatchMatches streams (the default), or a "
        "WatchMatch stream a seat",
    )
    parser.add_argument(
        "--follows-per-stream",
        type=int,
        default=FOLLOWS_PER_STREAM,
        help="follows a WatchMatches stream carries (--watch follows; at most 500)",
    )
    args = parser.parse_args(argv)
    if not 2 <= args.follows_per_stream <= FOLLOWS_PER_STREAM:
        parser.error(f"--follows-per-stream: 2 to {FOLLOWS_PER_STREAM}")
    say(f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f} at the start")
    with (
        bench_database(args.database_url) as url,
        tempfile.TemporaryDirectory(prefix="bergen-live-") as tmp,
    ):
        figures = run(url, Path(tmp), args)
    say(f"load average {os.getloadavg()[0]:.1f} at the end")
    report(figures)
    return ExitStatus.OK


if __name__ == "__main__":
    sys.exit(main())
