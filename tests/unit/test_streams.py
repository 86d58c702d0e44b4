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
from bergen.server.streams import StepFailed, merged, stepped


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


# merged: many generators on one stream, no task each ----------------------------------------


def byte_watching(
    sub: Subscription, closed: threading.Event, step_s: float = 0.0
) -> Generator[bytes | Subscription, None, None]:
    """`watching` with bytes, as a follow of WatchMatches gives them."""
    for item in watching(sub, closed, step_s):
        yield item if isinstance(item, Subscription) else str(item).encode()


def test_merged_interleaves_each_source_in_its_own_order_after_its_head() -> None:
    async def run() -> list[bytes]:
        loop = asyncio.get_running_loop()
        subs = [Subscription(loop) for _ in range(3)]
        closed = [threading.Event() for _ in subs]
        out: list[bytes] = []
        with ThreadPoolExecutor(2) as pool:

            def feed() -> None:
                for n in range(5):
                    for i, sub in enumerate(subs):
                        time.sleep(0.002)
                        sub.put([f"{i}.{n}"])  # type: ignore[list-item]
                for sub in subs:
                    sub.close()

            threading.Thread(target=feed).start()
            heads = [f"<{i}>".encode() for i in range(3)]
            steps = [byte_watching(s, c) for s, c in zip(subs, closed, strict=True)]
            async for item in merged(heads, steps, pool, room=4):
                out.append(item)
        assert all(c.is_set() for c in closed)
        return out

    out = asyncio.run(run())
    for i in range(3):
        mine = [x.decode() for x in out if x.startswith(f"<{i}>".encode())]
        # Every item once, in order, each after its own head; nothing of another source.
        assert mine == [f"<{i}>view"] + [f"<{i}>{i}.{n}" for n in range(5)], mine
    assert len(out) == 18


def test_merged_ends_with_the_first_error_and_its_index_and_closes_every_source() -> None:
    class Broken(Exception):
        pass

    def failing() -> Generator[bytes | Subscription, None, None]:
        yield b"view"
        raise Broken("its match is gone")

    async def run() -> StepFailed:
        loop = asyncio.get_running_loop()
        sub, closed = Subscription(loop), threading.Event()
        with ThreadPoolExecutor(2) as pool:
            with pytest.raises(StepFailed) as failed:
                async for _ in merged(
                    [b"a", b"b"], [byte_watching(sub, closed), failing()], pool, 8
                ):
                    pass
            # The quiet source, waiting on its subscription, was closed with the stream.
            assert closed.wait(5)
        return failed.value

    failed = asyncio.run(run())
    assert failed.index == 1
    assert isinstance(failed.error, Broken)


def test_merged_holds_sources_back_while_the_client_reads_nothing() -> None:
    made = [0, 0]

    def endless(i: int) -> Generator[bytes | Subscription, None, None]:
        while True:
            made[i] += 1
            yield b"x"

    async def run() -> None:
        with ThreadPoolExecutor(2) as pool:
            stream = merged([b"", b""], [endless(0), endless(1)], pool, room=10)
            await stream.__anext__()
            await asyncio.sleep(0.3)  # the client reads nothing for a while
            # Each source stopped once the room was full: a step or two past it at most.
            assert sum(made) <= 10 + 2 + 1, made
            for _ in range(50):
                await stream.__anext__()
            await stream.aclose()

    asyncio.run(run())


def test_merged_closes_its_sources_when_the_client_goes() -> None:
    async def run() -> None:
        loop = asyncio.get_running_loop()
        subs = [Subscription(loop) for _ in range(2)]
        closed = [threading.Event() for _ in subs]
        with ThreadPoolExecutor(2) as pool:
            stream = merged(
                [b"a", b"b"],
                [byte_watching(s, c, step_s=0.05) for s, c in zip(subs, closed, strict=True)],
                pool,
                8,
            )
            await stream.__anext__()
            subs[0].put(["e"])  # type: ignore[list-item]
            await asyncio.sleep(0.01)  # its step runs in the pool as the client goes
            await stream.aclose()
            # The one whose step was running is closed once that step is back on the loop.
            deadline = time.monotonic() + 5
            while not all(c.is_set() for c in closed) and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            assert all(c.is_set() for c in closed)

    asyncio.run(run())
