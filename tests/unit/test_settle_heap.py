"""`settle_heap`: what is alive once the server is up is kept out of later collections, so a
full collection under load walks only what calls have made since."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from bergen.server.lifecycle import settle_heap


@pytest.fixture
def thawed() -> Iterator[None]:
    """The process's collector as it was: nothing frozen before or after the test."""
    gc.unfreeze()
    yield
    gc.unfreeze()


@pytest.mark.usefixtures("thawed")
def test_what_lives_at_start_up_is_kept_out_of_later_collections() -> None:
    kept = [[i] for i in range(10_000)]  # containers that stay alive, as a server's do
    frozen = settle_heap()
    assert frozen == gc.get_freeze_count()
    assert frozen >= len(kept)
    tracked = {id(o) for o in gc.get_objects()}  # what any later collection walks
    assert not any(id(x) in tracked for x in kept)
    assert id(kept) not in tracked


class Node:
    other: object = None


def cycle() -> weakref.ref[Node]:
    """A pair of objects that refer to each other and to nothing else (only the collector
    frees them); a weak reference to one."""
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


@pytest.mark.usefixtures("thawed")
def test_garbage_left_by_start_up_is_freed_not_kept() -> None:
    gone = cycle()
    settle_heap()
    assert gone() is None


@pytest.mark.usefixtures("thawed")
def test_what_calls_make_afterwards_is_still_collected() -> None:
    settle_heap()
    assert gc.isenabled()
    gone = cycle()
    gc.collect()
    assert gone() is None
