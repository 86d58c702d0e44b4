"""Serving a watch stream on the event loop, without a thread of its own.

A stream is written as a plain generator (`MatchQueries.watch`, `TournamentViews.watch`, the
servicer's translation around them): each step between two of its items may block (the first
view is read from the store, a gap in the events is read again), so `stepped` runs each step
in a pool's thread, and hands the item to the stream's coroutine. Where the generator would
wait for events it yields its `Subscription` instead, and the coroutine awaits it on the loop:
an open stream that waits holds no thread, only its coroutine, its generator and its
subscription.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Generator, Sequence
from concurrent.futures import Executor, Future
from typing import TypeVar

from .feed import Subscription

_T = TypeVar("_T")
_DONE = object()


def _step(steps: Generator[_T | Subscription, None, None]) -> object:
    return next(steps, _DONE)


async def stepped(
    steps: Generator[_T | Subscription, None, None], pool: Executor
) -> AsyncIterator[_T]:
    """The items of `steps`, each step run in `pool`, its waits awaited here. What a step
    raises is raised here. When the stream ends early (its client went, the server is
    stopping: the coroutine is cancelled), `steps` is closed, which runs its `finally` (the
    subscription is given up) once a step still running in the pool has returned."""
    running: Future[object] | None = None
    try:
        while True:
            running = pool.submit(_step, steps)
            item = await asyncio.wrap_future(running)
            running = None
            if item is _DONE:
                return
            if isinstance(item, Subscription):
                await item.ready()
                continue
            yield item  # type: ignore[misc]
    finally:
        if running is None:
            steps.close()
        else:
            # A generator cannot be closed while a thread runs it: once its step returns.
            running.add_done_callback(lambda _: steps.close())


_Steps = Generator[bytes | Subscription, None, None]


class StepFailed(Exception):
    """What ended a `merged` stream: `error`, raised by the step generator at `index`."""

    def __init__(self, index: int, error: Exception) -> None:
        super().__init__(index, error)
        self.index = index
        self.error = error


class _Source:
    """One generator of a `merged` stream: no task and no coroutine of its own, only what
    its next step needs."""

    __slots__ = ("head", "index", "running", "steps")

    def __init__(
        self, index: int, head: bytes, steps: Generator[bytes | Subscription, None, None]
    ) -> None:
        self.index = index
        self.head = head
        self.steps = steps
        self.running: Future[object] | None = None


class _Merge:
    """The state of one `merged` stream, on its loop."""

    def __init__(self, pool: Executor, loop: asyncio.AbstractEventLoop, room: int) -> None:
        self.pool = pool
        self.loop = loop
        self.room = room
        self.out: deque[bytes] = deque()
        self.paused: deque[_Source] = deque()
        self.left = 0
        self.failed: StepFailed | Exception | None = None
        self.closed = False
        self.wake: asyncio.Future[None] | None = None

    def step(self, source: _Source) -> None:
        """Run `source`'s next step in the pool; its outcome comes back on the loop."""
        if self.closed:
            source.steps.close()
            return
        running = source.running = self.pool.submit(_step, source.steps)
        running.add_done_callback(lambda done: self.back(source, done))

    def back(self, source: _Source, done: Future[object]) -> None:
        """In the pool's thread, a step done: its outcome to the loop."""
        try:
            self.loop.call_soon_threadsafe(self.stepped, source, done)
        except RuntimeError:  # the loop is closed, and the stream with it
            source.steps.close()

    def stepped(self, source: _Source, done: Future[object]) -> None:
        source.running = None
        if self.closed:
            source.steps.close()
            return
        try:
            item = done.result()
        except Exception as e:
            self.fail(StepFailed(source.index, e))
            return
        if item is _DONE:
            self.left -= 1
            self.woken()
        elif isinstance(item, Subscription):
            item.when_ready(lambda: self.step(source))
        else:
            self.out.append(source.head + item)  # type: ignore[operator]
            self.woken()
            if len(self.out) < self.room:
                self.step(source)
            else:
                self.paused.append(source)

    def fail(self, error: StepFailed | Exception) -> None:
        if self.failed is None:
            self.failed = error
        self.woken()

    def woken(self) -> None:
        wake, self.wake = self.wake, None
        if wake is not None and not wake.done():
            wake.set_result(None)

    def close(self, sources: Sequence[_Source]) -> None:
        """Close every generator: at once, or once the step it is running has returned."""
        self.closed = True
        for source in sources:
            if source.running is None:
                source.steps.close()
            # else `stepped` closes it when the step comes back


async def merged(
    heads: Sequence[bytes],
    steps: Sequence[_Steps],
    pool: Executor,
    room: int,
) -> AsyncIterator[bytes]:
    """The items of every generator of `steps`, each after its own `heads` entry, in the order
    each gives them (the generators' items interleaved as they come), until every one has
    ended. As `stepped`, each step runs in `pool` and each wait is awaited on the loop, but a
    generator here has no task or coroutine of its own: a stream of many costs little more
    than its generators. At most about `room` items wait for the client; a generator that has
    one ready past that waits too. The first that raises ends the stream (what is ready and not
    yet given is dropped): StepFailed, with its index. When the stream ends, however it ends,
    every generator is closed."""
    merge = _Merge(pool, asyncio.get_running_loop(), room)
    sources = [_Source(i, head, s) for i, (head, s) in enumerate(zip(heads, steps, strict=True))]
    merge.left = len(sources)
    try:
        for source in sources:
            merge.step(source)
        while True:
            if merge.failed is not None:
                raise merge.failed
            if merge.out:
                yield merge.out.popleft()
                while merge.paused and len(merge.out) < merge.room:
                    merge.step(merge.paused.popleft())
                continue
            if merge.left == 0:
                return
            merge.wake = merge.loop.create_future()
            await merge.wake
    finally:
        merge.close(sources)
