"""One upstream stream per match or tournament, shared by every browser that follows it.

A `MatchHub` holds one `WatchMatch` (as a spectator: no token) and fans each event out to
the queues of its subscribers; it keeps the last `BUFFER_EVENTS` events so that a browser
that reconnects with `Last-Event-ID` resumes from them, and asks `GetReplay` (as a spectator
too) only for an older gap. After each burst of events it reads the spectator's view once
(`GetMatch`) for all of its subscribers. A `TournamentHub` holds one `WatchTournament` and
passes each view on.

Everything is bounded: at most `max_hubs` hubs (so at most that many upstream streams), at
most `max_subscribers` subscribers in all, `QUEUE_ITEMS` items queued for each. A subscriber
that falls that far behind is dropped (its stream closes; the browser reconnects with its
Last-Event-ID and resumes with no gap), never allowed to hold memory or slow the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message

from bergen.v1 import bergen_pb2 as pb
from bergen.v1 import bergen_pb2_grpc as rpc

log = logging.getLogger("bergen.web")

BUFFER_EVENTS = 2048
"""Events each match hub keeps for a reconnecting browser (older gaps come from GetReplay)."""
QUEUE_ITEMS = 1024
"""Items queued for one subscriber before it is dropped as too slow."""
CALL_TIMEOUT_S = 10.0
REPLAY_PAGE_LIMIT = 100_000
"""No replay served through the gateway holds more events than this."""

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


@dataclass(frozen=True)
class Item:
    """What a subscriber is sent: an event (`seq` set), a view, or the end."""

    kind: str  # "event", "view", "end"
    data: JSON
    seq: int = 0


class Subscriber:
    def __init__(self) -> None:
        self.queue: asyncio.Queue[Item] = asyncio.Queue(QUEUE_ITEMS)
        self.dropped = False

    def offer(self, item: Item) -> bool:
        """Queue `item`; False (and dropped) when the queue is full."""
        if self.dropped:
            return False
        try:
            self.queue.put_nowait(item)
        except asyncio.QueueFull:
            self.dropped = True
            # Wake the reader so it sees it was dropped.
            with contextlib.suppress(asyncio.QueueEmpty):
                self.queue.get_nowait()
            self.queue.put_nowait(Item("end", {"dropped": True}))
            return False
        return True


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

    async def _guarded(self) -> None:
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
            self.ended = True
            self.ready.set()
            self.publish(Item("end", {"ended": self.error is None}))
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

    async def subscribe(self, key: str) -> tuple[H, Subscriber]:
        """A subscriber of `key`'s hub (started if needed), once the hub has its first view.
        Raises Busy or Gone."""
        self._counter.acquire()
        try:
            hub = self.hubs.get(key)
            if hub is None or hub.ended:
                if len(self.hubs) >= self._max_hubs:
                    raise Busy(f"the gateway already follows {self._max_hubs} streams")
                hub = self._make(key)
                self.hubs[key] = hub
                hub.task = asyncio.create_task(hub._guarded(), name=f"hub {key}")
            sub = Subscriber()
            hub.subscribers.add(sub)
        except BaseException:
            self._counter.release()
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
    def __init__(self, match_id: str, registry: Registry[Any], upstream: Upstream) -> None:
        super().__init__(match_id, registry)
        self.upstream = upstream
        self.view: JSON = {}
        self.view_version = 0
        self.last_seq = 0
        self.buffer: deque[Item] = deque(maxlen=BUFFER_EVENTS)
        self._stale = asyncio.Event()

    async def run(self) -> None:
        refresher: asyncio.Task[None] | None = None
        stream = self.upstream.stub.WatchMatch(pb.WatchMatchRequest(match_id=self.key))
        self.upstream.calls["WatchMatch"] = self.upstream.calls.get("WatchMatch", 0) + 1
        try:
            async for item in stream:
                if item.HasField("view"):
                    self._set_view(item.view)
                    self.last_seq = item.view.version
                    self.ready.set()
                    refresher = asyncio.create_task(self._refresh_views())
                    continue
                event = item.event
                if event.seq <= self.last_seq:
                    continue
                self.last_seq = event.seq
                out = Item("event", to_json(event), event.seq)
                self.buffer.append(out)
                self.publish(out)
                self._stale.set()
            # The match ended: its last view (revealed hands, result) for everyone.
            await self._read_view()
        finally:
            if refresher is not None:
                refresher.cancel()

    def _set_view(self, view: pb.MatchView) -> bool:
        if view.version < self.view_version:
            return False
        self.view = to_json(view)
        self.view_version = view.version
        return True

    async def _read_view(self) -> None:
        reply: pb.GetMatchResponse = await self.upstream.call(
            "GetMatch", pb.GetMatchRequest(match_id=self.key)
        )
        if self._set_view(reply.view):
            self.publish(Item("view", self.view, reply.view.version))

    async def _refresh_views(self) -> None:
        """One spectator's view read after each burst of events, shared by every subscriber."""
        while True:
            await self._stale.wait()
            self._stale.clear()
            try:
                await self._read_view()
            except grpc.aio.AioRpcError as e:
                log.warning("%s: GetMatch failed: %s", self.key, e.code().name)
                await asyncio.sleep(0.5)

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
                    yield Item("event", to_json(e), e.seq)
        for item in held:
            if item.seq == sent + 1:
                sent = item.seq
                yield item


class TournamentHub(Hub):
    def __init__(self, tournament_id: str, registry: Registry[Any], upstream: Upstream) -> None:
        super().__init__(tournament_id, registry)
        self.upstream = upstream
        self.view: JSON = {}
        self.version = 0

    async def run(self) -> None:
        stream = self.upstream.stub.WatchTournament(
            pb.WatchTournamentRequest(tournament_id=self.key)
        )
        self.upstream.calls["WatchTournament"] = self.upstream.calls.get("WatchTournament", 0) + 1
        async for reply in stream:
            view = reply.tournament
            self.view = to_json(view)
            self.version = view.version
            self.ready.set()
            self.publish(Item("view", self.view, view.version))
