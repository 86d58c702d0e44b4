"""What goes into the store, what comes out, and the one interface both backends implement."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from bergen.api.stored import ChainReport, EventMetadata, EventRow, StoredEvent
from bergen.domain.rules import RULES_VERSION

from ..keys import LogKeys
from .listing import MatchList
from .packed import PackedEvent
from .ratings import RatingsTables
from .records import SqlRecords
from .tlog import SqlTlog


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event to append: its type, the version of its payload's schema, and the payload.

    The payload is JSON-able: dicts with str keys, lists, str, int, bool and None.
    """

    type: str
    schema_version: int
    payload: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Append:
    """One append: `events` for `stream_id` after seq `expected_version` (0 for a new
    stream), recorded with the same metadata on every event (`actor`, `command_id`,
    `rules_version`, `extra`)."""

    stream_id: str
    expected_version: int
    events: Sequence[NewEvent]
    command_id: str | None = None
    actor: str | None = None
    rules_version: str = RULES_VERSION
    extra: Mapping[str, str] = field(default_factory=dict)

    @property
    def metadata(self) -> EventMetadata:
        """What every event of the batch is recorded with."""
        return EventMetadata(self.actor, self.command_id, self.rules_version, dict(self.extra))


@dataclass(frozen=True, slots=True)
class AppendResult:
    """The events one append wrote; `replayed` when the command id had been appended before,
    in which case these are the first append's events and nothing new was written."""

    stream_id: str
    events: tuple[StoredEvent, ...]
    replayed: bool = False

    @property
    def first_seq(self) -> int:
        return self.events[0].seq

    @property
    def last_seq(self) -> int:
        """The stream's version right after this append."""
        return self.events[-1].seq


@dataclass(frozen=True, slots=True)
class StreamInfo:
    """A stream and its version (its last seq)."""

    stream_id: str
    version: int


class EventStore(Protocol):
    """The event store: append-only streams of events, gap-free seq from 1 in each stream.

    Every method raises StorageUnavailable when the database cannot be reached or written
    (down, connection lost, disk full, read-only), never the driver's own exception.
    """

    def append(self, batch: Append) -> AppendResult:
        """Append `batch.events` atomically after seq `batch.expected_version`, each
        recorded with the batch's metadata.

        With a `command_id` already appended to this stream, returns that append's result
        with `replayed=True` and writes nothing. Raises ConcurrencyConflict when the stream
        is not at the expected version, ValueError for an empty batch, an id or type out of
        bounds, or a payload that is not JSON-able.
        """
        ...

    def read_stream(
        self, stream_id: str, from_seq: int = 1, limit: int | None = None
    ) -> tuple[StoredEvent, ...]:
        """The stream's events from `from_seq` in seq order, at most `limit` (empty for an
        unknown stream)."""
        ...

    def read_rows(self, stream_id: str, from_seq: int = 1) -> tuple[EventRow, ...]:
        """What `read_stream` gives, less the chain fields, for folding (faster)."""
        ...

    def key_ids(self, stream_id: str, upto_seq: int) -> frozenset[str]:
        """The ids of the log keys that authenticate the stream's rows up to `upto_seq` (none
        for rows written without a log key)."""
        ...

    def read_all(
        self, after_position: int = 0, limit: int = 1000, types: Collection[str] | None = None
    ) -> tuple[StoredEvent, ...]:
        """Up to `limit` events of every stream in global order, after the event at
        `after_position` (0: from the start). With `types`, only the events of those types,
        and the last event of the order so far whatever its type, which says how far the
        read went: a reader that passes over the other types reads only what it folds.

        The global order is commit-safe: an event that commits late is never skipped by a reader
        that passes back the position of the last event it got. On PostgreSQL it is ordered by
        writing transaction, then position, so positions need not increase along it. Raises
        NotFound when `after_position` names no visible event, CorruptRecord (with the
        row's match_id, seq and position in its metadata) for a row that does not decode.
        """
        ...

    def read_all_packed(
        self, after_position: int, limit: int, types: Collection[str]
    ) -> tuple[PackedEvent, ...]:
        """`read_all` of `types`, each row undecoded with the bytes its authenticator
        covers (`bergen.server.store.packed`), read as one value a page where the backend
        can: for a fold that reads many rows and decodes few. Raises NotFound for an unknown
        `after_position`, CorruptRecord for a page that does not parse (with no position in
        its metadata: `read_all` then says which row does not decode).
        """
        ...

    def head_position(self) -> int:
        """The position of the last event in the global order so far (0: none yet), for a
        reader that wants only what comes after: `read_all(head_position())`."""
        ...

    def match_list(self) -> MatchList:
        """The match listing's tables in the same database (a read model)."""
        ...

    def ratings(self) -> RatingsTables:
        """The ratings' tables in the same database (a read model)."""
        ...

    def records(self) -> SqlRecords:
        """The kept records of ended matches in the same database (a cache, checked)."""
        ...

    def tlog(self) -> SqlTlog:
        """The transparency log's tree in the same database (folded from the log, checked
        against the checkpoints signed)."""
        ...

    @property
    def log_keys(self) -> LogKeys | None:
        """The keys rows are authenticated with and checked under (None: neither)."""
        ...

    def stream_version(self, stream_id: str) -> int:
        """The stream's last seq, 0 for a stream with no event."""
        ...

    def list_streams(self, after: str | None = None, limit: int = 100) -> tuple[StreamInfo, ...]:
        """Up to `limit` streams with their versions, by stream id, after the id `after`."""
        ...

    def verify_chain(self, stream_id: str) -> ChainReport:
        """Re-walk the stream's hash chain and report the first bad seq and why."""
        ...

    def close(self) -> None:
        """Release connections. The store is unusable afterwards."""
        ...
