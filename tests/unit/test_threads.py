"""The server's threads carry their names in the operating system (`bergen.server.threads`),
so that `top -H` and /proc tell which part of the server spends the CPU."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bergen.server.threads import NAME_MAX, Thread, name_native_thread, pool_thread_named

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/task").is_dir(), reason="thread names are read from /proc (Linux)"
)


def native_name() -> str:
    return Path(f"/proc/self/task/{threading.get_native_id()}/comm").read_text().strip()


def in_thread(thread: threading.Thread, got: list[str]) -> str:
    thread.start()
    thread.join(timeout=10)
    assert got, "the thread did not run"
    return got[0]


def test_a_server_thread_names_itself_as_it_starts() -> None:
    got: list[str] = []
    assert in_thread(Thread(target=lambda: got.append(native_name()), name="bergen-feed"), got) == (
        "bergen-feed"
    )


def test_a_plain_thread_keeps_the_process_name() -> None:
    """What the names are for: without them every thread is named as the process."""
    got: list[str] = []
    process = Path("/proc/self/comm").read_text().strip()
    plain = threading.Thread(target=lambda: got.append(native_name()), name="bergen-feed")
    assert in_thread(plain, got) == process


def test_a_long_name_is_cut_to_what_linux_keeps() -> None:
    got: list[str] = []
    thread = Thread(target=lambda: got.append(native_name()), name="bergen-tournaments")
    assert in_thread(thread, got) == "bergen-tournaments"[:NAME_MAX]


def test_a_name_that_is_not_ascii_is_set_without_failing() -> None:
    got: list[str] = []

    def run() -> None:
        got.append(str(name_native_thread("bergen-\u00e9t\u00e9")))
        got.append(native_name())

    in_thread(threading.Thread(target=run), got)
    assert got == ["True", "bergen-?t?"]


def test_each_pool_thread_takes_its_own_name() -> None:
    with ThreadPoolExecutor(
        max_workers=2, thread_name_prefix="bergen-rpc", initializer=pool_thread_named
    ) as pool:
        barrier = threading.Barrier(2)

        def name() -> str:
            barrier.wait(timeout=10)  # both threads at once: two workers, two names
            return native_name()

        names = sorted(f.result(timeout=10) for f in [pool.submit(name), pool.submit(name)])
    assert names == ["bergen-rpc_0", "bergen-rpc_1"]
