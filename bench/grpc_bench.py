"""The gRPC service against its references, on PostgreSQL, in one run.

    python -m bench grpc            (or: python -m bench.grpc_bench --seconds 3 --rounds 3)

Every server is a separate process, started on a PostgreSQL database made for the run (from
BERGEN_BENCH_DATABASE_URL, default postgresql://postgres@127.0.0.1:5432/postgres) and dropped
afterwards:

- ours: `bergen serve` (its default settings and logging);
- the serial limit: `bench._ref_server --kind insert`, the same gRPC settings (thread pool,
  message limits, options) with a `Play` handler that does nothing but one INSERT + COMMIT of a
  row like an event through psycopg 3;
- the peer: `bench._ref_server --kind eventsourcing`, the same settings with a handler that
  saves one event through the `eventsourcing` library (PostgreSQL), one aggregate per client.

Throughput: 1, 8 and 32 clients (threads of this process, one channel and one connection each),
each on its own match (our server) or stream (the references). A client of our server sends
`Play` for whichever seat's turn it is, choosing among that seat's legal plays (see `Player`:
it fetches a seat's view with `GetMatch` only when that seat's hand changed out of its sight,
about 0.3 times per Play), and when a match ends it starts another. Only `Play` calls are
counted and timed (GetMatch and new matches are not): a
client's rate is its Play calls over the time spent inside them, summed over clients. Each
figure is the median of `--rounds` runs of `--seconds`, the servers taking turns in a rotating
order so drift on a shared machine falls on all of them alike. Then again at 8 and 32 clients
with every server as 2 processes on one port (`bergen serve --workers 2`; the references forked
twice, `--processes 2`). The goals (issue 14, part 3) hold at one process, 1 and 8 clients:
Play/s >= 0.85 of the serial limit and >= 1.5x eventsourcing, p99 at 8 clients <= the limit's.

Delivery: spectators stream `WatchMatch` (grpc.aio, a separate process, one channel each) on
one match while one client plays it at a steady pace (a play every 100 ms: ten times a brisk
human, and below the rate that saturates a 2-core machine); delivery latency is the time from the
return of the Play call that wrote an event to each watcher receiving it, matched by seq
(perf_counter is the system's monotonic clock, shared by the processes). The watchers ask for
`batched` streams (the two or three events a play writes come in one message);
`--one-event-a-message` measures the streams of clients that do not.

- Replicas (issue 4, part 4, goal p99 <= 100 ms): 10 watchers on a second replica (B), the
  plays sent to the first (A), so every event crosses PostgreSQL NOTIFY and B's read.
- Fan-out (issue 14, part 3, goal p99 <= 50 ms on one server, <= 100 ms across replicas):
  100 watchers, once on a single server, once on B.
- Play/s beside the watchers (issue 14, part 3, reported): `--watched-clients` clients (8),
  each on a match of its own, for `--seconds`, alone and then while the 100 watchers follow
  a match played at the same pace on the same server, `--rounds` times in turn; the ratio
  is Play/s beside them over Play/s alone.

`--parts fanout` runs only the delivery part (and the Play/s beside the watchers).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from bench import harness
from bench.harness import SERVICE_TABLE, ExitStatus, Line, percentile, say
from bench.store_bench import bench_database
from bergen.v1 import bergen_pb2 as pb

SERVICE = f"/{pb.DESCRIPTOR.services_by_name['BergenService'].full_name}/"
CALL_TIMEOUT = 30.0
START_TIMEOUT = 60.0
WARMUP_CALLS = 20
CHANNEL_OPTIONS = [("grpc.use_local_subchannel_pool", 1)]
"""A connection of its own per channel, as separate clients would have."""

OURS, LIMIT, PEER = "bergen", "limit", "peer"
KINDS = (OURS, LIMIT, PEER)
REFERENCE_RATES = {(LIMIT, 1): 850, (LIMIT, 8): 1480, (PEER, 1): 560, (PEER, 8): 780}
"""Calls per second measured on this kind of machine (issue 4), for orientation only."""
REPLICA_GOAL_MS = 100.0
"""Issue 4, part 4: a watcher receives events written through another replica within 100 ms
at p99."""
REPLICA_WATCHERS = 10
FANOUT_GOAL_MS = 50.0
"""Issue 14, part 3: 100 spectators of one match receive each event within 50 ms at p99 on
one server (and within REPLICA_GOAL_MS across replicas)."""
"""Watchers of the replica measurement: the players of a 4-seat match and a few spectators."""


# --- servers -------------------------------------------------------------------------------


@dataclass
class Server:
    name: str
    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"


def bergen_command(url: str, port_file: Path, processes: int = 1) -> list[str]:
    script = Path(sys.executable).with_name("bergen")
    prefix = (
        [str(script)]
        if script.exists()
        else [
            sys.executable,
            "-c",
            "import sys; from bergen.cli_client.main import main; sys.exit(main())",
        ]
    )
    # A server makes an organiser token of its own unless told not to; a benchmark that
    # organises (tournament) gives one in the environment, and the others want none.
    organiser = [] if os.environ.get("BERGEN_ORGANISER_TOKEN") else ["--no-organiser"]
    return [*prefix, "serve", "--listen", "127.0.0.1:0", "--database", url,
            "--port-file", str(port_file), "--workers", str(processes),
            *organiser]  # fmt: skip


def _reference_command(kind: str, url: str, port_file: Path, processes: int = 1) -> list[str]:
    return [sys.executable, "-m", "bench._ref_server", "--kind", kind, "--database", url,
            "--port-file", str(port_file), "--processes", str(processes)]  # fmt: skip


def launch_server(name: str, command: list[str], folder: Path) -> subprocess.Popen[bytes]:
    log = folder / f"{name}.log"
    root = Path(__file__).resolve().parent.parent
    # `bench._ref_server` is imported from this checkout, wherever the benchmark is run from.
    path = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=folder,  # whatever a server writes where it runs (a signing key) stays there
        )
    return proc


def wait_for_port(name: str, proc: subprocess.Popen[bytes], port_file: Path, log: Path) -> int:
    """The port a started server wrote to its port file. Raises RuntimeError if it exits or
    does not write one within START_TIMEOUT."""
    deadline = time.monotonic() + START_TIMEOUT
    while not port_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"server {name} did not start (exit {proc.poll()}):\n{tail}")
        time.sleep(0.02)
    return int(port_file.read_text())


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def servers(
    url: str, folder: Path, names: Sequence[str], processes: int = 1
) -> Iterator[dict[str, Server]]:
    """Start the named servers (ours, limit, peer, or replica names for more of ours) at once,
    each as `processes` processes on one port, wait until each listens, and stop them all
    (SIGTERM) at the end."""
    started: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
    try:
        for name in names:
            port_file = folder / f"{name}.port"
            if name == LIMIT:
                command = _reference_command("insert", url, port_file, processes)
            elif name == PEER:
                command = _reference_command("eventsourcing", url, port_file, processes)
            else:
                command = bergen_command(url, port_file, processes)
            started[name] = (launch_server(name, command, folder), port_file)
        running = {}
        for name, (proc, port_file) in started.items():
            log = folder / f"{name}.log"
            running[name] = Server(name, proc, wait_for_port(name, proc, port_file, log), log)
        yield running
    finally:
        for proc, _ in started.values():
            stop_server(proc)


# --- clients -------------------------------------------------------------------------------


def open_channel(target: str) -> grpc.Channel:
    channel = grpc.insecure_channel(target, options=CHANNEL_OPTIONS)
    grpc.channel_ready_future(channel).result(timeout=START_TIMEOUT)
    return channel


def bearer(token: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {token}")]


class Calls:
    """The Bergen unary calls a client makes, on one channel."""

    def __init__(self, channel: grpc.Channel) -> None:
        def unary(name: str, response: Any) -> Any:
            return channel.unary_unary(
                SERVICE + name,
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=response.FromString,
            )

        self.create = unary("CreateMatch", pb.CreateMatchResponse)
        self.join = unary("JoinMatch", pb.JoinMatchResponse)
        self.get = unary("GetMatch", pb.GetMatchResponse)
        self.play = unary("Play", pb.PlayResponse)


@dataclass
class Tally:
    """What one client did in the timed window."""

    latencies: list[float] = field(default_factory=list)

    @property
    def calls(self) -> int:
        return len(self.latencies)

    @property
    def busy(self) -> float:
        return sum(self.latencies)


class Player:
    """Plays matches of two seats on our server, both seats, choosing at random among the legal
    plays of the seat to move.

    A Play answers with the caller's view only, so the client keeps each seat's hand as that
    seat last saw it, takes out the tiles it plays, and finds its legal plays from the ends of
    the line (a tile fits an end showing one of its numbers: RULES.md, `State.legal_plays`). It
    fetches the seat's view with GetMatch only when that hand has changed out of its sight (a
    draw or a new deal) or no hand is known; a refused play also makes it fetch the view.
    """

    def __init__(self, calls: Calls, rng: random.Random) -> None:
        self._c = calls
        self._rng = rng
        self.match_id = ""
        self.refused = 0
        self.fetched = 0
        self._tokens: list[str] = []
        self._hands: list[list[tuple[int, int]] | None] = []
        self._view = pb.MatchView()
        self.new_match()

    def new_match(self) -> None:
        created = self._c.create(pb.CreateMatchRequest(seats=2), timeout=CALL_TIMEOUT)
        self.match_id = created.match_id
        joined = [
            self._c.join(
                pb.JoinMatchRequest(match_id=self.match_id, name=f"bench{seat}"),
                timeout=CALL_TIMEOUT,
            )
            for seat in range(2)
        ]
        self._tokens = [j.seat_token for j in joined]
        self._hands = [None, None]
        self._view = pb.MatchView()
        self._fetch(joined[-1].view.turn)

    def _fetch(self, seat: int) -> None:
        self.fetched += 1
        self._see(
            self._c.get(
                pb.GetMatchRequest(match_id=self.match_id),
                metadata=bearer(self._tokens[seat]),
                timeout=CALL_TIMEOUT,
            ).view
        )

    def _see(self, view: pb.MatchView) -> None:
        self._view = view
        if view.HasField("viewer_seat"):
            self._hands[view.viewer_seat] = [(t.low, t.high) for t in view.my_tiles]

    def next_request(self) -> tuple[pb.PlayRequest, list[tuple[str, str]]]:
        """The next play and its metadata, fetching a view or starting a match when needed
        (work outside the timed Play calls)."""
        while True:
            v = self._view
            if v.phase == pb.PHASE_ENDED:
                self.new_match()
                continue
            if not v.HasField("turn"):
                self._fetch(0)
                continue
            seat = v.turn
            if v.HasField("viewer_seat") and v.viewer_seat == seat:
                plays = [(p.tile.low, p.tile.high, p.end) for p in v.legal_plays]
            else:
                hand = self._hands[seat]
                if hand is None or not v.HasField("ends"):
                    self._fetch(seat)
                    continue
                plays = [
                    (low, high, end)
                    for low, high in hand
                    for end, number in ((pb.END_LEFT, v.ends.left), (pb.END_RIGHT, v.ends.right))
                    if number in (low, high)
                ]
            if not plays:
                self._fetch(seat)
                continue
            low, high, end = self._rng.choice(plays)
            request = pb.PlayRequest(
                match_id=self.match_id, tile=pb.Tile(low=low, high=high), end=end
            )
            return request, bearer(self._tokens[seat])

    def play(
        self, request: pb.PlayRequest, metadata: list[tuple[str, str]]
    ) -> pb.PlayResponse | None:
        """Send the play; None when it was refused (FAILED_PRECONDITION)."""
        seat = 0 if metadata == bearer(self._tokens[0]) else 1
        try:
            response: pb.PlayResponse = self._c.play(
                request, metadata=metadata, timeout=CALL_TIMEOUT
            )
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.FAILED_PRECONDITION:
                raise
            self.refused += 1
            self._fetch(seat)
            return None
        other = 1 - seat
        for event in response.events:
            which = event.WhichOneof("body")
            if which == "dealt" or (which == "tile_drawn" and event.tile_drawn.seat == other):
                self._hands[other] = None  # it changed out of this seat's sight
            elif which == "tile_played" and event.tile_played.seat == other:
                hand = self._hands[other]
                tile = (event.tile_played.tile.low, event.tile_played.tile.high)
                if hand is not None and tile in hand:
                    hand.remove(tile)
        self._see(response.view)
        return response


class _RefClient:
    """A client of a reference server: its own stream, one Play per row or event."""

    def __init__(self, calls: Calls) -> None:
        self._c = calls
        self._stream = str(uuid.uuid4())
        self._sent = 0
        self._metadata = bearer("bgs_" + "x" * 43)

    def next_request(self) -> tuple[pb.PlayRequest, list[tuple[str, str]]]:
        request = pb.PlayRequest(
            match_id=self._stream,
            tile=pb.Tile(low=3, high=5),
            end=pb.END_LEFT,
            expected_version=self._sent,
        )
        return request, self._metadata

    def play(self, request: pb.PlayRequest, metadata: list[tuple[str, str]]) -> bool:
        self._c.play(request, metadata=metadata, timeout=CALL_TIMEOUT)
        self._sent += 1
        return True


def _client_loop(
    client: Player | _RefClient, start: threading.Barrier, stop_at: list[float], tally: Tally
) -> None:
    for _ in range(WARMUP_CALLS):
        client.play(*client.next_request())
    start.wait()
    end = stop_at[0]
    now = time.perf_counter
    while True:
        request, metadata = client.next_request()
        if now() >= end:
            return
        t0 = now()
        done = client.play(request, metadata)
        t1 = now()
        if done:
            tally.latencies.append(t1 - t0)


@dataclass
class Run:
    kind: str
    clients: int
    rate: float
    """Play calls per second inside Play calls, summed over clients."""
    wall_rate: float
    """Play calls per second of the window (includes the untimed work)."""
    latencies: list[float]
    fetched: int = 0
    """GetMatch calls (untimed), warm-up and new matches included."""
    refused: int = 0
    """Plays refused because the client's guess of a hand was wrong (untimed; should be 0)."""
    server_cpu: dict[str, float] | None = None
    """CPU seconds the server used in the window, by thread (`thread_cpu`), where /proc
    tells it."""

    @property
    def cpu_per_play(self) -> dict[str, float] | None:
        """Microseconds of the server's CPU per timed Play, by thread: everything the server
        did in the window (GetMatch and new matches included) over the Plays."""
        if self.server_cpu is None or not self.latencies:
            return None
        return {k: v * 1e6 / len(self.latencies) for k, v in self.server_cpu.items()}


def measure_rate(
    kind: str, target: str, clients: int, seconds: float, seed: int, server_pid: int | None = None
) -> Run:
    """Run `clients` clients against `target` for `seconds` (after a warm-up); with
    `server_pid`, also read that server's CPU by thread over the window (`thread_cpu`)."""
    channels = [open_channel(target) for _ in range(clients)]
    try:
        rngs = [random.Random(seed * 100 + i) for i in range(clients)]
        workers: list[Player | _RefClient] = [
            Player(Calls(ch), rng) if kind == OURS else _RefClient(Calls(ch))
            for ch, rng in zip(channels, rngs, strict=True)
        ]
        stop_at = [0.0]
        cpu_at_open: list[dict[str, float]] = []

        def open_window() -> None:  # run once, when the last client is warm
            if server_pid is not None:
                cpu_at_open.append(thread_cpu(server_pid))
            stop_at[0] = time.perf_counter() + seconds

        start = threading.Barrier(clients + 1, action=open_window)
        tallies = [Tally() for _ in range(clients)]
        errors: list[BaseException] = []

        def run(i: int) -> None:
            try:
                _client_loop(workers[i], start, stop_at, tallies[i])
            except BaseException as e:
                errors.append(e)
                start.abort()

        threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(clients)]
        for t in threads:
            t.start()
        with suppress(threading.BrokenBarrierError):  # a client failed: its error is raised below
            start.wait()
        for t in threads:
            t.join(timeout=seconds + 2 * CALL_TIMEOUT)
        server_cpu = None
        if server_pid is not None and cpu_at_open:
            closed = thread_cpu(server_pid)
            server_cpu = {k: v - cpu_at_open[0].get(k, 0.0) for k, v in closed.items()} or None
        if errors:
            raise RuntimeError(f"{kind}, {clients} client(s): {errors[0]!r}") from errors[0]
        rate = sum(t.calls / t.busy for t in tallies if t.busy > 0)
        lat = [x for t in tallies for x in t.latencies]
        players = [w for w in workers if isinstance(w, Player)]
        fetched = sum(p.fetched for p in players)
        refused = sum(p.refused for p in players)
        return Run(kind, clients, rate, len(lat) / seconds, lat, fetched, refused, server_cpu)
    finally:
        for ch in channels:
            ch.close()


# --- fan-out -------------------------------------------------------------------------------


async def _watch_all(
    target: str, match_id: str, watchers: int, ready: Any, timeout: float, batched: bool
) -> list[list[tuple[int, float]]]:
    channels = [grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS) for _ in range(watchers)]
    received: list[list[tuple[int, float]]] = [[] for _ in range(watchers)]
    viewed = 0

    async def one(i: int) -> None:
        nonlocal viewed
        call = channels[i].unary_stream(
            SERVICE + "WatchMatch",
            request_serializer=pb.WatchMatchRequest.SerializeToString,
            response_deserializer=pb.WatchMatchResponse.FromString,
        )(pb.WatchMatchRequest(match_id=match_id, batched=batched), timeout=timeout)
        got = received[i]
        async for item in call:
            t = time.perf_counter()
            if item.events:
                got.extend((e.seq, t) for e in item.events)
            elif item.HasField("event"):
                got.append((item.event.seq, t))
            else:
                viewed += 1
                if viewed == watchers:
                    ready.set()

    try:
        await asyncio.gather(*(one(i) for i in range(watchers)))
    finally:
        for ch in channels:
            await ch.close()
    return received


def _watchers_process(
    target: str,
    match_id: str,
    watchers: int,
    ready: Any,
    results: Any,
    timeout: float,
    batched: bool = True,
) -> None:
    try:
        results.put(asyncio.run(_watch_all(target, match_id, watchers, ready, timeout, batched)))
    except BaseException as e:
        results.put(repr(e))
        raise


@dataclass
class Fanout:
    p50_ms: float
    p99_ms: float
    deliveries: int
    missing: int
    plays: int
    overran: bool = False
    """The work `alongside` was still running when the watched match ended."""
    cpu_ms: float | None = None
    """CPU time of the watched server (`cpu_of`) per event of the match, in ms."""
    first_max_ms: float | None = None
    """The longest any event took to reach its first watcher: what the feed (the append, and
    across replicas NOTIFY and the read) adds before the fan-out to every watcher."""


def measure_fanout(
    play_target: str,
    watch_target: str,
    watchers: int,
    interval: float,
    max_plays: int,
    alongside: Callable[[], object] | None = None,
    cpu_of: int | None = None,
    batched: bool = True,
) -> Fanout:
    """Delivery latency to `watchers` spectators on `watch_target` of a match played through
    `play_target`, one play every `interval` seconds, until it ends (or `max_plays`).

    `alongside`, when given, is run in a thread of its own once every watcher has its view,
    while the match is played.

    The watchers ask for `batched` streams (the events of a play in one message) unless told
    not to."""
    channel = open_channel(play_target)
    overran = False
    beside: threading.Thread | None = None
    beside_error: list[BaseException] = []
    try:
        player = Player(Calls(channel), random.Random(7))
        ctx = mp.get_context("spawn")
        ready = ctx.Event()
        results = ctx.Queue()
        timeout = START_TIMEOUT + max_plays * (interval + 1.0)
        proc = ctx.Process(
            target=_watchers_process,
            args=(watch_target, player.match_id, watchers, ready, results, timeout, batched),
        )
        proc.start()
        deadline = time.monotonic() + START_TIMEOUT
        while not ready.wait(0.1):
            if not proc.is_alive() or time.monotonic() > deadline:
                proc.terminate()
                raise RuntimeError("the watchers did not all receive their first view")
        if alongside is not None:
            work = alongside

            def run_beside() -> None:
                try:
                    work()
                except BaseException as e:
                    beside_error.append(e)

            beside = threading.Thread(target=run_beside, daemon=True)
            beside.start()
        returned: dict[int, float] = {}
        plays = 0
        ended = False
        next_at = time.perf_counter()
        cpu_start = _cpu_seconds(cpu_of)
        while plays < max_plays and not ended:
            request, metadata = player.next_request()
            time.sleep(max(0.0, next_at - time.perf_counter()))
            response = player.play(request, metadata)
            t = time.perf_counter()
            next_at += interval
            if response is None:
                continue
            for e in response.events:
                returned[e.seq] = t
            plays += 1
            ended = response.view.phase == pb.PHASE_ENDED
        if not ended:
            proc.terminate()
            raise RuntimeError(f"the match did not end within {max_plays} plays")
        outcome = results.get(timeout=timeout)
        cpu_end = _cpu_seconds(cpu_of)
        proc.join(timeout=10)
        if isinstance(outcome, str):
            raise RuntimeError(f"the watchers failed: {outcome}")
        if beside is not None:
            overran = beside.is_alive()  # still running when the watched match ended
            beside.join()
            if beside_error:
                raise RuntimeError(f"alongside the watchers: {beside_error[0]!r}")
    finally:
        channel.close()
    delays = [(t - returned[seq]) * 1000 for got in outcome for seq, t in got if seq in returned]
    missing = sum(len(set(returned) - {seq for seq, _ in got}) for got in outcome)
    first: dict[int, float] = {}  # each event's earliest delivery: the feed's part of it
    for got in outcome:
        for seq, t in got:
            if seq in returned and t < first.get(seq, float("inf")):
                first[seq] = t
    firsts = [(t - returned[seq]) * 1000 for seq, t in first.items()]
    cpu_ms = None
    if cpu_start is not None and cpu_end is not None and returned:
        cpu_ms = (cpu_end - cpu_start) * 1000 / len(returned)
    return Fanout(
        statistics.median(delays),
        percentile(delays, 99),
        len(delays),
        missing,
        plays,
        overran,
        cpu_ms,
        max(firsts) if firsts else None,
    )


def _cpu_seconds(pid: int | None) -> float | None:
    """The CPU time (user + system) process `pid` has used so far, where /proc tells it."""
    return None if pid is None else harness.stat_cpu_seconds(f"/proc/{pid}/stat")


def thread_cpu(pid: int) -> dict[str, float]:
    """The CPU time (user + system, seconds) the threads of process `pid` and of its
    children have used so far, summed by the name the operating system gives each thread less
    a trailing number (the server names its own: `bergen-rpc_3` counts as `bergen-rpc`). A
    Python thread that was not named shows as its process (gRPC's polling thread, the main
    thread): `PROCESS_THREADS`. Empty where /proc does not tell it."""
    out: dict[str, float] = {}
    for p in _process_tree(pid):
        try:
            own = Path(f"/proc/{p}/comm").read_text().strip()
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                name = Path(f"/proc/{p}/task/{tid}/comm").read_text().strip()
            except OSError:
                continue  # ended meanwhile
            seconds = harness.stat_cpu_seconds(f"/proc/{p}/task/{tid}/stat")
            if seconds is None:
                continue
            group = PROCESS_THREADS if name == own else name.rstrip("0123456789").rstrip("_")
            out[group] = out.get(group, 0.0) + seconds
    return out


PROCESS_THREADS = "unnamed"
"""`thread_cpu`'s group of the threads the operating system knows by the process's name."""


def _process_tree(pid: int) -> list[int]:
    """`pid` and its descendants, where /proc lists children."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        with suppress(OSError, ValueError):
            todo += [int(c) for c in Path(f"/proc/{p}/task/{p}/children").read_text().split()]
    return out


def _cpu_medians(runs: dict[str, list[Run]]) -> dict[str, tuple[float, dict[str, float]]]:
    """Each server's CPU per timed Play over its rounds, where /proc told it: the median of
    the totals, and each thread group's median."""
    out = {}
    for kind in KINDS:
        per = [r.cpu_per_play for r in runs[kind] if r.cpu_per_play is not None]
        if per:
            names = {n for p in per for n in p}
            out[kind] = (
                statistics.median(sum(p.values()) for p in per),
                {n: statistics.median(p.get(n, 0.0) for p in per) for n in names},
            )
    return out


def _cpu_lines(clients: int, processes: int, runs: dict[str, list[Run]]) -> list[str]:
    """Each server's CPU per timed Play, by thread (median of the rounds), biggest first."""
    out = []
    for kind, (total, median) in _cpu_medians(runs).items():
        parts = ", ".join(
            f"{n} {v:,.0f}" for n, v in sorted(median.items(), key=lambda kv: -kv[1]) if v >= 1
        )
        out.append(
            f"  {clients} client(s), {processes} process(es), {kind}: {total:,.0f} us CPU/Play"
            f" ({parts})"
        )
    return out


@dataclass
class WatchedRate:
    """Play/s of clients on other matches, alone and beside a watched match."""

    clients: int
    without: list[Run]
    beside: list[Run]
    fanouts: list[Fanout]
    """The watched match of each run beside it (its delivery under that load)."""

    @property
    def ratio(self) -> float:
        return statistics.median(r.rate for r in self.beside) / statistics.median(
            r.rate for r in self.without
        )


def measure_watched_rate(
    target: str,
    watchers: int,
    clients: int,
    seconds: float,
    interval: float,
    rounds: int,
    say: Callable[[str], None],
    batched: bool = True,
) -> WatchedRate:
    """Play/s of `clients` clients, each on a match of its own, for `seconds`: alone, then
    while `watchers` spectators watch another match played at a play every `interval`
    (both on one server), `rounds` times in turn. The window must fall inside the watched
    match: a run beside one that ended first is reported as overran."""
    out = WatchedRate(clients, [], [], [])
    for r in range(rounds):
        alone = measure_rate(OURS, target, clients, seconds, seed=100 + r)
        got: list[Run] = []

        def window(r: int = r, got: list[Run] = got) -> None:
            got.append(measure_rate(OURS, target, clients, seconds, seed=200 + r))

        f = measure_fanout(
            target, target, watchers, interval, 400, alongside=window, batched=batched
        )
        out.without.append(alone)
        out.beside.append(got[0])
        out.fanouts.append(f)
        note = " (the watched match ended first)" if f.overran else ""
        say(
            f"  {clients} client(s), round {r + 1}: alone {alone.rate:,.0f}/s, beside "
            f"{watchers} watchers {got[0].rate:,.0f}/s{note}; their delivery p50/p99 "
            f"{f.p50_ms:.1f}/{f.p99_ms:.1f} ms"
        )
    return out


def _watched_rate_line(watchers: int, w: WatchedRate) -> Line:
    """Play/s beside a watched match against Play/s alone (issue 14, part 3: reported)."""
    beside = statistics.median(r.rate for r in w.beside)
    alone = statistics.median(r.rate for r in w.without)
    overran = sum(f.overran for f in w.fanouts)
    return Line(
        f"Play/s, {w.clients} client(s), beside {watchers} watchers vs alone",
        f"{beside:,.0f}/s",
        f"{alone:,.0f}/s" + (f", {overran} overran" if overran else ""),
        w.ratio,
        "",
        None,
    )


# --- the run -------------------------------------------------------------------------------


def _throughput(
    found: dict[str, Server], clients: int, seconds: float, rounds: int, say: Callable[[str], None]
) -> dict[str, list[Run]]:
    def measure(kind: str, r: int) -> Run:
        return measure_rate(
            kind, found[kind].target, clients, seconds, seed=r, server_pid=found[kind].process.pid
        )

    def said(r: int, got: dict[str, Run]) -> None:
        parts = []
        for kind, run in got.items():
            p50 = statistics.median(run.latencies) * 1000
            extra = ""
            if kind == OURS:
                extra = f", {run.fetched / max(1, len(run.latencies)):.2f} GetMatch/Play"
                extra += f", {run.refused} refused" if run.refused else ""
            parts.append(f"{kind} {run.rate:,.0f}/s (p50 {p50:.2f} ms{extra})")
        say(f"  {clients} client(s), round {r + 1}: " + ", ".join(parts))

    return harness.rounds(KINDS, rounds, measure, after_round=said)


def _rate_lines(clients: int, runs: dict[str, list[Run]], processes: int = 1) -> list[Line]:
    """The figures of one client count; held to the goals (issue 14, part 3) at one process
    and 1 or 8 clients, reported otherwise."""
    rate = {k: statistics.median(r.rate for r in runs[k]) for k in KINDS}
    lat = {k: [x for r in runs[k] for x in r.latencies] for k in KINDS}

    def ms(kind: str) -> str:
        return f"{percentile(lat[kind], 50) * 1000:.2f}/{percentile(lat[kind], 99) * 1000:.2f}"

    def known(kind: str) -> str:
        figure = REFERENCE_RATES.get((kind, clients)) if processes == 1 else None
        return f" (~{figure:,})" if figure else ""

    held = processes == 1 and clients in (1, 8)
    where = f"{clients} client(s)" + (f", {processes} processes" if processes > 1 else "")
    ours = f"{rate[OURS]:,.0f}/s"
    limit_ratio = rate[OURS] / rate[LIMIT]
    peer_ratio = rate[OURS] / rate[PEER]
    p99 = {k: percentile(lat[k], 99) for k in KINDS}
    return [
        Line(
            f"Play/s, {where}, vs serial limit",
            ours,
            f"{rate[LIMIT]:,.0f}/s{known(LIMIT)}",
            limit_ratio,
            ">= 0.85" if held else "",
            limit_ratio >= 0.85 if held else None,
        ),
        Line(
            f"Play/s, {where}, vs eventsourcing",
            ours,
            f"{rate[PEER]:,.0f}/s{known(PEER)}",
            peer_ratio,
            ">= 1.5" if held else "",
            peer_ratio >= 1.5 if held else None,
        ),
        *_cpu_line(where, runs),
        Line(
            f"Play p50/p99 ms, {where} (limit; peer)",
            ms(OURS),
            f"{ms(LIMIT)}; {ms(PEER)}",
            p99[OURS] / p99[LIMIT],
            "p99 <= limit" if held and clients == 8 else "",
            p99[OURS] <= p99[LIMIT] if held and clients == 8 else None,
        ),
    ]


def _cpu_line(where: str, runs: dict[str, list[Run]]) -> list[Line]:
    """The server's CPU per timed Play against the serial limit's (reported), where /proc
    tells it."""
    total = {kind: medians[0] for kind, medians in _cpu_medians(runs).items()}
    if OURS not in total or LIMIT not in total:
        return []
    peer = f"; {total[PEER]:,.0f}" if PEER in total else ""
    return [
        Line(
            f"server CPU us per Play, {where} (limit; peer)",
            f"{total[OURS]:,.0f}",
            f"{total[LIMIT]:,.0f}{peer}",
            total[OURS] / total[LIMIT],
            "",
            None,
        )
    ]


def _fanout_line(where: str, f: Fanout, goal_ms: float | None) -> Line:
    """A delivery figure; held to `goal_ms` at p99 when given, else reported only. Missing
    deliveries always fail it."""
    figures = f"{f.p50_ms:.1f}/{f.p99_ms:.1f}"
    note = f"{f.deliveries:,} deliveries of {f.plays} plays" + (
        f", {f.missing} MISSING" if f.missing else ""
    )
    if f.cpu_ms is not None:
        note += f", {f.cpu_ms:.1f} ms CPU/event"
    if f.first_max_ms is not None:
        note += f", first watcher max {f.first_max_ms:.0f} ms"
    if goal_ms is None:
        return Line(
            f"WatchMatch delivery p50/p99 ms, {where}",
            figures,
            note,
            None,
            "",
            False if f.missing else None,
        )
    return Line(
        f"WatchMatch delivery p50/p99 ms, {where}",
        figures,
        note,
        None,
        f"p99 <= {goal_ms:.0f}",
        f.p99_ms <= goal_ms and f.missing == 0,
    )


def print_cpu(cpu_lines: list[str]) -> None:
    """Where each server's CPU goes (`thread_cpu`), in microseconds per timed Play."""
    if not cpu_lines:
        return
    print()
    print(
        "Server CPU per timed Play by thread, us (median of the rounds; whole window: ours"
        " includes its GetMatch calls and new matches; unnamed: gRPC's polling thread and the"
        " main thread)"
    )
    for line in cpu_lines:
        print(line)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.grpc_bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    harness.add_database_url(parser)
    quick_or = harness.quick_or
    parser.add_argument(
        "--seconds", type=float, default=quick_or(3.0, 0.5), help="per throughput run"
    )
    parser.add_argument(
        "--rounds", type=int, default=quick_or(3, 1), help="runs per figure (median)"
    )
    parser.add_argument("--watchers", type=int, default=quick_or(100, 10))
    parser.add_argument(
        "--play-interval",
        type=float,
        default=quick_or(0.1, 0.02),
        help="seconds between plays in the fan-out (0.02 overloads 2 cores: 100 watchers x"
        " ~100 events/s, so it measures a queue, not delivery)",
    )
    parser.add_argument(
        "--processes",
        type=lambda text: [int(n) for n in text.split(",")],
        default=quick_or([1, 2], [1]),
        help="process counts of every server (bergen serve --workers N, the references as "
        "many forked processes), comma-separated (default 1,2)",
    )
    parser.add_argument(
        "--parts",
        type=lambda text: text.split(","),
        default=["throughput", "fanout"],
        help="which parts to run, comma-separated: throughput (Play/s against the "
        "references), fanout (WatchMatch delivery, and Play/s beside the watchers); default "
        "both",
    )
    parser.add_argument(
        "--watched-clients",
        type=int,
        default=quick_or(8, 2),
        help="clients of the Play/s measured beside the watchers (fanout part)",
    )
    parser.add_argument(
        "--one-event-a-message",
        action="store_true",
        help="watchers do not ask for batched WatchMatch streams (fanout part)",
    )
    args = parser.parse_args(argv)
    batched = not args.one_event_a_message
    unknown = set(args.parts) - {"throughput", "fanout"}
    if unknown:
        parser.error(f"unknown part(s): {', '.join(sorted(unknown))}")

    say(
        f"{os.cpu_count()} cores; every server is its own process with bergen's gRPC settings;"
        " clients are threads of this process, one channel each; only Play calls are timed."
    )
    lines: list[Line] = []
    cpu_lines: list[str] = []
    with (
        bench_database(args.database_url) as url,
        tempfile.TemporaryDirectory(prefix="bergen-grpc-bench-") as tmp,
        ExitStack() as stack,
    ):
        folder = Path(tmp)
        for processes in args.processes if "throughput" in args.parts else ():
            where = folder / f"p{processes}"
            where.mkdir()
            say(f"  {processes} process(es) per server")
            with servers(url, where, KINDS, processes) as found:
                for clients in (1, 8, 32) if processes == 1 else (8, 32):
                    runs = _throughput(found, clients, args.seconds, args.rounds, say)
                    lines += _rate_lines(clients, runs, processes)
                    cpu_lines += _cpu_lines(clients, processes, runs)
        if "fanout" not in args.parts:
            print()
            SERVICE_TABLE.print(lines)
            print_cpu(cpu_lines)
            return ExitStatus.OK
        found = stack.enter_context(servers(url, folder, [OURS]))
        replica = stack.enter_context(servers(url, folder, ["replica-b"]))["replica-b"]
        a, b = found[OURS].target, replica.target
        pace = f"a play every {args.play_interval * 1000:.0f} ms" + (
            "" if batched else ", one event a message"
        )
        say(f"  replicas: {REPLICA_WATCHERS} watchers on B, plays on A, {pace}")
        a_pid, b_pid = found[OURS].process.pid, replica.process.pid
        near = measure_fanout(
            a, b, REPLICA_WATCHERS, args.play_interval, 400, cpu_of=b_pid, batched=batched
        )
        lines.append(
            _fanout_line(f"{REPLICA_WATCHERS} watchers on B, plays on A", near, REPLICA_GOAL_MS)
        )
        say(f"  fan-out: {args.watchers} watchers, {pace}")
        single = measure_fanout(
            a, a, args.watchers, args.play_interval, 400, cpu_of=a_pid, batched=batched
        )
        lines.append(_fanout_line(f"{args.watchers} watchers, one server", single, FANOUT_GOAL_MS))
        across = measure_fanout(
            a, b, args.watchers, args.play_interval, 400, cpu_of=b_pid, batched=batched
        )
        lines.append(
            _fanout_line(f"{args.watchers} watchers on B, plays on A", across, REPLICA_GOAL_MS)
        )
        say(
            f"  Play/s of {args.watched_clients} clients on other matches, alone and beside "
            f"{args.watchers} watchers of a match ({pace}), one server"
        )
        watched = measure_watched_rate(
            a, args.watchers, args.watched_clients, args.seconds, args.play_interval,
            args.rounds, say, batched,
        )  # fmt: skip
        lines.append(_watched_rate_line(args.watchers, watched))
    print()
    SERVICE_TABLE.print(lines)
    print_cpu(cpu_lines)
    return ExitStatus.OK


if __name__ == "__main__":
    sys.exit(main())
