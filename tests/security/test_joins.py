"""JoinMatch is idempotent: a client sends a seat token of its own making, and a join sent
again with it (its answer was lost: a deadline passed, the call was cancelled) is answered
with the seat the first one took, writing nothing. Before, a join whose answer was lost
left a seat held by a token nobody had, and the match stalled. Nor can seats be squatted:
a match still seating after the seating timeout is abandoned by the server (by one replica
of several)."""

from __future__ import annotations

import secrets
import time

import grpc
import pytest
from e2e.client import Client, event_in
from e2e.refusals import refusal
from e2e.servers import ServerFarm, ServerProcess

from bergen.domain import events as ev
from bergen.domain.vocabulary import MatchEndReason
from bergen.v1 import bergen_pb2 as pb

from .conftest import Database

pytestmark = pytest.mark.timeout(180)


def new_token() -> str:
    return "bgs_" + secrets.token_urlsafe(32)


@pytest.fixture(scope="module")
def server(module_farm: ServerFarm, module_database: Database) -> ServerProcess:
    """One server on each backend for the tests of joins: each makes matches of its own."""
    return module_farm.start(module_database.server_url)


def join(
    client: Client, match_id: str, name: str, token: str, **call: float
) -> pb.JoinMatchResponse:
    request = pb.JoinMatchRequest(match_id=match_id, name=name, seat_token=token)
    reply: pb.JoinMatchResponse = client.stub.JoinMatch(request, **call)
    return reply


def test_a_join_sent_again_with_its_token_gets_the_same_seat_and_writes_nothing(
    server: ServerProcess,
) -> None:
    with Client(server.target) as client:
        match_id = client.create(3).match_id
        token = new_token()
        first = join(client, match_id, "ann", token, timeout=10)
        version = client.view(match_id).version
        again = join(client, match_id, "ann", token, timeout=10)
        assert (again.seat, again.seat_token) == (first.seat, token)
        assert client.view(match_id).version == version
        taken = [s.name for s in client.view(match_id).seats if s.taken]
        assert taken == ["ann"]
        assert client.view(match_id, token).viewer_seat == first.seat


@pytest.mark.parametrize("lose", ["cancelled", "deadline"])
def test_joins_whose_answers_were_lost_leave_every_seat_held_by_its_player(
    server: ServerProcess, lose: str
) -> None:
    with Client(server.target) as client:
        for _ in range(4):
            match_id = client.create(2).match_id
            tokens = {"ann": new_token(), "bob": new_token()}
            for name, token in tokens.items():
                request = pb.JoinMatchRequest(match_id=match_id, name=name, seat_token=token)
                if lose == "cancelled":
                    call = client.stub.JoinMatch.future(request, timeout=10)
                    call.cancel()
                else:
                    # A 1 ms deadline passes before the answer as a rule; when the join beats
                    # it, its answer is dropped all the same.
                    try:
                        client.stub.JoinMatch(request, timeout=0.001)
                    except grpc.RpcError as e:
                        assert e.code() is grpc.StatusCode.DEADLINE_EXCEEDED
            # Whether or not the server committed each lost join, the retries get the seats.
            seats = {
                name: join(client, match_id, name, t, timeout=10).seat for name, t in tokens.items()
            }
            assert sorted(seats.values()) == [0, 1]
            for name, token in tokens.items():
                view = client.view(match_id, token)
                assert view.viewer_seat == seats[name]
                assert view.seats[seats[name]].name == name
            assert all(s.taken for s in client.view(match_id).seats)


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        ("short", "BAD_SEAT_TOKEN"),
        ("bgs_" + "a" * 40, "WEAK_SEAT_TOKEN"),
        ("bgs_" + "ab" * 20, "WEAK_SEAT_TOKEN"),
        ("bgs_" + secrets.token_urlsafe(32)[:30] + "+/=", "BAD_SEAT_TOKEN"),
    ],
    # Named, not shown: a random token in a test's id differs between pytest-xdist's workers.
    ids=["short", "one-letter", "two-letters", "not-url-safe"],
)
def test_a_seat_token_that_cannot_be_sent_or_holds_little_randomness_is_refused(
    server: ServerProcess, token: str, reason: str
) -> None:
    with Client(server.target) as client:
        match_id = client.create(2).match_id
        with pytest.raises(grpc.RpcError) as info:
            join(client, match_id, "ann", token, timeout=10)
        got = refusal(info.value, "JoinMatch")
        assert (got.code, got.reason) == (grpc.StatusCode.INVALID_ARGUMENT, reason)
        assert token not in got.message
        assert not any(s.taken for s in client.view(match_id).seats)


def test_another_join_with_a_token_already_holding_a_seat_takes_no_second_seat(
    server: ServerProcess,
) -> None:
    with Client(server.target) as client:
        match_id = client.create(3).match_id
        token = new_token()
        join(client, match_id, "ann", token, timeout=10)
        with pytest.raises(grpc.RpcError) as info:
            join(client, match_id, "eve", token, timeout=10)
        got = refusal(info.value, "JoinMatch")
        assert got.code is grpc.StatusCode.INVALID_ARGUMENT
        assert [s.name for s in client.view(match_id).seats if s.taken] == ["ann"]


SEATING_TIMEOUT = "1"


def wait_for_end(client: Client, match_id: str, timeout_s: float = 60.0) -> pb.MatchView:
    """The match's view once it has ended. Fails the test when it has not in `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        view = client.view(match_id)
        if view.phase == pb.PHASE_ENDED:
            return view
        time.sleep(0.2)
    pytest.fail(f"match {match_id} was not abandoned: {client.view(match_id)}")


def abandons(client: Client, match_id: str) -> list[ev.MatchEnded]:
    ended = [event_in(e) for e in client.replay(match_id).events]
    return [e for e in ended if isinstance(e, ev.MatchEnded)]


def test_a_match_left_seating_is_abandoned_by_the_server_saying_why(
    farm: ServerFarm, database: Database
) -> None:
    server = farm.start(database.server_url, extra_args=["--seating-timeout", SEATING_TIMEOUT])
    with Client(server.target) as client:
        squatted = client.create(3).match_id
        client.join(squatted, "ann")
        full = client.create(2).match_id
        client.join(full, "bob")
        client.join(full, "cat")
        wait_for_end(client, squatted)
        (ended,) = abandons(client, squatted)
        assert ended.reason == MatchEndReason.ABANDONED
        assert "still seating" in ended.note and "by the server" in ended.note
        assert client.view(full).phase == pb.PHASE_PLAYING


@pytest.mark.postgres
def test_of_several_replicas_one_abandons_a_match_left_seating(
    farm: ServerFarm, deployed_pg: Database
) -> None:
    replicas = [
        farm.start(deployed_pg.server_url, extra_args=["--seating-timeout", SEATING_TIMEOUT])
        for _ in range(3)
    ]
    with Client(replicas[0].target) as client:
        match_ids = [client.create(2).match_id for _ in range(5)]
        for match_id in match_ids:
            wait_for_end(client, match_id)
        # Every replica's sweeper has looked at least twice more since.
        time.sleep(1.0)
        for match_id in match_ids:
            assert len(abandons(client, match_id)) == 1
