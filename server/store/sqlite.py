"""The embedded SQLite event store: stdlib sqlite3, WAL, one writer at a time (BEGIN IMMEDIATE).

Under the database's write lock the stream's head, the command id and the next global position
are read and the batch inserted, so positions are assigned in commit order.
"""

from __future__ import annotations

import functools
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from bergen.api.chain import event_rows, micros, parse_metadata, verify_rows
from bergen.api.stored import GENESIS_HASH, ChainReport, EventRow, StoredEvent
from bergen.domain.errors import ConcurrencyConflict, CorruptRecord, NotFound

from ..keys import LogKeys
from .authenticity import ReadEvent, check_report, check_rows, read_event
from .batch import Heads, build_rows, check_append, stored
from .faults import guard, unavailable
from .listing import (
    FoldTransaction,
    MatchSummary,
    page_summary,
    player_rows,
    position_fault,
    sealed_position,
    summary_of,
    summary_params,
)
from .model import Append, AppendResult, StreamInfo
from .packed import PackedEvent, pack_events, parse_page
from .ratings import Db, SqlRatings
from .records import SqlRecords
from .sealed import Seals, seals_of
from .statements import NO_LIMIT, SQLITE, Dialect, Statements
from .tlog import SqlTlog
from .url import sqlite_path

_SQL = Statements(SQLITE)
_COLUMNS = _SQL.event_columns
_INSERT = (
    "INSERT INTO events (stream_id, seq, position, type, schema_version, payload, metadata,"
    " command_id, prev_hash, hash, salt, recorded_at, key_id, mac)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

_HEAD = (
    "SELECT h.seq, h.hash, (SELECT coalesce(max(position), 0) FROM events) FROM (SELECT 1)"
    " LEFT JOIN (SELECT seq, hash FROM events WHERE stream_id = ? ORDER BY seq DESC LIMIT 1) h"
)
"""Under the write lock: the stream's last seq and hash (NULLs for a new stream) and the last
global position."""

_CHUNK = 500
"""Ids per `IN (...)`: below every SQLite build's limit on bound parameters."""


def _fault(e: BaseException) -> str | None:
    """What a storage fault is, in a few words; None for any other error."""
    if not isinstance(e, sqlite3.OperationalError):
        return None
    text = str(e).lower()
    if "readonly" in text or "read-only" in text:
        return "the database file is read-only"
    if "full" in text:
        return "the disk is full"
    if "locked" in text or "busy" in text:
        return "the database is busy"
    if "unable to open" in text:
        return "the database file cannot be opened"
    if "disk i/o" in text:
        return "the disk cannot be read or written"
    return "the database cannot be used"


_guarded = guard(_fault)


def _event(row: tuple[Any, ...]) -> StoredEvent:
    """The StoredEvent of a selected row. Raises CorruptRecord, naming its stream, seq and
    position (so that a reader of the global order can pass over it), if it cannot be
    decoded."""
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
            key_id=row[11],
            mac=None if row[12] is None else bytes(row[12]),
        )
    except (ValueError, KeyError, TypeError) as e:
        raise CorruptRecord(
            f"stream {row[0]} seq {row[1]}: undecodable event row: {e!r}",
            match_id=row[0], seq=row[1], position=row[2],
        ) from e  # fmt: skip


def _read_sqlite_event(row: tuple[Any, ...]) -> ReadEvent:
    return read_event(row, datetime.fromisoformat)


@functools.lru_cache(maxsize=4096)
def _recorded_us(text: str) -> int:
    """recorded_at's text as microseconds (remembered: a batch's rows share one time)."""
    try:
        return micros(datetime.fromisoformat(text))
    except (TypeError, ValueError):
        return -1  # no authenticator covers a time that is not one


class SQLiteEventStore:
    """The event store in one SQLite file (schema from the migrations in bergen.migrations).

    Each thread gets its own connection; separate processes may share the file.
    """

    def __init__(
        self, url: str, *, busy_timeout_s: float = 30.0, log_keys: LogKeys | None = None
    ) -> None:
        """Remember the file of `url`; connections open on first use. With `log_keys`, every
        row written is authenticated and every row read for folding is checked.

        Raises ValueError for a URL that is not `sqlite:///path`.
        """
        self._keys = log_keys
        self._heads = Heads(100_000)
        self._path = sqlite_path(url)
        self._timeout = busy_timeout_s
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        seals = seals_of(log_keys)
        self._match_list = SQLiteMatchList(self._conn, seals)
        self._ratings = SqlRatings(self._reading, self._locked, seals)
        self._tlog = SqlTlog(self._reading, self._locked)
        self._records = SqlRecords(self._reading, seals)

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

    @_guarded
    def append(self, batch: Append) -> AppendResult:
        """Append the batch's events atomically after its expected version.

        Raises ConcurrencyConflict when the stream is elsewhere, ValueError for bad arguments,
        StorageUnavailable (as every method here) when the file cannot be read or written, or
        the write lock is not had within the busy timeout.
        A command id appended before returns the first result, marked `replayed`.
        """
        check_append(batch)
        stream_id, expected_version, command_id = (
            batch.stream_id,
            batch.expected_version,
            batch.command_id,
        )
        events, metadata = batch.events, batch.metadata
        conn = self._conn()
        recorded_at = datetime.now(UTC)
        writing = None if self._keys is None else (self._keys.writing, self._keys.writing_key)
        # The rows are built before taking the write lock when this process knows the hash
        # they link to (the head it last wrote or read): other writers wait less. Under the
        # lock the stored head is compared with it, and the rows built again if it differs.
        prev = (
            GENESIS_HASH
            if expected_version == 0
            else self._heads.hash_at(stream_id, expected_version)
        )
        rows = (
            None
            if prev is None
            else build_rows(
                stream_id, expected_version, events, metadata, prev, recorded_at, writing
            )
        )
        at = recorded_at.isoformat(sep=" ")
        conn.execute("BEGIN IMMEDIATE")
        try:
            if command_id is not None:
                replay = self._replay(conn, stream_id, command_id)
                if replay is not None:
                    conn.execute("ROLLBACK")
                    return replay
            # The stream's head and the last global position, in one statement.
            head_seq, head_hash, last_position = conn.execute(_HEAD, (stream_id,)).fetchone()
            actual, stored_prev = (
                (0, GENESIS_HASH) if head_seq is None else (head_seq, bytes(head_hash))
            )
            if actual != expected_version:
                raise ConcurrencyConflict(
                    f"stream {stream_id}: expected version {expected_version}, actual {actual}"
                )
            if rows is None or stored_prev != prev:
                rows = build_rows(
                    stream_id, expected_version, events, metadata, stored_prev, recorded_at, writing
                )
            params = [
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
                    r.key_id,
                    r.mac,
                )
                for i, r in enumerate(rows)
            ]
            if len(params) == 1:
                conn.execute(_INSERT, params[0])
            else:
                conn.executemany(_INSERT, params)
            conn.execute("COMMIT")
            self._heads.learn(stream_id, rows[-1].seq, rows[-1].hash)
        except sqlite3.IntegrityError as e:
            # Under the write lock, with the version checked, no race breaks a constraint:
            # the table holds a row that should not be there.
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise CorruptRecord(
                f"stream {stream_id}: the append broke a constraint ({e}), not a version conflict",
                reason="UNIQUE_VIOLATION",
            ) from e
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
            _SQL.command_head,
            (stream_id, command_id),
        ).fetchone()
        if head is None:
            return None
        batch: list[StoredEvent] = []
        for row in conn.execute(
            _SQL.stream_from,
            (stream_id, head[0]),
        ):
            event = _event(row)
            if event.metadata.command_id != command_id:
                break
            batch.append(event)
        return AppendResult(stream_id, tuple(batch), replayed=True)

    @_guarded
    def read_stream(
        self, stream_id: str, from_seq: int = 1, limit: int | None = None
    ) -> tuple[StoredEvent, ...]:
        """The stream's events from `from_seq` in seq order, at most `limit` (empty for an
        unknown stream)."""
        rows = (
            self._conn()
            .execute(
                _SQL.stream_page,
                (stream_id, from_seq, -1 if limit is None else limit),
            )
            .fetchall()
        )
        return tuple(_event(r) for r in rows)

    @_guarded
    def key_ids(self, stream_id: str, upto_seq: int) -> frozenset[str]:
        """The ids of the log keys that authenticate the stream's rows up to `upto_seq`."""
        rows = (
            self._conn()
            .execute(
                "SELECT DISTINCT key_id FROM events WHERE stream_id = ? AND seq <= ?"
                " AND key_id IS NOT NULL",
                (stream_id, upto_seq),
            )
            .fetchall()
        )
        return frozenset(str(r[0]) for r in rows)

    @_guarded
    def read_rows(self, stream_id: str, from_seq: int = 1) -> tuple[EventRow, ...]:
        """What `read_stream` gives, less the chain fields, for folding (faster). With log
        keys, every row's authenticator and chain link are checked first (from the row before
        `from_seq`): raises LogTampered naming the first row that fails."""
        if self._keys is not None:
            return self._authentic_rows(self._keys, stream_id, from_seq)
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

    def _authentic_rows(self, keys: LogKeys, stream_id: str, from_seq: int) -> tuple[EventRow, ...]:
        start = max(from_seq - 1, 1)
        rows = (
            self._conn()
            .execute(
                "SELECT seq, type, schema_version, payload, metadata, recorded_at, prev_hash,"
                " hash, salt, key_id, mac FROM events WHERE stream_id = ? AND seq >= ?"
                " ORDER BY seq",
                (stream_id, start),
            )
            .fetchall()
        )
        if start < from_seq:
            if not rows:
                return ()  # the stream ends before from_seq - 1: nothing follows it
            check_rows(stream_id, rows, keys.key, None, _recorded_us, first_seq=start)
            rows = rows[1:]
        else:
            check_rows(stream_id, rows, keys.key, GENESIS_HASH, _recorded_us)
        if rows:
            self._heads.learn(stream_id, rows[-1][0], bytes(rows[-1][7]))
        return event_rows(stream_id, rows)

    @_guarded
    def read_all(
        self, after_position: int = 0, limit: int = 1000, types: Collection[str] | None = None
    ) -> tuple[StoredEvent, ...]:
        """Up to `limit` events after the one at `after_position`, in global order (`types`:
        only those of these types, and the last one).

        Positions are assigned under the write lock, so they follow commit order. Raises
        NotFound for an unknown `after_position`.
        """
        conn = self._conn()
        of_types = ""
        wanted: list[str] = []
        if types is not None:
            wanted = sorted(types)
            of_types = (
                f" AND (type IN ({', '.join('?' * len(wanted))})"
                " OR position = (SELECT max(position) FROM events))"
            )
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM events WHERE position > ?{of_types} ORDER BY position LIMIT ?",
            (after_position, *wanted, limit),
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
        return tuple(map(_read_sqlite_event, rows))

    def read_all_packed(
        self, after_position: int, limit: int, types: Collection[str]
    ) -> tuple[PackedEvent, ...]:
        """`read_all` of `types`, packed and parsed as PostgreSQL's packed page is (here the
        rows are packed in Python: the same rows, no faster). Raises NotFound for an unknown
        `after_position`, CorruptRecord for a row that does not decode."""
        return parse_page(pack_events(self.read_all(after_position, limit, types)))

    @_guarded
    def head_position(self) -> int:
        """The position of the last event so far (0: none)."""
        (position,) = (
            self._conn().execute("SELECT coalesce(max(position), 0) FROM events").fetchone()
        )
        return int(position)

    @property
    def log_keys(self) -> LogKeys | None:
        """The keys rows are authenticated with and checked under (None: neither)."""
        return self._keys

    def match_list(self) -> SQLiteMatchList:
        """The match listing's tables in this file."""
        return self._match_list

    def ratings(self) -> SqlRatings:
        """The ratings' tables in this file."""
        return self._ratings

    def records(self) -> SqlRecords:
        """The kept records of ended matches in this database."""
        return self._records

    def tlog(self) -> SqlTlog:
        """The transparency log's tree in this file."""
        return self._tlog

    @contextmanager
    def _reading(self) -> Iterator[Db]:
        """The thread's connection, for reads. Raises StorageUnavailable."""
        try:
            yield _SQLiteDb(self._conn())
        except Exception as e:
            what = _fault(e)
            if what is None:
                raise
            raise unavailable(what) from e

    @contextmanager
    def _locked(self, projection: str) -> Iterator[tuple[Db, tuple[Any, ...]]]:
        """A transaction under the database's write lock, with `projection`'s position.
        Raises StorageUnavailable."""
        try:
            conn = self._conn()
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(_SQL.new_position, (projection,))
                row = conn.execute(_SQL.position, (projection,)).fetchone()
                yield _SQLiteDb(conn), tuple(row)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except Exception as e:
            what = _fault(e)
            if what is None:
                raise
            raise unavailable(what) from e

    @_guarded
    def stream_version(self, stream_id: str) -> int:
        """The stream's last seq, 0 for a stream with no event."""
        (version,) = (
            self._conn()
            .execute("SELECT coalesce(max(seq), 0) FROM events WHERE stream_id = ?", (stream_id,))
            .fetchone()
        )
        return int(version)

    @_guarded
    def list_streams(self, after: str | None = None, limit: int = 100) -> tuple[StreamInfo, ...]:
        """Up to `limit` streams and their versions, by stream id (bytewise), after `after`."""
        rows = (
            self._conn()
            .execute(
                _SQL.streams_after,
                (after or "", limit),
            )
            .fetchall()
        )
        return tuple(StreamInfo(r[0], int(r[1])) for r in rows)

    @_guarded
    def verify_chain(self, stream_id: str) -> ChainReport:
        """Re-walk the stream's hash chain; the report names the first bad seq and why."""
        rows = self._conn().execute(_SQL.whole_stream, (stream_id,)).fetchall()
        return check_report(verify_rows(stream_id, rows, _event), rows, _event, self._keys)


class _SQLiteDb:
    """One SQLite connection as the ratings' statements use it."""

    dialect: Dialect = SQLITE

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._conn.execute(sql, tuple(params)).fetchall()

    def run(self, sql: str, params: Sequence[Any] = ()) -> None:
        self._conn.execute(sql, tuple(params))

    def insert(
        self, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]], conflict: str = ""
    ) -> None:
        listed = [tuple(r) for r in rows]
        if listed:
            marks = ", ".join(["?"] * len(columns))
            self._conn.executemany(
                f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks}) {conflict}", listed
            )

    def time_in(self, at: datetime) -> Any:
        return _time_text(at)

    def time_of(self, value: Any) -> datetime:
        return datetime.fromisoformat(value)


def _time_text(at: datetime) -> str:
    """A listed time as stored: ISO 8601 text, as the events' recorded_at."""
    return at.isoformat(sep=" ")


def _summary_of(row: Sequence[Any], seals: Seals | None) -> MatchSummary:
    return summary_of(row, datetime.fromisoformat, seals)


def _chunks(ids: Collection[str]) -> Iterator[list[str]]:
    items = list(ids)
    for i in range(0, len(items), _CHUNK):
        yield items[i : i + _CHUNK]


class _SQLiteFold:
    """A projection's transaction, under the database's write lock."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        projection: str,
        position: tuple[int, str | None],
        seals: Seals | None,
    ) -> None:
        self._conn = conn
        self._projection = projection
        self.position, self.fault = position
        self._seals = seals
        self._seated: dict[str, tuple[str, tuple[str, ...]]] = {}

    def load(self, match_ids: Collection[str]) -> dict[str, MatchSummary]:
        found: dict[str, MatchSummary] = {}
        for chunk in _chunks(match_ids):
            for r in self._conn.execute(
                _SQL.summaries(len(chunk)),
                chunk,
            ):
                s = _summary_of(r, self._seals)
                found[s.match_id] = s
                self._seated[s.match_id] = (s.phase, tuple(s.players))
        return found

    def save(self, changed: Sequence[MatchSummary], position: int, reseat: bool = False) -> None:
        # A player's rows change only with the seats or the phase: most events leave them be.
        reseated = [
            s
            for s in changed
            if reseat or self._seated.get(s.match_id) != (s.phase, tuple(s.players))
        ]
        conn = self._conn
        if changed:
            conn.executemany(
                _SQL.upsert_summary, [summary_params(s, _time_text, self._seals) for s in changed]
            )
        for chunk in _chunks([s.match_id for s in reseated]):
            conn.execute(_SQL.drop_players(len(chunk)), chunk)
        conn.executemany(
            _SQL.insert_player,
            player_rows(reseated),
        )
        conn.execute(
            _SQL.set_position,
            (*sealed_position(self._seals, self._projection, position), self._projection),
        )
        for s in changed:
            self._seated[s.match_id] = (s.phase, tuple(s.players))
        self.position, self.fault = position, None

    def drop(self, match_ids: Collection[str]) -> None:
        for chunk in _chunks(match_ids):
            self._conn.execute(_SQL.drop_summaries(len(chunk)), chunk)
            self._conn.execute(_SQL.drop_players(len(chunk)), chunk)
        for match_id in match_ids:
            self._seated.pop(match_id, None)


class SQLiteMatchList:
    """The match listing in the SQLite file; uses the event store's connections."""

    def __init__(self, connect: Callable[[], sqlite3.Connection], seals: Seals | None) -> None:
        self._connect = connect
        self._seals = seals

    @_guarded
    def position(self, projection: str) -> int:
        return self.checked_position(projection)[0]

    @_guarded
    def checked_position(self, projection: str) -> tuple[int, str | None]:
        row = self._connect().execute(_SQL.position, (projection,)).fetchone()
        return position_fault(self._seals, projection, row)

    @contextmanager
    def folding(self, projection: str) -> Iterator[FoldTransaction]:
        """A transaction under the database's write lock (BEGIN IMMEDIATE: one folder at a
        time, in this process or another). Raises StorageUnavailable."""
        try:
            conn = self._connect()
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(_SQL.new_position, (projection,))
                row = conn.execute(_SQL.position, (projection,)).fetchone()
                yield _SQLiteFold(
                    conn, projection, position_fault(self._seals, projection, row), self._seals
                )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except Exception as e:
            what = _fault(e)
            if what is None:
                raise
            raise unavailable(what) from e

    @_guarded
    def page(
        self, phase: str | None, player: str, before: int | None, limit: int, folded: int = 0
    ) -> list[MatchSummary]:
        params: list[Any] = [folded]
        if player:
            params.append(player)
        if phase is not None:
            params.append(phase)
        params += (NO_LIMIT if before is None else before, limit)
        rows = (
            self._connect().execute(_SQL.pages[phase is not None, bool(player)], params).fetchall()
        )
        return [page_summary(r, datetime.fromisoformat, self._seals, player) for r in rows]

    @_guarded
    def missing(self, folded: int) -> list[str]:
        return [r[0] for r in self._connect().execute(_SQL.missing, (folded,)).fetchall()]

    @_guarded
    def versions(self, match_ids: Collection[str]) -> dict[str, int]:
        found: dict[str, int] = {}
        conn = self._connect()
        for chunk in _chunks(match_ids):
            for match_id, version in conn.execute(
                _SQL.versions(len(chunk)),
                chunk,
            ):
                found[match_id] = int(version)
        return found
