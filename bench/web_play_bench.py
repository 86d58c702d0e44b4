"""Players through the web gateway: 200 simulated browser players (100 two-seat matches), each
an HTTP client and a Server-Sent Events stream, playing through one `bergen web`.

    python -m bench web            (or: python -m bench.web_play_bench --players 200 --rounds 3)

`bergen serve` runs on a PostgreSQL database made for the run (BERGEN_BENCH_DATABASE_URL,
default postgresql://postgres@127.0.0.1:5432/postgres, dropped afterwards) and `bergen web` in
front of it, each its own process, on loopback. Both are started with per-client limits far
above their defaults, since every simulated player comes from one address.

Each player is what a browser's page does, without the browser: it holds its seat's sealed
cookie (from POST /api/play/matches or .../join), reads its own view from
GET /api/play/matches/{id}/events, and when a view says it is its turn it posts one of the
view's playable tiles to .../play on a kept-alive connection. When a match ends, its two
players create and join the next.

- Latency (goal p99 under 150 ms): from sending a Play request to the player's own event
  stream delivering a view of that version or later (perf_counter, stamped when the stream's
  bytes are read), while the players think as people do (`--think`, 2 s a play on average,
  drawn from half to one and a half times it). The same figure flat out is printed too: there
  it is the queue in front of a saturated server, not what a player waits for.
- Play/s through the gateway against the same players speaking gRPC directly (goal: at least
  0.75): the same number of seat clients, each with its seat token, following WatchMatch with
  a GetMatch for its view after each message (what the gateway does for a browser's stream),
  and playing with Play, all playing as fast as they can. Each figure counts the Plays
  answered within a window after a warm-up; the two kinds alternate by round (each round a
  window thinking, then one flat out) and each figure, a p99 as well, is the median of its
  rounds' (on a shared machine one round's spell of load would else make the p99 alone).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from bench import harness
from bench.grpc_bench import (
    CALL_TIMEOUT,
    CHANNEL_OPTIONS,
    Server,
    bearer,
    bergen_command,
    launch_server,
    stop_server,
    wait_for_port,
)
from bench.harness import Column, ExitStatus, Line, Table, percentile
from bench.store_bench import bench_database
from bench.web_bench import cpu_seconds, gateway
from bergen.v1 import bergen_pb2 as pb
from bergen.v1 import bergen_pb2_grpc as pb_grpc

GOAL_P99_MS = 150.0
GOAL_RATIO = 0.75
WEB = "web"
GRPC = "grpc"
MANY = 1_000_000
"""A per-client limit no run reaches: every simulated player comes from 127.0.0.1."""
CONNECT_TIMEOUT = 30.0


# --- what both kinds of client share -------------------------------------------------------


@dataclass
class Tally:
    """What one window of a run saw: the Plays answered in it, and each one's latency."""

    plays: int = 0
    latencies: list[float] = field(default_factory=list)
    """Seconds from sending a Play to the player's own stream showing it."""
    answered: list[float] = field(default_factory=list)
    """Of those, seconds until the Play's own answer came back (the first stage)."""
    refused: int = 0
    matches: int = 0


@dataclass
class Window:
    """When the measured window opens and closes (perf_counter), and whether play stops."""

    opens: float
    closes: float
    stop: asyncio.Event
    think: float = 0.0
    """Seconds a player thinks before each play, on average (0: it plays at once)."""

    def inside(self, t: float) -> bool:
        return self.opens <= t < self.closes


@dataclass
class Seen:
    """A seat's view as its stream last showed it, and when each version arrived there."""

    version: int = 0
    turn: int | None = None
    ended: bool = False
    plays: list[tuple[Any, str | None]] = field(default_factory=list)
    """(tile, end): a tile as the page's JSON gives it, or the gRPC view's Tile."""
    arrived: list[tuple[int, float]] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def update(self, version: int, turn: int | None, ended: bool, plays: Any, t: float) -> None:
        self.arrived.append((version, t))
        if version < self.version:
            return
        self.version, self.turn, self.ended, self.plays = version, turn, ended, plays
        self.changed.set()

    def shown_at(self, version: int) -> float | None:
        """When the stream first showed `version` or a later one."""
        for v, t in self.arrived:
            if v >= version:
                return t
        return None


def record(tally: Tally, window: Window, sent: list[tuple[float, float, int]], seen: Seen) -> None:
    """Count the Plays answered inside the window, and the latency of each sent inside it."""
    for t0, t1, version in sent:
        if window.inside(t1):
            tally.plays += 1
        shown = seen.shown_at(version)
        if window.inside(t0) and shown is not None:
            tally.latencies.append(shown - t0)
            tally.answered.append(t1 - t0)


# --- the web players -----------------------------------------------------------------------


class Http:
    """One kept-alive HTTP/1.1 connection to the gateway, as a browser holds one."""

    def __init__(self, port: int, keep_alive: bool = True) -> None:
        self.port = port
        # False: a new connection for each request (`--no-keep-alive`, a lever to compare).
        self.keep_alive = keep_alive
        self.host = f"127.0.0.1:{port}"
        self.reconnects = 0
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._reader is None or self._writer is None:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", self.port), CONNECT_TIMEOUT
            )
            self._reader, self._writer = reader, writer
            return reader, writer
        return self._reader, self._writer

    async def post(
        self, path: str, body: dict[str, Any], cookie: str = ""
    ) -> tuple[int, dict[str, str], bytes]:
        """POST a JSON body as the page's script does (same origin); the status, the
        headers (lower-cased names; Set-Cookie's value only the cookie) and the body."""
        data = json.dumps(body).encode()
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nOrigin: http://{self.host}\r\n"
            f"Sec-Fetch-Site: same-origin\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n"
            + (f"Cookie: {cookie}\r\n" if cookie else "")
            + "\r\n"
        )
        reused = self._reader is not None
        reader, writer = await self._open()
        writer.write(head.encode() + data)
        try:
            status, headers = await read_head(reader)
        except (ConnectionError, asyncio.IncompleteReadError):
            if not reused:
                raise
            # The gateway closed an idle kept-alive connection (as a browser would, send
            # again on a new one: a Play carries its version, so a second one is refused).
            self.close()
            self.reconnects += 1
            reader, writer = await self._open()
            writer.write(head.encode() + data)
            status, headers = await read_head(reader)
        length = int(headers.get("content-length", "0"))
        payload = await reader.readexactly(length)
        if not self.keep_alive or headers.get("connection", "").lower() == "close":
            self.close()
        return status, headers, payload

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None


async def read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    """An HTTP response's status and headers (the seat cookie kept from Set-Cookie)."""
    status_line = await reader.readline()
    if not status_line:
        raise ConnectionError("the gateway closed the connection")
    status = int(status_line.split()[1])
    headers: dict[str, str] = {}
    while True:
        line = (await reader.readline()).decode("latin-1").rstrip("\r\n")
        if not line:
            return status, headers
        name, _, value = line.partition(":")
        name, value = name.strip().lower(), value.strip()
        if name == "set-cookie":
            cookie = value.split(";", 1)[0]
            if cookie.startswith("bergen_seat_"):
                headers["set-cookie"] = cookie
        else:
            headers[name] = value


def _json_view(data: dict[str, Any]) -> tuple[int, int | None, bool, Any]:
    plays = [(p["tile"], random.choice(p["ends"])) for p in data.get("playable", ())]
    turn = data.get("turn")
    return int(data["version"]), turn, data.get("phase") == "PHASE_ENDED", plays


async def follow(port: int, match_id: str, cookie: str, seen: Seen, stop: asyncio.Event) -> None:
    """Read the seat's event stream into `seen` until the match ends or `stop` is set."""
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection("127.0.0.1", port), CONNECT_TIMEOUT
    )
    try:
        writer.write(
            f"GET /api/play/matches/{match_id}/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Accept: text/event-stream\r\nCookie: {cookie}\r\n\r\n".encode()
        )
        status, headers = await read_head(reader)
        if status != 200:
            raise RuntimeError(f"the seat's stream was answered {status}")
        chunked = headers.get("transfer-encoding", "").lower() == "chunked"
        buffer = b""
        while not stop.is_set():
            if chunked:
                size = int((await reader.readline()).split(b";")[0], 16)
                if size == 0:
                    return
                data = await reader.readexactly(size + 2)
                data = data[:-2]
            else:
                data = await reader.read(1 << 16)
                if not data:
                    return
            t = time.perf_counter()
            buffer += data
            *messages, buffer = buffer.split(b"\n\n")
            for message in messages:
                kind, body = b"", b""
                for line in message.split(b"\n"):
                    if line.startswith(b"event: "):
                        kind = line[7:]
                    elif line.startswith(b"data: "):
                        body = line[6:]
                if kind == b"view":
                    seen.update(*_json_view(json.loads(body)), t)
                elif kind == b"end":
                    seen.ended = True
                    seen.changed.set()
                    return
    finally:
        writer.close()


async def web_seat(
    http: Http, match_id: str, seat: int, cookie: str, seen: Seen, window: Window, tally: Tally
) -> None:
    """Play the seat from its stream's views until the match ends or the run stops."""
    path = f"/api/play/matches/{match_id}/play"

    async def send(tile: str, end: str | None, version: int) -> Sent | None:
        t0 = time.perf_counter()
        status, _, payload = await http.post(
            path, {"tile": tile, "end": end, "version": version}, cookie
        )
        t1 = time.perf_counter()
        if status == 409:
            return None
        if status != 200:
            raise RuntimeError(f"Play was answered {status}: {payload[:200]!r}")
        version, turn, ended, plays = _json_view(json.loads(payload))
        seen.update(version, turn, ended, plays, -1.0)
        seen.arrived.pop()  # the answer is not the stream: only the stream's arrivals count
        return t0, t1, version

    record(tally, window, await play_seat(seat, seen, window, tally, send), seen)


Sent = tuple[float, float, int]
"""A play sent: when it was sent, when it was answered, and the version it made."""


async def play_seat(
    seat: int,
    seen: Seen,
    window: Window,
    tally: Tally,
    send: Callable[[Any, str | None, int], Awaitable[Sent | None]],
) -> list[Sent]:
    """A player's loop, over either path: on its turn (after thinking, when the window
    thinks) one of its plays at random, sent by `send` (None: refused, the match moved on),
    until the match ends or the run stops. Returns the plays sent."""
    sent: list[Sent] = []
    played_at = thought_at = -1
    while not window.stop.is_set() and not seen.ended:
        if seen.turn != seat or not seen.plays or seen.version == played_at:
            seen.changed.clear()
            await _wait(seen.changed, window.stop)
            continue
        if window.think and thought_at != seen.version:
            thought_at = seen.version
            await _think(window)
            continue
        played_at = seen.version
        tile, end = random.choice(seen.plays)
        done = await send(tile, end, seen.version)
        if done is None:
            tally.refused += 1
            continue
        sent.append(done)
    return sent


async def _think(window: Window) -> None:
    """A player's thought before a play: half to one and a half times `window.think`."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(window.stop.wait(), random.uniform(0.5, 1.5) * window.think)


async def _wait(event: asyncio.Event, stop: asyncio.Event) -> None:
    waiting = [asyncio.ensure_future(event.wait()), asyncio.ensure_future(stop.wait())]
    try:
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiting:
            w.cancel()


async def web_pair(
    port: int, n: int, window: Window, tally: Tally, keep_alive: bool = True
) -> None:
    """Two browser players at one table: match after match until the run stops."""
    https = [Http(port, keep_alive), Http(port, keep_alive)]
    try:
        while not window.stop.is_set():
            status, headers, payload = await https[0].post(
                "/api/play/matches", {"name": f"web{n}a", "seats": 2}
            )
            if status != 201:
                raise RuntimeError(f"create was answered {status}: {payload[:200]!r}")
            match_id = json.loads(payload)["match_id"]
            cookies = [headers["set-cookie"]]
            status, headers, payload = await https[1].post(
                f"/api/play/matches/{match_id}/join", {"name": f"web{n}b"}
            )
            if status != 201:
                raise RuntimeError(f"join was answered {status}: {payload[:200]!r}")
            cookies.append(headers["set-cookie"])
            tally.matches += 1
            seens = [Seen(), Seen()]
            streams = [
                asyncio.create_task(follow(port, match_id, cookies[s], seens[s], window.stop))
                for s in range(2)
            ]
            seats = [
                web_seat(https[s], match_id, s, cookies[s], seens[s], window, tally)
                for s in range(2)
            ]
            try:
                await asyncio.gather(*seats)
            finally:
                for task in streams:
                    task.cancel()
                await asyncio.gather(*streams, return_exceptions=True)
    finally:
        for http in https:
            http.close()


# --- the gRPC players ----------------------------------------------------------------------


async def grpc_seat(
    stub: pb_grpc.BergenServiceStub,
    match_id: str,
    seat: int,
    token: str,
    window: Window,
    tally: Tally,
) -> None:
    """The seat through gRPC: WatchMatch, its view after each message, Play on its turn."""
    seen = Seen()
    metadata = bearer(token)

    def see(view: pb.MatchView, t: float) -> None:
        ends = {pb.END_LEFT: "l", pb.END_RIGHT: "r"}
        plays = [(p.tile, ends.get(p.end)) for p in view.legal_plays]
        turn = view.turn if view.HasField("turn") else None
        seen.update(view.version, turn, view.phase == pb.PHASE_ENDED, plays, t)

    async def watch() -> None:
        call = stub.WatchMatch(
            pb.WatchMatchRequest(match_id=match_id, batched=True), metadata=metadata
        )
        try:
            async for item in call:
                if item.HasField("view"):
                    see(item.view, time.perf_counter())
                    continue
                got = await stub.GetMatch(
                    pb.GetMatchRequest(match_id=match_id), metadata=metadata, timeout=CALL_TIMEOUT
                )
                see(got.view, time.perf_counter())
                if seen.ended or window.stop.is_set():
                    return
        finally:
            call.cancel()
            seen.ended = True
            seen.changed.set()

    async def send(tile: pb.Tile, end: str | None, version: int) -> Sent | None:
        request = pb.PlayRequest(
            match_id=match_id,
            tile=tile,
            end={"l": pb.END_LEFT, "r": pb.END_RIGHT}.get(end or "", pb.END_UNSPECIFIED),
            expected_version=version,
        )
        t0 = time.perf_counter()
        try:
            reply = await stub.Play(request, metadata=metadata, timeout=CALL_TIMEOUT)
        except grpc.aio.AioRpcError as e:
            if e.code() not in (grpc.StatusCode.ABORTED, grpc.StatusCode.FAILED_PRECONDITION):
                raise
            return None
        t1 = time.perf_counter()
        arrived = len(seen.arrived)
        see(reply.view, -1.0)
        del seen.arrived[arrived:]  # the answer is not the stream
        return t0, t1, reply.view.version

    watcher = asyncio.create_task(watch())
    try:
        sent = await play_seat(seat, seen, window, tally, send)
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
    record(tally, window, sent, seen)


async def grpc_pair(target: str, n: int, window: Window, tally: Tally) -> None:
    """Two gRPC players at one table, on a channel of their own, match after match."""
    async with grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS) as channel:
        stub: Any = pb_grpc.BergenServiceStub(channel)  # type: ignore[no-untyped-call]
        while not window.stop.is_set():
            created = await stub.CreateMatch(pb.CreateMatchRequest(seats=2), timeout=CALL_TIMEOUT)
            tokens = []
            for s in range(2):
                joined = await stub.JoinMatch(
                    pb.JoinMatchRequest(match_id=created.match_id, name=f"grpc{n}{s}"),
                    timeout=CALL_TIMEOUT,
                )
                tokens.append(joined.seat_token)
            tally.matches += 1
            await asyncio.gather(
                *(grpc_seat(stub, created.match_id, s, tokens[s], window, tally) for s in range(2))
            )


# --- a round -------------------------------------------------------------------------------


def play_round(
    pair: Callable[[int, Window, Tally], Coroutine[Any, Any, None]],
    pairs: int,
    warmup: float,
    seconds: float,
    think: float = 0.0,
) -> Tally:
    """`pairs` tables played at once, each player thinking `think` seconds a play on average;
    the Plays of the window after `warmup` counted."""

    async def run() -> Tally:
        now = time.perf_counter()
        window = Window(now + warmup, now + warmup + seconds, asyncio.Event(), think)
        tally = Tally()
        tasks = [asyncio.create_task(pair(n, window, tally)) for n in range(pairs)]
        done, _ = await asyncio.wait(tasks, timeout=warmup + seconds)
        window.stop.set()
        for task in done:
            task.result()  # a table that failed before the end fails the round
        results = await asyncio.wait_for(
            asyncio.gather(*tasks, return_exceptions=True), CALL_TIMEOUT
        )
        failed = [r for r in results if isinstance(r, BaseException)]
        if failed:
            raise RuntimeError(f"{len(failed)} table(s) failed: {failed[0]!r}") from failed[0]
        return tally

    return asyncio.run(run())


@dataclass(frozen=True)
class Round:
    """One kind's round: its players thinking as people do (the latency), then playing as
    fast as they can (Play/s)."""

    paced: Tally
    flat_out: Tally


# --- the run -------------------------------------------------------------------------------


TABLE = Table(
    (
        Column("measure", 52, "<"),
        Column("web gateway", 12),
        Column("gRPC directly", 14),
        Column("ratio", 6),
        Column("goal", 10),
    )
)


def _ms(values: list[float], p: int) -> float:
    if len(values) < 2:
        return float("nan")
    return (statistics.median(values) if p == 50 else percentile(values, p)) * 1000


def rows(players: int, think: float, runs: dict[str, list[Round]], seconds: float) -> list[Line]:
    """The table's rows: latency p50 and p99 of each kind (players thinking `think` s a play,
    then flat out), Play/s of each flat out and their ratio. Each figure is the median of its
    rounds' (a round's p99 is its own window's), as every benchmark's figures are."""

    def ms(kind: str, p: int, pick: Callable[[Round], list[float]]) -> float:
        return statistics.median(_ms(pick(r), p) for r in runs[kind])

    def both(p: int, pick: Callable[[Round], list[float]]) -> tuple[str, str]:
        return f"{ms(WEB, p, pick):.1f}", f"{ms(GRPC, p, pick):.1f}"

    def split(pick: Callable[[Round], list[float]]) -> tuple[str, str]:
        web = f"{ms(WEB, 50, pick):.0f} / {ms(WEB, 99, pick):.0f}"
        return web, f"{ms(GRPC, 50, pick):.0f} / {ms(GRPC, 99, pick):.0f}"

    def paced(r: Round) -> list[float]:
        return r.paced.latencies

    def answered(r: Round) -> list[float]:
        return r.paced.answered

    def flat(r: Round) -> list[float]:
        return r.flat_out.latencies

    rates = {k: statistics.median(r.flat_out.plays / seconds for r in rs) for k, rs in runs.items()}
    ratio = rates[WEB] / rates[GRPC] if rates[GRPC] else 0.0
    return [
        Line(f"Play to own view, p50 (ms), {think:g} s thinking", *both(50, paced)),
        Line(
            f"Play to own view, p99 (ms), {think:g} s thinking",
            *both(99, paced),
            goal="< 150",
            passed=ms(WEB, 99, paced) < GOAL_P99_MS,
        ),
        Line("  of which the Play's answer, p50 / p99 (ms)", *split(answered)),
        Line(
            f"Play/s, {players} players flat out (median)",
            f"{rates[WEB]:.0f}",
            f"{rates[GRPC]:.0f}",
            ratio,
            ">= 0.75",
            ratio >= GOAL_RATIO,
        ),
        Line("Play to own view flat out, p50 (ms)", *both(50, flat)),
        Line("Play to own view flat out, p99 (ms)", *both(99, flat)),
    ]


def start_server(url: str, folder: Path) -> Server:
    """`bergen serve` with its per-client limits out of the way (all players share one
    address)."""
    port_file = folder / "serve.port"
    command = bergen_command(url, port_file)
    command += ["--create-rate", str(MANY), "--join-rate", str(MANY),
                "--max-watchers", str(MANY), "--max-watchers-per-client", str(MANY)]  # fmt: skip
    proc = launch_server("serve", command, folder)
    try:
        port = wait_for_port("serve", proc, port_file, folder / "serve.log")
    except BaseException:
        stop_server(proc)
        raise
    return Server("serve", proc, port, folder / "serve.log")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.web_play_bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    harness.add_database_url(parser)
    quick_or = harness.quick_or
    parser.add_argument("--players", type=int, default=quick_or(200, 20), help="an even number")
    parser.add_argument("--seconds", type=float, default=quick_or(10.0, 1.5), help="per window")
    parser.add_argument("--warmup", type=float, default=quick_or(3.0, 0.5), help="per window")
    parser.add_argument("--rounds", type=int, default=quick_or(3, 1), help="of each kind")
    parser.add_argument(
        "--think",
        type=float,
        default=quick_or(2.0, 0.5),
        help="seconds a player thinks before a play, on average, in the latency's window",
    )
    parser.add_argument(
        "--coalesce-ms", type=int, default=None, help="bergen web --coalesce-ms (its default)"
    )
    parser.add_argument(
        "--no-keep-alive",
        action="store_true",
        help="the web players open a new connection for each request",
    )
    args = parser.parse_args(argv)
    if args.players < 2 or args.players % 2:
        parser.error("--players is an even number, 2 or more")
    pairs = args.players // 2
    say = harness.say
    say(
        f"{os.cpu_count()} cores; bergen serve (PostgreSQL) and bergen web are processes of "
        f"their own; {args.players} players ({pairs} two-seat matches) in this process, "
        f"asyncio; each round a window of players thinking {args.think:g} s a play, then one "
        f"flat out; windows of {args.seconds:g} s after {args.warmup:g} s of warm-up."
    )
    with (
        bench_database(args.database_url) as url,
        tempfile.TemporaryDirectory(prefix="bergen-web-play-bench-") as tmp,
        ExitStack() as stack,
    ):
        folder = Path(tmp)
        server = start_server(url, folder)
        stack.callback(stop_server, server.process)
        options = ["--max-matches", str(MANY), "--client-follows", str(MANY),
                   "--client-creates", str(MANY), "--client-joins", str(MANY)]  # fmt: skip
        if args.coalesce_ms is not None:
            options += ["--coalesce-ms", str(args.coalesce_ms)]
        port, web_pid = stack.enter_context(
            gateway(server.target, folder, 2 * args.players + 100, options)
        )
        pids = {"bergen web": web_pid, "bergen serve": server.process.pid, "players": os.getpid()}

        def window(kind: str, think: float) -> Tally:
            before = {name: cpu_seconds(pid) for name, pid in pids.items()}
            started = time.perf_counter()
            if kind == WEB:
                tally = play_round(
                    lambda n, w, t: web_pair(port, n, w, t, not args.no_keep_alive),
                    pairs,
                    args.warmup,
                    args.seconds,
                    think,
                )
            else:
                tally = play_round(
                    lambda n, w, t: grpc_pair(server.target, n, w, t),
                    pairs,
                    args.warmup,
                    args.seconds,
                    think,
                )
            took = time.perf_counter() - started
            cpu = ", ".join(
                f"{name} {(cpu_seconds(pid) - before[name]) / took:.0%}"
                for name, pid in pids.items()
            )
            say(
                f"    {'thinking' if think else 'flat out'}: "
                f"{tally.plays / args.seconds:.0f} Play/s, "
                f"p50 {_ms(tally.latencies, 50):.1f} ms, p99 {_ms(tally.latencies, 99):.1f} ms "
                f"(answered: p99 {_ms(tally.answered, 99):.1f} ms), "
                f"{tally.matches} matches, {tally.refused} refused; CPU (of one core): {cpu}"
            )
            return tally

        def measure(kind: str, r: int) -> Round:
            random.seed(1000 * r + (kind == WEB))
            say(f"  round {r + 1}, {kind}:")
            return Round(window(kind, args.think), window(kind, 0.0))

        runs = harness.rounds((WEB, GRPC), args.rounds, measure)
    lines = rows(args.players, args.think, runs, args.seconds)
    say("")
    TABLE.print(lines)
    say(harness.goals_line(lines))
    return ExitStatus.OK


if __name__ == "__main__":
    sys.exit(main())
