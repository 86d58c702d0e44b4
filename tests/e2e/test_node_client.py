"""A client in another language: Node.js plays whole matches against a real server.

`tests/e2e/node/play_match.js` uses @grpc/grpc-js and @grpc/proto-loader (pinned in
`tests/e2e/node/package.json`, installed here with `npm ci`) and knows nothing but
`proto/bergen/v1/bergen.proto`. It creates a match, takes every seat, plays it to the end,
watches it as a spectator and checks the replay and the record; this test then checks its
summary against the server's own answers through the Python stubs.

Skipped when `node` or `npm` is missing, unless BERGEN_REQUIRE_NODE=1 (CI), then it fails.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from bergen.v1 import bergen_pb2 as pb
from bergen.v1 import bergen_pb2_grpc as pb_grpc

NODE_DIR = Path(__file__).resolve().parent / "node"
SCRIPT = NODE_DIR / "play_match.js"
STAMP = NODE_DIR / "node_modules" / ".bergen-install-stamp"
NPM_TIMEOUT = 300
SERVER_START_TIMEOUT = 30
SCRIPT_TIMEOUT = 120
SERVER_STOP_TIMEOUT = 30
# (seats, partnerships)
MATCHES = [(2, False), (4, False), (4, True)]

pytestmark = pytest.mark.timeout(NPM_TIMEOUT + 300)


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        reason = f"`{name}` is not on PATH: the Node.js client test needs Node.js 18+ and npm"
        if os.environ.get("BERGEN_REQUIRE_NODE") == "1":
            pytest.fail(f"BERGEN_REQUIRE_NODE=1 but {reason}")
        pytest.skip(reason)
    return path


def _lock_digest() -> str:
    h = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        h.update((NODE_DIR / name).read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def node() -> str:
    """The `node` binary, with the script's packages installed from package-lock.json."""
    node = _tool("node")
    npm = _tool("npm")
    digest = _lock_digest()
    if not (STAMP.exists() and STAMP.read_text() == digest):
        # --ignore-scripts: the two packages need no install script (protobufjs's only
        # checks versions), and npm 11 would skip it anyway.
        cmd = [npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts"]
        try:
            done = subprocess.run(
                cmd,
                cwd=NODE_DIR,
                capture_output=True,
                text=True,
                timeout=NPM_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"`{' '.join(cmd)}` took more than {NPM_TIMEOUT} s in {NODE_DIR}")
        if done.returncode != 0:
            pytest.fail(
                f"`{' '.join(cmd)}` failed ({done.returncode}) in {NODE_DIR}:\n"
                f"{done.stdout}\n{done.stderr}"
            )
        STAMP.write_text(digest)
    return node


def _bergen() -> str:
    """The `bergen` command installed with the Python running the tests."""
    beside = Path(sys.executable).with_name("bergen")
    found = str(beside) if beside.exists() else shutil.which("bergen")
    assert found, "no `bergen` command: install the project (make test does)"
    return found


class Server:
    """A `bergen serve` process on a fresh SQLite file, on a free port."""

    def __init__(self, workdir: Path) -> None:
        self.port_file = workdir / "port"
        self.log_path = workdir / "server.log"
        database = f"sqlite:///{workdir / 'bergen.db'}"
        cmd = [_bergen(), "serve", "--listen", "127.0.0.1:0", "--database", database]
        cmd += ["--port-file", str(self.port_file), "--no-organiser"]
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT)
        try:
            port = self._wait_for_port()
        except AssertionError as e:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"{e}; its log:\n{self.log()}") from None
        self.address = f"127.0.0.1:{port}"
        self.channel = grpc.insecure_channel(self.address)
        self.stub = pb_grpc.BergenServiceStub(self.channel)

    def _wait_for_port(self) -> int:
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"the server exited with {self.proc.returncode} on start")
            try:
                port = int(self.port_file.read_text().strip())
            except (FileNotFoundError, ValueError):
                time.sleep(0.05)
                continue
            if port > 0:
                return port
        raise AssertionError(f"the server wrote no port within {SERVER_START_TIMEOUT} s")

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self) -> int:
        """SIGTERM, then the exit code (SIGKILL and an error if it does not exit in time)."""
        self.channel.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(SERVER_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(
                    f"the server did not exit within {SERVER_STOP_TIMEOUT} s of SIGTERM"
                ) from None
        self._log.close()
        return self.proc.returncode


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    srv = Server(tmp_path)
    try:
        yield srv
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()
            srv.proc.wait()


def _play(node: str, server: Server, seats: int, partnerships: bool) -> dict[str, Any]:
    cmd = [node, str(SCRIPT), server.address, str(seats)]
    if partnerships:
        cmd.append("--partnerships")
    try:
        done = subprocess.run(
            cmd, cwd=NODE_DIR, capture_output=True, text=True, timeout=SCRIPT_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"{cmd} took more than {SCRIPT_TIMEOUT} s:\n{e.stderr!r}") from None
    assert done.returncode == 0, (
        f"{cmd} exited with {done.returncode}:\n{done.stdout}\n{done.stderr}"
    )
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, f"{cmd} printed more than one line:\n{done.stdout}"
    summary: dict[str, Any] = json.loads(lines[0])
    return summary


def _check_against_server(server: Server, summary: dict[str, Any], seats: int) -> None:
    match_id = summary["match_id"]
    record = json.loads(server.stub.GetRecord(pb.GetRecordRequest(match_id=match_id)).record_json)
    assert record["match_id"] == match_id
    assert record["result"]["scores"] == summary["scores"]
    assert record["result"]["winner_side"] == summary["winner_side"]
    assert [s["name"] for s in record["seats"]] == [f"node-{i}" for i in range(seats)]
    assert len(record["hands"]) == summary["hands"]
    # Every play the client made, plus each hand's lead, which the server plays itself.
    record_plays = sum(1 for h in record["hands"] for a in h["actions"] if a["act"] == "play")
    assert record_plays == summary["plays"] + len(record["hands"]), (record_plays, summary)

    view = server.stub.GetMatch(pb.GetMatchRequest(match_id=match_id)).view
    assert view.phase == pb.PHASE_ENDED
    assert list(view.scores) == summary["scores"]
    assert view.version == summary["version"]
    assert not view.HasField("turn")
    assert not view.HasField("viewer_seat")
    # The spectator saw every event after the view that opened its stream, up to the last.
    assert summary["events_watched"] == summary["version"] - summary["first_watched_seq"] + 1
    assert summary["events_watched"] > summary["plays"]

    replay = server.stub.GetReplay(pb.GetReplayRequest(match_id=match_id))
    assert replay.complete
    assert [e.seq for e in replay.events] == list(range(1, summary["version"] + 1))
    played = sum(1 for e in replay.events if e.WhichOneof("body") == "tile_played")
    assert played == record_plays


def test_node_client_plays_whole_matches(
    node: str, server: Server, request: pytest.FixtureRequest
) -> None:
    try:
        match_ids = set()
        for seats, partnerships in MATCHES:
            summary = _play(node, server, seats, partnerships)
            assert summary["seats"] == seats
            assert summary["partnerships"] == partnerships
            assert len(summary["scores"]) == (2 if partnerships else seats)
            _check_against_server(server, summary, seats)
            match_ids.add(summary["match_id"])
        assert len(match_ids) == len(MATCHES)

        listed = server.stub.ListMatches(pb.ListMatchesRequest(phase=pb.PHASE_ENDED, page_size=100))
        assert match_ids <= {m.match_id for m in listed.matches}

        code = server.stop()
        assert code == 0, f"the server exited with {code} after SIGTERM"
    except BaseException:
        # Shown with the failure, after the assertion.
        request.node.add_report_section("call", "server log", server.log())
        raise
