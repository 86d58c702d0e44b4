"""A database that cannot be reached or written is StorageUnavailable, never a driver error."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from bergen.domain.errors import StorageUnavailable
from bergen.server.projections import MatchListProjection
from bergen.server.store import Append, EventStore, NewEvent, open_store, upgrade_to_head

EVENT = NewEvent("MatchCreated", 1, {"n": 1})


@contextmanager
def read_only(path: Path) -> Iterator[None]:
    """`path` (a file or a folder) read-only for this process for the block: without write
    permission, or immutable (chattr +i) for root, whom permissions do not stop."""
    if os.geteuid() != 0:
        mode = path.stat().st_mode
        path.chmod(mode & ~0o222)
        try:
            yield
        finally:
            path.chmod(mode)
        return
    made = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"running as root and cannot make {path} immutable: {made.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


WRITES: dict[str, Callable[[EventStore], object]] = {
    "append": lambda store: store.append(Append(f"m-{uuid.uuid4()}", 0, [EVENT])),
    "list_matches": lambda store: MatchListProjection(store).page(None, "", 0, ""),
}
READS: dict[str, Callable[[EventStore], object]] = {
    "read_stream": lambda store: store.read_stream("m"),
    "read_rows": lambda store: store.read_rows("m"),
    "read_all": lambda store: store.read_all(),
    "head_position": lambda store: store.head_position(),
    "stream_version": lambda store: store.stream_version("m"),
    "list_streams": lambda store: store.list_streams(),
    "verify_chain": lambda store: store.verify_chain("m"),
}
CALLS = {**READS, **WRITES}


@pytest.fixture
def sqlite_file(tmp_path: Path) -> Path:
    """A migrated SQLite file holding one event, in a folder of its own, closed."""
    folder = tmp_path / "db"
    folder.mkdir()
    path = folder / "bergen.db"
    upgrade_to_head(f"sqlite:///{path}")
    store = open_store(f"sqlite:///{path}")
    store.append(Append("m", 0, [EVENT]))
    store.close()
    return path


@pytest.mark.parametrize("call", WRITES)
def test_writing_a_read_only_sqlite_file_is_storage_unavailable_and_reading_still_works(
    sqlite_file: Path, call: str
) -> None:
    with read_only(sqlite_file):
        store = open_store(f"sqlite:///{sqlite_file}")
        try:
            with pytest.raises(StorageUnavailable, match="read-only") as raised:
                WRITES[call](store)
            assert raised.value.status == "UNAVAILABLE"
            assert store.stream_version("m") == 1
        finally:
            store.close()


@pytest.mark.parametrize("call", CALLS)
def test_a_sqlite_file_in_a_read_only_folder_is_storage_unavailable_for_every_call(
    sqlite_file: Path, call: str
) -> None:
    # WAL needs files beside the database; with none there and none creatable, nothing works.
    assert sorted(p.name for p in sqlite_file.parent.iterdir()) == ["bergen.db"]
    with read_only(sqlite_file.parent):
        store = open_store(f"sqlite:///{sqlite_file}")
        try:
            with pytest.raises(StorageUnavailable):
                CALLS[call](store)
        finally:
            store.close()


def test_a_sqlite_file_that_cannot_be_opened_is_storage_unavailable(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'missing' / 'bergen.db'}")
    try:
        with pytest.raises(StorageUnavailable, match="cannot be opened"):
            store.stream_version("m")
    finally:
        store.close()


def test_a_postgresql_server_that_does_not_answer_is_storage_unavailable() -> None:
    with (
        socket_closed() as port,
        pytest.raises(StorageUnavailable, match="cannot be reached") as raised,
    ):
        open_store(f"postgresql://postgres@127.0.0.1:{port}/bergen?connect_timeout=3")
    assert isinstance(raised.value.__cause__, psycopg.OperationalError)


@contextmanager
def socket_closed() -> Iterator[int]:
    """A local port nothing listens on (bound then closed)."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    yield port


def _terminate_others(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.postgres
@pytest.mark.parametrize("call", CALLS)
def test_a_terminated_postgresql_connection_is_storage_unavailable_and_the_next_call_works(
    pg_database: str, call: str
) -> None:
    store = open_store(pg_database)
    try:
        store.append(Append("m", 0, [EVENT]))
        CALLS[call](store)  # leaves a pooled connection to terminate
        assert _terminate_others(pg_database) >= 1
        with pytest.raises(StorageUnavailable, match=r"restarted|reached"):
            CALLS[call](store)
        CALLS[call](store)  # on a new connection
    finally:
        store.close()
