"""GetAuditLog publishes no seat token, nor anything a token could be searched from offline.

Anyone may read the audit log of a finished match, and an auditor needs every stored value
to check its hash chain, so a seat's token is stored keyed: HMAC-SHA256 under a key derived
from the servers' log key (as is the command id of a join with a client's own token). A
plain SHA-256 of a token a client made could be searched for by anyone holding the log.

Real server processes, on SQLite and on PostgreSQL where the server runs as the role of
deploy/grants.sql. Seats taken before a key rotation, and seats of matches stored before
tokens were keyed, stay held by their tokens.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import random
import secrets
from typing import Any

import pytest
from e2e.client import RPC_TIMEOUT_S, Client, play_to_end
from e2e.client import Table as SeatedTable
from e2e.servers import ServerFarm, ServerProcess
from e2e.test_verify import run_verify

from bergen.api.exit_status import ExitStatus
from bergen.server.app import Settings, build_application
from bergen.server.feed import EventFeed
from bergen.server.identity import Caller
from bergen.server.keys import SEAT_TOKEN_PURPOSE, LogKeys, add_key, derive_key
from bergen.server.store import open_store
from bergen.v1 import bergen_pb2 as pb

from .conftest import Database

pytestmark = pytest.mark.timeout(240)

KEY_FILE = "bergen-log-key"


def client_token() -> str:
    return "bgs_" + secrets.token_urlsafe(32)


def plain_forms(token: str) -> dict[str, str]:
    """What an audit log must not show of `token`: itself, and the unkeyed values servers
    once stored of it, each of which anyone could test a guessed token against."""
    return {
        "the token": token,
        "its SHA-256": hashlib.sha256(token.encode()).hexdigest(),
        "its join's unkeyed command id": "join-"
        + hashlib.sha256(b"bergen join\0" + token.encode()).hexdigest(),
    }


def join(
    client: Client, match_id: str, name: str, token: str | None = None
) -> pb.JoinMatchResponse:
    """A join with `token` of the client's own making, else with one the server makes."""
    request = pb.JoinMatchRequest(match_id=match_id, name=name, seat_token=token)
    reply: pb.JoinMatchResponse = client.stub.JoinMatch(request, timeout=RPC_TIMEOUT_S)
    return reply


def audit_log(client: Client, match_id: str) -> pb.GetAuditLogResponse:
    reply: pb.GetAuditLogResponse = client.stub.GetAuditLog(
        pb.GetAuditLogRequest(match_id=match_id), timeout=RPC_TIMEOUT_S
    )
    return reply


def seat_metadata(log: pb.GetAuditLogResponse) -> dict[int, dict[str, Any]]:
    """Each seat's SeatTaken metadata, as published."""
    return {
        json.loads(e.payload_json)["seat"]: json.loads(e.metadata_json)
        for e in log.events
        if e.type == "SeatTaken"
    }


def assert_nothing_plain(log: pb.GetAuditLogResponse, tokens: list[str]) -> None:
    published = log.SerializeToString()
    shown = str(log)
    for seat, token in enumerate(tokens):
        for what, value in plain_forms(token).items():
            assert value.encode() not in published, f"seat {seat}: the audit log shows {what}"
            assert value not in shown, f"seat {seat}: the audit log shows {what}"


def keyed(keys: LogKeys, key_id: str, token: str) -> str:
    """HMAC-SHA256 of `token` under log key `key_id`'s seat-token key, hex."""
    key = keys.key(key_id)
    assert key is not None, key_id
    return hmac.new(derive_key(key, SEAT_TOKEN_PURPOSE), token.encode(), "sha256").hexdigest()


def finish(client: Client, match_id: str, tokens: list[str], seed: int) -> None:
    view = client.view(match_id)
    table = SeatedTable(match_id, len(tokens), tokens, pb.CreateMatchResponse())
    table.joins.append(pb.JoinMatchResponse(view=view))
    play_to_end([client], random.Random(seed), table)


def chain_verifies(server: ServerProcess, match_id: str) -> None:
    code, out, err = run_verify(match_id, "--server", server.target)
    assert code == ExitStatus.SUCCESS, (out, err)


def test_the_audit_log_of_a_finished_match_shows_no_seat_token_nor_a_plain_hash_of_one(
    farm: ServerFarm, database: Database
) -> None:
    server = farm.start(database.server_url)
    keys = LogKeys.load_or_create(farm.workdir / KEY_FILE)
    with Client(server.target) as client:
        match_id = client.create(3).match_id
        mine = [client_token(), client_token()]
        tokens = [join(client, match_id, f"player {i}", t).seat_token for i, t in enumerate(mine)]
        tokens.append(join(client, match_id, "player 2").seat_token)  # the server's own token
        finish(client, match_id, tokens, 1)
        log = audit_log(client, match_id)
        assert_nothing_plain(log, tokens)
        for what, value in plain_forms(tokens[0]).items():
            assert value not in json.dumps(client.record(match_id)), f"the record shows {what}"
        # What is published is keyed, under the key that wrote it: a server can check a
        # token against it, nobody else can.
        for seat, meta in seat_metadata(log).items():
            assert "seat_token_sha256" not in meta["extra"], meta
            assert meta["extra"]["seat_token_key"] == keys.writing, meta
            assert meta["extra"]["seat_token_hmac"] == keyed(keys, keys.writing, tokens[seat])
        chain_verifies(server, match_id)


def test_seats_taken_before_a_key_rotation_stay_held_and_a_join_sent_again_gets_its_seat(
    farm: ServerFarm, database: Database
) -> None:
    server = farm.start(database.server_url)
    with Client(server.target) as client:
        match_id = client.create(3).match_id
        early = client_token()
        first = join(client, match_id, "ann", early)
        served = join(client, match_id, "bob").seat_token
        version = client.view(match_id).version
    assert server.terminate() == 0
    add_key(farm.workdir / KEY_FILE, "k2")
    server = farm.start(database.server_url)
    with Client(server.target) as client:
        again = join(client, match_id, "ann", early)
        assert (again.seat, again.seat_token) == (first.seat, early)
        assert client.view(match_id).version == version, "the join sent again wrote nothing"
        late = join(client, match_id, "cy", client_token())
        tokens = [""] * 3
        for seat, token in ((first.seat, early), (1 - first.seat, served), (2, late.seat_token)):
            assert client.view(match_id, token).viewer_seat == seat
            tokens[seat] = token
        finish(client, match_id, tokens, 2)
        log = audit_log(client, match_id)
        assert_nothing_plain(log, tokens)
        key_ids = {s: m["extra"]["seat_token_key"] for s, m in seat_metadata(log).items()}
        assert key_ids == {0: "k1", 1: "k1", 2: "k2"}, key_ids
        chain_verifies(server, match_id)


def test_seats_of_a_match_stored_before_tokens_were_keyed_stay_held_by_their_tokens(
    farm: ServerFarm, database: Database
) -> None:
    # A server before keyed tokens stored a seat's token as its plain SHA-256, and a join's
    # command id as one, under the same log key: as an application given no key does.
    keys = LogKeys.load_or_create(farm.workdir / KEY_FILE)
    store = open_store(database.server_url, upgrade=database.backend == "sqlite", log_keys=keys)
    try:
        old = build_application(store, EventFeed(store), Settings()).commands
        match_id = old.create_match(Caller(), 3, False, "standard", {}, "stored before").match_id
        early = client_token()
        seat_a, _, _ = old.join_match(match_id, None, "ann", "", token=early)
        seat_b, served, _ = old.join_match(match_id, None, "bob", "")
    finally:
        store.close()
    server = farm.start(database.server_url)
    with Client(server.target) as client:
        version = client.view(match_id).version
        again = join(client, match_id, "ann", early)
        assert (again.seat, again.seat_token) == (seat_a, early)
        assert client.view(match_id).version == version, "the join sent again wrote nothing"
        late = join(client, match_id, "cy", client_token())
        tokens = [""] * 3
        for seat, token in ((seat_a, early), (seat_b, served), (late.seat, late.seat_token)):
            assert client.view(match_id, token).viewer_seat == seat
            tokens[seat] = token
        finish(client, match_id, tokens, 3)
        log = audit_log(client, match_id)
        meta = seat_metadata(log)
        for seat in (seat_a, seat_b):  # published as they were stored, or the chain breaks
            plain = hashlib.sha256(tokens[seat].encode()).hexdigest()
            assert meta[seat]["extra"]["seat_token_sha256"] == plain, meta
        assert meta[late.seat]["extra"]["seat_token_key"] == keys.writing, meta
        assert_nothing_plain(log, [late.seat_token])
        chain_verifies(server, match_id)
