"""Rows of the global order read as one value a page (`EventStore.read_all_packed`), for a
fold that reads many: the database packs each row into the bytes its authenticator covers
(`bergen.api.chain.row_mac_message`), and the page is parsed here with `struct` and slices,
where a row read the usual way costs a driver's tuple, a Python object a column and a JSON
parse of its payload and metadata before it is even checked.

A page is its rows one after another, each:

    position    8 bytes, big-endian, signed
    mac length  4 bytes, big-endian, signed: -1 when the row has no key id or no mac
    mac         that many bytes
    message     `row_mac_message` of the row: a header (the domain, seq, schema version,
                recorded_at in microseconds, the length of each field after it), then the
                key id (empty when it has none), stream id, type, payload and metadata
                text as stored (UTF-8), prev_hash, salt and hash

Each row's fields are read from its message, so that what a fold checks the authenticator
against is what it then decodes: a row changed by whoever holds the database role (or a
message packed wrong) does not verify. The parse is strict: a page that does not split
into such rows exactly raises CorruptRecord, naming the row and byte where it stopped.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import NamedTuple

from bergen.api.chain import canonical_json, metadata_json, micros
from bergen.api.stored import StoredEvent
from bergen.domain.errors import CorruptRecord

_MAC_DOMAIN = b"bergen.event.v1\0"
"""The message's first 16 bytes (`row_mac_message`'s domain, as struct's `16s` pads it)."""
_HEADER = struct.Struct(">16sqqqIIIIIIII")
"""`row_mac_message`'s header: the domain, seq, schema version, recorded_at in
microseconds, then the length of the key id, stream, type, payload, metadata, prev_hash,
salt and hash."""
_FRAME = struct.Struct(">qi")
"""A row's position and its mac's length (-1: none)."""
_NO_MAC = -1


class PackedEvent(NamedTuple):
    """A row of the global order as a packed page gives it: its fields as stored,
    undecoded, and `message`, the bytes its authenticator (`mac`) covers."""

    stream_id: str
    seq: int
    position: int
    type: str
    schema_version: int
    payload: bytes
    """The payload's text as stored, UTF-8."""
    metadata: bytes
    """The metadata's text as stored, UTF-8."""
    recorded_us: int
    """recorded_at, whole microseconds since 1970 UTC."""
    prev_hash: bytes
    hash: bytes
    key_id: str | None
    """None: the row has no authenticator (no key id, or no mac)."""
    mac: bytes | None
    message: memoryview
    """The row's `row_mac_message`, as packed."""


def parse_page(page: bytes, count: int | None = None) -> tuple[PackedEvent, ...]:
    """The rows of a packed page, in its order (`count`: how many it must hold). Raises
    CorruptRecord for a page that is not such rows exactly."""
    view = memoryview(page)
    end = len(page)
    frame, header = _FRAME.unpack_from, _HEADER.unpack_from
    frame_size, header_size = _FRAME.size, _HEADER.size
    rows: list[PackedEvent] = []
    add, new = rows.append, tuple.__new__
    at = start = 0
    try:
        while at < end:
            start = at
            position, mac_size = frame(page, at)
            at += frame_size
            if mac_size == _NO_MAC:
                mac = None
            elif 0 <= mac_size <= end - at:
                mac = page[at : at + mac_size]
                at += mac_size
            else:
                raise ValueError(f"a mac of {mac_size} bytes")
            domain, seq, version, recorded, nk, ns, nt, np, nm, nh, nsa, nd = header(page, at)
            if domain != _MAC_DOMAIN:
                raise ValueError("no message header")
            body = at + header_size
            stop = body + nk + ns + nt + np + nm + nh + nsa + nd
            if stop > end:
                raise ValueError(f"a message of {stop - at} bytes past the page's end")
            a = body + nk
            b = a + ns
            c = b + nt
            d = c + np
            f = d + nm
            g = f + nh
            # tuple.__new__: a named tuple's own constructor is a Python function.
            add(
                new(PackedEvent, (
                    page[a:b].decode(), seq, position, page[b:c].decode(), version,
                    page[c:d], page[d:f], recorded, page[f:g], page[g + nsa : stop],
                    None if mac is None else page[body:a].decode(), mac, view[at:stop],
                ))
            )  # fmt: skip
            at = stop
    except (ValueError, struct.error) as e:  # UnicodeDecodeError is a ValueError
        raise CorruptRecord(
            f"packed page of the global order: row {len(rows) + 1} at byte {start} of {end}"
            f" (after position {rows[-1].position if rows else 'none'}) does not parse: {e}"
        ) from e
    if count is not None and len(rows) != count:
        raise CorruptRecord(
            f"packed page of the global order: {len(rows)} rows where {count} were packed"
        )
    return tuple(rows)


def pack_row(
    e: StoredEvent, payload_text: str | None = None, metadata_text: str | None = None
) -> bytes:
    """`e` packed as a page's row: what the database's packing gives (`payload_text`,
    `metadata_text`: its texts as stored, when known; else their canonical encoding)."""
    payload = (
        canonical_json(e.payload, "payload") if payload_text is None else payload_text.encode()
    )
    metadata = metadata_json(e.metadata) if metadata_text is None else metadata_text.encode()
    kid = b"" if e.key_id is None else e.key_id.encode()
    stream, kind = e.stream_id.encode(), e.type.encode()
    head = _HEADER.pack(
        _MAC_DOMAIN, e.seq, e.schema_version, micros(e.recorded_at), len(kid), len(stream),
        len(kind), len(payload), len(metadata), len(e.prev_hash), len(e.salt), len(e.hash),
    )  # fmt: skip
    mac = (
        _FRAME.pack(e.position, _NO_MAC)
        if e.key_id is None or e.mac is None
        else _FRAME.pack(e.position, len(e.mac)) + e.mac
    )
    return b"".join((mac, head, kid, stream, kind, payload, metadata, e.prev_hash, e.salt, e.hash))


def pack_events(events: Iterable[StoredEvent]) -> bytes:
    """A page of `events`, as the database packs one (each its texts as read, when the
    store kept them: `ReadEvent.texts`)."""
    out = []
    for e in events:
        texts = getattr(e, "texts", None)
        out.append(pack_row(e, *texts) if texts is not None else pack_row(e))
    return b"".join(out)


PACKED_ROW_SQL = (
    "int8send(u.position) || CASE WHEN u.key_id IS NULL OR u.mac IS NULL"
    " THEN '\\xffffffff'::bytea ELSE int4send(length(u.mac)) || u.mac END"
    " || '\\x" + _MAC_DOMAIN.hex() + "'::bytea || int8send(u.seq)"
    " || int8send(u.schema_version::bigint)"
    " || int8send((extract(epoch FROM u.recorded_at) * 1000000)::bigint)"
    " || int4send(length(b.k)) || int4send(length(b.s)) || int4send(length(b.t))"
    " || int4send(length(b.p)) || int4send(length(b.m)) || int4send(length(u.prev_hash))"
    " || int4send(length(u.salt)) || int4send(length(u.hash))"
    " || b.k || b.s || b.t || b.p || b.m || u.prev_hash || u.salt || u.hash"
)
"""A row `u` of the events (its payload and metadata as text) packed on PostgreSQL, its
texts encoded by `PACKED_TEXTS_SQL` as `b`."""
PACKED_TEXTS_SQL = (
    "LATERAL (SELECT convert_to(coalesce(u.key_id, ''), 'UTF8') AS k,"
    " convert_to(u.stream_id, 'UTF8') AS s, convert_to(u.type, 'UTF8') AS t,"
    " convert_to(u.payload, 'UTF8') AS p, convert_to(u.metadata, 'UTF8') AS m) b"
)

__all__ = [
    "PACKED_ROW_SQL",
    "PACKED_TEXTS_SQL",
    "PackedEvent",
    "pack_events",
    "pack_row",
    "parse_page",
]
