"""Following every stream in global order: wake-ups for watchers and the match listing.

Each server process follows the store's commit-safe global order from where it stood when
the process started: watchers load their match from the store after subscribing, so they
need only what comes later. On PostgreSQL a LISTEN/NOTIFY channel wakes the follower as soon
as any replica commits (and a wake-up whose rows are not in the commit-safe order yet is read
again within milliseconds); polling remains as the fallback. The process's own appends are
delivered at once through `observe`; what the follower reads is delivered only when it links
and its authenticator verifies (`RowCheck`), since a watcher folds what it is given. The
match listing (`listing`) is a projection kept in the database (bergen.server.projections),
folded in a thread of its own and before each page; so are the players' ratings (`ratings`,
bergen.server.ratings) and the transparency log (`tlog`, bergen.server.tlog), each in a thread
of its own from the same batches: on a first start over a long log each catches up on its own,
none waiting for another's pass.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Generator, Iterable, Sequence
from contextlib import suppress
from typing import Any

from bergen.domain.errors import LogRolledBack

from .projections import (
    FOLD_EVERY_S,
    FoldLoop,
    MatchListProjection,
    RowCheck,
    read_past_unreadable,
)
from .ratings import RatingsProjection
from .store import EventStore, StoredEvent
from .threads import STOP_WAIT_S, Thread, join_until
from .tlog import TransparencyLog

log = logging.getLogger("bergen.server.feed")

NOTIFY_CHANNEL = "bergen_events"
WAKE_RETRY = 0.002
"""Seconds after a wake-up that found nothing new before the follower reads again (then
twice that, and so on up to WAKE_RETRY_MAX, for WAKE_RETRY_FOR seconds after the wake-up)."""
WAKE_RETRY_MAX = 0.016
WAKE_RETRY_FOR = 2.0


TICK_S = 0.5
"""How often a waiting subscriber asks whether its caller is still there, by default."""


class Subscription:
    """Events of one match delivered to one watcher, in any order, possibly twice.

    A watcher in a thread waits with `wait`. A watcher on an event loop (`loop` given: a
    stream served by `grpc.aio`) holds no thread while it waits: its generator yields the
    subscription itself (`waiting`), and the coroutine driving it awaits `ready`, which the
    feed's thread resolves through `loop.call_soon_threadsafe`."""

    __slots__ = ("_closed", "_cond", "_items", "_lock", "_loop", "_ready", "refused")

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock) if loop is None else None
        self._loop = loop
        self._ready: asyncio.Future[None] | None = None
        self._items: list[StoredEvent] = []
        self._closed = False
        self.refused = False
        """Set when the feed refused a row of this match (not authentic): the watcher must
        read the match again, which names the row."""

    def put(self, events: Iterable[StoredEvent]) -> None:
        with self._lock:
            self._items.extend(events)
            self._woken()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._woken()

    def refuse(self) -> None:
        with self._lock:
            self.refused = True
            self._woken()

    def _woken(self) -> None:
        """Wake the watcher (the lock held)."""
        if self._cond is not None:
            self._cond.notify_all()
            return
        ready, self._ready = self._ready, None
        if ready is not None and self._loop is not None:
            with suppress(RuntimeError):  # the loop is closed: its streams are gone
                self._loop.call_soon_threadsafe(_resolve, ready)

    def wait(self, active: Callable[[], bool], tick: float = TICK_S) -> bool:
        """Block until events arrive (True), or until closed or `active()` is false (False),
        which is asked every `tick` seconds."""
        assert self._cond is not None, "a subscription on a loop is awaited (`ready`)"
        with self._cond:
            while not self._items and not self.refused:
                if self._closed or not active():
                    return False
                self._cond.wait(tick)
            return True

    def waiting(
        self, active: Callable[[], bool], tick: float = TICK_S
    ) -> Generator[Subscription, None, bool]:
        """As `wait`, in a generator (`yield from`): on a loop, yields this subscription for
        its driver to await `ready` rather than blocking. Whether events came (True), or the
        subscription was closed (False)."""
        if self._cond is not None:
            return self.wait(active, tick)
        while True:
            with self._lock:
                if self._items or self.refused:
                    return True
                if self._closed:
                    return False
            yield self

    async def ready(self) -> None:
        """Return once events came, or the subscription was refused or closed (on its loop)."""
        ready = self._waiter()
        if ready is not None:
            await ready

    def when_ready(self, callback: Callable[[], object]) -> None:
        """On its loop, without a coroutine: have `callback` called on the loop once events
        came, or the subscription was refused or closed (soon, when that has happened)."""
        ready = self._waiter()
        if ready is None:
            self._loop.call_soon(callback)  # type: ignore[union-attr]
        else:
            ready.add_done_callback(lambda _: callback())

    def _waiter(self) -> asyncio.Future[None] | None:
        """The future the feed resolves when events come, or the subscription is refused or
        closed; None when one of those has happened already."""
        assert self._loop is not None
        with self._lock:
            if self._items or self.refused or self._closed:
                return None
            ready = self._ready = self._loop.create_future()
            return ready

    def take(self) -> list[StoredEvent]:
        with self._lock:
            items, self._items = self._items, []
            return items


def _resolve(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)


FOLLOW_BATCH = 1000
"""Events the follower reads at a time."""
OWN_KEPT = 20_000
"""At most this many events written here are remembered until the follower reads them back."""
FOLLOWED_KEPT = 4096
"""The events the follower delivered last, remembered (oldest forgotten first) so that one it
read back before its writer here delivered it (`observe`) is not delivered again."""


class EventFeed:
    """Follows the global order in a thread and fans events out to subscribers."""

    def __init__(
        self,
        store: EventStore,
        *,
        poll_interval: float = 0.25,
        listen: Callable[[Callable[[], None], threading.Event], None] | None = None,
        notifier: PostgresNotifier | None = None,
        tlog: TransparencyLog | None = None,
    ) -> None:
        self._store = store
        self._poll = poll_interval
        self._listen = listen
        self._notifier = notifier
        self.listing = MatchListProjection(store)
        self.ratings = RatingsProjection(store)
        self.tlog = tlog
        """The transparency log, folded with the listing (None: none kept)."""
        self._check = RowCheck(store.log_keys)
        self._own: dict[tuple[str, int], bytes] = {}
        """(stream, seq) -> hash of each event this process wrote and delivered itself
        (`observe`) that the follower has not read back yet: it passes over them."""
        self._followed: dict[tuple[str, int], bytes] = {}
        """(stream, seq) -> hash of the events the follower delivered last (`FOLLOWED_KEPT`):
        a write of this process that the follower read back first is not delivered again."""
        self._own_lock = threading.Lock()
        """Held while `_own` and `_followed` are looked at and changed together: each event is
        delivered by the follower or by its writer, never by both."""
        self._subs: dict[str, set[Subscription]] = {}
        self._subs_lock = threading.Lock()
        self._wake = threading.Event()
        self._wake_models: list[threading.Event] = []
        """One a read model's thread: set when the follower has read more, or on `wake`."""
        self._stop = threading.Event()
        self._position = 0
        self._threads: list[threading.Thread] = []
        self._listeners: list[Callable[[Sequence[StoredEvent]], None]] = []

    def listen(self, listener: Callable[[Sequence[StoredEvent]], None]) -> None:
        """Have `listener` told of every event of every match as it is delivered (possibly
        twice, in any order across matches), in the delivering thread: it must be quick."""
        self._listeners.append(listener)

    def start(self) -> None:
        """Follow from the store's head in the background, and keep the listing folded.

        Raises StorageUnavailable when the store cannot be read."""
        self._position = self._store.head_position()
        follower = Thread(target=self._follow, name="bergen-feed", daemon=True)
        self._threads.append(follower)
        models: list[tuple[str, str, FoldLoop[Any], Callable[[], object]]] = [
            ("bergen-listing", "match list", self.listing, self._fold_listing),
            ("bergen-ratings", "ratings", self.ratings, self.ratings.catch_up),
        ]
        if self.tlog is not None:
            models.append(("bergen-tlog", "transparency log", self.tlog, self._fold_tlog))
        for name, what, model, fold in models:
            model.stopping = self._stop  # a long catch-up stops between two batches
            woken = threading.Event()
            self._wake_models.append(woken)
            self._threads.append(
                Thread(target=self._project, args=(what, fold, woken), name=name, daemon=True)
            )
        if self._listen is not None:
            listener = Thread(
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
        """Stop following and close every subscription, so watchers end; wait for the feed's
        threads at most STOP_WAIT_S."""
        self.ask_to_stop()
        self.wait_stopped(time.monotonic() + STOP_WAIT_S)

    def ask_to_stop(self) -> None:
        """Stop following and close every subscription, so watchers end, without waiting for
        the feed's threads."""
        self._stop.set()
        self.wake()
        if self._notifier is not None:
            self._notifier.ask_to_stop()
        with self._subs_lock:
            subs = [s for group in self._subs.values() for s in group]
        for s in subs:
            s.close()

    def wait_stopped(self, deadline: float) -> bool:
        """Wait for the feed's threads (the notifier's too) to end, together until `deadline`
        (time.monotonic()); whether they have."""
        threads = list(self._threads)
        if self._notifier is not None:
            threads.append(self._notifier.thread)
        return not join_until(threads, deadline)

    def wake(self) -> None:
        self._wake.set()
        self._wake_models_up()

    def _wake_models_up(self) -> None:
        for woken in self._wake_models:
            woken.set()

    def subscribe(
        self, match_id: str, loop: asyncio.AbstractEventLoop | None = None
    ) -> Subscription:
        """A subscription to `match_id`'s events; with `loop`, awaited on that loop."""
        sub = Subscription(loop)
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
        """Deliver events this process has just written, without waiting for the follower;
        the listing's next page shows them."""
        self.listing.expect(events)
        own, followed = self._own, self._followed
        fresh = []
        with self._own_lock:
            if len(own) >= OWN_KEPT:
                own.clear()  # the follower is far behind: it delivers these again, as it may
            for e in events:
                key = (e.stream_id, e.seq)
                if followed.pop(key, None) == e.hash:
                    continue  # the follower read it back first, and delivered it
                own[key] = e.hash
                fresh.append(e)
        if fresh:
            self._deliver(fresh)
        if self._notifier is not None:
            self._notifier.poke()

    def _deliver(self, events: Sequence[StoredEvent]) -> None:
        for listener in self._listeners:
            listener(events)
        by_match: dict[str, list[StoredEvent]] = {}
        for e in events:
            by_match.setdefault(e.stream_id, []).append(e)
        with self._subs_lock:
            targets = [(s, by_match[m]) for m in by_match for s in self._subs.get(m, ())]
        for sub, evs in targets:
            sub.put(evs)

    def _catch_up(self) -> int:
        """Read the global order on from where the follower stands, up to the first batch
        that is not full (at least everything visible when it was called): what was written
        since is read on the next wake-up or poll. Returns how many events were read."""
        count = 0
        while True:
            batch, upto = read_past_unreadable(
                self._store, self._position, FOLLOW_BATCH, "event feed"
            )
            if upto == self._position:
                return count
            # The listing folds the same order: it takes what was read here, and is woken to.
            self.listing.offer(self._position, batch, upto)
            self.ratings.offer(self._position, batch, upto)
            if self.tlog is not None:
                self.tlog.offer(self._position, batch, upto)
            self._wake_models_up()
            authentic, refused = self._authentic(batch)
            self._deliver(authentic)
            if refused:
                with self._subs_lock:
                    subs = [s for m in refused for s in self._subs.get(m, ())]
                for sub in subs:
                    sub.refuse()
            self._position = upto
            count += len(batch)
            if len(batch) < FOLLOW_BATCH and (not batch or batch[-1].position == upto):
                return count  # not full, and no row passed over: the end, as it was read

    def _authentic(self, batch: Sequence[StoredEvent]) -> tuple[list[StoredEvent], set[str]]:
        """The events of `batch` that may be delivered (less those written and delivered
        here), and the matches of those that may not: a row that does not link or whose
        authenticator does not verify is logged at CRITICAL and left out, and its match's
        watchers are told to read it again."""
        out = []
        refused: set[str] = set()
        own, followed = self._own, self._followed
        for e in batch:
            key = (e.stream_id, e.seq)
            if own.pop(key, None) == e.hash:
                # Written and delivered here (`observe`): what watchers were sent is what
                # this process wrote, whatever the row says now.
                self._check.folded(e)
                continue
            why = self._check.refusal(e)
            if why is None:
                self._check.folded(e)
                with self._own_lock:
                    if own.pop(key, None) == e.hash:
                        continue  # its writer here has delivered it meanwhile
                    if len(followed) >= FOLLOWED_KEPT:
                        del followed[next(iter(followed))]
                    followed[key] = e.hash
                out.append(e)
            else:
                log.critical(
                    "LOG TAMPERED: match %s seq %d is not delivered to its watchers: %s",
                    e.stream_id, e.seq, why,
                )  # fmt: skip
                refused.add(e.stream_id)
        return out, refused

    def _follow(self) -> None:
        # A wake-up says another replica has committed, but its rows join the commit-safe
        # order only once every older transaction (of any client of the database) has
        # ended: a wake-up that finds nothing is read again soon, at growing intervals up to
        # WAKE_RETRY_MAX, for WAKE_RETRY_FOR seconds, rather than on the next poll.
        # Rows found end a wake-up's retries, and nothing is read again until the next
        # wake-up or poll: the rows of this process's own appends (delivered as they are
        # written) must not keep it reading the order a few rows at a time while it is busy.
        retry: float | None = None
        retry_until = 0.0
        while not self._stop.is_set():
            try:
                if self._catch_up() > 0:
                    retry = None
                if retry is not None and time.monotonic() < retry_until:
                    woken = self._wake.wait(retry)
                    retry = min(retry * 2, WAKE_RETRY_MAX)
                else:
                    woken = self._wake.wait(self._poll)
                    retry = None
                self._wake.clear()
                if woken:
                    retry = WAKE_RETRY
                    retry_until = time.monotonic() + WAKE_RETRY_FOR
            except Exception:  # keep following: a passing database error must not end it
                log.exception("event feed: reading the global order failed; retrying")
                self._stop.wait(1.0)

    def _fold_listing(self) -> None:
        self.listing.catch_up()
        self.listing.audit()

    def _fold_tlog(self) -> None:
        assert self.tlog is not None
        if self.tlog.refusal is not None:
            return  # logged at CRITICAL once; every call is refused from now on
        with suppress(LogRolledBack):  # as above: found now
            self.tlog.catch_up()

    def _project(self, what: str, fold: Callable[[], object], woken: threading.Event) -> None:
        """Keep one read model folded (`fold`), in a thread of its own: as the follower reads
        the global order (it hands over what it read, and wakes this thread), at most every
        FOLD_EVERY_S (the batches read meanwhile are folded together), or on a poll of its
        own four times as long; this process's own writes are folded then, or when a page is
        asked for. A failure is logged, naming the model (`what`), and the fold tried again."""
        while not self._stop.is_set():
            try:
                fold()
            except Exception:  # keep folding: a passing database error must not end it
                log.exception("%s: folding failed; retrying", what)
                self._stop.wait(1.0)
            if self._stop.wait(FOLD_EVERY_S):
                return
            woken.wait(max(0.0, self._poll * 4 - FOLD_EVERY_S))
            woken.clear()


class PostgresNotifier:
    """Tells other replicas that this one has written, without slowing its appends.

    A NOTIFY inside the append would make commits queue on PostgreSQL's notification lock;
    instead one thread sends NOTIFY on a connection of its own after appends commit. It sends
    at most one every `min_interval` seconds: appends made in between share the next, which
    keeps the cost of a busy replica's notifications (a round trip, and a wake-up of every
    listening replica) bounded while adding at most `min_interval` to what a watcher waits.

    The payload is `<replica> <ms>`: the sender, and its wall clock (Unix ms) at the first
    append the notification covers, from which a listener measures the delivery lag.
    """

    def __init__(self, conninfo: str, replica: str, min_interval: float = 0.01) -> None:
        self._conninfo = conninfo
        self._replica = replica
        self._min_interval = min_interval
        self._pending = threading.Event()
        self._first_ms: int | None = None
        self._stop = threading.Event()
        self._thread = Thread(target=self._run, name="bergen-notify", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def poke(self) -> None:
        if self._first_ms is None:
            self._first_ms = time.time_ns() // 1_000_000
        if not self._pending.is_set():  # set() takes the event's lock, at every append
            self._pending.set()

    def stop(self) -> None:
        self.ask_to_stop()
        self._thread.join(timeout=STOP_WAIT_S)

    def ask_to_stop(self) -> None:
        self._stop.set()
        self._pending.set()

    @property
    def thread(self) -> threading.Thread:
        return self._thread

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
                        first, self._first_ms = self._first_ms, None
                        sent = first if first is not None else time.time_ns() // 1_000_000
                        payload = f"{self._replica} {sent}"
                        conn.execute("SELECT pg_notify(%s, %s)", (NOTIFY_CHANNEL, payload))
                        self._stop.wait(self._min_interval)
            except Exception:
                log.exception("event feed: NOTIFY connection lost; replicas fall back to polling")
                self._stop.wait(1.0)


def postgres_listener(
    conninfo: str, replica: str, lag: Callable[[float], None] | None = None
) -> Callable[[Callable[[], None], threading.Event], None]:
    """A LISTEN loop on its own connection that calls `wake` on every notification sent by
    another replica (this one's own appends reach its watchers directly), and tells `lag` how
    many seconds each took from the sender's append to here (see `PostgresNotifier`)."""

    def listen(wake: Callable[[], None], stop: threading.Event) -> None:
        import psycopg

        while not stop.is_set():
            try:
                with psycopg.connect(conninfo, autocommit=True) as conn:
                    conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                    while not stop.is_set():
                        for note in conn.notifies(timeout=0.5, stop_after=1):
                            sender, _, sent = note.payload.partition(" ")
                            if sender != replica:
                                wake()
                                if lag is not None:
                                    lag_of(sent, lag)
            except Exception:
                log.exception("event feed: LISTEN connection lost; polling until it is back")
                stop.wait(1.0)

    return listen


def lag_of(sent: str, lag: Callable[[float], None]) -> None:
    """Tell `lag` the seconds since `sent` (Unix ms, as a notification carries it). Anything
    else in a payload (an older replica's, or garbage: any role that may NOTIFY can send one)
    is ignored; a time ahead of this clock counts as no lag."""
    if not sent.isdigit() or len(sent) > 15:
        return
    lag(max(0, time.time_ns() // 1_000_000 - int(sent)) / 1000)
