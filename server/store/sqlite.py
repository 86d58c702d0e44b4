"""The embedded SQLite event store: stdlib sqlite3, WAL, one writer at a time (BEGIN IMMEDIATE).

Under the database's write lock the stream's head, the command id and the next global position
are read and the batch inserted, so positions are assigned in commit order.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from bergen.api.chain import event_rows, parse_metadata, verify_rows
from bergen.api.stored import GENESIS_HASH, ChainReport, EventMetadata, EventRow, StoredEvent
from bergen.domain.errors import ConcurrencyConflict, CorruptRecord, NotFound
from bergen.domain.rules import RULES_VERSION

from .batch import build_rows, check_append, stored
from .model import AppendResult, NewEvent, StreamInfo
from .url import sqlite_path

_COLUMNS = (
    "stream_id, seq, position, type, schema_version, payload, metadata,"
    " recorded_at, prev_hash, hash, salt"
)
_INSERT = (
    "INSERT INTO events (stream_id, seq, position, type, schema_version, payload, metadata,"
    " command_id, prev_hash, hash, salt, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _event(row: tuple[Any, ...]) -> StoredEvent:
    """The StoredEvent of a selected row. Raises CorruptRecord if it cannot be decoded."""
    try:
        return StoredEvent(
            stream_id=row[0],
            seq=row[1],
            position=row[2],
            type=row[3],
            schema_version=row[4],
            payload=json.loads(row[5]),
            metadata=parse_metadata(row[6]),
            recorded_at=datetime.fromisoformat(row[7]),
            prev_hash=bytes(row[8]),
            hash=bytes(row[9]),
            salt=bytes(row[10]),
        )
    except (ValueError, KeyError, TypeError) as e:
        raise CorruptRecord(f"stream {row[0]} seq {row[1]}: undecodable event row: {e!r}") from e


class SQLiteEventStore:
    """The event store in one SQLite file (schema from the migrations in bergen.migrations).

    Each thread gets its own connection; separate processes may share the file.
    """

    def __init__(self, url: str, *, busy_timeout_s: float = 30.0) -> None:
        """Remember the file of `url`; connections open on first use.

        Raises ValueError for a URL that is not `sqlite:///path`.
        """
        self._path = sqlite_path(url)
        self._timeout = busy_timeout_s
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        if self._closed:
            raise RuntimeError("the event store is closed")
        conn = sqlite3.connect(
            self._path, timeout=self._timeout, isolation_level=None, check_same_thread=False
        )
        try:
            self._configure(conn)
        except BaseException:
            conn.close()
            raise
        self._local.conn = conn
        with self._lock:
            self._all.append(conn)
        return conn

    def _configure(self, conn: sqlite3.Connection) -> None:
        """Put a new connection in WAL mode with FULL sync, waiting out other processes' locks.

        Switching to (or confirming) WAL can report "database is locked" at once, without
        SQLite's busy handler, while another process opens or recovers the same file; such a
        refusal is retried until the busy timeout.
        """
        deadline = time.monotonic() + self._timeout
        delay = 0.001
        while True:
            try:
                mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
                break
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or time.monotonic() >= deadline:
                    raise
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        if str(mode).lower() != "wal":
            raise sqlite3.OperationalError(f"{self._path}: cannot use WAL (journal mode {mode})")
        # FULL: an acknowledged append survives a power loss, not only a crash of the process.
        conn.execute("PRAGMA synchronous=FULL")

    def close(self) -> None:
        """Close every connection this store opened."""
        with self._lock:
            self._closed = True
            for conn in self._all:
                conn.close()
            self._all.clear()

    def append(
        self,
        stream_id: str,
        expected_version: int,
        events: Sequence[NewEvent],
        *,
        command_id: str | None = None,
        actor: str | None = None,
        rules_version: str = RULES_VERSION,
        extra: Mapping[str, str] | None = None,
    ) -> AppendResult:
        """Append `events` atomically after seq `expected_version` (0 for a new stream).

        Raises ConcurrencyConflict when the stream is elsewhere, ValueError for bad arguments,
        sqlite3.OperationalError when the write lock is not had within the busy timeout.
        A command id appended before returns the first result, marked `replayed`.
        """
        check_append(stream_id, expected_version, events, command_id)
        metadata = EventMetadata(actor, command_id, rules_version, dict(extra or {}))
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            if command_id is not None:
                replay = self._replay(conn, stream_id, command_id)
                if replay is not None:
                    conn.execute("ROLLBACK")
                    return replay
            head = conn.execute(
                "SELECT seq, hash FROM events WHERE stream_id = ? ORDER BY seq DESC LIMIT 1",
                (stream_id,),
            ).fetchone()
            actual, prev = (0, GENESIS_HASH) if head is None else (head[0], bytes(head[1]))
            if actual != expected_version:
                raise ConcurrencyConflict(
                    f"stream {stream_id}: expected version {expected_version}, actual {actual}"
                )
            rows = build_rows(stream_id, expected_version, events, metadata, prev)
            (last_position,) = conn.execute(
                "SELECT coalesce(max(position), 0) FROM events"
            ).fetchone()
            recorded_at = datetime.now(UTC)
            at = recorded_at.isoformat(sep=" ")
            conn.executemany(
                _INSERT,
                [
                    (
                        stream_id,
                        r.seq,
                        last_position + 1 + i,
                        r.event.type,
                        r.event.schema_version,
                        r.payload_json,
                        r.metadata_json,
                        r.command_id,
                        r.prev_hash,
                        r.hash,
                        r.salt,
                        at,
                    )
                    for i, r in enumerate(rows)
                ],
            )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return AppendResult(
            stream_id,
            tuple(
                stored(stream_id, r, last_position + 1 + i, recorded_at, metadata)
                for i, r in enumerate(rows)
            ),
        )

    @staticmethod
    def _replay(conn: sqlite3.Connection, stream_id: str, command_id: str) -> AppendResult | None:
        head = conn.execute(
            "SELECT seq FROM events WHERE stream_id = ? AND command_id = ?",
            (stream_id, command_id),
        ).fetchone()
        if head is None:
            return None
        batch: list[StoredEvent] = []
        for row in conn.execute(
            f"SELECT {_COLUMNS} FROM events WHERE stream_id = ? AND seq >= ? ORDER BY seq",
            (stream_id, head[0]),
        ):
            event = _event(row)
            if event.metadata.command_id != command_id:
                break
            batch.append(event)
        return AppendResult(stream_id, tuple(batch), replayed=True)

    def read_stream(self, stream_id: str, from_seq: int = 1) -> tuple[StoredEvent, ...]:
        """The stream's events from `from_seq` in seq order (empty for an unknown stream)."""
        rows = (
            self._conn()
            .execute(
                f"SELECT {_COLUMNS} FROM events WHERE stream_id = ? AND seq >= ? ORDER BY seq",
                (stream_id, from_seq),
            )
            .fetchall()
        )
        return tuple(_event(r) for r in rows)

    def read_rows(self, stream_id: str, from_seq: int = 1) -> tuple[EventRow, ...]:
        """What `read_stream` gives, less the chain fields, for folding (faster)."""
        rows = (
            self._conn()
            .execute(
                "SELECT seq, type, schema_version, payload, metadata FROM events"
                " WHERE stream_id = ? AND seq >= ? ORDER BY seq",
                (stream_id, from_seq),
            )
            .fetchall()
        )
        return event_rows(stream_id, rows)

    def read_all(self, after_position: int = 0, limit: int = 1000) -> tuple[StoredEvent, ...]:
        """Up to `limit` events after the one at `after_position`, in global order.

        Positions are assigned under the write lock, so they follow commit order. Raises
        NotFound for an unknown `after_position`.
        """
        conn = self._conn()
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM events WHERE position > ? ORDER BY position LIMIT ?",
            (after_position, limit),
        ).fetchall()
        if (
            not rows
            and after_position != 0
            and conn.execute(
                "SELECT 1 FROM events WHERE position = ?", (after_position,)
            ).fetchone()
            is None
        ):
            raise NotFound(f"no event at global position {after_position}")
        return tuple(_event(r) for r in rows)

    def stream_version(self, stream_id: str) -> int:
        """The stream's last seq, 0 for a stream with no event."""
        (version,) = (
            self._conn()
            .execute("SELECT coalesce(max(seq), 0) FROM events WHERE stream_id = ?", (stream_id,))
            .fetchone()
        )
        return int(version)

    def list_streams(self, after: str | None = None, limit: int = 100) -> tuple[StreamInfo, ...]:
        """Up to `limit` streams and their versions, by stream id (bytewise), after `after`."""
        rows = (
            self._conn()
            .execute(
                "SELECT stream_id, max(seq) FROM events WHERE stream_id > ?"
                " GROUP BY stream_id ORDER BY stream_id LIMIT ?",
                (after or "", limit),
            )
            .fetchall()
        )
        return tuple(StreamInfo(r[0], int(r[1])) for r in rows)

    def verify_chain(self, stream_id: str) -> ChainReport:
        """Re-walk the stream's hash chain; the report names the first bad seq and why."""
        rows = (
            self._conn()
            .execute(
                f"SELECT {_COLUMNS} FROM events WHERE stream_id = ? ORDER BY seq", (stream_id,)
            )
            .fetchall()
        )
        return verify_rows(stream_id, rows, _event)
