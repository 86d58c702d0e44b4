"""A background worker of the server: one thread that sleeps until it is woken, its next
moment comes, or the server stops (the clock keeper, the tournament manager, the janitor)."""

from __future__ import annotations

import threading
import time

from .threads import STOP_WAIT_S, Thread, join_until


class Worker:
    """A daemon thread running `_run`, which waits on `_wake` and ends once `_stop` is set.
    `stop` waits for it at most `STOP_WAIT_S`: a step blocked on the store must not hold the
    server's shutdown for ever. A server stopping several asks each first (`ask_to_stop`), then
    waits for them together (`wait_stopped`)."""

    STOP_WAIT_S = STOP_WAIT_S

    def __init__(self, name: str) -> None:
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.ask_to_stop()
        self.wait_stopped(time.monotonic() + self.STOP_WAIT_S)

    def ask_to_stop(self) -> None:
        """Have the thread end after its current step, without waiting for it."""
        self._stop.set()
        self._wake.set()

    def wait_stopped(self, deadline: float) -> bool:
        """Wait for the thread to end until `deadline` (time.monotonic()); whether it has."""
        return not join_until([self._thread], deadline)

    def wake(self) -> None:
        """Look now (new events came, or a clock was set forward in a test)."""
        self._wake.set()

    def _run(self) -> None:
        raise NotImplementedError
