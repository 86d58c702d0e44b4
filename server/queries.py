"""The query and watch side: views, replays, records, the audit log, the listing, and live
streams. Nothing here writes; each answer is the folded match shown through the caller's
eyes (a seat's, or a spectator's: no hidden tile before the end).

Every read here is made in `lagging_reads()`: with a read database, a hot standby serves it,
never older than what this process has already seen (bergen.server.store.routed)."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Generator, Hashable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from bergen.api.signing import RecordSigner
from bergen.api.signing import record_text as served_text
from bergen.api.stored import StoredEvent
from bergen.domain.audit import replay_record
from bergen.domain.errors import (
    BergenError,
    CorruptRecord,
    MatchNotInProgress,
    NotFound,
    StorageUnavailable,
)
from bergen.domain.events import Event, MatchCreated, MatchEnded, SeatTaken
from bergen.domain.record import build_record, rated_pool
from bergen.domain.state import ENDED, fold
from bergen.domain.views import View, redact_event, view

from .commands import seen
from .feed import TICK_S, EventFeed, Subscription
from .identity import Caller, Identity
from .matches import REMATCH_KEY, Match, MatchRepository, decode_stored, extend
from .store import EventStore, MatchSummary, lagging_reads
from .store.authenticity import unauthentic
from .store.records import Kept
from .tlog import TransparencyLog
from .tournaments import tournament_table

_T = TypeVar("_T")
log = logging.getLogger("bergen.server.queries")
_WHOLE = "whole"
"""The audience of an ended match's events: everyone sees them whole."""
PREPARED_SIZE = 4096
"""Events kept made ready for watchers (per audience), across matches."""
ENDED_TICK_S = 60.0
"""How often a watcher told of its stream's end (`on_end`) still asks whether it is active:
a guard only, so that ten thousand quiet streams wake their threads a few hundred times a
second at most, not twenty thousand."""


class _Shared:
    """Values made once for everyone who asks by the same key, the latest `size` kept."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._values: OrderedDict[Hashable, Any] = OrderedDict()

    def find(self, key: Hashable) -> Any:
        """The value kept for `key`, or None. Without the lock: one lookup is atomic, and a
        hundred watchers woken at once by one event would otherwise queue on it."""
        return self._values.get(key)

    def keep(self, key: Hashable, value: object) -> None:
        """Keep `value` (not None) for `key`, made outside the lock: at worst two watchers
        make the same value at once."""
        with self._lock:
            self._values[key] = value
            if len(self._values) > self._size:
                self._values.popitem(last=False)


class MatchQueries:
    """Answers about matches, for any caller."""

    def __init__(
        self,
        store: EventStore,
        repository: MatchRepository,
        feed: EventFeed,
        identity: Identity,
        signer: RecordSigner | None,
        tlog: TransparencyLog | None = None,
    ) -> None:
        self._tlog = tlog
        self._store = store
        self._repo = repository
        self._feed = feed
        self._identity = identity
        self._signer = signer
        self._prepared = _Shared(PREPARED_SIZE)

    @property
    def public_key(self) -> str:
        """The key match records are signed with; empty when they are not signed."""
        return self._signer.public_key if self._signer is not None else ""

    def get_view(self, caller: Caller, match_id: str) -> View:
        """Raises NotFound, Unauthenticated, PermissionDenied."""
        return self.match_view(caller, match_id)[0]

    def match_view(self, caller: Caller, match_id: str) -> tuple[View, str | None]:
        """The match as the caller may see it, and the match it is the rematch of (None for
        none). A spectator's view of an ended match that is not in the cache is made from
        its kept record when it has one (`_kept_view`), else from its events. Raises
        NotFound, Unauthenticated, PermissionDenied."""
        with lagging_reads():
            kept = self._kept_view(match_id) if caller.token is None else None
            if kept is not None:
                return kept
            match = self._repo.load(match_id)
        return view(match.state, self._identity.viewer(match, caller)), match.rematch_of

    def _kept_view(self, match_id: str) -> tuple[View, str | None] | None:
        """A spectator's view of an ended match not in the cache, from the record this
        server kept of it, and its rematch_of; None when there is none to use.

        An old match's events lie on as many pages of the log as it has events (each among
        the events of the matches played beside it), so reading them costs a page read
        each once the log outgrows the database's memory. Its kept record is one row, served
        only as `records` serves it: its authenticator verifies, and it was made from the
        stream's head as it stands. Its plays are replayed through the rules
        (`replay_record`), which give the events they were made from, but for what a record
        does not hold: the match's name and which players are programs. Those come from the
        match's seating rows (its first few, read and authenticated), which stand in for
        the replayed ones once they agree on everything else; the first also says what the
        match is a rematch of. Anything that does not hold sends the read to the events.
        Like `records`, it does not read the match's other rows again: one changed after
        the record was kept is found by the next read of the events (a seat's call, the
        audit log, a replay), and from then on this read is refused too."""
        if (
            self._signer is None
            or self._repo.cached(match_id) is not None
            or self._repo.found_tampered(match_id)  # refused, as every call on it is
        ):
            return None
        text = self._store.records().load([match_id], self._signer.public_key).get(match_id)
        if text is None:
            return None
        try:
            replayed = replay_record(json.loads(text))
        except ValueError:
            replayed = None
        if replayed is None or not replayed.ok:
            log.warning("match %s: its kept record does not replay; read from its events", match_id)
            return None
        seating = self._seating(match_id, replayed.events)
        if seating is None:
            return None
        events, rematch_of = seating
        state = fold((*events, *replayed.events[len(events) :]))
        if state.phase != ENDED:
            return None
        return view(state, None), rematch_of

    def _seating(
        self, match_id: str, replayed: Sequence[Event]
    ) -> tuple[list[Event], str | None] | None:
        """The match's stored MatchCreated and SeatTaken events, and its rematch_of, when
        their rows authenticate and they are the `replayed` ones but for the match's name
        and the seats' bot flags; else None."""
        created = replayed[0] if replayed else None
        if not isinstance(created, MatchCreated):
            return None
        seats = [e for e in replayed[1 : 1 + created.seats] if isinstance(e, SeatTaken)]
        rows = self._store.read_stream(match_id, 1, limit=1 + len(seats))
        keys = self._store.log_keys
        if len(rows) != 1 + len(seats) or (
            keys is not None and any(unauthentic(r, keys) is not None for r in rows)
        ):
            return None
        try:
            stored = [decode_stored(r) for r in rows]
        except CorruptRecord:
            return None
        first, taken = stored[0], stored[1:]
        if not isinstance(first, MatchCreated) or replace(first, name=created.name) != created:
            return None
        # The record lists the seats in order; they were taken in any order.
        if not all(isinstance(e, SeatTaken) for e in taken) or sorted(
            (replace(e, bot=False) for e in taken if isinstance(e, SeatTaken)),
            key=lambda e: e.seat,
        ) != sorted((replace(e, bot=False) for e in seats), key=lambda e: e.seat):
            return None
        rematch_of = rows[0].metadata.extra.get(REMATCH_KEY)
        return stored, rematch_of if isinstance(rematch_of, str) else None

    def replay(
        self, caller: Caller, match_id: str, after_seq: int
    ) -> tuple[tuple[tuple[int, Event], ...], bool]:
        """The events after `after_seq` as the caller may see them, and whether the match has
        ended (then nothing is hidden). Raises NotFound, PermissionDenied."""
        with lagging_reads(match_id, after_seq):
            match = self._repo.load(match_id)
        viewer = self._identity.viewer(match, caller)
        events = match.events[after_seq:]
        return seen(events, after_seq + 1, match.state, viewer), match.state.phase == ENDED

    def record(self, caller: Caller, match_id: str) -> dict[str, object]:
        """The RECORD.md record of a finished match, signed when the server signs. Raises
        NotFound, MatchNotInProgress."""
        return self._made(match_id).record

    def _made(self, match_id: str) -> _Made:
        """The record of a finished match made from its events, with the head of the log it
        was made from and the ids of the log keys that authenticate it. Raises as `record`
        does."""
        with lagging_reads():
            match = self._repo.load(match_id)
            if match.state.phase != ENDED:
                raise MatchNotInProgress(
                    f"match {match_id} has not ended: its record would reveal every hand",
                    reason="MATCH_NOT_ENDED",
                )
            # The rows were checked as the match was loaded: of them, only the head (for the
            # log's proof), the first (a tournament's table) and their keys are read again.
            head = self._store.read_stream(match_id, match.version, limit=1)
            first = head if match.version == 1 else self._store.read_stream(match_id, 1, limit=1)
            if first and first[0].seq != 1:  # its first rows are gone: archived since?
                self._repo.refuse_if_archived(match_id)
            keys = self._store.key_ids(match_id, match.version)
            order = self._rated_order(match)
        log_info = {"events": match.version, "head": head[-1].hash.hex()} if head else None
        record = build_record(match.events, log=log_info, rated_order=order)
        table = tournament_table(first[0].metadata.extra) if first else None
        if table is not None:
            record["tournament"] = table  # a tournament's match (RECORD.md)
        if self._tlog is not None and head:
            record["transparency"] = self._tlog.record_field(
                head[-1], f"match {match_id}", match_id=match_id
            )
        record, text = (
            self._signer.sign_served(record) if self._signer is not None
            else (record, served_text(record))
        )  # fmt: skip
        return _Made(
            record, text, match.version, head[-1].hash if head else b"", ",".join(sorted(keys))
        )

    def record_text(self, caller: Caller, match_id: str) -> str:
        """`record` as JSON text: the one kept when the match's record was made before (the
        same record: see bergen.server.store.records), else made now and kept. Raises as
        `record` does."""
        return self.records(caller, [match_id])[match_id]

    def export(
        self, caller: Caller, page_size: int, page_token: str
    ) -> tuple[list[str], str, list[str]]:
        """A page of the ended matches' records as JSON text, in the listing's order (newest
        first), the next page's token ("" after the last), and the page's matches whose
        record cannot be made now (a log that does not verify, or not in the transparency
        log yet: GetRecord says why). Raises InvalidArgument for a bad page token,
        StorageUnavailable."""
        with lagging_reads():
            rows, token = self._feed.listing.page(ENDED, "", page_size, page_token)
        ids = [r.match_id for r in rows]
        refused: list[str] = []
        texts = self.records(caller, ids, refused)
        return [texts[m] for m in ids if m in texts], token, refused

    def records(
        self, caller: Caller, match_ids: Sequence[str], refused: list[str] | None = None
    ) -> dict[str, str]:
        """The record text of each of `match_ids`: those kept, read in one statement, and the
        others made and kept. With `refused`, a match whose record cannot be made is added
        to it (unless the store cannot be reached) instead of raising."""
        if self._signer is None:  # unsigned records are made every time, never kept
            return {m: self._made(m).text for m in match_ids}
        key = self._signer.public_key
        kept = self._store.records()
        with lagging_reads():
            texts = kept.load(match_ids, key)
        made: list[Kept] = []
        for m in match_ids:
            if m in texts:
                continue
            try:
                done = self._made(m)
            except BergenError as e:
                if refused is None or (
                    isinstance(e, StorageUnavailable) and e.reason != "LOG_LAGGING"
                ):
                    raise
                refused.append(m)
                continue
            made.append(Kept(m, done.events, done.head, done.text, done.log_keys))
            texts[m] = made[-1].text
        if made:
            kept.keep(made, key)
        return texts

    def _rated_order(self, match: Match) -> int | None:
        """The global position of a rated match's end (the record's `rated.order`); None
        for a match whose end is not rated."""
        if rated_pool(match.state) is None:
            return None
        seq = next(
            i + 1 for i in range(len(match.events) - 1, -1, -1)
            if isinstance(match.events[i], MatchEnded)
        )  # fmt: skip
        (ended,) = self._store.read_stream(match.state.match_id, seq, limit=1)
        return ended.position

    def audit_log(self, caller: Caller, match_id: str) -> tuple[StoredEvent, ...]:
        """Every stored event of a finished match, as stored. The organiser may read a live
        match's too. Raises NotFound, MatchNotInProgress (live, for anyone else)."""
        with lagging_reads():
            return self._audit_log(caller, match_id)

    def _audit_log(self, caller: Caller, match_id: str) -> tuple[StoredEvent, ...]:
        if self._identity.is_organiser(caller):
            stored = self._store.read_stream(match_id)
            if not stored:
                raise NotFound(f"no match {match_id}", reason="MATCH_NOT_FOUND", match_id=match_id)
            if stored[0].seq != 1:
                self._repo.refuse_if_archived(match_id)
            return stored
        try:
            ended = self._repo.load(match_id).state.phase == ENDED
            stored = self._store.read_stream(match_id)
        except CorruptRecord:
            # A log that no longer folds (changed in the database) is still served, so that
            # an auditor can name the bad seq; its revealed seed says the match had ended.
            stored = self._store.read_stream(match_id)
            ended = any(e.type == "SeedRevealed" for e in stored)
        if not ended:
            raise MatchNotInProgress(
                f"match {match_id} has not ended: its log would reveal every hand",
                reason="MATCH_NOT_ENDED",
            )
        return stored

    def list_matches(
        self, phase: str | None, player: str, page_size: int, page_token: str
    ) -> tuple[list[MatchSummary], str]:
        """A page of the listing, newest first. Raises InvalidArgument for a bad page token."""
        with lagging_reads():
            return self._feed.listing.page(phase, player, page_size, page_token)

    def watch(
        self,
        caller: Caller,
        match_id: str,
        after_seq: int,
        active: Callable[[], bool],
        prepare: Callable[[int, Sequence[Event]], _T],
        batch: int = 1,
        on_end: Callable[[Callable[[], None]], object] | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> Generator[View | _T | Subscription, None, bool]:
        """The caller's view, then every event after it (or after `after_seq`) as the caller
        may see it, until the match ends or `active()` turns false. Raises NotFound,
        PermissionDenied, CorruptRecord.

        The events come as `prepare(seq, events)` makes them: up to `batch` events that are
        ready together, the first at `seq`. Every watcher shown the same events (all
        spectators, say, or all the streams of one seat) shares one redaction and one
        `prepare`: a move watched by a hundred clients is made ready once, not a hundred
        times. `prepare` must depend on nothing but its arguments.

        With `on_end` (gRPC's `context.add_callback`), `on_end(fn)` has `fn` called once the
        stream has ended: the watcher sleeps until events come or that, and asks `active()`
        only every ENDED_TICK_S; without it, twice a second.

        With `loop` (a stream served on that event loop), nothing here waits: where a thread
        would wait for events, the subscription is yielded, for the coroutine driving this
        generator to await (`Subscription.ready`) before asking for the next item.

        Returns True when the match has ended and every event was given, False when the
        watch stopped before (the subscription closed, or `active()` turned false)."""
        subscription = self._feed.subscribe(match_id, loop)
        tick = TICK_S
        if on_end is not None:
            on_end(subscription.close)
            tick = ENDED_TICK_S
        try:
            with lagging_reads(match_id, after_seq):
                match = self._repo.load(match_id)
            viewer = self._identity.viewer(match, caller)
            yield view(match.state, viewer)
            sent = min(after_seq, match.version) if after_seq else match.version
            prepared = self._prepared
            while True:
                ended = match.state.phase == ENDED
                audience: object = _WHOLE if ended else viewer
                while sent < match.version:
                    events = match.events[sent : sent + batch]
                    key = (prepare, match_id, sent + 1, len(events), audience)
                    ready: _T | None = prepared.find(key)
                    if ready is None:
                        shown = events if ended else [redact_event(e, viewer) for e in events]
                        ready = prepare(sent + 1, shown)
                        prepared.keep(key, ready)
                    sent += len(events)
                    yield ready
                if ended:
                    return True
                if not (yield from subscription.waiting(active, tick)):
                    return False
                if subscription.refused:
                    # A row of this match is not authentic: reading it names the row, and
                    # the stream ends with DATA_LOSS (LOG_TAMPERED), as every call on it does.
                    with lagging_reads():
                        match = self._repo.load(match_id)
                    subscription.refused = False
                with lagging_reads():
                    match = self._catch_up(match_id, match, subscription.take())
        finally:
            self._feed.unsubscribe(match_id, subscription)

    def _catch_up(self, match_id: str, match: Match, delivered: list[StoredEvent]) -> Match:
        """`match` with the events delivered by the feed, reading the store only for a gap."""
        fresh = sorted((e for e in delivered if e.seq > match.version), key=lambda e: e.seq)
        if not fresh:  # all seen before: the feed delivers this process's own appends twice
            return match
        shared = self._repo.cached(match_id)  # folded once for every watcher of the match
        if shared is not None and shared.version >= fresh[-1].seq:
            return shared
        if all(e.seq == match.version + 1 + i for i, e in enumerate(fresh)):
            match = extend(match, fresh)
            self._repo.remember(match_id, match)
            return match
        return self._repo.load(match_id)


@dataclass(frozen=True, slots=True)
class _Made:
    """A record made from a match's events: the record and its text, the number of events
    and the last one's hash it was made from, and the ids of the log keys that authenticate
    those rows (comma-separated, sorted)."""

    record: dict[str, object]
    text: str
    """The record as served (bergen.api.signing.record_text)."""
    events: int
    head: bytes
    log_keys: str
