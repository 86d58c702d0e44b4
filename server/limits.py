"""Per-client limits: no one client may take the server's capacity from the others.

A client is its bearer token where the call carries one that counts (see `ClientLimits`),
else its peer address (without the port). Past a limit a call is refused before any work
with RESOURCE_EXHAUSTED, a reason, and a retry hint (`retry_after_ms` in the ErrorInfo's
metadata, sent as a `google.rpc.RetryInfo` by the edge):

- CreateMatch: `creates_per_minute` per client (a token bucket holding a minute's worth),
  reason CREATE_RATE_EXCEEDED;
- JoinMatch: `joins_per_minute` seats per client, reason JOIN_RATE_EXCEEDED;
- RegisterPlayer: `registrations_per_minute` players per client, reason
  REGISTER_RATE_EXCEEDED (a name is claimed for good: one client may not claim them by the
  thousand);
- WatchMatch: `watchers_per_client` streams open at once per client, reason
  TOO_MANY_STREAMS_FOR_CLIENT (the server's own total, `--max-watchers`, still applies).
  The hint grows with the client's recent refusals (`RefusalPressure`): a client that opens
  stream after stream past its share is told to wait longer and longer, up to
  `MAX_STREAM_RETRY_S`, so that one that waits as told costs the server a few refusals a
  second however many streams it tries to hold; one that is refused now and then is told a
  second.

Memory is bounded whatever the number of addresses and tokens: each rate table keeps at
most `max_clients` clients, forgetting the one heard from least recently (which can only
give that client a full bucket again), and the stream table holds only clients with a
stream open.

A client that sends wrong secrets (an organiser, seat or entrant token that is not the one it
claims to be) is slowed down: past a few, each one doubles its wait before its next call that
carries a token, refused meanwhile with WRONG_SECRET_BACKOFF (`WrongSecrets`).

A peer on a loopback address is not limited unless `limit_loopback`: behind a reverse proxy
on the same machine every client would share the proxy's address.
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bergen.domain.errors import ResourceExhausted

from .edge import RETRY_AFTER_KEY

CREATES_PER_MINUTE = 30
JOINS_PER_MINUTE = 6
"""A few seats a minute: a player joins one match at a time."""
REGISTRATIONS_PER_MINUTE = 6
"""A few players a minute: a person registers once, a bot's owner a few."""
WATCHERS_PER_CLIENT = 16
FOLLOWS_PER_CLIENT = 1_000
"""Matches one client may follow at once on WatchMatches streams, by default: a share of the
server's follows, so that one client cannot take them all."""
MAX_CLIENTS = 10_000
"""Clients each rate table remembers at most."""
MIN_STREAM_RETRY_S = 1.0
MAX_STREAM_RETRY_S = 60.0
REFUSAL_HALF_LIFE_S = 10.0
"""How fast a client's recent stream refusals are forgotten."""
REFUSALS_PER_HINT_SECOND = 4
"""A refused client is told to wait a second more for each 4 refusals it has counted."""


@dataclass(frozen=True, slots=True)
class Limits:
    """The limits of one server (see the module). Raises ValueError for a limit below 1."""

    creates_per_minute: int = CREATES_PER_MINUTE
    joins_per_minute: int = JOINS_PER_MINUTE
    watchers_per_client: int = WATCHERS_PER_CLIENT
    max_clients: int = MAX_CLIENTS
    limit_loopback: bool = False
    registrations_per_minute: int = REGISTRATIONS_PER_MINUTE
    follows_per_client: int = FOLLOWS_PER_CLIENT

    def __post_init__(self) -> None:
        for name in (
            "creates_per_minute",
            "joins_per_minute",
            "watchers_per_client",
            "registrations_per_minute",
            "follows_per_client",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")
        if self.max_clients < 1:
            raise ValueError(f"max_clients must be at least 1, not {self.max_clients}")


class RateTable:
    """Token buckets of `per_minute` tokens refilled evenly over a minute, one per client,
    for at most `max_clients` clients (least recently heard from forgotten first)."""

    def __init__(
        self, per_minute: int, max_clients: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._capacity = float(per_minute)
        self._per_second = per_minute / 60.0
        self._max = max_clients
        self._clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._buckets)

    def take(self, client: str) -> float:
        """Take a token for `client`: 0.0 when one was there, else the seconds until one
        will be (nothing is taken)."""
        now = self._clock()
        with self._lock:
            tokens, then = self._buckets.pop(client, (self._capacity, now))
            tokens = min(self._capacity, tokens + (now - then) * self._per_second)
            wait = 0.0
            if tokens >= 1.0:
                tokens -= 1.0
            else:
                wait = (1.0 - tokens) / self._per_second
            self._buckets[client] = (tokens, now)
            while len(self._buckets) > self._max:
                self._buckets.popitem(last=False)
            return wait


class StreamTable:
    """Streams open per client, at most `per_client` each; a client with none is forgotten."""

    def __init__(self, per_client: int) -> None:
        self._per_client = per_client
        self._open: dict[str, int] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._open)

    def open(self, client: str, count: int = 1) -> bool:
        """Count `count` streams (or follows) for `client`; False (nothing counted) when that
        would take it past its limit."""
        with self._lock:
            n = self._open.get(client, 0)
            if n + count > self._per_client:
                return False
            self._open[client] = n + count
            return True

    def close(self, client: str, count: int = 1) -> None:
        with self._lock:
            n = self._open.get(client, 0) - count
            if n > 0:
                self._open[client] = n
            else:
                self._open.pop(client, None)


class RefusalPressure:
    """How often each client was refused lately: a count that every refusal raises by one and
    that halves every `half_life` seconds, for at most `max_clients` clients (least recently
    refused forgotten first). The retry hint is a second per `per_second_hint` refusals
    counted, between `MIN_STREAM_RETRY_S` and `MAX_STREAM_RETRY_S`.

    A client that keeps n attempts waiting as told settles where each attempt waits about
    sqrt(n * half_life / (ln 2 * per_second_hint)) seconds, at most `MAX_STREAM_RETRY_S`:
    with n = 1,600 and the defaults (half-life 10 s, a second per 4), the full 60 s, some 27
    refusals a second in all instead of 1,600. A client refused once is told a second; one
    that tries again each time it is told waits 1, 1, 1, 1, 2, 2... seconds."""

    def __init__(
        self,
        per_second_hint: int,
        max_clients: int,
        half_life: float = REFUSAL_HALF_LIFE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._per_second_hint = float(per_second_hint)
        self._decay = math.log(2) / half_life
        self._max = max_clients
        self._clock = clock
        self._counts: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._counts)

    def refuse(self, client: str) -> float:
        """Count a refusal of `client`; the seconds it should wait before trying again."""
        now = self._clock()
        with self._lock:
            count, then = self._counts.pop(client, (0.0, now))
            count = count * math.exp(-self._decay * (now - then)) + 1.0
            self._counts[client] = (count, now)
            while len(self._counts) > self._max:
                self._counts.popitem(last=False)
        return min(MAX_STREAM_RETRY_S, max(MIN_STREAM_RETRY_S, count / self._per_second_hint))


WRONG_SECRET_REASONS = frozenset(
    {
        "NOT_THE_ORGANISER_TOKEN",
        "NOT_A_SEAT_OF_THIS_MATCH",
        "NOT_THIS_ENTRANT",
        "NOT_A_PLAYER_OF_THIS_TOURNAMENT",
        "PLAYER_TOKEN_INVALID",
    }
)
"""The reasons a call is refused for a secret that is not the one it claims to be."""
FREE_WRONG_SECRETS = 5
"""Wrong secrets a client may send before it is slowed down (a mistyped token, a stale one)."""
FIRST_SECRET_WAIT_S = 0.5
MAX_SECRET_WAIT_S = 60.0
WRONG_SECRET_HALF_LIFE_S = 300.0
"""How fast a client's wrong secrets are forgotten."""


class WrongSecrets:
    """Backoff for clients that send wrong secrets (organiser, seat, entrant or player tokens,
    one-time codes): past `FREE_WRONG_SECRETS` in a row (a count that halves every
    `WRONG_SECRET_HALF_LIFE_S`), each wrong one makes the client wait twice as long as the
    last before its next call that carries a secret, from `FIRST_SECRET_WAIT_S` up to
    `MAX_SECRET_WAIT_S`. A call in the wait is refused with RESOURCE_EXHAUSTED
    (WRONG_SECRET_BACKOFF) and a retry hint, before any work, so that guessing runs at a
    handful of tries a minute instead of thousands a second. Calls without a secret go on
    (watching, listing), and so do clients that are not limited (`client`)."""

    def __init__(
        self,
        client: Callable[[str], str | None],
        max_clients: int = MAX_CLIENTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._max = max_clients
        self._clock = clock
        self._decay = math.log(2) / WRONG_SECRET_HALF_LIFE_S
        # client -> (wrong secrets counted, when last counted, the end of its wait)
        self._clients: OrderedDict[str, tuple[float, float, float]] = OrderedDict()
        self._lock = threading.Lock()
        self.wrong = 0
        """Wrong secrets counted, since the start."""
        self.held = 0
        """Calls refused for the wait, since the start."""

    def __len__(self) -> int:
        return len(self._clients)

    def check(self, peer: str, metadata: Sequence[tuple[str, str | bytes]]) -> None:
        if any(key == "authorization" for key, _ in metadata):
            self.hold(peer)

    def hold(self, peer: str) -> None:
        """Raises ResourceExhausted (WRONG_SECRET_BACKOFF) while `peer` must wait before it
        sends a secret again, wherever in the call the secret is."""
        key = self._client(peer)
        if key is None:
            return
        now = self._clock()
        with self._lock:
            found = self._clients.get(key)
            if found is None or found[2] <= now:
                return
            self.held += 1
            wait = found[2] - now
        ms = max(1, math.ceil(wait * 1000))
        raise ResourceExhausted(
            f"this client has sent too many wrong tokens or codes; try again in {ms / 1000:.1f} s",
            reason="WRONG_SECRET_BACKOFF",
            **{RETRY_AFTER_KEY: ms},
        )

    def refused(self, peer: str, reason: str) -> None:
        if reason not in WRONG_SECRET_REASONS:
            return
        key = self._client(peer)
        with self._lock:
            self.wrong += 1
            if key is None:
                return
            now = self._clock()
            count, then, _ = self._clients.pop(key, (0.0, now, now))
            count = count * math.exp(-self._decay * (now - then)) + 1.0
            over = count - FREE_WRONG_SECRETS
            wait = 0.0 if over <= 0 else min(MAX_SECRET_WAIT_S, FIRST_SECRET_WAIT_S * 2**over)
            self._clients[key] = (count, now, now + wait)
            while len(self._clients) > self._max:
                self._clients.popitem(last=False)


class ClientLimits:
    """The limits of every client of one server. `trusted(token)` says whether a bearer token
    names a client of its own for creating and joining (the organiser's token does; any other
    token could be made up for each call, so those calls count against the address). A
    watcher's token always does: a token that holds no seat is refused before its stream
    counts for long."""

    def __init__(self, limits: Limits, trusted: Callable[[str], bool] = lambda _: False) -> None:
        self.limits = limits
        self._trusted = trusted
        self._creates = RateTable(limits.creates_per_minute, limits.max_clients)
        self._joins = RateTable(limits.joins_per_minute, limits.max_clients)
        self._registrations = RateTable(limits.registrations_per_minute, limits.max_clients)
        self._streams = StreamTable(limits.watchers_per_client)
        self._follows = StreamTable(limits.follows_per_client)
        self._stream_refusals = RefusalPressure(REFUSALS_PER_HINT_SECOND, limits.max_clients)
        self.secrets = WrongSecrets(self.address_of, limits.max_clients)

    def address_of(self, peer: str) -> str | None:
        """The key of the calling client by its address alone; None for one that is not
        limited (a loopback peer, unless `limit_loopback`)."""
        address = peer_address(peer)
        if not self.limits.limit_loopback and _is_loopback(address):
            return None
        return "address:" + address

    def client(self, peer: str, token: str | None, *, any_token: bool = False) -> str | None:
        """The key of the calling client; None for one that is not limited (a loopback peer,
        unless `limit_loopback`)."""
        if token is not None and (any_token or self._trusted(token)):
            return "token:" + hashlib.sha256(token.encode()).hexdigest()[:32]
        return self.address_of(peer)

    def create(self, peer: str, token: str | None) -> None:
        """Raises ResourceExhausted when the client has created its share this minute."""
        key = self.client(peer, token)
        if key is not None:
            _check(
                self._creates.take(key),
                "CREATE_RATE_EXCEEDED",
                "matches created",
                self.limits.creates_per_minute,
            )

    def join(self, peer: str, token: str | None) -> None:
        """Raises ResourceExhausted when the client has taken its share of seats this minute."""
        key = self.client(peer, token)
        if key is not None:
            _check(
                self._joins.take(key),
                "JOIN_RATE_EXCEEDED",
                "seats taken",
                self.limits.joins_per_minute,
            )

    def register(self, peer: str, token: str | None) -> None:
        """Raises ResourceExhausted when the client has registered its share of players this
        minute."""
        key = self.client(peer, token)
        if key is not None:
            _check(
                self._registrations.take(key),
                "REGISTER_RATE_EXCEEDED",
                "players registered",
                self.limits.registrations_per_minute,
            )

    def open_stream(self, peer: str, token: str | None) -> str | None:
        """Count a stream; returns the key to give `close_stream` when it ends. Raises
        ResourceExhausted when the client already has its limit open."""
        key = self.client(peer, token, any_token=True)
        if key is None:
            return None
        if not self._streams.open(key):
            limit = self.limits.watchers_per_client
            wait = self._stream_refusals.refuse(key)
            raise ResourceExhausted(
                f"this client already has {limit} watch streams open; close one first, or try "
                f"again in {wait:.0f} s",
                reason="TOO_MANY_STREAMS_FOR_CLIENT",
                limit=limit,
                **{RETRY_AFTER_KEY: math.ceil(wait * 1000)},
            )
        return key

    def close_stream(self, key: str | None) -> None:
        if key is not None:
            self._streams.close(key)

    def open_follows(self, peer: str, token: str | None, count: int) -> str | None:
        """Count `count` follows of a WatchMatches stream; returns the key to give
        `close_follows` when it ends. Raises ResourceExhausted when the client would hold more
        than its share."""
        key = self.client(peer, token, any_token=True)
        if key is None:
            return None
        if not self._follows.open(key, count):
            limit = self.limits.follows_per_client
            raise ResourceExhausted(
                f"this client may follow at most {limit} matches at once, and asks for "
                f"{count} more than it has; end a stream first",
                reason="TOO_MANY_FOLLOWS_FOR_CLIENT",
                limit=limit,
            )
        return key

    def close_follows(self, key: str | None, count: int) -> None:
        if key is not None:
            self._follows.close(key, count)

    def sizes(self) -> tuple[int, int, int, int]:
        """Clients remembered by the create, join, stream and stream refusal tables."""
        return (
            len(self._creates),
            len(self._joins),
            len(self._streams),
            len(self._stream_refusals),
        )


def _check(wait: float, reason: str, what: str, per_minute: int) -> None:
    if wait <= 0.0:
        return
    ms = max(1, math.ceil(wait * 1000))
    raise ResourceExhausted(
        f"this client has {what} at {per_minute} a minute, its limit; try again in "
        f"{ms / 1000:.1f} s",
        reason=reason,
        limit=per_minute,
        **{RETRY_AFTER_KEY: ms},
    )


def peer_address(peer: str) -> str:
    """The address of a gRPC peer string without its port: `ipv4:1.2.3.4:5` -> `1.2.3.4`,
    `ipv6:[::1]:5` -> `::1`; anything else (a Unix socket) as it is."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest.rpartition(":")[0] or rest
    if kind == "ipv6":
        host = rest.rpartition(":")[0] if rest.startswith("[") else rest
        return host.strip("[]")
    return peer


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return address.startswith("unix")
