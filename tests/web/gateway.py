"""A real `bergen web` process for the web tests, and a small Server-Sent Events reader that
keeps every byte the gateway sent."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e.servers import bergen_command

START_TIMEOUT_S = 30.0


class GatewayFailed(AssertionError):
    pass


@dataclass
class Gateway:
    proc: subprocess.Popen[bytes]
    log_path: Path
    port: int = 0
    captured: list[tuple[str, bytes]] = field(default_factory=list)
    """(path, body) of every JSON answer read through `get`."""

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def get(
        self, path: str, headers: dict[str, str] | None = None
    ) -> tuple[int, Any, dict[str, str]]:
        """GET `path`: (status, parsed JSON or raw bytes, headers). The body is captured."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=20)
        try:
            conn.request("GET", path, headers=headers or {})
            response = conn.getresponse()
            body = response.read()
            self.captured.append((path, body))
            kind = response.getheader("content-type", "")
            parsed: Any = json.loads(body) if kind.startswith("application/json") else body
            return response.status, parsed, {k.lower(): v for k, v in response.getheaders()}
        finally:
            conn.close()

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return -999
        return int(self.proc.returncode)


def start_gateway(
    server_target: str, workdir: Path, *extra: str, state: Path | None = None, port: int = 0
) -> Gateway:
    """Start `bergen web` on `port` (any free one by default), its state folder `state` (a
    new one by default: give the same one to a restarted gateway)."""
    tag = uuid.uuid4().hex[:6]
    port_file = workdir / f"web-{tag}.port"
    log_path = workdir / f"web-{tag}.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERGEN_")}
    # The computer's seats in a folder of the test's, never the user's own.
    env["BERGEN_STATE_DIR"] = str(state or workdir / f"web-{tag}-state")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [
                *bergen_command(),
                "web",
                "--server",
                server_target,
                "--listen",
                f"127.0.0.1:{port}",
                "--port-file",
                str(port_file),
                *extra,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=workdir,
        )
    gateway = Gateway(proc, log_path)
    deadline = time.monotonic() + START_TIMEOUT_S
    while not port_file.exists():
        if proc.poll() is not None:
            raise GatewayFailed(f"bergen web exited with {proc.returncode}:\n{gateway.log()}")
        if time.monotonic() > deadline:
            gateway.stop()
            raise GatewayFailed(f"bergen web wrote no port file:\n{gateway.log()}")
        time.sleep(0.02)
    gateway.port = int(port_file.read_text())
    return gateway


@dataclass
class Message:
    kind: str
    data: Any
    id: str | None
    raw: bytes


class EventStream:
    """One SSE connection: `messages()` yields each message as it arrives; `raw` keeps every
    byte received."""

    def __init__(
        self,
        gateway: Gateway,
        path: str,
        last_event_id: str | None = None,
        timeout: float = 20,
        source: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        """Open `path`; from the loopback address `source` (another client) when given."""
        self.conn = http.client.HTTPConnection(
            "127.0.0.1",
            gateway.port,
            timeout=timeout,
            source_address=None if source is None else (source, 0),
        )
        headers = {"Accept": "text/event-stream", **(headers or {})}
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        self.conn.request("GET", path, headers=headers)
        assert self.conn.sock is not None
        self.sock: socket.socket = self.conn.sock
        self.response = self.conn.getresponse()
        self.status = self.response.status
        self.raw = bytearray()
        self.received: list[Message] = []

    def messages(self) -> Iterator[Message]:
        kind, data, ident, raw = "message", [], None, bytearray()
        while True:
            line = self.response.fp.readline()
            if not line:
                return
            self.raw += line
            raw += line
            text = line.decode().rstrip("\n")
            if text == "":
                if data:
                    msg = Message(kind, json.loads("\n".join(data)), ident, bytes(raw))
                    self.received.append(msg)
                    yield msg
                kind, data, ident, raw = "message", [], None, bytearray()
                continue
            if text.startswith(":"):
                continue
            name, _, value = text.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "event":
                kind = value
            elif name == "data":
                data.append(value)
            elif name == "id":
                ident = value

    def close(self) -> None:
        """Close the connection, at once even while another thread reads it: the socket is
        shut down first, so that a read blocked in it returns (end of stream) and releases the
        response's buffer, which closing it would otherwise wait for (until the next byte the
        gateway sends: a keepalive, 15 s later)."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.conn.close()
