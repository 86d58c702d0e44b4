"""Play latency of honest clients while abusive clients list, create and watch, on PostgreSQL.

    python -m bench abuse         (or: python -m bench.abuse_bench --seconds 5 --rounds 2)

One `bergen serve` with its default settings and limits, in a PostgreSQL database made for
the run (from BERGEN_BENCH_DATABASE_URL, default postgresql://postgres@127.0.0.1:5432/postgres)
and dropped afterwards. Its per-client limits spare loopback peers unless told
`--limit-loopback`, which it is given when it has it, since every client here is on this
machine. It listens on localhost, that is on 127.0.0.1 and ::1 with one port, so that the
two kinds of client reach it from different peer addresses and a limit per address tells
them apart (the 4 abusers share 127.0.0.1: a limit per address holds them together). The
honest matches are created and seated beforehand through another server on the same
database, without limits on loopback. Everything is on the loopback interface, and the run
stops by itself after (5 conditions x --rounds windows of --seconds) plus set-up.

- Honest: 8 clients, threads of this process with a channel each to [::1], each playing its
  own two-seat match (both seats, choosing among the legal plays: `grpc_bench.Player`). The
  matches are played to 1000 points, so that an honest client creates and joins once, before
  the first window, and not while it is timed. Only Play calls are timed; a Play that fails
  (any status but the rules' refusal) is counted as failed, and the goal allows none. The
  clients warm up once, playing 5 s before the first window.
- Abusive: 4 clients, each a process of its own (grpc.aio) to 127.0.0.1, run at nice 10 so
  that their own client-side work, which a real attacker does on other machines, takes less
  of the 2 cores from the server and the honest clients:
  - list: ListMatches, 100 to a page, walking every page and starting again, 8 in flight;
  - create: CreateMatch, 8 in flight;
  - watch: WatchMatch on the honest matches (the listing shows their ids to anyone), as many
    streams as the server lets it open, each read and held; a stream the server ends or
    refuses is opened again.
  A refusal carrying a retry hint (google.rpc.RetryInfo) is waited out; any other is tried
  again at once.

Conditions: alone (no abuser), then the 4 abusers doing only `list`, only `create`, only
`watch`, and all three at once (`all`), in a rotating order in each round so that drift on
a shared machine falls on all alike; the abusers start a second before a window opens.
Figures: Play p50 and p99 of the pooled windows of each condition, and p99 over p99 alone.
Goal (issue 10): p99 with all the abusers within 2x of p99 alone.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import multiprocessing as mp
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from bench import harness
from bench.grpc_bench import (
    CALL_TIMEOUT,
    CHANNEL_OPTIONS,
    SERVICE,
    START_TIMEOUT,
    WARMUP_CALLS,
    Calls,
    Player,
    Tally,
    bergen_command,
    launch_server,
    open_channel,
    stop_server,
    wait_for_port,
)
from bench.harness import Column, ExitStatus, Row, Table, percentile
from bench.store_bench import bench_database
from bergen.v1 import bergen_pb2 as pb

HONEST = 8
ABUSERS = 4
TARGET = 1000
"""Points an honest match is played to: long enough that no honest client starts another
match in a run."""
GOAL_RATIO = 2.0
ALONE, LIST, CREATE, WATCH, ALL = "alone", "list", "create", "watch", "all"
CONDITIONS = (ALONE, LIST, CREATE, WATCH, ALL)
KINDS = {LIST: (LIST,), CREATE: (CREATE,), WATCH: (WATCH,), ALL: (LIST, CREATE, WATCH)}
IN_FLIGHT = 8
"""Calls each abuser keeps in flight when listing or creating."""
STREAMS = 400
"""Streams each abuser tries to hold by default: more than the server's whole default
(200)."""
STREAMS_PER_CHANNEL = 50
RAMP_S = 1.0
"""Abusers run this long before a window opens, so that the streams are open."""
WARMUP_S = 5.0
"""Play, untimed, before the first window: the measured server starts cold (it folds each
honest match on its first call) and so does PostgreSQL's cache."""
WINDOW_WARMUP = 2
"""Untimed calls before each window: the clients and the server were warmed up once, before
the first (WARMUP_CALLS each), and a Play may take seconds under abuse."""
SETUP_PATIENCE_S = 300.0
"""How long an honest client waits out refusals (with a retry hint) to create and join."""


# --- refusals ------------------------------------------------------------------------------


def retry_hint(error: grpc.RpcError) -> float | None:
    """The seconds a refusal asks the caller to wait (google.rpc.RetryInfo), or None."""
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    if status is None:
        return None
    for detail in status.details:
        if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            info = error_details_pb2.RetryInfo()
            detail.Unpack(info)
            return float(info.retry_delay.ToTimedelta().total_seconds())
    return None


# --- honest clients ------------------------------------------------------------------------


class _LongMatches(Calls):
    """The Play benchmark's calls, with matches played to TARGET points, and creation and
    joins that wait out a refusal with a retry hint (they are set-up, never timed). `use`
    moves them to another channel (another server on the same database)."""

    def __init__(self, channel: grpc.Channel) -> None:
        self.use(channel)

    def use(self, channel: grpc.Channel) -> None:
        super().__init__(channel)
        create, join = self.create, self.join

        def long_create(request: pb.CreateMatchRequest, **kwargs: Any) -> Any:
            request.options.target = TARGET
            return _patient(create, request, **kwargs)

        self.create = long_create
        self.join = lambda request, **kwargs: _patient(join, request, **kwargs)


def _patient(call: Callable[..., Any], request: Any, **kwargs: Any) -> Any:
    """`call(request)`, waiting out refusals that carry a retry hint. Raises grpc.RpcError
    for any other failure, or once SETUP_PATIENCE_S has passed."""
    deadline = time.monotonic() + SETUP_PATIENCE_S
    while True:
        try:
            return call(request, **kwargs)
        except grpc.RpcError as e:
            hint = retry_hint(e)
            if hint is None or time.monotonic() + hint > deadline:
                raise
            time.sleep(hint)


@dataclass
class Window:
    latencies: list[float]
    seconds: float
    failed: list[str]
    """Status code names of the Play calls that failed (not refused by the rules)."""

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.seconds


def _honest_loop(
    player: Player,
    warmup: int,
    start: threading.Barrier,
    stop_at: list[float],
    tally: Tally,
    failed: list[str],
) -> None:
    """As `grpc_bench._client_loop`, except that a call that fails is counted in `failed`
    instead of ending the run: a play that fails is what an honest client suffers under
    abuse. The player finds out from the next refusal whether a failed play was applied."""
    for _ in range(warmup):
        with suppress(grpc.RpcError):
            player.play(*player.next_request())
    start.wait()
    end = stop_at[0]
    now = time.perf_counter
    while now() < end:
        try:
            request, metadata = player.next_request()
        except grpc.RpcError:
            continue  # a failed GetMatch: untimed, tried again
        if now() >= end:
            return
        t0 = now()
        try:
            done = player.play(request, metadata)
        except grpc.RpcError as e:
            failed.append(e.code().name)
            continue
        t1 = now()
        if done:
            tally.latencies.append(t1 - t0)


def honest_window(players: Sequence[Player], seconds: float, warmup: int = WINDOW_WARMUP) -> Window:
    """Every player plays `warmup` untimed calls, then for `seconds`; their Play latencies. Raises
    RuntimeError when a client fails other than by a failed call."""
    stop_at = [0.0]

    def open_window() -> None:  # run once, when the last client is warm
        stop_at[0] = time.perf_counter() + seconds

    start = threading.Barrier(len(players) + 1, action=open_window)
    tallies = [Tally() for _ in players]
    failed: list[str] = []
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            _honest_loop(players[i], warmup, start, stop_at, tallies[i], failed)
        except BaseException as e:
            errors.append(e)
            start.abort()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(players))]
    for t in threads:
        t.start()
    with suppress(threading.BrokenBarrierError):  # a client failed: its error is raised below
        start.wait()
    for t in threads:
        t.join(timeout=seconds + 2 * CALL_TIMEOUT)
    if errors:
        raise RuntimeError(f"an honest client failed: {errors[0]!r}") from errors[0]
    return Window([x for t in tallies for x in t.latencies], seconds, failed)


# --- abusive clients (each a process of its own) -------------------------------------------


@dataclass
class Abuse:
    """What one abuser did in one window, by kind: calls answered, refused (any status)."""

    ok: dict[str, int] = field(default_factory=dict)
    refused: dict[str, int] = field(default_factory=dict)
    codes: dict[str, int] = field(default_factory=dict)
    """Refusals by status code name."""
    max_open: int = 0
    """The most watch streams this abuser held at once."""
    seconds: float = 0.0

    def count(self, kind: str, error: grpc.RpcError | None = None) -> None:
        book = self.ok if error is None else self.refused
        book[kind] = book.get(kind, 0) + 1
        if error is not None:
            name = error.code().name
            self.codes[name] = self.codes.get(name, 0) + 1


async def _pause_after(error: grpc.RpcError, pause: float) -> None:
    """Wait out a refusal: its retry hint, else `pause` seconds."""
    hint = retry_hint(error)
    await asyncio.sleep(hint if hint is not None else pause)


async def _lister(
    channel: grpc.aio.Channel, abuse: Abuse, rng: random.Random, pause: float
) -> None:
    call = channel.unary_unary(
        SERVICE + "ListMatches",
        request_serializer=pb.ListMatchesRequest.SerializeToString,
        response_deserializer=pb.ListMatchesResponse.FromString,
    )
    token = ""
    while True:
        request = pb.ListMatchesRequest(page_size=100, page_token=token)
        if not token and rng.random() < 0.3:
            request.phase = rng.choice((pb.PHASE_SEATING, pb.PHASE_PLAYING, pb.PHASE_ENDED))
        try:
            response = await call(request, timeout=CALL_TIMEOUT)
        except grpc.aio.AioRpcError as e:
            abuse.count(LIST, e)
            token = ""
            await _pause_after(e, pause)
            continue
        abuse.count(LIST)
        token = response.next_page_token


async def _creator(channel: grpc.aio.Channel, abuse: Abuse, number: int, pause: float) -> None:
    call = channel.unary_unary(
        SERVICE + "CreateMatch",
        request_serializer=pb.CreateMatchRequest.SerializeToString,
        response_deserializer=pb.CreateMatchResponse.FromString,
    )
    made = 0
    while True:
        made += 1
        request = pb.CreateMatchRequest(seats=4, name=f"spam {number}-{made}")
        try:
            await call(request, timeout=CALL_TIMEOUT)
        except grpc.aio.AioRpcError as e:
            abuse.count(CREATE, e)
            await _pause_after(e, pause)
            continue
        abuse.count(CREATE)


async def _watcher(
    channel: grpc.aio.Channel, abuse: Abuse, match_id: str, holding: list[int], pause: float
) -> None:
    call = channel.unary_stream(
        SERVICE + "WatchMatch",
        request_serializer=pb.WatchMatchRequest.SerializeToString,
        response_deserializer=pb.WatchMatchResponse.FromString,
    )
    while True:
        opened = False
        try:
            async for _ in call(pb.WatchMatchRequest(match_id=match_id)):
                if not opened:
                    opened = True
                    abuse.count(WATCH)
                    holding[0] += 1
                    abuse.max_open = max(abuse.max_open, holding[0])
        except grpc.aio.AioRpcError as e:
            if not opened:
                abuse.count(WATCH, e)
                await _pause_after(e, pause)
        finally:
            if opened:
                holding[0] -= 1


async def _abuse(
    target: str,
    kinds: Sequence[str],
    match_ids: Sequence[str],
    pause: float,
    streams: int,
    number: int,
    stop: Any,
) -> Abuse:
    abuse = Abuse()
    rng = random.Random(number)
    streams = streams if WATCH in kinds else 0
    channels = [
        grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS)
        for _ in range(1 + -(-streams // STREAMS_PER_CHANNEL))
    ]
    holding = [0]
    tasks: list[asyncio.Task[None]] = []
    if LIST in kinds:
        tasks += [
            asyncio.create_task(_lister(channels[0], abuse, rng, pause)) for _ in range(IN_FLIGHT)
        ]
    if CREATE in kinds:
        tasks += [
            asyncio.create_task(_creator(channels[0], abuse, number, pause))
            for _ in range(IN_FLIGHT)
        ]
    for i in range(streams):
        channel = channels[1 + i // STREAMS_PER_CHANNEL]
        match_id = match_ids[(number + i) % len(match_ids)]
        tasks.append(asyncio.create_task(_watcher(channel, abuse, match_id, holding, pause)))
    started = time.perf_counter()
    try:
        while not stop.is_set():
            await asyncio.sleep(0.05)
            for task in tasks:
                if task.done() and not task.cancelled() and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
    finally:
        abuse.seconds = time.perf_counter() - started
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for channel in channels:
            await channel.close()
    return abuse


def _abuser_process(
    target: str, number: int, nice: int, orders: Any, results: Any, stop: Any
) -> None:
    """Runs the windows it is told to (`(kinds, match_ids)`, until None) and puts an Abuse, or
    the text of an error, for each."""
    os.nice(nice)
    while True:
        order = orders.get()
        if order is None:
            return
        kinds, match_ids, pause, streams = order
        try:
            results.put(asyncio.run(_abuse(target, kinds, match_ids, pause, streams, number, stop)))
        except BaseException as e:
            results.put(f"abuser {number}: {e!r}")


class Abusers:
    """ABUSERS processes, each told in turn to abuse until stopped."""

    def __init__(self, target: str, nice: int) -> None:
        ctx = mp.get_context("spawn")
        self._stop = ctx.Event()
        self._results = ctx.Queue()
        self._orders = [ctx.Queue() for _ in range(ABUSERS)]
        self._procs = [
            ctx.Process(
                target=_abuser_process,
                args=(target, i, nice, self._orders[i], self._results, self._stop),
                daemon=True,
            )
            for i in range(ABUSERS)
        ]
        for proc in self._procs:
            proc.start()

    def start(
        self, kinds: Sequence[str], match_ids: Sequence[str], pause: float, streams: int
    ) -> None:
        """Start abusing: `kinds` of abuse, up to `streams` streams each on `match_ids`,
        waiting `pause` seconds after a refusal without a retry hint."""
        self._stop.clear()
        for queue in self._orders:
            queue.put((tuple(kinds), list(match_ids), pause, streams))

    def stop(self) -> list[Abuse]:
        """Stop the window; what each abuser did. Raises RuntimeError if one failed."""
        self._stop.set()
        outcomes = [self._results.get(timeout=60) for _ in range(ABUSERS)]
        failed = [o for o in outcomes if isinstance(o, str)]
        if failed:
            raise RuntimeError(failed[0])
        return outcomes

    def close(self) -> None:
        for queue in self._orders:
            queue.put(None)
        for proc in self._procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.terminate()
                proc.join()


# --- the run -------------------------------------------------------------------------------


def _ms(latencies: Sequence[float], p: int) -> float:
    """The p-th percentile in ms; NaN with fewer than two (a window where Play starved)."""
    return percentile(latencies, p) * 1000 if len(latencies) >= 2 else math.nan


@dataclass
class Figures:
    windows: list[Window] = field(default_factory=list)
    abuse: list[Abuse] = field(default_factory=list)

    @property
    def latencies(self) -> list[float]:
        return [x for w in self.windows for x in w.latencies]

    def ms(self, p: int) -> float:
        return _ms(self.latencies, p)

    @property
    def rate(self) -> float:
        return statistics.median(w.rate for w in self.windows)

    @property
    def failed(self) -> int:
        return sum(len(w.failed) for w in self.windows)

    def failures(self) -> str:
        """The failed Play calls by status, or "" for none."""
        codes = Counter(c for w in self.windows for c in w.failed)
        return ", ".join(f"{n} {code}" for code, n in codes.most_common())

    def abusive(self) -> str:
        """The abusers' calls per second, answered / refused, by kind; streams held."""
        if not self.abuse:
            return ""
        seconds = sum(a.seconds for a in self.abuse) / ABUSERS
        parts = []
        for kind in (LIST, CREATE, WATCH):
            ok = sum(a.ok.get(kind, 0) for a in self.abuse)
            refused = sum(a.refused.get(kind, 0) for a in self.abuse)
            if ok or refused:
                unit = "opened" if kind == WATCH else "/s"
                if kind == WATCH:
                    parts.append(f"{kind} {ok} {unit}, {refused / seconds:,.0f}/s refused")
                else:
                    parts.append(
                        f"{kind} {ok / seconds:,.0f}{unit} ({refused / seconds:,.0f} refused)"
                    )
        rounds = max(1, len(self.windows))
        held = sum(a.max_open for a in self.abuse) / rounds
        if held:
            parts.append(f"~{held:.0f} streams held")
        return "; ".join(parts)


def _serve_command(url: str, port_file: Path) -> list[str]:
    """`bergen serve` on localhost (127.0.0.1 and ::1, one port)."""
    command = bergen_command(url, port_file)
    command[command.index("--listen") + 1] = "localhost:0"
    return command


def limits_loopback_flag(url: str) -> list[str]:
    """`--limit-loopback` when this `bergen serve` has it (its per-client limits spare
    loopback peers by default, and every client here is one), else nothing."""
    command = bergen_command(url, Path("unused"))
    help_text = subprocess.run(
        [*command[: command.index("serve") + 1], "--help"],
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT,
    ).stdout
    return ["--limit-loopback"] if "--limit-loopback" in help_text else []


@contextmanager
def serving(name: str, command: list[str], folder: Path) -> Iterator[int]:
    """A server started with `command` (its port file named `name`.port); yields its port
    and stops it (SIGTERM) at the end. Raises RuntimeError if it does not start."""
    proc = launch_server(name, command, folder)
    try:
        yield wait_for_port(name, proc, folder / f"{name}.port", folder / f"{name}.log")
    finally:
        stop_server(proc)


def run(
    url: str,
    folder: Path,
    seconds: float,
    rounds: int,
    nice: int,
    pause: float,
    streams: int,
    unlimited: bool,
    say: Callable[[str], None],
) -> dict[str, Figures]:
    """The whole measurement over `url`; figures by condition. Raises RuntimeError when a
    server does not start or a client fails.

    The honest matches are created and seated through a first server without per-client
    limits on loopback (the honest clients would otherwise wait minutes for their joins),
    then played on a second over the same database, started with its limits on loopback
    (`--limit-loopback`) when it has them, unless `unlimited`."""
    limited = [] if unlimited else limits_loopback_flag(url)
    with serving("setup", _serve_command(url, folder / "setup.port"), folder) as port:
        channels = [open_channel(f"[::1]:{port}") for _ in range(HONEST)]
        honest = [_LongMatches(channel) for channel in channels]
        players = [Player(calls, random.Random(i)) for i, calls in enumerate(honest)]
        for channel in channels:
            channel.close()
    match_ids = [p.match_id for p in players]
    command = [*_serve_command(url, folder / "bergen.port"), *limited]
    say(f"  the measured server: {' '.join(command[command.index('serve') :])}")
    abusers: Abusers | None = None
    channels = []
    try:
        with serving("bergen", command, folder) as port:
            channels = [open_channel(f"[::1]:{port}") for _ in range(HONEST)]
            for calls, channel in zip(honest, channels, strict=True):
                calls.use(channel)
            honest_window(players, WARMUP_S, WARMUP_CALLS)  # discarded
            abusers = running = Abusers(f"127.0.0.1:{port}", nice)
            figures = {c: Figures() for c in CONDITIONS}

            def measure(condition: str, r: int) -> Window:
                if condition != ALONE:
                    running.start(KINDS[condition], match_ids, pause, streams)
                    time.sleep(RAMP_S)
                window = honest_window(players, seconds)
                figures[condition].windows.append(window)
                if condition != ALONE:
                    figures[condition].abuse += running.stop()
                say(
                    f"  round {r + 1}, {condition:>6}: Play p50/p99 "
                    f"{_ms(window.latencies, 50):.2f}/{_ms(window.latencies, 99):.2f} ms, "
                    f"{window.rate:,.0f}/s"
                    + (f", {len(window.failed)} FAILED" if window.failed else "")
                )
                return window

            harness.rounds(CONDITIONS, rounds, measure)
            return figures
    except BaseException:
        log = (folder / "bergen.log").read_text(errors="replace")
        say(f"the server's log, last lines:\n{log[-3000:]}")
        raise
    finally:
        if abusers is not None:
            abusers.close()
        for channel in channels:
            channel.close()


TABLE = Table(
    (
        Column("abusers", 8, "<"),
        Column("Play p50/p99 ms", 16),
        Column("Play/s", 7),
        Column("failed", 6),
        Column("p99 ratio", 9),
        Column("abusive calls", 0, "<", gap="  "),
    ),
    verdicts=False,
    rule=110,
)


def print_table(figures: dict[str, Figures]) -> None:
    """The table of the conditions, the goal's verdict on the row of every abuse at once,
    then the failed calls of each condition."""
    alone = figures[ALONE].ms(99)
    rows = []
    for condition in CONDITIONS:
        f = figures[condition]
        ratio = f.ms(99) / alone
        goal = ""
        if condition == ALL:
            met = ratio <= GOAL_RATIO and not f.failed
            goal = f"  goal p99 ratio <= {GOAL_RATIO:.0f}, none failed: {harness.verdict(met)}"
        cells = (
            condition,
            f"{f.ms(50):>7.2f}/{f.ms(99):<8.2f}",
            f"{f.rate:,.0f}",
            str(f.failed),
            f"{ratio:.2f}",
            f"{f.abusive()}{goal}",
        )
        rows.append(Row(cells))
    TABLE.print(rows)
    for condition in CONDITIONS:
        if figures[condition].failed:
            print(f"failed Play calls, {condition}: {figures[condition].failures()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.abuse_bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    harness.add_database_url(parser)
    quick_or = harness.quick_or
    parser.add_argument("--seconds", type=float, default=quick_or(5.0, 1.0), help="per window")
    parser.add_argument(
        "--rounds", type=int, default=quick_or(2, 1), help="windows per condition (pooled)"
    )
    parser.add_argument("--nice", type=int, default=10, help="niceness of the abusers' processes")
    parser.add_argument(
        "--pause",
        type=float,
        default=0.0,
        help="seconds an abuser waits after a refusal without a retry hint (0: tries again"
        " at once, as fast as it can)",
    )
    parser.add_argument(
        "--streams", type=int, default=STREAMS, help="watch streams each abuser tries to hold"
    )
    parser.add_argument(
        "--unlimited",
        action="store_true",
        help="leave the loopback clients out of the per-client limits (as before there were any)",
    )
    args = parser.parse_args(argv)
    say = harness.say
    say(
        f"{os.cpu_count()} cores; {HONEST} honest clients (threads, [::1]) play their own"
        f" matches; {ABUSERS} abusers (processes at nice {args.nice}, 127.0.0.1);"
        f" {args.rounds} windows of {args.seconds:g} s per condition; only Play is timed;"
        f" a refusal without a retry hint is tried again after {args.pause:g} s."
    )
    with (
        bench_database(args.database_url) as url,
        tempfile.TemporaryDirectory(prefix="bergen-abuse-bench-") as tmp,
    ):
        figures = run(
            url,
            Path(tmp),
            args.seconds,
            args.rounds,
            args.nice,
            args.pause,
            args.streams,
            args.unlimited,
            say,
        )
    print()
    print_table(figures)
    return ExitStatus.OK


if __name__ == "__main__":
    sys.exit(main())
