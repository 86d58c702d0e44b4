"""The server's threads under their own names in the operating system too, so that `top -H`,
`ps -L` and `/proc/<pid>/task/*/comm` tell which part of the server spends the CPU (CPython
3.11 leaves every thread named as the process). A name is cut to the 15 bytes Linux keeps;
elsewhere, or where the name cannot be set, nothing changes."""

from __future__ import annotations

import threading
import time

NAME_MAX = 15
"""Bytes of a thread's name Linux keeps (TASK_COMM_LEN less the NUL)."""
STOP_WAIT_S = 5.0
"""How long a stopping server waits for a background thread of its own at least (they are
daemon threads: a step blocked on the store must not hold the shutdown for ever)."""


def name_native_thread(name: str | None = None) -> bool:
    """Give the calling thread `name` (else its Python name) in the operating system.
    Returns whether it was set."""
    text = threading.current_thread().name if name is None else name
    data = text.encode("ascii", "replace")[:NAME_MAX]
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/comm", "wb") as f:
            f.write(data)
    except (OSError, ValueError):
        return False
    return True


class Thread(threading.Thread):
    """A threading.Thread that names itself in the operating system as it starts."""

    def run(self) -> None:
        name_native_thread(self.name)
        super().run()


def pool_thread_named() -> None:
    """A ThreadPoolExecutor's `initializer`: each of its threads takes its Python name
    (`<thread_name_prefix>_<n>`)."""
    name_native_thread()


def join_until(threads: list[threading.Thread], deadline: float) -> list[threading.Thread]:
    """Wait for `threads` to end, together until `deadline` (time.monotonic()); returns those
    still running then."""
    for t in threads:
        left = deadline - time.monotonic()
        if left > 0 and t.is_alive():
            t.join(timeout=left)
    return [t for t in threads if t.is_alive()]
