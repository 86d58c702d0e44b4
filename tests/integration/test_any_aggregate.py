"""The one repository and unit of work (`bergen.server.unit_of_work`) on an aggregate of
their own: a counter, told to them by a Kind, as a new aggregate (a player) would be."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pytest
from conftest import Backend

from bergen.domain.errors import (
    BergenError,
    ConcurrencyConflict,
    InvalidArgument,
    NotFound,
    RuleViolation,
)
from bergen.server.store import EventRow, EventStore, NewEvent, StoredEvent, open_store
from bergen.server.unit_of_work import COMMAND_KEY, Intent, Repository, UnitOfWork


@dataclass(frozen=True)
class Counter:
    version: int
    total: int
    commands: dict[str, str] = field(default_factory=dict)


class CounterKind:
    noun = "counter"

    def __init__(self) -> None:
        self.folded = 0

    def stream_id(self, aggregate_id: str) -> str:
        return f"counter-{aggregate_id}"

    def missing(self, aggregate_id: str) -> BergenError:
        return NotFound(f"no counter {aggregate_id}")

    def fold(
        self, known: Counter | None, rows: Sequence[EventRow] | Sequence[StoredEvent]
    ) -> Counter:
        self.folded += len(rows)
        total = known.total if known else 0
        commands = dict(known.commands) if known else {}
        for r in rows:
            total += int(r.payload["n"])
            if r.metadata.command_id:
                commands.setdefault(r.metadata.command_id, r.metadata.extra.get(COMMAND_KEY, ""))
        return Counter(rows[-1].seq, total, commands)

    def decide(self, known: Counter | None, command: int) -> tuple[tuple[int, ...], int]:
        total = known.total if known else 0
        if total + command < 0:
            raise RuleViolation(f"the counter is at {total}", reason="BELOW_ZERO")
        return (command,), total + command

    def encode(self, event: int) -> NewEvent:
        return NewEvent("Added", 1, {"n": event})

    def saved(
        self,
        known: Counter | None,
        appended: Sequence[StoredEvent],
        decided: tuple[tuple[int, ...], int],
    ) -> Counter:
        return self.fold(known, appended)

    def fingerprint(self, known: Counter, command_id: str) -> str | None:
        return known.commands.get(command_id)

    def replayed(self, known: Counter, command_id: str) -> tuple[tuple[int, ...], int, int]:
        return (), known.version + 1, known.total


def add(n: int) -> Intent[int]:
    return Intent(n, "tester", f"add {n}")


@pytest.fixture
def store(backend: Backend) -> Iterator[EventStore]:
    s = open_store(backend.url)
    yield s
    s.close()


def _work(
    store: EventStore,
) -> tuple[Repository[Counter, int, int, int], UnitOfWork[Counter, int, int, int]]:
    repo: Repository[Counter, int, int, int] = Repository(store, CounterKind(), 10)
    return repo, UnitOfWork(store, repo, None)


def test_a_command_is_decided_appended_and_remembered_without_a_read(store: EventStore) -> None:
    repo, work = _work(store)
    work.run("a", lambda _: add(2), new=True)
    written = work.run("a", lambda c: add(3))
    assert (written.state, written.first_seq, written.aggregate.version) == (5, 2, 2)
    assert repo.cached("a") == written.aggregate
    assert store.stream_version("counter-a") == 2


def test_a_command_id_sent_again_is_answered_from_the_log_and_writes_nothing(
    store: EventStore,
) -> None:
    _, work = _work(store)
    work.run("a", lambda _: add(1), new=True)
    first = work.run("a", lambda _: add(4), command_id="c1")
    again = work.run("a", lambda _: add(4), command_id="c1")
    assert not first.replayed and again.replayed
    assert store.stream_version("counter-a") == 2
    with pytest.raises(InvalidArgument) as refused:
        work.run("a", lambda _: add(5), command_id="c1")
    assert refused.value.reason == "COMMAND_ID_REUSED"


def test_another_process_writing_first_is_met_with_a_fresh_read(store: EventStore) -> None:
    repo_a, work_a = _work(store)
    _, work_b = _work(store)
    work_a.run("a", lambda _: add(1), new=True)
    work_b.run("a", lambda _: add(1))  # A's cached copy is now behind
    why: list[str] = []
    work_a.on_retry = why.append
    written = work_a.run("a", lambda _: add(-2))  # refused on the stale copy (1 - 2 < 0)
    assert why == ["stale"] and written.state == 0 and written.aggregate.version == 3
    work_b.run("a", lambda _: add(5))
    written = work_a.run("a", lambda _: add(1))  # decided on the stale copy: its append loses
    assert why == ["stale", "conflict"] and written.state == 6
    assert repo_a.cached("a") is not None and repo_a.cached("a").version == 5  # type: ignore[union-attr]


def test_a_stale_expected_version_is_a_conflict_and_an_unknown_aggregate_not_found(
    store: EventStore,
) -> None:
    _, work = _work(store)
    work.run("a", lambda _: add(1), new=True)
    with pytest.raises(ConcurrencyConflict) as stale:
        work.run("a", lambda _: add(1), expected_version=0)
    assert stale.value.reason == "STALE_VERSION"
    assert stale.value.metadata == {"counter_id": "a", "version": "1"}
    with pytest.raises(NotFound):
        work.run("nobody", lambda _: add(1))
