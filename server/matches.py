"""Loading matches: read the stream, fold it, and keep the folded state per process.

The cache is keyed by match and version and is never the truth: `load` reads the events the
cache has not seen (one query). A command may be decided on the cached copy without a read
(`cached`), because its append names the version it was decided on: if another replica
wrote since, the store refuses the append and the command is decided again on a fresh load.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from bergen.domain import codec
from bergen.domain.errors import CorruptRecord, NotFound
from bergen.domain.events import Event
from bergen.domain.state import State, fold

from .store import EventRow, EventStore, StoredEvent

TOKEN_KEY = "seat_token_sha256"
COMMAND_KEY = "command"


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
    token_hashes: tuple[str | None, ...]
    commands: dict[str, Applied]

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
    has just decided them. Raises CorruptRecord when the events do not follow on or do not
    fold, NotFound when there is no match at all.
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
        try:
            state = fold(events, match.state if match is not None else None)
        except CorruptRecord as err:
            raise CorruptRecord(f"match {first.stream_id}: {err}") from err
    tokens: list[str | None] = (
        list(match.token_hashes) if match is not None else [None] * state.seats
    )
    commands = dict(match.commands) if match is not None else {}
    for e in stored:
        meta = e.metadata
        command_id = meta.command_id
        if command_id:
            known = commands.get(command_id)
            if known is None:
                commands[command_id] = Applied(e.seq, e.seq, meta.extra.get(COMMAND_KEY, ""))
            else:
                commands[command_id] = Applied(known.first_seq, e.seq, known.fingerprint)
        if e.type == "SeatTaken" and TOKEN_KEY in meta.extra:
            tokens[int(e.payload["seat"])] = meta.extra[TOKEN_KEY]
    return Match(
        state, (*match.events, *events) if match else tuple(events), tuple(tokens), commands
    )


class MatchRepository:
    """Reads matches from the store through a bounded per-process cache of folded state."""

    def __init__(self, store: EventStore, cache_size: int = 10_000) -> None:
        self._store = store
        self._size = cache_size
        self._cache: OrderedDict[str, Match] = OrderedDict()
        self._lock = threading.Lock()

    def load(self, match_id: str) -> Match:
        """The match at its latest version. Raises NotFound, or CorruptRecord."""
        with self._lock:
            cached = self._cache.get(match_id)
        from_seq = cached.version + 1 if cached is not None else 1
        new = self._store.read_rows(match_id, from_seq)
        if cached is None and not new:
            raise NotFound(f"no match {match_id}", reason="MATCH_NOT_FOUND", match_id=match_id)
        if not new:
            assert cached is not None
            return cached
        match = extend(cached, new)
        self.remember(match_id, match)
        return match

    def cached(self, match_id: str) -> Match | None:
        """The match as this process last saw it (possibly behind the store), or None."""
        with self._lock:
            return self._cache.get(match_id)

    def remember(self, match_id: str, match: Match) -> None:
        """Keep `match` unless the cache already holds a newer version."""
        with self._lock:
            known = self._cache.get(match_id)
            if known is not None and known.version >= match.version:
                self._cache.move_to_end(match_id)
                return
            self._cache[match_id] = match
            self._cache.move_to_end(match_id)
            while len(self._cache) > self._size:
                self._cache.popitem(last=False)
