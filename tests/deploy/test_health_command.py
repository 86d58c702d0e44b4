"""`bergen health`: the gRPC health check the container image runs, against a real server."""

from __future__ import annotations

import json
import socket
import subprocess

import pytest
from e2e.servers import ServerFarm, bergen_command

from bergen.cli_client.main import main


def _health(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*bergen_command(), "health", *args], capture_output=True, text=True, timeout=60
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_a_serving_server_is_healthy_as_a_whole_and_as_the_game_service(
    farm: ServerFarm, sqlite_url: str
) -> None:
    server = farm.start(sqlite_url)
    whole = _health("--server", server.target)
    assert whole.returncode == 0, whole.stderr
    assert whole.stdout.strip() == f"{server.target} server: SERVING"
    game = _health("--server", server.target, "--service", "bergen.v1.BergenService", "--json")
    assert game.returncode == 0, game.stderr
    assert json.loads(game.stdout) == {
        "server": server.target,
        "service": "bergen.v1.BergenService",
        "status": "SERVING",
        "ok": True,
        "exit_status": 0,
        "error": None,
    }


def test_a_service_the_server_does_not_know_is_refused(farm: ServerFarm, sqlite_url: str) -> None:
    server = farm.start(sqlite_url)
    answer = _health("--server", server.target, "--service", "no.such.Service")
    assert answer.returncode == 4
    assert answer.stderr == (
        f"bergen health: {server.target} no.such.Service: the server knows no such service "
        "(NOT_FOUND)\n"
    )


def test_a_server_that_does_not_answer_is_unreachable() -> None:
    answer = _health("--server", f"127.0.0.1:{_free_port()}", "--timeout", "1", "--json")
    assert answer.returncode == 5
    out = json.loads(answer.stdout)
    assert out["ok"] is False and out["status"] is None and out["exit_status"] == 5
    assert out["error"].endswith(("(UNAVAILABLE)", "(DEADLINE_EXCEEDED)"))


def test_a_stopped_server_is_unreachable(farm: ServerFarm, sqlite_url: str) -> None:
    server = farm.start(sqlite_url)
    assert _health("--server", server.target).returncode == 0
    assert server.terminate() == 0
    after = _health("--server", server.target, "--timeout", "1")
    assert after.returncode == 5, after.stdout + after.stderr


@pytest.mark.parametrize("bad", ["0", "-1", "abc", "601"])
def test_bad_timeouts_are_usage_errors(bad: str) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["health", "--timeout", bad])
    assert exited.value.code == 2
