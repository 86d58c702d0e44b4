"""The transparency log's tables: its leaves and the hashes of its complete subtrees.

`tlog_leaves` holds one row a leaf (its index, the global position and the stream and seq of
its event, its hash); `tlog_nodes` the hash of every complete subtree above the leaves, by
(level, index). Like the listing, the tree is folded from the events under its position row
in projection_positions (`bergen.server.tlog`), and never trusted: a server checks what it
reads of it against the newest checkpoint it signed. A stream's seq is a leaf once only
(a unique key), so a log rolled back and written again cannot slip a second event of that
seq into the tree.

A complete subtree's hash never changes once stored, so a process keeps some in memory
(`NodeCache`): the nodes its own folds wrote, once committed, and those of proofs that
verified against a signed root (`SqlTlog.remember`). A proof reads what it lacks of them in
one statement. What is kept was computed here or proved: a row edited in the table is not
kept, and what was kept is dropped (`forget`) when a proof fails.

The SQL is written once for both backends, on the `Db` of the ratings' statements.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

from bergen.domain.merkle import Node

from .ratings import Db

TLOG = "tlog"
"""The tree's name in projection_positions."""
_CHUNK = 200
"""Parameters per statement: below every SQLite build's limit on bound parameters."""
CACHED_NODES = 1 << 15
"""Node hashes a process keeps in memory at most (some 10 MB): room for the upper levels of
a tree of hundreds of millions of leaves and the nodes of its last ten thousand leaves."""


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
        self.written: list[tuple[int, int, bytes]] = []
        """The leaves' hashes (level 0) and the nodes `save` wrote, to keep once committed."""

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
        inner = [n for n in nodes if n[0] > 0]
        self._db.insert("tlog_nodes", ("level", "idx", "hash"), inner)
        p = self._db.dialect.param
        self._db.run(
            f"UPDATE projection_positions SET position = {p}{self._db.dialect.int8}"
            f" WHERE name = {p}",
            [position, TLOG],
        )
        self.position = position
        self.written += [(0, x.index, x.hash) for x in leaves]
        self.written += inner


class NodeCache:
    """Node hashes kept in memory, `limit` at most, those not used for longest dropped first:
    two generations, each of half the limit. A node is kept in the young one; when it is
    full, the old one is dropped and the young one becomes the old, from which a node used
    again moves back to the young. Safe to share between threads."""

    def __init__(self, limit: int = CACHED_NODES) -> None:
        self._half = limit // 2
        self._young: dict[Node, bytes] = {}
        self._old: dict[Node, bytes] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._young) + len(self._old)

    def get(self, wanted: Sequence[Node]) -> tuple[dict[Node, bytes], list[Node]]:
        """The hashes of `wanted` kept, and the nodes not kept."""
        found: dict[Node, bytes] = {}
        missing: list[Node] = []
        with self._lock:
            for node in wanted:
                h = self._young.get(node)
                if h is None:
                    h = self._old.pop(node, None)
                    if h is None:
                        missing.append(node)
                        continue
                    self._keep(node, h)
                found[node] = h
        return found, missing

    def put(self, nodes: Iterable[tuple[Node, bytes]]) -> None:
        """Keep `nodes` ((level, index), hash)."""
        with self._lock:
            for node, h in nodes:
                self._old.pop(node, None)
                self._keep(node, h)

    def _keep(self, node: Node, h: bytes) -> None:
        if self._half <= 0:
            return
        self._young[node] = h
        if len(self._young) >= self._half:
            self._old, self._young = self._young, {}

    def clear(self) -> None:
        with self._lock:
            self._young, self._old = {}, {}


def _size(db: Db) -> int:
    rows = db.rows("SELECT MAX(idx) FROM tlog_leaves")
    return 0 if not rows or rows[0][0] is None else int(rows[0][0]) + 1


_HASH_OF = (
    "CASE WHEN w.level = 0 THEN (SELECT l.hash FROM tlog_leaves l WHERE l.idx = w.idx)"
    " ELSE (SELECT n.hash FROM tlog_nodes n WHERE n.level = w.level AND n.idx = w.idx) END"
)
"""A wanted node's hash: one primary-key lookup, in the leaves or in the nodes (NULL when it
is not stored)."""
_PG_NODES = (
    f"SELECT w.level, w.idx, {_HASH_OF} FROM unnest(%s::smallint[], %s::bigint[]) AS w(level, idx)"
)
"""PostgreSQL: every node in one statement of one text (prepared once a connection, its plan
generic: a scan of the two arrays and a lookup a row), in one round trip."""


def _nodes(db: Db, wanted: Sequence[Node]) -> dict[Node, bytes]:
    """The hashes of `wanted` that are stored (a node missing is left out)."""
    d = db.dialect
    if not wanted:
        return {}
    if d.any_list:
        # The arrays as text: one parameter type whatever the values (psycopg would give a
        # list of small ints another type, and the statement another preparation).
        rows = db.rows(
            _PG_NODES,
            [
                "{" + ",".join([str(level) for level, _ in wanted]) + "}",
                "{" + ",".join([str(i) for _, i in wanted]) + "}",
            ],
        )
    else:
        rows = []
        for k in range(0, len(wanted), _CHUNK // 2):  # two parameters a node
            part = wanted[k : k + _CHUNK // 2]
            values = ", ".join([f"({d.param}, {d.param})"] * len(part))
            rows += db.rows(
                f"SELECT w.level, w.idx, {_HASH_OF} FROM (SELECT column1 AS level,"
                f" column2 AS idx FROM (VALUES {values})) AS w",
                [v for node in part for v in node],
            )
    return {(int(level), int(idx)): bytes(h) for level, idx, h in rows if h is not None}


class SqlTlog:
    """The tree's tables on a backend that gives a `Db` to read with (`reading`) and one
    inside a transaction holding a projection's position (`locked`)."""

    def __init__(
        self,
        reading: Callable[[], AbstractContextManager[Db]],
        locked: Callable[[str], AbstractContextManager[tuple[Db, tuple[Any, ...]]]],
        cached: int = CACHED_NODES,
    ) -> None:
        self._reading = reading
        self._locked = locked
        self.cache = NodeCache(cached)

    @contextmanager
    def folding(self) -> Iterator[TlogFold]:
        """The tree's transaction; what it wrote is kept in memory once it commits. Raises
        StorageUnavailable."""
        # The position row as read: (position, key_id, mac). The tree's own row carries no
        # authenticator: what it reaches is checked against the signed checkpoints.
        with self._locked(TLOG) as (db, row):
            fold = TlogFold(db, int(row[0]))
            yield fold
        self.cache.put(((level, idx), h) for level, idx, h in fold.written)

    def size(self) -> int:
        """The number of leaves stored. Raises StorageUnavailable."""
        with self._reading() as db:
            return _size(db)

    def nodes(self, wanted: Sequence[Node]) -> Mapping[Node, bytes]:
        """The hashes of `wanted`: those kept in memory, the others read in one statement (a
        node missing is left out). Raises StorageUnavailable."""
        found, missing = self.cache.get(wanted)
        if missing:
            with self._reading() as db:
                found.update(_nodes(db, missing))
        return found

    def remember(self, proved: Mapping[Node, bytes]) -> None:
        """Keep in memory the hashes of nodes a proof verified against a signed root."""
        self.cache.put(proved.items())

    def forget(self) -> None:
        """Drop every node kept in memory (a proof made of them, or of what was read with
        them, failed)."""
        self.cache.clear()

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
