"""What one client may take of the gateway: streams open at once, matches and tournaments
followed at once, and creations, joins and players registered (or signed in with) a minute.

The gateway's own caps (`--max-streams`, `--max-matches`) bound what all clients take
together; these bound each one, and are checked first, so that a client at its own limit is
answered 429 with a `Retry-After` and never holds the places the others need. A client is its
remote address (an IPv6 one by its /64, the block one machine is handed), or, behind a
reverse proxy given `--trust-proxy`, the address that proxy put last in `X-Forwarded-For`.

Everything here runs on the event loop, with no await between a check and what it counts,
so two requests of one client never both pass the last place.
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

CLIENT_STREAMS = 16
"""Event streams one client may hold open at once (a few tabs, each a match or tournament)."""
CLIENT_FOLLOWED = 4
"""Matches and tournaments one client may follow at once (streams open on each)."""
CREATES_PER_MINUTE = 10
"""Matches or tournaments one client may create a minute (and at once, after a quiet spell)."""
JOINS_PER_MINUTE = 30
"""Seats or registrations one client may take a minute (and at once, after a quiet spell)."""
REGISTERS_PER_MINUTE = 5
"""Players one client may register, or sign in with, a minute: a name is claimed for good."""
ANALYSES_PER_MINUTE = 3
"""Analyses of finished matches one client may start a minute (each takes every core for
seconds)."""
STREAM_RETRY_S = 5
"""The `Retry-After` of a stream refused by its client's limit: until one of its own ends."""
BUCKETS_KEPT = 65_536
"""Clients whose creations and joins are counted at once; beyond it, full buckets (clients
quiet for a minute or more) are forgotten."""
IPV6_PREFIX = 64


class Limited(Exception):
    """One client is at one of its limits: answered 429 with `Retry-After: retry_after`."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = max(1, retry_after)


@dataclass(frozen=True)
class ClientLimits:
    """Each client's limits, as `bergen web`'s flags set them."""

    streams: int = CLIENT_STREAMS
    followed: int = CLIENT_FOLLOWED
    per_minute: dict[str, int] = field(
        default_factory=lambda: {
            "create": CREATES_PER_MINUTE,
            "join": JOINS_PER_MINUTE,
            "register": REGISTERS_PER_MINUTE,
            "analyse": ANALYSES_PER_MINUTE,
        }
    )
    trust_proxy: bool = False
    """Take the client from the last `X-Forwarded-For` address (a reverse proxy in front)."""


def client_of(request: Request, trust_proxy: bool = False) -> str:
    """The client a request counts against: its remote address, an IPv6 one as its /64.
    With `trust_proxy`, the last address of `X-Forwarded-For` (the one the proxy in front
    added; those before it are whatever the client sent) when it is an address."""
    host = request.client.host if request.client is not None else ""
    if trust_proxy:
        forwarded = request.headers.get("x-forwarded-for", "")
        last = forwarded.rsplit(",", 1)[-1].strip()
        if last:
            host = last
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host or "unknown"
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.ip_network(f"{address}/{IPV6_PREFIX}", strict=False))
    return str(address)


@dataclass
class Bucket:
    """A token bucket: holds up to `capacity` tokens, refilled at `capacity` a minute."""

    capacity: int
    tokens: float
    at: float

    def take(self, now: float) -> float:
        """Take one token; returns 0, or the seconds until one is there (none taken)."""
        rate = self.capacity / 60.0
        self.tokens = min(float(self.capacity), self.tokens + (now - self.at) * rate)
        self.at = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / rate


class StreamLease:
    """One open stream's place in its client's counts; `release` (once, or more: the later
    calls do nothing) gives it back."""

    def __init__(self, limiter: Limiter, client: str, key: str) -> None:
        self._limiter = limiter
        self.client = client
        self.key = key
        self.released = False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self._limiter._give_back(self)


@dataclass
class _Holding:
    streams: int = 0
    followed: dict[str, int] = field(default_factory=dict)
    """Open streams by what they follow ("match:ID", "tournament:ID")."""


class Limiter:
    """Each client's open streams, what they follow, and its creations and joins."""

    def __init__(self, limits: ClientLimits, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self._clock = clock
        self._holding: dict[str, _Holding] = {}
        self._buckets: dict[tuple[str, str], Bucket] = {}

    def client(self, request: Request) -> str:
        """The client `request` counts against."""
        return client_of(request, self.limits.trust_proxy)

    def open_stream(self, client: str, key: str) -> StreamLease:
        """A place for one more stream of `client` on `key` ("match:ID"). Raises Limited when
        the client holds its limit of streams, or follows its limit of other things."""
        holding = self._holding.setdefault(client, _Holding())
        if holding.streams >= self.limits.streams:
            raise Limited(
                f"this client already has {self.limits.streams} streams open", STREAM_RETRY_S
            )
        if key not in holding.followed and len(holding.followed) >= self.limits.followed:
            raise Limited(
                f"this client already follows {self.limits.followed} matches or tournaments",
                STREAM_RETRY_S,
            )
        holding.streams += 1
        holding.followed[key] = holding.followed.get(key, 0) + 1
        return StreamLease(self, client, key)

    def _give_back(self, lease: StreamLease) -> None:
        holding = self._holding.get(lease.client)
        if holding is None:
            return
        holding.streams -= 1
        left = holding.followed.get(lease.key, 0) - 1
        if left > 0:
            holding.followed[lease.key] = left
        else:
            holding.followed.pop(lease.key, None)
        if holding.streams <= 0:
            del self._holding[lease.client]

    def streams_of(self, client: str) -> int:
        """The streams `client` has open."""
        holding = self._holding.get(client)
        return 0 if holding is None else holding.streams

    def spend(self, client: str, kind: str) -> None:
        """Count one `kind` ("create", "join" or "register") of `client`. Raises Limited
        (Retry-After: until its next one is allowed) when it has spent its rate; KeyError for
        another kind."""
        capacity = self.limits.per_minute[kind]
        now = self._clock()
        bucket = self._buckets.get((client, kind))
        if bucket is None:
            if len(self._buckets) >= BUCKETS_KEPT:
                self._forget_full(now)
            bucket = self._buckets[(client, kind)] = Bucket(capacity, float(capacity), now)
        wait = bucket.take(now)
        if wait > 0:
            raise Limited(f"this client may {kind} {capacity} times a minute", math.ceil(wait))

    def _forget_full(self, now: float) -> None:
        """Forget the buckets that have refilled (their clients quiet long enough)."""
        for key, bucket in list(self._buckets.items()):
            if bucket.tokens + (now - bucket.at) * bucket.capacity / 60.0 >= bucket.capacity:
                del self._buckets[key]


def limiter_of(request: Request) -> Limiter:
    """The app's limiter (`app.state.limits`)."""
    limiter: Limiter = request.app.state.limits
    return limiter


def spend(kind: str) -> Callable[[Callable[[Request], Awaitable[Response]]], Any]:
    """A handler's decorator: each request spends one `kind` ("create", "join", "register")
    of its client before the handler runs, which is refused (Limited: 429) once spent.

        @spend("create")
        async def create_match(request): ...
    """

    def decorate(
        handler: Callable[[Request], Awaitable[Response]],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def wrapped(request: Request) -> Response:
            limiter = limiter_of(request)
            limiter.spend(limiter.client(request), kind)
            return await handler(request)

        wrapped.__name__ = getattr(handler, "__name__", "handler")
        wrapped.__doc__ = handler.__doc__
        return wrapped

    return decorate
