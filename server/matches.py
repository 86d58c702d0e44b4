"""Loading matches: read the stream, fold it, and keep the folded state per process.

The cache is keyed by match and version and is never the truth: `load` reads the events the
cache has not seen (one query), which the store has checked are authentic (each row's
authenticator under the log key, and the chain). Folding them re-checks the rules too: each
event a player's command starts (a seat taken, a tile played, a resignation) is decided again
on the state before it, and the stored events must be exactly those the rules give, so not
even a holder of the log key can make the server fold an illegal move.

A command may be decided on the cached copy without a read (`cached`), because its append
names the version it was decided on: if another replica wrote since, the store refuses the
append and the command is decided again on a fresh load.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bergen.domain import codec, fastplay
from bergen.domain.commands import Command, Play
from bergen.domain.dealing import deal
from bergen.domain.engine import command_of, execute
from bergen.domain.errors import BergenError, CorruptRecord, LogTampered, NotFound
from bergen.domain.events import Event, as_logged_then
from bergen.domain.state import ENDED, PLAYING, State, fold

from .auth import SealedToken
from .store import EventRow, EventStore, NewEvent, StoredEvent
from .store.records import archived_error
from .unit_of_work import COMMAND_KEY, Repository

TOKEN_KEY = "seat_token_hmac"
"""The metadata of a SeatTaken: its seat token sealed (`bergen.server.auth.SeatTokens`)."""
TOKEN_KEY_ID = "seat_token_key"
"""The id of the log key whose seat-token key sealed it."""
LEGACY_TOKEN_KEY = "seat_token_sha256"
"""The plain SHA-256 of the seat token, which servers wrote before sealing it."""
CREATOR_KEY = "creator_token_hmac"
"""The metadata of a MatchCreated: the creator token sealed as a seat token is."""
CREATOR_KEY_ID = "creator_token_key"
REMATCH_KEY = "rematch_of"
"""The metadata of a rematch's MatchCreated: the id of the match it is the rematch of."""
EPOCH_KEY = "clock_epoch_ms"
"""Recorded with the join that deals a clocked match's first hand: the servers' clock (Unix
ms) at that deal, which is at_ms 0 of the match (RULES.md section 11)."""

log = logging.getLogger("bergen.server")


@dataclass(frozen=True, slots=True)
class Applied:
    """A command appended to a match: its events' seqs and what the command was."""

    first_seq: int
    last_seq: int
    fingerprint: str


@dataclass(frozen=True, slots=True)
class Match:
    """A match folded up to `version`, with what the server keeps beside the rules state."""

    state: State
    events: tuple[Event, ...]
    seat_tokens: tuple[SealedToken | None, ...]
    """Each seat's token as sealed when it was taken; None for a free seat."""
    commands: dict[str, Applied]
    epoch_ms: int | None = None
    """A clocked match's first deal on the servers' clock (Unix ms): its at_ms 0. None for
    a match without a clock, or not yet dealt."""
    creator_token: SealedToken | None = None
    """The creator token given with CreateMatch, as sealed; None when none was given."""
    rematch_of: str | None = None
    """For a rematch, the match it is the rematch of (its seats are kept for that match's
    players); None for any other match."""

    @property
    def version(self) -> int:
        return len(self.events)

    def state_at(self, version: int) -> State:
        """The state after the first `version` events."""
        return fold(self.events[:version])


def decode_stored(e: StoredEvent | EventRow) -> Event:
    """Raises CorruptRecord for an event that does not decode."""
    try:
        return codec.decode(e.type, e.schema_version, e.payload)
    except CorruptRecord as err:
        raise CorruptRecord(f"match {e.stream_id} seq {e.seq}: {err}") from err


def extend(
    match: Match | None,
    stored: Sequence[StoredEvent] | Sequence[EventRow],
    decided: tuple[Sequence[Event], State] | None = None,
) -> Match:
    """`match` with `stored` (the events after its version, in seq order) folded in.

    `decided` gives those events already decoded and the state they fold to, when the caller
    has just decided them; otherwise they are decided again by the rules (`recheck`). Raises
    CorruptRecord when the events do not follow on or do not decode, LogTampered when they are
    not what the rules give, NotFound when there is no match at all.
    """
    if not stored:
        if match is None:
            raise NotFound("no such match", reason="MATCH_NOT_FOUND")
        return match
    base = match.version if match is not None else 0
    first, last = stored[0], stored[-1]
    if first.seq != base + 1 or last.seq != base + len(stored):
        raise CorruptRecord(
            f"match {first.stream_id}: events {first.seq}..{last.seq} do not follow seq {base}"
        )
    if decided is not None:
        events, state = list(decided[0]), decided[1]
    else:
        events = [decode_stored(e) for e in stored]
        state = recheck(first.stream_id, base, events, match.state if match is not None else None)
    tokens: list[SealedToken | None] = (
        list(match.seat_tokens) if match is not None else [None] * state.seats
    )
    commands = dict(match.commands) if match is not None else {}
    creator = match.creator_token if match is not None else None
    rematch = match.rematch_of if match is not None else None
    for e in stored:
        meta = e.metadata
        command_id = meta.command_id
        if command_id:
            known = commands.get(command_id)
            if known is None:
                commands[command_id] = Applied(e.seq, e.seq, meta.extra.get(COMMAND_KEY, ""))
            else:
                commands[command_id] = Applied(known.first_seq, e.seq, known.fingerprint)
        if e.type == "SeatTaken":
            sealed = sealed_token(meta.extra)
            if sealed is not None:
                tokens[int(e.payload["seat"])] = sealed
        elif e.type == "MatchCreated":
            creator = creator_token(meta.extra)
            rematch = meta.extra.get(REMATCH_KEY)
    epoch = match.epoch_ms if match is not None else None
    if epoch is None and state.clocked:
        epoch = next((_epoch(e) for e in stored if EPOCH_KEY in e.metadata.extra), None)
    return Match(
        state,
        (*match.events, *events) if match else tuple(events),
        tuple(tokens),
        commands,
        epoch,
        creator,
        rematch,
    )


def token_metadata(sealed: SealedToken) -> dict[str, str]:
    """The metadata that records a seat's sealed token with its SeatTaken."""
    if sealed.key_id is None:
        return {LEGACY_TOKEN_KEY: sealed.digest}
    return {TOKEN_KEY: sealed.digest, TOKEN_KEY_ID: sealed.key_id}


def sealed_token(extra: Mapping[str, str]) -> SealedToken | None:
    """The sealed token a SeatTaken's metadata records, None for none."""
    digest, key_id = extra.get(TOKEN_KEY), extra.get(TOKEN_KEY_ID)
    if digest is not None and key_id is not None:
        return SealedToken(digest, key_id)
    legacy = extra.get(LEGACY_TOKEN_KEY)
    return SealedToken(legacy) if legacy is not None else None


def creator_metadata(sealed: SealedToken) -> dict[str, str]:
    """The metadata that records the creator token with its MatchCreated (without a key id
    when the store authenticates nothing, as for seat tokens)."""
    if sealed.key_id is None:
        return {CREATOR_KEY: sealed.digest}
    return {CREATOR_KEY: sealed.digest, CREATOR_KEY_ID: sealed.key_id}


def creator_token(extra: Mapping[str, str]) -> SealedToken | None:
    """The creator token a MatchCreated's metadata records, None for none."""
    digest = extra.get(CREATOR_KEY)
    return None if digest is None else SealedToken(digest, extra.get(CREATOR_KEY_ID))


def _epoch(e: StoredEvent | EventRow) -> int:
    """The clock epoch a row records. Raises CorruptRecord for one that is not a number."""
    text = e.metadata.extra[EPOCH_KEY]
    if not text.isdigit() or len(text) > 16:
        raise CorruptRecord(f"match {e.stream_id} seq {e.seq}: clock epoch {text[:20]!r}")
    return int(text)


def recheck(match_id: str, version: int, events: Sequence[Event], state: State | None) -> State:
    """The state after `events` (from seq `version` + 1) on `state`, each command they hold
    decided again by the rules: the events must be exactly what the rules give. Raises
    LogTampered naming the first seq that is not.

    The plays of an unclocked match are made on one `fastplay.Board` (`play_checked`: the
    engine's checks, the engine's events), a State built only when another command comes
    or the log ends; every other command goes through `execute`."""
    i = 0
    board: fastplay.Board | None = None
    while i < len(events):
        seq = version + 1 + i
        first = events[i]
        command = command_of(first)
        if command is None:
            raise LogTampered(
                f"match {match_id}: seq {seq}: no command starts with a {type(first).__name__}",
                match_id=match_id,
                seq=seq,
            )
        try:
            if type(command) is Play and (
                board is not None
                or (
                    state is not None
                    and state.phase == PLAYING
                    and not state.clocks
                    and not state.hand_over
                )
            ):
                if board is None:
                    assert state is not None
                    board = fastplay.Board(state, deal)
                start = len(board.events)
                board.play_checked(command.seat, command.tile, command.end)
                decided = tuple(board.events[start:])
            else:
                if board is not None:
                    state, board = board.state(), None
                decided, state = execute(state, command)
        except BergenError as e:
            raise LogTampered(
                f"match {match_id}: seq {seq}: the rules refuse it: {e.message}",
                match_id=match_id,
                seq=seq,
            ) from e
        stored = tuple(events[i : i + len(decided)])
        if stored != decided:
            # A rated match's end written before ends named their holders.
            decided = tuple(map(as_logged_then, stored, decided)) + decided[len(stored) :]
        if stored != decided:
            at = next(
                (j for j, (a, b) in enumerate(zip(stored, decided, strict=False)) if a != b),
                len(stored),
            )
            raise LogTampered(
                f"match {match_id}: seq {seq + at} is not what the rules give after seq "
                f"{seq + at - 1}",
                match_id=match_id,
                seq=seq + at,
            )
        i += len(decided)
    if board is not None:
        state = board.state()
    assert state is not None
    return state


class MatchKind:
    """What a match is to the repository and the unit of work (`bergen.server.unit_of_work`):
    its own stream, folded by `extend`, decided by the rules' `execute`."""

    noun = "match"

    def stream_id(self, aggregate_id: str) -> str:
        return aggregate_id

    def missing(self, aggregate_id: str) -> BergenError:
        return NotFound(f"no match {aggregate_id}", reason="MATCH_NOT_FOUND", match_id=aggregate_id)

    def fold(self, known: Match | None, rows: Sequence[EventRow] | Sequence[StoredEvent]) -> Match:
        return extend(known, rows)

    def decide(self, known: Match | None, command: Command) -> tuple[tuple[Event, ...], State]:
        return execute(known.state if known is not None else None, command)

    def encode(self, event: Event) -> NewEvent:
        return NewEvent(*codec.encode(event))

    def saved(
        self,
        known: Match | None,
        appended: Sequence[StoredEvent],
        decided: tuple[tuple[Event, ...], State],
    ) -> Match:
        return extend(known, appended, decided=decided)

    def fingerprint(self, known: Match, command_id: str) -> str | None:
        applied = known.commands.get(command_id)
        return None if applied is None else applied.fingerprint

    def replayed(self, known: Match, command_id: str) -> tuple[tuple[Event, ...], int, State]:
        applied = known.commands[command_id]
        return (
            known.events[applied.first_seq - 1 : applied.last_seq],
            applied.first_seq,
            known.state_at(applied.last_seq),
        )


ARCHIVED_CHECK_S = 10.0
"""How long a replica may answer an ended match from its cache without looking whether it
was archived since."""


class MatchRepository(Repository[Match, Command, Event, State]):
    """Reads matches from the store through a bounded per-process cache of folded state."""

    def __init__(self, store: EventStore, cache_size: int = 10_000) -> None:
        super().__init__(store, MatchKind(), cache_size)
        self._ended_seen: OrderedDict[str, float] = OrderedDict()
        """When each ended match was last found not archived (or first loaded ended)."""
        self._ended_lock = threading.Lock()

    def load(self, aggregate_id: str) -> Match:
        """As `Repository.load`; an ended match kept in the cache is looked up in the
        archived matches at most every ARCHIVED_CHECK_S, so that one `bergen archive`
        removed is answered MATCH_ARCHIVED by every replica within that time. Raises
        MatchArchived besides."""
        match = super().load(aggregate_id)
        if match.state.phase == ENDED and self._due(aggregate_id):
            self.refuse_if_archived(aggregate_id)
        return match

    def refuse_if_archived(self, match_id: str) -> None:
        """Raises MatchArchived when `bergen archive` has removed the match (which is then
        dropped from the cache, to be read again, from its first rows, by every call)."""
        found = self._store.records().archived(match_id)
        if found is not None:
            self.forget(match_id)
            raise archived_error(found)

    def forget(self, match_id: str) -> None:
        """Drop the match from the cache: the next load reads it from the store."""
        with self._lock:
            self._cache.pop(match_id, None)
        with self._ended_lock:
            self._ended_seen.pop(match_id, None)

    def _due(self, match_id: str) -> bool:
        """Whether the ended match's archived state is to be looked up now (not the first
        time it is seen ended: it was just read from its first row then)."""
        now = time.monotonic()
        with self._ended_lock:
            seen = self._ended_seen.get(match_id)
            if seen is not None and now - seen < ARCHIVED_CHECK_S:
                return False
            self._ended_seen[match_id] = now
            self._ended_seen.move_to_end(match_id)
            while len(self._ended_seen) > self._size:
                self._ended_seen.popitem(last=False)
            return seen is not None
