"""The PostgreSQL store's connection pool: at most its size in use, the last returned lent
first, and nothing handed out again that is not idle and whole."""

from __future__ import annotations

import linecache
import sys
import threading
import time
from collections.abc import Iterator

import psycopg
import pytest

from bergen.server.store.postgres import Pool
from bergen.server.store.url import psycopg_conninfo

pytestmark = pytest.mark.postgres


@pytest.fixture
def pool(empty_pg_database: str) -> Iterator[Pool]:
    made = Pool(psycopg_conninfo(empty_pg_database), 2)
    yield made
    made.close()


def _waiting_for_a_slot(thread: threading.Thread) -> bool:
    """Whether `thread` is blocked in the pool's wait for a free slot."""
    frame = sys._current_frames().get(thread.ident or -1)
    while frame is not None:
        line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
        if frame.f_code.co_name == "connection" and line == "self._slots.get()":
            return True
        frame = frame.f_back
    return False


def test_a_third_borrower_waits_until_one_of_two_gives_its_connection_back(pool: Pool) -> None:
    first = pool.connection()
    second = pool.connection()
    a = first.__enter__()
    b = second.__enter__()
    got: list[object] = []

    def borrow() -> None:
        with pool.connection() as conn:
            got.append(conn)

    waiting = threading.Thread(target=borrow)
    waiting.start()
    deadline = time.monotonic() + 60
    while not _waiting_for_a_slot(waiting):
        assert waiting.is_alive(), f"the third borrower did not wait: it got {got}"
        assert time.monotonic() < deadline, "the third borrower never asked for a connection"
        time.sleep(0.01)
    assert got == []  # both slots are taken
    second.__exit__(None, None, None)
    waiting.join(timeout=60)
    assert not waiting.is_alive(), "the third borrower still waits with a slot free"
    assert got == [b]  # the one given back, not a new one
    first.__exit__(None, None, None)
    assert a is not b


def test_the_connection_given_back_last_is_lent_first(pool: Pool) -> None:
    with pool.connection() as a, pool.connection() as b:
        pass
    with pool.connection() as again:
        assert again is a  # a went back after b
    with pool.connection() as c, pool.connection() as d:
        assert {c, d} == {a, b}


def test_a_connection_left_in_a_transaction_is_closed_not_lent_again(pool: Pool) -> None:
    with pool.connection() as left:
        left.execute("BEGIN")
    assert left.closed
    with pool.connection() as fresh:
        assert fresh is not left
        assert fresh.execute("SELECT 1").fetchone() == (1,)


def test_a_broken_connection_takes_the_idle_ones_with_it(pool: Pool) -> None:
    with pool.connection() as idle:
        pass
    with pytest.raises(psycopg.OperationalError), pool.connection() as broken:
        with pool.connection() as killer:
            pid = broken.info.backend_pid
            killer.execute("SELECT pg_terminate_backend(%s)", (pid,))
        broken.execute("SELECT 1")
    assert broken.closed and idle.closed  # the server went away for them all, it is assumed
    with pool.connection() as fresh:
        assert fresh.execute("SELECT 1").fetchone() == (1,)


def test_a_closed_pool_lends_nothing(pool: Pool) -> None:
    pool.close()
    with pytest.raises(RuntimeError, match="closed"), pool.connection():
        pass
