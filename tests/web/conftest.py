"""Fixtures of the web tests: a real `bergen serve` on PostgreSQL (tests/e2e's farms) and a
real `bergen web` in front of it."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from e2e.conftest import (  # the e2e servers' fixtures, and the hook that shows their logs
    ORGANISER_TOKEN,
    farm,
    module_farm,
    pytest_runtest_makereport,
)
from e2e.servers import ServerFarm, ServerProcess

from .gateway import Gateway, start_gateway

__all__ = ["ORGANISER_TOKEN", "farm", "module_farm", "pytest_runtest_makereport"]


@pytest.fixture(scope="module")
def server(module_farm: ServerFarm, module_pg_database: str) -> ServerProcess:
    return module_farm.start(module_pg_database, organiser_token=ORGANISER_TOKEN)


@pytest.fixture(scope="module")
def gateway(server: ServerProcess, module_farm: ServerFarm) -> Iterator[Gateway]:
    gw = start_gateway(server.target, module_farm.workdir)
    yield gw
    code = gw.stop()
    assert code == 0, f"bergen web exited with {code} on SIGTERM:\n{gw.log()}"


@pytest.fixture(scope="module")
def silent_gateway(module_farm: ServerFarm) -> Iterator[Gateway]:
    """A gateway whose game server is not there: a port nobody listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    gw = start_gateway(f"127.0.0.1:{port}", module_farm.workdir)
    yield gw
    assert gw.stop() == 0, gw.log()
