"""A log rolled back under a signed checkpoint: a superuser deletes a finished match's last
command and restarts the server. The server refuses rather than let the match go live again
and sign a second record: every call of the service answers DATA_LOSS (LOG_ROLLED_BACK),
naming the sizes, and its health service, and the web gateway's in front of it, say it does
not serve. A rollback found while it serves (the deleted event written again) does the
same from then on."""

from __future__ import annotations

import random
import sqlite3
import time
from typing import Any

import grpc
import psycopg
import pytest
from e2e.client import Client, play_to_end, seat_everyone
from e2e.refusals import refusal
from e2e.servers import NOT_SERVING, SERVING, ServerFarm, ServerProcess
from web.gateway import Gateway, start_gateway

from bergen.server.keys import LogKeys
from bergen.v1 import bergen_pb2 as pb

from .conftest import Database
from .test_log_authenticity import Access

GAME_SERVICE = "bergen.v1.BergenService"
DEADLINE_S = 30.0


def delete_from(database: Database, match_id: str, seq: int) -> None:
    """With the owner's access, the append-only guards off: delete the match's events from
    `seq` on, the log's own rows left as they are."""
    if database.backend == "sqlite":
        conn = sqlite3.connect(database.owner_url.removeprefix("sqlite:///"), isolation_level=None)
        try:
            conn.execute("DROP TRIGGER IF EXISTS events_no_delete")
            conn.execute("DELETE FROM events WHERE stream_id = ? AND seq >= ?", (match_id, seq))
        finally:
            conn.close()
        return
    with psycopg.connect(database.owner_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE events DISABLE TRIGGER ALL")
        conn.execute("DELETE FROM events WHERE stream_id = %s AND seq >= %s", (match_id, seq))
        conn.execute("ALTER TABLE events ENABLE TRIGGER ALL")


def last_command_seq(client: Client, match_id: str) -> int:
    """The first seq the match's last command wrote (its last play and what followed)."""
    events = client.stub.GetAuditLog(pb.GetAuditLogRequest(match_id=match_id)).events
    command: Any = None
    for e in events:
        metadata = e.metadata_json
        if command is None or metadata != command[1]:
            command = (e.seq, metadata)
    assert command is not None
    return int(command[0])


def test_a_finished_match_rolled_back_is_refused_after_a_restart(
    farm: ServerFarm, database: Database
) -> None:
    server = farm.start(database.server_url)
    with Client(server.target) as client:
        table = seat_everyone(client, 2)
        play_to_end([client], random.Random(5), table)
        record = client.record(table.match_id)  # signed, with a checkpoint that covers it
        signed_size = record["transparency"]["tree_size"]
        first = last_command_seq(client, table.match_id)
    assert server.terminate() == 0
    delete_from(database, table.match_id, first)
    server = farm.start(database.server_url, serving=False)
    assert_not_serving(server, farm)
    with Client(server.target) as client:
        for call in (
            lambda: client.record(table.match_id),
            lambda: client.stub.GetMatch(pb.GetMatchRequest(match_id=table.match_id)),
            lambda: client.stub.GetCheckpoint(pb.GetCheckpointRequest()),
        ):
            with pytest.raises(grpc.RpcError) as caught:
                call()
            got = refusal(caught.value, "a call")
            assert (got.code, got.reason) == (grpc.StatusCode.DATA_LOSS, "LOG_ROLLED_BACK"), got
            assert int(got.metadata["signed_size"]) >= signed_size
            assert int(got.metadata["log_size"]) <= int(got.metadata["signed_size"])
    assert "LOG ROLLED BACK" in server.log()


def gateway_health(gateway: Gateway) -> tuple[int, str]:
    """The HTTP status of the gateway's /api/health, and what it says of its server."""
    status, body, _ = gateway.get("/api/health")
    return status, body["upstream"]


def assert_not_serving(server: ServerProcess, farm: ServerFarm) -> None:
    """Health NOT_SERVING, for the server and for its game service, and a web gateway in
    front of it answering /api/health 503."""
    assert server.health() == NOT_SERVING
    assert server.health(GAME_SERVICE) == NOT_SERVING
    gateway = start_gateway(server.target, farm.workdir)
    try:
        assert gateway_health(gateway) == (503, "NOT_SERVING")
    finally:
        assert gateway.stop() == 0, gateway.log()


def test_a_rollback_found_while_serving_turns_health_to_not_serving(
    farm: ServerFarm, database: Database
) -> None:
    server = farm.start(database.server_url)
    gateway = start_gateway(server.target, farm.workdir)
    try:
        with Client(server.target) as client:
            table = seat_everyone(client, 2)
            play_to_end([client], random.Random(6), table)
            # Another match after it, so that its last event is not the log's last (SQLite
            # gives the next row the largest position plus one).
            later = seat_everyone(client, 2)
            play_to_end([client], random.Random(7), later)
            for match_id in (table.match_id, later.match_id):
                client.record(match_id)  # its last event is in the tree, signed
        assert server.health(GAME_SERVICE) == SERVING
        assert gateway_health(gateway) == (200, "SERVING")
        # The owner deletes the first match's last event and writes it again, authentic
        # under the servers' log key: a second end of that match, which the tree holds.
        access = Access(database.owner_url)
        last = access.rows(table.match_id)[-1]
        delete_from(database, table.match_id, last.seq)
        keys = LogKeys.load_or_create(farm.workdir / "bergen-log-key")
        access.append(table.match_id, last.type, last.payload, last.metadata, keys=keys)
        deadline = time.monotonic() + DEADLINE_S
        while server.health(GAME_SERVICE) != NOT_SERVING:
            assert time.monotonic() < deadline, "health still SERVING after the rollback"
            time.sleep(0.05)
        assert server.health() == NOT_SERVING
        assert gateway_health(gateway) == (503, "NOT_SERVING")
        with Client(server.target) as client, pytest.raises(grpc.RpcError) as caught:
            client.stub.GetCheckpoint(pb.GetCheckpointRequest())
        got = refusal(caught.value, "GetCheckpoint")
        assert (got.code, got.reason) == (grpc.StatusCode.DATA_LOSS, "LOG_ROLLED_BACK"), got
    finally:
        assert gateway.stop() == 0, gateway.log()
    assert "LOG ROLLED BACK" in server.log()
