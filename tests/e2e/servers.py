"""Real `bergen serve` processes for the end-to-end tests.

A server is started with `--listen 127.0.0.1:0 --port-file F`, waited for through the port file
and the gRPC health service, and stopped with SIGTERM (it must exit 0). Its output goes to a
log file that the tests show when they fail.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from bergen.server.lifecycle import EXIT_HELD, HARD_EXIT

START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0


def bergen_command() -> list[str]:
    """The `bergen` entry point of the interpreter running the tests."""
    exe = shutil.which("bergen", path=str(Path(sys.executable).parent))
    if exe is not None:
        return [exe]
    return [sys.executable, "-c", "import sys; from bergen.cli_client.main import main; "
            "sys.exit(main())"]  # fmt: skip


class ServerFailed(AssertionError):
    """A server did not start, or did not stop as it should."""


@dataclass
class ServerProcess:
    """One running `bergen serve`."""

    name: str
    database: str
    log_path: Path
    proc: subprocess.Popen[bytes]
    port: int = 0
    stopped: bool = False
    exit_code: int | None = None

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log().splitlines()[-lines:])

    def health(self, service: str = "", timeout: float = 5.0) -> int:
        """The health status of `service`. Raises grpc.RpcError."""
        with grpc.insecure_channel(self.target) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            reply = stub.Check(
                health_pb2.HealthCheckRequest(service=service), timeout=timeout, wait_for_ready=True
            )
            return int(reply.status)

    def terminate(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM, then wait for the exit. Returns the exit code (SIGKILLs after `timeout`)."""
        if self.stopped:
            assert self.exit_code is not None
            return self.exit_code
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            code = -999
        self.stopped, self.exit_code = True, code
        return code

    def wait(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """Wait for an exit already asked for (no signal sent). Returns the exit code.
        Raises subprocess.TimeoutExpired."""
        code = self.proc.wait(timeout)
        self.stopped, self.exit_code = True, code
        return code

    def kill(self) -> None:
        """SIGKILL: no shutdown at all."""
        self.proc.kill()
        self.exit_code = self.proc.wait()
        self.stopped = True


SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


@dataclass
class ServerFarm:
    """Starts servers for one test (or module) and stops whatever is left at the end."""

    workdir: Path
    servers: list[ServerProcess] = field(default_factory=list)

    def start(
        self,
        database: str,
        *,
        organiser_token: str | None = None,
        restrict_create: bool = False,
        name: str | None = None,
        extra_args: Sequence[str] = (),
        env: dict[str, str | None] | None = None,
        own_token: bool = False,
        cwd: Path | None = None,
        serving: bool = True,
    ) -> ServerProcess:
        """Start `bergen serve` on `database` and wait until it answers health checks:
        SERVING, or NOT_SERVING when not `serving` (a server that refuses its log).
        Without an organiser token (`organiser_token`, or a file in `extra_args`) it serves
        with none, unless `own_token`: then it makes its own beside its signing key and names
        it in the state folder, which `env` should name (BERGEN_STATE_DIR) so that the user's
        own is left alone. `env` adds to the server's environment (None: a variable removed);
        `cwd` is its folder (default: the farm's).

        Raises ServerFailed (with the server's log) if it exits or does not answer in time.
        """
        name = name or f"server{len(self.servers)}"
        tag = uuid.uuid4().hex[:6]
        port_file = self.workdir / f"{name}-{tag}.port"
        log_path = self.workdir / f"{name}-{tag}.log"
        args = [
            *bergen_command(),
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--database",
            database,
            "--port-file",
            str(port_file),
        ]
        if restrict_create:
            args.append("--restrict-create")
        args += extra_args
        if organiser_token is None and not own_token and "--organiser-token-file" not in args:
            args.append("--no-organiser")
        environment = {k: v for k, v in os.environ.items() if not k.startswith("BERGEN_")}
        environment["BERGEN_LOG_LEVEL"] = "INFO"
        # One record-signing key per farm, shared by its replicas, kept out of the repository.
        environment["BERGEN_SIGNING_KEY"] = str(self.workdir / "signing-key.pem")
        if organiser_token is not None:
            environment["BERGEN_ORGANISER_TOKEN"] = organiser_token
        for key, value in (env or {}).items():
            if value is None:
                environment.pop(key, None)
            else:
                environment[key] = value
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                args,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=environment,
                cwd=cwd or self.workdir,
            )
        server = ServerProcess(name, database, log_path, proc)
        self.servers.append(server)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not port_file.exists():
            if proc.poll() is not None:
                server.stopped, server.exit_code = True, proc.returncode
                raise ServerFailed(
                    f"{name} exited with {proc.returncode} before serving:\n{server.log_tail()}"
                )
            if time.monotonic() > deadline:
                raise ServerFailed(f"{name} wrote no port file in time:\n{server.log_tail()}")
            time.sleep(0.02)
        server.port = int(port_file.read_text())
        want = SERVING if serving else NOT_SERVING
        if server.health(timeout=START_TIMEOUT_S) != want:
            said = health_pb2.HealthCheckResponse.ServingStatus.Name(want)
            raise ServerFailed(f"{name} is not {said}:\n{server.log_tail()}")
        return server

    def stop_all(self) -> list[str]:
        """SIGTERM every server still running; returns a complaint for each that did not
        exit 0."""
        problems = []
        for s in self.servers:
            if s.stopped:
                continue
            code = s.terminate()
            log = s.log()
            forced = max(log.find(EXIT_HELD), log.find(HARD_EXIT))
            if forced >= 0:  # the stacks of every thread follow: show them all
                problems.append(
                    f"{s.name} exited with {code} only when its exit was forced:\n"
                    f"{s.log_tail()}\n...\n{log[forced:]}"
                )
            elif code != 0:
                problems.append(f"{s.name} exited with {code} on SIGTERM:\n{s.log_tail()}")
        return problems
