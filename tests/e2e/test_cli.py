"""The command line as one layer: one address rule, one mapping from gRPC status to exit
status, the exit statuses listed once in docs/cli.md, `--version`, and the server's commands
contributed through an entry-point group."""

from __future__ import annotations

import os
import re
import socket
import subprocess
from importlib import metadata
from pathlib import Path

import grpc
import pytest

from bergen.api.exit_status import ExitStatus
from bergen.cli_client import main as cli
from bergen.cli_client.connect import exit_status_of
from bergen.cli_client.replay import refusal
from bergen.cli_client.verify import rpc_problem

from .failed_calls import FailedCall
from .servers import bergen_command

ROOT = Path(__file__).resolve().parents[2]
NOBODY = "127.0.0.1:9"
"""The discard port: nothing listens there, so a connection is refused at once."""


EXPECTED = {
    grpc.StatusCode.INVALID_ARGUMENT: ExitStatus.USAGE,
    grpc.StatusCode.NOT_FOUND: ExitStatus.NOT_FOUND,
    grpc.StatusCode.UNAUTHENTICATED: ExitStatus.REFUSED,
    grpc.StatusCode.PERMISSION_DENIED: ExitStatus.REFUSED,
    grpc.StatusCode.FAILED_PRECONDITION: ExitStatus.REFUSED,
    grpc.StatusCode.ALREADY_EXISTS: ExitStatus.REFUSED,
    grpc.StatusCode.UNAVAILABLE: ExitStatus.UNREACHABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED: ExitStatus.UNREACHABLE,
    grpc.StatusCode.ABORTED: ExitStatus.ERROR,
    grpc.StatusCode.INTERNAL: ExitStatus.ERROR,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ExitStatus.ERROR,
}


@pytest.mark.parametrize("code", list(EXPECTED), ids=[c.name for c in EXPECTED])
def test_every_command_maps_a_grpc_status_to_the_same_exit_status(
    code: grpc.StatusCode,
) -> None:
    error = FailedCall(code)
    assert exit_status_of(error) == EXPECTED[code]
    assert rpc_problem(error, "here", "the record").status == EXPECTED[code]
    assert refusal(error, "here", "m").status == EXPECTED[code]


def test_the_command_line_manual_lists_every_exit_status_once_and_nothing_else() -> None:
    manual = (ROOT / "docs" / "cli.md").read_text("utf-8")
    section = manual.split("### Exit statuses", 1)[1].split("\n### ", 1)[0]
    rows = re.findall(r"^\| (\d+) \| ", section, re.M)
    assert [int(r) for r in rows] == [int(s) for s in ExitStatus]
    assert manual.count("### Exit statuses") == 1
    assert "Exit statuses:" not in manual  # no second list, in a command's own section


def test_version_is_the_installed_distributions() -> None:
    done = subprocess.run(
        [*bergen_command(), "--version"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == ExitStatus.SUCCESS
    assert done.stdout.strip() == f"bergen {metadata.version('bergen')}"


def test_the_servers_commands_come_from_the_entry_point_group() -> None:
    # The server's own commands, and `web` (an optional extra's, so that `bergen` loads
    # without Starlette).
    names = [name for name, _ in cli.contributed()]
    assert names == ["migrate", "serve", "token", "web"]
    choices = cli.build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert {"serve", "migrate", "play", "bots", "verify", "export", "simulate", "web"} <= set(
        choices
    )


def run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL
    )


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERGEN_")}
    return {**env, **extra}


SERVER_COMMANDS = [
    ["play", "--match", "m"],
    ["bots"],
    ["verify", "some-match"],
    ["export", "--out", "{tmp}/out"],
    ["replay", "some-match"],
]


def _command(args: list[str], tmp: Path) -> list[str]:
    args = [a.replace("{tmp}", str(tmp)) for a in args]
    if args[0] == "replay":
        from .replay_support import replay_command

        return [*replay_command(), *args[1:]]
    return [*bergen_command(), *args]


@pytest.mark.parametrize("args", SERVER_COMMANDS, ids=[a[0] for a in SERVER_COMMANDS])
def test_every_command_that_talks_to_a_server_reads_bergen_server(
    args: list[str], tmp_path: Path
) -> None:
    done = run(
        *_command(args, tmp_path), env=_env(BERGEN_SERVER=NOBODY, BERGEN_STATE_DIR=str(tmp_path))
    )
    assert done.returncode == ExitStatus.UNREACHABLE, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("args", SERVER_COMMANDS, ids=[a[0] for a in SERVER_COMMANDS])
def test_a_malformed_bergen_server_is_a_usage_error(args: list[str], tmp_path: Path) -> None:
    done = run(*_command(args, tmp_path), env=_env(BERGEN_SERVER="nowhere"))
    assert done.returncode == ExitStatus.USAGE, done.stderr
    assert "expected HOST:PORT, got 'nowhere'" in done.stderr


def test_serve_that_cannot_listen_is_not_ready(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run(
            *bergen_command(),
            "serve",
            "--listen",
            f"127.0.0.1:{port}",
            "--database",
            f"sqlite:///{tmp_path / 'b.db'}",
            "--signing-key",
            str(tmp_path / "key.pem"),
            env=_env(),
        )
    assert done.returncode == ExitStatus.NOT_READY, done.stderr
    assert "bergen serve: " in done.stderr and f"127.0.0.1:{port}" in done.stderr


@pytest.mark.parametrize(
    "database",
    ["postgresql://postgres@127.0.0.1:9/test", "sqlite:////proc/no-such-folder/bergen.db"],
    ids=["postgresql-unreachable", "sqlite-unopenable"],
)
def test_serve_on_a_database_it_cannot_open_is_not_ready_and_says_which(
    database: str, tmp_path: Path
) -> None:
    done = run(
        *bergen_command(),
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--database",
        database,
        "--signing-key",
        str(tmp_path / "key.pem"),
        env=_env(),
    )
    assert done.returncode == ExitStatus.NOT_READY, done.stderr
    assert "bergen serve: cannot open " in done.stderr
    assert "Traceback" not in done.stderr
