"""Per-client limits: a client past its share of match creations, seats or open watch
streams is refused with RESOURCE_EXHAUSTED, a reason and a retry hint, and another client
(the organiser, a seat's holder) is served as before. The tables stay bounded whatever the
number of clients."""

from __future__ import annotations

import itertools
import secrets
import time

import grpc
import pytest
from e2e.client import Client, bearer
from e2e.refusals import refusal
from e2e.servers import ServerFarm, ServerProcess
from e2e.test_metrics import metrics_url, scrape, value

from bergen.domain.errors import ResourceExhausted
from bergen.server.limits import (
    FIRST_SECRET_WAIT_S,
    FREE_WRONG_SECRETS,
    MAX_STREAM_RETRY_S,
    WRONG_SECRET_HALF_LIFE_S,
    ClientLimits,
    Limits,
    RateTable,
    RefusalPressure,
    StreamTable,
    WrongSecrets,
    peer_address,
)
from bergen.v1 import bergen_pb2 as pb

from .conftest import ORGANISER_TOKEN

pytestmark = pytest.mark.timeout(120)


def limited(farm: ServerFarm, database: str, *args: str) -> ServerProcess:
    return farm.start(
        database,
        organiser_token=ORGANISER_TOKEN,
        extra_args=["--limit-loopback", *args],
    )


def assert_limited(error: grpc.RpcError, reason: str) -> None:
    got = refusal(error)
    assert got.code is grpc.StatusCode.RESOURCE_EXHAUSTED, got
    assert got.reason == reason, got
    assert got.retry_after_s is not None and got.retry_after_s > 0, got


def test_a_client_past_its_creation_rate_is_refused_and_the_organiser_is_not(
    farm: ServerFarm, sqlite_url: str
) -> None:
    server = limited(farm, sqlite_url, "--create-rate", "3")
    with Client(server.target) as client:
        for _ in range(3):
            client.create(2)
        with pytest.raises(grpc.RpcError) as info:
            client.create(2)
        assert_limited(info.value, "CREATE_RATE_EXCEEDED")
        assert 1 <= refusal(info.value).retry_after_s <= 20  # type: ignore[operator]
        for _ in range(3):
            client.create(2, token=ORGANISER_TOKEN)


def test_a_client_past_its_join_rate_is_refused_and_the_organiser_is_not(
    farm: ServerFarm, sqlite_url: str
) -> None:
    server = limited(farm, sqlite_url, "--join-rate", "2")
    with Client(server.target) as client:
        match_id = client.create(4).match_id
        client.join(match_id, "ann")
        client.join(match_id, "bob")
        with pytest.raises(grpc.RpcError) as info:
            client.join(match_id, "eve")
        assert_limited(info.value, "JOIN_RATE_EXCEEDED")
        assert [s.name for s in client.view(match_id).seats if s.taken] == ["ann", "bob"]
        request = pb.JoinMatchRequest(match_id=match_id, name="cat")
        client.stub.JoinMatch(request, metadata=bearer(ORGANISER_TOKEN), timeout=10)


def test_a_client_past_its_registration_rate_is_refused_and_the_organiser_is_not(
    farm: ServerFarm, sqlite_url: str
) -> None:
    server = limited(farm, sqlite_url, "--register-rate", "2")
    with Client(server.target) as client:
        for name in ("ann", "bob"):
            client.stub.RegisterPlayer(pb.RegisterPlayerRequest(name=name), timeout=10)
        with pytest.raises(grpc.RpcError) as info:
            client.stub.RegisterPlayer(pb.RegisterPlayerRequest(name="eve"), timeout=10)
        assert_limited(info.value, "REGISTER_RATE_EXCEEDED")
        with pytest.raises(grpc.RpcError) as info:
            client.stub.GetPlayer(pb.GetPlayerRequest(name="eve"), timeout=10)
        assert refusal(info.value).reason == "PLAYER_NOT_FOUND"
        request = pb.RegisterPlayerRequest(name="cat")
        client.stub.RegisterPlayer(request, metadata=bearer(ORGANISER_TOKEN), timeout=10)


def test_a_client_holding_its_share_of_watch_streams_is_refused_and_a_seat_is_not(
    farm: ServerFarm, sqlite_url: str
) -> None:
    server = limited(farm, sqlite_url, "--max-watchers-per-client", "2", "--max-watchers", "10")
    with Client(server.target) as client:
        match_id = client.create(2).match_id
        seat_token = client.join(match_id, "ann").seat_token
        streams = [client.watch(match_id) for _ in range(2)]
        try:
            for stream in streams:
                assert next(stream).HasField("view")
            with pytest.raises(grpc.RpcError) as info:
                next(client.watch(match_id))
            assert_limited(info.value, "TOO_MANY_STREAMS_FOR_CLIENT")
            own = client.watch(match_id, seat_token)
            try:
                assert next(own).view.viewer_seat == 0
            finally:
                own.cancel()
        finally:
            for stream in streams:
                stream.cancel()


def test_a_rate_table_remembers_at_most_its_bound_of_clients() -> None:
    now = [0.0]
    table = RateTable(per_minute=2, max_clients=100, clock=lambda: now[0])
    for _ in range(10_000):
        table.take(secrets.token_hex(8))
    assert len(table) == 100
    assert table.take("a") == 0.0
    assert table.take("a") == 0.0
    assert table.take("a") == pytest.approx(30.0)
    now[0] += 30.0
    assert table.take("a") == 0.0


def test_a_stream_table_forgets_a_client_once_its_streams_are_closed() -> None:
    table = StreamTable(per_client=2)
    assert table.open("a") and table.open("a") and not table.open("a")
    assert table.open("b")
    for key in ("a", "a", "b"):
        table.close(key)
    assert len(table) == 0


def test_a_client_refused_again_and_again_is_told_to_wait_longer_and_then_forgiven() -> None:
    now = [0.0]
    pressure = RefusalPressure(per_second_hint=4, max_clients=100, clock=lambda: now[0])
    hints = [pressure.refuse("a") for _ in range(400)]
    assert hints[0] == 1.0
    assert hints[39] == pytest.approx(10.0)
    assert hints == sorted(hints)
    assert hints[-1] == MAX_STREAM_RETRY_S
    # Another client is not held to the first one's refusals.
    assert pressure.refuse("b") == 1.0
    # Ten half-lives later, the count has all but gone.
    now[0] += 100.0
    assert pressure.refuse("a") == 1.0
    for _ in range(1000):
        pressure.refuse(secrets.token_hex(8))
    assert len(pressure) == 100


def test_the_stream_limits_hint_grows_with_the_clients_refusals() -> None:
    limits = ClientLimits(Limits(watchers_per_client=2, limit_loopback=True))
    peer = "ipv4:127.0.0.1:4000"
    limits.open_stream(peer, None)
    limits.open_stream(peer, None)
    hints = []
    for _ in range(400):
        with pytest.raises(ResourceExhausted) as info:
            limits.open_stream(peer, None)
        assert info.value.reason == "TOO_MANY_STREAMS_FOR_CLIENT"
        hints.append(int(info.value.metadata["retry_after_ms"]))
    assert hints[0] == 1000
    assert hints[-1] == MAX_STREAM_RETRY_S * 1000
    assert hints == sorted(hints)


@pytest.mark.parametrize(
    ("peer", "address"),
    [("ipv4:10.1.2.3:5555", "10.1.2.3"), ("ipv6:[2001:db8::1]:443", "2001:db8::1")],
)
def test_a_client_is_its_address_without_the_port(peer: str, address: str) -> None:
    assert peer_address(peer) == address


def test_a_client_guessing_tokens_is_slowed_down_and_others_are_not(
    farm: ServerFarm, sqlite_url: str
) -> None:
    """Wrong organiser tokens: a few go by (a typo), then each one doubles the wait before the
    client's next call with a token, refused before any work; calls without one go on."""
    server = limited(farm, sqlite_url, "--metrics", "127.0.0.1:0")
    with Client(server.target) as client:
        match = client.create(2)
        for _ in range(FREE_WRONG_SECRETS):
            with pytest.raises(grpc.RpcError) as info:
                client.abandon(match.match_id, "bgo_" + secrets.token_urlsafe(40))
            assert refusal(info.value).reason == "NOT_THE_ORGANISER_TOKEN"
        with pytest.raises(grpc.RpcError) as info:
            client.abandon(match.match_id, "bgo_" + secrets.token_urlsafe(40))
        assert refusal(info.value).reason == "NOT_THE_ORGANISER_TOKEN"
        # Now held back, the right token included, until the wait is over.
        with pytest.raises(grpc.RpcError) as info:
            client.abandon(match.match_id, ORGANISER_TOKEN)
        assert_limited(info.value, "WRONG_SECRET_BACKOFF")
        wait = refusal(info.value).retry_after_s
        assert wait is not None and wait <= 2 * FIRST_SECRET_WAIT_S
        assert client.view(match.match_id).phase == pb.PHASE_SEATING  # no token: served
        deadline = time.monotonic() + 10 * FIRST_SECRET_WAIT_S
        while True:
            try:
                client.abandon(match.match_id, ORGANISER_TOKEN, "done")
                break
            except grpc.RpcError as e:
                assert refusal(e).reason == "WRONG_SECRET_BACKOFF", refusal(e)
                assert time.monotonic() < deadline, "still held back"
                time.sleep(0.1)
        assert client.view(match.match_id).phase == pb.PHASE_ENDED
    samples = scrape(metrics_url(server))
    assert value(samples, "bergen_wrong_secrets_total", outcome="counted") == 6
    assert value(samples, "bergen_wrong_secrets_total", outcome="held") >= 1


def test_wrong_secrets_double_the_wait_and_are_forgotten_in_time() -> None:
    now = [0.0]
    guard = WrongSecrets(lambda peer: peer, clock=lambda: now[0])
    with_token = [("authorization", "Bearer x")]
    for _ in range(FREE_WRONG_SECRETS):
        guard.refused("a", "NOT_A_SEAT_OF_THIS_MATCH")
        guard.check("a", with_token)  # free
    waits = []
    for _ in range(4):
        guard.refused("a", "NOT_A_SEAT_OF_THIS_MATCH")
        with pytest.raises(ResourceExhausted) as info:
            guard.check("a", with_token)
        waits.append(int(info.value.metadata["retry_after_ms"]))
        now[0] += waits[-1] / 1000
    assert all(1.8 < b / a < 2.1 for a, b in itertools.pairwise(waits)), waits
    guard.check("a", [])  # a call without a secret is never held
    guard.check("b", with_token)  # nor another client
    guard.refused("a", "MATCH_NOT_FOUND")  # a refusal for anything else does not count
    assert guard.wrong == FREE_WRONG_SECRETS + 4 and guard.held == 4
    now[0] += 10 * WRONG_SECRET_HALF_LIFE_S  # forgotten
    guard.refused("a", "NOT_A_SEAT_OF_THIS_MATCH")
    guard.check("a", with_token)
