"""`bergen web` as a command: its options, and a clear error without the `web` extra."""

from __future__ import annotations

import importlib.util
import subprocess
from typing import Any

import pytest
from e2e.servers import bergen_command

from bergen.api.exit_status import ExitStatus
from bergen.cli_client.main import build_parser
from bergen.cli_client.web import command


def test_bergen_web_is_a_subcommand_with_its_options() -> None:
    args = build_parser().parse_args(
        ["web", "--server", "127.0.0.1:50051", "--listen", "127.0.0.1:0", "--max-streams", "7"]
    )
    assert args.listen == ("127.0.0.1", 0) and args.max_streams == 7
    with pytest.raises(SystemExit):
        build_parser().parse_args(["web", "--listen", "nowhere"])


def test_without_the_web_extra_it_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *a: Any) -> Any:
        return None if name == "starlette" else real(name, *a)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    args = build_parser().parse_args(["web"])
    assert command.run(args) == ExitStatus.ERROR
    err = capsys.readouterr().err
    assert "needs starlette" in err and "pip install 'bergen[web]'" in err


def test_a_port_taken_is_an_error_not_a_traceback() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        done = subprocess.run(
            [*bergen_command(), "web", "--listen", f"127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == ExitStatus.ERROR, done.stderr
    assert "cannot listen on 127.0.0.1" in done.stderr and "Traceback" not in done.stderr


def test_coalesce_and_nice_options_are_bounded(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["web", "--coalesce-ms", "150", "--nice", "10"])
    assert args.coalesce_ms == 150 and args.nice == 10
    for bad in (["--coalesce-ms", "1001"], ["--coalesce-ms", "-1"], ["--nice", "20"]):
        assert command.run(build_parser().parse_args(["web", *bad])) == ExitStatus.USAGE
        assert "--coalesce-ms must be 0-1000 and --nice 0-19" in capsys.readouterr().err
