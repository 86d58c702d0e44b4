"""`bergen serve --workers N`: N server processes on one port, under one supervisor (the
workers themselves start in bergen.server.workers).

Each worker is a whole `bergen serve` of its own, a replica exactly as several replicas on one
PostgreSQL database already are (README, "Several replicas, one truth"): it has its own
caches, its own listener for the store's NOTIFY, and binds the port with `SO_REUSEPORT`, so
the kernel spreads new connections over the workers.

The supervisor (the process started as `bergen serve`) binds the port first, WITHOUT
`SO_REUSEPORT`, so that a port held by another program is refused exactly as one server
refuses it; only then does it mark its socket shareable (it never listens on it: the kernel
hands connections to listening sockets only) and start the workers. It keeps the socket until
it exits, so no other program can slip onto the port between the workers' restarts. With
port 0 it picks the port, and `--port-file` gets it once every worker serves.

SIGTERM or SIGINT to the supervisor stops every worker gracefully (each lets its in-flight
commands finish) and the supervisor exits 0 when they all did. A worker that dies is
restarted; more than `MAX_RESTARTS` deaths within `RESTART_WINDOW_S` is a fault no restart
mends (a database that went away, a bad deployment), and the supervisor then stops the rest
and exits non-zero. A worker dies with its supervisor (Linux's parent-death signal), so a
supervisor killed with SIGKILL leaves no worker behind.

More than one worker needs PostgreSQL: SQLite takes one writer at a time, and its replicas
would only wait for one another.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bergen.api.exit_status import ExitStatus

from .config import Config

log = logging.getLogger("bergen.server.workers")

MAX_RESTARTS = 5
RESTART_WINDOW_S = 60.0
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 40.0
"""How long the supervisor waits for a worker's graceful stop before it kills it: a worker
ends within its HARD_LIMIT_S (25 s) of the signal, whatever holds it."""


class PortTaken(RuntimeError):
    """The listen address cannot be bound: another program holds it, or it is not ours."""


def split_listen(listen: str) -> tuple[str, int]:
    """(host, port) of HOST:PORT or [V6]:PORT. Raises ValueError."""
    host, sep, port_text = listen.rpartition(":")
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise ValueError(f"--listen {listen!r}: not HOST:PORT")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port_text)


def hold_port(listen: str) -> tuple[int, list[socket.socket]]:
    """Bind every address `listen` names, refusing (PortTaken) when any is held by anyone,
    then mark the sockets shareable for the workers. Returns the port and the sockets, which
    the caller keeps open (and never listens on) while the workers run."""
    host, port = split_listen(listen)
    try:
        infos = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE | socket.AI_NUMERICSERV
        )
    except socket.gaierror as e:
        raise PortTaken(f"cannot listen on {listen}: {e.strerror or e}") from e
    held: list[socket.socket] = []
    seen: set[tuple[int, object]] = set()
    try:
        for family, kind, proto, _, address in infos:
            if (family, address[0]) in seen:
                continue
            seen.add((family, address[0]))
            s = socket.socket(family, kind, proto)
            held.append(s)
            if family == socket.AF_INET6:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            # Bound first without SO_REUSEPORT: refused while anyone holds the port.
            s.bind((address[0], port, *address[2:]))
            if port == 0:
                port = s.getsockname()[1]
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    except OSError as e:
        for s in held:
            s.close()
        raise PortTaken(f"cannot listen on {listen}: {e.strerror or e}") from e
    if not held:
        raise PortTaken(f"cannot listen on {listen}: no address")
    return port, held


def worker_metrics(metrics: str | None, index: int) -> str | None:
    """Where worker `index` (from 0) serves /metrics: port 0 stays 0 (each picks one, and
    logs it); a fixed port P becomes P + index."""
    if not metrics:
        return metrics
    host, sep, port_text = metrics.rpartition(":")
    if not sep or not port_text.isdigit() or int(port_text) == 0:
        return metrics
    return f"{host}:{int(port_text) + index}"


@dataclass
class _Worker:
    index: int
    port_file: Path
    proc: subprocess.Popen[bytes] | None = None
    ready: bool = False


class Supervisor:
    """Starts, watches, restarts and stops the workers (see the module)."""

    def __init__(self, config: Config, port: int, count: int) -> None:
        self._config = config
        self._port = port
        self._dir = Path(tempfile.mkdtemp(prefix="bergen-workers-"))
        self._workers = [_Worker(i, self._dir / f"worker{i}.port") for i in range(count)]
        self._deaths: list[float] = []
        self._stopping = False

    def _spec(self, w: _Worker) -> dict[str, Any]:
        """What worker `w` is started with (bergen.server.workers): the supervisor's config,
        with the worker's listen address, port file, /metrics and place."""
        host, _ = split_listen(self._config.listen)
        config = dataclasses.replace(
            self._config,
            listen=f"[{host}]:{self._port}" if ":" in host else f"{host}:{self._port}",
            port_file=str(w.port_file),
            metrics=worker_metrics(self._config.metrics, w.index),
            workers=1,
            reuse_port=True,
            worker_index=w.index,
            worker_count=len(self._workers),
        )
        return {"config": config.to_spec(), "supervisor_pid": os.getpid()}

    def _start(self, w: _Worker) -> None:
        w.port_file.unlink(missing_ok=True)
        w.ready = False
        w.proc = subprocess.Popen(
            [sys.executable, "-m", "bergen.server.workers", json.dumps(self._spec(w))],
            stdin=subprocess.DEVNULL,
        )
        log.info("worker %d started (pid %d)", w.index, w.proc.pid)

    def start(self) -> int | None:
        """Start every worker and wait until each serves. Returns None when they all do, else
        the exit status to end with (every worker stopped)."""
        for w in self._workers:
            self._start(w)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not all(w.ready for w in self._workers):
            for w in self._workers:
                assert w.proc is not None
                if not w.ready and w.port_file.exists():
                    w.ready = True
                code = w.proc.poll()
                if code is not None:
                    log.error("worker %d exited with %d before serving", w.index, code)
                    self.stop()
                    return code if code > 0 else ExitStatus.ERROR
            if self._stopping:
                return None
            if time.monotonic() > deadline:
                log.error("the workers did not all serve within %g s", START_TIMEOUT_S)
                self.stop()
                return ExitStatus.NOT_READY
            time.sleep(0.05)
        return None

    def watch(self) -> int | None:
        """One look at the workers: restart any that died. Returns None while serving, or the
        exit status to end with when workers die too often (the rest are stopped)."""
        now = time.monotonic()
        for w in self._workers:
            assert w.proc is not None
            code = w.proc.poll()
            if code is None:
                if not w.ready and w.port_file.exists():
                    w.ready = True
                    log.info("worker %d serves again", w.index)
                continue
            self._deaths = [t for t in self._deaths if now - t < RESTART_WINDOW_S]
            self._deaths.append(now)
            if len(self._deaths) > MAX_RESTARTS:
                log.error(
                    "worker %d exited with %d: %d workers died within %g s; stopping",
                    w.index,
                    code,
                    len(self._deaths),
                    RESTART_WINDOW_S,
                )
                self.stop()
                return ExitStatus.ERROR
            log.warning("worker %d exited with %d; restarting it", w.index, code)
            self._start(w)
        return None

    def stop(self) -> bool:
        """SIGTERM every worker and wait for each (killing one that outstays STOP_TIMEOUT_S).
        Returns whether every worker exited 0."""
        self._stopping = True
        running = [w.proc for w in self._workers if w.proc is not None and w.proc.poll() is None]
        for p in running:
            p.send_signal(signal.SIGTERM)
        clean = True
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for p in running:
            try:
                code = p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.error("worker pid %d did not stop in time; killing it", p.pid)
                p.kill()
                code = p.wait()
            clean = clean and code == 0
        for w in self._workers:
            w.port_file.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self._dir.rmdir()
        return clean

    def pids(self) -> list[int]:
        return [w.proc.pid for w in self._workers if w.proc is not None]


def supervise(config: Config, held: list[socket.socket], port: int) -> int:
    """Run `config.workers` workers on `port` until SIGTERM or SIGINT; returns the exit status.
    `held` are the supervisor's sockets on the port (closed here at the end)."""
    stop = {"signal": 0}

    def on_signal(signum: int, _frame: object) -> None:
        stop["signal"] = signum

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    supervisor = Supervisor(config, port, config.workers)
    try:
        failed = supervisor.start()
        if failed is not None:
            return failed
        if stop["signal"]:
            log.info("signal %d: stopping the workers", stop["signal"])
            return ExitStatus.SUCCESS if supervisor.stop() else ExitStatus.ERROR
        log.info(
            "%d workers serve port %d (pids %s)",
            config.workers,
            port,
            " ".join(str(p) for p in supervisor.pids()),
        )
        if config.port_file:
            write_port_file(config.port_file, port)
        while not stop["signal"]:
            time.sleep(0.2)
            failed = supervisor.watch()
            if failed is not None:
                return failed
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        log.info("signal %d: stopping the workers (in-flight commands finish)", stop["signal"])
        return ExitStatus.SUCCESS if supervisor.stop() else ExitStatus.ERROR
    finally:
        for s in held:
            s.close()


def write_port_file(path: str, port: int) -> None:
    """Write `port` to `path` whole: a reader never sees a part of it."""
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(str(port))
    os.replace(path + ".tmp", path)
