"""A watch stream on the event loop (`bergen.server.streams`): its generator steps in a pool,
its waits are awaited on the loop, and it is closed when its coroutine is cancelled."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Generator
from concurrent.futures import ThreadPoolExecutor

import pytest

from bergen.server.feed import Subscription
from bergen.server.streams import stepped


def watching(
    sub: Subscription, closed: threading.Event, step_s: float = 0.0
) -> Generator[object, None, None]:
    """A stream as `MatchQueries.watch` is one: items, and its subscription where it waits."""
    try:
        yield "view"
        while True:
            if not (yield from sub.waiting(lambda: True)):
                return
            time.sleep(step_s)  # a read of the store, say: in the pool, never on the loop
            yield from sub.take()
    finally:
        closed.set()


def test_a_waiting_stream_is_woken_from_another_thread_and_ends_when_closed() -> None:
    async def run() -> list[object]:
        loop = asyncio.get_running_loop()
        sub, closed = Subscription(loop), threading.Event()
        out: list[object] = []
        with ThreadPoolExecutor(2) as pool:

            def feed() -> None:
                time.sleep(0.05)
                sub.put(["e1", "e2"])  # type: ignore[list-item]
                time.sleep(0.05)
                sub.close()

            threading.Thread(target=feed).start()
            async for item in stepped(watching(sub, closed), pool):
                out.append(item)
        assert closed.is_set()
        return out

    assert asyncio.run(run()) == ["view", "e1", "e2"]


def test_a_cancelled_stream_closes_its_generator_once_its_step_returns() -> None:
    async def run() -> None:
        loop = asyncio.get_running_loop()
        sub, closed = Subscription(loop), threading.Event()
        with ThreadPoolExecutor(2) as pool:

            async def consume() -> None:
                async for _ in stepped(watching(sub, closed, step_s=0.3), pool):
                    pass

            task = asyncio.create_task(consume())
            await asyncio.sleep(0.05)
            sub.put(["e"])  # type: ignore[list-item]
            await asyncio.sleep(0.05)  # its step is running in the pool now
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert not closed.is_set()  # a running generator cannot be closed...
            await asyncio.to_thread(closed.wait, 5)
            assert closed.is_set()  # ...but it is, once its step has returned

    asyncio.run(run())


def test_one_slow_stream_holds_up_no_other() -> None:
    async def run() -> float:
        loop = asyncio.get_running_loop()
        slow, fast = Subscription(loop), Subscription(loop)
        with ThreadPoolExecutor(4) as pool:
            started = time.monotonic()

            async def first_two(sub: Subscription, step_s: float) -> float:
                got = 0
                async for _ in stepped(watching(sub, threading.Event(), step_s), pool):
                    got += 1
                    if got == 2:
                        return time.monotonic() - started
                raise AssertionError("the stream ended")

            both = asyncio.gather(first_two(slow, 2.0), first_two(fast, 0.0))
            slow.put(["s"])  # type: ignore[list-item]
            fast.put(["f"])  # type: ignore[list-item]
            slow_s, fast_s = await both
        assert slow_s >= 2.0
        return float(fast_s)

    assert asyncio.run(run()) < 1.0
