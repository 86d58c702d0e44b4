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
from collections.abc import AsyncIterator, Generator
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
