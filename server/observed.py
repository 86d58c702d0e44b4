"""The event store as the operator sees it: each append timed and counted (`Metrics`), and
the store's work inside a traced call given a span of its own (`bergen.server.tracing`).

`ObservedStore` wraps any `EventStore` and changes nothing it does: it answers what the store
answers and raises what it raises. Without metrics and without a tracer the server does not
wrap its store at all.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from bergen.domain.errors import ConcurrencyConflict

from .keys import LogKeys
from .metrics import Metrics
from .store import (
    Append,
    AppendResult,
    ChainReport,
    EventRow,
    EventStore,
    MatchList,
    RatingsTables,
    SqlRecords,
    SqlTlog,
    StoredEvent,
    StreamInfo,
)
from .store.packed import PackedEvent

SpanOpener = Callable[[str, dict[str, Any]], AbstractContextManager[Any]]
"""Opens a child span of the current call's span, named and with attributes; a context
manager that does nothing when no traced call is current (`bergen.server.tracing`)."""


def _no_span(_name: str, _attributes: dict[str, Any]) -> AbstractContextManager[Any]:
    return nullcontext()


class ObservedStore:
    """An `EventStore` that reports its appends and reads (see the module)."""

    def __init__(
        self,
        store: EventStore,
        metrics: Metrics | None = None,
        span: SpanOpener | None = None,
        system: str = "",
    ) -> None:
        self._store = store
        self._metrics = metrics
        self._span = span or _no_span
        self._system = system

    @property
    def inner(self) -> EventStore:
        return self._store

    def append(self, batch: Append) -> AppendResult:
        attributes = {
            "db.system": self._system,
            "bergen.stream_id": batch.stream_id,
            "bergen.expected_version": batch.expected_version,
            "bergen.events": len(batch.events),
        }
        with self._span("bergen.store.append", attributes):
            started = time.perf_counter()
            outcome = "failed"
            try:
                result = self._store.append(batch)
                outcome = "replayed" if result.replayed else "written"
                return result
            except ConcurrencyConflict:
                outcome = "conflict"
                raise
            finally:
                if self._metrics is not None:
                    self._metrics.appended(outcome, time.perf_counter() - started)

    def read_stream(
        self, stream_id: str, from_seq: int = 1, limit: int | None = None
    ) -> tuple[StoredEvent, ...]:
        with self._span("bergen.store.read_stream", self._read(stream_id, from_seq)):
            return self._store.read_stream(stream_id, from_seq, limit)

    def key_ids(self, stream_id: str, upto_seq: int) -> frozenset[str]:
        with self._span("bergen.store.key_ids", self._read(stream_id, 1)):
            return self._store.key_ids(stream_id, upto_seq)

    def read_rows(self, stream_id: str, from_seq: int = 1) -> tuple[EventRow, ...]:
        with self._span("bergen.store.read_rows", self._read(stream_id, from_seq)):
            return self._store.read_rows(stream_id, from_seq)

    def _read(self, stream_id: str, from_seq: int) -> dict[str, Any]:
        return {
            "db.system": self._system,
            "bergen.stream_id": stream_id,
            "bergen.from_seq": from_seq,
        }

    def read_all(
        self, after_position: int = 0, limit: int = 1000, types: Collection[str] | None = None
    ) -> tuple[StoredEvent, ...]:
        attributes = {"db.system": self._system, "bergen.after_position": after_position}
        with self._span("bergen.store.read_all", attributes):
            return self._store.read_all(after_position, limit, types)

    def read_all_packed(
        self, after_position: int, limit: int, types: Collection[str]
    ) -> tuple[PackedEvent, ...]:
        attributes = {"db.system": self._system, "bergen.after_position": after_position}
        with self._span("bergen.store.read_all_packed", attributes):
            return self._store.read_all_packed(after_position, limit, types)

    def head_position(self) -> int:
        return self._store.head_position()

    def match_list(self) -> MatchList:
        return self._store.match_list()

    def ratings(self) -> RatingsTables:
        return self._store.ratings()

    def records(self) -> SqlRecords:
        return self._store.records()

    def tlog(self) -> SqlTlog:
        return self._store.tlog()

    @property
    def log_keys(self) -> LogKeys | None:
        return self._store.log_keys

    def stream_version(self, stream_id: str) -> int:
        return self._store.stream_version(stream_id)

    def list_streams(self, after: str | None = None, limit: int = 100) -> tuple[StreamInfo, ...]:
        return self._store.list_streams(after, limit)

    def verify_chain(self, stream_id: str) -> ChainReport:
        with self._span("bergen.store.verify_chain", self._read(stream_id, 1)):
            return self._store.verify_chain(stream_id)

    def close(self) -> None:
        self._store.close()

    def __getattr__(self, name: str) -> Any:
        # What a store offers beyond the interface is reached as it is, unobserved.
        return getattr(self._store, name)
