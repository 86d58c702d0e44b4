"""The web gateway: 500 Server-Sent Events spectators of one match through one `bergen web`.

    python -m bench web            (or: python -m bench.web_bench --spectators 500 --rounds 3)

`python -m bench web` runs this, then the players' benchmark (bench/web_play_bench.py: 200
browser players playing through the gateway); `--without-players` leaves that out.

`bergen serve` runs on a PostgreSQL database made for the run (BERGEN_BENCH_DATABASE_URL,
default postgresql://postgres@127.0.0.1:5432/postgres, dropped afterwards) and `bergen web` in
front of it, each its own process, on loopback.

- Delivery (goal p99 under 250 ms): the spectators are one process holding one HTTP
  connection each to `/api/matches/{id}/events`, read by one `selectors` loop that stamps each
  read and parses only the SSE ids in it; a player plays that match at a steady pace
  (a play every 100 ms, as bench/grpc_bench.py's fan-out) for `--delivery-seconds`, and the
  delay is the time from the return of the Play call that appended an event to each spectator
  reading that event, matched by its SSE id (the seq; perf_counter is the system's monotonic
  clock, shared by processes).
- Play/s with and without the spectators (goal: at least 0.9): 4 clients play their own
  matches as fast as they can (bench/grpc_bench.py's `measure_rate`: only Play calls timed)
  while the paced match is played, once with its 500 spectators attached and once without;
  rounds alternate, and each figure is the median of its rounds.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import selectors
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import harness
from bench.grpc_bench import (
    CALL_TIMEOUT,
    OURS,
    START_TIMEOUT,
    Calls,
    Player,
    launch_server,
    measure_rate,
    open_channel,
    servers,
    stop_server,
    wait_for_port,
)
from bench.harness import Column, ExitStatus, Row, Table, percentile
from bench.store_bench import bench_database
from bergen.v1 import bergen_pb2 as pb

GOAL_P99_MS = 250.0
GOAL_RATIO = 0.9
LONG_TARGET = 1000
"""The paced match's target: long enough to outlast a window."""


class LongPlayer(Player):
    """bench.grpc_bench's Player on a match that lasts (target LONG_TARGET)."""

    def new_match(self) -> None:
        calls = self._c
        created = calls.create(
            pb.CreateMatchRequest(seats=2, options=pb.RuleOptions(target=LONG_TARGET)),
            timeout=CALL_TIMEOUT,
        )
        self.match_id = created.match_id
        joined = [
            calls.join(
                pb.JoinMatchRequest(match_id=self.match_id, name=f"paced{seat}"),
                timeout=CALL_TIMEOUT,
            )
            for seat in range(2)
        ]
        self._tokens = [j.seat_token for j in joined]
        self._hands = [None, None]
        self._view = pb.MatchView()
        self._fetch(joined[-1].view.turn)


# --- the spectators (a process of their own) ------------------------------------------------


ID_MARK = b"\nid: "
"""How an SSE message that carries an id starts on the wire (after a chunk's size line or the
previous message's blank line); JSON data never holds a raw newline."""


def _spectate(
    port: int, match_id: str, count: int, ready: Any, stop: Any
) -> list[list[tuple[int, float]]]:
    """`count` HTTP connections to the match's event stream, read by one `selectors` loop
    with plain non-blocking sockets: each read is stamped once and only the SSE ids in it are
    parsed (the harness stands for browsers on other machines, so it must take as little of
    the CPU the server and the gateway share with it as it can)."""
    received: list[list[tuple[int, float]]] = [[] for _ in range(count)]
    request = (
        f"GET /api/matches/{match_id}/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Accept: text/event-stream\r\n\r\n"
    ).encode()
    selector = selectors.DefaultSelector()
    socks: list[socket.socket] = []
    heads: list[bytes] = [b""] * count  # until the first view: the whole opening
    tails: list[bytes] = [b""] * count  # after it: a mark cut by a read's end
    viewed = 0
    try:
        for i in range(count):
            sock = socket.create_connection(("127.0.0.1", port))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.sendall(request)
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ, i)
            socks.append(sock)
        recv = socket.socket.recv
        while not stop.is_set():
            for key, _ in selector.select(0.1):
                i = key.data
                t = time.perf_counter()
                try:
                    data = recv(key.fileobj, 1 << 18)  # type: ignore[arg-type]
                except BlockingIOError:
                    continue
                if not data:
                    raise RuntimeError(f"spectator {i}: the gateway closed the stream")
                buf = tails[i] + data
                if heads[i] != b"done":
                    heads[i] += data
                    if not heads[i].startswith(b"HTTP/1.1 200 ") and len(heads[i]) >= 13:
                        raise RuntimeError(f"spectator {i}: {heads[i][:40]!r}")
                    if b"event: view" not in heads[i]:
                        continue
                    buf = heads[i]
                    heads[i] = b"done"
                    viewed += 1
                    if viewed == count:
                        ready.set()
                got = received[i]
                at = 0
                while True:
                    mark = buf.find(ID_MARK, at)
                    if mark < 0:
                        tails[i] = buf[-(len(ID_MARK) - 1) :]
                        break
                    end = buf.find(b"\n", mark + len(ID_MARK))
                    if end < 0:
                        tails[i] = buf[mark:]
                        break
                    got.append((int(buf[mark + len(ID_MARK) : end]), t))
                    at = end
    finally:
        selector.close()
        for sock in socks:
            sock.close()
    return received


def _spectators_process(
    port: int, match_id: str, count: int, ready: Any, stop: Any, results: Any, nice: int
) -> None:
    try:
        if nice:
            os.nice(nice)
        results.put(_spectate(port, match_id, count, ready, stop))
    except BaseException as e:
        results.put(repr(e))
        raise


@dataclass
class Spectators:
    proc: Any
    stop: Any
    results: Any

    def finish(self) -> list[list[tuple[int, float]]]:
        self.stop.set()
        outcome = self.results.get(timeout=60)
        self.proc.join(timeout=10)
        if isinstance(outcome, str):
            raise RuntimeError(f"the spectators failed: {outcome}")
        got: list[list[tuple[int, float]]] = outcome
        return got


def attach(port: int, match_id: str, count: int, nice: int = 0) -> Spectators:
    ctx = mp.get_context("spawn")
    ready, stop, results = ctx.Event(), ctx.Event(), ctx.Queue()
    proc = ctx.Process(
        target=_spectators_process, args=(port, match_id, count, ready, stop, results, nice)
    )
    proc.start()
    deadline = time.monotonic() + START_TIMEOUT
    while not ready.wait(0.1):
        if not proc.is_alive() or time.monotonic() > deadline:
            stop.set()
            proc.terminate()
            raise RuntimeError("the spectators did not all receive their first view")
    return Spectators(proc, stop, results)


# --- the paced match -------------------------------------------------------------------------


@dataclass
class Pacer:
    """Plays one long match at a steady pace in a thread; `returned` is when each seq's Play
    call returned."""

    target: str
    interval: float
    returned: dict[int, float] = field(default_factory=dict)
    match_id: str = ""
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    error: BaseException | None = None
    _channel: Any = None
    _player: Any = None

    def create(self) -> None:
        """Create and seat the match (spectators attach to it before any play)."""
        self._channel = open_channel(self.target)
        self._player = LongPlayer(Calls(self._channel), random.Random(11))
        self.match_id = self._player.match_id

    def start(self) -> None:
        if not self.match_id:
            self.create()
        channel, player = self._channel, self._player

        def run() -> None:
            try:
                next_at = time.perf_counter()
                while not self._stop.is_set():
                    request, metadata = player.next_request()
                    time.sleep(max(0.0, next_at - time.perf_counter()))
                    response = player.play(request, metadata)
                    t = time.perf_counter()
                    next_at += self.interval
                    if response is None:
                        continue
                    for e in response.events:
                        self.returned[e.seq] = t
                    if response.view.phase == pb.PHASE_ENDED:
                        return
            except BaseException as e:
                self.error = e
            finally:
                channel.close()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def finish(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=CALL_TIMEOUT)
        if self.error is not None:
            raise RuntimeError(f"the paced player failed: {self.error!r}")


# --- the gateway -------------------------------------------------------------------------------


@contextmanager
def gateway(
    server_target: str, folder: Path, max_streams: int, options: list[str]
) -> Iterator[tuple[int, int]]:
    """(port, pid) of a `bergen web` in front of `server_target`, with `options` added."""
    port_file = folder / "web.port"
    script = Path(sys.executable).with_name("bergen")
    prefix = [str(script)] if script.exists() else [sys.executable, "-m", "bergen.cli_client"]
    command = [*prefix, "web", "--server", server_target, "--listen", "127.0.0.1:0",
               "--port-file", str(port_file), "--max-streams", str(max_streams),
               "--client-streams", str(max_streams)]  # fmt: skip
    command += options
    proc: subprocess.Popen[bytes] = launch_server("web", command, folder)
    try:
        yield wait_for_port("web", proc, port_file, folder / "web.log"), proc.pid
    finally:
        stop_server(proc)


# --- the run -------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far (Linux /proc; 0 elsewhere)."""
    return harness.cpu_seconds(pid, default=0.0)


TABLE = Table(
    (Column("measure", 58, "<"), Column("figure", 12), Column("goal", 10)), met="met", rule=84
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.web_bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    harness.add_database_url(parser)
    quick_or = harness.quick_or
    parser.add_argument("--spectators", type=int, default=quick_or(500, 20))
    parser.add_argument("--clients", type=int, default=4, help="Play/s clients")
    parser.add_argument(
        "--seconds", type=float, default=quick_or(5.0, 1.0), help="per throughput window"
    )
    parser.add_argument(
        "--rounds", type=int, default=quick_or(3, 2), help="windows of each kind (median)"
    )
    parser.add_argument("--play-interval", type=float, default=0.1)
    parser.add_argument("--delivery-seconds", type=float, default=quick_or(10.0, 2.0))
    parser.add_argument(
        "--coalesce-ms", type=int, default=None, help="bergen web --coalesce-ms (its default)"
    )
    parser.add_argument(
        "--web-nice",
        type=int,
        default=0,
        help="bergen web --nice: the operator's option for a gateway beside the game server",
    )
    parser.add_argument(
        "--without-players",
        action="store_true",
        help="only the spectators: leave out the players' benchmark (bench/web_play_bench.py)",
    )
    parser.add_argument(
        "--spectators-nice",
        type=int,
        default=0,
        help="the spectators' process's nice (they stand for browsers on other machines)",
    )
    args = parser.parse_args(argv)
    say = harness.say
    say(
        f"{os.cpu_count()} cores; bergen serve (PostgreSQL) and bergen web are processes of "
        f"their own; {args.spectators} SSE spectators read by one selectors loop in a process "
        f"of theirs; a paced match "
        f"(a play every {args.play_interval * 1000:.0f} ms); {args.clients} Play/s clients."
    )
    delays: list[float] = []
    missing = 0
    deliveries = 0
    rates: dict[bool, list[float]] = {False: [], True: []}
    loaded_delays: list[float] = []
    loaded_missing = 0
    with (
        bench_database(args.database_url) as url,
        tempfile.TemporaryDirectory(prefix="bergen-web-bench-") as tmp,
        ExitStack() as stack,
    ):
        folder = Path(tmp)
        server = stack.enter_context(servers(url, folder, [OURS]))[OURS]
        options = ["--nice", str(args.web_nice)]
        if args.coalesce_ms is not None:
            options += ["--coalesce-ms", str(args.coalesce_ms)]
        port, web_pid = stack.enter_context(
            gateway(server.target, folder, args.spectators + 100, options)
        )
        # Delivery: the paced match and its spectators alone.
        pacer = Pacer(server.target, args.play_interval)
        pacer.create()
        crowd = attach(port, pacer.match_id, args.spectators, args.spectators_nice)
        pids = {
            "bergen web": web_pid,
            "bergen serve": server.process.pid,
            "spectators": crowd.proc.pid,
            "players (this process)": os.getpid(),
        }
        before = {name: cpu_seconds(pid) for name, pid in pids.items()}
        pacer.start()
        time.sleep(args.delivery_seconds)
        pacer.finish()
        used = {name: cpu_seconds(pid) - before[name] for name, pid in pids.items()}
        time.sleep(1.0)  # the last plays' events reach every spectator
        missing = _tally(crowd.finish(), pacer.returned, delays)
        deliveries = len(delays)
        say(f"  delivery: {deliveries} events delivered over {args.delivery_seconds:.0f} s")
        cpu = ", ".join(f"{name} {t / args.delivery_seconds:.0%}" for name, t in used.items())
        say(f"  CPU while delivering (of one core): {cpu}")

        # Play/s: the paced match played all along, its spectators attached or not.
        def measure(watched: bool, r: int) -> float:
            nonlocal loaded_missing
            pacer = Pacer(server.target, args.play_interval)
            pacer.create()
            crowd = (
                attach(port, pacer.match_id, args.spectators, args.spectators_nice)
                if watched
                else None
            )
            if crowd is not None:
                pids["spectators"] = crowd.proc.pid
            before = {name: cpu_seconds(pid) for name, pid in pids.items()}
            pacer.start()
            started = time.perf_counter()
            run = measure_rate(OURS, server.target, args.clients, args.seconds, 100 + r)
            pacer.finish()
            took = time.perf_counter() - started
            label = "with" if watched else "without"
            say(f"  round {r + 1}, {label} spectators: {run.rate:.0f} Play/s")
            used = {name: cpu_seconds(pid) - before[name] for name, pid in pids.items()}
            if crowd is None:
                used.pop("spectators")
            cpu = ", ".join(f"{name} {t / took:.0%}" for name, t in used.items())
            say(f"    CPU (of one core): {cpu}")
            if crowd is not None:
                time.sleep(1.0)  # the last plays' events reach every spectator
                loaded_missing += _tally(crowd.finish(), pacer.returned, loaded_delays)
            return run.rate

        rates.update(harness.rounds((True, False), args.rounds, measure))
        health = _health(port)
    without = statistics.median(rates[False])
    with_ = statistics.median(rates[True])
    ratio = with_ / without if without else 0.0
    p50, p99 = statistics.median(delays), percentile(delays, 99)
    rows = [
        Row(("append to SSE delivery, p50 (ms)", f"{p50:.1f}", "")),
        Row(("append to SSE delivery, p99 (ms)", f"{p99:.1f}", "< 250"), p99 < GOAL_P99_MS),
        Row(("deliveries measured / missing", f"{deliveries} / {missing}")),
    ]
    if loaded_delays:
        loaded = f"{statistics.median(loaded_delays):.1f} / {percentile(loaded_delays, 99):.1f}"
        rows += [
            Row(("the same while the Play/s clients run, p50 / p99 (ms)", loaded)),
            Row(("  deliveries / missing", f"{len(loaded_delays)} / {loaded_missing}")),
        ]
    rows += [
        Row(("Play/s without spectators (median)", f"{without:.0f}")),
        Row((f"Play/s with {args.spectators} spectators (median)", f"{with_:.0f}")),
        Row(("ratio with / without", f"{ratio:.2f}", ">= 0.9"), ratio >= GOAL_RATIO),
    ]
    say("")
    TABLE.print(rows)
    say(f"gateway's upstream calls over the run: {health}")
    if args.without_players:
        return ExitStatus.OK
    from bench import web_play_bench  # it imports this module's gateway

    say("")
    return web_play_bench.main(["--database-url", args.database_url])


def _tally(
    crowd: list[list[tuple[int, float]]], returned: dict[int, float], delays: list[float]
) -> int:
    """Add each spectator's delay for every event the paced player appended to `delays`;
    the events some spectator never received (or received twice), counted."""
    missing = 0
    for one in crowd:
        seqs = [seq for seq, _ in one if seq in returned]
        missing += len(set(returned) - set(seqs)) + len(seqs) - len(set(seqs))
        delays += [(t - returned[s]) * 1000 for s, t in one if s in returned]
    return missing


def _health(port: int) -> str:
    import http.client
    import json

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/api/health")
        body = json.loads(conn.getresponse().read())
    finally:
        conn.close()
    return json.dumps(body.get("upstream_calls", {}), sort_keys=True)


if __name__ == "__main__":
    sys.exit(main())
