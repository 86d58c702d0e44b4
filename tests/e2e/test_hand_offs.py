"""OfferHandOff and ClaimHandOff against real `bergen serve` processes, on the embedded store
and on PostgreSQL: a seat's or a tournament player's code claimed once, through either of two
replicas, every other claim refused alike; each refusal with its status and reason; and no
code in a log line or an answer but its own."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from bergen.v1 import bergen_pb2 as pb

from .client import Client, bearer, seat_everyone
from .conftest import ORGANISER_TOKEN
from .refusals import refusal
from .servers import ServerFarm, ServerProcess

pytestmark = pytest.mark.timeout(180)

Code = grpc.StatusCode
PARCEL = b"the gateway's sealed seat " + bytes(range(256))


@pytest.fixture
def server(farm: ServerFarm, database: str) -> ServerProcess:
    return farm.start(database, organiser_token=ORGANISER_TOKEN)


@pytest.fixture
def client(server: ServerProcess) -> Iterator[Client]:
    with Client(server.target) as c:
        yield c


def refused(call: Any, request: Any, token: str | None = None) -> tuple[Code, str, str]:
    with pytest.raises(grpc.RpcError) as info:
        call(request, metadata=bearer(token), timeout=20)
    got = refusal(info.value)
    return got.code, got.reason, got.message


def offer(client: Client, token: str, **place: str) -> pb.OfferHandOffResponse:
    request = pb.OfferHandOffRequest(parcel=PARCEL, **place)
    made: pb.OfferHandOffResponse = client.stub.OfferHandOff(
        request, metadata=bearer(token), timeout=20
    )
    return made


def claim(client: Client, code: str) -> pb.ClaimHandOffResponse:
    got: pb.ClaimHandOffResponse = client.stub.ClaimHandOff(
        pb.ClaimHandOffRequest(code=code), timeout=20
    )
    return got


def test_a_seats_code_is_claimed_once_and_every_refusal_says_why(
    client: Client, server: ServerProcess
) -> None:
    table = seat_everyone(client, 2)
    before = time.time()
    made = offer(client, table.tokens[1], match_id=table.match_id)
    assert len(made.code) == 40
    assert before + 590 < made.expires_at.seconds < time.time() + 610
    got = claim(client, made.code)
    assert got.parcel == PARCEL
    assert got.WhichOneof("place") == "seat"
    assert (got.seat.match_id, got.seat.seat) == (table.match_id, 1)
    spent = refused(client.stub.ClaimHandOff, pb.ClaimHandOffRequest(code=made.code))
    assert spent[:2] == (Code.NOT_FOUND, "HAND_OFF_SPENT_OR_UNKNOWN")
    never = secrets.token_urlsafe(30)
    assert refused(client.stub.ClaimHandOff, pb.ClaimHandOffRequest(code=never)) == spent
    for code in ("", "short", made.code + "x", made.code[:-1] + "="):
        bad = refused(client.stub.ClaimHandOff, pb.ClaimHandOffRequest(code=code))
        assert bad[:2] == (Code.INVALID_ARGUMENT, "INVALID_HAND_OFF_CODE"), code
    offer_call = client.stub.OfferHandOff
    mine, theirs = table.tokens[0], ORGANISER_TOKEN
    seat = pb.OfferHandOffRequest(match_id=table.match_id, parcel=PARCEL)
    Req = pb.OfferHandOffRequest
    bad = Code.INVALID_ARGUMENT
    cases: list[tuple[pb.OfferHandOffRequest, str | None, Code, str]] = [
        (Req(parcel=PARCEL), mine, bad, "PLACE_REQUIRED"),
        (Req(match_id=table.match_id), mine, bad, "INVALID_PARCEL"),
        (Req(match_id=table.match_id, parcel=b"x" * 1025), mine, bad, "INVALID_PARCEL"),
        (Req(match_id="nope", parcel=PARCEL), mine, bad, "INVALID_MATCH_ID"),
        (seat, None, Code.UNAUTHENTICATED, "SEAT_TOKEN_REQUIRED"),
        (seat, theirs, Code.PERMISSION_DENIED, "NOT_A_SEAT_OF_THIS_MATCH"),
    ]
    for request, token, code, reason in cases:
        assert refused(offer_call, request, token)[:2] == (code, reason), request
    for _ in range(5):
        offer(client, mine, match_id=table.match_id)
    assert refused(offer_call, seat, mine)[:2] == (Code.RESOURCE_EXHAUSTED, "TOO_MANY_HAND_OFFS")
    client.stub.Resign(
        pb.ResignRequest(match_id=table.match_id), metadata=bearer(table.tokens[0]), timeout=20
    )
    assert refused(offer_call, seat, table.tokens[1])[:2] == (
        Code.FAILED_PRECONDITION,
        "MATCH_ENDED",
    )
    log = server.log()
    assert made.code not in log and made.code[:20] not in log
    assert "Traceback" not in log
    # The clock keeper, the listing and the feed pass over hand-offs' streams without a word.
    assert "handoff-" not in log, server.log_tail()


def test_a_tournament_players_code_carries_its_place(client: Client) -> None:
    created = client.stub.CreateTournament(
        pb.CreateTournamentRequest(
            name="Hand-off cup",
            settings=pb.TournamentSettings(
                format=pb.TOURNAMENT_FORMAT_SWISS, seats=2, preset=pb.PRESET_STANDARD, rounds=1
            ),
        ),
        metadata=bearer(ORGANISER_TOKEN),
        timeout=20,
    )
    tid = created.tournament_id
    tokens = []
    for name in ("Ann", "Bo"):
        got = client.stub.RegisterEntrant(
            pb.RegisterEntrantRequest(tournament_id=tid, players=[name], client_seed=name),
            timeout=20,
        )
        tokens.append(got.player_tokens[0])
    made = offer(client, tokens[1], tournament_id=tid)
    got = claim(client, made.code)
    assert got.WhichOneof("place") == "entrant"
    assert (got.entrant.tournament_id, got.entrant.entrant, got.entrant.player) == (tid, 2, 0)
    assert got.parcel == PARCEL
    request = pb.OfferHandOffRequest(tournament_id=tid, parcel=PARCEL)
    assert refused(client.stub.OfferHandOff, request, None)[:2] == (
        Code.UNAUTHENTICATED,
        "TOKEN_REQUIRED",
    )
    assert refused(client.stub.OfferHandOff, request, ORGANISER_TOKEN)[:2] == (
        Code.PERMISSION_DENIED,
        "NOT_A_PLAYER_OF_THIS_TOURNAMENT",
    )
    missing = pb.OfferHandOffRequest(tournament_id=tid[:-4] + "0000", parcel=PARCEL)
    assert refused(client.stub.OfferHandOff, missing, tokens[0])[:2] == (
        Code.NOT_FOUND,
        "TOURNAMENT_NOT_FOUND",
    )


@pytest.mark.postgres
def test_a_code_made_on_one_replica_is_claimed_once_through_either(
    farm: ServerFarm, pg_database: str
) -> None:
    replicas = [farm.start(pg_database, name=f"replica{i}") for i in range(2)]
    with Client(replicas[0].target) as first, Client(replicas[1].target) as second:
        table = seat_everyone(first, 2)
        for made_on, claimed_on, again_on in ((first, second, first), (second, first, second)):
            made = offer(made_on, table.tokens[0], match_id=table.match_id)
            assert claim(claimed_on, made.code).seat.match_id == table.match_id
            for c in (again_on, claimed_on):
                assert refused(c.stub.ClaimHandOff, pb.ClaimHandOffRequest(code=made.code))[:2] == (
                    Code.NOT_FOUND,
                    "HAND_OFF_SPENT_OR_UNKNOWN",
                )
