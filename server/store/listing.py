"""The match listing's rows, and what a store offers to keep and page them.

The listing is a read model: rows folded from the events by `bergen.server.projections`,
never the truth. A projection folds inside `folding(name)`, which holds the lock on its
position row, so that replicas sharing a database fold each event exactly once, and writes
the rows and the new position in one transaction.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol


@dataclass
class MatchSummary:
    """One match as listed. `order` is the global position of its MatchCreated (newest
    first); `players` holds "" for an empty seat; `scores` one total per side; `created_at`
    and `started_at` are when its MatchCreated and its first Dealt were recorded (started_at
    None: still seating; created_at None: listed by a server of an earlier version during a
    rolling restart); `hand` is the hand in play or the last one played (0: none yet);
    `rematch_of` the match a rematch follows (None: no rematch), whose players its free
    seats are kept for; `player_ids` each seat's registered player ("" for none; empty for
    a match listed before they were), `bots` whether each is a program, `rated` whether the
    match is."""

    match_id: str
    name: str
    phase: str
    seats: int
    partnerships: bool
    preset: str
    players: list[str]
    scores: list[int]
    version: int
    order: int = 0
    created_at: datetime | None = None
    started_at: datetime | None = None
    hand: int = 0
    rematch_of: str | None = None
    player_ids: list[str] = field(default_factory=list)
    bots: list[bool] = field(default_factory=list)
    rated: bool = False


class FoldTransaction(Protocol):
    """A projection's transaction: its position row is locked until it ends."""

    position: int
    """What the projection had folded up to when the lock was taken."""

    def load(self, match_ids: Collection[str]) -> dict[str, MatchSummary]:
        """The listed matches among `match_ids`."""
        ...

    def save(self, changed: Sequence[MatchSummary], position: int) -> None:
        """Write `changed` (new or updated rows) and the new position, committed with the
        transaction."""
        ...


class MatchList(Protocol):
    """The listing's tables in one store. Every method raises StorageUnavailable when the
    database cannot be reached or written."""

    def position(self, projection: str) -> int:
        """What `projection` has folded up to (0: nothing yet)."""
        ...

    def folding(self, projection: str) -> AbstractContextManager[FoldTransaction]:
        """A transaction holding the lock on `projection`'s position: committed when the
        block ends, rolled back if it raises."""
        ...

    def page(
        self, phase: str | None, player: str, before: int | None, limit: int
    ) -> list[MatchSummary]:
        """Up to `limit` matches newest first, listed before `before` (None: from the
        newest), of `phase` (None: any) with a seat named `player` ("": anyone)."""
        ...

    def versions(self, match_ids: Collection[str]) -> dict[str, int]:
        """The listed version of each of `match_ids` that is listed."""
        ...


SUMMARY_COLUMNS = (
    "match_id, listed, name, phase, seats, partnerships, preset, players, scores, version,"
    " created_at, started_at, hand, rematch_of, player_ids, bots, rated"
)


def _as_is(value: Any) -> Any:
    return value


def summary_of(row: Sequence[Any], time_of: Callable[[Any], datetime] = _as_is) -> MatchSummary:
    """The MatchSummary of a row selected as SUMMARY_COLUMNS; `time_of` turns a stored time
    into a datetime when the backend does not."""
    return MatchSummary(
        match_id=row[0],
        name=row[2],
        phase=row[3],
        seats=int(row[4]),
        partnerships=bool(row[5]),
        preset=row[6],
        players=json.loads(row[7]),
        scores=json.loads(row[8]),
        version=int(row[9]),
        order=int(row[1]),
        created_at=None if row[10] is None else time_of(row[10]),
        started_at=None if row[11] is None else time_of(row[11]),
        hand=int(row[12]),
        rematch_of=row[13],
        player_ids=[] if row[14] is None else json.loads(row[14]),
        bots=[] if row[15] is None else json.loads(row[15]),
        rated=bool(row[16]),
    )


def summary_params(s: MatchSummary, time_in: Callable[[datetime], Any] = _as_is) -> tuple[Any, ...]:
    """The values of SUMMARY_COLUMNS for `s`; `time_in` turns a datetime into what the
    backend stores."""
    return (
        s.match_id,
        s.order,
        s.name,
        s.phase,
        s.seats,
        s.partnerships,
        s.preset,
        json.dumps(s.players, ensure_ascii=False),
        json.dumps(s.scores),
        s.version,
        None if s.created_at is None else time_in(s.created_at),
        None if s.started_at is None else time_in(s.started_at),
        s.hand,
        s.rematch_of,
        json.dumps(s.player_ids) if s.player_ids else None,
        json.dumps(s.bots) if s.player_ids else None,
        s.rated,
    )


def player_rows(changed: Sequence[MatchSummary]) -> list[tuple[str, str, str, int]]:
    """(match_id, name, phase, listed) for each distinct seated name of each match."""
    return [
        (s.match_id, name, s.phase, s.order)
        for s in changed
        for name in dict.fromkeys(p for p in s.players if p)
    ]
