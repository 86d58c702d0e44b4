"""The transparency log's tables: its leaves and the hashes of its complete subtrees.

`tlog_leaves` holds one row a leaf (its index, the global position and the stream and seq of
its event, its hash); `tlog_nodes` the hash of every complete subtree above the leaves, by
(level, index). Like the listing, the tree is folded from the events under its position row
in projection_positions (`bergen.server.tlog`), and never trusted: a server checks what it
reads of it against the newest checkpoint it signed. A stream's seq is a leaf once only
(a unique key), so a log rolled back and written again cannot slip a second event of that
seq into the tree.

The SQL is written once for both backends, on the `Db` of the ratings' statements.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

from bergen.domain.merkle import Node

from .ratings import Db

TLOG = "tlog"
"""The tree's name in projection_positions."""
_CHUNK = 200
"""Nodes per statement: below every SQLite build's limit on bound parameters."""


@dataclass(frozen=True, slots=True)
class Leaf:
    """A leaf as stored: its index, its event's position, stream and seq, its hash."""

    index: int
    position: int
    stream_id: str
    seq: int
    hash: bytes


class TlogFold:
    """The tree's transaction: its position row locked until it ends."""

    def __init__(self, db: Db, position: int) -> None:
        self._db = db
        self.position = position

    def size(self) -> int:
        """The number of leaves stored."""
        return _size(self._db)

    def nodes(self, wanted: Sequence[Node]) -> Mapping[Node, bytes]:
        return _nodes(self._db, wanted)

    def save(
        self, leaves: Sequence[Leaf], nodes: Sequence[tuple[int, int, bytes]], position: int
    ) -> None:
        """Add `leaves` and the complete `nodes` above them (level > 0), and move the position
        to `position`. Raises the driver's integrity error for a leaf already stored."""
        self._db.insert(
            "tlog_leaves",
            ("idx", "position", "stream_id", "seq", "hash"),
            [(x.index, x.position, x.stream_id, x.seq, x.hash) for x in leaves],
        )
        self._db.insert("tlog_nodes", ("level", "idx", "hash"), [n for n in nodes if n[0] > 0])
        p = self._db.dialect.param
        self._db.run(
            f"UPDATE projection_positions SET position = {p}{self._db.dialect.int8}"
            f" WHERE name = {p}",
            [position, TLOG],
        )
        self.position = position


def _size(db: Db) -> int:
    rows = db.rows("SELECT MAX(idx) FROM tlog_leaves")
    return 0 if not rows or rows[0][0] is None else int(rows[0][0]) + 1


def _nodes(db: Db, wanted: Sequence[Node]) -> dict[Node, bytes]:
    """The hashes of `wanted` that are stored (a node missing is left out)."""
    d = db.dialect
    found: dict[Node, bytes] = {}
    leaves = [i for level, i in wanted if level == 0]
    inner = [(level, i) for level, i in wanted if level > 0]
    if d.any_list:
        # PostgreSQL: one round trip, each side of it one index scan a key.
        rows = db.rows(
            "SELECT 0, idx, hash FROM tlog_leaves WHERE idx = ANY(%s::bigint[])"
            " UNION ALL SELECT level, idx, hash FROM tlog_nodes WHERE (level, idx) IN"
            " (SELECT * FROM unnest(%s::smallint[], %s::bigint[]))",
            [leaves, [n[0] for n in inner], [n[1] for n in inner]],
        )
        return {(int(level), int(idx)): bytes(h) for level, idx, h in rows}
    for k in range(0, len(leaves), _CHUNK):
        part = leaves[k : k + _CHUNK]
        params: list[object] = [part] if d.any_list else list(part)
        for idx, h in db.rows(
            f"SELECT idx, hash FROM tlog_leaves WHERE {d.among('idx', len(part))}", params
        ):
            found[(0, int(idx))] = bytes(h)
    for k in range(0, len(inner), _CHUNK):
        part2 = inner[k : k + _CHUNK]
        # (level, idx) pairs: one row-value list on both backends
        marks = ", ".join([f"({d.param}{d.int4}, {d.param}{d.int8})"] * len(part2))
        flat: list[object] = [v for pair in part2 for v in pair]
        for level, idx, h in db.rows(
            f"SELECT level, idx, hash FROM tlog_nodes WHERE (level, idx) IN (VALUES {marks})",
            flat,
        ):
            found[(int(level), int(idx))] = bytes(h)
    return found


class SqlTlog:
    """The tree's tables on a backend that gives a `Db` to read with (`reading`) and one
    inside a transaction holding a projection's position (`locked`)."""

    def __init__(
        self,
        reading: Callable[[], AbstractContextManager[Db]],
        locked: Callable[[str], AbstractContextManager[tuple[Db, int]]],
    ) -> None:
        self._reading = reading
        self._locked = locked

    @contextmanager
    def folding(self) -> Iterator[TlogFold]:
        """The tree's transaction. Raises StorageUnavailable."""
        with self._locked(TLOG) as (db, position):
            yield TlogFold(db, position)

    def size(self) -> int:
        """The number of leaves stored. Raises StorageUnavailable."""
        with self._reading() as db:
            return _size(db)

    def nodes(self, wanted: Sequence[Node]) -> Mapping[Node, bytes]:
        """The stored hashes of `wanted` (a node missing is left out). Raises
        StorageUnavailable."""
        with self._reading() as db:
            return _nodes(db, wanted)

    def leaf_at(self, position: int) -> Leaf | None:
        """The leaf of the event at global `position` (None: not in the tree)."""
        with self._reading() as db:
            p = db.dialect.param
            rows = db.rows(
                "SELECT idx, position, stream_id, seq, hash FROM tlog_leaves"
                f" WHERE position = {p}{db.dialect.int8}",
                [position],
            )
        return None if not rows else _leaf(rows[0])

    def leaf(self, index: int) -> Leaf | None:
        """Leaf `index` (None: not stored)."""
        with self._reading() as db:
            p = db.dialect.param
            rows = db.rows(
                "SELECT idx, position, stream_id, seq, hash FROM tlog_leaves"
                f" WHERE idx = {p}{db.dialect.int8}",
                [index],
            )
        return None if not rows else _leaf(rows[0])


def _leaf(row: Sequence[Any]) -> Leaf:
    idx, position, stream_id, seq, h = row
    return Leaf(int(idx), int(position), str(stream_id), int(seq), bytes(h))
