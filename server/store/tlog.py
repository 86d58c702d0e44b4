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

A server also keeps a copy of the tree of its own (`LocalTree`), from which it answers
proofs without a query: every leaf's hash in a file beside its checkpoint file, and every
node of level `TILE_LEVEL` and above in memory. The tables stay the source of truth: the copy
is filled from them when it is behind (at start, after another replica folded) and rebuilt
from them when it is found wrong.

The SQL is written once for both backends, on the `Db` of the ratings' statements.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bergen.domain.errors import StorageUnavailable
from bergen.domain.merkle import HASH_SIZE, Node, range_nodes, root

from .ratings import Db

log = logging.getLogger("bergen.server.tlog")

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
    inside a transaction holding a projection's position (`locked`); and the copy of the
    tree this process keeps (`local`), when it keeps one."""

    def __init__(
        self,
        reading: Callable[[], AbstractContextManager[Db]],
        locked: Callable[[str], AbstractContextManager[tuple[Db, tuple[Any, ...]]]],
        cached: int = CACHED_NODES,
    ) -> None:
        self._reading = reading
        self._locked = locked
        self.cache = NodeCache(cached)
        self.local: LocalTree | None = None
        """The copy of the tree a proof's nodes are read from first (None: none kept)."""

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
        """The hashes of `wanted`: those of the local copy, then those kept in memory, the
        others read in one statement (a node missing is left out). Raises
        StorageUnavailable."""
        local = self.local
        if local is not None:
            found, rest = local.nodes(wanted)
            if not rest:
                return found
        else:
            found, rest = {}, list(wanted)
        kept, missing = self.cache.get(rest)
        found.update(kept)
        if missing:
            with self._reading() as db:
                found.update(_nodes(db, missing))
        return found

    def stored_nodes(self, wanted: Sequence[Node]) -> Mapping[Node, bytes]:
        """The hashes of `wanted` as the tables hold them, nothing kept in memory or in the
        local copy used (a node missing is left out). Raises StorageUnavailable."""
        with self._reading() as db:
            return _nodes(db, wanted)

    def leaf_hashes(self, begin: int, end: int) -> list[bytes]:
        """The hashes of leaves `begin` up to `end` (not included), in order, up to the
        first one not stored. Raises StorageUnavailable."""
        with self._reading() as db:
            p, int8 = db.dialect.param, db.dialect.int8
            rows = db.rows(
                f"SELECT idx, hash FROM tlog_leaves WHERE idx >= {p}{int8} AND idx < {p}{int8}"
                " ORDER BY idx",
                [begin, end],
            )
        return _contiguous(begin, rows)

    def level(self, level: int, begin: int, end: int) -> list[bytes]:
        """The hashes of the nodes of `level` (1 and up) `begin` up to `end` (not included),
        in order, up to the first one not stored. Raises StorageUnavailable."""
        with self._reading() as db:
            p, int8 = db.dialect.param, db.dialect.int8
            rows = db.rows(
                f"SELECT idx, hash FROM tlog_nodes WHERE level = {p} AND idx >= {p}{int8}"
                f" AND idx < {p}{int8} ORDER BY idx",
                [level, begin, end],
            )
        return _contiguous(begin, rows)

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


def _contiguous(begin: int, rows: Sequence[Sequence[Any]]) -> list[bytes]:
    out: list[bytes] = []
    for idx, h in rows:
        if int(idx) != begin + len(out):
            break
        out.append(bytes(h))
    return out


def _leaf(row: Sequence[Any]) -> Leaf:
    idx, position, stream_id, seq, h = row
    return Leaf(int(idx), int(position), str(stream_id), int(seq), bytes(h))


# --- the local copy -------------------------------------------------------------------------

TILE_LEVEL = 8
"""The copy keeps in memory the nodes of this level and above, and in its file those below,
a tile at a time: the 2**TILE_LEVEL leaves under one node of this level and the nodes
between."""
TILE = 1 << TILE_LEVEL
_SLOTS = tuple(sum(TILE >> k for k in range(level)) for level in range(TILE_LEVEL + 1))
"""Where each level's nodes begin in a tile's record (the leaves' first), in hashes; the
last is the record's length (510 hashes, 16,320 bytes)."""
RECORD = _SLOTS[TILE_LEVEL] * HASH_SIZE
"""Bytes a tile takes in the file."""
SYNC_CHUNK = 1 << 16
"""Leaves the copy reads from the tables at a time while it is behind."""
LEAVES_FILES = 8
"""Files a folder may hold for one database: one a process that keeps a copy (a second server
started beside the first, with the same checkpoint folder, takes the next)."""
_NODE_PREFIX = b"\x01"
"""RFC 9162's prefix of an inner node's hash (bergen.domain.merkle.node_hash), inlined where
a tile's 255 nodes are computed."""
_RETRY_S = 1.0
"""How long the copy waits before it reads the tables again when they were unavailable."""
_EMPTY = bytes(HASH_SIZE)
"""A slot not written yet (no leaf or node hashes to 32 zero bytes but by a SHA-256 preimage)."""


class LocalTree:
    """The copy of the tree a process keeps to answer proofs without a query or a hash: in a
    file (`path`, written and never synced: a cache of what the tables hold), a record a tile
    (the hashes of its 256 leaves, then of the nodes above them up to level TILE_LEVEL - 1,
    level by level: 16 KB); in memory, the nodes of level TILE_LEVEL and above (some 2.5 MB
    at 10 million leaves). A proof's nodes are one read of each tile it touches and slices
    of memory.

    The copy holds the tree of `size` leaves (the nodes whose leaves are all below it) and
    follows the tables: the process's own fold writes what it committed (`append`); a thread
    reads from the tables what it lacks (at start, after another replica folded, after a
    reset), `SYNC_CHUNK` leaves at a time, computes the tiles' nodes and checks each whole
    tile's root against its node in the tables. At start the file is cut to whole records
    and to the tables' size, its last tile's nodes computed again from its leaves, its first
    and last whole tiles and the root of its size checked against the tables; if they do
    not match, it is read again from the start. Nothing is trusted: every proof is checked
    against a signed root before it is answered (bergen.server.tlog.proved), and when one
    does not verify but the tables' nodes do, the nodes that differ name what is wrong
    (`disproved`): a tile, read again from the tables, or the memory, all read again."""

    def __init__(self, path: Path, source: SqlTlog) -> None:
        self.path = path
        self._source = source
        self._cond = threading.Condition()
        self._fd: int | None = None
        self.size = 0
        self._upper: list[bytearray] = []
        """The nodes of level TILE_LEVEL + k, HASH_SIZE bytes each, in `_upper[k]`."""
        self._target = 0
        self._bad: set[int] = set()
        """Tiles found wrong: not used until read again from the tables."""
        self._lost: set[int] = set()
        """Tiles the tables' leaves do not prove either: never used."""
        self._reset = False
        self._opened = False
        self._closed = False
        self._thread: threading.Thread | None = None
        self.resets = 0
        self.repairs = 0

    # --- life ---------------------------------------------------------------------------------

    def start(self, size: int) -> None:
        """Open the file (the first of `path`, `path`.1, ... that no other process holds),
        and follow the tables' tree of `size` leaves from a thread of its own. Without a file
        (none free, or the folder not writable) the copy stays empty and logs why."""
        with self._cond:
            if self._thread is not None or self._closed:
                return
            self._fd = self._claim()
            if self._fd is None:
                return
            self._target = max(self._target, size)
            self._thread = threading.Thread(target=self._run, name="bergen-tlog-copy", daemon=True)
            self._thread.start()

    def _claim(self) -> int | None:
        for k in range(LEAVES_FILES):
            path = self.path if k == 0 else self.path.with_name(f"{self.path.name}.{k}")
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            except OSError as e:
                log.warning("no local copy of the transparency log: %s", e)
                return None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                os.close(fd)
                if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    continue  # another process's copy
                log.warning("no local copy of the transparency log: %s", e)
                return None
            self.path = path
            return fd
        log.warning(
            "no local copy of the transparency log: %d processes keep one in %s",
            LEAVES_FILES,
            self.path.parent,
        )
        return None

    def close(self, wait_s: float = 5.0) -> None:
        """Stop following the tables and close the file (unless the thread is still in a
        read of the tables after `wait_s`: it ends with the process then)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(wait_s)
            if thread.is_alive():
                return
        with self._cond:
            if self._fd is not None:
                os.close(self._fd)  # the lock with it
                self._fd = None
            self.size = 0

    def follow(self, size: int) -> None:
        """The tables hold the tree of `size` leaves: read what the copy lacks of it."""
        with self._cond:
            if size > self._target:
                self._target = size
                self._cond.notify_all()

    def wait_for(self, size: int, timeout_s: float) -> bool:
        """Whether the copy holds the tree of `size` leaves within `timeout_s`."""
        with self._cond:
            return self._cond.wait_for(lambda: self.size >= size, timeout_s)

    def settled(self, timeout_s: float) -> bool:
        """Whether the copy has nothing left to read from the tables within `timeout_s`."""
        with self._cond:
            return self._cond.wait_for(
                lambda: self._opened and not (self._reset or self._bad)
                and self.size >= self._target,
                timeout_s,
            )  # fmt: skip

    # --- the fold's writes and the proofs' reads ----------------------------------------------

    def append(
        self, start: int, hashes: Sequence[bytes], nodes: Iterable[tuple[int, int, bytes]]
    ) -> None:
        """The fold committed leaves `start`, ... with `hashes` and the complete `nodes`
        they made (the leaves' own included): written when the copy ends at `start`, else
        read later from the tables."""
        end = start + len(hashes)
        with self._cond:
            if self._fd is None or self.size != start or self._reset or not self._opened:
                if end > self._target:
                    self._target = end
                    self._cond.notify_all()
                return
            first = start >> TILE_LEVEL
            records = bytearray(  # the record of the tile begun, if any
                os.pread(self._fd, RECORD, first * RECORD) if start % TILE else b""
            )
            records += bytes(((end - 1 >> TILE_LEVEL) + 1 - first) * RECORD - len(records))
            for level, idx, h in nodes:
                if level < TILE_LEVEL:
                    at = _slot(level, idx) - first * RECORD
                    records[at : at + HASH_SIZE] = h
                    continue
                k = level - TILE_LEVEL
                while len(self._upper) <= k:
                    self._upper.append(bytearray())
                if len(self._upper[k]) != idx * HASH_SIZE:
                    self._reset = True  # not the node that comes next: read it all again
                    self.size = 0
                    self._cond.notify_all()
                    return
                self._upper[k] += h
            try:
                os.pwrite(self._fd, records, first * RECORD)
            except OSError as e:  # the folder full: the fold goes on, its proofs from the tables
                self._give_up(e)
                return
            self.size = end
            self._target = max(self._target, end)
            self._cond.notify_all()

    def _give_up(self, e: OSError) -> None:
        """Keep no copy any more (its file cannot be written): proofs read the tables."""
        with self._cond:
            log.error("no local copy of the transparency log any more: %s", e)
            self.size = 0
            self._closed = True
            self._cond.notify_all()

    def nodes(self, wanted: Sequence[Node]) -> tuple[dict[Node, bytes], list[Node]]:
        """The hashes of `wanted` the copy holds, and the nodes it does not (those past its
        size, and those of a tile found wrong)."""
        found: dict[Node, bytes] = {}
        missing: list[Node] = []
        records: dict[int, bytes] = {}
        with self._cond:
            n, fd = self.size, self._fd
            for node in wanted:
                level, idx = node
                if (idx + 1) << level > n or fd is None:
                    missing.append(node)
                elif level >= TILE_LEVEL:
                    at = idx * HASH_SIZE
                    found[node] = bytes(self._upper[level - TILE_LEVEL][at : at + HASH_SIZE])
                else:
                    t = idx >> (TILE_LEVEL - level)
                    if t in self._bad or t in self._lost:
                        missing.append(node)
                        continue
                    record = records.get(t)
                    if record is None:
                        record = records[t] = os.pread(fd, RECORD, t * RECORD)
                    at = _slot(level, idx) - t * RECORD
                    h = record[at : at + HASH_SIZE]
                    if len(h) != HASH_SIZE:
                        missing.append(node)
                    else:
                        found[node] = h
        return found, missing

    def disproved(self, used: Mapping[Node, bytes], stored: Mapping[Node, bytes]) -> None:
        """A proof made of nodes `used` did not verify, the same nodes as `stored` in the
        tables did: a tile whose node differs is read again from the tables; a node of the
        memory that differs has all of the copy read again. Logged."""
        with self._cond:
            for (level, idx), h in used.items():
                theirs = stored.get((level, idx))
                if theirs is None or theirs == h:
                    continue
                if level >= TILE_LEVEL:
                    self._reset = True
                    self.size = 0
                    log.error(
                        "node (%d, %d) of the local copy of the transparency log is not the"
                        " tables': the copy is read again",
                        level, idx,
                    )  # fmt: skip
                    break
                t = idx >> (TILE_LEVEL - level)
                if t not in self._bad:
                    log.error(
                        "tile %d of the local copy of the transparency log (leaves %d to %d)"
                        " is not the tables': its proofs are read from the tables, and it is"
                        " read again",
                        t, t * TILE, (t + 1) * TILE - 1,
                    )  # fmt: skip
                    self._bad.add(t)
            self._cond.notify_all()

    # --- following the tables -----------------------------------------------------------------

    def _run(self) -> None:
        while True:
            try:
                self._next()
            except OSError as e:
                self._give_up(e)
            except StorageUnavailable as e:
                log.warning("the local copy of the transparency log waits for the tables: %s", e)
                with self._cond:
                    self._cond.wait_for(lambda: self._closed, _RETRY_S)
            except Exception:
                log.exception("the local copy of the transparency log failed; it is read again")
                with self._cond:
                    self._reset = True
                    self.size = 0
                    self._cond.wait_for(lambda: self._closed, _RETRY_S)
            with self._cond:
                self._cond.notify_all()  # those waiting for the copy to settle
                self._cond.wait_for(
                    lambda: (
                        self._closed
                        or not self._opened
                        or self._reset
                        or bool(self._bad)
                        or self.size < self._target
                    )
                )
                if self._closed:
                    return

    def _next(self) -> None:
        if not self._opened:
            self._open()
            with self._cond:
                self._opened = True
                self._cond.notify_all()
        elif self._reset:
            self._restart()
        elif self._bad:
            self._repair(min(self._bad))
        else:
            self._catch_up()

    def _open(self) -> None:
        """Take what the file holds, once it matches the tables (else start again)."""
        assert self._fd is not None
        with self._cond:
            target = self._target
        tiles = os.fstat(self._fd).st_size // RECORD
        os.ftruncate(self._fd, tiles * RECORD)
        if tiles == 0 or target == 0:
            self._restart(counted=False)  # nothing held: nothing found wrong
            return
        last = os.pread(self._fd, RECORD, (tiles - 1) * RECORD)
        leaves = [last[k : k + HASH_SIZE] for k in range(0, TILE * HASH_SIZE, HASH_SIZE)]
        while leaves and leaves[-1] == _EMPTY:
            leaves.pop()
        m = min((tiles - 1) * TILE + len(leaves), target)
        upper = self._read_upper(0, m) if m > 0 else None
        if upper is None:
            self._restart()
            return
        # The last tile's nodes computed again: the write of its leaves may have been cut.
        t = (m - 1) >> TILE_LEVEL
        record = self._record_of(t, m)
        wrong = record is None
        if record is not None:
            os.ftruncate(self._fd, (t + 1) * RECORD)
            os.pwrite(self._fd, record, t * RECORD)
            wrong = _record_root(record) not in (None, _at(upper[0], t))
            # The first and last whole tiles: their nodes as computed from their leaves.
            for tile in {0, m // TILE - 1} - {-1, t}:
                computed = self._record_of(tile, m)
                wrong = (
                    wrong
                    or computed is None
                    or computed != os.pread(self._fd, RECORD, tile * RECORD)
                    or _record_root(computed) != _at(upper[0], tile)
                )
        edge = range_nodes(0, m)
        with self._cond:
            self._upper = upper
            self.size = m
            found, missing = self.nodes(edge)
        if not wrong and not missing:
            stored = self._source.stored_nodes(edge)
            wrong = root(_Known(found), m) != root(_Known(stored), m)
        if wrong or missing:
            self._restart()
        else:
            log.info("the local copy of the transparency log holds %d leaves (%s)", m, self.path)

    def _record_of(self, t: int, n: int) -> bytes | None:
        """Tile `t`'s record computed from its leaves in the file (those below `n`), None
        when the file does not hold them all."""
        assert self._fd is not None
        count = min(TILE, n - t * TILE)
        data = os.pread(self._fd, count * HASH_SIZE, t * RECORD)
        if len(data) != count * HASH_SIZE or _EMPTY in _hashes(data):
            return None
        return _record(data)

    def _restart(self, counted: bool = True) -> None:
        with self._cond:
            assert self._fd is not None
            self.resets += counted
            self._reset = False
            self.size = 0
            self._upper = []
            self._bad.clear()
            self._lost.clear()
            os.ftruncate(self._fd, 0)

    def _catch_up(self) -> None:
        with self._cond:
            n, target = self.size, self._target
        begin = n >> TILE_LEVEL << TILE_LEVEL  # a tile begun is computed again whole
        end = min(target, n + SYNC_CHUNK)
        hashes = self._source.leaf_hashes(begin, end)
        if len(hashes) < end - begin:
            end = begin + len(hashes)
            with self._cond:
                self._target = end  # the tables hold no more (yet): wait to be told
        upper = self._read_upper(n, end)
        if upper is None or end <= n:
            with self._cond:
                self._target = n
            return
        records = bytearray()
        for k in range(0, end - begin, TILE):
            record = _record(b"".join(hashes[k : k + TILE]))
            t = (begin + k) >> TILE_LEVEL
            whole = _record_root(record)
            if whole is not None and whole != _at(upper[0], t - (n >> TILE_LEVEL)):
                log.error(
                    "tile %d of the transparency log's tables does not match its node: no"
                    " local copy past leaf %d",
                    t, begin + k,
                )  # fmt: skip
                end = begin + k
                break
            records += record
        with self._cond:
            if self.size != n or self._reset or self._fd is None:
                return  # the fold appended or a reset came meanwhile
            if end <= n:
                self._target = n
                return
            os.pwrite(self._fd, records, begin // TILE * RECORD)
            for k, part in enumerate(self._upper_upto(upper, n, end)):
                while len(self._upper) <= k:
                    self._upper.append(bytearray())
                self._upper[k] += part
            self.size = end
            self._cond.notify_all()

    @staticmethod
    def _upper_upto(upper: list[bytearray], n: int, end: int) -> list[bytes]:
        """Of the nodes `_read_upper(n, ...)` gave, those the leaves below `end` complete."""
        out = []
        for k, part in enumerate(upper):
            level = TILE_LEVEL + k
            out.append(bytes(part[: ((end >> level) - (n >> level)) * HASH_SIZE]))
        return out

    def _read_upper(self, begin: int, end: int) -> list[bytearray] | None:
        """The nodes of TILE_LEVEL and above that the leaves `begin` to `end` complete, by
        level (None: the tables lack one)."""
        upper: list[bytearray] = []
        level = TILE_LEVEL
        while end >> level > 0:
            lo, hi = begin >> level, end >> level
            found = self._source.level(level, lo, hi) if hi > lo else []
            if len(found) != hi - lo:
                log.error(
                    "the tables lack nodes of level %d from %d: no local copy past leaf %d",
                    level, lo + len(found), begin,
                )  # fmt: skip
                return None
            upper.append(bytearray(b"".join(found)))
            level += 1
        if not upper:
            upper.append(bytearray())
        return upper

    def _repair(self, t: int) -> None:
        """Read tile `t` again from the tables."""
        with self._cond:
            n = self.size
        hashes = self._source.leaf_hashes(t * TILE, min(n, (t + 1) * TILE))
        with self._cond:
            self._bad.discard(t)
            if self._fd is None or self.size != n or n <= t * TILE:
                return
            record = _record(b"".join(hashes))
            whole = _record_root(record)
            if len(hashes) == min(TILE, n - t * TILE) and whole in (None, _at(self._upper[0], t)):
                os.pwrite(self._fd, record, t * RECORD)
                self.repairs += 1
                log.warning("tile %d of the local copy of the transparency log read again", t)
            else:
                self._lost.add(t)
                log.error(
                    "tile %d of the transparency log's tables does not match its node: its"
                    " proofs are read from the tables",
                    t,
                )


class _Known:
    def __init__(self, known: Mapping[Node, bytes]) -> None:
        self._known = known

    def nodes(self, wanted: Sequence[Node]) -> Mapping[Node, bytes]:
        return self._known


def _slot(level: int, idx: int) -> int:
    """Where node (`level` < TILE_LEVEL, `idx`) is in the file, in bytes."""
    shift = TILE_LEVEL - level
    t = idx >> shift
    return t * RECORD + (_SLOTS[level] + idx - (t << shift)) * HASH_SIZE


def _at(hashes: bytes | bytearray, i: int) -> bytes:
    return bytes(hashes[i * HASH_SIZE : (i + 1) * HASH_SIZE])


def _hashes(data: bytes) -> list[bytes]:
    return [data[k : k + HASH_SIZE] for k in range(0, len(data), HASH_SIZE)]


def _record(leaves: bytes) -> bytes:
    """A tile's record from the hashes of its leaves (all, or its first ones: then its nodes
    those complete, and the rest of the record zeros)."""
    sha256, prefix = hashlib.sha256, _NODE_PREFIX
    below = _hashes(leaves)
    out = bytearray(RECORD)
    out[: len(leaves)] = leaves
    for level in range(1, TILE_LEVEL):
        below = [
            sha256(prefix + below[k] + below[k + 1]).digest() for k in range(0, len(below) - 1, 2)
        ]
        at = _SLOTS[level] * HASH_SIZE
        out[at : at + len(below) * HASH_SIZE] = b"".join(below)
    return bytes(out)


def _record_root(record: bytes) -> bytes | None:
    """The root of a tile's record, when the tile is whole (None otherwise)."""
    at = _SLOTS[TILE_LEVEL - 1] * HASH_SIZE
    left, right = record[at : at + HASH_SIZE], record[at + HASH_SIZE : at + 2 * HASH_SIZE]
    if right == _EMPTY:
        return None
    return hashlib.sha256(_NODE_PREFIX + left + right).digest()
