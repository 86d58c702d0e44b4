"""Real `bergen serve` processes for the security tests that the farms of tests/e2e/servers.py
cannot start: servers speaking TLS (waited for by a health check over TLS), and servers that
are expected to refuse to start."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
from e2e.servers import bergen_command
from grpc_health.v1 import health_pb2, health_pb2_grpc

START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0
CALL_TIMEOUT_S = 10.0


def clean_env() -> dict[str, str]:
    """The environment without any BERGEN_ setting of the caller's."""
    return {k: v for k, v in os.environ.items() if not k.startswith("BERGEN_")}


def channel(target: str, credentials: grpc.ChannelCredentials | None) -> grpc.Channel:
    """A channel to `target`: plaintext when `credentials` is None."""
    if credentials is None:
        return grpc.insecure_channel(target)
    return grpc.secure_channel(target, credentials)


def health(target: str, credentials: grpc.ChannelCredentials | None) -> int:
    """The server's health status. Raises grpc.RpcError."""
    with channel(target, credentials) as open_:
        stub = health_pb2_grpc.HealthStub(open_)
        return int(stub.Check(health_pb2.HealthCheckRequest(), timeout=CALL_TIMEOUT_S).status)


@dataclass
class Served:
    """One running `bergen serve`."""

    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


class Servers:
    """Starts `bergen serve` processes for one test and stops them at its end."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.running: list[Served] = []

    def start(
        self,
        database: str,
        args: Sequence[str],
        credentials: grpc.ChannelCredentials | None,
        listen: str = "127.0.0.1:0",
    ) -> Served:
        """Start a server and wait until it answers a health check over `credentials` (None:
        plaintext). Raises AssertionError, with its log, when it does not."""
        n = len(self.running)
        port_file = self.workdir / f"server{n}.port"
        log_path = self.workdir / f"server{n}.log"
        cmd = [*bergen_command(), "serve", "--listen", listen, "--database", database]
        cmd += ["--port-file", str(port_file), *args]
        if "--organiser-token-file" not in args:
            cmd.append("--no-organiser")  # no token file made, none named for the user
        env = clean_env() | {"BERGEN_SIGNING_KEY": str(self.workdir / "signing-key.pem")}
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.workdir
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while not port_file.exists():
            assert proc.poll() is None, f"the server exited with {proc.returncode}:\n" + (
                log_path.read_text(errors="replace")
            )
            assert time.monotonic() < deadline, "the server wrote no port file in time"
            time.sleep(0.02)
        served = Served(proc, int(port_file.read_text()), log_path)
        self.running.append(served)
        status = health(served.target, credentials)
        assert status == health_pb2.HealthCheckResponse.SERVING, served.log()
        return served

    def stop_all(self) -> list[str]:
        problems = []
        for served in self.running:
            code = served.stop()
            if code != 0:
                problems.append(f"a server exited with {code} on SIGTERM:\n{served.log()}")
        return problems


@dataclass(frozen=True)
class Refused:
    returncode: int
    stderr: str


def serve_refused(args: Sequence[str], workdir: Path, env: dict[str, str] | None = None) -> Refused:
    """Run `bergen serve` that is expected to refuse to start; its exit status and standard
    error. Raises AssertionError, after stopping it, when it starts serving instead."""
    port = workdir / "refused.port"
    port.unlink(missing_ok=True)
    err = workdir / "refused.err"
    cmd = [*bergen_command(), "serve", "--database", f"sqlite:///{workdir / 'refused.db'}"]
    # A free port unless `args` names the address (the last --listen counts).
    cmd += ["--port-file", str(port), "--listen", "127.0.0.1:0", *args]
    env = clean_env() | {"BERGEN_SIGNING_KEY": str(workdir / "signing-key.pem")} | (env or {})
    with open(err, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=out, env=env, cwd=workdir)
    deadline = time.monotonic() + START_TIMEOUT_S
    while proc.poll() is None and not port.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise AssertionError(f"bergen serve {' '.join(args)} started instead of refusing")
    return Refused(proc.returncode, err.read_text(errors="replace"))
