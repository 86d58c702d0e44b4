"""Read models folded from the typed events: the match listing.

The listing lives in the database beside the events, with the global position it has been
folded up to, written in the same transaction as its rows. A server resumes from that
position on start instead of re-reading the log, and replicas sharing a database take turns
on the position's row lock, so each event is folded once.

Read-your-writes: a page is answered after catching the listing up (one query when nothing
is new) and, for the matches this process has just written, after seeing their versions
listed, so a command's effect shows in the next page this process serves. Other replicas'
writes show as soon as they are folded: by the next page, or the background follower.
"""

from __future__ import annotations

import base64
import binascii
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence

from bergen.domain.errors import CorruptRecord, InvalidArgument
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

from .matches import decode_stored
from .store import EventStore, MatchSummary, StoredEvent

log = logging.getLogger("bergen.server.projections")

MATCH_LIST = "match_list"
"""The listing's name in projection_positions."""
MAX_PAGE = 100
DEFAULT_PAGE = 20
BATCH = 1000
"""Events read and folded per transaction."""
PAGE_CATCH_UP_BATCHES = 5
"""At most this many batches are folded before a page is answered: far behind (a database
just migrated over a long log), pages answer from what is folded while the follower folds
the rest."""
OWN_WRITES_WAIT_S = 2.0
"""How long a page waits for this process's own writes to be listed (they are committed;
PostgreSQL's commit-safe order shows them once older transactions end, at once as a rule)."""
OWN_WRITES_KEPT = 10_000

# The event types the listing reads; any other event (a play, a draw...) only moves the
# version on, and is not decoded.
_FOLDED = frozenset(
    cls.__name__ for cls in (MatchCreated, SeatTaken, Dealt, PointsScored, HandEnded, MatchEnded)
)


def created(match_id: str, e: MatchCreated, seq: int, position: int) -> MatchSummary:
    """The listing of a match just created by `e`."""
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
    )


def evolve(s: MatchSummary, e: Event, seq: int) -> None:
    """`s` after event `e` (its seq), as the match's fold would list it. Mutates `s`."""
    s.version = seq
    if isinstance(e, SeatTaken):
        s.players[e.seat] = e.name
    elif isinstance(e, Dealt):
        s.phase = str(PLAYING)
    elif isinstance(e, PointsScored):
        s.scores[e.side] += e.points
    elif isinstance(e, HandEnded):
        s.scores = list(e.scores)
    elif isinstance(e, MatchEnded):
        s.phase = str(ENDED)


def fold_into(summaries: dict[str, MatchSummary], batch: Iterable[StoredEvent]) -> set[str]:
    """Fold `batch` (in global order) into `summaries` (the listed matches it touches, by
    id; new ones are added). Returns the ids changed. An event that does not follow its
    match's version, or does not decode, is logged and left out: the listing is never the
    truth, and one bad stream must not stop it."""
    changed: set[str] = set()
    for stored in batch:
        s = summaries.get(stored.stream_id)
        if s is not None and stored.seq <= s.version:
            continue  # folded already
        try:
            if stored.type == "MatchCreated":
                if s is not None or stored.seq != 1:
                    raise CorruptRecord("a MatchCreated that does not open its stream")
                e = decode_stored(stored)
                assert isinstance(e, MatchCreated)
                summaries[stored.stream_id] = created(
                    stored.stream_id, e, stored.seq, stored.position
                )
                changed.add(stored.stream_id)
                continue
            if s is None:
                continue  # not a match's stream
            if stored.seq != s.version + 1:
                raise CorruptRecord(f"seq {stored.seq} does not follow version {s.version}")
            if stored.type in _FOLDED:
                evolve(s, decode_stored(stored), stored.seq)
            else:
                s.version = stored.seq
            changed.add(stored.stream_id)
        except (CorruptRecord, IndexError) as err:
            log.error(
                "match list: stream %s seq %d left out: %s", stored.stream_id, stored.seq, err
            )
    return changed


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


class MatchListProjection:
    """The match listing: folded from the store's global order into the store's tables."""

    def __init__(self, store: EventStore, batch: int = BATCH) -> None:
        self._store = store
        self._list = store.match_list()
        self._batch = batch
        self._lock = threading.Lock()
        self._position: int | None = None
        self._own: OrderedDict[str, int] = OrderedDict()
        self._own_lock = threading.Lock()
        self.events_read = 0
        """Events this process has read from the global order to fold (for tests)."""

    def catch_up(self, max_batches: int | None = None) -> int:
        """Fold what was written since the stored position (up to `max_batches` batches).
        Returns how many events this process folded. Raises StorageUnavailable."""
        folded = 0
        batches = 0
        with self._lock:
            if self._position is None:
                self._position = self._list.position(MATCH_LIST)
            while max_batches is None or batches < max_batches:
                batch = self._store.read_all(self._position, self._batch)
                self.events_read += len(batch)
                if not batch:
                    return folded
                batches += 1
                folded += self._fold(batch)
        return folded

    def _fold(self, batch: Sequence[StoredEvent]) -> int:
        """Fold `batch`, read after self._position, unless another replica did first; then
        only move self._position to where it stopped. Returns the events folded here."""
        with self._list.folding(MATCH_LIST) as tx:
            if tx.position != self._position:
                self._position = tx.position
                return 0
            summaries = tx.load({e.stream_id for e in batch})
            changed = fold_into(summaries, batch)
            tx.save([summaries[m] for m in changed], batch[-1].position)
        self._position = batch[-1].position
        self._seen({m: summaries[m].version for m in changed})
        return len(batch)

    # read-your-writes -------------------------------------------------------------------------

    def expect(self, events: Sequence[StoredEvent]) -> None:
        """Remember events this process has just written: pages wait until they are listed."""
        with self._own_lock:
            for e in events:
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
            self.catch_up(PAGE_CATCH_UP_BATCHES)

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
        self.catch_up(PAGE_CATCH_UP_BATCHES)
        self._await_own_writes()
        rows = self._list.page(phase, player, before, size + 1)
        if len(rows) <= size:
            return rows, ""
        rows = rows[:size]
        return rows, page_token(rows[-1].order)
