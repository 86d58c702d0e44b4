"""A unique violation that is not a lost race on (stream, seq) is not answered as a version
conflict (ABORTED, which tells a client to read again and retry) but as what it is: the
table holds a row that breaks a constraint (DATA_LOSS, reason UNIQUE_VIOLATION, naming it)."""

from __future__ import annotations

import grpc
import psycopg
import pytest
from e2e.client import Client
from e2e.refusals import refusal
from e2e.servers import ServerFarm

pytestmark = [pytest.mark.timeout(120), pytest.mark.postgres]


def test_a_taken_global_position_is_not_reported_as_a_version_conflict(
    farm: ServerFarm, pg_database: str
) -> None:
    server = farm.start(pg_database)
    with Client(server.target) as client:
        client.create(2)
        # As the owner of the table: the next event is given a position already taken.
        with psycopg.connect(pg_database, autocommit=True) as conn:
            conn.execute("ALTER TABLE events ALTER COLUMN position RESTART WITH 1")
        with pytest.raises(grpc.RpcError) as info:
            client.create(2)
        got = refusal(info.value, "CreateMatch")
        assert got.code is grpc.StatusCode.DATA_LOSS, got
        assert got.reason == "UNIQUE_VIOLATION", got
        assert got.metadata.get("constraint") == "uq_events_position", got
        assert "not a version conflict" in got.message
