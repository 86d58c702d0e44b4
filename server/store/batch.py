"""Turning a batch of new events into rows: seqs, canonical text, salts and chained hashes."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from bergen.api.chain import (
    canonical_json,
    content_bytes,
    event_hash,
    metadata_json,
    micros,
    new_salt,
    row_mac,
)
from bergen.api.stored import EventMetadata, StoredEvent

from .limits import COMMAND_ID_MAX, EVENT_TYPE_MAX, STREAM_ID_MAX
from .model import Append, NewEvent


@dataclass(frozen=True, slots=True)
class Row:
    """One event ready to insert."""

    event: NewEvent
    seq: int
    payload_json: str
    metadata_json: str
    command_id: str | None
    prev_hash: bytes
    hash: bytes
    salt: bytes
    key_id: str | None
    mac: bytes | None


WritingKey = tuple[str, bytes]
"""The id and the bytes of the log key that authenticates new rows."""


def check_append(batch: Append) -> None:
    """Raises ValueError for a batch no store accepts."""
    stream_id, expected_version = batch.stream_id, batch.expected_version
    events, command_id = batch.events, batch.command_id
    if not stream_id or len(stream_id) > STREAM_ID_MAX:
        raise ValueError(f"stream id must be 1 to {STREAM_ID_MAX} characters: {stream_id!r}")
    if expected_version < 0:
        raise ValueError(f"stream {stream_id}: expected version {expected_version} is negative")
    if not events:
        raise ValueError(f"stream {stream_id}: nothing to append")
    if command_id is not None and not 0 < len(command_id) <= COMMAND_ID_MAX:
        raise ValueError(f"command id must be 1 to {COMMAND_ID_MAX} characters: {command_id!r}")
    for event in events:
        if not event.type or len(event.type) > EVENT_TYPE_MAX:
            raise ValueError(f"event type must be 1 to {EVENT_TYPE_MAX} characters: {event.type!r}")


def build_rows(
    stream_id: str,
    expected_version: int,
    events: Sequence[NewEvent],
    metadata: EventMetadata,
    prev_hash: bytes,
    recorded_at: datetime | None = None,
    writing_key: WritingKey | None = None,
) -> list[Row]:
    """The rows for `events` after seq `expected_version`, whose hash is `prev_hash`,
    recorded at `recorded_at` and authenticated under `writing_key` (none without one).

    Raises ValueError for a payload that is not JSON-able.
    """
    meta = metadata_json(metadata)
    meta_text = meta.decode()
    at_us = micros(recorded_at or datetime.now(UTC))
    rows: list[Row] = []
    for i, event in enumerate(events):
        seq = expected_version + 1 + i
        payload = canonical_json(event.payload, f"stream {stream_id} seq {seq}: payload")
        salt = new_salt()
        content = content_bytes(stream_id, seq, event.type, event.schema_version, payload, meta)
        digest = event_hash(prev_hash, salt, content)
        payload_text = payload.decode()
        mac = None
        if writing_key is not None:
            key_id, key = writing_key
            mac = row_mac(
                key, key_id, stream_id, seq, event.type, event.schema_version, payload_text,
                meta_text, at_us, prev_hash, salt, digest,
            )  # fmt: skip
        rows.append(
            Row(
                event,
                seq,
                payload_text,
                meta_text,
                metadata.command_id if i == 0 else None,
                prev_hash,
                digest,
                salt,
                writing_key[0] if writing_key is not None else None,
                mac,
            )
        )
        prev_hash = digest
    return rows


def stored(
    stream_id: str, row: Row, position: int, recorded_at: datetime, metadata: EventMetadata
) -> StoredEvent:
    """The StoredEvent a row became."""
    return StoredEvent(
        stream_id=stream_id,
        seq=row.seq,
        position=position,
        type=row.event.type,
        schema_version=row.event.schema_version,
        payload=row.event.payload,
        metadata=metadata,
        recorded_at=recorded_at,
        prev_hash=row.prev_hash,
        hash=row.hash,
        salt=row.salt,
        key_id=row.key_id,
        mac=row.mac,
    )


class Heads:
    """Stream id -> (seq, hash) of the newest event this process knows of; bounded.

    The hash of seq n of a stream never changes, so a head known here is never wrong, only
    perhaps no longer the newest."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._heads: dict[str, tuple[int, bytes]] = {}
        self._lock = threading.Lock()

    def hash_at(self, stream_id: str, seq: int) -> bytes | None:
        head = self._heads.get(stream_id)
        return head[1] if head is not None and head[0] == seq else None

    def learn(self, stream_id: str, seq: int, digest: bytes) -> None:
        with self._lock:
            known = self._heads.get(stream_id)
            if known is not None and known[0] >= seq:
                return
            if known is None and len(self._heads) >= self._size:
                del self._heads[next(iter(self._heads))]
            self._heads[stream_id] = (seq, digest)
