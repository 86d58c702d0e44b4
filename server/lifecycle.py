"""A started server's life: `Running` (what `create_server` started, and how it stops),
serving until SIGTERM or SIGINT, and the bounds on the stop that follows (`arm_exit_limits`)."""

from __future__ import annotations

import faulthandler
import gc
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from bergen.api.exit_status import ExitStatus

from .app import Application
from .clocks import ClockKeeper
from .feed import EventFeed
from .janitor import Janitor
from .loop import LoopHealth, LoopServer
from .metrics import Metrics
from .recorder import Recorder
from .store import EventStore
from .threads import STOP_WAIT_S, Thread
from .tournament_manager import TournamentManager
from .worker import Worker

log = logging.getLogger("bergen.server")

GRACE_SECONDS = 10.0
SHUTDOWN_LIMIT_S = 20.0
"""From the signal to stop to the process's end, at most (the stop itself takes the grace and
a little): past it `bergen serve` writes the threads still running and their stacks to stderr
and ends the process (`exit_anyway_after`), so that nothing keeps a stopped server alive (a
call's thread that never returns, which the interpreter waits for at exit, or a step blocked
on a database that is gone)."""
HARD_LIMIT_S = SHUTDOWN_LIMIT_S + 5.0
"""The last resort, for a process whose Python code cannot run at all any more (a lock that
is never released, a C call that never returns holding the interpreter's lock): the
interpreter's own fault handler (`faulthandler.dump_traceback_later`, a C thread) writes
every thread's stack to stderr under a line `Timeout (0:00:25)!` and exits with status 1."""
EXIT_HELD = "bergen serve: the process did not end"
"""How the line `exit_anyway_after` writes begins."""
HARD_EXIT = "Timeout (0:"
"""How the fault handler's line begins when `HARD_LIMIT_S` ends the process."""


@dataclass
class Running:
    server: LoopServer
    port: int
    feed: EventFeed
    app: Application
    health: LoopHealth
    store: EventStore
    janitor: Janitor | None = None
    clocks: ClockKeeper | None = None
    tournaments: TournamentManager | None = None
    metrics: Metrics | None = None
    metrics_address: tuple[str, int] | None = None
    """Where /metrics is served (host, port); None when it is not."""
    tracer_provider: Any = None
    """The OpenTelemetry SDK's provider `bergen serve --trace` set up, flushed at stop."""
    replica: str = ""
    """This process's replica id (in the NOTIFY payloads it sends on PostgreSQL)."""
    recorder: Recorder | None = None
    """Makes the records of ended matches as they end (None: records are not signed)."""
    _background: threading.Event | None = None

    def stop(self, grace: float = GRACE_SECONDS) -> None:
        """Refuse new calls, end watch streams, let in-flight commands finish (for `grace`
        seconds; then they are cancelled), and stop the background threads
        (`stop_background`)."""
        self.health.enter_graceful_shutdown()
        if self._background is not None:
            self._background.set()
        stopped = self.server.stop(grace)  # refuses new calls; returns at once
        workers = [
            w for w in (self.janitor, self.clocks, self.tournaments, self.recorder) if w is not None
        ]
        stop_background(workers, self.feed, grace)
        stopped.wait()
        if self.feed.tlog is not None:
            self.feed.tlog.close()
        self.store.close()
        if self.metrics is not None:
            self.metrics.stop()
        if self.tracer_provider is not None:
            self.tracer_provider.shutdown()


def stop_background(workers: Sequence[Worker], feed: EventFeed, grace: float) -> None:
    """Ask the background threads to stop (the feed ends its watch streams), then wait for
    them together, at most `grace` or STOP_WAIT_S, whichever is longer: a step blocked on a
    database that is gone holds the stop that long once, not once a thread. Those still busy
    are named in a warning and left to end with the process (daemon threads)."""
    for w in workers:
        w.ask_to_stop()
    feed.ask_to_stop()
    wait_s = max(grace, STOP_WAIT_S)
    deadline = time.monotonic() + wait_s
    late = [type(w).__name__ for w in workers if not w.wait_stopped(deadline)]
    if not feed.wait_stopped(deadline):
        late.append("EventFeed")
    if late:
        log.warning(
            "stopping: %s still busy after %.0f s; left to end with the process",
            ", ".join(late), wait_s,
        )  # fmt: skip


def serve_until_signalled(running: Running) -> None:
    """Serve until SIGTERM or SIGINT, then stop `running` in order, within the bounds
    `arm_exit_limits` sets from the signal on."""
    done = threading.Event()
    stopped = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        if not done.is_set():  # first, so that nothing after can hold the process for ever
            arm_exit_limits(stopped)
        log.info("signal %d: shutting down (in-flight commands finish)", signum)
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    # A timed wait: Python runs signal handlers in the main thread, and a signal the kernel
    # hands to another thread does not wake an untimed wait.
    while not done.wait(0.5):
        pass
    # Shutting down already: a second SIGTERM must not kill the process with the default
    # action while streams close and the interpreter exits. SIGKILL still ends it.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    running.stop()
    stopped.set()


def settle_heap() -> int:
    """Once the server is up: collect what start-up left, and keep every object alive then (the
    modules, the server, its threads and stores) out of later collections.

    CPython's full collection walks every tracked object while holding the interpreter lock.
    A started server holds about a hundred thousand that never become garbage, so a full
    collection under load stopped every call for tens of milliseconds (58 ms at 8 Play clients
    in `bench.grpc_bench`, 5 ms after this); now it walks only what calls have made since (see
    `gc.freeze`). Returns how many objects are kept out.
    """
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def exit_anyway_after(
    limit_s: float,
    stopped: threading.Event,
    out: Any = None,
    end: Callable[[int], object] = os._exit,
) -> threading.Thread:
    """Start a daemon thread that, if the process is still alive `limit_s` seconds on, writes
    to `out` (stderr) which threads are still running, with their stacks, then ends it with
    `end`: status SUCCESS when `stopped` is set (the server stopped in order; only its exit is
    held), else ERROR. The thread is returned (a test joins it)."""

    def watch() -> None:
        time.sleep(limit_s)
        stream = sys.stderr if out is None else out
        done = stopped.is_set()
        names = ", ".join(
            f"{t.name} (0x{t.ident or 0:x})" for t in threading.enumerate()
            if t is not threading.current_thread()
        )  # fmt: skip
        with suppress(Exception):  # a closed stderr must not keep the process alive either
            stream.write(
                f"{EXIT_HELD} {limit_s:.0f} s after the signal to stop "
                f"({'it stopped in order; its exit is held' if done else 'its stop is held'});"
                f" threads still running: {names}\n"
            )
            stream.flush()
            faulthandler.dump_traceback(file=stream, all_threads=True)
            stream.flush()
        end(ExitStatus.SUCCESS if done else ExitStatus.ERROR)

    thread = Thread(target=watch, name="bergen-exit", daemon=True)
    thread.start()
    return thread


def arm_exit_limits(
    stopped: threading.Event, limit_s: float = SHUTDOWN_LIMIT_S, hard_s: float = HARD_LIMIT_S
) -> None:
    """From now, the process ends within `limit_s` (`exit_anyway_after`), and, should its
    Python code no longer run at all, within `hard_s` (the fault handler's timer); `stopped`
    is set once the server has stopped in order."""
    faulthandler.dump_traceback_later(hard_s, exit=True)
    exit_anyway_after(limit_s, stopped)
