"""The gRPC server on an event loop of its own: `grpc.aio`'s server, run in one thread
(`bergen-loop`), behind the blocking surface the rest of the server uses (ports, start, stop,
the health service's statuses).

Every unary call is a plain function that grpc.aio runs in the server's thread pool, as the
threaded server did; the watch streams are async generators on the loop (`streams.stepped`),
so an open stream holds no thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

import grpc
from grpc_health.v1 import health

from .threads import Thread

_T = TypeVar("_T")

CALL_WAIT_S = 10.0
"""How long a thread waits for the loop to do what it asked (set a health status, say)."""


class LoopServer:
    """A `grpc.aio` server built by `build` on a new event loop in a thread of its own."""

    def __init__(self, build: Callable[[], grpc.aio.Server]) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = Thread(target=self._run, name="bergen-loop", daemon=True)
        self._thread.start()
        self._stopped = threading.Event()
        self._stopping = False
        self.server = self.call(build)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            self._loop.close()

    def call(self, fn: Callable[..., _T], *args: Any) -> _T:
        """`fn(*args)`, run in the loop's thread; what it raises is raised here."""
        done: Future[_T] = Future()

        def run() -> None:
            try:
                done.set_result(fn(*args))
            except BaseException as e:
                done.set_exception(e)

        self._loop.call_soon_threadsafe(run)
        return done.result()

    def run(self, coro: Coroutine[Any, Any, _T], wait_s: float | None = None) -> _T | None:
        """Run `coro` on the loop. From another thread, wait for its result (at most
        `wait_s` seconds, then None); in the loop's own thread, schedule it and return None.
        Nothing is run once the loop has stopped."""
        if self._loop.is_closed() or not self._thread.is_alive():
            coro.close()
            return None
        if threading.current_thread() is self._thread:
            self._loop.create_task(coro)
            return None
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(wait_s)
        except TimeoutError:
            return None

    def add_insecure_port(self, address: str) -> int:
        return self.call(self.server.add_insecure_port, address)

    def add_secure_port(self, address: str, credentials: grpc.ServerCredentials) -> int:
        return self.call(self.server.add_secure_port, address, credentials)

    def start(self) -> None:
        self.run(self.server.start())

    def stop(self, grace: float | None) -> threading.Event:
        """Refuse new calls at once; cancel those still open `grace` seconds on. Returns an
        event set once the server has stopped (then the loop ends)."""
        if self._stopping:
            return self._stopped
        self._stopping = True

        async def stopping() -> None:
            try:
                await self.server.stop(grace)
            finally:
                self._stopped.set()
                self._loop.call_soon(self._loop.stop)

        try:
            asyncio.run_coroutine_threadsafe(stopping(), self._loop)
        except RuntimeError:  # the loop is gone already
            self._stopped.set()
        return self._stopped

    def wait_for_termination(self, timeout: float | None = None) -> bool:
        """Whether the server stopped within `timeout` seconds (None: however long)."""
        return self._stopped.wait(timeout)


class LoopHealth:
    """The health service of a `LoopServer` (grpc.aio's), set from any thread."""

    def __init__(self, server: LoopServer, servicer: health.aio.HealthServicer) -> None:
        self._server = server
        self.servicer = servicer

    def set(self, service: str, status: Any) -> None:
        self._server.run(self.servicer.set(service, status), CALL_WAIT_S)

    def enter_graceful_shutdown(self) -> None:
        self._server.run(self.servicer.enter_graceful_shutdown(), CALL_WAIT_S)
