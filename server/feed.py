"""Following every stream in global order: wake-ups for watchers and the match listing.

Each server process follows the store's commit-safe global order. On PostgreSQL a
LISTEN/NOTIFY channel wakes the follower as soon as any replica commits; polling remains
as the fallback. The process's own appends are delivered at once through `observe`.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from bergen.domain.errors import InvalidArgument
from bergen.domain.state import ENDED, PLAYING, SEATING

from .store import EventStore, StoredEvent

log = logging.getLogger("bergen.server.feed")

NOTIFY_CHANNEL = "bergen_events"
MAX_PAGE = 100
DEFAULT_PAGE = 20


class Subscription:
    """Events of one match delivered to one watcher, in any order, possibly twice."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._items: list[StoredEvent] = []
        self._closed = False

    def put(self, events: Iterable[StoredEvent]) -> None:
        with self._cond:
            self._items.extend(events)
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def wait(self, active: Callable[[], bool], tick: float = 0.5) -> bool:
        """Block until events arrive (True), or until closed or `active()` is false (False)."""
        with self._cond:
            while not self._items:
                if self._closed or not active():
                    return False
                self._cond.wait(tick)
            return True

    def take(self) -> list[StoredEvent]:
        with self._cond:
            items, self._items = self._items, []
            return items


@dataclass
class MatchSummary:
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


@dataclass
class MatchIndex:
    """A listing of matches derived from their events; never the truth, rebuilt at start."""

    matches: dict[str, MatchSummary] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    _counter: int = 0

    def apply(self, e: StoredEvent) -> None:
        with self.lock:
            summary = self.matches.get(e.stream_id)
            if summary is not None and e.seq <= summary.version:
                return
            p = e.payload
            if e.type == "MatchCreated":
                if summary is not None:
                    return
                self._counter += 1
                seats = int(p["seats"])
                partnerships = bool(p["partnerships"])
                summary = MatchSummary(
                    e.stream_id,
                    str(p["name"]),
                    SEATING,
                    seats,
                    partnerships,
                    str(p["rules"]["preset"]),
                    [""] * seats,
                    [0] * (2 if partnerships else seats),
                    e.seq,
                    self._counter,
                )
                self.matches[e.stream_id] = summary
                return
            if summary is None or e.seq != summary.version + 1:
                # Out of order: the follower will deliver the missing events; rebuild then.
                return
            summary.version = e.seq
            if e.type == "SeatTaken":
                summary.players[int(p["seat"])] = str(p["name"])
            elif e.type == "Dealt" and summary.phase == SEATING:
                summary.phase = PLAYING
            elif e.type in ("PointsScored",):
                summary.scores[int(p["side"])] += int(p["points"])
            elif e.type == "MatchEnded":
                summary.phase = ENDED
                summary.scores = [int(s) for s in p["scores"]]

    def page(
        self, phase: str | None, player: str, size: int, token: str
    ) -> tuple[list[MatchSummary], str]:
        """Newest first. Raises InvalidArgument for a page token this index did not give."""
        size = DEFAULT_PAGE if size == 0 else min(size, MAX_PAGE)
        after: int | None = None
        if token:
            try:
                after = json.loads(base64.urlsafe_b64decode(token.encode()))["before"]
            except (ValueError, KeyError, TypeError) as e:
                raise InvalidArgument("page_token is not one this server gave") from e
            # Only an int was ever given: int() of 1e999 (inf) would raise OverflowError.
            if type(after) is not int:
                raise InvalidArgument("page_token is not one this server gave")
        with self.lock:
            rows = sorted(self.matches.values(), key=lambda s: -s.order)
            chosen = [
                MatchSummary(**{**s.__dict__, "players": list(s.players), "scores": list(s.scores)})
                for s in rows
                if (after is None or s.order < after)
                and (phase is None or s.phase == phase)
                and (not player or player in s.players)
            ][: size + 1]
        more = len(chosen) > size
        chosen = chosen[:size]
        next_token = ""
        if more:
            next_token = base64.urlsafe_b64encode(
                json.dumps({"before": chosen[-1].order}).encode()
            ).decode()
        return chosen, next_token


class EventFeed:
    """Follows the global order in a thread and fans events out to subscribers."""

    def __init__(
        self,
        store: EventStore,
        *,
        poll_interval: float = 0.25,
        listen: Callable[[Callable[[], None], threading.Event], None] | None = None,
        notifier: PostgresNotifier | None = None,
    ) -> None:
        self._store = store
        self._poll = poll_interval
        self._listen = listen
        self._notifier = notifier
        self.index = MatchIndex()
        self._subs: dict[str, set[Subscription]] = {}
        self._subs_lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._position = 0
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """Catch up with every stored event, then follow in the background."""
        self._catch_up()
        follower = threading.Thread(target=self._follow, name="bergen-feed", daemon=True)
        self._threads.append(follower)
        if self._listen is not None:
            listener = threading.Thread(
                target=self._listen,
                args=(self.wake, self._stop),
                name="bergen-listen",
                daemon=True,
            )
            self._threads.append(listener)
        for t in self._threads:
            t.start()
        if self._notifier is not None:
            self._notifier.start()

    def stop(self) -> None:
        """Stop following and close every subscription, so watchers end."""
        self._stop.set()
        self._wake.set()
        if self._notifier is not None:
            self._notifier.stop()
        with self._subs_lock:
            subs = [s for group in self._subs.values() for s in group]
        for s in subs:
            s.close()
        for t in self._threads:
            t.join(timeout=5)

    def wake(self) -> None:
        self._wake.set()

    def subscribe(self, match_id: str) -> Subscription:
        sub = Subscription()
        with self._subs_lock:
            self._subs.setdefault(match_id, set()).add(sub)
        if self._stop.is_set():
            sub.close()
        return sub

    def unsubscribe(self, match_id: str, sub: Subscription) -> None:
        with self._subs_lock:
            group = self._subs.get(match_id)
            if group is not None:
                group.discard(sub)
                if not group:
                    del self._subs[match_id]

    def observe(self, events: Sequence[StoredEvent]) -> None:
        """Deliver events this process has just written, without waiting for the follower."""
        self._deliver(events)
        if self._notifier is not None:
            self._notifier.poke()

    def _deliver(self, events: Sequence[StoredEvent]) -> None:
        by_match: dict[str, list[StoredEvent]] = {}
        for e in events:
            self.index.apply(e)
            by_match.setdefault(e.stream_id, []).append(e)
        with self._subs_lock:
            targets = [(s, by_match[m]) for m in by_match for s in self._subs.get(m, ())]
        for sub, evs in targets:
            sub.put(evs)

    def _catch_up(self) -> int:
        count = 0
        while True:
            batch = self._store.read_all(self._position, 1000)
            if not batch:
                return count
            self._deliver(batch)
            self._position = batch[-1].position
            count += len(batch)

    def _follow(self) -> None:
        while not self._stop.is_set():
            try:
                if self._catch_up() == 0:
                    self._wake.wait(self._poll)
                    self._wake.clear()
            except Exception:  # keep following: a passing database error must not end it
                log.exception("event feed: reading the global order failed; retrying")
                self._stop.wait(1.0)


class PostgresNotifier:
    """Tells other replicas that this one has written, without slowing its appends.

    A NOTIFY inside the append would make commits queue on PostgreSQL's notification lock;
    instead one thread sends NOTIFY on a connection of its own after appends commit. It sends
    at most one every `min_interval` seconds: appends made in between share the next, which
    keeps the cost of a busy replica's notifications (a round trip, and a wake-up of every
    listening replica) bounded while adding at most `min_interval` to what a watcher waits.
    """

    def __init__(self, conninfo: str, replica: str, min_interval: float = 0.01) -> None:
        self._conninfo = conninfo
        self._replica = replica
        self._min_interval = min_interval
        self._pending = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bergen-notify", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def poke(self) -> None:
        self._pending.set()

    def stop(self) -> None:
        self._stop.set()
        self._pending.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        import psycopg

        while not self._stop.is_set():
            try:
                with psycopg.connect(self._conninfo, autocommit=True) as conn:
                    while not self._stop.is_set():
                        self._pending.wait()
                        self._pending.clear()
                        if self._stop.is_set():
                            return
                        conn.execute("SELECT pg_notify(%s, %s)", (NOTIFY_CHANNEL, self._replica))
                        self._stop.wait(self._min_interval)
            except Exception:
                log.exception("event feed: NOTIFY connection lost; replicas fall back to polling")
                self._stop.wait(1.0)


def postgres_listener(
    conninfo: str, replica: str
) -> Callable[[Callable[[], None], threading.Event], None]:
    """A LISTEN loop on its own connection that calls `wake` on every notification sent by
    another replica (this one's own appends reach its watchers directly)."""

    def listen(wake: Callable[[], None], stop: threading.Event) -> None:
        import psycopg

        while not stop.is_set():
            try:
                with psycopg.connect(conninfo, autocommit=True) as conn:
                    conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                    while not stop.is_set():
                        for note in conn.notifies(timeout=0.5, stop_after=1):
                            if note.payload != replica:
                                wake()
            except Exception:
                log.exception("event feed: LISTEN connection lost; polling until it is back")
                stop.wait(1.0)

    return listen
