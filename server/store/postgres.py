"""The PostgreSQL event store: psycopg 3, a small pool of autocommit connections.

An append is one prepared INSERT (one round trip, one commit): the version check is the primary
key on (stream_id, seq), and the predecessor's hash comes from a per-process cache of stream
heads. The cache holds facts that never change (the hash of seq n of a stream), so it is never
stale, only incomplete; on a miss one SELECT fetches the predecessor. A unique violation is the
only sign of a conflict or of a replayed command, and is examined only then. That INSERT goes
straight to libpq (`pgconn.exec_prepared`, every parameter already in binary form): psycopg's
adaptation of thirteen parameters per row cost more CPU than the rest of the append.
"""

from __future__ import annotations

import functools
import itertools
import json
import queue
import re
import select
import struct
import threading
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import psycopg
import psycopg.errors
from psycopg import pq
from psycopg.copy import QueuedLibpqWriter
from psycopg.types.string import BytesBinaryDumper

from bergen.api.chain import event_rows, micros, parse_metadata, verify_rows
from bergen.api.stored import GENESIS_HASH, ChainReport, EventRow, StoredEvent
from bergen.domain.errors import ConcurrencyConflict, CorruptRecord, NotFound

from ..keys import LogKeys
from .authenticity import check_report, check_rows, read_event
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
from .packed import PACKED_ROW_SQL, PACKED_TEXTS_SQL, PackedEvent, parse_page
from .ratings import Db, SqlRatings
from .records import SqlRecords
from .sealed import Seals, seals_of
from .statements import NO_LIMIT, POSTGRES, Dialect, Statements
from .tlog import SqlTlog
from .url import live_conninfo

_SQL = Statements(POSTGRES)
COPY_ROWS = 20_000
"""Rows a COPY statement writes at most (`_PostgresDb.insert`): a few seconds on a loaded
machine, well inside the server's statement_timeout (30 s)."""
_COPY_TYPES: dict[tuple[str, tuple[str, ...]], list[int]] = {}
"""By table and columns: each column's type, for a binary COPY (`_PostgresDb.insert`)."""
_COLUMNS = _SQL.event_columns
# The global order shows a row once no transaction that could still write one before it is
# running: its horizon is the oldest transaction of this snapshot still in progress. A running
# transaction of another database of the cluster cannot write these events (a session works in
# one database), so it is left out: a long transaction elsewhere (a bulk load, another
# application's job) must not hold back every feed here. What cannot be told apart (a prepared
# transaction, one that ended since the snapshot) still counts, so the horizon errs early,
# never late. pg_stat_activity's backend_xid is the 32-bit id, so it is compared with the low
# bits of the snapshot's 64-bit ones; ids running at once never share them.
_HORIZON = (
    "coalesce((SELECT min(x::text::bigint) FROM pg_snapshot_xip(pg_current_snapshot()) x"
    " WHERE mod(x::text::bigint, 4294967296) NOT IN (SELECT backend_xid::text::bigint"
    " FROM pg_stat_activity WHERE backend_xid IS NOT NULL AND datname <> current_database())),"
    " pg_snapshot_xmax(pg_current_snapshot())::text::bigint)"
)
_VISIBLE = f"tx_id < (SELECT {_HORIZON})"

_READ_AFTER = (
    "SELECT e.* FROM (SELECT tx_id, position FROM events WHERE position = %s::bigint) c"
    " LEFT JOIN LATERAL (SELECT stream_id, seq, position, type, schema_version,"
    " payload::text AS payload, metadata::text AS metadata, recorded_at, prev_hash, hash, salt,"
    " key_id, mac"
    " FROM events WHERE (tx_id, position) > (c.tx_id, c.position)"
    f" AND {_VISIBLE} ORDER BY tx_id, position LIMIT %s::bigint) e ON true"
)
_TYPE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_READ_COLUMNS = ", ".join(
    f"u.{c.strip().split('::')[0]}" for c in _COLUMNS.split(",")
)  # fmt: skip
"""The event columns as a typed read's outer query names them (the text casts are inside)."""


@functools.lru_cache(maxsize=16)
def typed_reads(types: frozenset[str], columns: str = _READ_COLUMNS) -> tuple[str, str]:
    """The reads of the rows of `types` in commit-safe global order, from the start and after
    a position (the parameters: [the position,] the limit twice), and the last row visible
    whatever its type: where a read that passes over the other types reached.

    The types are written into the text (event type names, never a client's words), so that
    the rows of a type an index is made for (`ix_events_match_ended`: the ends) are read by
    that index alone, not by the global order's filtered for them. The horizon is taken once
    for both parts (`OFFSET 0` keeps the planner from copying it into each): the last row
    must not lie past a row of the types that the first part could not see. `columns`: what
    each row gives of the rows `u` (with `tx_id`: `u.*`). Raises ValueError for a type that
    is not a name."""
    for t in types:
        if not _TYPE_NAME.fullmatch(t):
            raise ValueError(f"not an event type: {t!r}")
    of_types = "type IN ({})".format(", ".join(f"'{t}'" for t in sorted(types)))
    cols = _COLUMNS + ", tx_id"
    both = (
        f"(SELECT {cols} FROM events WHERE {{after}} tx_id < c.horizon AND {of_types}"
        " ORDER BY tx_id, position LIMIT {limit})"
        f" UNION ALL (SELECT {cols} FROM (SELECT * FROM events WHERE {{after}}"
        f" tx_id < c.horizon ORDER BY tx_id DESC, position DESC LIMIT 1) l"
        f" WHERE NOT {of_types})"
    )
    start = (
        f"SELECT {columns} FROM (SELECT ({_HORIZON}) AS horizon OFFSET 0) c,"
        f" LATERAL ({both.format(after='', limit='%s::bigint')}) u"
        " ORDER BY u.tx_id, u.position LIMIT %s::bigint"
    )
    past_c = "(tx_id, position) > (c.tx_id, c.position) AND"
    after = (
        f"SELECT {columns} FROM (SELECT tx_id, position, ({_HORIZON}) AS horizon"
        " FROM events WHERE position = %s::bigint OFFSET 0) c"
        f" LEFT JOIN LATERAL (SELECT * FROM ({both.format(after=past_c, limit='%s::bigint')})"
        " t ORDER BY t.tx_id, t.position LIMIT %s::bigint) u ON true"
    )
    return start, after


@functools.lru_cache(maxsize=16)
def packed_reads(types: frozenset[str]) -> tuple[str, str]:
    """`typed_reads` as one packed page (`bergen.server.store.packed`): the rows found (0:
    no event at the position read after), how many of them are events (with nothing after
    it: one row of NULLs), and the page."""
    start, after = typed_reads(types, "u.*")
    return tuple(  # type: ignore[return-value]
        "SELECT count(*), count(u.position),"
        f" string_agg({PACKED_ROW_SQL}, ''::bytea ORDER BY u.tx_id, u.position)"
        f" FROM ({read}) u, {PACKED_TEXTS_SQL}"
        for read in (start, after)
    )


def _fault(e: BaseException) -> str | None:
    """What a storage fault is, in a few words; None for any other error."""
    if isinstance(e, psycopg.errors.ReadOnlySqlTransaction):
        return "the database is read-only"
    if isinstance(e, psycopg.errors.InsufficientResources):
        return "the database is out of disk space or memory"
    if isinstance(e, psycopg.errors.QueryCanceled):
        return "the database did not answer in time (a statement waited past its timeout)"
    if isinstance(e, psycopg.errors.OperatorIntervention):
        return "the database is shutting down or was restarted"
    if isinstance(e, psycopg.OperationalError | psycopg.InterfaceError):
        return "the database cannot be reached"
    return None


_guarded = guard(_fault)

_RACE_CONSTRAINTS = frozenset({"pk_events", "ix_events_stream_id_command_id"})
"""The unique constraints an append breaks by losing a race: (stream, seq), and (stream,
command id) for a command already applied."""


_ROW_TYPES = (25, 20, 25, 23, 114, 114, 25, 17, 17, 17, 1184, 25, 17)
"""The type oids of an inserted row's parameters: stream_id text, seq int8, type text,
schema_version int4, payload json, metadata json, command_id text, prev_hash, hash and salt
bytea, recorded_at timestamptz, key_id text, mac bytea."""
_BINARY = [1] * len(_ROW_TYPES)
_I4 = struct.Struct(">i").pack
_I8 = struct.Struct(">q").pack
_UNPACK_I8 = struct.Struct(">q").unpack
_PG_EPOCH_US = 946_684_800_000_000
"""2000-01-01 UTC in microseconds since 1970: the origin of a binary timestamptz."""


@functools.lru_cache(maxsize=64)
def _insert_statement(n: int) -> tuple[bytes, bytes, list[int], list[int]]:
    """The name, text, parameter types and formats of the prepared INSERT of `n` rows."""
    width = len(_ROW_TYPES)
    values = ", ".join(
        "(" + ", ".join(f"${i * width + j + 1}" for j in range(width)) + ")" for i in range(n)
    )
    sql = (
        "INSERT INTO events (stream_id, seq, type, schema_version, payload, metadata,"
        f" command_id, prev_hash, hash, salt, recorded_at, key_id, mac) VALUES {values}"
        " RETURNING seq, position"
    )
    return f"bergen_append_{n}".encode(), sql.encode(), list(_ROW_TYPES) * n, _BINARY * n


def _text(value: str | None) -> bytes | None:
    return None if value is None else value.encode()


def _insert(
    conn: psycopg.Connection[Any], prepared: set[int | str], values: list[bytes | None], n: int
) -> dict[int, int]:
    """Run the prepared INSERT of `n` rows (every parameter in binary form, so no text is
    parsed or cut at a NUL) straight on libpq: seq -> position of each row. Its commit is
    awaited by `_settle`, which lets the other threads run meanwhile. Raises the psycopg
    error of a refusal (UniqueViolation...), OperationalError for a lost server."""
    name, sql, types, formats = _insert_statement(n)
    pgconn = conn.pgconn
    if n not in prepared:
        _check(conn, pgconn.prepare(name, sql, types), pq.ExecStatus.COMMAND_OK)
        prepared.add(n)
    pgconn.send_query_prepared(name, values, formats, 1)  # None is SQL NULL
    result = _settle(pgconn)
    _check(conn, result, pq.ExecStatus.TUPLES_OK)
    return {
        _UNPACK_I8(result.get_value(i, 0) or b"")[0]: _UNPACK_I8(result.get_value(i, 1) or b"")[0]
        for i in range(result.ntuples)
    }


def _settle(pgconn: pq.abc.PGconn) -> pq.abc.PGresult:
    """The result of the one query sent on `pgconn`, read to its end. The wait is a poll of
    the socket, which lets other threads run (libpq's own blocking read does not here: the
    driver holds the interpreter's lock through it). Raises OperationalError for a lost
    server."""
    poll = select.poll()
    poll.register(pgconn.socket, select.POLLIN)
    last: pq.abc.PGresult | None = None
    while True:
        pgconn.consume_input()
        while pgconn.is_busy():
            poll.poll()
            pgconn.consume_input()
        result = pgconn.get_result()
        if result is None:
            break
        last = result
    if last is None:
        raise psycopg.OperationalError("the database sent no result for the append")
    return last


_CHECKED_ROWS = (
    "SELECT seq, type, schema_version, payload::text, metadata::text,"
    " (extract(epoch FROM recorded_at) * 1000000)::bigint, prev_hash, hash, salt, key_id, mac"
    " FROM events WHERE stream_id = {} AND seq >= {} ORDER BY seq"
)
"""The rows of a stream from a seq on, as `check_rows` takes them: recorded_at as the whole
microseconds the authenticator covers (exact: extract gives a numeric), not a datetime to
convert back."""
_TAIL = (b"bergen_tail", _CHECKED_ROWS.format("$1", "$2").encode(), [25, 20])
"""`_CHECKED_ROWS` prepared on libpq (a tail read)."""
_UNPACK_I4 = struct.Struct(">i").unpack


def _tail(
    conn: psycopg.Connection[Any], prepared: set[int | str], stream_id: str, from_seq: int
) -> list[tuple[Any, ...]]:
    """The rows of `stream_id` from `from_seq` on (`_TAIL`), read straight on libpq: a read
    of the few rows a cached match may lack costs a fraction of a cursor's round trip. The
    wait is `_settle`'s. Raises the psycopg error of a refusal, OperationalError for a lost
    server."""
    name, sql, types = _TAIL
    pgconn = conn.pgconn
    if "tail" not in prepared:
        _check(conn, pgconn.prepare(name, sql, types), pq.ExecStatus.COMMAND_OK)
        prepared.add("tail")
    pgconn.send_query_prepared(name, [stream_id.encode(), _I8(from_seq)], [1, 1], 1)
    result = _settle(pgconn)
    _check(conn, result, pq.ExecStatus.TUPLES_OK)
    rows = []
    value = result.get_value
    for i in range(result.ntuples):
        key_id, mac = value(i, 9), value(i, 10)
        rows.append(
            (
                _UNPACK_I8(value(i, 0) or b"")[0],
                bytes(value(i, 1) or b"").decode(),
                _UNPACK_I4(value(i, 2) or b"")[0],
                bytes(value(i, 3) or b"").decode(),
                bytes(value(i, 4) or b"").decode(),
                _UNPACK_I8(value(i, 5) or b"")[0],
                bytes(value(i, 6) or b""),
                bytes(value(i, 7) or b""),
                bytes(value(i, 8) or b""),
                None if key_id is None else bytes(key_id).decode(),
                None if mac is None else bytes(mac),
            )
        )
    return rows


def _check(conn: psycopg.Connection[Any], result: pq.abc.PGresult, ok: pq.ExecStatus) -> None:
    if result.status == ok:
        return
    if conn.pgconn.status == pq.ConnStatus.BAD:
        raise psycopg.OperationalError(result.get_error_message("utf-8") or "connection lost")
    raise psycopg.errors.error_from_result(result, "utf-8")


def _event(row: tuple[Any, ...]) -> StoredEvent:
    """The StoredEvent of a selected row. Raises CorruptRecord, naming its stream, seq and
    position (so that a reader of the global order can pass over it), if it cannot be
    decoded."""
    try:
        return _decode(row)
    except (ValueError, KeyError, TypeError) as e:
        raise CorruptRecord(
            f"stream {row[0]} seq {row[1]}: undecodable event row: {e!r}",
            match_id=row[0], seq=row[1], position=row[2],
        ) from e  # fmt: skip


def _decode(row: tuple[Any, ...]) -> StoredEvent:
    return StoredEvent(
        stream_id=row[0],
        seq=row[1],
        position=row[2],
        type=row[3],
        schema_version=row[4],
        payload=json.loads(row[5]),
        metadata=parse_metadata(row[6]),
        recorded_at=row[7],
        prev_hash=bytes(row[8]),
        hash=bytes(row[9]),
        salt=bytes(row[10]),
        key_id=row[11],
        mac=None if row[12] is None else bytes(row[12]),
    )


_IDLE = pq.TransactionStatus.IDLE


class Pool:
    """A small LIFO pool of autocommit connections, cheap on the hot path.

    A connection comes back to the pool only when idle and unbroken; otherwise it is closed and
    a new one is opened on demand. Waits when `size` connections are in use.

    Built of what is atomic in C rather than of threading's Python locks: the free slots are
    `size` tokens in a SimpleQueue (taking one waits while none is left), the idle connections
    a list (append and pop are atomic).
    """

    def __init__(self, conninfo: str, size: int) -> None:
        self._conninfo = conninfo
        self._idle: list[psycopg.Connection[tuple[Any, ...]]] = []
        self._slots: queue.SimpleQueue[None] = queue.SimpleQueue()
        for _ in range(size):
            self._slots.put(None)
        self._all: set[psycopg.Connection[tuple[Any, ...]]] = set()
        self.statements: dict[psycopg.Connection[tuple[Any, ...]], set[int | str]] = {}
        """Per connection, the statements it has prepared: the row counts of `_insert`'s
        INSERTs, and "tail" for `_tail`'s SELECT."""
        self._lock = threading.Lock()
        self._closed = False

    def _connect(self) -> psycopg.Connection[tuple[Any, ...]]:
        # prepare_threshold=0: every statement is prepared on its first use. UTF-8: the text
        # `_insert` sends is UTF-8.
        conn = psycopg.connect(
            self._conninfo, autocommit=True, prepare_threshold=0, client_encoding="utf8"
        )
        # bytes by psycopg's C dumper in a binary COPY too: the column's type (bytea) names
        # the DB-API `Binary` dumper otherwise, written in Python, and a rebuild of the
        # ratings copies an authenticator a row.
        conn.adapters.register_dumper(bytes, BytesBinaryDumper)
        with self._lock:
            self._all.add(conn)
            self.statements[conn] = set()
        return conn

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
        """A connection for the block. Raises RuntimeError once closed, OperationalError if
        a new connection cannot be made."""
        if self._closed:
            raise RuntimeError("the event store is closed")
        self._slots.get()
        try:
            try:
                conn = self._idle.pop()
            except IndexError:
                conn = self._connect()
            try:
                yield conn
            finally:
                if conn.broken:
                    # The server went away: the idle connections went with it, and each
                    # would fail one more call.
                    self._discard(conn)
                    self._discard_idle()
                elif self._closed or conn.pgconn.transaction_status != _IDLE:
                    self._discard(conn)
                else:
                    self._idle.append(conn)
        finally:
            self._slots.put(None)

    def _discard(self, conn: psycopg.Connection[tuple[Any, ...]]) -> None:
        with self._lock:
            self._all.discard(conn)
            self.statements.pop(conn, None)
        conn.close()

    def _discard_idle(self) -> None:
        while True:
            try:
                conn = self._idle.pop()
            except IndexError:
                return
            self._discard(conn)

    def close(self) -> None:
        self._closed = True
        with self._lock:
            conns, self._all = list(self._all), set()
            self.statements.clear()
        for conn in conns:
            conn.close()


class PostgresEventStore:
    """The event store on PostgreSQL (schema from the migrations in bergen.migrations)."""

    def __init__(
        self,
        url: str,
        *,
        max_connections: int = 8,
        head_cache_size: int = 100_000,
        log_keys: LogKeys | None = None,
        flushed_folds: bool = False,
    ) -> None:
        """Connect to `url`. With `log_keys`, every row written is authenticated and every
        row read for folding is checked. With `flushed_folds`, a listing fold's commit waits
        for its WAL flush as an append's does (for a database whose standby serves reads).
        Raises StorageUnavailable if the database does not answer."""
        self._keys = log_keys
        self._pool = Pool(live_conninfo(url), max_connections)
        self._check()
        self._heads = Heads(head_cache_size)
        seals = seals_of(log_keys)
        self._match_list = PostgresMatchList(self._pool, seals, flushed_folds=flushed_folds)
        self._ratings = SqlRatings(self._reading, self._match_list.locked, seals)
        self._tlog = SqlTlog(self._reading, self._match_list.locked)
        self._records = SqlRecords(self._reading, seals)

    @_guarded
    def _check(self) -> None:
        with self._pool.connection() as conn:  # fail now if the database does not answer
            conn.execute("SELECT 1")

    def close(self) -> None:
        """Close every connection; the store cannot be used afterwards."""
        self._pool.close()

    @_guarded
    def append(self, batch: Append) -> AppendResult:
        """Append the batch's events atomically after its expected version.

        Raises ConcurrencyConflict when the stream is elsewhere, ValueError for bad arguments,
        StorageUnavailable (as every method here) when the database cannot be reached or
        written. A command id appended before returns the first result, marked `replayed`.
        The commit is awaited on the socket, the thread holding no lock: other threads run.
        """
        check_append(batch)
        stream_id, expected_version, command_id = (
            batch.stream_id,
            batch.expected_version,
            batch.command_id,
        )
        metadata = batch.metadata
        with self._pool.connection() as conn:
            prev = (
                GENESIS_HASH
                if expected_version == 0
                else self._heads.hash_at(stream_id, expected_version)
            )
            if prev is None:
                prev = self._hash_at(conn, stream_id, expected_version)
                if prev is None:
                    return self._refused(conn, stream_id, expected_version, command_id, None)
            recorded_at = datetime.now(UTC)
            writing = None if self._keys is None else (self._keys.writing, self._keys.writing_key)
            rows = build_rows(
                stream_id, expected_version, batch.events, metadata, prev, recorded_at, writing
            )
            stream = stream_id.encode()
            at = _I8(micros(recorded_at) - _PG_EPOCH_US)
            values: list[bytes | None] = []
            for r in rows:
                values += (
                    stream,
                    _I8(r.seq),
                    r.event.type.encode(),
                    _I4(r.event.schema_version),
                    r.payload_json.encode(),
                    r.metadata_json.encode(),
                    _text(r.command_id),
                    r.prev_hash,
                    r.hash,
                    r.salt,
                    at,
                    _text(r.key_id),
                    r.mac,
                )
            try:
                positions = _insert(conn, self._pool.statements[conn], values, len(rows))
            except psycopg.errors.UniqueViolation as e:
                if e.diag.constraint_name not in _RACE_CONSTRAINTS:
                    # Not a lost race: the table holds a row that should not be there.
                    raise CorruptRecord(
                        f"stream {stream_id}: the append broke the unique constraint "
                        f"{e.diag.constraint_name}, not a version conflict",
                        reason="UNIQUE_VIOLATION",
                        constraint=e.diag.constraint_name,
                    ) from e
                return self._refused(conn, stream_id, expected_version, command_id, e)
        last = rows[-1]
        self._heads.learn(stream_id, last.seq, last.hash)
        return AppendResult(
            stream_id,
            tuple(stored(stream_id, r, positions[r.seq], recorded_at, metadata) for r in rows),
        )

    def _hash_at(self, conn: psycopg.Connection[Any], stream_id: str, seq: int) -> bytes | None:
        row = conn.execute(
            "SELECT hash FROM events WHERE stream_id = %s AND seq = %s::bigint", (stream_id, seq)
        ).fetchone()
        return None if row is None else bytes(row[0])

    def _refused(
        self,
        conn: psycopg.Connection[Any],
        stream_id: str,
        expected_version: int,
        command_id: str | None,
        cause: Exception | None,
    ) -> AppendResult:
        """The replay of `command_id` if it was appended before; else raises ConcurrencyConflict."""
        if command_id is not None:
            replay = self._replay(conn, stream_id, command_id)
            if replay is not None:
                return replay
        actual = self._version(conn, stream_id)
        raise ConcurrencyConflict(
            f"stream {stream_id}: expected version {expected_version}, actual {actual}"
        ) from cause

    def _replay(
        self, conn: psycopg.Connection[Any], stream_id: str, command_id: str
    ) -> AppendResult | None:
        head = conn.execute(
            _SQL.command_head,
            (stream_id, command_id),
        ).fetchone()
        if head is None:
            return None
        batch: list[StoredEvent] = []
        seq = head[0]
        while True:
            page = [
                _event(r)
                for r in conn.execute(
                    f"{_SQL.stream_from} LIMIT 256",
                    (stream_id, seq),
                )
            ]
            for event in page:
                if event.metadata.command_id != command_id:
                    return AppendResult(stream_id, tuple(batch), replayed=True)
                batch.append(event)
            if len(page) < 256:
                return AppendResult(stream_id, tuple(batch), replayed=True)
            seq = page[-1].seq + 1

    @staticmethod
    def _version(conn: psycopg.Connection[Any], stream_id: str) -> int:
        row = conn.execute(
            "SELECT max(seq) FROM events WHERE stream_id = %s", (stream_id,)
        ).fetchone()
        return 0 if row is None or row[0] is None else int(row[0])

    @_guarded
    def read_stream(
        self, stream_id: str, from_seq: int = 1, limit: int | None = None
    ) -> tuple[StoredEvent, ...]:
        """The stream's events from `from_seq` in seq order, at most `limit` (empty for an
        unknown stream)."""
        with self._pool.connection() as conn:
            rows = conn.execute(
                _SQL.stream_page,
                (stream_id, from_seq, limit),
                # Binary results: bytea and numbers arrive without text parsing.
                binary=True,
            ).fetchall()
        events = tuple(_event(r) for r in rows)
        if events:
            self._heads.learn(stream_id, events[-1].seq, events[-1].hash)
        return events

    @_guarded
    def read_rows(self, stream_id: str, from_seq: int = 1) -> tuple[EventRow, ...]:
        """What `read_stream` gives, less the chain fields, for folding (faster). With log
        keys, every row's authenticator and chain link are checked first (from the row before
        `from_seq`): raises LogTampered naming the first row that fails."""
        if self._keys is None:
            with self._pool.connection() as conn:
                rows = conn.execute(
                    "SELECT seq, type, schema_version, payload::text, metadata::text, hash"
                    " FROM events WHERE stream_id = %s AND seq >= %s::bigint ORDER BY seq",
                    (stream_id, from_seq),
                    binary=True,
                ).fetchall()
            events = event_rows(stream_id, rows)
            if rows:
                self._heads.learn(stream_id, rows[-1][0], bytes(rows[-1][5]))
            return events
        known = self._heads.hash_at(stream_id, from_seq - 1) if from_seq > 1 else None
        if known is not None:
            # The tail of a match held here: the row before it is known, and need not be read
            # again to link the first new one to it.
            with self._pool.connection() as conn:
                rows = _tail(conn, self._pool.statements[conn], stream_id, from_seq)
            if not rows:
                return ()
            check_rows(stream_id, rows, self._keys.key, known, first_seq=from_seq)
            events = event_rows(stream_id, rows)
            self._heads.learn(stream_id, rows[-1][0], rows[-1][7])
            return events
        start = max(from_seq - 1, 1)
        with self._pool.connection() as conn:
            rows = conn.execute(
                _CHECKED_ROWS.format("%s", "%s::bigint"), (stream_id, start), binary=True
            ).fetchall()
        if start < from_seq:
            if not rows:
                return ()  # the stream ends before from_seq - 1: nothing follows it
            check_rows(stream_id, rows, self._keys.key, None, first_seq=start)
            rows = rows[1:]
        else:
            check_rows(stream_id, rows, self._keys.key, GENESIS_HASH)
        events = event_rows(stream_id, rows)
        if rows:
            self._heads.learn(stream_id, rows[-1][0], bytes(rows[-1][7]))
        return events

    @_guarded
    def key_ids(self, stream_id: str, upto_seq: int) -> frozenset[str]:
        """The ids of the log keys that authenticate the stream's rows up to `upto_seq`."""
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT DISTINCT key_id FROM events WHERE stream_id = %s AND seq <= %s::bigint"
                " AND key_id IS NOT NULL",
                (stream_id, upto_seq),
            ).fetchall()
        return frozenset(str(r[0]) for r in rows)

    @_guarded
    def read_all(
        self, after_position: int = 0, limit: int = 1000, types: Collection[str] | None = None
    ) -> tuple[StoredEvent, ...]:
        """Up to `limit` events after the one at `after_position`, in commit-safe global order
        (`types`: only those of these types, and the last one visible).

        Only rows written by transactions older than every transaction still running are
        shown, ordered by (transaction, position): a transaction that commits late cannot add
        an event before the reader's cursor. Raises NotFound for an unknown `after_position`.
        """
        with self._pool.connection() as conn:
            if types is not None:
                start, after = typed_reads(frozenset(types))
                if after_position == 0:
                    rows = conn.execute(start, (limit, limit)).fetchall()
                else:
                    rows = conn.execute(after, (after_position, limit, limit)).fetchall()
            elif after_position == 0:
                rows = conn.execute(
                    f"SELECT {_COLUMNS} FROM events WHERE {_VISIBLE}"
                    " ORDER BY tx_id, position LIMIT %s::bigint",
                    (limit,),
                ).fetchall()
            else:
                rows = conn.execute(_READ_AFTER, (after_position, limit)).fetchall()
            if after_position != 0:
                # One query, also when nothing is new: no row at all means no such cursor,
                # one row of NULLs means nothing after it yet.
                if not rows:
                    raise NotFound(f"no event at global position {after_position}")
                if rows[0][0] is None:
                    return ()
        return tuple(map(read_event, rows))

    @_guarded
    def read_all_packed(
        self, after_position: int, limit: int, types: Collection[str]
    ) -> tuple[PackedEvent, ...]:
        """`read_all` of `types`, the rows read as one packed page. Raises NotFound for an
        unknown `after_position`, CorruptRecord for a page that does not parse."""
        start, after = packed_reads(frozenset(types))
        with self._pool.connection() as conn:
            # In the binary format: the page as its bytes, not hex text to decode.
            if after_position == 0:
                row = conn.execute(start, (limit, limit), binary=True).fetchone()
            else:
                row = conn.execute(after, (after_position, limit, limit), binary=True).fetchone()
        assert row is not None  # an aggregate's one row
        found, count, page = row
        if after_position != 0 and found == 0:
            raise NotFound(f"no event at global position {after_position}")
        return parse_page(page or b"", count)

    @_guarded
    def head_position(self) -> int:
        """The position of the last event of the commit-safe global order so far (0: none):
        `read_all` from it gives only events that become visible later."""
        with self._pool.connection() as conn:
            row = conn.execute(
                f"SELECT position FROM events WHERE {_VISIBLE}"
                " ORDER BY tx_id DESC, position DESC LIMIT 1"
            ).fetchone()
        return 0 if row is None else int(row[0])

    @property
    def log_keys(self) -> LogKeys | None:
        """The keys rows are authenticated with and checked under (None: neither)."""
        return self._keys

    def ratings(self) -> SqlRatings:
        """The ratings' tables in this database."""
        return self._ratings

    def records(self) -> SqlRecords:
        """The kept records of ended matches in this database."""
        return self._records

    def tlog(self) -> SqlTlog:
        """The transparency log's tree in this database."""
        return self._tlog

    @contextmanager
    def _reading(self) -> Iterator[Db]:
        """A connection of the pool, for reads. Raises StorageUnavailable."""
        try:
            with self._pool.connection() as conn:
                yield _PostgresDb(conn)
        except Exception as e:
            what = _fault(e)
            if what is None:
                raise
            raise unavailable(what) from e

    def match_list(self) -> PostgresMatchList:
        """The match listing's tables in this database."""
        return self._match_list

    @_guarded
    def stream_version(self, stream_id: str) -> int:
        """The stream's last seq, 0 for a stream with no event."""
        with self._pool.connection() as conn:
            return self._version(conn, stream_id)

    @_guarded
    def list_streams(self, after: str | None = None, limit: int = 100) -> tuple[StreamInfo, ...]:
        """Up to `limit` streams and their versions, by stream id (bytewise), after `after`."""
        with self._pool.connection() as conn:
            rows = conn.execute(
                _SQL.streams_after,
                (after or "", limit),
            ).fetchall()
        return tuple(StreamInfo(r[0], int(r[1])) for r in rows)

    @_guarded
    def wal_lsn(self) -> int | None:
        """This server's WAL position as a number: where a primary has written to, or what a
        standby has replayed (None: a standby that has replayed nothing yet)."""
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()"
                " ELSE pg_current_wal_lsn() END - '0/0'::pg_lsn)::bigint"
            ).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    @_guarded
    def verify_chain(self, stream_id: str) -> ChainReport:
        """Re-walk the stream's hash chain; the report names the first bad seq and why."""
        with self._pool.connection() as conn:
            rows = conn.execute(_SQL.whole_stream, (stream_id,)).fetchall()
        return check_report(verify_rows(stream_id, rows, _event), rows, _event, self._keys)


class _PostgresFold:
    """A projection's transaction on one connection, its position row locked."""

    def __init__(
        self,
        conn: psycopg.Connection[Any],
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
        if not match_ids:
            return {}
        rows = self._conn.execute(
            _SQL.summaries(len(match_ids)),
            (list(match_ids),),
        ).fetchall()
        found = {r[0]: summary_of(r, seals=self._seals) for r in rows}
        for s in found.values():
            self._seated[s.match_id] = (s.phase, tuple(s.players))
        return found

    def save(self, changed: Sequence[MatchSummary], position: int, reseat: bool = False) -> None:
        # A player's rows change only with the seats or the phase: most events leave them be.
        reseated = [
            s
            for s in changed
            if reseat or self._seated.get(s.match_id) != (s.phase, tuple(s.players))
        ]
        with self._conn.cursor() as cur:
            if changed:
                cur.executemany(
                    _SQL.upsert_summary,
                    [summary_params(s, seals=self._seals) for s in changed],
                )
            if reseated:
                cur.execute(
                    _SQL.drop_players(len(reseated)),
                    ([s.match_id for s in reseated],),
                )
                players = player_rows(reseated)
                if players:
                    cur.executemany(
                        _SQL.insert_player,
                        players,
                    )
            cur.execute(
                _SQL.set_position,
                (*sealed_position(self._seals, self._projection, position), self._projection),
            )
        for s in changed:
            self._seated[s.match_id] = (s.phase, tuple(s.players))
        self.position, self.fault = position, None

    def drop(self, match_ids: Collection[str]) -> None:
        if not match_ids:
            return
        ids = list(match_ids)
        self._conn.execute(_SQL.drop_summaries(len(ids)), (ids,))
        self._conn.execute(_SQL.drop_players(len(ids)), (ids,))
        for match_id in ids:
            self._seated.pop(match_id, None)


class _PostgresDb:
    """One PostgreSQL connection as the ratings' statements use it."""

    dialect: Dialect = POSTGRES

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._conn.execute(sql, list(params)).fetchall()

    def run(self, sql: str, params: Sequence[Any] = ()) -> None:
        self._conn.execute(sql, list(params))

    def insert(
        self, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]], conflict: str = ""
    ) -> None:
        names = ", ".join(columns)
        with self._conn.cursor() as cur:
            if conflict:
                listed = [list(r) for r in rows]
                if listed:
                    marks = ", ".join(["%s"] * len(columns))
                    cur.executemany(
                        f"INSERT INTO {table} ({names}) VALUES ({marks}) {conflict}", listed
                    )
                return
            # COPY: each value written by psycopg's C code, where executemany costs some
            # 15 microseconds of Python a row; in the binary format, each by the dumper of
            # its column's type, a tenth of the text format's time, and the server parses no
            # text. A statement a chunk: a rebuild's rows, written in one transaction, would
            # hold one statement past statement_timeout on a busy database server. The rows
            # are sent from a thread of psycopg's (QueuedLibpqWriter) as they are made: `rows`
            # may be a generator that makes each (a rebuild's seals them), and the server
            # stores the ones sent meanwhile, on another core.
            blocks = getattr(rows, "copy_blocks", None)
            if blocks is not None:
                # Rows that make their binary COPY data themselves (`HistoryRows`).
                for block in blocks(COPY_ROWS):
                    with cur.copy(
                        f"COPY {table} ({names}) FROM STDIN (FORMAT BINARY)",
                        writer=QueuedLibpqWriter(cur),
                    ) as copy:
                        copy.write(block)
                return
            types = self._column_types(table, tuple(columns))
            it = iter(rows)
            first = next(it, None)
            while first is not None:
                with cur.copy(
                    f"COPY {table} ({names}) FROM STDIN (FORMAT BINARY)",
                    writer=QueuedLibpqWriter(cur),
                ) as copy:
                    copy.set_types(types)
                    copy.write_row(first)
                    for r in itertools.islice(it, COPY_ROWS - 1):
                        copy.write_row(r)
                first = next(it, None)

    def _column_types(self, table: str, columns: tuple[str, ...]) -> list[int]:
        """The type (oid) of each of `table`'s `columns`, as the catalog has them: read once
        a process (the schema changes only by a migration, which these servers wait for)."""
        key = (table, columns)
        types = _COPY_TYPES.get(key)
        if types is None:
            found = dict(
                self._conn.execute(
                    "SELECT attname, atttypid::int FROM pg_attribute"
                    " WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped",
                    [table],
                ).fetchall()
            )
            types = _COPY_TYPES[key] = [found[c] for c in columns]
        return types

    def time_in(self, at: datetime) -> Any:
        return at

    def time_of(self, value: Any) -> datetime:
        assert isinstance(value, datetime)
        return value


class PostgresMatchList:
    """The match listing in PostgreSQL; shares the event store's connections."""

    def __init__(self, pool: Pool, seals: Seals | None, *, flushed_folds: bool = False) -> None:
        self._pool = pool
        self._seals = seals
        self._locked = (
            "SELECT position, key_id, mac FROM projection_positions WHERE name = %s FOR UPDATE"
            if flushed_folds
            else "SELECT position, key_id, mac, set_config('synchronous_commit', 'off', true)"
            " FROM projection_positions WHERE name = %s FOR UPDATE"
        )

    @_guarded
    def position(self, projection: str) -> int:
        return self.checked_position(projection)[0]

    @_guarded
    def checked_position(self, projection: str) -> tuple[int, str | None]:
        with self._pool.connection() as conn:
            row = conn.execute(_SQL.position, (projection,)).fetchone()
        return position_fault(self._seals, projection, row)

    @contextmanager
    def folding(self, projection: str) -> Iterator[FoldTransaction]:
        """A transaction holding `projection`'s position row (FOR UPDATE: another replica
        folding waits here, then sees the position this one wrote). Raises
        StorageUnavailable."""
        with self._holding(projection) as (conn, row):
            yield _PostgresFold(
                conn, projection, position_fault(self._seals, projection, row), self._seals
            )

    @contextmanager
    def locked(self, projection: str) -> Iterator[tuple[Db, tuple[Any, ...]]]:
        """`folding`'s transaction for another projection (the ratings'): the connection
        and its position row as read (position, key_id, mac). Raises StorageUnavailable."""
        with self._holding(projection) as (conn, row):
            yield _PostgresDb(conn), row

    @contextmanager
    def _holding(
        self, projection: str
    ) -> Iterator[tuple[psycopg.Connection[Any], tuple[Any, ...]]]:
        try:
            with self._pool.connection() as conn, conn.transaction():
                # Unless flushed_folds, the fold commits without waiting for its WAL to reach
                # the disk (synchronous_commit off, for this transaction only): a projection is
                # rebuilt from the log, its rows and position are lost or kept together, and
                # WAL is flushed in order, so it is never durable ahead of the events it
                # folded. Its commit then takes no flush of its own from the appends it
                # follows. A standby that serves reads needs the flush: it is sent WAL only
                # once flushed, and the write position that routed reads wait for
                # (pg_current_wal_lsn) may not yet hold an unflushed commit.
                row = conn.execute(self._locked, (projection,)).fetchone()
                if row is None:
                    conn.execute(_SQL.new_position, (projection,))
                    row = conn.execute(self._locked, (projection,)).fetchone()
                    assert row is not None
                yield conn, tuple(row)
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
        with self._pool.connection() as conn:
            rows = conn.execute(_SQL.pages[phase is not None, bool(player)], params).fetchall()
        return [page_summary(r, _as_time, self._seals, player) for r in rows]

    @_guarded
    def missing(self, folded: int) -> list[str]:
        with self._pool.connection() as conn:
            return [r[0] for r in conn.execute(_SQL.missing, (folded,)).fetchall()]

    @_guarded
    def versions(self, match_ids: Collection[str]) -> dict[str, int]:
        if not match_ids:
            return {}
        with self._pool.connection() as conn:
            rows = conn.execute(
                _SQL.versions(len(match_ids)),
                (list(match_ids),),
            ).fetchall()
        return {r[0]: int(r[1]) for r in rows}


def _as_time(value: Any) -> datetime:
    assert isinstance(value, datetime)
    return value


# The store's own statements and the binary forms its appends send, for a benchmark that
# times them on a copy of the tables (bench/partition_bench.py: a partitioned `events`).
SQL = _SQL
VISIBLE = _VISIBLE
READ_AFTER = _READ_AFTER
CHECKED_ROWS = _CHECKED_ROWS
PG_EPOCH_US = _PG_EPOCH_US
pack_i4 = _I4
pack_i8 = _I8
text_param = _text
insert_rows = _insert
