"""A stored event as the store gives it and the audit log serves it, and what a walk of
its hash chain reports."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

GENESIS_HASH = bytes(32)
"""The `prev_hash` of every stream's first event."""

HASH_SIZE = 32
SALT_SIZE = 16


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
    key_id: str | None = None
    """The id of the log key that authenticates the row (None: written without one)."""
    mac: bytes | None = None
    """HMAC-SHA256 of the whole row under that key (`bergen.api.chain.row_mac`)."""


class EventRow(NamedTuple):
    """What folding a stream needs of a stored event, read without the rest of the row
    (its neighbours' hashes, salt and time): loading a match reads hundreds of these."""

    stream_id: str
    seq: int
    type: str
    schema_version: int
    payload: Mapping[str, Any]
    metadata: EventMetadata


class ChainFault(enum.Enum):
    """Why a stream's hash chain broke."""

    MISSING = "missing seq"
    CHANGED = "changed content"
    INSERTED = "inserted"
    REORDERED = "reordered"
    PREV_LINK = "wrong prev link"
    MALFORMED = "malformed row"
    UNAUTHENTIC = "authenticator does not verify"


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
