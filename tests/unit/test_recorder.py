"""The recorder makes the records of ended matches: those listed without one, looked for
again while the listing is still folding the stored log, and each end the feed delivers."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from bergen.server import recorder as recorder_module
from bergen.server.recorder import Recorder


class Records:
    def __init__(self, unkept: list[list[str]]) -> None:
        self._unkept = unkept

    def unkept(self, key: str) -> list[str]:
        return self._unkept.pop(0) if len(self._unkept) > 1 else self._unkept[0]


class Listing:
    def __init__(self, positions: list[int]) -> None:
        self._positions = positions

    def position(self, name: str) -> int:
        return self._positions.pop(0) if len(self._positions) > 1 else self._positions[0]


class Store:
    def __init__(self, unkept: list[list[str]], listed: list[int], head: int) -> None:
        self._records = Records(unkept)
        self._listing = Listing(listed)
        self._head = head

    def records(self) -> Records:
        return self._records

    def match_list(self) -> Listing:
        return self._listing

    def head_position(self) -> int:
        return self._head


class Queries:
    def __init__(self, refuse: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        self.made: list[str] = []
        self.refuse = set(refuse)
        self.done = threading.Event()

    def records(self, caller: Any, ids: list[str], refused: list[str]) -> dict[str, str]:
        for m in ids:
            if m in self.refuse:
                self.refuse.discard(m)  # made the next time
                refused.append(m)
            else:
                self.made.append(m)
        self.done.set()
        return {}


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recorder_module, "RETRY_S", 0.05)


def made_within(queries: Queries, wanted: set[str], seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if wanted <= set(queries.made):
            return True
        queries.done.wait(0.05)
        queries.done.clear()
    return False


def test_matches_listed_while_the_listing_folds_are_recorded() -> None:
    # The first look finds nothing (the listing has folded little of the log); the next
    # ones find what it listed since.
    store = Store([[], ["a"], ["a", "b"], []], listed=[10, 50, 100], head=100)
    queries = Queries()
    r = Recorder(store, queries, "key")  # type: ignore[arg-type]
    r.start()
    try:
        assert made_within(queries, {"a", "b"})
    finally:
        r.stop()


def test_an_end_the_feed_delivers_is_recorded_and_a_refusal_tried_again() -> None:
    store = Store([[]], listed=[100], head=100)
    queries = Queries(refuse={"m"})
    r = Recorder(store, queries, "key")  # type: ignore[arg-type]
    r.start()
    try:
        r.note([type("E", (), {"type": "MatchEnded", "stream_id": "m"})()])  # type: ignore[list-item]
        assert made_within(queries, {"m"})
    finally:
        r.stop()
