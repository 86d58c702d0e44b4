"""The history rows a rebuild writes (`bergen.server.store.ratings.HistoryRows`): one a seat
of every rated match, in the order of their key, and as PostgreSQL's binary COPY data the
same rows, a COPY of at most so many rows each."""

from __future__ import annotations

import struct
from datetime import UTC, datetime

from bergen.server.store.ratings import HistoryRows, Holder, RatedEnd

AT = datetime(2026, 12, 4, tzinfo=UTC)


def end(order: int, pool: str, *players: str) -> RatedEnd:
    seats = tuple(Holder(p, p.upper(), False) for p in players)
    sides = tuple((s,) for s in range(len(players)))
    return RatedEnd(f"m{order}", pool, order, seats, sides, tuple(range(1, len(players) + 1)), AT)


ENDS = [
    end(10, "3", "zoe", "ann", "bob"),
    end(11, "2", "bob", "ann"),
    end(4, "2", "ann", "cy"),  # applied late: before 11 in its pool
    end(12, "3", "ann", "zoe", "dé"),
]
WANT = sorted((h.player, e.pool, e.order) for e in ENDS for h in e.seats)


def rows_of(block: bytes) -> list[tuple[str, str, int]]:
    """The rows of a whole binary COPY of (text, text, int8); fails on anything else."""
    assert block.startswith(b"PGCOPY\n\xff\r\n\0" + bytes(8))
    assert block.endswith(b"\xff\xff")
    at, stop, out = 19, len(block) - 2, []
    while at < stop:
        (fields,) = struct.unpack_from(">h", block, at)
        assert fields == 3
        at += 2
        values = []
        for _ in range(3):
            (size,) = struct.unpack_from(">i", block, at)
            values.append(block[at + 4 : at + 4 + size])
            at += 4 + size
        assert len(values[2]) == 8
        out.append((values[0].decode(), values[1].decode(), struct.unpack(">q", values[2])[0]))
    assert at == stop
    return out


def history(ends: list[RatedEnd]) -> HistoryRows:
    rows = HistoryRows()
    for e in ends:
        rows.add(e)
    return rows


def test_history_rows_are_one_a_seat_in_the_order_of_their_key() -> None:
    assert list(history(ENDS)) == WANT
    assert len(WANT) == 10


def test_history_rows_as_copy_data_are_the_same_rows_in_copies_of_at_most_so_many() -> None:
    for most in (1, 3, 4, 10, 11):
        blocks = list(history(ENDS).copy_blocks(most))
        each = [rows_of(b) for b in blocks]
        assert all(0 < len(rows) <= most for rows in each)
        assert len(blocks) == -(-len(WANT) // most)
        assert [r for rows in each for r in rows] == WANT


def test_no_history_rows_make_no_copy() -> None:
    assert list(history([]).copy_blocks(5)) == []
    assert list(history([])) == []
