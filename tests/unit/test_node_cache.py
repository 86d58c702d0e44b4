"""The transparency log's nodes kept in memory: what is kept is found again, what is used is
kept longest, and no more than the limit is ever kept."""

from __future__ import annotations

from bergen.server.store.tlog import NodeCache


def h(i: int) -> bytes:
    return i.to_bytes(32, "big")


def test_what_is_kept_is_found_and_the_rest_is_named_missing() -> None:
    cache = NodeCache(100)
    cache.put([((0, 1), h(1)), ((3, 7), h(2))])
    found, missing = cache.get([(0, 1), (0, 2), (3, 7)])
    assert found == {(0, 1): h(1), (3, 7): h(2)}
    assert missing == [(0, 2)]
    cache.clear()
    assert len(cache) == 0
    assert cache.get([(0, 1)]) == ({}, [(0, 1)])


def test_the_limit_holds_and_a_node_used_again_outlives_those_that_are_not() -> None:
    cache = NodeCache(10)
    cache.put([((9, 0), h(0))])
    for i in range(1, 100):
        cache.put([((0, i), h(i))])
        assert cache.get([(9, 0)])[0] == {(9, 0): h(0)}  # an upper node, used by every proof
        assert len(cache) <= 10
    found, missing = cache.get([(0, i) for i in range(1, 100)])
    assert (0, 99) in found
    assert (0, 1) in missing
    assert len(found) >= 4  # at least half the limit, the most recent


def test_a_limit_of_zero_keeps_nothing() -> None:
    cache = NodeCache(0)
    cache.put([((0, 1), h(1))])
    assert len(cache) == 0
    assert cache.get([(0, 1)]) == ({}, [(0, 1)])
