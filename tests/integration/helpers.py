"""Small helpers shared by the integration tests."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from bergen.server.store import EventStore, StoredEvent

WORKER = Path(__file__).with_name("store_worker.py")


def start_worker(url: str, mode: str, stream: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), url, mode, stream],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        bufsize=1,
    )


def read_all_until(
    store: EventStore, count: int, after: int = 0, wait_s: float = 30.0
) -> list[StoredEvent]:
    """Follow the global order from `after` until `count` events came, or `wait_s` passed.

    On PostgreSQL a transaction elsewhere in the cluster can hold back what read_all shows for
    a moment; this waits it out (a bound, not a timing assertion: the caller checks the events).
    """
    got: list[StoredEvent] = []
    deadline = time.monotonic() + wait_s
    while len(got) < count and time.monotonic() < deadline:
        page = store.read_all(got[-1].position if got else after)
        got.extend(page)
        if not page:
            time.sleep(0.05)
    return got
