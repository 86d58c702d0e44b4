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

from .sealed import Seals, sealing


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
    fault: str | None = field(default=None, compare=False, repr=False)
    """Why the row as read must not be served as is: its authenticator does not verify, or
    its player's row disagrees with it (a page's); None when it may."""
    stale: bool = field(default=False, compare=False, repr=False)
    """Whether the match's next event lies at or before the listing's position (a page's):
    the row is older than the events folded, unless that event was refused."""


class FoldTransaction(Protocol):
    """A projection's transaction: its position row is locked until it ends."""

    position: int
    """What the projection had folded up to when the lock was taken."""
    fault: str | None
    """Why that position must not be trusted (`position_fault`); None when it may."""

    def load(self, match_ids: Collection[str]) -> dict[str, MatchSummary]:
        """The listed matches among `match_ids`."""
        ...

    def save(self, changed: Sequence[MatchSummary], position: int, reseat: bool = False) -> None:
        """Write `changed` (new or updated rows) and the new position, committed with the
        transaction; with `reseat`, write their players' rows again even when their seats
        and phase are as loaded."""
        ...

    def drop(self, match_ids: Collection[str]) -> None:
        """Delete the rows of `match_ids` and their players' rows."""
        ...


class MatchList(Protocol):
    """The listing's tables in one store. Every method raises StorageUnavailable when the
    database cannot be reached or written."""

    def position(self, projection: str) -> int:
        """What `projection` has folded up to (0: nothing yet), as stored (unchecked)."""
        ...

    def checked_position(self, projection: str) -> tuple[int, str | None]:
        """What `projection` has folded up to (0: nothing yet), and why that row must not be
        trusted (`position_fault`; None when it may)."""
        ...

    def folding(self, projection: str) -> AbstractContextManager[FoldTransaction]:
        """A transaction holding the lock on `projection`'s position: committed when the
        block ends, rolled back if it raises."""
        ...

    def page(
        self, phase: str | None, player: str, before: int | None, limit: int, folded: int = 0
    ) -> list[MatchSummary]:
        """Up to `limit` matches newest first, listed before `before` (None: from the
        newest), of `phase` (None: any) with a seat named `player` ("": anyone). A row's
        `fault` says why it must not be served: among them a row whose match's next event
        lies at or before the position `folded` in the global order (the listing has passed
        it: the row is older than what was folded), or a player's row that does not agree
        with its match's."""
        ...

    def missing(self, folded: int) -> list[str]:
        """The matches whose MatchCreated opens their stream at or before the position
        `folded` in the global order and that are not listed."""
        ...

    def versions(self, match_ids: Collection[str]) -> dict[str, int]:
        """The listed version of each of `match_ids` that is listed."""
        ...


SUMMARY_COLUMNS = (
    "match_id, listed, name, phase, seats, partnerships, preset, players, scores, version,"
    " created_at, started_at, hand, rematch_of, player_ids, bots, rated, key_id, mac"
)
MATCH_LIST_TABLE = "match_list"
POSITIONS_TABLE = "projection_positions"


def _as_is(value: Any) -> Any:
    return value


def summary_of(
    row: Sequence[Any], time_of: Callable[[Any], datetime] = _as_is, seals: Seals | None = None
) -> MatchSummary:
    """The MatchSummary of a row selected as SUMMARY_COLUMNS; `time_of` turns a stored time
    into a datetime when the backend does not. With `seals`, its `fault` says why its
    authenticator does not verify."""
    try:
        s = _summary_of(row, time_of)
    except (ValueError, TypeError, IndexError) as e:
        # Made up beyond decoding: a stand-in, rebuilt before it is served.
        s = MatchSummary(str(row[0]), "", "", 0, False, "", [], [], 0, int(row[1]))
        s.fault = f"it does not decode: {e!r}"
        return s
    if seals is not None:
        s.fault = seals.fault(MATCH_LIST_TABLE, summary_values(s), row[17], row[18])
    return s


def page_summary(
    row: Sequence[Any],
    time_of: Callable[[Any], datetime],
    seals: Seals | None,
    player: str,
) -> MatchSummary:
    """The MatchSummary of a page's row (SUMMARY_COLUMNS, then whether its match's next event
    is folded, then whether its player's row disagrees with it), its `fault` set."""
    s = summary_of(row, time_of, seals)
    s.stale = bool(row[19])
    if s.fault is None and player and (row[20] or player not in s.players):
        s.fault = f"its player's row ({player!r}) does not agree with it"
    return s


def summary_values(s: MatchSummary) -> tuple[Any, ...]:
    """What a listing row's authenticator covers: every column, among them its match, the
    position of its MatchCreated and the last seq folded into it."""
    return (
        s.match_id, s.order, s.name, s.phase, s.seats, s.partnerships, s.preset, s.players,
        s.scores, s.version, s.created_at, s.started_at, s.hand, s.rematch_of, s.player_ids,
        s.bots, s.rated,
    )  # fmt: skip


def position_values(projection: str, position: int) -> tuple[Any, ...]:
    """What a projection's position row's authenticator covers."""
    return (projection, position)


def position_fault(
    seals: Seals | None, projection: str, row: Sequence[Any] | None
) -> tuple[int, str | None]:
    """The position of a projection's row read as (position, key_id, mac), and why it must
    not be trusted (None: it may; always without `seals`, and for position 0: folding from
    the start trusts nothing). No row: position 0."""
    if row is None:
        return 0, None
    position = int(row[0])
    if seals is None or position == 0:
        return position, None
    return position, seals.fault(
        POSITIONS_TABLE, position_values(projection, position), row[1], row[2]
    )


def sealed_position(seals: Seals | None, projection: str, position: int) -> tuple[Any, ...]:
    """(position, key_id, mac) to write for a projection's position."""
    return (position, *sealing(seals, POSITIONS_TABLE, position_values(projection, position)))


def _summary_of(row: Sequence[Any], time_of: Callable[[Any], datetime]) -> MatchSummary:
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


def summary_params(
    s: MatchSummary, time_in: Callable[[datetime], Any] = _as_is, seals: Seals | None = None
) -> tuple[Any, ...]:
    """The values of SUMMARY_COLUMNS for `s`, sealed with `seals` (none without); `time_in`
    turns a datetime into what the backend stores."""
    key_id, mac = (None, None) if seals is None else seals.seal(MATCH_LIST_TABLE, summary_values(s))
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
        key_id,
        mac,
    )


def player_rows(changed: Sequence[MatchSummary]) -> list[tuple[str, str, str, int]]:
    """(match_id, name, phase, listed) for each distinct seated name of each match."""
    return [
        (s.match_id, name, s.phase, s.order)
        for s in changed
        for name in dict.fromkeys(p for p in s.players if p)
    ]
