"""Adding the authenticators to a walk of a stream's hash chain (`verify_chain`)."""

from __future__ import annotations

import hmac
from collections.abc import Callable, Sequence
from typing import TypeVar

from bergen.api.chain import canonical_json, metadata_json, micros, row_mac
from bergen.api.stored import ChainFault, ChainReport, StoredEvent
from bergen.domain.errors import CorruptRecord

from ..keys import LogKeys

T = TypeVar("T")


def unauthentic(event: StoredEvent, keys: LogKeys) -> str | None:
    """Why `event`'s authenticator does not verify under `keys`; None when it does."""
    if event.mac is None or event.key_id is None:
        return f"seq {event.seq} has no authenticator"
    key = keys.key(event.key_id)
    if key is None:
        return f"seq {event.seq} names an unknown log key {event.key_id!r}"
    try:
        expected = row_mac(
            key,
            event.key_id,
            event.stream_id,
            event.seq,
            event.type,
            event.schema_version,
            canonical_json(event.payload, "payload").decode(),
            metadata_json(event.metadata).decode(),
            micros(event.recorded_at),
            event.prev_hash,
            event.salt,
            event.hash,
        )
    except ValueError as e:
        return f"seq {event.seq}: {e}"
    if not hmac.compare_digest(expected, event.mac):
        return f"seq {event.seq} was not written by this server (its authenticator does not verify)"
    return None


def check_report(
    report: ChainReport,
    rows: Sequence[T],
    decode: Callable[[T], StoredEvent],
    keys: LogKeys | None,
) -> ChainReport:
    """`report` of a chain walk over `rows`, or the first row before its fault whose
    authenticator does not verify under `keys` (none checked without keys)."""
    if keys is None:
        return report
    for row in rows:
        try:
            event = decode(row)
        except CorruptRecord:
            return report
        if report.bad_seq is not None and event.seq >= report.bad_seq:
            return report
        why = unauthentic(event, keys)
        if why is not None:
            return ChainReport(
                report.stream_id,
                event.seq - 1,
                event.prev_hash,
                event.seq,
                ChainFault.UNAUTHENTIC,
                why,
            )
    return report
