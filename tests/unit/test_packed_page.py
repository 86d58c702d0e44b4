"""A page of the global order packed into one value (`bergen.server.store.packed`): each
row's fields read from the bytes its authenticator covers, and a page that is not such rows
exactly refused with a message naming where it stopped."""

from __future__ import annotations

import struct
from datetime import UTC, datetime

import pytest

from bergen.api.chain import canonical_json, metadata_json, micros, row_mac, row_mac_message
from bergen.api.stored import GENESIS_HASH, EventMetadata, StoredEvent
from bergen.domain.errors import CorruptRecord
from bergen.server.store.packed import pack_events, pack_row, parse_page

KEY = b"k" * 32
AT = datetime(2027, 3, 4, 5, 6, 7, 891011, tzinfo=UTC)


def event(seq: int, stream: str = "match-ünï", key_id: str | None = "k1") -> StoredEvent:
    payload = {"reason": "target", "scores": [150, seq], "note": "ß🁣"}
    metadata = EventMetadata("Łukasz", f"c{seq}", "bergen-rules/1", {})
    digest, salt = bytes([seq]) * 32, bytes([seq + 1]) * 16
    prev = GENESIS_HASH if seq == 1 else bytes([seq - 1]) * 32
    mac = None
    if key_id is not None:
        mac = row_mac(
            KEY, key_id, stream, seq, "MatchEnded", 2, canonical_json(payload, "").decode(),
            metadata_json(metadata).decode(), micros(AT), prev, salt, digest,
        )  # fmt: skip
    return StoredEvent(
        stream, seq, 100 + seq, "MatchEnded", 2, payload, metadata, AT, prev, digest, salt,
        key_id, mac,
    )  # fmt: skip


def test_each_row_is_read_with_the_bytes_its_authenticator_covers() -> None:
    events = [event(1), event(2), event(3, key_id=None)]
    rows = parse_page(pack_events(events), 3)
    for e, r in zip(events, rows, strict=True):
        assert (r.stream_id, r.seq, r.position, r.type, r.schema_version) == e[:5]
        assert r.payload == canonical_json(e.payload, "payload")
        assert r.metadata == metadata_json(e.metadata)
        assert (r.recorded_us, r.prev_hash, r.hash) == (micros(AT), e.prev_hash, e.hash)
        assert (r.key_id, r.mac) == (e.key_id, e.mac)
        assert bytes(r.message) == row_mac_message(
            e.key_id or "", e.stream_id, e.seq, e.type, e.schema_version,
            r.payload.decode(), r.metadata.decode(), micros(AT), e.prev_hash, e.salt, e.hash,
        )  # fmt: skip
    assert parse_page(b"") == ()


def test_a_row_with_a_key_id_but_no_mac_has_no_authenticator() -> None:
    (row,) = parse_page(pack_row(event(1)._replace(mac=None)))
    assert (row.key_id, row.mac) == (None, None)


def _page_error(page: bytes, count: int | None = None) -> str:
    with pytest.raises(CorruptRecord) as caught:
        parse_page(page, count)
    return caught.value.message


def test_a_page_cut_short_names_the_row_and_byte_it_stopped_at() -> None:
    first, second = pack_row(event(1)), pack_row(event(2))
    why = _page_error(first + second[:-5])
    assert "row 2 at byte" in why and f"byte {len(first)} of" in why
    assert "after position 101" in why and "does not parse" in why
    assert "row 1 at byte 0" in _page_error(first[:30])


def test_a_row_whose_message_has_no_header_is_refused() -> None:
    row = bytearray(pack_row(event(1)))
    row[12 + 32] ^= 1  # the domain's first byte, past the position, mac size and mac
    assert "no message header" in _page_error(bytes(row))


def test_a_mac_size_past_the_page_is_refused() -> None:
    row = bytearray(pack_row(event(1)))
    struct.pack_into(">i", row, 8, 1 << 30)
    assert "a mac of 1073741824 bytes" in _page_error(bytes(row))
    struct.pack_into(">i", row, 8, -2)
    assert "a mac of -2 bytes" in _page_error(bytes(row))


def test_texts_that_are_not_utf8_are_refused() -> None:
    e = event(1)
    page = pack_row(e).replace(e.stream_id.encode(), b"\xff" * len(e.stream_id.encode()))
    assert "does not parse" in _page_error(page)


def test_a_page_of_fewer_rows_than_were_packed_is_refused() -> None:
    assert "1 rows where 2 were packed" in _page_error(pack_row(event(1)), 2)
