"""One upstream stream per match or tournament, shared by every browser that follows it.

A `MatchHub` holds one `WatchMatch` (as a spectator: no token). After each burst of events
it reads the spectator's view once (`GetMatch`) and queues the burst's events and that view,
encoded once as Server-Sent Events, to every subscriber, which writes them in one go. It
keeps the last `BUFFER_EVENTS` events (read once by `GetReplay` when it starts, then as they
come) so that a page starting from the first event, or a browser reconnecting with
`Last-Event-ID`, is served from memory; `GetReplay` (as a spectator too) is asked only for an
older gap. A `TournamentHub` holds one `WatchTournament` and passes each view on; while
tables of the tournament are in play it also reads the tournament again every
`LIVE_SCORES_S` (one GetTournament for all its tables), since the server's stream sends a
view when a table's hand or match ends, not at each score within a hand.

Once a match stream has caught up (its first view and the backlog written through the ASGI
server), it is handed the connection's transport and the hub writes each burst to every such
subscriber itself, as one HTTP chunk framed once for all: no task wakes per subscriber and
per burst, which is where a gateway with hundreds of spectators spent its time. Without a
transport (another ASGI server) a subscriber is served from its queue by its own task.

Everything is bounded: at most `max_hubs` hubs (so at most that many upstream streams), at
most `max_subscribers` subscribers in all, `QUEUE_ITEMS` items queued for each, or
`WRITE_BUFFER_BYTES` unsent in a transport. A subscriber that falls that far behind is dropped
(its stream closes; the browser reconnects with its Last-Event-ID and resumes with no gap),
never allowed to hold memory or slow the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message
from grpc_health.v1 import health_pb2

from bergen.v1 import bergen_pb2 as pb
from bergen.v1 import bergen_pb2_grpc as rpc

log = logging.getLogger("bergen.web")

BUFFER_EVENTS = 2048
"""Events each match hub keeps for a reconnecting browser (older gaps come from GetReplay)."""
QUEUE_ITEMS = 1024
"""Items queued for one subscriber before it is dropped as too slow."""
WRITE_BUFFER_BYTES = 1 << 20
"""Bytes a direct subscriber's transport may hold unsent before it is dropped as too slow."""
CALL_TIMEOUT_S = 10.0
HEALTH_TIMEOUT_S = 2.0
"""How long `/api/health` waits for the server's health service."""
HEALTH_CHECK = "/grpc.health.v1.Health/Check"
GAME_SERVICE = "bergen.v1.BergenService"
KEEPALIVE_S = 15.0
COALESCE_S = 0.150
"""Default least time between two bursts of one match: events that come sooner wait and go
out together, in one write to each subscriber (`bergen web --coalesce-ms`). A burst after a
quiet spell goes out at once; a match played faster than this has its writes bounded, which
with hundreds of spectators is what the gateway's CPU is spent on (each write is a system
call per stream)."""
REPLAY_PAGE_LIMIT = 100_000
"""No replay served through the gateway holds more events than this."""
LIVE_SCORES_S = 2.0
"""While a followed tournament has tables in play, how often its hub reads it again for their
live scores: one GetTournament per followed tournament (at most `max_tournaments`)."""

JSON = dict[str, Any]


def to_json(message: Message) -> JSON:
    """A message as proto3 JSON with the .proto's field names, every field present (a seat 0
    or a score of 0 included); 64-bit integers are decimal strings, enums their names."""
    return json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )


class Busy(Exception):
    """The gateway already serves its limit of streams or of followed matches."""


class Gone(Exception):
    """The server refused the stream (no such match or tournament, or another status)."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


def sse(kind: str, data: Any, seq: int | None = None) -> bytes:
    """One SSE message; `id:` only on the messages a reconnect resumes after (events, and
    a tournament's views)."""
    head = f"id: {seq}\n" if seq is not None else ""
    body = json.dumps(data, separators=(",", ":"))
    return f"{head}event: {kind}\ndata: {body}\n\n".encode()


@dataclass(frozen=True)
class Item:
    """What a subscriber is sent: an event (`seq` set), a view, or the end; `wire` is its SSE
    message, encoded once for every subscriber."""

    kind: str  # "event", "view", "burst", "end"
    data: JSON
    seq: int = 0
    wire: bytes = b""
    parts: tuple[Item, ...] = ()
    """A burst's events; its `wire` is theirs and then `tail` (the view after them)."""
    tail: bytes = b""

    @property
    def chunk(self) -> bytes:
        """`wire` as one HTTP/1.1 chunk, framed once for every direct subscriber."""
        framed: bytes | None = self.__dict__.get("_chunk")
        if framed is None:
            framed = b"%x\r\n%b\r\n" % (len(self.wire), self.wire)
            object.__setattr__(self, "_chunk", framed)
        return framed

    @staticmethod
    def of(kind: str, data: JSON, seq: int = 0, with_id: bool = False) -> Item:
        return Item(kind, data, seq, sse(kind, data, seq if with_id else None))


KEEPALIVE = Item("keepalive", {}, 0, b": keepalive\n\n")


class Transport(Protocol):
    """What a direct subscriber needs of its connection (an asyncio transport)."""

    def write(self, data: bytes) -> None: ...
    def is_closing(self) -> bool: ...
    def get_write_buffer_size(self) -> int: ...


class Subscriber:
    def __init__(self) -> None:
        self.queue: asyncio.Queue[Item] = asyncio.Queue(QUEUE_ITEMS)
        self.dropped = False
        self.transport: Transport | None = None
        """Set once the stream has caught up: the hub then writes to it directly."""
        self.sent = 0
        """A direct match subscriber's last seq written."""
        self.done = asyncio.Event()
        """A direct subscriber's stream is over (ended, dropped, or its client gone)."""
        self.on_release: Callable[[], None] | None = None
        """Called once when the subscriber is let go (its client's place given back)."""

    def release(self) -> None:
        """Call `on_release`, the first time only."""
        on_release, self.on_release = self.on_release, None
        if on_release is not None:
            on_release()

    def go_direct(self, transport: Transport, sent: int) -> None:
        """From now on the hub writes to `transport` (the queue is empty and stays so)."""
        self.transport = transport
        self.sent = sent

    def offer(self, item: Item) -> bool:
        """Queue `item` (or write it, once direct); False (and dropped) when the subscriber
        is too far behind or its client has gone."""
        if self.dropped:
            return False
        if self.transport is not None:
            return self._write(item)
        try:
            self.queue.put_nowait(item)
        except asyncio.QueueFull:
            self.dropped = True
            # Wake the reader so it sees it was dropped.
            with contextlib.suppress(asyncio.QueueEmpty):
                self.queue.get_nowait()
            self.queue.put_nowait(Item.of("end", {"dropped": True}))
            return False
        return True

    def _write(self, item: Item) -> bool:
        transport = self.transport
        assert transport is not None
        if transport.is_closing() or transport.get_write_buffer_size() > WRITE_BUFFER_BYTES:
            return self._drop()
        if item.kind == "burst" and item.parts and item.parts[0].seq != self.sent + 1:
            # The first burst after the backlog may hold events the backlog already sent.
            rest = [p for p in item.parts if p.seq > self.sent]
            if rest and rest[0].seq != self.sent + 1:
                return self._drop()  # never a gap: the browser resumes from what it has
            item = Item("burst", {}, item.seq, b"".join(p.wire for p in rest) + item.tail)
        if item.kind == "burst":
            self.sent = max(self.sent, item.seq)
        elif item.kind == "end":
            if not item.data.get("dropped"):
                transport.write(item.chunk)
            self.done.set()
            return True
        transport.write(item.chunk)
        return True

    def _drop(self) -> bool:
        self.dropped = True
        self.done.set()
        return False


class Hub:
    """Subscribers of one upstream stream; started by the first, stopped after the last."""

    def __init__(self, key: str, registry: Registry[Any]) -> None:
        self.key = key
        self.registry = registry
        self.subscribers: set[Subscriber] = set()
        self.ready = asyncio.Event()
        self.error: Gone | None = None
        self.ended = False
        self.task: asyncio.Task[None] | None = None

    def publish(self, item: Item) -> None:
        for sub in list(self.subscribers):
            if not sub.offer(item):
                self.subscribers.discard(sub)
                self.registry.release_subscriber()
                log.info(
                    "%s: a subscriber fell %d items behind and was dropped", self.key, QUEUE_ITEMS
                )

    async def run(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def _closing(self) -> None:
        """What is still owed to the subscribers before their `end`."""

    async def _keepalive(self) -> None:
        """A comment line to every subscriber now and then, so that proxies and browsers keep
        an idle stream open."""
        while True:
            await asyncio.sleep(KEEPALIVE_S)
            self.publish(KEEPALIVE)

    async def _guarded(self) -> None:
        pinger = asyncio.create_task(self._keepalive())
        try:
            await self.run()
        except grpc.aio.AioRpcError as e:
            self.error = Gone(e.code(), e.details() or "")
            if self.ready.is_set():
                log.warning("%s: upstream stream failed: %s", self.key, e.code().name)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s: upstream stream failed", self.key)
            self.error = Gone(grpc.StatusCode.INTERNAL, "gateway error")
        finally:
            pinger.cancel()
            self.ended = True
            self.ready.set()
            self._closing()
            self.publish(Item.of("end", {"ended": self.error is None}))
            self.registry.forget(self)


H = TypeVar("H", bound=Hub)


class Registry(Generic[H]):
    """The hubs of one kind, by key, bounded in number; subscribers counted across kinds."""

    def __init__(self, make: Callable[[str], H], max_hubs: int, counter: SubscriberCounter) -> None:
        self._make = make
        self._max_hubs = max_hubs
        self._counter = counter
        self.hubs: dict[str, H] = {}

    def release_subscriber(self) -> None:
        self._counter.release()

    def forget(self, hub: Hub) -> None:
        if self.hubs.get(hub.key) is hub:
            del self.hubs[hub.key]

    async def subscribe(
        self, key: str, on_release: Callable[[], None] | None = None
    ) -> tuple[H, Subscriber]:
        """A subscriber of `key`'s hub (started if needed), once the hub has its first view;
        `on_release` is called once it is let go (unsubscribed, or refused here). Raises Busy
        or Gone."""
        try:
            self._counter.acquire()
        except BaseException:
            if on_release is not None:
                on_release()
            raise
        try:
            hub = self.hubs.get(key)
            if hub is None or hub.ended:
                if len(self.hubs) >= self._max_hubs:
                    raise Busy(f"the gateway already follows {self._max_hubs} streams")
                hub = self._make(key)
                self.hubs[key] = hub
                hub.task = asyncio.create_task(hub._guarded(), name=f"hub {key}")
            sub = Subscriber()
            sub.on_release = on_release
            hub.subscribers.add(sub)
        except BaseException:
            self._counter.release()
            if on_release is not None:
                on_release()
            raise
        try:
            await hub.ready.wait()
        except BaseException:
            self.unsubscribe(hub, sub)
            raise
        if hub.error is not None and sub in hub.subscribers:
            self.unsubscribe(hub, sub)
            raise hub.error
        return hub, sub

    def unsubscribe(self, hub: Hub, sub: Subscriber) -> None:
        sub.release()
        if sub in hub.subscribers:
            hub.subscribers.discard(sub)
            self._counter.release()
        if not hub.subscribers and not hub.ended and hub.task is not None:
            hub.task.cancel()
            self.forget(hub)

    async def close(self) -> None:
        tasks = [h.task for h in self.hubs.values() if h.task is not None]
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(BaseException):
                await t


@dataclass
class SubscriberCounter:
    """Open streams of the gateway, at most `limit`."""

    limit: int
    open: int = 0

    def acquire(self) -> None:
        if self.open >= self.limit:
            raise Busy(f"the gateway already serves {self.limit} streams")
        self.open += 1

    def release(self) -> None:
        self.open = max(0, self.open - 1)


@dataclass
class Upstream:
    """The game server, reached as a spectator: no call carries any token."""

    stub: rpc.BergenServiceStub
    timeout: float = CALL_TIMEOUT_S
    calls: dict[str, int] = field(default_factory=dict)
    channel: grpc.aio.Channel | None = None
    """The channel of `stub`, for the server's health service (`serving`)."""

    async def serving(self) -> str:
        """Whether the server's game service serves, as its gRPC health service says:
        `SERVING`, `NOT_SERVING` (shutting down, or refusing a log rolled back under its
        checkpoint), or, when the health service gives no answer, the call's status
        (`UNAVAILABLE`, `DEADLINE_EXCEEDED`...). Not counted in `calls`."""
        if self.channel is None:
            return "UNKNOWN"
        # The method itself: the typing stubs of grpc_health's HealthStub name no methods.
        check = self.channel.unary_unary(
            HEALTH_CHECK,
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString,
        )
        try:
            answer: health_pb2.HealthCheckResponse = await check(
                health_pb2.HealthCheckRequest(service=GAME_SERVICE), timeout=HEALTH_TIMEOUT_S
            )
        except grpc.aio.AioRpcError as e:
            return str(e.code().name)
        return str(health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status))

    async def call(self, name: str, request: Message) -> Any:
        self.calls[name] = self.calls.get(name, 0) + 1
        method: Callable[..., Coroutine[Any, Any, Any]] = getattr(self.stub, name)
        return await method(request, timeout=self.timeout)

    async def replay(self, match_id: str, after_seq: int) -> tuple[list[pb.Event], bool]:
        reply: pb.GetReplayResponse = await self.call(
            "GetReplay", pb.GetReplayRequest(match_id=match_id, after_seq=after_seq)
        )
        return list(reply.events)[:REPLAY_PAGE_LIMIT], reply.complete


class MatchHub(Hub):
    def __init__(
        self,
        match_id: str,
        registry: Registry[Any],
        upstream: Upstream,
        coalesce_s: float = COALESCE_S,
    ) -> None:
        super().__init__(match_id, registry)
        self.upstream = upstream
        self.coalesce_s = coalesce_s
        self.view: JSON = {}
        self.view_version = 0
        self.last_seq = 0
        self.buffer: deque[Item] = deque(maxlen=BUFFER_EVENTS)
        self._stale = asyncio.Event()
        self._pending: list[Item] = []

    async def run(self) -> None:
        refresher: asyncio.Task[None] | None = None
        stream = self.upstream.stub.WatchMatch(
            pb.WatchMatchRequest(match_id=self.key, batched=True)
        )
        self.upstream.calls["WatchMatch"] = self.upstream.calls.get("WatchMatch", 0) + 1
        try:
            async for item in stream:
                if item.HasField("view"):
                    self._set_view(item.view)
                    self.last_seq = item.view.version
                    # The events so far, read once for every subscriber that starts from the
                    # beginning (as a page does) instead of once each.
                    events, _ = await self.upstream.replay(self.key, 0)
                    for e in events[-BUFFER_EVENTS:]:
                        if e.seq <= self.last_seq:
                            self.buffer.append(Item.of("event", to_json(e), e.seq, with_id=True))
                    self.ready.set()
                    refresher = asyncio.create_task(self._refresh_views())
                    continue
                for event in item.events or (item.event,):
                    if event.seq <= self.last_seq:
                        continue
                    self.last_seq = event.seq
                    out = Item.of("event", to_json(event), event.seq, with_id=True)
                    self.buffer.append(out)
                    self._pending.append(out)
                self._stale.set()
        finally:
            if refresher is not None:
                refresher.cancel()
        # The match ended: the last events and view (revealed hands, result) for everyone.
        await self._flush()

    def _set_view(self, view: pb.MatchView) -> bool:
        if view.version < self.view_version:
            return False
        self.view = to_json(view)
        self.view_version = view.version
        return True

    async def _flush(self) -> None:
        """The events received since the last flush and the view after them, as one burst
        written once to each subscriber."""
        try:
            reply: pb.GetMatchResponse = await self.upstream.call(
                "GetMatch", pb.GetMatchRequest(match_id=self.key)
            )
            tail = b""
            if self._set_view(reply.view):
                tail = sse("view", self.view)
        except grpc.aio.AioRpcError as e:
            log.warning("%s: GetMatch failed: %s", self.key, e.code().name)
            tail = b""
        parts, self._pending = tuple(self._pending), []
        if not parts and not tail:
            return
        wire = b"".join(p.wire for p in parts) + tail
        seq = parts[-1].seq if parts else 0
        self.publish(Item("burst", {}, seq, wire, parts, tail))

    def _closing(self) -> None:
        """Events received but not yet written (the upstream failed, or the hub was stopped,
        within a coalescing window) go out before the end, without a view."""
        parts, self._pending = tuple(self._pending), []
        if parts:
            wire = b"".join(p.wire for p in parts)
            self.publish(Item("burst", {}, parts[-1].seq, wire, parts))

    async def _refresh_views(self) -> None:
        """After each burst of events, one spectator's view read for every subscriber, sent
        with the burst's events in one write; at most one burst every `coalesce_s`, so that
        events coming faster than that share a write."""
        loop = asyncio.get_running_loop()
        last = 0.0
        while True:
            await self._stale.wait()
            wait = last + self.coalesce_s - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            self._stale.clear()
            last = loop.time()
            await self._flush()

    async def backlog(self, after_seq: int) -> AsyncIterator[Item]:
        """The events after `after_seq` that happened before now: from the buffer, or from
        GetReplay for what the buffer no longer (or never) held."""
        held = list(self.buffer)
        first_held = held[0].seq if held else self.last_seq + 1
        sent = after_seq
        if first_held > sent + 1:
            events, _ = await self.upstream.replay(self.key, sent)
            for e in events:
                if e.seq == sent + 1:
                    sent = e.seq
                    yield Item.of("event", to_json(e), e.seq, with_id=True)
        for item in held:
            if item.seq == sent + 1:
                sent = item.seq
                yield item


def tables_in_play(view: JSON) -> bool:
    """Whether a tournament's view (as JSON) has a table whose match is being played."""
    rounds = view.get("rounds") or []
    if view.get("phase") != "TOURNAMENT_PHASE_RUNNING" or not rounds:
        return False
    return any(t.get("match_id") and not t.get("result") for t in rounds[-1].get("tables", []))


class TournamentHub(Hub):
    def __init__(
        self,
        tournament_id: str,
        registry: Registry[Any],
        upstream: Upstream,
        live_scores_s: float = LIVE_SCORES_S,
    ) -> None:
        super().__init__(tournament_id, registry)
        self.upstream = upstream
        self.live_scores_s = live_scores_s
        self.view: JSON = {}
        self.version = 0
        self._streamed = 0
        """Views received from the stream: a view read meanwhile by `_read_live` is dropped."""

    async def run(self) -> None:
        stream = self.upstream.stub.WatchTournament(
            pb.WatchTournamentRequest(tournament_id=self.key)
        )
        self.upstream.calls["WatchTournament"] = self.upstream.calls.get("WatchTournament", 0) + 1
        reader: asyncio.Task[None] | None = None
        try:
            async for reply in stream:
                self._streamed += 1
                self._show(reply.tournament)
                self.ready.set()
                if reader is None:
                    reader = asyncio.create_task(self._read_live())
        finally:
            if reader is not None:
                reader.cancel()

    def _show(self, view: pb.TournamentView) -> None:
        """Publish `view` unless it is what was published last (the same version may come
        again with other live scores)."""
        data = to_json(view)
        if data == self.view:
            return
        self.view = data
        self.version = view.version
        self.publish(Item.of("tournament", data, view.version, with_id=True))

    async def _read_live(self) -> None:
        """While tables are in play, the tournament read again every `live_scores_s`."""
        while True:
            await asyncio.sleep(self.live_scores_s)
            if not tables_in_play(self.view):
                continue
            streamed = self._streamed
            try:
                reply: pb.GetTournamentResponse = await self.upstream.call(
                    "GetTournament", pb.GetTournamentRequest(tournament_id=self.key)
                )
            except grpc.aio.AioRpcError as e:
                log.warning("%s: GetTournament failed: %s", self.key, e.code().name)
                continue
            if self._streamed == streamed and reply.tournament.version >= self.version:
                self._show(reply.tournament)
