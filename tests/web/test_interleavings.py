"""A match hub and its streams under every kind of interleaving, in one process: a scripted
game server (its WatchMatch, GetReplay and GetMatch, each pausing a random number of loop
turns), connections that pause before each write as a flow-controlled one does, and streams
joining at random moments: before the hub's first burst, while it overlaps their backlog,
while their backlog is read from the replay, while they catch up. Each stream must get every
event after its resume point once, in order, and then `end`; a stream whose client is gone
or which cannot keep up must let go of its place without holding up the others."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest

from bergen.cli_client.web import hubs
from bergen.cli_client.web.app import TRANSPORT_EXTENSION, Gateway, MatchStream, Results
from bergen.cli_client.web.hubs import MatchHub, Registry, SubscriberCounter, Upstream
from bergen.v1 import bergen_pb2 as pb

pytestmark = pytest.mark.timeout(120, method="signal")

MATCH = "m1"
SCENARIOS = 250
FAILED = pb.WatchMatchResponse()
"""Put on a watch: the stream fails there."""
STREAM_END_S = 10.0


async def turns(rng: random.Random, most: int) -> None:
    """Let other tasks run for a random number of loop turns."""
    for _ in range(rng.randint(0, most)):
        await asyncio.sleep(0)


class ScriptedServer:
    """The game server's read side for one match: events appended by the test, watched and
    replayed as `bergen serve` does (a watch starts with the view, then every later event)."""

    def __init__(self, rng: random.Random, pauses: int) -> None:
        self.rng = rng
        self.pauses = pauses
        self.log: list[pb.Event] = []
        self.watches: list[asyncio.Queue[pb.WatchMatchResponse | None]] = []
        self.ended = False

    def view(self) -> pb.MatchView:
        return pb.MatchView(match_id=MATCH, version=len(self.log))

    def append(self) -> None:
        event = pb.Event(seq=len(self.log) + 1, passed=pb.Passed(hand=1, seat=len(self.log) % 2))
        self.log.append(event)
        for q in self.watches:
            q.put_nowait(pb.WatchMatchResponse(event=event))

    def end(self) -> None:
        self.ended = True
        for q in self.watches:
            q.put_nowait(None)

    def fail(self) -> None:
        """Every watch fails (the server went away), after the events it was sent."""
        for q in self.watches:
            q.put_nowait(FAILED)

    def WatchMatch(self, request: pb.WatchMatchRequest) -> AsyncIterator[pb.WatchMatchResponse]:
        q: asyncio.Queue[pb.WatchMatchResponse | None] = asyncio.Queue()
        q.put_nowait(pb.WatchMatchResponse(view=self.view()))
        if self.ended:
            q.put_nowait(None)
        self.watches.append(q)

        async def items() -> AsyncIterator[pb.WatchMatchResponse]:
            while (item := await q.get()) is not None:
                await turns(self.rng, self.pauses)
                if item is FAILED:
                    raise grpc.aio.AioRpcError(
                        grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata()
                    )
                yield item

        return items()

    async def GetReplay(self, request: pb.GetReplayRequest, timeout: float) -> Any:
        events = [e for e in self.log if e.seq > request.after_seq]
        await turns(self.rng, self.pauses)
        return pb.GetReplayResponse(events=events, complete=self.ended)

    async def GetMatch(self, request: pb.GetMatchRequest, timeout: float) -> Any:
        view = self.view()
        await turns(self.rng, self.pauses)
        return pb.GetMatchResponse(view=view)


@dataclass
class Connection:
    """One browser's connection as the ASGI server shows it: a transport the hub may write
    to directly, and `send`, which (as uvicorn's does under flow control) may pause before
    it writes."""

    rng: random.Random
    pauses: int
    direct: bool
    backlogged: int = 0
    """Bytes the transport reports unsent (a client that reads nothing)."""
    data: bytearray = field(default_factory=bytearray)
    closing: bool = False
    gone: asyncio.Event = field(default_factory=asyncio.Event)
    asked: int = 0

    def write(self, data: bytes) -> None:
        assert not self.closing, "written after the client had gone"
        self.data += data

    def is_closing(self) -> bool:
        return self.closing

    def get_write_buffer_size(self) -> int:
        return self.backlogged

    def leave(self) -> None:
        self.closing = True
        self.gone.set()

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            assert message["status"] == 200
            return
        await turns(self.rng, self.pauses)
        if self.closing:
            return
        body: bytes = message.get("body", b"")
        if body:
            self.write(b"%x\r\n%b\r\n" % (len(body), body))
        if not message.get("more_body", False):
            self.write(b"0\r\n\r\n")

    async def receive(self) -> dict[str, Any]:
        self.asked += 1
        if self.asked == 1:
            return {"type": "http.request", "body": b"", "more_body": False}
        await self.gone.wait()
        return {"type": "http.disconnect"}

    def scope(self) -> dict[str, Any]:
        extensions = {TRANSPORT_EXTENSION: self} if self.direct else {}
        return {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.4"},
            "method": "GET",
            "path": f"/api/matches/{MATCH}/events",
            "headers": [],
            "extensions": extensions,
        }

    def messages(self) -> tuple[list[tuple[str, Any, str | None]], bool]:
        """The SSE messages received (kind, data, id), and whether the body was closed."""
        raw, body, at, closed = bytes(self.data), bytearray(), 0, False
        while at < len(raw):
            end = raw.index(b"\r\n", at)
            size = int(raw[at:end], 16)
            if size == 0:
                closed = True
                assert end + 4 == len(raw), "bytes after the end of the body"
                break
            body += raw[end + 2 : end + 2 + size]
            assert raw[end + 2 + size : end + 4 + size] == b"\r\n"
            at = end + 4 + size
        out: list[tuple[str, Any, str | None]] = []
        for block in bytes(body).decode().split("\n\n"):
            fields = dict(
                line.split(": ", 1) for line in block.split("\n") if ": " in line and line[0] != ":"
            )
            if "data" in fields:
                out.append(
                    (fields.get("event", "message"), json.loads(fields["data"]), fields.get("id"))
                )
        return out, closed


@dataclass
class Stream:
    after: int
    conn: Connection
    task: asyncio.Task[None]


async def open_stream(gw: Gateway, conn: Connection, after: int) -> None:
    hub, sub = await gw.matches.subscribe(MATCH)
    assert isinstance(hub, MatchHub)
    response = MatchStream(gw, hub, sub, after, MATCH)
    await response(conn.scope(), conn.receive, conn.send)


def gateway_for(server: ScriptedServer, coalesce_s: float) -> Gateway:
    upstream = Upstream(server)  # type: ignore[arg-type]
    streams = SubscriberCounter(1000)
    matches: Registry[MatchHub] = Registry(
        lambda key: MatchHub(key, matches, upstream, coalesce_s), 4, streams
    )
    tournaments: Registry[Any] = Registry(lambda key: None, 1, streams)  # type: ignore[arg-type,return-value]
    return Gateway(upstream, matches, tournaments, streams, asyncio.Semaphore(1), Results(upstream))


def check_stream(stream: Stream, last: int, label: str, ended: bool = True) -> None:
    messages, closed = stream.conn.messages()
    seqs = [int(data["seq"]) for kind, data, _ in messages if kind == "event"]
    assert seqs == list(range(stream.after + 1, last + 1)), f"{label}: events {seqs}"
    ids = [int(i) for kind, _, i in messages if kind == "event" and i is not None]
    assert ids == seqs, f"{label}: ids {ids}"
    assert messages[0][0] == "view", f"{label}: first {messages[0]}"
    assert messages[-1] == ("end", {"ended": ended}, None), f"{label}: last {messages[-1]}"
    assert closed, f"{label}: the body was never closed"


async def scenario(seed: int) -> None:
    rng = random.Random(seed)
    pauses = rng.choice([0, 2, 8])
    server = ScriptedServer(rng, pauses)
    gw = gateway_for(server, rng.choice([0.0, 0.0, 0.002]))
    for _ in range(rng.randint(0, 6)):
        server.append()
    streams: list[Stream] = []
    for _ in range(rng.randint(10, 40)):
        step = rng.random()
        if step < 0.4:
            for _ in range(rng.choice([1, 1, 2, 5])):
                server.append()
        elif step < 0.7:
            known = len(server.log)
            after = rng.choice([0, 0, known, max(0, known - rng.randint(1, 4))])
            conn = Connection(rng, rng.choice([0, pauses]), direct=rng.random() < 0.8)
            streams.append(Stream(after, conn, asyncio.create_task(open_stream(gw, conn, after))))
        elif step < 0.95:
            await turns(rng, 12)
        else:
            await asyncio.sleep(0.003)
    await turns(rng, 12)
    server.end()
    # Late joiners: to the hub as it writes the last burst, or to a new one for the ended match.
    for _ in range(rng.choice([0, 0, 1, 2])):
        await turns(rng, 12)
        conn = Connection(rng, rng.choice([0, pauses]), direct=rng.random() < 0.8)
        after = rng.choice([0, len(server.log)])
        streams.append(Stream(after, conn, asyncio.create_task(open_stream(gw, conn, after))))
    tasks = [s.task for s in streams]
    done, pending = await asyncio.wait(tasks, timeout=STREAM_END_S) if tasks else (set(), set())
    for t in pending:
        t.cancel()
    label = f"seed {seed}"
    assert not pending, f"{label}: {len(pending)} of {len(tasks)} streams never ended"
    for t in done:
        t.result()
    for i, stream in enumerate(streams):
        check_stream(stream, len(server.log), f"{label}, stream {i} after {stream.after}")
    assert gw.streams.open == 0, f"{label}: {gw.streams.open} places still held"
    await gw.matches.close()


@pytest.mark.parametrize("buffer_events", [2048, 3])
def test_every_stream_gets_every_event_once_in_order_then_end_whatever_the_interleaving(
    monkeypatch: pytest.MonkeyPatch, buffer_events: int
) -> None:
    # A hub that holds only the last few events sends the rest of a backlog from the replay.
    monkeypatch.setattr(hubs, "BUFFER_EVENTS", buffer_events)
    for seed in range(SCENARIOS):
        asyncio.run(scenario(seed))


def test_a_stream_that_cannot_keep_up_or_whose_client_left_lets_go_and_holds_no_one_up() -> None:
    async def run() -> None:
        rng = random.Random(1)
        server = ScriptedServer(rng, 2)
        gw = gateway_for(server, 0.0)
        server.append()
        conns = {name: Connection(rng, 0, direct=True) for name in ("ok", "slow", "left")}
        tasks = {
            name: asyncio.create_task(open_stream(gw, conn, 0)) for name, conn in conns.items()
        }
        for _ in range(3):
            server.append()
            await turns(rng, 40)
        assert gw.streams.open == 3
        conns["slow"].backlogged = hubs.WRITE_BUFFER_BYTES + 1
        conns["left"].leave()
        for _ in range(3):
            server.append()
            await turns(rng, 40)
        await asyncio.wait_for(tasks["left"], STREAM_END_S)
        await asyncio.wait_for(tasks["slow"], STREAM_END_S)
        assert gw.streams.open == 1
        hub = gw.matches.hubs[MATCH]
        assert len(hub.subscribers) == 1
        # The slow one's stream closed without `end` (its browser resumes by Last-Event-ID).
        slow, closed = conns["slow"].messages()
        assert closed and [m[0] for m in slow][-1] != "end"
        server.end()
        await asyncio.wait_for(tasks["ok"], STREAM_END_S)
        check_stream(Stream(0, conns["ok"], tasks["ok"]), len(server.log), "the stream kept")
        assert gw.streams.open == 0
        await gw.matches.close()

    asyncio.run(run())


def test_when_the_server_fails_every_event_it_sent_goes_out_before_the_end() -> None:
    """The server's stream fails within a coalescing window: the events it had sent are
    still written, then `end` says the match did not end."""

    async def run() -> None:
        rng = random.Random(2)
        server = ScriptedServer(rng, 0)
        gw = gateway_for(server, 5.0)
        server.append()
        conns = [Connection(rng, 0, direct=direct) for direct in (True, False)]
        streams = [Stream(0, c, asyncio.create_task(open_stream(gw, c, 0))) for c in conns]
        await turns(rng, 40)
        for _ in range(4):  # sooner than the window: these wait for it
            server.append()
        server.fail()
        await asyncio.wait_for(asyncio.gather(*(s.task for s in streams)), STREAM_END_S)
        for i, stream in enumerate(streams):
            check_stream(stream, len(server.log), f"stream {i}", ended=False)
        assert gw.streams.open == 0
        await gw.matches.close()

    asyncio.run(run())
