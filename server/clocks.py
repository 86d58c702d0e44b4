"""The server keeps time: each replica applies the timeouts of the clocked matches it knows
as they fall due (RULES.md section 11).

A `ClockKeeper` holds the due instants of the live clocked matches in a heap, and one thread
sleeps until the earliest, or until the feed brings events that may move one. On start it
reads the listing's matches in play, so that a clock that fell while every server was down is
timed out at once. Every replica keeps every match's clock: they race to write a timeout with
the expected version like any command, so exactly one timeout is written per expiry, and a
replica that dies holding due timeouts costs nothing, since the others hold them too.

Costs nothing while no clock is due: no poll of the matches; a match the feed brings is
looked at from this process's cache (its own writes), from the store only when another
replica wrote it.
"""

from __future__ import annotations

import heapq
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from bergen.domain import codec
from bergen.domain.errors import BergenError
from bergen.domain.events import MatchCreated, TimedOut
from bergen.domain.state import PLAYING, State, evolve

from .commands import MatchCommands, wall_ms
from .matches import EPOCH_KEY, Match, MatchRepository
from .projections import MatchListProjection, is_match_stream
from .store import EventStore, StoredEvent
from .worker import Worker

log = logging.getLogger("bergen.server.clocks")

PAGE = 100
RETRY_S = 1.0
"""A timeout that failed (the store down, say) is tried again this long after."""
GATHER_S = 0.05
"""After events wake the keeper, it waits this long for more before it looks: under load it
wakes at most 20 times a second, not once a play (a wake-up hands the interpreter's lock to
its thread, which costs every command a little). A clock that was moved is seen this much
later at most, far inside the delay a timeout may take."""
UNCLOCKED_KEPT = 100_000
"""Matches remembered as having no clock, so that their events cost a set lookup."""


class ClockKeeper(Worker):
    """Applies every due timeout of the matches this replica knows, in a thread of its own."""

    def __init__(
        self,
        store: EventStore,
        repository: MatchRepository,
        listing: MatchListProjection,
        commands: MatchCommands,
        clock: Callable[[], int] = wall_ms,
    ) -> None:
        super().__init__("bergen-clocks")
        self._store = store
        self._repo = repository
        self._listing = listing
        self._commands = commands
        self._clock = clock
        self._heap: list[tuple[int, str]] = []
        self._due: dict[str, int] = {}
        """The due instant (Unix ms) of each match with a running clock; a heap entry that
        differs is stale and skipped."""
        self._dirty: dict[str, int] = {}
        """Matches the feed brought, with the highest seq seen, to be looked at again."""
        self._unclocked: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()
        self.applied = 0
        """Timeouts this replica wrote."""

    def pending(self) -> int:
        """Matches with a running clock this replica holds."""
        with self._lock:
            return len(self._due)

    def note(self, events: Iterable[StoredEvent]) -> None:
        """Events any replica wrote (the feed's, possibly twice): their matches' clocks may
        have moved. Cheap: the work is done in the keeper's thread."""
        fresh = False
        with self._lock:
            for e in events:
                if e.stream_id in self._unclocked or not is_match_stream(e.stream_id):
                    continue  # a tournament's, a player's or a hand-off's stream has no clock
                if self._dirty.get(e.stream_id, 0) < e.seq:
                    self._dirty[e.stream_id] = e.seq
                    fresh = True
        if fresh and not self._wake.is_set():
            self._wake.set()

    def _run(self) -> None:
        self._scan()
        while not self._stop.is_set():
            try:
                self._refresh()
                wait = self._fire()
            except Exception:  # keep time: a passing database error must not end it
                log.exception("clocks: a bug or a lost database; trying again")
                wait = RETRY_S
            woken = self._wake.wait(wait)
            if woken:
                self._stop.wait(GATHER_S)
            self._wake.clear()

    def _scan(self) -> None:
        """Look at every match in play (on start: clocks may have fallen while no server ran)."""
        token = ""
        caught_up = False
        while not self._stop.is_set():
            try:
                if not caught_up:
                    # The whole log folded into the listing first (a database just migrated
                    # may be far behind), so that no match in play is missed.
                    self._listing.catch_up()
                    caught_up = True
                rows, token = self._listing.page(PLAYING.value, "", PAGE, token)
            except BergenError as e:
                log.warning("clocks: cannot list the matches in play (%s); trying again", e)
                self._stop.wait(RETRY_S)
                continue
            with self._lock:
                for row in rows:
                    self._dirty.setdefault(row.match_id, 0)
            if not token:
                return

    def _refresh(self) -> None:
        """Look at the matches the feed brought: schedule, move or drop their clocks."""
        with self._lock:
            dirty, self._dirty = self._dirty, {}
        for match_id, seq in dirty.items():
            match = self._repo.cached(match_id)
            if match is None and not self._clocked(match_id):
                # Found by the start-up scan, or brought by the feed before this replica held
                # it (as a match an open transaction hid from the scan is): a match without a
                # clock is not worth a load (a restart may find thousands in play).
                self._forget(match_id)
                continue
            if match is None or match.version < seq:
                try:
                    match = self._repo.load(match_id)
                except BergenError as e:
                    log.warning("clocks: match %s cannot be read: %s", match_id, e)
                    continue
            self._schedule(match_id, match)

    def _clocked(self, match_id: str) -> bool:
        """Whether the match's first event gives it a clock (True when it cannot tell)."""
        try:
            first = self._store.read_stream(match_id, 1, limit=1)
            created = codec.decode(first[0].type, first[0].schema_version, first[0].payload)
        except (BergenError, IndexError) as e:
            log.warning("clocks: match %s: its first event cannot be read: %s", match_id, e)
            return True
        return not isinstance(created, MatchCreated) or created.rules.clocked

    def _forget(self, match_id: str) -> None:
        with self._lock:
            self._unclocked[match_id] = None
            while len(self._unclocked) > UNCLOCKED_KEPT:
                self._unclocked.popitem(last=False)

    def _schedule(self, match_id: str, match: Match) -> None:
        if not match.state.info.rules.clocked:
            self._forget(match_id)
            return
        due = self._commands.due_ms(match)
        with self._lock:
            if due is None:
                self._due.pop(match_id, None)
            elif self._due.get(match_id) != due:
                self._due[match_id] = due
                heapq.heappush(self._heap, (due, match_id))
                if len(self._heap) > 2 * len(self._due) + 64:
                    # Every move of a clock leaves a stale entry behind; with long clocks
                    # they would not reach the top for hours.
                    self._heap = [(d, m) for m, d in self._due.items()]
                    heapq.heapify(self._heap)

    def _fire(self) -> float:
        """Apply every timeout due now; the seconds until the next one (at most a minute)."""
        while not self._stop.is_set():
            with self._lock:
                while self._heap and self._due.get(self._heap[0][1]) != self._heap[0][0]:
                    heapq.heappop(self._heap)
                if not self._heap:
                    return 60.0
                due, match_id = self._heap[0]
                now = self._clock()
                if due > now:
                    return (due - now) / 1000
                heapq.heappop(self._heap)
                del self._due[match_id]
            try:
                written = self._commands.time_out(match_id)
                if written is not None:
                    self.applied += 1
                # Whoever wrote it, look again: the next seat's clock now runs.
                match = self._repo.load(match_id)
                if written is None and (self._commands.due_ms(match) or now + 1) <= now:
                    raise BergenError(f"the clock fell at {due} and no timeout could be applied")
                self._schedule(match_id, match)
            except BergenError as e:
                log.warning("clocks: match %s: timeout not applied: %s", match_id, e)
                with self._lock:
                    later = self._clock() + int(RETRY_S * 1000)
                    self._due[match_id] = later
                    heapq.heappush(self._heap, (later, match_id))
        return 0.0


@dataclass(frozen=True, slots=True)
class Expiry:
    """A timeout as stored: the event, the instant its clock fell and the instant its row was
    stored (both Unix ms on the servers' clock)."""

    event: TimedOut
    due_ms: int
    stored_ms: int

    @property
    def delay_ms(self) -> int:
        return self.stored_ms - self.due_ms


def expiries(stored: Sequence[StoredEvent]) -> list[Expiry]:
    """Every timeout of a stored match with when its clock fell and when it was stored, for
    audits and for measuring how late timeouts come. Raises ValueError for a timeout of a
    seat whose clock did not run, or one before its clock fell."""
    epoch = next((_epoch_of(e) for e in stored if EPOCH_KEY in e.metadata.extra), None)
    state: State | None = None
    found = []
    for row in stored:
        event = codec.decode(row.type, row.schema_version, row.payload)
        if isinstance(event, TimedOut):
            due = None if state is None else state.due_at_ms
            if state is None or due is None or epoch is None or state.running != event.seat:
                raise ValueError(
                    f"seq {row.seq}: a timeout of seat {event.seat}, whose clock stood"
                )
            if event.at_ms < due:
                raise ValueError(f"seq {row.seq}: a timeout at {event.at_ms} ms, before {due} ms")
            stored_ms = int(row.recorded_at.timestamp() * 1000)
            found.append(Expiry(event, epoch + due, stored_ms))
        state = evolve(state, event)
    return found


def _epoch_of(e: StoredEvent) -> int:
    return int(e.metadata.extra[EPOCH_KEY])
