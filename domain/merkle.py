"""The transparency log's Merkle tree, as RFC 9162 (section 2) defines it: hashes, roots of a
tree of any size, inclusion and consistency proofs, and their verification.

Nothing here does I/O. A tree too large to hold is read through a `NodeStore`: the hashes
of its complete subtrees, by (level, index) (the subtree of level `l` and index `i` covers
the leaves from i * 2**l to (i + 1) * 2**l, not included). Every root and proof the RFC
defines is a fold of O(log n) such nodes, so a proof of a tree of millions of leaves reads a
few dozen of them, in one call. `Frontier` keeps the right edge of a growing tree: the
complete subtrees a size decomposes into, from which the next root is computed and the
new complete nodes are known as leaves are appended.

A witness needs only the verification functions and the hashes: it never holds the tree.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()
"""MTH({}): the root of the empty tree."""

_LEAF_PREFIX = b"\x00"
_NODE_PREFIX = b"\x01"

Node = tuple[int, int]
"""A complete subtree: (level, index)."""


class ProofError(ValueError):
    """Sizes or an index a proof cannot be made or checked for, or a proof that does not
    verify (the message says which)."""


def leaf_hash(data: bytes) -> bytes:
    """SHA-256(0x00 || data)."""
    return hashlib.sha256(_LEAF_PREFIX + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """SHA-256(0x01 || left || right)."""
    return hashlib.sha256(_NODE_PREFIX + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two smaller than n (n > 1)."""
    return 1 << ((n - 1).bit_length() - 1)


def range_nodes(begin: int, end: int) -> list[Node]:
    """The complete subtrees that tile the leaves [begin, end), left to right, each as
    large as its alignment allows. For a range the RFC's recursion takes the hash of (begin
    aligned to a power of two at least end - begin), they shrink left to right and
    `fold_range` gives its MTH."""
    out: list[Node] = []
    while begin < end:
        level = (begin & -begin).bit_length() - 1 if begin else (end - begin).bit_length() - 1
        while (1 << level) > end - begin:
            level -= 1
        out.append((level, begin >> level))
        begin += 1 << level
    return out


def fold_range(hashes: Sequence[bytes]) -> bytes:
    """The MTH of a range from the hashes of the nodes `range_nodes` gave for it."""
    if not hashes:
        return EMPTY_ROOT
    acc = hashes[-1]
    for h in reversed(hashes[:-1]):
        acc = node_hash(h, acc)
    return acc


class NodeStore(Protocol):
    """Where the hashes of a tree's complete subtrees are read."""

    def nodes(self, wanted: Sequence[Node]) -> Mapping[Node, bytes]:
        """The hashes of `wanted` (every one, or raise)."""
        ...


@dataclass(frozen=True, slots=True)
class Plan:
    """What a root or proof needs: the ranges whose MTHs it lists, in order, and the
    complete nodes that tile them (all to be read in one call)."""

    ranges: tuple[tuple[int, int], ...]

    @property
    def nodes(self) -> list[Node]:
        seen: dict[Node, None] = {}
        for begin, end in self.ranges:
            for n in range_nodes(begin, end):
                seen[n] = None
        return list(seen)

    def hashes(self, known: Mapping[Node, bytes]) -> list[bytes]:
        """The MTH of each range, from the nodes' hashes. Raises KeyError for one missing."""
        return [fold_range([known[n] for n in range_nodes(b, e)]) for b, e in self.ranges]

    def read(self, store: NodeStore) -> list[bytes]:
        """The MTH of each range, read from `store` in one call."""
        return self.hashes(store.nodes(self.nodes))


def root_plan(size: int) -> Plan:
    """MTH(D[0:size])."""
    return Plan(((0, size),))


def inclusion_plan(index: int, size: int) -> Plan:
    """PATH(index, D[0:size]) (RFC 9162 2.1.3.1). Raises ProofError unless index < size."""
    if not 0 <= index < size:
        raise ProofError(f"leaf {index} is not in a tree of {size}")
    ranges: list[tuple[int, int]] = []
    begin, n, m = 0, size, index
    while n > 1:
        k = _split(n)
        if m < k:
            ranges.append((begin + k, begin + n))
            n = k
        else:
            ranges.append((begin, begin + k))
            begin, n, m = begin + k, n - k, m - k
    ranges.reverse()  # the recursion lists the deepest sibling first
    return Plan(tuple(ranges))


def consistency_plan(old: int, new: int) -> Plan:
    """PROOF(old, D[0:new]) (RFC 9162 2.1.4.1); empty when old is 0 or old == new.
    Raises ProofError unless 0 <= old <= new."""
    if not 0 <= old <= new:
        raise ProofError(f"no consistency proof from a tree of {old} to one of {new}")
    if old == 0 or old == new:
        return Plan(())
    ranges: list[tuple[int, int]] = []
    begin, n, m, whole = 0, new, old, True
    while m != n:
        k = _split(n)
        if m <= k:
            ranges.append((begin + k, begin + n))
            n = k
        else:
            ranges.append((begin, begin + k))
            begin, n, m, whole = begin + k, n - k, m - k, False
    if not whole:
        ranges.append((begin, begin + n))
    ranges.reverse()
    return Plan(tuple(ranges))


def root(store: NodeStore, size: int) -> bytes:
    """The root of the tree of `size` leaves."""
    return root_plan(size).read(store)[0]


def inclusion_proof(store: NodeStore, index: int, size: int) -> list[bytes]:
    """The inclusion proof of leaf `index` in the tree of `size`. Raises ProofError."""
    return inclusion_plan(index, size).read(store)


def consistency_proof(store: NodeStore, old: int, new: int) -> list[bytes]:
    """The consistency proof from the tree of `old` leaves to that of `new`. Raises
    ProofError."""
    return consistency_plan(old, new).read(store)


# --- verification (RFC 9162 2.1.3.2 and 2.1.4.2) --------------------------------------------


def root_from_inclusion(index: int, size: int, leaf: bytes, proof: Sequence[bytes]) -> bytes:
    """The root that `proof` makes of leaf hash `leaf` at `index` in a tree of `size`.
    Raises ProofError for a proof of the wrong length or an index out of the tree."""
    if not 0 <= index < size:
        raise ProofError(f"leaf {index} is not in a tree of {size}")
    fn, sn = index, size - 1
    r = leaf
    for p in proof:
        if sn == 0:
            raise ProofError("the inclusion proof is too long")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError("the inclusion proof is too short")
    return r


def verify_inclusion(
    index: int, size: int, leaf: bytes, proof: Sequence[bytes], expected_root: bytes
) -> None:
    """Check that leaf hash `leaf` is leaf `index` of the tree of `size` whose root is
    `expected_root`. Raises ProofError."""
    if root_from_inclusion(index, size, leaf, proof) != expected_root:
        raise ProofError(f"leaf {index} is not in the tree of {size} with that root")


def verify_consistency(
    old: int, new: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> None:
    """Check that the tree of `new` leaves with `new_root` extends the tree of `old` with
    `old_root`. Raises ProofError."""
    if not 0 <= old <= new:
        raise ProofError(f"a tree of {new} cannot extend one of {old}")
    if old == new:
        if proof:
            raise ProofError("a proof between trees of one size must be empty")
        if old_root != new_root:
            raise ProofError(f"two different roots for a tree of {old}")
        return
    if old == 0:
        if proof:
            raise ProofError("a proof from the empty tree must be empty")
        return
    if not proof:
        raise ProofError("the consistency proof is empty")
    path = list(proof)
    if old & (old - 1) == 0:  # a power of two: the old root is the first node
        path.insert(0, old_root)
    fn, sn = old - 1, new - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise ProofError("the consistency proof is too long")
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError("the consistency proof is too short")
    if fr != old_root:
        raise ProofError(f"the proof does not lead to the root of the tree of {old}")
    if sr != new_root:
        raise ProofError(f"the proof does not lead to the root of the tree of {new}")


# --- a growing tree -------------------------------------------------------------------------


class Frontier:
    """The right edge of a tree: the hashes of the complete subtrees its size decomposes
    into (largest first), enough to append leaves and compute roots."""

    __slots__ = ("_edge", "size")

    def __init__(self, size: int = 0, edge: Sequence[bytes] = ()) -> None:
        """The frontier of a tree of `size` whose `range_nodes(0, size)` have hashes
        `edge`. Raises ValueError when they do not match in number."""
        if len(edge) != size.bit_count():
            raise ValueError(f"a tree of {size} has {size.bit_count()} edge nodes, not {len(edge)}")
        self.size = size
        self._edge = list(edge)

    @classmethod
    def read(cls, store: NodeStore, size: int) -> Frontier:
        """The frontier of the tree of `size` in `store`."""
        wanted = range_nodes(0, size)
        known = store.nodes(wanted)
        return cls(size, [known[n] for n in wanted])

    def append(self, leaf: bytes) -> list[tuple[int, int, bytes]]:
        """Append leaf hash `leaf`; the complete nodes this made, (level, index, hash),
        the leaf's own first."""
        index = self.size
        made = [(0, index, leaf)]
        h, level = leaf, 0
        while index >> level & 1:
            h = node_hash(self._edge.pop(), h)
            level += 1
            made.append((level, index >> level, h))
        self._edge.append(h)
        self.size += 1
        return made

    def extend(self, leaves: Iterable[bytes]) -> list[tuple[int, int, bytes]]:
        """Append each of `leaves`; all the complete nodes they made."""
        made: list[tuple[int, int, bytes]] = []
        for leaf in leaves:
            made += self.append(leaf)
        return made

    def root(self) -> bytes:
        """MTH of the tree as it stands."""
        return fold_range(self._edge)

    @property
    def edge(self) -> tuple[bytes, ...]:
        return tuple(self._edge)

    def copy(self) -> Frontier:
        return Frontier(self.size, self._edge)
