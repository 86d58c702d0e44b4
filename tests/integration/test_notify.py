"""Replicas wake each other with PostgreSQL NOTIFY: paced, and never losing the last wake-up."""

from __future__ import annotations

import threading
import time
import uuid

import psycopg
import pytest

from bergen.server.feed import NOTIFY_CHANNEL, PostgresNotifier, postgres_listener
from bergen.server.store.url import psycopg_conninfo

pytestmark = pytest.mark.postgres


WAIT_S = 60.0
"""The deadline of a wait for a notification that must come."""


def _notes_until(
    conn: psycopg.Connection[tuple[object, ...]], after: float, quiet: float
) -> list[float]:
    """Arrival times of notifications until one has come at `after` (time.monotonic()) or
    later, and none since for `quiet` seconds. Raises AssertionError when none comes after
    `after` within WAIT_S."""
    times: list[float] = []
    deadline = time.monotonic() + WAIT_S
    while True:
        waiting = not times or times[-1] < after
        wait = max(0.0, deadline - time.monotonic()) if waiting else quiet
        got = list(conn.notifies(timeout=wait, stop_after=1))
        if not got:
            assert not waiting, f"no notification within {WAIT_S:g} s of the last poke"
            return times
        times.append(time.monotonic())


def test_a_burst_of_appends_shares_paced_notifications_and_the_last_is_never_lost(
    pg_database: str,
) -> None:
    conninfo = psycopg_conninfo(pg_database)
    interval = 0.2
    notifier = PostgresNotifier(conninfo, "replica-a", min_interval=interval)
    with psycopg.connect(conninfo, autocommit=True) as listener:
        listener.execute(f"LISTEN {NOTIFY_CHANNEL}")
        notifier.start()
        try:
            start = time.monotonic()
            for _ in range(60):
                notifier.poke()
                time.sleep(0.01)
            last_poke = time.monotonic()
            arrivals = _notes_until(listener, last_poke, quiet=3 * interval + 1.0)
        finally:
            notifier.stop()
    elapsed = last_poke - start
    assert arrivals, "no notification at all"
    # Paced: at most one per interval (plus the one sent at once and the one after the burst).
    assert len(arrivals) <= elapsed / interval + 2, (len(arrivals), elapsed)
    assert len(arrivals) < 60
    # The appends of the burst's end are announced: a notification follows the last poke.
    assert arrivals[-1] >= last_poke


def test_a_listener_wakes_for_other_replicas_only(pg_database: str) -> None:
    conninfo = psycopg_conninfo(pg_database)
    stop = threading.Event()
    wakes: list[float] = []
    lags: list[float] = []  # told right after the wake-up of the same notification
    listen = postgres_listener(conninfo, "me", lags.append)
    thread = threading.Thread(target=listen, args=(lambda: wakes.append(1.0), stop), daemon=True)
    thread.start()
    try:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            deadline = time.monotonic() + WAIT_S
            # Wait until the listener's LISTEN is in place, announcing ourselves as "me".
            while True:
                n = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND query LIKE %s",
                    (f"LISTEN {NOTIFY_CHANNEL}%",),
                ).fetchone()
                if n and n[0]:
                    break
                assert time.monotonic() < deadline, "the listener's LISTEN never ran"
                time.sleep(0.05)
            conn.execute("SELECT pg_notify(%s, %s)", (NOTIFY_CHANNEL, "me"))
            # Another replica's, sent an hour ago: the listener takes notifications in the
            # order sent, so once this one's lag is told, "me" has been taken before it.
            hour_ago = time.time_ns() // 1_000_000 - 3_600_000
            conn.execute(
                "SELECT pg_notify(%s, %s)", (NOTIFY_CHANNEL, f"{uuid.uuid4().hex} {hour_ago}")
            )
            deadline = time.monotonic() + WAIT_S
            while not lags:
                assert time.monotonic() < deadline, "the other replica's notification woke nothing"
                time.sleep(0.02)
            assert wakes == [1.0]  # "me" woke nothing
            assert lags[0] >= 3600
    finally:
        stop.set()
        thread.join(timeout=5)
