"""Identity: seat tokens and the organiser token, each rejection with its status code and a
message that names neither the token nor its hash."""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest

from bergen.cli_client.connect import error_info
from bergen.v1 import bergen_pb2 as pb

from .client import Client, Metadata, Table, bearer, seat_everyone
from .conftest import ORGANISER_TOKEN
from .servers import ServerFarm, ServerProcess

pytestmark = pytest.mark.timeout(120)

Code = grpc.StatusCode


@pytest.fixture(scope="module")
def server(module_farm: ServerFarm, module_sqlite_url: str) -> ServerProcess:
    return module_farm.start(module_sqlite_url, organiser_token=ORGANISER_TOKEN)


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Iterator[Client]:
    with Client(server.target) as c:
        yield c


@pytest.fixture
def table(client: Client) -> Table:
    return seat_everyone(client, 2)


@pytest.fixture
def other(client: Client) -> Table:
    return seat_everyone(client, 2)


def secrets_of(*tables: Table) -> list[str]:
    """Every token the tests know, and each one's SHA-256 (what the server stores)."""
    tokens = [t for table in tables for t in table.tokens] + [ORGANISER_TOKEN]
    return tokens + [hashlib.sha256(t.encode()).hexdigest() for t in tokens]


def refused(
    code: Code, leak_free: list[str], call: Callable[..., Any], *args: Any, **kw: Any
) -> str:
    """Asserts `call` fails with `code` and a message naming no secret. Returns the message."""
    with pytest.raises(grpc.RpcError) as info:
        result = call(*args, **kw)
        if hasattr(result, "__next__"):  # a stream: its error comes with the first read
            next(result)
    error: Any = info.value
    assert error.code() == code, (error.code(), error.details())
    details: str = error.details() or ""
    assert details, "a rejection says what was wrong"
    for secret in leak_free:
        assert secret not in details, f"the message leaks a secret: {details}"
        assert secret[:16] not in details, f"the message leaks part of a secret: {details}"
    return details


def play_request(client: Client, table: Table) -> pb.PlayRequest:
    """A legal play for the seat to play."""
    public = client.view(table.match_id)
    mine = client.view(table.match_id, table.tokens[public.turn])
    choice = mine.legal_plays[0]
    return pb.PlayRequest(match_id=table.match_id, tile=choice.tile, end=choice.end)


def turn_of(client: Client, table: Table) -> int:
    return int(client.view(table.match_id).turn)


def test_playing_or_resigning_without_a_token_is_unauthenticated(
    client: Client, table: Table
) -> None:
    leak_free = secrets_of(table)
    request = play_request(client, table)
    refused(Code.UNAUTHENTICATED, leak_free, client.stub.Play, request)
    refused(
        Code.UNAUTHENTICATED,
        leak_free,
        client.stub.Resign,
        pb.ResignRequest(match_id=table.match_id),
    )
    assert client.view(table.match_id).version == table.version, "nothing was applied"


MALFORMED = [
    pytest.param(lambda t: (("authorization", t),), id="no-scheme"),
    pytest.param(lambda t: (("authorization", f"Token {t}"),), id="other-scheme"),
    pytest.param(lambda t: (("authorization", f"bearer {t}"),), id="lowercase-scheme"),
    pytest.param(lambda t: (("authorization", "Bearer"),), id="scheme-only"),
    pytest.param(lambda t: (("authorization", "Bearer "),), id="empty-token"),
    pytest.param(lambda t: (("authorization", "Bearer abc"),), id="too-short"),
    pytest.param(lambda t: (("authorization", f"Bearer {t[:10]}$%^&*(){t[10:]}"),), id="bad-chars"),
    pytest.param(lambda t: (("authorization", f"Bearer {t} {t}"),), id="two-words"),
    pytest.param(lambda t: (("authorization", f"Bearer {t}x" + "y" * 300),), id="too-long"),
    pytest.param(lambda t: (("authorization", "Basic dXNlcjpwYXNzd29yZA=="),), id="basic-auth"),
    pytest.param(
        lambda t: (("authorization", f"Bearer {t}"), ("authorization", f"Bearer {t}")),
        id="two-entries",
    ),
]


@pytest.mark.parametrize("metadata", MALFORMED)
def test_a_malformed_authorization_is_unauthenticated(
    client: Client, table: Table, metadata: Callable[[str], Metadata]
) -> None:
    leak_free = secrets_of(table)
    seat = turn_of(client, table)
    md = metadata(table.tokens[seat])
    request = play_request(client, table)
    refused(Code.UNAUTHENTICATED, leak_free, client.stub.Play, request, metadata=md)
    refused(
        Code.UNAUTHENTICATED,
        leak_free,
        client.stub.Resign,
        pb.ResignRequest(match_id=table.match_id),
        metadata=md,
    )
    refused(
        Code.UNAUTHENTICATED,
        leak_free,
        client.stub.GetMatch,
        pb.GetMatchRequest(match_id=table.match_id),
        metadata=md,
    )
    refused(
        Code.UNAUTHENTICATED,
        leak_free,
        client.stub.AbandonMatch,
        pb.AbandonMatchRequest(match_id=table.match_id),
        metadata=md,
    )
    assert client.view(table.match_id).version == table.version, "nothing was applied"


def test_a_seat_token_of_another_match_is_permission_denied(
    client: Client, table: Table, other: Table
) -> None:
    leak_free = secrets_of(table, other)
    seat = turn_of(client, table)
    request = play_request(client, table)
    foreign = bearer(other.tokens[seat])
    refused(Code.PERMISSION_DENIED, leak_free, client.stub.Play, request, metadata=foreign)
    for call, req in [
        (client.stub.Resign, pb.ResignRequest(match_id=table.match_id)),
        (client.stub.GetMatch, pb.GetMatchRequest(match_id=table.match_id)),
        (client.stub.GetReplay, pb.GetReplayRequest(match_id=table.match_id)),
        (client.stub.WatchMatch, pb.WatchMatchRequest(match_id=table.match_id)),
    ]:
        refused(Code.PERMISSION_DENIED, leak_free, call, req, metadata=foreign, timeout=10)
    # A well-formed token that was never issued is no better.
    stranger = bearer("bgs_" + secrets.token_urlsafe(32))
    refused(Code.PERMISSION_DENIED, leak_free, client.stub.Play, request, metadata=stranger)
    # Nor is the organiser token: it holds no seat.
    organiser = bearer(ORGANISER_TOKEN)
    refused(Code.PERMISSION_DENIED, leak_free, client.stub.Play, request, metadata=organiser)
    assert client.view(table.match_id).version == table.version, "nothing was applied"


def test_a_seat_playing_out_of_its_turn_is_refused_as_failed_precondition(
    client: Client, table: Table
) -> None:
    leak_free = secrets_of(table)
    seat = turn_of(client, table)
    waiting = 1 - seat
    own = client.view(table.match_id, table.tokens[waiting])
    assert own.my_tiles and not own.legal_plays
    for tile in own.my_tiles:
        for end in (pb.END_LEFT, pb.END_RIGHT):
            refused(
                Code.FAILED_PRECONDITION,
                leak_free,
                client.play,
                table.match_id,
                tile,
                end,
                table.tokens[waiting],
            )
    assert client.view(table.match_id).version == table.version, "nothing was applied"
    # The seat to play, with its own token, may.
    request = play_request(client, table)
    client.stub.Play(request, metadata=bearer(table.tokens[seat]))


def test_a_seat_token_resigns_its_own_seat_and_its_side_forfeits(
    client: Client, table: Table
) -> None:
    seat = 1 - turn_of(client, table)
    answer = client.resign(table.match_id, table.tokens[seat])
    assert answer.view.phase == pb.PHASE_ENDED
    assert answer.view.result.resigned_seat == seat
    # Resignation is a forfeit (RULES.md section 11): with two seats the other one wins.
    assert answer.view.result.reason == pb.MATCH_END_REASON_FORFEIT
    assert answer.view.result.forfeited_side == seat
    assert answer.view.result.winner_side == 1 - seat


def test_abandoning_a_match_needs_the_organiser_token(
    client: Client, table: Table, other: Table
) -> None:
    leak_free = secrets_of(table, other)
    refused(Code.UNAUTHENTICATED, leak_free, client.abandon, table.match_id, None, "why not")
    for token in [*table.tokens, other.tokens[0], "bgs_" + secrets.token_urlsafe(32)]:
        refused(Code.PERMISSION_DENIED, leak_free, client.abandon, table.match_id, token, "me")
    assert client.view(table.match_id).phase == pb.PHASE_PLAYING

    answer = client.abandon(table.match_id, ORGANISER_TOKEN, "the hall closes")
    kinds = [e.WhichOneof("body") for e in answer.events]
    assert kinds == ["match_ended", "seed_revealed"]
    view = client.view(table.match_id)
    assert view.phase == pb.PHASE_ENDED
    assert view.result.reason == pb.MATCH_END_REASON_ABANDONED
    assert view.result.note == "the hall closes"
    assert not view.result.HasField("winner_side")
    refused(Code.FAILED_PRECONDITION, leak_free, client.abandon, table.match_id, ORGANISER_TOKEN)


def test_the_creator_token_abandons_its_match_only_while_it_is_seating(client: Client) -> None:
    creator = "bgc_" + secrets.token_urlsafe(32)
    stranger = "bgc_" + secrets.token_urlsafe(32)
    leak_free = [creator, stranger, hashlib.sha256(creator.encode()).hexdigest()]

    def create() -> str:
        created: pb.CreateMatchResponse = client.stub.CreateMatch(
            pb.CreateMatchRequest(seats=2, creator_token=creator)
        )
        return created.match_id

    seating = create()
    joined = client.join(seating, "ann")
    # A seat's token, another creator's token and nobody are not the creator.
    for token in (joined.seat_token, stranger):
        refused(Code.PERMISSION_DENIED, leak_free, client.abandon, seating, token, "me")
    refused(Code.UNAUTHENTICATED, leak_free, client.abandon, seating, None, "me")
    answer = client.abandon(seating, creator, "the bots could not join")
    assert [e.WhichOneof("body") for e in answer.events] == ["match_ended", "seed_revealed"]
    view = client.view(seating)
    assert view.result.reason == pb.MATCH_END_REASON_ABANDONED
    assert view.result.note == "the bots could not join"

    started = create()
    client.join(started, "ann")
    client.join(started, "bob")
    message = refused(Code.FAILED_PRECONDITION, leak_free, client.abandon, started, creator, "x")
    assert "only the organiser" in message
    assert client.view(started).phase == pb.PHASE_PLAYING


def test_a_creator_token_that_could_not_be_random_is_refused(client: Client) -> None:
    for bad, reason in (("short", "BAD_CREATOR_TOKEN"), ("ab" * 20, "WEAK_CREATOR_TOKEN")):
        with pytest.raises(grpc.RpcError) as info:
            client.stub.CreateMatch(pb.CreateMatchRequest(seats=2, creator_token=bad))
        assert info.value.code() == Code.INVALID_ARGUMENT
        assert "creator_token" in (info.value.details() or "")
        assert bad not in (info.value.details() or "")
        found = error_info(info.value)
        assert found is not None and found.reason == reason


@pytest.fixture(scope="module")
def restricted(
    module_farm: ServerFarm, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Client]:
    url = f"sqlite:///{tmp_path_factory.mktemp('restricted') / 'bergen.db'}"
    server = module_farm.start(
        url, organiser_token=ORGANISER_TOKEN, restrict_create=True, name="restricted"
    )
    with Client(server.target) as c:
        yield c


def test_a_server_restricting_creation_creates_only_for_the_organiser(
    restricted: Client, client: Client, other: Table
) -> None:
    leak_free = secrets_of(other)
    refused(Code.UNAUTHENTICATED, leak_free, restricted.create, 2)
    refused(Code.PERMISSION_DENIED, leak_free, restricted.create, 2, token=other.tokens[0])
    refused(Code.UNAUTHENTICATED, leak_free, restricted.create, 2, token="not a token!")
    created = restricted.create(2, token=ORGANISER_TOKEN)
    joined = restricted.join(created.match_id, "anyone may join")
    assert joined.seat == 0
    # The unrestricted server creates for anybody.
    assert client.create(2).match_id


def test_no_token_or_token_hash_is_written_to_the_server_log(
    server: ServerProcess, client: Client, table: Table
) -> None:
    seat = turn_of(client, table)
    request = play_request(client, table)
    client.stub.Play(request, metadata=bearer(table.tokens[seat]))
    for token in table.tokens:
        with pytest.raises(grpc.RpcError):
            client.stub.Play(request, metadata=bearer(token))
    # The server writes its log lines in batches (every 50 ms): wait for this test's refused
    # Plays, whose lines name the match (the server's log holds other tests' calls too).
    deadline = time.monotonic() + 60
    while True:
        log = server.log()
        refusals = [
            line for line in log.splitlines() if "/Play " in line and table.match_id in line
        ]
        if len(refusals) >= len(table.tokens):
            break
        assert time.monotonic() < deadline, f"the log shows {len(refusals)} of the Plays"
        time.sleep(0.05)
    assert table.match_id in log, "the log says what happened to each command"
    for secret in secrets_of(table):
        assert secret not in log
