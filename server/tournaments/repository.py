"""Tournaments as the repository folds them, and their unit of work.

A tournament's events are the tournament aggregate's (bergen.domain.tournament_events, schema
version 1, read with their own decoder), each applied by `evolve_tournament`; every row is
authenticated by the store like any other. A tournament is loaded, cached and written by the
same repository and unit of work as a match (`bergen.server.unit_of_work`), told what a
tournament is by `TournamentKind`.

Each player's token is sealed at registration like a seat token (the sealed form is kept
with the `EntrantRegistered` row).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bergen.domain.errors import BergenError, CorruptRecord, NotFound
from bergen.domain.tournament_engine import (
    TournamentCommand,
    TournamentState,
    decide_tournament,
    evolve_tournament,
)
from bergen.domain.tournament_events import (
    EntrantRegistered,
    TournamentCreated,
    TournamentEvent,
    decode_tournament_event,
    encode_tournament_event,
)

from ..auth import SealedToken
from ..commands import Clock, wall_ms
from ..feed import EventFeed
from ..matches import TOKEN_KEY_ID
from ..store import EventRow, EventStore, NewEvent, StoredEvent
from ..unit_of_work import COMMAND_KEY, Intent, Repository, UnitOfWork, Written
from .tables import STREAM_PREFIX, is_tournament_stream, tournament_stream, tournament_table

SEED_KEY = "tournament_seed_key"
"""The creation's metadata: the id of the log key the tournament seed is derived under."""
BY_HAND_KEY = "rounds_by_hand"
"""The creation's metadata: "1" when the organiser starts rounds after the first by hand."""
AT_KEY = "at_ms"
"""Every tournament row's metadata: the servers' clock (Unix ms) when it was written."""
PLAYER_TOKEN = "player_{}_token_hmac"
LEGACY_PLAYER_TOKEN = "player_{}_token_sha256"
TABLES_KEPT = 100_000
TOURNAMENTS_KEPT = 10_000
"""Tournaments kept folded in a process."""


@dataclass(frozen=True, slots=True)
class Tournament:
    """A tournament folded up to `version`, with what the server keeps beside its state."""

    state: TournamentState
    version: int
    commands: Mapping[str, str]
    """Command id -> what the command was (its fingerprint)."""
    tokens: Mapping[int, tuple[SealedToken, ...]]
    """Each entrant's players' tokens, sealed."""
    seed_key: str
    by_hand: bool
    changed_ms: int
    """The servers' clock when its latest row was written (Unix ms)."""


def _sealed_players(extra: Mapping[str, str], players: int) -> tuple[SealedToken, ...]:
    out = []
    for i in range(players):
        digest = extra.get(PLAYER_TOKEN.format(i))
        if digest is not None and TOKEN_KEY_ID in extra:
            out.append(SealedToken(digest, extra[TOKEN_KEY_ID]))
            continue
        legacy = extra.get(LEGACY_PLAYER_TOKEN.format(i))
        if legacy is None:
            raise CorruptRecord(f"player {i}'s token is not recorded")
        out.append(SealedToken(legacy))
    return tuple(out)


def extend(t: Tournament | None, rows: Sequence[EventRow] | Sequence[StoredEvent]) -> Tournament:
    """`t` with `rows` (the stream's rows after its version) folded in. Raises CorruptRecord
    for rows that do not follow on or do not decode, NotFound for no tournament at all."""
    if not rows:
        if t is None:
            raise NotFound("no such tournament", reason="TOURNAMENT_NOT_FOUND")
        return t
    state = t.state if t is not None else None
    version = t.version if t is not None else 0
    commands = dict(t.commands) if t is not None else {}
    tokens = dict(t.tokens) if t is not None else {}
    seed_key = t.seed_key if t is not None else ""
    by_hand = t.by_hand if t is not None else False
    changed = t.changed_ms if t is not None else 0
    for row in rows:
        where = f"tournament stream {row.stream_id} seq {row.seq}"
        if row.seq != version + 1:
            raise CorruptRecord(f"{where} does not follow seq {version}")
        try:
            meta = row.metadata
            event = decode_tournament_event(
                row.type, row.schema_version, row.payload, meta.actor or ""
            )
            if (state is None) != isinstance(event, TournamentCreated):
                raise CorruptRecord("only the first event creates the tournament")
            if isinstance(event, TournamentCreated):
                seed_key = meta.extra.get(SEED_KEY, "")
                by_hand = meta.extra.get(BY_HAND_KEY) == "1"
            if isinstance(event, EntrantRegistered):
                tokens[event.entrant] = _sealed_players(meta.extra, len(event.players))
            state = evolve_tournament(state, event)
        except (CorruptRecord, TypeError, IndexError, AssertionError) as err:
            message = err.message if isinstance(err, CorruptRecord) else str(err)
            raise CorruptRecord(f"{where}: {message}"[:300]) from err
        if meta.command_id:
            commands.setdefault(meta.command_id, meta.extra.get(COMMAND_KEY, ""))
        at = meta.extra.get(AT_KEY, "")
        if at.isdigit() and len(at) <= 16:
            changed = int(at)
        version = row.seq
    assert state is not None
    return Tournament(state, version, commands, tokens, seed_key, by_hand, changed)


class TournamentKind:
    """What a tournament is to the repository and the unit of work: its stream, folded by
    `extend`, decided by `decide_tournament`. Its commands' answers are made of the
    tournament after them, so the state a decision reports is None."""

    noun = "tournament"

    def stream_id(self, aggregate_id: str) -> str:
        return tournament_stream(aggregate_id)

    def missing(self, aggregate_id: str) -> BergenError:
        return NotFound(
            f"no tournament {aggregate_id}",
            reason="TOURNAMENT_NOT_FOUND",
            tournament_id=aggregate_id,
        )

    def fold(
        self, known: Tournament | None, rows: Sequence[EventRow] | Sequence[StoredEvent]
    ) -> Tournament:
        return extend(known, rows)

    def decide(
        self, known: Tournament | None, command: TournamentCommand
    ) -> tuple[tuple[TournamentEvent, ...], None]:
        return decide_tournament(known.state if known else None, command), None

    def encode(self, event: TournamentEvent) -> NewEvent:
        return NewEvent(*encode_tournament_event(event))

    def saved(
        self,
        known: Tournament | None,
        appended: Sequence[StoredEvent],
        decided: tuple[tuple[TournamentEvent, ...], None],
    ) -> Tournament:
        # Folding a tournament's few rows again costs little, and reads their metadata.
        return extend(known, appended)

    def fingerprint(self, known: Tournament, command_id: str) -> str | None:
        return known.commands.get(command_id)

    def replayed(
        self, known: Tournament, command_id: str
    ) -> tuple[tuple[TournamentEvent, ...], int, None]:
        return (), known.version + 1, None


TournamentIntent = Intent[TournamentCommand]
TournamentWritten = Written[Tournament, TournamentCommand, TournamentEvent, None]
"""What a command on a tournament wrote: `aggregate` is the tournament after it (or as
loaded, for a command id applied before, whose `events` are then empty)."""


class TournamentRepository(Repository[Tournament, TournamentCommand, TournamentEvent, None]):
    """Reads tournaments through a per-process cache of folded state; the store is the
    truth (each load reads the rows after the cached version, checked as authentic)."""

    def __init__(self, store: EventStore, cache_size: int = TOURNAMENTS_KEPT) -> None:
        super().__init__(store, TournamentKind(), cache_size)
        self._tables: OrderedDict[str, dict[str, object] | None] = OrderedDict()
        """What `table_of` found of each match (a match's creation never changes)."""
        self._tables_lock = threading.Lock()

    def table_of(self, match_id: str) -> dict[str, object] | None:
        """The tournament, round and table of a match (its creation records them), None for
        a match of no tournament or no match. Raises StorageUnavailable."""
        with self._tables_lock:
            if match_id in self._tables:
                return self._tables[match_id]
        first = self._store.read_stream(match_id, 1, limit=1)
        if not first:
            return None
        table = tournament_table(first[0].metadata.extra)
        with self._tables_lock:
            self._tables[match_id] = table
            while len(self._tables) > TABLES_KEPT:
                self._tables.popitem(last=False)
        return table

    def head(self, t: Tournament) -> StoredEvent | None:
        """The stored event of `t`'s stream at its version (None before its first), whose
        hash the record's `log` names. Raises StorageUnavailable."""
        if t.version < 1:
            return None
        stream = tournament_stream(t.state.tournament_id)
        found = self._store.read_stream(stream, t.version, limit=1)
        return found[0] if found else None

    def ids(self, after: str = "", limit: int = 100) -> list[str]:
        """Up to `limit` tournament ids in id order, after the id `after`."""
        found: list[str] = []
        cursor = tournament_stream(after) if after else STREAM_PREFIX
        while len(found) < limit:
            streams = self._store.list_streams(cursor, limit)
            for s in streams:
                if not is_tournament_stream(s.stream_id):
                    return found
                found.append(s.stream_id[len(STREAM_PREFIX) :])
                if len(found) == limit:
                    return found
            if len(streams) < limit:
                return found
            cursor = streams[-1].stream_id
        return found


class TournamentWork(UnitOfWork[Tournament, TournamentCommand, TournamentEvent, None]):
    """The tournaments' unit of work: every row records the servers' clock (`AT_KEY`)."""

    def __init__(
        self,
        store: EventStore,
        repository: TournamentRepository,
        feed: EventFeed | None,
        clock: Clock = wall_ms,
    ) -> None:
        super().__init__(store, repository, feed, lambda: {AT_KEY: str(clock())})
