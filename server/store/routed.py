"""Reads served by a hot standby, never older than what a reader was already shown.

`RoutedStore(primary, standby, wal)` is an EventStore whose writes, and every read made to
decide a command, go to the primary. Reads made inside `lagging_reads()` (the query side:
views, replays, records, audit logs, the listing, watch catch-up, tournament reads) go to the
standby once it has caught up with the primary as it stood when the query began:

1. At its first read, a query asks the primary for its WAL position (`pg_current_wal_lsn()`,
   a statement that touches no table) and the standby for what it has replayed
   (`pg_last_wal_replay_lsn()`), waiting up to `lsn_wait_s` for the standby to pass it. Every
   write any replica acknowledged before the query began is below that position, so what the
   standby then shows is at least what any reader was shown before, by any replica. A
   standby still behind after the wait leaves the query to the primary.
2. Each stream read from the standby is also checked against the newest seq this process
   knows of the stream (its own appends, the global order its feed follows, every read) and
   the seq the reader says it has seen (`after_seq`): an answer that ends before it is read
   again on the primary. This costs no statement.

A standby that cannot be reached, or cancels a read that conflicts with its replay, costs the
reader only the read on the primary.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ParamSpec, Protocol, TypeVar

from bergen.api.stored import ChainReport, EventRow, StoredEvent
from bergen.domain.errors import StorageUnavailable

from ..keys import LogKeys
from .listing import FoldTransaction, MatchList, MatchSummary
from .model import Append, AppendResult, EventStore, StreamInfo
from .packed import PackedEvent
from .ratings import RatingsTables
from .records import SqlRecords
from .tlog import SqlTlog

log = logging.getLogger("bergen.server.store")


class _Query:
    """One query's reads: the stream and seq its reader says it has seen, and whether the
    standby was found caught up with the primary (asked once per query)."""

    __slots__ = ("caught_up", "seen", "stream_id")

    def __init__(self, stream_id: str, seen: int) -> None:
        self.stream_id = stream_id
        self.seen = seen
        self.caught_up: bool | None = None


_lagging: contextvars.ContextVar[_Query | None] = contextvars.ContextVar(
    "bergen_lagging", default=None
)

KNOWN_STREAMS = 200_000
"""Streams whose newest seq a routed store remembers (the oldest forgotten first)."""
LSN_WAIT_S = 0.05
"""How long a query waits for the standby to replay up to the primary's position."""

_T = TypeVar("_T")
_P = ParamSpec("_P")


@contextmanager
def lagging_reads(stream_id: str = "", seen: int = 0) -> Iterator[None]:
    """Reads in the block only show what is stored: a routed store may serve them from its
    standby, never older than the primary was when the block began (nor, for `stream_id`,
    than the seq `seen` the reader says it was shown). Nothing in the block may decide a
    command on what it reads. A block nested in another is part of it."""
    if _lagging.get() is not None and not stream_id:
        yield
        return
    token = _lagging.set(_Query(stream_id, max(seen, 0)))
    try:
        yield
    finally:
        _lagging.reset(token)


def lagging(f: Callable[_P, _T]) -> Callable[_P, _T]:
    """`f` with every read it makes in `lagging_reads()` (a query that decides nothing)."""

    @functools.wraps(f)
    def wrapped(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        with lagging_reads():
            return f(*args, **kwargs)

    return wrapped


def reads_may_lag() -> bool:
    return _lagging.get() is not None


class _Known:
    """Stream id -> the newest seq this process has seen; bounded, thread-safe."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._seqs: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, stream_id: str) -> int:
        with self._lock:
            return self._seqs.get(stream_id, 0)

    def learn(self, stream_id: str, seq: int) -> None:
        with self._lock:
            if self._seqs.get(stream_id, 0) < seq:
                self._seqs[stream_id] = seq
                self._seqs.move_to_end(stream_id)
                while len(self._seqs) > self._size:
                    self._seqs.popitem(last=False)

    def learn_all(self, events: Sequence[StoredEvent] | Sequence[PackedEvent]) -> None:
        newest: dict[str, int] = {}
        for e in events:
            if newest.get(e.stream_id, 0) < e.seq:
                newest[e.stream_id] = e.seq
        for stream_id, seq in newest.items():
            self.learn(stream_id, seq)


class WalPositions(Protocol):
    """The WAL positions a query is checked against (PostgreSQL's LSNs as numbers)."""

    def primary_lsn(self) -> int: ...

    def replayed_lsn(self) -> int | None: ...


class RoutingStats:
    """What routing did, for tests and logs (counts since start)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.standby_reads = 0
        """Reads answered by the standby."""
        self.behind = 0
        """Reads made on the primary because the standby was behind: behind the primary's
        WAL position when the query began, or its answer older than the stream's known seq."""
        self.failed = 0
        """Standby reads that failed (unreachable, cancelled), read again on the primary."""
        self.primary_pages = 0
        """Listing pages read on the primary because the standby was behind."""

    def add(self, name: str) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + 1)


class RoutedStore:
    """The event store on a primary, with the query side's reads on a hot standby."""

    def __init__(
        self,
        primary: EventStore,
        standby: EventStore,
        wal: WalPositions | None = None,
        *,
        known_streams: int = KNOWN_STREAMS,
        lsn_wait_s: float = LSN_WAIT_S,
    ) -> None:
        self._primary = primary
        self._standby = standby
        self._known = _Known(known_streams)
        self.stats = RoutingStats()
        self._match_list = RoutedMatchList(
            primary.match_list(), standby.match_list(), wal, self.stats, lsn_wait_s
        )
        self._warned = 0.0

    @property
    def primary(self) -> EventStore:
        return self._primary

    @property
    def standby(self) -> EventStore:
        return self._standby

    def known_version(self, stream_id: str) -> int:
        """The newest seq of the stream this process has seen (0: none)."""
        return self._known.get(stream_id)

    # writes and what decides them: the primary -------------------------------------------

    def append(self, batch: Append) -> AppendResult:
        result = self._primary.append(batch)
        self._known.learn(batch.stream_id, result.last_seq)
        return result

    def read_all(
        self, after_position: int = 0, limit: int = 1000, types: Collection[str] | None = None
    ) -> tuple[StoredEvent, ...]:
        """On the primary: the feed follows it, and what it reads sets the standby's floor."""
        events = self._primary.read_all(after_position, limit, types)
        self._known.learn_all(events)
        return events

    def read_all_packed(
        self, after_position: int, limit: int, types: Collection[str]
    ) -> tuple[PackedEvent, ...]:
        """On the primary, as `read_all`."""
        events = self._primary.read_all_packed(after_position, limit, types)
        self._known.learn_all(events)
        return events

    def head_position(self) -> int:
        return self._primary.head_position()

    def stream_version(self, stream_id: str) -> int:
        version = self._primary.stream_version(stream_id)
        self._known.learn(stream_id, version)
        return version

    def list_streams(self, after: str | None = None, limit: int = 100) -> tuple[StreamInfo, ...]:
        streams = self._primary.list_streams(after, limit)
        for s in streams:
            self._known.learn(s.stream_id, s.version)
        return streams

    def verify_chain(self, stream_id: str) -> ChainReport:
        return self._primary.verify_chain(stream_id)

    # reads of one stream: the standby when lagging is allowed -----------------------------

    def read_stream(
        self, stream_id: str, from_seq: int = 1, limit: int | None = None
    ) -> tuple[StoredEvent, ...]:
        def last(events: tuple[StoredEvent, ...]) -> int:
            return events[-1].seq if events else from_seq - 1

        return self._read(
            stream_id,
            lambda store: store.read_stream(stream_id, from_seq, limit),
            last,
            None if limit is None else from_seq + limit - 1,
        )

    def key_ids(self, stream_id: str, upto_seq: int) -> frozenset[str]:
        # On the primary: a standby's answer would not say how far it has read the stream.
        return self._primary.key_ids(stream_id, upto_seq)

    def read_rows(self, stream_id: str, from_seq: int = 1) -> tuple[EventRow, ...]:
        def last(rows: tuple[EventRow, ...]) -> int:
            return rows[-1].seq if rows else from_seq - 1

        return self._read(stream_id, lambda store: store.read_rows(stream_id, from_seq), last, None)

    def _read(
        self,
        stream_id: str,
        read: Callable[[EventStore], _T],
        last_of: Callable[[_T], int],
        cap: int | None,
    ) -> _T:
        query = _lagging.get()
        if query is not None:
            if not self._match_list.standby_ready(query):
                self.stats.add("behind")
                return self._on_primary(stream_id, read, last_of)
            floor = self._known.get(stream_id)
            if query.stream_id == stream_id:
                floor = max(floor, query.seen)  # for this read only: the reader's word
            if cap is not None:
                floor = min(floor, cap)
            try:
                got = read(self._standby)
            except Exception as e:  # the standby's trouble is never the reader's
                self.stats.add("failed")
                self._warn(e)
            else:
                newest = last_of(got)
                if newest >= floor:
                    self.stats.add("standby_reads")
                    self._known.learn(stream_id, newest)
                    return got
                self.stats.add("behind")
        return self._on_primary(stream_id, read, last_of)

    def _on_primary(
        self, stream_id: str, read: Callable[[EventStore], _T], last_of: Callable[[_T], int]
    ) -> _T:
        got = read(self._primary)
        self._known.learn(stream_id, last_of(got))
        return got

    def _warn(self, e: Exception) -> None:
        now = time.monotonic()
        if now - self._warned > 10.0:
            self._warned = now
            log.warning("standby read failed, read on the primary instead: %s", e)

    # the rest ----------------------------------------------------------------------------

    def match_list(self) -> MatchList:
        return self._match_list

    def ratings(self) -> RatingsTables:
        """On the primary: its folds and reads are few, and a player sees its own match's
        rating the moment it is folded."""
        return self._primary.ratings()

    def records(self) -> SqlRecords:
        """On the primary: a record made there is kept at once."""
        return self._primary.records()

    def tlog(self) -> SqlTlog:
        """On the primary: the tree is folded there, and its proofs answer for checkpoints
        just signed."""
        return self._primary.tlog()

    @property
    def log_keys(self) -> LogKeys | None:
        return self._primary.log_keys

    def close(self) -> None:
        try:
            self._standby.close()
        finally:
            self._primary.close()


class RoutedMatchList:
    """The listing folded on the primary, its pages read from the standby once it has
    replayed up to where the primary stood when the page was asked for."""

    def __init__(
        self,
        primary: MatchList,
        standby: MatchList,
        wal: WalPositions | None,
        stats: RoutingStats,
        lsn_wait_s: float,
    ) -> None:
        self._primary = primary
        self._standby = standby
        self._wal = wal
        self._stats = stats
        self._wait = lsn_wait_s

    def position(self, projection: str) -> int:
        return self._primary.position(projection)

    def checked_position(self, projection: str) -> tuple[int, str | None]:
        return self._primary.checked_position(projection)

    @contextmanager
    def folding(self, projection: str) -> Iterator[FoldTransaction]:
        with self._primary.folding(projection) as tx:
            yield tx

    def versions(self, match_ids: Collection[str]) -> dict[str, int]:
        return self._primary.versions(match_ids)

    def missing(self, folded: int) -> list[str]:
        return self._primary.missing(folded)

    def page(
        self, phase: str | None, player: str, before: int | None, limit: int, folded: int = 0
    ) -> list[MatchSummary]:
        query = _lagging.get()
        if query is not None and self.standby_ready(query):
            try:
                rows = self._standby.page(phase, player, before, limit, folded)
            except Exception as e:
                self._stats.add("failed")
                log.warning("standby listing page failed, read on the primary instead: %s", e)
            else:
                self._stats.add("standby_reads")
                return rows
        elif query is not None:
            self._stats.add("primary_pages")
        return self._primary.page(phase, player, before, limit, folded)

    def standby_ready(self, query: _Query) -> bool:
        """Whether the standby has replayed up to where the primary stood at the query's
        first read (asked once per query, waiting up to the bound); False without a way to
        tell, or when either server does not answer."""
        if query.caught_up is None:
            query.caught_up = self._caught_up()
        return query.caught_up

    def _caught_up(self) -> bool:
        wal = self._wal
        if wal is None:
            return False
        try:
            target = wal.primary_lsn()
            deadline = time.monotonic() + self._wait
            while True:
                replayed = wal.replayed_lsn()
                if replayed is not None and replayed >= target:
                    return True
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.002)
        except StorageUnavailable:
            return False


class StoreWal:
    """The WAL positions of two PostgreSQL stores (each has `wal_lsn()`)."""

    def __init__(self, primary: Any, standby: Any) -> None:
        self._primary = primary
        self._standby = standby

    def primary_lsn(self) -> int:
        return int(self._primary.wal_lsn() or 0)

    def replayed_lsn(self) -> int | None:
        try:
            lsn = self._standby.wal_lsn()
        except StorageUnavailable:
            return None
        return None if lsn is None else int(lsn)


__all__ = [
    "RoutedMatchList",
    "RoutedStore",
    "RoutingStats",
    "StoreWal",
    "WalPositions",
    "lagging",
    "lagging_reads",
    "reads_may_lag",
]
