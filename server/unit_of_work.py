"""One repository and one unit of work for every aggregate (a match, a tournament).

An aggregate is a stream of events folded into a value with a version (its last seq) and the
command ids it has applied. What differs between aggregates is told by its `Kind`: the
stream that holds it, how stored rows are folded onto it (the projector), how a command is
decided on it, how an event is encoded, and what a command id applied before answers.

`Repository.load(id)` reads only the rows the per-process cache has not seen and folds them
on; `cached(id)` is the cached copy without a read. `UnitOfWork.run` serves every command:
take the aggregate (the cached copy first), authorise, decide, append naming the version it
was decided on, remember what the append wrote; on a refusal decided on the cached copy, or
a lost race, again on a fresh read. A command id applied before is answered from the log.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from bergen.domain.errors import BergenError, ConcurrencyConflict, InvalidArgument, LogTampered

from .store import Append, EventRow, EventStore, NewEvent, StoredEvent
from .store.records import archived_error

log = logging.getLogger("bergen.server")

RETRIES = 8
MAX_COMMAND_ID = 100
COMMAND_KEY = "command"
"""Every row's metadata: what the command that wrote it was (its fingerprint)."""


class Feed(Protocol):
    """Where what an append wrote is told (`bergen.server.feed.EventFeed`), so that this
    process's watchers see it at once."""

    def observe(self, events: Sequence[StoredEvent]) -> None: ...


class Versioned(Protocol):
    @property
    def version(self) -> int: ...


A = TypeVar("A", bound=Versioned)
"""An aggregate as folded."""
C = TypeVar("C")
"""A command on it."""
E = TypeVar("E")
"""One of its events."""
S = TypeVar("S")
"""What its events fold to: the state a command's answer is made of."""
C_contra = TypeVar("C_contra", contravariant=True)


@dataclass(frozen=True)  # no slots: built through its aliases (`Intent[Command](...)`)
class Intent(Generic[C]):
    """A command as authorised for one caller: what to decide, who it is recorded as, and
    what else is recorded with its events."""

    command: C
    actor: str
    fingerprint: str
    """What the command was, recorded with its events: a command id sent again must name
    the same command."""
    extra: Mapping[str, str] = field(default_factory=dict)
    seat: int | None = None
    """The seat acted for, whose eyes the outcome is shown through; None for none."""


@dataclass(frozen=True)
class Written(Generic[A, C, E, S]):
    """What one command wrote (or had written, for a repeated command id): its events from
    seq `first_seq`, the state right after them, the intent they were decided from, and the
    aggregate as this process knows it afterwards."""

    events: tuple[E, ...]
    first_seq: int
    state: S
    intent: Intent[C]
    aggregate: A
    replayed: bool = False

    @property
    def last_seq(self) -> int:
        return self.first_seq + len(self.events) - 1


class Kind(Protocol[A, C_contra, E, S]):
    """What one kind of aggregate is: everything the repository and the unit of work need
    to know of it."""

    noun: str
    """What it is called in messages: "match", "tournament"."""

    def stream_id(self, aggregate_id: str) -> str:
        """The stream that holds it."""
        ...

    def missing(self, aggregate_id: str) -> BergenError:
        """The NotFound for an aggregate with no event."""
        ...

    def fold(self, known: A | None, rows: Sequence[EventRow] | Sequence[StoredEvent]) -> A:
        """`known` with `rows` (the stream's rows after its version) folded on, every check
        made. Raises CorruptRecord, LogTampered."""
        ...

    def decide(self, known: A | None, command: C_contra) -> tuple[tuple[E, ...], S]:
        """The events the command gives on `known`, and the state they fold to. Raises
        what the rules raise."""
        ...

    def encode(self, event: E) -> NewEvent:
        """The event as the store takes it."""
        ...

    def saved(
        self, known: A | None, appended: Sequence[StoredEvent], decided: tuple[tuple[E, ...], S]
    ) -> A:
        """`known` with the events just decided and appended folded on, without deciding
        them again."""
        ...

    def fingerprint(self, known: A, command_id: str) -> str | None:
        """What the command applied under `command_id` was; None for no such command."""
        ...

    def replayed(self, known: A, command_id: str) -> tuple[tuple[E, ...], int, S]:
        """The events a command applied before wrote, its first seq, and the state then."""
        ...


class Repository(Generic[A, C, E, S]):
    """Reads aggregates of one kind through a bounded per-process cache of folded state;
    the store is the truth (each load reads the rows after the cached version, checked as
    authentic by the store, and folds them on)."""

    def __init__(self, store: EventStore, kind: Kind[A, C, E, S], cache_size: int) -> None:
        self._store = store
        self.kind = kind
        self._size = cache_size
        self._cache: OrderedDict[str, A] = OrderedDict()
        self._lock = threading.Lock()
        self._tampered: set[tuple[str, str]] = set()
        self.hits = 0
        """Lookups that found the aggregate folded here (`cached`, or `load` reading only
        what came after), counted under the cache's lock; `misses` those that did not."""
        self.misses = 0

    def load(self, aggregate_id: str) -> A:
        """The aggregate at its latest version. Raises NotFound, CorruptRecord, LogTampered
        (a row not authentic, or not what the rules give: the aggregate is read-only from
        then on, every call on it refused, and logged loudly once), StorageUnavailable."""
        cached = self.cached(aggregate_id)
        from_seq = cached.version + 1 if cached is not None else 1
        try:
            new = self._store.read_rows(self.kind.stream_id(aggregate_id), from_seq)
            if not new:
                if cached is None:
                    raise self.kind.missing(aggregate_id)
                return cached
            if cached is None and new[0].seq != 1:
                self._refuse_archived(aggregate_id)
            aggregate = self.kind.fold(cached, new)
        except LogTampered as e:
            if cached is None:
                self._refuse_archived(aggregate_id)  # its first row links to none it read
            self._alarm(aggregate_id, e)
            raise
        self.remember(aggregate_id, aggregate)
        return aggregate

    def _refuse_archived(self, aggregate_id: str) -> None:
        """Raises MatchArchived when the stream, which lacks its first rows, is a match
        `bergen archive` removed (else its fold says what is wrong)."""
        found = self._store.records().archived(self.kind.stream_id(aggregate_id))
        if found is not None:
            raise archived_error(found)

    def _alarm(self, aggregate_id: str, error: LogTampered) -> None:
        seen = (aggregate_id, error.metadata.get("seq", ""))
        with self._lock:
            first = seen not in self._tampered
            self._tampered.add(seen)
        if first:
            log.critical(
                "LOG TAMPERED: %s %s will not be folded, every call on it is refused: %s",
                self.kind.noun,
                aggregate_id,
                error.message,
            )

    def found_tampered(self, aggregate_id: str) -> bool:
        """Whether a load here has found a row of the aggregate not authentic."""
        with self._lock:
            return any(seen == aggregate_id for seen, _ in self._tampered)

    def cached(self, aggregate_id: str) -> A | None:
        """The aggregate as this process last saw it (possibly behind the store), or None."""
        with self._lock:
            found = self._cache.get(aggregate_id)
            if found is None:
                self.misses += 1
            else:
                self.hits += 1
            return found

    def remember(self, aggregate_id: str, aggregate: A) -> None:
        """Keep `aggregate` unless the cache already holds a newer version."""
        with self._lock:
            known = self._cache.get(aggregate_id)
            if known is not None and known.version >= aggregate.version:
                self._cache.move_to_end(aggregate_id)
                return
            self._cache[aggregate_id] = aggregate
            self._cache.move_to_end(aggregate_id)
            while len(self._cache) > self._size:
                self._cache.popitem(last=False)


Deadline = Callable[[], None]
"""Raises when the caller's deadline has passed; called before each costly step."""


def no_deadline() -> None:
    return None


def _nothing(_why: str) -> None:
    return None


class UnitOfWork(Generic[A, C, E, S]):
    """Load at a version, authorise, decide, append with the expected version; again on a
    lost race; a repeated command id answered from the log."""

    def __init__(
        self,
        store: EventStore,
        repository: Repository[A, C, E, S],
        feed: Feed | None,
        stamp: Callable[[], Mapping[str, str]] | None = None,
    ) -> None:
        """Appends go to `store` (the repository's, or the same observed), and are told to
        `feed`; `stamp` gives more metadata recorded with every append (the clock, say)."""
        self._store = store
        self._repo = repository
        self._kind = repository.kind
        self._feed = feed
        self._stamp = stamp
        self.on_retry: Callable[[str], None] = _nothing
        """Told why each command is decided again: `stale` (refused on the cached state, so
        read afresh) or `conflict` (its append lost a race)."""

    def run(
        self,
        aggregate_id: str,
        authorise: Callable[[A | None], Intent[C]],
        *,
        new: bool = False,
        command_id: str | None = None,
        expected_version: int | None = None,
        deadline: Deadline = no_deadline,
        earlier_ids: Sequence[str] = (),
    ) -> Written[A, C, E, S]:
        """Serve one command: `authorise` builds its intent from the aggregate it names
        (None for one not yet created, `new`). `earlier_ids` are ids the same command may
        have been written under before `command_id` (a join's, before a key rotation): it
        is answered from the log under those too.

        Raises what `authorise` and the rules raise, NotFound, InvalidArgument (a command
        id used for another command), ConcurrencyConflict (a stale `expected_version`, or
        every retry lost a race)."""
        if command_id is not None and not 0 < len(command_id) <= MAX_COMMAND_ID:
            raise InvalidArgument(
                f"a command id is 1 to {MAX_COMMAND_ID} characters", reason="BAD_COMMAND_ID"
            )
        kind = self._kind
        reread = False
        for _ in range(RETRIES):
            known: A | None = None
            fresh = True
            if not new:
                known = None if reread else self._repo.cached(aggregate_id)
                fresh = known is None
                if known is None:
                    known = self._repo.load(aggregate_id)
            deadline()
            try:
                intent = authorise(known)
                if known is not None:
                    ids = (command_id, *earlier_ids) if command_id is not None else ()
                    applied = next((c for c in ids if kind.fingerprint(known, c) is not None), None)
                    if applied is not None:
                        return self._replayed(aggregate_id, known, applied, intent)
                    if expected_version is not None and expected_version != known.version:
                        raise ConcurrencyConflict(
                            f"{kind.noun} {aggregate_id} is at version {known.version}, "
                            f"not {expected_version}",
                            reason="STALE_VERSION",
                            **self._named(aggregate_id, version=known.version),
                        )
                decided = kind.decide(known, intent.command)
            except BergenError:
                if fresh:
                    raise
                reread = True
                self.on_retry("stale")
                continue
            version = known.version if known is not None else 0
            try:
                result = self._store.append(
                    Append(
                        kind.stream_id(aggregate_id),
                        version,
                        [kind.encode(e) for e in decided[0]],
                        command_id,
                        intent.actor,
                        extra=self._extra(intent),
                    )
                )
            except ConcurrencyConflict:
                if new or (fresh and expected_version is not None):
                    raise
                reread = True
                self.on_retry("conflict")
                continue
            if result.replayed:  # the store had this command id already
                assert command_id is not None
                return self._replayed(
                    aggregate_id, self._repo.load(aggregate_id), command_id, intent
                )
            after = kind.saved(known, result.events, decided)
            self._repo.remember(aggregate_id, after)
            if self._feed is not None:
                self._feed.observe(result.events)
            return Written(decided[0], result.first_seq, decided[1], intent, after)
        raise ConcurrencyConflict(
            f"{kind.noun} {aggregate_id}: too busy, try again",
            reason="CONTENDED",
            **self._named(aggregate_id),
        )

    def _named(self, aggregate_id: str, **more: int) -> dict[str, str | int]:
        """An error's metadata naming the aggregate (`match_id`, `tournament_id`)."""
        return {f"{self._kind.noun}_id": aggregate_id, **more}

    def _extra(self, intent: Intent[C]) -> dict[str, str]:
        extra = {**intent.extra, COMMAND_KEY: intent.fingerprint}
        if self._stamp is not None:
            extra.update(self._stamp())
        return extra

    def _replayed(
        self, aggregate_id: str, known: A, command_id: str, intent: Intent[C]
    ) -> Written[A, C, E, S]:
        if self._kind.fingerprint(known, command_id) != intent.fingerprint:
            raise InvalidArgument(
                f"command id already used in {self._kind.noun} {aggregate_id} for another command",
                reason="COMMAND_ID_REUSED",
            )
        events, first_seq, state = self._kind.replayed(known, command_id)
        return Written(events, first_seq, state, intent, known, replayed=True)
