"""A storage fault reaches a client as UNAVAILABLE with the reason STORAGE_UNAVAILABLE and a
retry hint, never INTERNAL; the server stays up and the same command works once the store is
back."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import grpc
import psycopg
import pytest
from grpc_health.v1 import health_pb2
from psycopg import sql

from .client import Client
from .refusals import refusal
from .servers import ServerFarm

SERVING = health_pb2.HealthCheckResponse.SERVING
pytestmark = [pytest.mark.timeout(120), pytest.mark.postgres]


@contextmanager
def database_closed(admin_url: str, url: str) -> Iterator[None]:
    """For the block, `url`'s database takes no connection and has none open."""
    name = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
    assert isinstance(name, str)

    def allow(yes: bool) -> None:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(
                sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS {}").format(
                    sql.Identifier(name), sql.Literal(yes)
                )
            )
            if not yes:
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                    (name,),
                )

    allow(False)
    try:
        yield
    finally:
        allow(True)


def test_a_database_that_cannot_be_reached_is_unavailable_with_a_retry_hint(
    farm: ServerFarm, pg_admin_url: str, pg_database: str
) -> None:
    server = farm.start(pg_database)
    with Client(server.target) as client:
        client.create(2)
        with database_closed(pg_admin_url, pg_database):
            for _ in range(3):
                with pytest.raises(grpc.RpcError) as info:
                    client.create(2)
                got = refusal(info.value, "CreateMatch")
                assert (got.code, got.reason) == (
                    grpc.StatusCode.UNAVAILABLE,
                    "STORAGE_UNAVAILABLE",
                ), got
                assert got.retry_after_s is not None and got.retry_after_s > 0
        # Back: a pooled connection cut while closed may fail once more, then it works.
        for _ in range(5):
            try:
                assert client.create(2).match_id
                break
            except grpc.RpcError as e:
                assert refusal(e).code == grpc.StatusCode.UNAVAILABLE
        else:
            raise AssertionError("the server did not recover once the database was back")
    # The feed logs its own lost connections; no call was a bug.
    assert " INTERNAL " not in server.log(), server.log_tail()
    assert server.health() == SERVING
