"""`check_rows` (the store's authenticator check on reading rows for folding) refuses exactly
what `bergen.api.chain.authenticate` refuses, with the same LogTampered."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

import pytest

from bergen.api.chain import authenticate, micros
from bergen.api.stored import GENESIS_HASH, EventMetadata
from bergen.domain.errors import LogTampered
from bergen.server.store.authenticity import check_rows
from bergen.server.store.batch import build_rows
from bergen.server.store.model import NewEvent

KEYS = {"k1": b"\x01" * 32, "k2": b"\x02" * 32}
STREAM = "match-ø-1"
AT = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)


def _rows(n: int = 12) -> list[list[Any]]:
    """Selected rows of one stream (recorded_at as microseconds), written in three appends,
    the last under another key."""
    rows: list[list[Any]] = []
    prev = GENESIS_HASH
    for start, key_id in ((0, "k1"), (5, "k1"), (9, "k2")):
        count = min(n, {0: 5, 5: 4, 9: 3}[start])
        events = [
            NewEvent("TilePlayed", 1, {"seat": i % 2, "tile": "3-5", "note": "é\u0000x"})
            for i in range(count)
        ]
        meta = EventMetadata("ålice", f"cmd-{start}", "r1", {"command": "play"})
        for r in build_rows(STREAM, start, events, meta, prev, AT, (key_id, KEYS[key_id])):
            rows.append(
                [r.seq, r.event.type, 1, r.payload_json, r.metadata_json, micros(AT),
                 r.prev_hash, r.hash, r.salt, r.key_id, r.mac]
            )  # fmt: skip
            prev = r.hash
    return rows


def _outcome(fn: Any, *args: Any) -> tuple[str, str | None]:
    try:
        fn(*args)
    except LogTampered as e:
        return e.message, e.metadata.get("seq")
    return "ok", None


def _both(rows: list[list[Any]], prev: bytes | None) -> tuple[Any, Any]:
    reference = _outcome(authenticate, STREAM, rows, KEYS.get, prev, lambda us: us)
    ours = _outcome(check_rows, STREAM, rows, KEYS.get, prev)
    return reference, ours


def test_an_authentic_stream_passes_from_its_start_and_from_any_row() -> None:
    rows = _rows()
    assert _both(rows, GENESIS_HASH) == (("ok", None), ("ok", None))
    for i in range(len(rows)):
        assert _both(rows[i:], None) == (("ok", None), ("ok", None))


def _tamper(rows: list[list[Any]], rng: random.Random) -> str:
    i = rng.randrange(len(rows))
    row = rows[i]
    what = rng.choice(
        ["type", "version", "payload", "metadata", "at", "prev", "hash", "salt", "key_id",
         "unknown_key", "no_mac", "mac", "drop", "swap", "seq"]
    )  # fmt: skip
    if what == "type":
        row[1] = "TileDrawn"
    elif what == "version":
        row[2] = 2
    elif what == "payload":
        row[3] = row[3].replace("3-5", "3-6")
    elif what == "metadata":
        row[4] = row[4].replace("ålice", "alice")
    elif what == "at":
        row[5] += 1
    elif what == "prev":
        row[6] = bytes(32)
    elif what == "hash":
        row[7] = bytes([row[7][0] ^ 1]) + row[7][1:]
    elif what == "salt":
        row[8] = bytes(16)
    elif what == "key_id":
        row[9] = "k2" if row[9] == "k1" else "k1"
    elif what == "unknown_key":
        row[9] = "k9"
    elif what == "no_mac":
        row[10] = None
    elif what == "mac":
        row[10] = bytes(32)
    elif what == "drop" and len(rows) > 2:
        del rows[i]
    elif what == "swap" and i + 1 < len(rows):
        rows[i], rows[i + 1] = rows[i + 1], rows[i]
    elif what == "seq":
        row[0] += 1
    return what


@pytest.mark.parametrize("seed", range(300))
def test_a_tampered_stream_is_refused_as_authenticate_refuses_it(seed: int) -> None:
    rng = random.Random(seed)
    rows = _rows()
    what = _tamper(rows, rng)
    start = rng.choice([0, 0, rng.randrange(len(rows))])
    prev = GENESIS_HASH if start == 0 else None
    reference, ours = _both(rows[start:], prev)
    assert ours == reference, what
    if start == 0 and what not in ("drop", "swap"):
        assert ours[0] != "ok", what  # every change of a row from the first is seen


def test_a_row_rewritten_with_its_hash_recomputed_is_refused() -> None:
    """A writer without the key recomputes the hash chain after changing a payload: only the
    authenticator shows it."""
    rows = _rows()
    forged = _rows()
    tampered = [NewEvent("TilePlayed", 1, {"seat": 1, "tile": "6-6", "note": ""})]
    meta = EventMetadata("ålice", "cmd-0", "r1", {"command": "play"})
    (r,) = build_rows(STREAM, 0, tampered, meta, GENESIS_HASH, AT, ("k1", b"\x09" * 32))
    forged[0] = [1, "TilePlayed", 1, r.payload_json, r.metadata_json, micros(AT), r.prev_hash,
                 r.hash, r.salt, "k1", r.mac]  # fmt: skip
    assert _outcome(check_rows, STREAM, rows, KEYS.get, GENESIS_HASH) == ("ok", None)
    message, seq = _outcome(check_rows, STREAM, forged, KEYS.get, GENESIS_HASH)
    assert "not written by this server" in message and seq == "1"
