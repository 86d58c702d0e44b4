"""The hash chain: a canonical encoding of each event, and the walk that checks a stream.

hash = SHA-256(prev_hash || salt || JCS(content)), where content is the RFC 8785 (JCS) encoding of
{stream_id, seq, type, schema_version, payload, metadata}; prev_hash is the hash of the event at
seq - 1, or 32 zero bytes for seq 1. The 16-byte random salt keeps a hash shown during a live
match from being brute-forced back to a hidden tile; it is revealed with the match record.

The chain shows a change to anyone, but anyone who can write the database can also recompute
it. So each row also carries an authenticator only the servers can make: HMAC-SHA256, under
the log key named by the row's key id, of every field of the row (`row_mac`). The servers
check it, and the chain's links, before folding a row.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any, TypeVar

import rfc8785

from bergen.domain.dealing import hmac_on, hmac_pads
from bergen.domain.errors import CorruptRecord, LogTampered

from .stored import (
    GENESIS_HASH,
    HASH_SIZE,
    SALT_SIZE,
    ChainFault,
    ChainReport,
    EventMetadata,
    EventRow,
    StoredEvent,
)

T = TypeVar("T")


_SALTS_AT_ONCE = 256
_salts: Iterator[bytes] = iter(())
"""Salts cut from one read of the OS's CSPRNG and not yet handed out: one read for many
salts saves a system call, and a hand-off of the interpreter's lock, per row. `next` on a
list's iterator is atomic, so no salt is handed out twice."""


def _forget_salts() -> None:
    # A forked worker must not hand out the salts its parent holds (nor the parent hand out
    # the child's): each process reads its own.
    global _salts
    _salts = iter(())


os.register_at_fork(after_in_child=_forget_salts)


def new_salt() -> bytes:
    """16 random bytes from the OS's CSPRNG, never handed out twice."""
    global _salts
    salt = next(_salts, None)
    if salt is None:
        data = secrets.token_bytes(SALT_SIZE * _SALTS_AT_ONCE)
        cut = [data[i : i + SALT_SIZE] for i in range(0, len(data), SALT_SIZE)]
        salt = cut.pop()
        _salts = iter(cut)
    return salt


_INT_MAX = 2**53 - 1
_quote: Callable[[str], str] = json.encoder.encode_basestring
_plain_json: Callable[[Any], str] = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), sort_keys=True, check_circular=False
).encode
"""The json module's C encoder, which gives the JCS text of dicts whose keys are ASCII and
whose values are strings, None or such dicts: the same escaper as `_quote`, keys in code
point order (UTF-16 order, for ASCII)."""


def _utf16_order(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def _encode(value: Any, out: list[str]) -> None:
    """Append the RFC 8785 text of `value` to `out`.

    The same output as rfc8785.dumps, several times faster: strings go through the C escaper
    of the json module, which escapes exactly what JCS escapes (", \\ and C0 controls, with
    the same short forms and lowercase hex); floats are left to rfc8785.
    """
    if isinstance(value, str):
        out.append(_quote(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        if not -_INT_MAX <= value <= _INT_MAX:
            raise ValueError(f"{value} exceeds the integers JSON numbers hold exactly")
        out.append(str(int(value)))
    elif isinstance(value, Mapping):
        keys = list(value)
        for key in keys:
            if not isinstance(key, str):
                raise TypeError(f"object key {key!r} is not a string")
        # JCS orders members by UTF-16 code units; code point order differs only beyond ASCII.
        keys.sort(key=None if all(k.isascii() for k in keys) else _utf16_order)
        out.append("{")
        for i, key in enumerate(keys):
            if i:
                out.append(",")
            out.append(_quote(key))
            out.append(":")
            _encode(value[key], out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _encode(item, out)
        out.append("]")
    elif isinstance(value, float):
        out.append(rfc8785.dumps(value).decode())
    else:
        raise TypeError(f"{type(value).__name__} is not a JSON type")


_LONG = re.compile(r"\d{16,}")
_ENCODED = re.compile(r"[\ud800-\U0010ffff]")


class _Inexact(Exception):
    pass


def _no_float(text: str) -> float:
    raise _Inexact(text)


def _plain_text(value: Any) -> str | None:
    """The C encoder's text of `value` when it is the JCS text, else None: when it reads
    back as `value` itself (every key a string) with no float in it, and has no character
    from U+D800 up (where code point and UTF-16 order part, and lone surrogates) and no run
    of digits beyond the integers JSON numbers hold exactly."""
    try:
        text = _plain_json(value)
        if not text.isascii() and _ENCODED.search(text):
            return None
        if json.loads(text, parse_float=_no_float) != value:
            return None
    except (TypeError, ValueError, RecursionError, _Inexact):
        return None
    if any(int(m.group()) > _INT_MAX for m in _LONG.finditer(text)):
        return None
    return text


def canonical_json(value: Any, what: str) -> bytes:
    """The RFC 8785 encoding of `value`. Raises ValueError, naming `what`, if not JSON-able.

    Large objects go through the json module's C encoder when its text is the JCS text
    (`_plain_text`), several times faster than walking them here."""
    if isinstance(value, dict) and len(value) > 4:
        text = _plain_text(value)
        if text is not None:
            return text.encode("utf-8")
    out: list[str] = []
    try:
        _encode(value, out)
        return "".join(out).encode("utf-8")
    except (rfc8785.CanonicalizationError, TypeError, ValueError, RecursionError) as e:
        raise ValueError(f"{what} is not JSON-able: {e}") from e


def metadata_json(metadata: EventMetadata) -> bytes:
    """The canonical encoding of an event's metadata."""
    extra = dict(metadata.extra)
    value = {
        "actor": metadata.actor,
        "command_id": metadata.command_id,
        "extra": extra,
        "rules_version": metadata.rules_version,
    }
    if (
        _text_or_none(metadata.actor)
        and _text_or_none(metadata.command_id)
        and type(metadata.rules_version) is str
        and all(type(k) is str and k.isascii() and type(v) is str for k, v in extra.items())
    ):
        try:
            return _plain_json(value).encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: canonical_json says so
            pass
    return canonical_json(value, "event metadata")


def _text_or_none(value: object) -> bool:
    return value is None or type(value) is str


def content_bytes(
    stream_id: str,
    seq: int,
    type_: str,
    schema_version: int,
    payload_json: bytes,
    metadata_json: bytes,
) -> bytes:
    """JCS of the event's content, built from the already canonical payload and metadata.

    Equal to rfc8785.dumps of the whole object (members in JCS key order), without encoding a
    large payload twice.
    """
    tail = (
        f',"schema_version":{int(schema_version)},"seq":{int(seq)},'
        f'"stream_id":{_quote(stream_id)},"type":{_quote(type_)}}}'
    )
    try:
        encoded_tail = tail.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"stream id or event type is not JSON-able: {e}") from e
    return b"".join((b'{"metadata":', metadata_json, b',"payload":', payload_json, encoded_tail))


def event_hash(prev_hash: bytes, salt: bytes, content: bytes) -> bytes:
    """SHA-256 over the predecessor's hash, the salt and the canonical content."""
    h = hashlib.sha256(prev_hash)
    h.update(salt)
    h.update(content)
    return h.digest()


def _content_of(event: StoredEvent, seq: int) -> bytes:
    return content_bytes(
        event.stream_id,
        seq,
        event.type,
        event.schema_version,
        canonical_json(event.payload, "payload"),
        metadata_json(event.metadata),
    )


def parse_metadata(text: str | bytes) -> EventMetadata:
    """The metadata of a stored row. Raises ValueError for malformed text.

    Every event of one append shares its metadata, so the parsed value (immutable) is
    remembered by its text: loading a match parses each command's metadata once.
    """
    key = text if isinstance(text, str) else text.decode()
    known = _METADATA.get(key)
    if known is not None:
        return known
    raw: Mapping[str, Any] = json.loads(key)
    if not isinstance(raw, Mapping):
        raise ValueError("metadata must be an object")
    extra = raw.get("extra") or {}
    if not isinstance(extra, Mapping):
        raise ValueError("metadata extra must be an object")
    parsed = EventMetadata(
        actor=raw.get("actor"),
        command_id=raw.get("command_id"),
        rules_version=raw["rules_version"],
        extra=MappingProxyType(dict(extra)),
    )
    if len(_METADATA) >= _METADATA_CACHE:
        _METADATA.clear()
    _METADATA[key] = parsed
    return parsed


def event_rows(stream_id: str, rows: Sequence[Sequence[Any]]) -> tuple[EventRow, ...]:
    """EventRows from selected (seq, type, schema_version, payload text, metadata text)
    rows of one stream. Raises CorruptRecord for a row that cannot be decoded."""
    try:
        payloads = parse_payloads([r[3] for r in rows])
        return tuple(
            EventRow(stream_id, r[0], r[1], r[2], payload, parse_metadata(r[4]))
            for r, payload in zip(rows, payloads, strict=True)
        )
    except (ValueError, KeyError, TypeError) as e:
        raise CorruptRecord(f"stream {stream_id}: undecodable event row: {e!r}") from e


def parse_payloads(texts: Sequence[str]) -> list[Any]:
    """The payloads of a stream's rows, parsed as one JSON array (a third of the time of
    one parse each). Raises ValueError for malformed text."""
    if not texts:
        return []
    parsed = json.loads("[" + ",".join(texts) + "]")
    if not isinstance(parsed, list) or len(parsed) != len(texts):
        # A row whose text is not one JSON value: parse each, so the error names it.
        return [json.loads(t) for t in texts]
    return parsed


_METADATA: dict[str, EventMetadata] = {}
_METADATA_CACHE = 4096


def verify_rows(
    stream_id: str, rows: Sequence[T], decode: Callable[[T], StoredEvent]
) -> ChainReport:
    """Decode and walk a stream's rows in seq order; an undecodable row is a MALFORMED fault."""
    events: list[StoredEvent] = []
    for row in rows:
        try:
            events.append(decode(row))
        except CorruptRecord as e:
            report = verify_events(stream_id, events)
            if not report.ok:
                return report
            return ChainReport(
                stream_id,
                report.events,
                report.head_hash,
                len(events) + 1,
                ChainFault.MALFORMED,
                str(e),
            )
    return verify_events(stream_id, events)


def verify_events(stream_id: str, events: Sequence[StoredEvent]) -> ChainReport:
    """Walk a stream's stored events in seq order; report the first fault found."""
    last_seq = max(events[-1].seq, len(events)) if events else 0
    expected_seq = 1
    prev = GENESIS_HASH
    stored: list[StoredEvent] = []

    def bad(event: StoredEvent, fault: ChainFault, detail: str) -> ChainReport:
        return ChainReport(stream_id, len(stored), prev, event.seq, fault, detail)

    for event in events:
        if len(event.hash) != HASH_SIZE or len(event.salt) != SALT_SIZE:
            return bad(
                event, ChainFault.MALFORMED, f"seq {event.seq}: hash or salt has the wrong size"
            )
        if event.seq != expected_seq:
            return bad(
                event,
                ChainFault.MISSING,
                f"seq {expected_seq} is missing: the next stored event has seq {event.seq}",
            )
        try:
            content = _content_of(event, event.seq)
        except ValueError as e:
            return bad(event, ChainFault.MALFORMED, f"seq {event.seq}: {e}")
        if event_hash(event.prev_hash, event.salt, content) != event.hash:
            moved_from = _written_as(event, last_seq + 1)
            if moved_from is not None and moved_from < event.seq:
                return bad(
                    event,
                    ChainFault.INSERTED,
                    f"seq {event.seq} holds the event written as seq {moved_from}: "
                    "events were inserted before it",
                )
            if moved_from is not None:
                return bad(
                    event,
                    ChainFault.REORDERED,
                    f"seq {event.seq} holds the event written as seq {moved_from}",
                )
            return bad(
                event,
                ChainFault.CHANGED,
                f"seq {event.seq}: the stored hash does not match the event's content",
            )
        if event.prev_hash != prev:
            return bad(
                event,
                ChainFault.PREV_LINK,
                f"seq {event.seq}: prev_hash is not the hash of seq {event.seq - 1}"
                " (an earlier event was replaced, or this one was moved)",
            )
        stored.append(event)
        prev = event.hash
        expected_seq += 1
    return ChainReport(stream_id, len(stored), prev)


def _written_as(event: StoredEvent, up_to: int) -> int | None:
    """The seq this event's hash was computed with, if it is another one up to `up_to`."""
    for seq in range(1, up_to + 1):
        if (
            seq != event.seq
            and event_hash(event.prev_hash, event.salt, _content_of(event, seq)) == event.hash
        ):
            return seq
    return None


# ----- authenticators ---------------------------------------------------------------------

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_HEADER = struct.Struct(">16sqqqIIIIIIII")
_MAC_DOMAIN = b"bergen.event.v1"


def micros(at: datetime) -> int:
    """`at` as whole microseconds since 1970 UTC: the form of recorded_at an authenticator
    covers (both backends keep microseconds)."""
    return (at - _EPOCH) // _MICROSECOND


def row_mac(
    key: bytes,
    key_id: str,
    stream_id: str,
    seq: int,
    type_: str,
    schema_version: int,
    payload_text: str,
    metadata_text: str,
    recorded_us: int,
    prev_hash: bytes,
    salt: bytes,
    digest: bytes,
) -> bytes:
    """HMAC-SHA256 under `key` of every field of a stored row: a header of the numbers (seq,
    schema version, recorded_at in microseconds) and the length of every other field, then
    the key id, stream, type, the payload and metadata as stored, prev_hash, salt and hash.
    The lengths make the message unambiguous: no two rows give the same one."""
    message = row_mac_message(
        key_id, stream_id, seq, type_, schema_version, payload_text, metadata_text,
        recorded_us, prev_hash, salt, digest,
    )  # fmt: skip
    return hmac_sha256(key, message)


def hmac_sha256(key: bytes, message: bytes) -> bytes:
    """hmac.digest(key, message, "sha256"), on the key's pads (`hmac_pads`) set up once for
    the keys used lately, and without letting go of the interpreter's lock as hmac.digest
    does for a short message."""
    pads = _keyed.get(key)
    if pads is None:
        if len(_keyed) >= _KEYED_MAX:
            _keyed.clear()
        pads = _keyed[key] = hmac_pads(key)
    return hmac_on(pads, message)


_KEYED_MAX = 64
_keyed: dict[bytes, tuple[Any, Any]] = {}
"""Key -> its HMAC's pads (`hmac_pads`), for the keys `hmac_sha256` has used lately."""


def row_mac_message(
    key_id: str,
    stream_id: str,
    seq: int,
    type_: str,
    schema_version: int,
    payload_text: str,
    metadata_text: str,
    recorded_us: int,
    prev_hash: bytes,
    salt: bytes,
    digest: bytes,
) -> bytes:
    """The message `row_mac` authenticates (for a verifier that keeps its HMAC keyed)."""
    return row_mac_message_of(
        key_id.encode(), stream_id.encode(), seq, type_.encode(), schema_version,
        payload_text.encode(), metadata_text.encode(), recorded_us, prev_hash, salt, digest,
    )  # fmt: skip


def row_mac_message_of(
    kid: bytes,
    stream: bytes,
    seq: int,
    kind: bytes,
    schema_version: int,
    payload: bytes,
    metadata: bytes,
    recorded_us: int,
    prev_hash: bytes,
    salt: bytes,
    digest: bytes,
) -> bytes:
    """`row_mac_message` of its texts already encoded as UTF-8 (for a verifier of many rows
    of one stream, which encodes the stream id, key ids and types once)."""
    header = _HEADER.pack(
        _MAC_DOMAIN, seq, schema_version, recorded_us, len(kid), len(stream), len(kind),
        len(payload), len(metadata), len(prev_hash), len(salt), len(digest),
    )  # fmt: skip
    return b"".join((header, kid, stream, kind, payload, metadata, prev_hash, salt, digest))


def not_written_here(stream_id: str, seq: int) -> LogTampered:
    """The refusal of a row whose authenticator does not verify."""
    return LogTampered(
        f"match {stream_id}: seq {seq} was not written by this server "
        "(its authenticator does not verify)",
        match_id=stream_id,
        seq=seq,
    )


def not_linked(stream_id: str, seq: int) -> LogTampered:
    """The refusal of a row whose prev_hash is not the hash of the row before it."""
    return LogTampered(
        f"match {stream_id}: seq {seq} does not link to seq {seq - 1}", match_id=stream_id, seq=seq
    )


KeyOf = Callable[[str], bytes | None]
"""The log key of a key id, None for an id not held."""


def authenticate(
    stream_id: str,
    rows: Sequence[Sequence[Any]],
    key_of: KeyOf,
    prev: bytes | None,
    recorded_us: Callable[[Any], int],
) -> None:
    """Check the authenticator and the chain link of each selected row of one stream, in seq
    order: (seq, type, schema_version, payload text, metadata text, recorded_at, prev_hash,
    hash, salt, key_id, mac). `prev` is the hash the first row must link to (None: the first
    row is only the link to the rows after it, and is checked too). Raises LogTampered
    naming the first row that fails.
    """
    expected_seq = rows[0][0] if rows else 1
    if prev is None and rows:
        prev = bytes(rows[0][6])
    for r in rows:
        seq = r[0]
        if seq != expected_seq:
            raise LogTampered(
                f"match {stream_id}: seq {expected_seq} is missing", match_id=stream_id,
                seq=expected_seq,
            )  # fmt: skip
        key_id, mac = r[9], r[10]
        key = key_of(key_id) if key_id is not None else None
        if mac is None or key is None:
            why = "has no authenticator" if mac is None else f"names an unknown key {key_id!r}"
            raise LogTampered(f"match {stream_id}: seq {seq} {why}", match_id=stream_id, seq=seq)
        prev_hash, digest = bytes(r[6]), bytes(r[7])
        expected = row_mac(
            key, key_id, stream_id, seq, r[1], r[2], r[3], r[4], recorded_us(r[5]),
            prev_hash, bytes(r[8]), digest,
        )  # fmt: skip
        if not hmac.compare_digest(expected, bytes(mac)):
            raise not_written_here(stream_id, seq)
        if prev_hash != prev:
            raise not_linked(stream_id, seq)
        prev = digest
        expected_seq += 1
