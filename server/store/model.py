"""What goes into the store, what comes out, and the one interface both backends implement."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from bergen.domain.rules import RULES_VERSION


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event to append: its type, the version of its payload's schema, and the payload.

    The payload is JSON-able: dicts with str keys, lists, str, int, bool and None.
    """

    type: str
    schema_version: int
    payload: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class EventMetadata:
    """Who and what wrote an event, recorded with it and covered by its hash."""

    actor: str | None
    command_id: str | None
    rules_version: str
    extra: Mapping[str, str] = field(default_factory=dict)
    """Whatever else the application records with the events (e.g. a token hash)."""


class StoredEvent(NamedTuple):
    """An event as stored. `salt` keeps `hash` from revealing hidden content: show no salt of a
    live match to a player.

    A named tuple: a match load builds hundreds of these, and a tuple is built in C."""

    stream_id: str
    seq: int
    position: int
    type: str
    schema_version: int
    payload: Mapping[str, Any]
    metadata: EventMetadata
    recorded_at: datetime
    prev_hash: bytes
    hash: bytes
    salt: bytes


class EventRow(NamedTuple):
    """What folding a stream needs of a stored event, read without the rest of the row
    (its neighbours' hashes, salt and time): loading a match reads hundreds of these."""

    stream_id: str
    seq: int
    type: str
    schema_version: int
    payload: Mapping[str, Any]
    metadata: EventMetadata


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


class ChainFault(enum.Enum):
    """Why a stream's hash chain broke."""

    MISSING = "missing seq"
    CHANGED = "changed content"
    INSERTED = "inserted"
    REORDERED = "reordered"
    PREV_LINK = "wrong prev link"
    MALFORMED = "malformed row"


@dataclass(frozen=True, slots=True)
class ChainReport:
    """The result of re-walking one stream's chain: ok, or the first bad seq and why.

    `head_hash` is the hash of the last event walked; compare it with a hash published earlier
    to detect events removed from the end.
    """

    stream_id: str
    events: int
    head_hash: bytes
    bad_seq: int | None = None
    fault: ChainFault | None = None
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.fault is None


class EventStore(Protocol):
    """The event store: append-only streams of events, gap-free seq from 1 in each stream."""

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

        `actor`, `command_id`, `rules_version` and `extra` are recorded as every event's
        metadata. With a `command_id` already appended to this stream, returns that append's
        result with `replayed=True` and writes nothing. Raises ConcurrencyConflict when the
        stream is not at `expected_version`, ValueError for an empty batch or a payload that is
        not JSON-able.
        """
        ...

    def read_stream(self, stream_id: str, from_seq: int = 1) -> tuple[StoredEvent, ...]:
        """The stream's events from `from_seq` in seq order (empty for an unknown stream)."""
        ...

    def read_rows(self, stream_id: str, from_seq: int = 1) -> tuple[EventRow, ...]:
        """What `read_stream` gives, less the chain fields, for folding (faster)."""
        ...

    def read_all(self, after_position: int = 0, limit: int = 1000) -> tuple[StoredEvent, ...]:
        """Up to `limit` events of every stream in global order, after the event at
        `after_position` (0: from the start).

        The global order is commit-safe: an event that commits late is never skipped by a reader
        that passes back the position of the last event it got. On PostgreSQL it is ordered by
        writing transaction, then position, so positions need not increase along it. Raises
        NotFound when `after_position` names no visible event.
        """
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
