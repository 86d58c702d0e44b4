"""`bergen serve --workers N`: several processes on one port, each a replica of the others.

Two workers on PostgreSQL both answer calls made through the one port (each counts its own in
its /metrics), a match is played to its end through it, SIGTERM to the supervisor stops every
worker and exits 0, a killed worker is restarted, and so is none left behind when the
supervisor itself is killed. More than one worker on SQLite, and a port another program holds,
are refused before anything starts."""

from __future__ import annotations

import os
import random
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import grpc
import pytest

from bergen.api.exit_status import ExitStatus
from bergen.v1 import bergen_pb2 as pb
from bergen.v1 import bergen_pb2_grpc as rpc

from .client import Client, play_to_end, seat_everyone
from .servers import ServerFarm, ServerProcess, bergen_command
from .test_metrics import calls, scrape

pytestmark = [pytest.mark.timeout(240), pytest.mark.postgres]

CHANNELS = 16
"""Connections opened apart: the kernel spreads them over the workers by their address, so
that all 16 reach one of two workers has odds of 1 in 32768."""


def own_connection(target: str) -> Client:
    """A client on a TCP connection of its own (gRPC otherwise shares one connection between
    channels to the same target)."""
    client = Client(target)
    client.channel.close()
    client.channel = grpc.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)])
    client.stub = rpc.BergenServiceStub(client.channel)
    return client


def workers_of(server: ServerProcess, count: int, timeout: float = 30.0) -> dict[int, int]:
    """The latest pid of each worker, as the workers logged them, once `count` did."""
    deadline = time.monotonic() + timeout
    while True:
        pids = {
            int(i): int(pid)
            for i, pid in re.findall(r"worker (\d+) of \d+ \(pid (\d+)\)", server.log())
        }
        if len(pids) >= count:
            return pids
        assert time.monotonic() < deadline, f"workers did not all log:\n{server.log_tail()}"
        time.sleep(0.05)


def metrics_urls(server: ServerProcess, count: int, timeout: float = 30.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while True:
        urls = re.findall(r"metrics on (http://[0-9.:\[\]]+/metrics)", server.log())
        if len(urls) >= count:
            return urls[-count:]
        assert time.monotonic() < deadline, f"no metrics addresses:\n{server.log_tail()}"
        time.sleep(0.05)


def gone(pid: int, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        # A worker whose supervisor died is reparented; a zombie that nobody reaped yet
        # has stopped serving: its state says so.
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, IndexError):
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def test_two_workers_serve_one_port_and_play_a_match(farm: ServerFarm, pg_database: str) -> None:
    server = farm.start(
        pg_database, name="workers", extra_args=["--workers", "2", "--metrics", "127.0.0.1:0"]
    )
    pids = workers_of(server, 2)
    assert sorted(pids) == [0, 1] and len(set(pids.values())) == 2
    assert server.proc.pid not in pids.values()
    urls = metrics_urls(server, 2)
    clients = [own_connection(server.target) for _ in range(CHANNELS)]
    try:
        table = seat_everyone(clients[0], 2)
        for c in clients:
            assert c.view(table.match_id).version == table.version
        # Both workers answered some of these views: each counts only its own calls.
        views = [calls(scrape(url), "GetMatch") for url in urls]
        assert all(v > 0 for v in views), views
        assert sum(views) == CHANNELS
        moves = play_to_end(clients, random.Random("workers"), table)
        plays = [calls(scrape(url), "Play") for url in urls]
        assert sum(plays) == len(moves), (plays, len(moves))
        # Every worker, whichever wrote last, shows the ended match at its last version.
        last = moves[-1].response.view.version
        for c in clients:
            view = c.view(table.match_id)
            assert view.phase == pb.PHASE_ENDED and view.version == last
    finally:
        for c in clients:
            c.close()
    assert server.terminate() == 0, server.log_tail()
    assert all(gone(pid) for pid in pids.values()), pids
    assert "stopping the workers" in server.log()


def test_a_killed_worker_is_restarted(farm: ServerFarm, pg_database: str) -> None:
    server = farm.start(pg_database, name="workers", extra_args=["--workers", "2"])
    pids = workers_of(server, 2)
    os.kill(pids[1], signal.SIGKILL)
    assert gone(pids[1])
    deadline = time.monotonic() + 30
    while (now := workers_of(server, 2))[1] == pids[1]:
        assert time.monotonic() < deadline, f"worker 1 not restarted:\n{server.log_tail()}"
        time.sleep(0.1)
    assert now[0] == pids[0]  # the other worker served on
    assert f"worker 1 exited with {-signal.SIGKILL}; restarting it" in server.log()
    clients = [own_connection(server.target) for _ in range(CHANNELS)]
    try:
        table = seat_everyone(clients[0], 2)
        for c in clients:
            assert c.view(table.match_id).version == table.version
    finally:
        for c in clients:
            c.close()
    assert server.terminate() == 0, server.log_tail()
    assert gone(now[0]) and gone(now[1])


def test_no_worker_outlives_a_killed_supervisor(farm: ServerFarm, pg_database: str) -> None:
    server = farm.start(pg_database, name="workers", extra_args=["--workers", "2"])
    pids = workers_of(server, 2)
    server.kill()
    assert all(gone(pid) for pid in pids.values()), pids


def _serve(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERGEN_")}
    env["BERGEN_SIGNING_KEY"] = str(workdir / "signing-key.pem")
    return subprocess.run(
        [*bergen_command(), "serve", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=workdir,
        timeout=60,
    )


def test_sqlite_refuses_more_than_one_worker(tmp_path: Path) -> None:
    done = _serve(
        tmp_path,
        "--listen",
        "127.0.0.1:0",
        "--database",
        f"sqlite:///{tmp_path / 'bergen.db'}",
        "--workers",
        "2",
    )
    assert done.returncode == ExitStatus.USAGE, done.stderr
    assert "--workers 2 needs PostgreSQL" in done.stderr


def test_a_port_another_program_holds_is_refused(tmp_path: Path, pg_database: str) -> None:
    with socket.socket() as other:
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        done = _serve(
            tmp_path, "--listen", f"127.0.0.1:{port}", "--database", pg_database, "--workers", "2"
        )
    assert done.returncode == ExitStatus.NOT_READY, done.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "worker" not in done.stderr  # refused before any worker started
