"""Checking authenticators: each row of a stream read for folding (`check_rows`), and a walk of
a stream's hash chain (`verify_chain`)."""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from bergen.api.chain import (
    KeyOf,
    canonical_json,
    metadata_json,
    micros,
    not_linked,
    not_written_here,
    parse_metadata,
    row_mac,
    row_mac_message_of,
)
from bergen.api.stored import ChainFault, ChainReport, StoredEvent
from bergen.domain.dealing import hmac_on, hmac_pads
from bergen.domain.errors import CorruptRecord, LogTampered

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


class Keyed:
    """`row_mac` under the keys of a LogKeys, named by key id."""

    def __init__(self, keys: LogKeys) -> None:
        self._keys = keys
        self._pads: dict[str, tuple[tuple[Any, Any], bytes]] = {}
        """By key id: its HMAC's pads and the id as UTF-8, set up once (a fold checks every
        row it reads: setting the key up again for each was most of what checking cost)."""

    def _pad(self, key_id: str) -> tuple[tuple[Any, Any], bytes] | None:
        """The HMAC pads of the key `key_id` names and the id as UTF-8 (None: no such key)."""
        known = self._pads.get(key_id)
        if known is None:
            key = self._keys.key(key_id)
            if key is None:
                return None
            known = self._pads[key_id] = (hmac_pads(key), key_id.encode())
        return known

    def mac(
        self, key_id: str, stream_id: str, seq: int, type_: str, schema_version: int,
        payload_text: str, metadata_text: str, recorded_us: int, prev_hash: bytes,
        salt: bytes, digest: bytes,
    ) -> bytes | None:  # fmt: skip
        """The row's authenticator (`row_mac`) under the key `key_id` names (None: no such
        key)."""
        known = self._pad(key_id)
        if known is None:
            return None
        message = row_mac_message_of(
            known[1], stream_id.encode(), seq, type_.encode(), schema_version,
            payload_text.encode(), metadata_text.encode(), recorded_us, prev_hash, salt, digest,
        )  # fmt: skip
        return hmac_on(known[0], message)

    def mac_of_message(self, key_id: str, message: bytes | memoryview) -> bytes | None:
        """The authenticator of a row whose `row_mac_message` is `message`, under the key
        `key_id` names (None: no such key)."""
        known = self._pad(key_id)
        return None if known is None else hmac_on(known[0], message)


class ReadEvent(StoredEvent):
    """A StoredEvent as a store read it from its row, also holding the row's payload and
    metadata text as stored (`texts`): the text its authenticator covers, checked as is rather
    than encoded again from the parsed values. Equal to the StoredEvent of the same fields;
    one made any other way (`_replace`, `_make`) holds no text and is checked on its values."""

    texts: tuple[str, str] | None = None


def read_event(row: Sequence[Any], recorded_at: Callable[[Any], Any] | None = None) -> ReadEvent:
    """The ReadEvent of a global-order row as selected (stream, seq, position, type, schema
    version, payload text, metadata text, recorded_at, prev_hash, hash, salt, key id, mac);
    `recorded_at` turns the stored time into a datetime when the backend does not. Raises
    CorruptRecord for a row that does not decode."""
    try:
        event = ReadEvent(
            row[0], row[1], row[2], row[3], row[4], json.loads(row[5]), parse_metadata(row[6]),
            row[7] if recorded_at is None else recorded_at(row[7]), bytes(row[8]),
            bytes(row[9]), bytes(row[10]), row[11],
            None if row[12] is None else bytes(row[12]),
        )  # fmt: skip
    except (ValueError, KeyError, TypeError) as e:
        raise CorruptRecord(
            f"stream {row[0]} seq {row[1]}: undecodable event row: {e!r}",
            match_id=row[0], seq=row[1], position=row[2],
        ) from e  # fmt: skip
    event.texts = (row[5], row[6])
    return event


def check_rows(
    stream_id: str,
    rows: Sequence[Sequence[Any]],
    key_of: KeyOf,
    prev: bytes | None,
    recorded_us: Callable[[Any], int] | None = None,
    first_seq: int | None = None,
) -> None:
    """`bergen.api.chain.authenticate`, as fast as a row's authenticator allows: the same
    checks in the same order (each row's seq, its authenticator under the key it names, its
    link to the row before), with the same LogTampered naming the first row that fails.

    `rows` as selected: (seq, type, schema_version, payload text, metadata text, recorded_at,
    prev_hash, hash, salt, key_id, mac); recorded_at is whole microseconds since 1970 UTC
    as read, or whatever `recorded_us` turns into them. The message is `row_mac`'s, its stream
    id, key ids and types encoded once, and its HMAC on each key's pads set up once. With
    `first_seq`, the rows must begin there.
    """
    if not rows:
        return
    keys: dict[str, tuple[tuple[Any, Any], bytes]] = {}
    """Key id -> its key's HMAC pads (`hmac_pads`) and the id as UTF-8."""
    kinds: dict[str, bytes] = {}
    stream = stream_id.encode()
    compare = hmac.compare_digest
    message = row_mac_message_of
    expected_seq = rows[0][0] if first_seq is None else first_seq
    if prev is None:
        prev = bytes(rows[0][6])
    for r in rows:
        (
            seq,
            kind,
            version,
            payload_text,
            metadata_text,
            at,
            prev_hash,
            digest,
            salt,
            key_id,
            mac,
        ) = r
        if seq != expected_seq:
            raise LogTampered(
                f"match {stream_id}: seq {expected_seq} is missing", match_id=stream_id,
                seq=expected_seq,
            )  # fmt: skip
        keyed = keys.get(key_id) if key_id is not None else None
        if keyed is None:
            key = key_of(key_id) if key_id is not None else None
            if mac is None or key is None:
                why = "has no authenticator" if mac is None else f"names an unknown key {key_id!r}"
                raise LogTampered(
                    f"match {stream_id}: seq {seq} {why}", match_id=stream_id, seq=seq
                )
            keyed = keys[key_id] = (hmac_pads(key), key_id.encode())
        elif mac is None:
            raise LogTampered(
                f"match {stream_id}: seq {seq} has no authenticator", match_id=stream_id, seq=seq
            )
        kind_bytes = kinds.get(kind)
        if kind_bytes is None:
            kind_bytes = kinds[kind] = kind.encode()
        prev_hash, digest, salt = bytes(prev_hash), bytes(digest), bytes(salt)
        expected = hmac_on(
            keyed[0],
            message(
                keyed[1], stream, seq, kind_bytes, version, payload_text.encode(),
                metadata_text.encode(), at if recorded_us is None else recorded_us(at),
                prev_hash, salt, digest,
            ),
        )  # fmt: skip
        if not compare(expected, bytes(mac)):
            raise not_written_here(stream_id, seq)
        if prev_hash != prev:
            raise not_linked(stream_id, seq)
        prev = digest
        expected_seq += 1
