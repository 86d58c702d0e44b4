"""A log rolled back under a signed checkpoint: a superuser deletes a finished match's last
command and restarts the server. The server refuses rather than let the match go live again
and sign a second record: every call of the service answers DATA_LOSS (LOG_ROLLED_BACK),
naming the sizes."""

from __future__ import annotations

import random
import sqlite3
from typing import Any

import grpc
import psycopg
import pytest
from e2e.client import Client, play_to_end, seat_everyone
from e2e.refusals import refusal
from e2e.servers import ServerFarm

from bergen.v1 import bergen_pb2 as pb

from .conftest import Database


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
    server = farm.start(database.server_url)
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
