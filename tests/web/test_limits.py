"""Each client's own limits on the gateway: past them it is answered 429 with a Retry-After,
and the others are served as before (never a 503 because of one client). The clients are
loopback addresses (127.0.0.1, 127.0.0.2, ...), or behind `--trust-proxy` the addresses a
proxy forwards."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from e2e.client import Client, seat_everyone
from e2e.servers import ServerFarm, ServerProcess
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bergen.cli_client.web.limits import ClientLimits, Limited, Limiter, client_of, spend

from .gateway import EventStream, Gateway, start_gateway
from .test_api import wait_for

pytestmark = pytest.mark.timeout(240, method="signal")

ABUSER = "127.0.0.1"
OTHER = "127.0.0.2"


@contextlib.contextmanager
def started(server: ServerProcess, farm: ServerFarm, *options: str) -> Iterator[Gateway]:
    gw = start_gateway(server.target, farm.workdir, *options)
    try:
        yield gw
    finally:
        assert gw.stop() == 0, gw.log()


@contextlib.contextmanager
def opened(streams: list[EventStream]) -> Iterator[list[EventStream]]:
    try:
        yield streams
    finally:
        for s in streams:
            s.close()


def refused_by_its_limit(stream: EventStream) -> None:
    """`stream` was answered 429 with a Retry-After of whole seconds and the code a page
    puts in words."""
    assert stream.status == 429, stream.status
    retry = stream.response.getheader("Retry-After") or ""
    assert retry.isdigit() and int(retry) >= 1, retry
    assert b'"code":"CLIENT_LIMIT"' in stream.response.read()


def first_message_kind(stream: EventStream) -> str:
    return next(stream.messages()).kind


@pytest.mark.postgres
def test_one_client_past_its_streams_gets_429_while_another_still_gets_its_stream(
    server: ServerProcess, module_farm: ServerFarm
) -> None:
    with Client(server.target) as client:
        match = seat_everyone(client, 2, name="many streams").match_id
    path = f"/api/matches/{match}/events"
    with started(server, module_farm, "--client-streams", "3") as gw, opened([]) as streams:
        for _ in range(3):
            streams.append(EventStream(gw, path, source=ABUSER))
            assert streams[-1].status == 200
        for i in range(40):  # a burst of more: each refused, none taking a place
            # X-Forwarded-For is not believed without --trust-proxy: still the same client
            more = EventStream(gw, path, source=ABUSER, headers={"X-Forwarded-For": f"10.0.0.{i}"})
            streams.append(more)
            refused_by_its_limit(more)
        other = EventStream(gw, path, source=OTHER)
        streams.append(other)
        assert other.status == 200
        assert first_message_kind(other) == "view"
        assert gw.get("/api/health")[1]["streams"] == 4
        for s in streams[:3]:
            s.close()
        for _ in range(3 * 5):  # streams dropped at once, again and again
            EventStream(gw, path, source=ABUSER).close()
        wait_for(lambda: gw.get("/api/health")[1]["streams"] == 1, what="places given back")
        again = EventStream(gw, path, source=ABUSER)
        streams.append(again)
        assert again.status == 200  # its places came back when its streams closed


@pytest.mark.postgres
def test_one_client_following_many_matches_is_refused_with_429_and_others_are_not(
    server: ServerProcess, module_farm: ServerFarm
) -> None:
    with Client(server.target) as client:
        matches = [seat_everyone(client, 2, name=f"follow {i}").match_id for i in range(4)]
    options = ("--client-follows", "2", "--max-matches", "4")
    with started(server, module_farm, *options) as gw, opened([]) as streams:
        for m in matches[:2]:
            streams.append(EventStream(gw, f"/api/matches/{m}/events", source=ABUSER))
            assert streams[-1].status == 200
        third = EventStream(gw, f"/api/matches/{matches[2]}/events", source=ABUSER)
        streams.append(third)
        refused_by_its_limit(third)  # its own limit: not the gateway's 503
        tournament = EventStream(gw, "/api/tournaments/nothing-here/events", source=ABUSER)
        streams.append(tournament)
        refused_by_its_limit(tournament)  # tournaments count among what it follows
        same = EventStream(gw, f"/api/matches/{matches[0]}/events", source=ABUSER)
        streams.append(same)
        assert same.status == 200  # one more stream of a match it follows is no new follow
        assert gw.get("/api/health")[1]["matches_followed"] == 2
        for m in matches[2:]:
            streams.append(EventStream(gw, f"/api/matches/{m}/events", source=OTHER))
            assert streams[-1].status == 200
            assert first_message_kind(streams[-1]) == "view"
        assert gw.get("/api/health")[1]["matches_followed"] == 4


@pytest.mark.postgres
def test_behind_a_trusted_proxy_the_last_forwarded_address_is_the_client(
    server: ServerProcess, module_farm: ServerFarm
) -> None:
    with Client(server.target) as client:
        match = seat_everyone(client, 2, name="proxied").match_id
    path = f"/api/matches/{match}/events"

    def via_proxy(forwarded: str) -> EventStream:
        return EventStream(gw, path, headers={"X-Forwarded-For": forwarded})

    options = ("--trust-proxy", "--client-streams", "1")
    with started(server, module_farm, *options) as gw, opened([]) as streams:
        streams.append(via_proxy("198.51.100.7"))
        assert streams[-1].status == 200
        streams.append(via_proxy("198.51.100.7"))
        refused_by_its_limit(streams[-1])
        # An address the client put first itself changes nothing: the proxy's is last.
        streams.append(via_proxy("203.0.113.9, 198.51.100.7"))
        refused_by_its_limit(streams[-1])
        streams.append(via_proxy("198.51.100.7, 203.0.113.9"))
        assert streams[-1].status == 200


# --- creations and joins a minute ------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_token_bucket_refills_at_its_rate_a_client_at_a_time() -> None:
    clock = Clock()
    limiter = Limiter(ClientLimits(per_minute={"create": 3, "join": 30}), clock)
    for _ in range(3):
        limiter.spend("a", "create")
    with pytest.raises(Limited) as refused:
        limiter.spend("a", "create")
    assert refused.value.retry_after == 20  # 3 a minute: one every 20 s
    limiter.spend("b", "create")  # another client has its own
    limiter.spend("a", "join")  # and joins their own
    clock.now += 19.5
    with pytest.raises(Limited):
        limiter.spend("a", "create")
    clock.now += 0.5
    limiter.spend("a", "create")  # one token back after 20 s
    with pytest.raises(Limited):
        limiter.spend("a", "create")
    clock.now += 600
    for _ in range(3):  # refilled to its capacity, and no more
        limiter.spend("a", "create")
    with pytest.raises(Limited):
        limiter.spend("a", "create")


def request_from(host: str, headers: dict[str, str] | None = None, app: Any = None) -> Request:
    scope: dict[str, Any] = {
        "type": "http",
        "method": "POST",
        "path": "/api/play",
        "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()],
        "client": (host, 40000),
    }
    if app is not None:
        scope["app"] = app
    return Request(scope)


def test_the_spend_decorator_refuses_a_handler_once_its_client_has_spent() -> None:
    class App:
        class state:  # the shape of Starlette's app.state
            limits = Limiter(ClientLimits(per_minute={"create": 1, "join": 1}), Clock())

    calls: list[str] = []

    @spend("create")
    async def create(request: Request) -> Response:
        calls.append(request.client.host if request.client else "")
        return JSONResponse({})

    asyncio.run(create(request_from("192.0.2.1", app=App)))
    with pytest.raises(Limited):
        asyncio.run(create(request_from("192.0.2.1", app=App)))
    asyncio.run(create(request_from("192.0.2.2", app=App)))
    assert calls == ["192.0.2.1", "192.0.2.2"]  # the refused one never ran


def test_a_client_is_its_address_an_ipv6_one_by_its_64_and_a_proxy_only_when_trusted() -> None:
    assert client_of(request_from("192.0.2.1")) == "192.0.2.1"
    assert client_of(request_from("2001:db8:1:2:aaaa::1")) == "2001:db8:1:2::/64"
    assert client_of(request_from("2001:db8:1:2:bbbb::9")) == "2001:db8:1:2::/64"
    assert client_of(request_from("::ffff:192.0.2.1")) == "192.0.2.1"
    forwarded = {"X-Forwarded-For": "10.1.1.1, 192.0.2.50"}
    assert client_of(request_from("127.0.0.1", forwarded)) == "127.0.0.1"
    assert client_of(request_from("127.0.0.1", forwarded), trust_proxy=True) == "192.0.2.50"
