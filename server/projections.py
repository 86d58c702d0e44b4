"""Read models folded from the typed events: the match listing.

The listing lives in the database beside the events, with the global position it has been
folded up to, written in the same transaction as its rows. A server resumes from that
position on start instead of re-reading the log, and replicas sharing a database take turns
on the position's row lock, so each event is folded once.

Nothing is folded that the match's own fold would refuse: each row the listing would fold
must follow the match's listed version, link to the row before it when that row's hash is
known here, and, when the store holds the log keys, carry an authenticator that verifies. A
row that fails is logged at CRITICAL and never folded, nor is any later row of its match: the
match stays listed as it was before that row (its commands are refused as LOG_TAMPERED),
and the position moves past it, so that every other match keeps being listed. A match's
times are its rows' own (`recorded_at`, which the authenticator covers): its MatchCreated's
and its first Dealt's.

Read-your-writes: a page is answered after catching the listing up (one query when nothing
is new) and, for the matches this process has just written, after seeing their versions
listed, so a command's effect shows in the next page this process serves. Other replicas'
writes show as soon as they are folded: by the next page, or the background follower.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import logging
import re
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Collection, Iterable, Sequence
from datetime import datetime
from typing import Generic, TypeVar

from bergen.api.chain import canonical_json, metadata_json, micros
from bergen.api.stored import GENESIS_HASH, EventMetadata
from bergen.domain.errors import CorruptRecord, InvalidArgument, NotFound
from bergen.domain.events import (
    Dealt,
    Event,
    HandEnded,
    MatchCreated,
    MatchEnded,
    PointsScored,
    SeatTaken,
)
from bergen.domain.state import ENDED, PLAYING, SEATING
from bergen.domain.tiles import sides_of
from bergen.domain.tournament_record import TOURNAMENT_STREAM_PREFIX

from .keys import LogKeys
from .matches import REMATCH_KEY, decode_stored
from .store import EventStore, MatchSummary, StoredEvent
from .store.authenticity import Keyed, ReadEvent
from .store.listing import FoldTransaction
from .store.packed import PackedEvent

log = logging.getLogger("bergen.server.projections")

MATCH_LIST = "match_list"
"""The listing's name in projection_positions."""
# TOURNAMENT_STREAM_PREFIX begins every tournament's stream id (its record names it); no
# match id does, so the listing passes over a tournament's events without looking them up.
HAND_OFF_STREAM_PREFIX = "handoff-"
"""Begins every stream of hand-offs (bergen.server.handoffs); no match id does either."""
PLAYER_STREAM_PREFIX = "player-"
"""Begins every registered player's stream id (bergen.server.players)."""
OTHER_STREAM_PREFIXES = (TOURNAMENT_STREAM_PREFIX, HAND_OFF_STREAM_PREFIX, PLAYER_STREAM_PREFIX)
"""The prefixes of the streams that are no match's (a match's id is a bare UUID): the
listing, the clock keeper and the janitor pass over them."""

MAX_PAGE = 100
DEFAULT_PAGE = 20
BATCH = 1000
"""Events read and folded per transaction."""
PAGE_CATCH_UP_BATCHES = 5
"""At most this many batches are folded before a page is answered: far behind (a database
just migrated over a long log), pages answer from what is folded while the follower folds
the rest."""
PAGE_LOCK_WAIT_S = 0.25
"""How long a page waits for the listing's lock before it is answered without its own
catch-up: a batch's fold holds the lock for milliseconds, a first start's pass for as long as
the whole log takes to fold."""
OWN_WRITES_WAIT_S = 2.0
"""How long a page waits for this process's own writes to be listed (they are committed;
PostgreSQL's commit-safe order shows them once older transactions end, at once as a rule)."""
OWN_WRITES_KEPT = 10_000
OFFERS_KEPT = 32
"""At most this many batches read by the event feed are kept for the listing to take (it
folds those that follow one another in one transaction, adding batches while it holds fewer
than BATCH events)."""
FOLD_EVERY_S = 0.1
"""The event feed's thread folds the listing at most this often (`EventFeed`): with several
replicas a follower reads the order many times a second, woken by each one's NOTIFY, and a
fold is a transaction on the shared listing which the other replicas' folds contend for.
Pages do not wait for it: they fold this process's own writes themselves."""
HEADS_KEPT = 10_000
"""Streams whose last folded row's hash is kept, to check the next row's link to it."""
REFUSED_KEPT = 10_000
"""Refused matches remembered, so their later rows are passed over without a log line each
(the listed version stops them anyway)."""
ACCEPTED_KEPT = 10_000
"""Rows found equal to their rebuild from the events although their match's next event is
folded (it was refused), remembered by version so that pages do not rebuild them again."""
AUDIT_EVERY_S = 300.0
"""How often the follower looks for matches missing from the listing (rows deleted): once
when it starts, then this often."""

# The event types the listing reads; any other event (a play, a draw...) only moves the
# version on, and is not decoded.
_FOLDED = frozenset(
    cls.__name__ for cls in (MatchCreated, SeatTaken, Dealt, PointsScored, HandEnded, MatchEnded)
)


def is_match_stream(stream_id: str) -> bool:
    """Whether a stream is a match's: a match id (a bare UUID) begins with no other
    aggregate's prefix."""
    return not stream_id.startswith(OTHER_STREAM_PREFIXES)


def created(
    match_id: str,
    e: MatchCreated,
    seq: int,
    position: int,
    at: datetime,
    rematch_of: str | None = None,
) -> MatchSummary:
    """The listing of a match just created by `e`, recorded `at`; for a rematch, with the
    match it follows."""
    return MatchSummary(
        match_id=match_id,
        name=e.name,
        phase=str(SEATING),
        seats=e.seats,
        partnerships=e.partnerships,
        preset=str(e.rules.preset),
        players=[""] * e.seats,
        scores=[0] * len(sides_of(e.seats, e.partnerships)),
        version=seq,
        order=position,
        created_at=at,
        rematch_of=rematch_of,
        rated=e.rated,
    )


def evolve(s: MatchSummary, e: Event, seq: int, at: datetime) -> None:
    """`s` after event `e` (its seq, recorded `at`), as the match's fold would list it.
    Mutates `s`."""
    s.version = seq
    if isinstance(e, SeatTaken):
        s.players[e.seat] = e.name
        if e.player:
            if not s.player_ids:
                s.player_ids, s.bots = [""] * len(s.players), [False] * len(s.players)
            s.player_ids[e.seat], s.bots[e.seat] = e.player, e.bot
    elif isinstance(e, Dealt):
        s.phase = str(PLAYING)
        s.hand = e.hand
        if s.started_at is None:
            s.started_at = at
    elif isinstance(e, PointsScored):
        s.scores[e.side] += e.points
    elif isinstance(e, HandEnded):
        s.scores = list(e.scores)
    elif isinstance(e, MatchEnded):
        s.phase = str(ENDED)


_sorted_compact = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False
).encode


_NOT_OURS = "seq {} was not written by this server (its authenticator does not verify)"


class RowCheck:
    """What a row must pass before the listing folds it: its link to the row before it (when
    that row's hash is known here) and, with `keys`, its authenticator."""

    def __init__(self, keys: LogKeys | None) -> None:
        self._keyed = None if keys is None else Keyed(keys)
        self._heads: dict[str, tuple[int, bytes]] = {}
        self._metadata: dict[int, tuple[EventMetadata, str]] = {}

    def refusal(self, stored: StoredEvent) -> str | None:
        """Why `stored` must not be folded; None when it may."""
        unlinked = self._unlinked(stored)
        if unlinked is not None:
            return unlinked
        if self._keyed is not None:
            return self._unauthentic(self._keyed, stored)
        return None

    def _unlinked(self, row: StoredEvent | PackedEvent) -> str | None:
        """Why `row` does not follow the row of its stream folded before it (when that one
        is known here); None when it does."""
        if row.seq == 1:
            prev: bytes | None = GENESIS_HASH
        else:
            head = self._heads.get(row.stream_id)
            prev = head[1] if head is not None and head[0] == row.seq - 1 else None
        if prev is not None and row.prev_hash != prev:
            return f"seq {row.seq} does not link to seq {row.seq - 1}"
        return None

    def packed_refusal(self, row: PackedEvent) -> str | None:
        """Why the packed `row` must not be folded (as `refusal`: its link, then its
        authenticator over its message as packed); None when it may."""
        unlinked = self._unlinked(row)
        if unlinked is not None:
            return unlinked
        keyed = self._keyed
        if keyed is None:
            return None
        if row.key_id is None or row.mac is None:
            return f"seq {row.seq} has no authenticator"
        expected = keyed.mac_of_message(row.key_id, row.message)
        if expected is None:
            return f"seq {row.seq} names an unknown log key {row.key_id!r}"
        if hmac.compare_digest(expected, row.mac):
            return None
        return _NOT_OURS.format(row.seq)

    def folded(self, stored: StoredEvent | PackedEvent) -> None:
        """Remember the hash of `stored`, just folded, for the next row's link."""
        if len(self._heads) >= HEADS_KEPT and stored.stream_id not in self._heads:
            self._heads.clear()
        self._heads[stored.stream_id] = (stored.seq, stored.hash)

    def _unauthentic(self, keyed: Keyed, e: StoredEvent) -> str | None:
        key_id, mac = e.key_id, e.mac
        if mac is None or key_id is None:
            return f"seq {e.seq} has no authenticator"
        try:
            recorded = micros(e.recorded_at)
            texts = e.texts if isinstance(e, ReadEvent) else None
            if texts is not None and type(texts[0]) is str and type(texts[1]) is str:
                # As read: the payload and metadata text the authenticator covers, as stored.
                expected = keyed.mac(
                    key_id, e.stream_id, e.seq, e.type, e.schema_version, texts[0], texts[1],
                    recorded, e.prev_hash, e.salt, e.hash,
                )  # fmt: skip
                if expected is None:
                    return f"seq {e.seq} names an unknown log key {key_id!r}"
                if hmac.compare_digest(expected, mac):
                    return None
                return _NOT_OURS.format(e.seq)
            metadata = self._metadata_text(e.metadata)

            def verifies(payload: str) -> bool | None:
                expected = keyed.mac(
                    key_id, e.stream_id, e.seq, e.type, e.schema_version, payload, metadata,
                    recorded, e.prev_hash, e.salt, e.hash,
                )  # fmt: skip
                return None if expected is None else hmac.compare_digest(expected, mac)

            # The authenticator covers the payload's RFC 8785 text, which json's C encoder
            # gives for every payload an event has (no floats) several times faster.
            fast = _sorted_compact(e.payload)
            ok = verifies(fast)
            if ok is None:
                return f"seq {e.seq} names an unknown log key {key_id!r}"
            if ok:
                return None
            exact = canonical_json(e.payload, "payload").decode()
            if exact != fast and verifies(exact):
                return None
        except (TypeError, ValueError) as err:
            return f"seq {e.seq}: {err}"
        return _NOT_OURS.format(e.seq)

    def _metadata_text(self, metadata: EventMetadata) -> str:
        # The rows of one append share one metadata object: encode it once. The entry holds
        # the object, so its id names no other while it is kept.
        known = self._metadata.get(id(metadata))
        if known is not None and known[0] is metadata:
            return known[1]
        if len(self._metadata) >= 4096:
            self._metadata.clear()
        text = metadata_json(metadata).decode()
        self._metadata[id(metadata)] = (metadata, text)
        return text


def fold_into(
    summaries: dict[str, MatchSummary],
    batch: Iterable[StoredEvent],
    check: RowCheck | None = None,
    refused: OrderedDict[str, int] | None = None,
) -> set[str]:
    """Fold `batch` (in global order) into `summaries` (the listed matches it touches, by
    id; new ones are added). Returns the ids changed.

    A row that does not follow its match's listed version, or that `check` refuses, is
    logged at CRITICAL and not folded; its match is added to `refused` (match id -> seq),
    whose later rows are not folded either. An event that does not decode is logged and
    left out: the listing is never the truth, and one bad stream must not stop it."""
    changed: set[str] = set()
    for stored in batch:
        if not is_match_stream(stored.stream_id):
            continue
        s = summaries.get(stored.stream_id)
        if s is not None and stored.seq <= s.version:
            continue  # folded already
        opens = stored.type == "MatchCreated" and s is None and stored.seq == 1
        if s is None and not opens:
            if stored.type == "MatchCreated":
                log.error(
                    "match list: stream %s seq %d left out: a MatchCreated that does not open"
                    " its stream", stored.stream_id, stored.seq,
                )  # fmt: skip
            continue  # not a listed match's stream
        if refused is not None and stored.stream_id in refused:
            continue
        why: str | None
        if s is not None and stored.seq != s.version + 1:
            why = f"seq {stored.seq} does not follow seq {s.version}, the last one listed"
        elif s is not None and stored.type == "MatchCreated":
            why = f"seq {stored.seq} is a MatchCreated that does not open its stream"
        else:
            why = check.refusal(stored) if check is not None else None
        if why is not None:
            log.critical(
                "LOG TAMPERED: match %s seq %d is not listed, nor anything after it (the match"
                " stays listed as it was): %s", stored.stream_id, stored.seq, why,
            )  # fmt: skip
            if refused is not None:
                refused[stored.stream_id] = stored.seq
                while len(refused) > REFUSED_KEPT:
                    refused.popitem(last=False)
            continue
        try:
            if s is None:
                e = decode_stored(stored)
                assert isinstance(e, MatchCreated)
                summaries[stored.stream_id] = created(
                    stored.stream_id,
                    e,
                    stored.seq,
                    stored.position,
                    stored.recorded_at,
                    stored.metadata.extra.get(REMATCH_KEY),
                )
            elif stored.type in _FOLDED:
                evolve(s, decode_stored(stored), stored.seq, stored.recorded_at)
            else:
                s.version = stored.seq
        except (CorruptRecord, IndexError) as err:
            log.error(
                "match list: stream %s seq %d left out: %s", stored.stream_id, stored.seq, err
            )
            continue
        if check is not None:
            check.folded(stored)
        changed.add(stored.stream_id)
    return changed


def read_past_unreadable(
    store: EventStore,
    after: int,
    limit: int,
    reader: str,
    types: Collection[str] | None = None,
) -> tuple[Sequence[StoredEvent], int]:
    """Up to `limit` events after the position `after` (`types`: of those types, as
    `EventStore.read_all` reads them), and the position they reach. A row that does not
    decode (no server wrote it) ends them: logged at CRITICAL, naming `reader`, and passed
    over, so that it holds up no other match. Raises StorageUnavailable, NotFound,
    CorruptRecord for a row the store cannot place."""

    def read_all(after: int, limit: int) -> Sequence[StoredEvent]:
        if types is None:
            return store.read_all(after, limit)
        return store.read_all(after, limit, types)

    try:
        batch = read_all(after, limit)
    except CorruptRecord as err:
        if "position" not in err.metadata:
            raise
    else:
        return batch, batch[-1].position if batch else after
    readable: list[StoredEvent] = []
    while True:  # one at a time, up to the row that does not decode
        try:
            got = read_all(after, 1)
        except CorruptRecord as err:
            if "position" not in err.metadata:
                raise
            log.critical("LOG TAMPERED: %s: passed over by the %s", err.message, reader)
            return readable, int(err.metadata["position"])
        if not got:
            return readable, after
        readable += got
        after = got[0].position


def rebuilt(store: EventStore, match_id: str) -> MatchSummary | None:
    """The listing of `match_id` folded afresh from its stream, each row checked as the
    listing checks it (None: its MatchCreated is not listed). Raises StorageUnavailable."""
    try:
        events: Sequence[StoredEvent] = store.read_stream(match_id)
    except CorruptRecord as err:
        # Up to the row that does not decode, as the listing folds it.
        seq = int(err.metadata.get("seq", "0"))
        if seq <= 1:
            return None
        events = store.read_stream(match_id, 1, seq - 1)
    summaries: dict[str, MatchSummary] = {}
    fold_into(summaries, events, RowCheck(store.log_keys), OrderedDict())
    return summaries.get(match_id)


# --- page tokens ----------------------------------------------------------------------------

_TOKEN_MAX = 40
_TOKEN_TEXT = re.compile(r"[A-Za-z0-9_-]{1,40}")
_TOKEN_BODY = re.compile(rb"before:([1-9][0-9]{0,17})")


def page_token(order: int) -> str:
    """The opaque token of the page after the match listed at `order`."""
    return base64.urlsafe_b64encode(f"before:{order}".encode()).decode().rstrip("=")


def parse_page_token(token: str) -> int:
    """The order a token given by `page_token` names. Raises InvalidArgument for anything
    else, with a short message, whatever its size or content."""
    bad = InvalidArgument("page_token is not one this server gave", reason="BAD_PAGE_TOKEN")
    if not isinstance(token, str) or len(token) > _TOKEN_MAX or not _TOKEN_TEXT.fullmatch(token):
        raise bad
    try:
        body = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except (binascii.Error, ValueError):
        raise bad from None
    found = _TOKEN_BODY.fullmatch(body)
    if found is None:
        raise bad
    return int(found.group(1))


# --- the projection -------------------------------------------------------------------------


RowT = TypeVar("RowT", StoredEvent, PackedEvent)


class FoldLoop(Generic[RowT]):
    """How a read model follows the store's global order, shared by the listing and the
    ratings: from the position its tables were folded up to, a batch at a time (or the
    batches the event feed read and offered), each folded by the model's `_fold` in a
    transaction of its own, which another replica's fold of the same batch makes a no-op.

    A model reads StoredEvents (`read_all`); one that reads many rows and decodes few may
    read packed rows instead (`RowT`: PackedEvent, its own `_read`), and folds the batches
    the feed offers (StoredEvents) all the same."""

    reader = "read model"
    """Named in the log line about a row passed over (`read_past_unreadable`)."""
    types: frozenset[str] | None = None
    """The event types the model folds, when it passes over every other (None: it folds
    them all): the store reads only those."""

    def __init__(self, store: EventStore, batch: int = BATCH) -> None:
        self._store = store
        self._batch = batch
        self._lock = threading.RLock()
        self._position: int | None = None
        self._offered: dict[int, tuple[Sequence[StoredEvent], int]] = {}
        """Position -> a batch of the global order read after it by the event feed, and the
        position the batch reaches (`offer`)."""
        self._bounded = False
        """Whether the catch-up under way folds a few batches at most (a page's)."""
        self.events_read = 0
        """Events this process has read from the global order to fold (for tests)."""
        self.stopping: threading.Event | None = None
        """Once set, a catch-up of every batch stops after the one it is folding (the server
        is stopping: a first start's pass over a long log must not outlive it); what it
        folded is kept."""

    def _stored_position(self) -> int:
        """What the tables were folded up to. Raises StorageUnavailable."""
        raise NotImplementedError

    def _fold(self, batch: Sequence[RowT] | Sequence[StoredEvent], upto: int) -> int:
        """Fold `batch`, read after self._position up to the position `upto`, unless another
        replica did first; then only move self._position to where it stopped. Returns the
        events folded here."""
        raise NotImplementedError

    def _read(self, page: int) -> tuple[Sequence[RowT] | Sequence[StoredEvent], int]:
        """Up to `page` rows of the global order after self._position, and the position they
        reach (`read_past_unreadable`). Raises NotFound for a position that names no event,
        StorageUnavailable."""
        assert self._position is not None
        return read_past_unreadable(self._store, self._position, page, self.reader, self.types)

    def _page(self) -> int:
        """Events to read at a time."""
        return self._batch

    def _finish(self) -> int:
        """Called when a catch-up has read all it will: writes what a model holds back.
        Returns the events it wrote."""
        return 0

    def _abandon(self) -> None:
        """Called when a catch-up fails: drops what a model holds back."""

    def _lost_position(self) -> None:
        """Called when the position the model follows from names no event of the log (its
        saved position was tampered with): start again from a position that does, or raise.
        """
        raise NotFound(f"{self.reader}: no event at global position {self._position}")

    def catch_up(self, max_batches: int | None = None) -> int:
        """Fold what was written since the stored position (up to `max_batches` batches), up
        to the first batch read that is not full: at least everything visible when it was
        called. Returns how many events this process folded. Raises StorageUnavailable."""
        with self._lock:
            if self._position is None:
                self._position = self._stored_position()
            self._bounded = max_batches is not None
            try:
                folded = self._follow(max_batches)
                return folded + self._finish()
            except BaseException:
                self._abandon()
                raise

    def _follow(self, max_batches: int | None) -> int:
        assert self._position is not None
        folded = 0
        batches = 0
        while max_batches is None or batches < max_batches:
            if max_batches is None and self.stopping is not None and self.stopping.is_set():
                return folded
            page = self._page()
            offered = self._offered.pop(self._position, None)
            batch: Sequence[RowT] | Sequence[StoredEvent]
            if offered is not None:
                joined: list[StoredEvent] = list(offered[0])
                upto = offered[1]
                # The batches offered after it, one after another: one transaction.
                while len(joined) < page and (more := self._offered.pop(upto, None)) is not None:
                    joined += more[0]
                    upto = more[1]
                batch = joined
            else:
                try:
                    batch, upto = self._read(page)
                except NotFound:
                    self._lost_position()
                    continue
                self.events_read += len(batch)
            if upto == self._position:
                return folded
            batches += 1
            folded += self._fold(batch, upto)
            passed_over = not batch or batch[-1].position != upto  # a row that did not decode
            # All that was visible when read is folded (here, not by another replica that
            # stopped short of it). Reading again at once would chase a busy writer one
            # transaction of a few rows at a time (one read and one fold transaction each);
            # what was written since is folded by the next call: a page's, or the follower's
            # next turn. A batch the feed offered was read before this call, maybe before the
            # write its caller just made: only a short read of the store says all is folded.
            if offered is None and len(batch) < page and not passed_over and self._position == upto:
                return folded
        return folded

    def offer(self, after: int, batch: Sequence[StoredEvent], upto: int) -> None:
        """A batch of the global order after the position `after`, up to `upto`, as the
        event feed read it (`read_past_unreadable`): a fold from `after` takes it instead of
        reading the same rows again. Each row is still checked before it is folded."""
        if upto == after:
            return
        if len(self._offered) >= OFFERS_KEPT:
            self._offered.clear()  # the model is elsewhere (ahead, or behind): it reads
        self._offered[after] = (batch, upto)


class MatchListProjection(FoldLoop[StoredEvent]):
    """The match listing: folded from the store's global order into the store's tables."""

    reader = "match list"

    def __init__(self, store: EventStore, batch: int = BATCH) -> None:
        super().__init__(store, batch)
        self._list = store.match_list()
        self._check = RowCheck(store.log_keys)
        self._refused: OrderedDict[str, int] = OrderedDict()
        self._own: OrderedDict[str, int] = OrderedDict()
        self._own_lock = threading.Lock()
        self.repairs: Counter[str] = Counter(match_list=0, projection_positions=0)
        """Rows found tampered with and rebuilt from the events, by table (for the metrics)."""
        self._accepted: OrderedDict[str, int] = OrderedDict()
        self._audited_at: float | None = None
        self._resets = 0
        """Times the listing's position was set back (`_reset`): an audit's search made
        before one does not hold after it."""

    def _stored_position(self) -> int:
        position, fault = self._list.checked_position(MATCH_LIST)
        if fault is not None:
            self._reported("projection_positions", MATCH_LIST, fault, "from position 0")
            position = self._reset(0)
        return position

    def _lost_position(self) -> None:
        assert self._position is not None
        self._reported(
            "projection_positions",
            MATCH_LIST,
            f"its position {self._position} names no event of the log",
            "from position 0",
        )
        self._position = self._reset(0)
        self._accepted.clear()

    def _fold(self, batch: Sequence[StoredEvent], upto: int) -> int:
        with self._list.folding(MATCH_LIST) as tx:
            if tx.fault is not None:
                # Another replica's position would be sealed: carry on from this one's own.
                self._reported("projection_positions", MATCH_LIST, tx.fault, "where it was")
                tx.position = self._position or 0
            if tx.position != self._position:
                self._position = tx.position
                return 0
            first: dict[str, int] = {}
            for e in batch:
                if is_match_stream(e.stream_id):
                    first.setdefault(e.stream_id, e.seq)
            summaries = tx.load(first)
            # A row that does not verify, or that stops short of its match's events in this
            # batch (an older copy put back), is rebuilt before anything is folded into it.
            bad = {
                m: s.fault
                if s.fault is not None
                else f"it stops at seq {s.version}, short of seq {first[m]} to fold"
                for m, s in summaries.items()
                if s.fault is not None or (first[m] > s.version + 1 and m not in self._refused)
            }
            if bad:
                summaries.update(self._repaired(tx, bad, summaries))
            changed = fold_into(summaries, batch, self._check, self._refused)
            tx.save([summaries[m] for m in changed], upto)
        self._position = upto
        self._seen({m: summaries[m].version for m in changed})
        return len(batch)

    # read-your-writes -------------------------------------------------------------------------

    def expect(self, events: Sequence[StoredEvent]) -> None:
        """Remember events this process has just written: pages wait until they are listed."""
        with self._own_lock:
            for e in events:
                if not is_match_stream(e.stream_id):
                    continue  # never listed: a page must not wait for it
                if self._own.get(e.stream_id, 0) < e.seq:
                    self._own[e.stream_id] = e.seq
                    self._own.move_to_end(e.stream_id)
            while len(self._own) > OWN_WRITES_KEPT:
                self._own.popitem(last=False)

    def _seen(self, versions: dict[str, int]) -> None:
        with self._own_lock:
            for match_id, version in versions.items():
                if self._own.get(match_id, version + 1) <= version:
                    del self._own[match_id]

    def _await_own_writes(self) -> None:
        deadline = time.monotonic() + OWN_WRITES_WAIT_S
        while True:
            with self._own_lock:
                waiting = dict(self._own)
            if not waiting:
                return
            self._seen(self._list.versions(waiting.keys()))
            with self._own_lock:
                if not self._own:
                    return
            if time.monotonic() >= deadline:
                log.warning("match list: %d matches written here not listed yet", len(self._own))
                return
            time.sleep(0.002)
            self._catch_up_unless_busy()

    def _catch_up_unless_busy(self) -> None:
        """A page's catch-up (PAGE_CATCH_UP_BATCHES at most), unless the listing's lock is
        held past PAGE_LOCK_WAIT_S: a fold that long is the follower's pass over a long log
        (a first start), and the page is answered from what is folded so far meanwhile."""
        if not self._lock.acquire(timeout=PAGE_LOCK_WAIT_S):
            return
        try:
            self.catch_up(PAGE_CATCH_UP_BATCHES)
        finally:
            self._lock.release()

    # pages ------------------------------------------------------------------------------------

    def page(
        self, phase: str | None, player: str, size: int, token: str
    ) -> tuple[list[MatchSummary], str]:
        """Newest first, `size` at most (0: DEFAULT_PAGE; at most MAX_PAGE), of `phase` (None:
        any), with a seat named `player` ("": anyone). Returns the page and the next page's
        token ("" after the last). Raises InvalidArgument for a page token this server did not
        give or a negative size, StorageUnavailable."""
        if size < 0:
            raise InvalidArgument("page_size must not be negative")
        size = DEFAULT_PAGE if size == 0 else min(size, MAX_PAGE)
        before = parse_page_token(token) if token else None
        self._catch_up_unless_busy()
        self._await_own_writes()
        rows = self._checked_page(phase, player, before, size + 1)
        if len(rows) <= size:
            return rows, ""
        rows = rows[:size]
        return rows, page_token(rows[-1].order)

    # tampering ---------------------------------------------------------------------------------

    def _checked_page(
        self, phase: str | None, player: str, before: int | None, limit: int
    ) -> list[MatchSummary]:
        """The listing's page, every row's authenticator checked and each row older than the
        events folded found out (in the page's one query): such rows are rebuilt from the
        events, and the page read again; one still bad is left out."""
        folded = self._position or 0
        rows = self._list.page(phase, player, before, limit, folded)
        bad = {s.match_id: why for s in rows if (why := self._fault(s)) is not None}
        if not bad:
            return rows
        with self._lock, self._list.folding(MATCH_LIST) as tx:
            if tx.fault is None:
                self._repaired(tx, bad, tx.load(bad))
        rows = self._list.page(phase, player, before, limit, self._position or 0)
        return [s for s in rows if self._fault(s) is None]

    def _fault(self, s: MatchSummary) -> str | None:
        """Why a page's row must not be served as is (None: it may)."""
        if s.fault is not None:
            return s.fault
        if not s.stale or self._accepted.get(s.match_id) == s.version:
            return None
        if self._refused.get(s.match_id) == s.version + 1:
            return None  # its next event was refused here: the row stops before it
        return f"it stops at seq {s.version}, older than the events folded"

    def _repaired(
        self, tx: FoldTransaction, bad: dict[str, str], loaded: dict[str, MatchSummary]
    ) -> dict[str, MatchSummary]:
        """Rebuild the rows of `bad` (match id -> why each is suspect; `loaded`: as they are
        now) from the events, in the listing's transaction `tx`: written again, or deleted
        for a match the events do not list. Each row that was not what its events give is
        reported. Returns the rows rebuilt."""
        fresh: dict[str, MatchSummary] = {}
        gone: list[str] = []
        for match_id, why in bad.items():
            now = loaded.get(match_id)
            again = rebuilt(self._store, match_id)
            if again is None:
                if now is not None:
                    gone.append(match_id)
                    self._reported("match_list", match_id, why, "it is no match of the log")
                continue
            fresh[match_id] = again
            if now is not None and now.fault is None and now == again:
                # As its events give it: their next row was refused, here or elsewhere.
                self._accept(match_id, again.version)
                continue
            self._reported("match_list", match_id, "missing" if now is None else why, "")
        tx.drop(gone)
        if fresh:
            tx.save(list(fresh.values()), tx.position, reseat=True)
        return fresh

    def _accept(self, match_id: str, version: int) -> None:
        self._accepted[match_id] = version
        self._accepted.move_to_end(match_id)
        while len(self._accepted) > ACCEPTED_KEPT:
            self._accepted.popitem(last=False)

    def _reset(self, position: int) -> int:
        """Write `position` as the listing's, sealed. Returns it."""
        with self._list.folding(MATCH_LIST) as tx:
            tx.save([], position)
        self._resets += 1
        return position

    def _reported(self, table: str, key: str, why: str, rebuilt_from: str) -> None:
        self.repairs[table] += 1
        log.warning(
            "READ MODEL TAMPERED: table %s row %s is not served as is (%s): rebuilt from the"
            " events%s", table, key, why, f" ({rebuilt_from})" if rebuilt_from else "",
        )  # fmt: skip

    def audit(self) -> int:
        """Look for matches missing from the listing (rows deleted) up to where it has
        folded, and rebuild them from the events: when the follower starts, then every
        AUDIT_EVERY_S. The search (one read of an index holding a row a match) runs outside
        the listing's lock, so pages are served meanwhile; only the rebuild takes it.
        Returns how many were rebuilt. Raises StorageUnavailable."""
        now = time.monotonic()
        if self._audited_at is not None and now - self._audited_at < AUDIT_EVERY_S:
            return 0
        folded, resets = self._position, self._resets
        if folded is None:
            return 0
        found = [m for m in self._list.missing(folded) if m not in self._refused]
        self._audited_at = now
        if not found:
            return 0
        with self._lock:
            if self._resets != resets:
                return 0  # folded again from 0 meanwhile: the next audit looks again
            with self._list.folding(MATCH_LIST) as tx:
                if tx.fault is not None:
                    return 0
                loaded = tx.load(found)
                # Listed again meanwhile (a page found it and rebuilt it): not missing now.
                missing = [m for m in found if m not in loaded]
                if not missing:
                    return 0
                fresh = self._repaired(tx, dict.fromkeys(missing, "missing"), loaded)
            for m in set(missing) - set(fresh):
                self._refused[m] = 1  # not listed by its events either: not looked for again
            return len(fresh)
