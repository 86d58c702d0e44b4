"""The transparency log's Merkle tree (RFC 9162): the published RFC 6962 test vectors, and
every root and proof against a naive implementation of the RFC's recursive definitions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bergen.domain.merkle import (
    EMPTY_ROOT,
    Frontier,
    Node,
    ProofError,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    node_hash,
    range_nodes,
    root,
    root_from_inclusion,
    verify_consistency,
    verify_inclusion,
)

# The RFC 6962 test tree (certificate-transparency's merkle_tree_test, also in
# transparency-dev/merkle's testonly): its eight leaves, the root of each prefix, and proofs.
LEAVES = [
    b"",
    b"\x00",
    b"\x10",
    b"\x20\x21",
    b"\x30\x31",
    b"\x40\x41\x42\x43",
    b"\x50\x51\x52\x53\x54\x55\x56\x57",
    b"\x60\x61\x62\x63\x64\x65\x66\x67\x68\x69\x6a\x6b\x6c\x6d\x6e\x6f",
]
ROOTS = [
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]
INCLUSION = {
    (0, 1): [],
    (0, 8): [
        "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
    ],
    (5, 8): [
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ],
}
CONSISTENCY = {
    (1, 1): [],
    (1, 8): [
        "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
    ],
    (6, 8): [
        "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ],
    (2, 5): [
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
    ],
}


# --- the reference: RFC 9162's definitions, recursively, over the leaves --------------------


def mth(d: Sequence[bytes]) -> bytes:
    if not d:
        return EMPTY_ROOT
    if len(d) == 1:
        return leaf_hash(d[0])
    k = 1 << ((len(d) - 1).bit_length() - 1)
    return node_hash(mth(d[:k]), mth(d[k:]))


def path(m: int, d: Sequence[bytes]) -> list[bytes]:
    if len(d) == 1:
        return []
    k = 1 << ((len(d) - 1).bit_length() - 1)
    if m < k:
        return [*path(m, d[:k]), mth(d[k:])]
    return [*path(m - k, d[k:]), mth(d[:k])]


def subproof(m: int, d: Sequence[bytes], b: bool) -> list[bytes]:
    if m == len(d):
        return [] if b else [mth(d)]
    k = 1 << ((len(d) - 1).bit_length() - 1)
    if m <= k:
        return [*subproof(m, d[:k], b), mth(d[k:])]
    return [*subproof(m - k, d[k:], False), mth(d[:k])]


def proof(m: int, d: Sequence[bytes]) -> list[bytes]:
    return [] if m in (0, len(d)) else subproof(m, d, True)


class Nodes:
    """Every complete subtree's hash of a tree, as a store holds them; counts the reads."""

    def __init__(self, leaves: Sequence[bytes]) -> None:
        self.known: dict[Node, bytes] = {}
        self.reads = 0
        frontier = Frontier()
        for leaf in leaves:
            for level, index, h in frontier.append(leaf_hash(leaf)):
                self.known[(level, index)] = h

    def nodes(self, wanted: Sequence[Node]) -> Mapping[Node, bytes]:
        self.reads += 1
        return {n: self.known[n] for n in wanted}


def tree(n: int) -> list[bytes]:
    return [i.to_bytes(4, "big") for i in range(n)]


# --- the vectors ----------------------------------------------------------------------------


def test_the_empty_tree_hashes_the_empty_string() -> None:
    assert EMPTY_ROOT.hex() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert root(Nodes([]), 0) == EMPTY_ROOT


@pytest.mark.parametrize("size", range(1, 9))
def test_roots_of_the_rfc_tree(size: int) -> None:
    assert root(Nodes(LEAVES), size).hex() == ROOTS[size - 1]
    frontier = Frontier()
    frontier.extend(leaf_hash(x) for x in LEAVES[:size])
    assert frontier.root().hex() == ROOTS[size - 1]


@pytest.mark.parametrize(("index", "size"), INCLUSION)
def test_inclusion_proofs_of_the_rfc_tree(index: int, size: int) -> None:
    got = inclusion_proof(Nodes(LEAVES), index, size)
    assert [h.hex() for h in got] == INCLUSION[(index, size)]
    verify_inclusion(index, size, leaf_hash(LEAVES[index]), got, bytes.fromhex(ROOTS[size - 1]))


@pytest.mark.parametrize(("old", "new"), CONSISTENCY)
def test_consistency_proofs_of_the_rfc_tree(old: int, new: int) -> None:
    got = consistency_proof(Nodes(LEAVES), old, new)
    assert [h.hex() for h in got] == CONSISTENCY[(old, new)]
    old_root, new_root = bytes.fromhex(ROOTS[old - 1]), bytes.fromhex(ROOTS[new - 1])
    verify_consistency(old, new, old_root, new_root, got)


# --- against the reference ------------------------------------------------------------------


def test_every_root_and_proof_of_small_trees_is_the_rfcs() -> None:
    leaves = tree(33)
    store = Nodes(leaves)
    for n in range(1, 34):
        assert root(store, n) == mth(leaves[:n])
        for m in range(n):
            got = inclusion_proof(store, m, n)
            assert got == path(m, leaves[:n])
            verify_inclusion(m, n, leaf_hash(leaves[m]), got, mth(leaves[:n]))
        for m in range(n + 1):
            got = consistency_proof(store, m, n)
            assert got == proof(m, leaves[:n])
            verify_consistency(m, n, mth(leaves[:m]), mth(leaves[:n]), got)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 600), st.data())
def test_proofs_of_larger_trees_are_the_rfcs_and_read_once(n: int, data: st.DataObject) -> None:
    leaves = tree(n)
    store = Nodes(leaves)
    m = data.draw(st.integers(0, n - 1))
    old = data.draw(st.integers(0, n))
    got = inclusion_proof(store, m, n)
    assert got == path(m, leaves)
    assert consistency_proof(store, old, n) == proof(old, leaves)
    assert store.reads == 2  # one read of the store for each


def test_range_nodes_tile_the_range_with_complete_subtrees() -> None:
    for begin in range(0, 40):
        for end in range(begin, 80):
            covered = []
            for level, index in range_nodes(begin, end):
                covered += range(index << level, (index + 1) << level)
            assert covered == list(range(begin, end))


def test_a_frontier_read_back_from_the_nodes_goes_on_as_the_tree() -> None:
    leaves = tree(100)
    store = Nodes(leaves)
    frontier = Frontier.read(store, 57)
    frontier.extend(leaf_hash(x) for x in leaves[57:])
    assert frontier.root() == mth(leaves)


# --- what does not verify -------------------------------------------------------------------


def test_a_changed_leaf_or_proof_does_not_verify() -> None:
    leaves = tree(21)
    store = Nodes(leaves)
    r = mth(leaves)
    p = inclusion_proof(store, 7, 21)
    with pytest.raises(ProofError):
        verify_inclusion(7, 21, leaf_hash(b"other"), p, r)
    with pytest.raises(ProofError):
        verify_inclusion(8, 21, leaf_hash(leaves[7]), p, r)
    with pytest.raises(ProofError, match="too short"):
        root_from_inclusion(7, 21, leaf_hash(leaves[7]), p[:-1])
    with pytest.raises(ProofError, match="too long"):
        root_from_inclusion(7, 21, leaf_hash(leaves[7]), [*p, p[0]])
    c = consistency_proof(store, 13, 21)
    with pytest.raises(ProofError):
        verify_consistency(13, 21, mth(leaves[:12]), r, c)
    with pytest.raises(ProofError):
        verify_consistency(13, 21, mth(leaves[:13]), mth(leaves[:20]), c)
    with pytest.raises(ProofError):
        verify_consistency(13, 21, mth(leaves[:13]), r, c[1:])
    with pytest.raises(ProofError):
        verify_consistency(13, 21, mth(leaves[:13]), r, [])


def test_a_rewritten_history_is_not_consistent() -> None:
    leaves = tree(30)
    forked = [*leaves[:9], b"forged", *leaves[10:]]
    c = consistency_proof(Nodes(forked), 12, 30)
    with pytest.raises(ProofError):
        verify_consistency(12, 30, mth(leaves[:12]), mth(forked), c)


@pytest.mark.parametrize(("index", "size"), [(-1, 3), (3, 3), (0, 0)])
def test_no_inclusion_proof_outside_the_tree(index: int, size: int) -> None:
    with pytest.raises(ProofError):
        inclusion_proof(Nodes(tree(5)), index, size)


def test_no_consistency_proof_to_a_smaller_tree() -> None:
    with pytest.raises(ProofError):
        consistency_proof(Nodes(tree(5)), 4, 3)
