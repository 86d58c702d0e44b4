"""The ratings (RATINGS.md): a read model folded from rated matches' ends, and its queries.

The projection follows the global order as the listing does (`bergen.server.projections`):
it reads the matches' ends alone (MatchEnded), each checked as the listing checks a row. A
rated match's end names its seat holders (`MatchEnded.holders`), so it is rated from that
one row; an end without them (a match not rated, or one that ended before ends named their
holders) is looked up in its own stream: its MatchCreated says whether it is rated, and its
SeatTaken rows who held the seats. It writes what it made with the position it reached in
one transaction; a server resumes from that position,
and replicas sharing a database take turns on the position's row lock. `bergen migrate
--rebuild-ratings` empties the tables and sets the position back to 0, and the servers then
fold every rated match again.

Ratings are made in the order of the ends' global positions (RATINGS.md section 3), the
record's `rated.order`. On PostgreSQL the global order is the order of commits, which two
transactions in flight at once may give out of position order: an end folded after a later
one of its pool is applied where it belongs, and the ends after it applied again from the
ratings they started from (kept in the history), so the ratings are always those of
`bergen.domain.ratings.recompute` over the ends in position order.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import gc
import json
import logging
import threading
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol, TypeVar

from bergen.api.chain import parse_metadata
from bergen.domain import codec
from bergen.domain.errors import BergenError, CorruptRecord, InvalidArgument
from bergen.domain.events import MatchEnded, SeatTaken
from bergen.domain.ratings import NEWCOMER, POOLS, Rating, places_of, pool_of, rate, rated_table
from bergen.domain.tiles import sides_of

from .matches import decode_stored
from .projections import (
    DEFAULT_PAGE,
    MAX_PAGE,
    PAGE_CATCH_UP_BATCHES,
    FoldLoop,
    RowCheck,
    is_match_stream,
    page_token,
    parse_page_token,
)
from .store import EventStore, StoredEvent
from .store.packed import PackedEvent
from .store.ratings import (
    RATINGS,
    BoardKey,
    HistoryRow,
    Holder,
    PlayerRating,
    RatedEnd,
    RatingsFold,
    RatingsTables,
    SeatRatings,
    board_key,
)
from .store.sealed import ReadModelTampered
from .threads import Thread

log = logging.getLogger("bergen.server.ratings")

T = TypeVar("T")

BATCH = 1000
"""Events read and folded per transaction, as the ratings keep up with live play."""
HELD_PAGE = 20_000
"""Events read at a time by a fold held in memory (`HeldRatings`), at most."""
HELD_FIRST_PAGE = 2_000
"""The first page of a fold held in memory. Each page after it is read while the one before
is folded, and is twice as long (up to HELD_PAGE): the fold waits for one short read, where
a first page of HELD_PAGE kept it waiting a third of a second before its first row."""
HELD_MAX = 100_000
"""At most this many events are folded in memory before what they made is written: a
rebuild's memory stays bounded (about 2.4 kB a rated match held: some 250 MB at the bound,
the events read being the matches' ends), and so does its writing transaction, during
which PostgreSQL's commit-safe order waits for it."""
_RATED_ENDS = ("target", "forfeit")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_new_tuple = tuple.__new__


class RatingsProjection(FoldLoop[PackedEvent]):
    """The ratings: folded from the store's global order into the store's tables.

    Keeping up (a few events at a time, a match's end) folds each batch in a transaction of
    its own. A catch-up over many events (a full batch read, or the tables empty at position
    0: a server's first start, `bergen migrate --rebuild-ratings`) folds them in memory
    instead (`HeldRatings`), reading the tables only for what it has not folded itself, and
    writes what they made once, in one transaction, with the position reached."""

    reader = "ratings"
    types = frozenset({"MatchEnded"})

    def __init__(self, store: EventStore, batch: int = BATCH) -> None:
        super().__init__(store, batch)
        self._tables = store.ratings()
        self._check = RowCheck(store.log_keys)
        self._seated = SeatedBefore(store, self._check)
        self._held: HeldRatings | None = None
        self._collection_paused = False
        """Whether this projection paused the cyclic garbage collector, for the fold held
        in memory (`_pause_cycle_collection`)."""
        self._ahead: _PageAhead | None = None
        """The next page of a fold held in memory, being read meanwhile."""
        self._held_events = 0
        self._held_page = 0
        """The next page's length in a fold held in memory (0: its first, HELD_FIRST_PAGE)."""
        self.started_at: int | None = None
        """The position this process found the ratings folded up to, when it first looked."""
        self.repairs: Counter[str] = Counter(player_ratings=0, rating_history=0, rated_matches=0)
        """Times a row was found tampered with and the ratings rebuilt, by table (for the
        metrics; the positions' row counts with the listing's)."""

    def rebuild(self, tampered: ReadModelTampered) -> None:
        """Report a row found tampered with, and fold the ratings again from the events:
        they are folded from every rated match in order, so one row cannot be rebuilt alone.
        Raises StorageUnavailable."""
        self.repairs[tampered.table] += 1
        log.warning(
            "READ MODEL TAMPERED: table %s row %s is not served as is (%s): rebuilt from the"
            " events (the ratings, from position 0)", tampered.table, tampered.key,
            tampered.why,
        )  # fmt: skip
        self._tables.reset(RATINGS)
        with self._lock:
            self._position = 0
            self._offered.clear()

    def catch_up(self, max_batches: int | None = None) -> int:
        """Fold what was written since the stored position (up to `max_batches` batches),
        up to the first batch read that is not full; from position 0 again when the saved
        position or a row is found tampered with. Returns how many events this process
        folded. Raises StorageUnavailable."""
        try:
            return super().catch_up(max_batches)
        except ReadModelTampered as tampered:
            self.rebuild(tampered)
            return super().catch_up(max_batches)

    def _stored_position(self) -> int:
        position, fault = self._tables.checked_position(RATINGS)
        if fault is not None or position < 0:
            raise ReadModelTampered("projection_positions", RATINGS, str(fault))
        self.started_at = position
        log.info("ratings: folded up to position %d", position)
        return position

    def _lost_position(self) -> None:
        raise ReadModelTampered(
            "projection_positions",
            RATINGS,
            f"its position {self._position} names no event of the log",
        )

    def _holding(self) -> bool:
        """Whether the next page read is folded in memory (`HeldRatings`)."""
        return self._held is not None or (not self._bounded and self._position == 0)

    def _page(self) -> int:
        if not self._holding():
            return self._batch
        return self._held_page or min(HELD_FIRST_PAGE, HELD_PAGE)

    def _read(self, page: int) -> tuple[Sequence[PackedEvent] | Sequence[StoredEvent], int]:
        """A page folded in memory is read packed (`EventStore.read_all_packed`): reading
        an end was the largest part of a rebuild, most of it making a row's Python objects
        and parsing its JSON before it was even checked. A page that does not parse is read
        again row by row, which passes over a row that does not decode."""
        if not self._holding():
            self._ahead = None
            return super()._read(page)
        after = self._position or 0
        ahead, self._ahead = self._ahead, None
        try:
            if ahead is not None and ahead.after == after and ahead.limit == page:
                batch = ahead.result()
            else:
                batch = self._store.read_all_packed(after, page, self.types or ())
        except CorruptRecord as err:
            log.critical(
                "ratings: the page after position %d is read row by row: %s", after, err.message
            )
            return super()._read(page)
        if len(batch) == page:
            # A full page: the next one is read while this one is folded (the database's
            # part of a read is most of its time, and a rebuild has a core for it), twice as
            # long, up to what the fold may hold.
            held = (self._held_events if self._held is not None else 0) + len(batch)
            self._held_page = max(min(2 * page, HELD_PAGE, HELD_MAX - held), 0)
            if self._held_page:
                self._ahead = _PageAhead(
                    self._store, batch[-1].position, self._held_page, self.types or ()
                )
        return batch, batch[-1].position if batch else after

    def _fold(self, batch: Sequence[PackedEvent] | Sequence[StoredEvent], upto: int) -> int:
        if self._held is not None or (
            not self._bounded and (self._position == 0 or len(batch) >= self._batch)
        ):
            return self._fold_held(batch, upto)
        with self._tables.folding(RATINGS) as tx:
            if tx.fault is not None:
                raise ReadModelTampered("projection_positions", RATINGS, tx.fault)
            if tx.position != self._position:
                self._position = tx.position  # another replica folded it
                return 0
            fold_batch(tx, batch, self._check, self._seated)
            tx.save_position(upto)
        self._position = upto
        return len(batch)

    def _fold_held(self, batch: Sequence[PackedEvent] | Sequence[StoredEvent], upto: int) -> int:
        held = self._held
        if held is None:
            with self._tables.looking(RATINGS) as tables:
                if tables.position != self._position:
                    self._position = tables.position  # another replica folded it
                    return 0
            held = self._held = HeldRatings(self._tables, self._position or 0)
            self._held_events = 0
            self._collection_paused = _pause_cycle_collection()
        fold_batch(held, batch, self._check, self._seated)
        held.save_position(upto)
        self._position = upto
        self._held_events += len(batch)
        return self._finish() if self._held_events >= HELD_MAX else 0

    def _finish(self) -> int:
        self._held_page = 0
        try:
            return self._write_held()
        finally:
            # What was held is dropped by now: a collection has no survivors of it to walk.
            self._resume_cycle_collection()

    def _write_held(self) -> int:
        held = self._held
        if held is None:
            return 0
        try:
            with self._tables.folding(RATINGS) as tx:
                if tx.position != held.start:
                    # Another replica wrote first: what was held here is dropped, and the
                    # ratings go on from where that one stopped.
                    self._position = tx.position
                    return 0
                held.write(tx)
        except BaseException:
            self._position = held.start  # nothing written: fold it again
            raise
        finally:
            self._held = None
        log.info(
            "ratings: %d events folded in memory, written up to position %d",
            self._held_events,
            held.position,
        )
        return self._held_events

    def _abandon(self) -> None:
        self._ahead = None  # read for a fold that stopped: its page is read again if wanted
        self._held_page = 0
        if self._held is not None:
            self._position = self._held.start
        self._held = None
        self._resume_cycle_collection()

    def _resume_cycle_collection(self) -> None:
        if self._collection_paused:
            self._collection_paused = False
            gc.enable()


class _PageAhead:
    """A packed page (`EventStore.read_all_packed`) read in a thread of its own."""

    def __init__(self, store: EventStore, after: int, limit: int, types: Collection[str]) -> None:
        self.after, self.limit = after, limit
        self._done = threading.Event()
        self._page: Sequence[PackedEvent] = ()
        self._error: BaseException | None = None

        def read() -> None:
            try:
                self._page = store.read_all_packed(after, limit, types)
            except BaseException as e:  # raised where the page is taken
                self._error = e
            finally:
                self._done.set()

        Thread(target=read, name="bergen-ratings-ahead", daemon=True).start()

    def result(self) -> Sequence[PackedEvent]:
        """The page, once read. Raises what the read raised."""
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._page


def _pause_cycle_collection() -> bool:
    """Pause the cyclic garbage collector for a fold held in memory, from its first page
    until what it held is written and dropped. Returns whether it was running (and is now
    paused).

    A held fold makes millions of objects and no cycle, and each collection walks every one
    of them still young: a tenth of a rebuild's time at 10,000 matches, and more as they
    grow. Paused for each page alone, it was back on between pages holding every object the
    pages before had made, and walked them all again a page (a tenth of a rebuild of 100,000
    matches). Reference counting frees garbage as ever; cycles made meanwhile, by this
    thread or another, are collected once it is back on."""
    if not gc.isenabled():
        return False
    gc.disable()
    return True


class FoldTarget(Protocol):
    """What `fold_batch` folds into: the tables inside their transaction (`RatingsFold`),
    or the ratings held in memory (`HeldRatings`)."""

    def ratings(self, pool: str, player_ids: Sequence[str]) -> dict[str, PlayerRating]: ...

    def ratings_in(
        self, wanted: Collection[tuple[str, str]]
    ) -> dict[tuple[str, str], PlayerRating]: ...

    def save_ratings(self, ratings: Sequence[PlayerRating]) -> None: ...

    def last_order(self, pool: str) -> int: ...

    def last_orders(self, pools: Sequence[str]) -> dict[str, int]: ...

    def matches_after(self, pool: str, order: int) -> list[tuple[RatedEnd, SeatRatings]]: ...

    def drop_matches(self, ends: Sequence[RatedEnd]) -> None: ...

    def add_match(self, end: RatedEnd, rated: SeatRatings) -> None: ...

    def add_matches(
        self, applied: Sequence[tuple[RatedEnd, SeatRatings]], fresh: bool = False
    ) -> None: ...


class HeldRatings:
    """The ratings folded in memory from the position `start` on: what the fold reads, it
    finds here, or (once) in the tables as they stood at `start`, read without a lock; what
    it writes stays here until `write` writes it all in one transaction. At position 0 the
    tables are empty: nothing is read from them, and `write` fills them in bulk."""

    def __init__(self, tables: RatingsTables, start: int) -> None:
        self._tables = None if start == 0 else tables
        self.start = start
        self.position = start
        self._ratings: dict[tuple[str, str], PlayerRating | None] = {}
        """By (pool, player): a rating, or None (the tables have none)."""
        self._ratings_saved: set[tuple[str, str]] = set()
        self._last: dict[str, int] = {}
        self._ends: dict[str, RatedEnd] = {}
        """By match: the ends applied here, and those of the tables read here."""
        self._rated: dict[str, SeatRatings] = {}
        """By match: its seats' ratings (made here, or as the tables have them)."""
        self._made: set[str] = set()
        """The matches whose ends were applied here."""
        self._new_ends: dict[str, list[tuple[int, str]]] = {}
        """By pool: (order, match) of the ends applied here, in order."""
        self._dropped: dict[str, RatedEnd] = {}
        """By match: the ends of the tables applied again here (their rows written anew)."""

    def _look(self, read: Callable[[RatingsFold], T]) -> T:
        assert self._tables is not None
        with self._tables.looking(RATINGS) as tables:
            return read(tables)

    def ratings(self, pool: str, player_ids: Sequence[str]) -> dict[str, PlayerRating]:
        return {p: r for (_, p), r in self.ratings_in({(pool, p) for p in player_ids}).items()}

    def ratings_in(
        self, wanted: Collection[tuple[str, str]]
    ) -> dict[tuple[str, str], PlayerRating]:
        held = self._ratings
        if self._tables is not None:  # at position 0 there is nothing to read
            missing = [k for k in wanted if k not in held]
            if missing:
                found = self._look(lambda t: t.ratings_in(missing))
                for k in missing:
                    held[k] = found.get(k)
        get = held.get
        return {k: r for k in wanted if (r := get(k)) is not None}

    def save_ratings(self, ratings: Sequence[PlayerRating]) -> None:
        for r in ratings:
            key = (r.pool, r.player_id)
            self._ratings[key] = r
            self._ratings_saved.add(key)

    def last_order(self, pool: str) -> int:
        return self.last_orders([pool])[pool]

    def last_orders(self, pools: Sequence[str]) -> dict[str, int]:
        missing = [p for p in pools if p not in self._last]
        if missing:
            found = (
                {p: 0 for p in missing}
                if self._tables is None
                else self._look(lambda t: t.last_orders(missing))
            )
            self._last.update(found)
        return {p: self._last[p] for p in pools}

    def matches_after(self, pool: str, order: int) -> list[tuple[RatedEnd, SeatRatings]]:
        here = self._new_ends.get(pool, [])
        later = here[bisect.bisect_right(here, order, key=lambda e: e[0]) :]
        found = {m: (self._ends[m], self._rated[m]) for _, m in later}
        if self._tables is not None:
            for end, rated in self._look(lambda t: t.matches_after(pool, order)):
                m = end.match_id
                found[m] = (self._ends.setdefault(m, end), self._rated.setdefault(m, rated))
        return sorted(found.values(), key=lambda e: e[0].order)

    def drop_matches(self, ends: Sequence[RatedEnd]) -> None:
        for e in ends:
            if e.match_id not in self._made:
                self._dropped[e.match_id] = e

    def add_match(self, end: RatedEnd, rated: SeatRatings) -> None:
        self.add_matches([(end, rated)])

    def add_matches(
        self, applied: Sequence[tuple[RatedEnd, SeatRatings]], fresh: bool = False
    ) -> None:
        ends, made, rated_of, last = self._ends, self._made, self._rated, self._last
        for end, rated in applied:
            m = end.match_id
            if m not in ends:
                ends[m] = end
                made.add(m)
                pool, order = end.pool, end.order
                new = self._new_ends.get(pool)
                if new is None:
                    new = self._new_ends[pool] = []
                if not new or new[-1][0] < order:
                    new.append((order, m))  # as a rebuild folds them: in order
                else:
                    bisect.insort(new, (order, m))
                if order > (last[pool] if pool in last else self.last_order(pool)):
                    last[pool] = order
            rated_of[m] = rated

    def save_position(self, position: int) -> None:
        self.position = position

    def write(self, tx: RatingsFold) -> None:
        """Write what was folded here into the tables, in `tx` (at `start`), with the
        position reached: one bulk write a table."""
        fresh = self._tables is None
        again = sorted(self._dropped)  # none of them made here
        tx.drop_matches([self._dropped[m] for m in again])
        saved = [self._ratings[k] for k in self._ratings_saved]
        tx.save_ratings([r for r in saved if r is not None], fresh=fresh)
        made = [m for ends in self._new_ends.values() for _, m in ends]
        tx.add_matches([(self._ends[m], self._rated[m]) for m in [*made, *again]], fresh=fresh)
        tx.save_position(self.position)


def fold_batch(
    tx: FoldTarget,
    batch: Sequence[PackedEvent] | Sequence[StoredEvent],
    check: RowCheck | None,
    seated: SeatedBefore,
) -> None:
    """Fold `batch` (in global order; stored or packed rows) into the ratings: rate each
    match end by its target or a forfeit of a rated match, whose holders the end names or
    (`seated`, for an end that names none) its stream gives."""
    ends: list[RatedEnd] = []
    for e in batch:
        if e.type != "MatchEnded":
            continue
        match_id = e.stream_id
        if not is_match_stream(match_id):
            continue
        if type(e) is PackedEvent:
            if check is not None:  # as `_refused` does, written out: every row passes here
                why = check.packed_refusal(e)
                if why is not None:
                    _judged(check, e, why)
                    continue
                check.folded(e)
            event = _packed_decoded(e)
            ended_at = _EPOCH + timedelta(0, 0, e.recorded_us)  # microseconds
        else:
            assert isinstance(e, StoredEvent)
            if _refused(check, e):
                continue
            event = _decoded(e)
            ended_at = e.recorded_at
        if not isinstance(event, MatchEnded):
            continue
        reason = str(event.reason)
        if reason not in _RATED_ENDS:
            continue  # abandoned: not rated
        # An end written before ends named their holders: from the start of its stream.
        table = _table_of_end(match_id, event) if event.holders else seated.table(match_id, e.seq)
        if table is None:
            continue
        holders, sides, pool = table
        result = (reason, tuple(event.scores), event.forfeited_side)
        places = _places.get(result)
        if places is None:
            try:
                places = places_of(*result)
            except BergenError as err:
                log.error("ratings: match %s is not rated: %s", match_id, err)
                continue
            if len(_places) >= _PLACES_KEPT:
                _places.clear()
            _places[result] = places
        ends.append(
            _new_tuple(RatedEnd, (match_id, pool, e.position, holders, sides, places, ended_at))
        )
    apply_ends(tx, ends)


_places: dict[tuple[str, tuple[int, ...], int | None], tuple[int, ...]] = {}
"""The places of the results seen (`places_of`, a pure function): matches' results repeat
(a target's winner on its score, the others on theirs), and placing one anew cost a rebuild
about as much as reading its row's columns."""
_PLACES_KEPT = 50_000


Table = tuple[tuple[Holder, ...], tuple[tuple[int, ...], ...], str]
"""A rated match's seat holders, each side's seats and its pool."""


def _table_of_end(match_id: str, end: MatchEnded) -> Table | None:
    """The table of a rated match from its end alone (`rated_table`). None (logged) for
    holders the rules would not seat."""
    # tuple.__new__: a named tuple's own constructor is a Python function, and the codec
    # gives each holder as a (player, name, bot) tuple already checked.
    holders = tuple([_new_tuple(Holder, h) for h in end.holders])
    try:
        pool, sides = rated_table([h[0] for h in end.holders], len(end.scores))
    except InvalidArgument as err:
        log.error("ratings: match %s is not rated: %s", match_id, err)
        return None
    return holders, sides, pool


SEATING_PAGE = 16
"""Events read at a time from the start of a match's stream, looking for its seat holders."""


class SeatedBefore:
    """The table of a match whose end names no holders, from the start of its stream: its
    MatchCreated (rated or not) and the SeatTaken rows up to its first deal (a rated match's
    seats do not change hands once dealt), each row checked. A match not rated costs one
    row read."""

    def __init__(self, store: EventStore, check: RowCheck | None) -> None:
        self._store = store
        self._check = check

    def table(self, match_id: str, end_seq: int) -> Table | None:
        events = self._store.read_stream(match_id, 1, 1)
        if not events or events[0].type != "MatchCreated" or _refused(self._check, events[0]):
            return None
        created = events[0]
        if created.payload.get("rated") is not True:
            return None
        table = _table_of(created)
        if table is None:
            return None
        count, sides, pool = table
        seats: list[Holder | None] = [None] * count
        after = 1
        while after < end_seq:
            page = self._store.read_stream(match_id, after + 1, SEATING_PAGE)
            if not page:
                break
            for e in page:
                if e.type == "Dealt" or e.seq >= end_seq:
                    return _all_seated(match_id, seats, sides, pool)
                if _refused(self._check, e):
                    return None
                if e.type != "SeatTaken":
                    continue
                seat = _decoded(e)
                if isinstance(seat, SeatTaken) and seat.player and 0 <= seat.seat < count:
                    seats[seat.seat] = Holder(seat.player, seat.name, seat.bot)
            after = page[-1].seq
        return _all_seated(match_id, seats, sides, pool)


def _all_seated(
    match_id: str, seats: Sequence[Holder | None], sides: tuple[tuple[int, ...], ...], pool: str
) -> Table | None:
    holders = tuple(h for h in seats if h is not None)
    if len(holders) != len(seats):
        log.error("ratings: match %s is not rated: a seat was never taken", match_id)
        return None
    return holders, sides, pool


def _refused(check: RowCheck | None, e: StoredEvent) -> bool:
    return _judged(check, e, check.refusal(e) if check is not None else None)


def _judged(check: RowCheck | None, e: StoredEvent | PackedEvent, why: str | None) -> bool:
    """Whether `e` is refused for `why` (logged); a row that is not is remembered as folded."""
    if why is None:
        if check is not None:
            check.folded(e)
        return False
    log.critical("LOG TAMPERED: match %s seq %d is not rated: %s", e.stream_id, e.seq, why)
    return True


def _table_of(e: StoredEvent) -> tuple[int, tuple[tuple[int, ...], ...], str] | None:
    """The seats, sides and pool of a rated match, from its MatchCreated's payload alone:
    the rest of it (the rules, the seed's commitment) is the match's business, and decoding
    the rules cost about an eighth of the fold's time a match. None (logged) for a payload
    that does not give a table the rules have."""
    seats, partnerships = e.payload.get("seats"), e.payload.get("partnerships")
    try:
        if type(seats) is not int or type(partnerships) is not bool:
            raise InvalidArgument("no seats and partnerships")
        pool = pool_of(seats, partnerships)
    except InvalidArgument as err:
        log.error("ratings: match %s is not rated: %s", e.stream_id, err)
        return None
    return seats, sides_of(seats, partnerships), pool


def _decoded(e: StoredEvent) -> object:
    try:
        return decode_stored(e)
    except CorruptRecord as err:
        log.error("ratings: stream %s seq %d left out: %s", e.stream_id, e.seq, err)
        return None


def _packed_decoded(e: PackedEvent) -> object:
    """The event of a packed row, decoded as a stored one is (its metadata too, which a
    store's read parses)."""
    try:
        parse_metadata(e.metadata)
        return codec.decode(e.type, e.schema_version, json.loads(e.payload.decode()))
    except (ValueError, KeyError, TypeError, CorruptRecord) as err:
        log.error("ratings: stream %s seq %d left out: %s", e.stream_id, e.seq, err)
        return None


def apply_ends(tx: FoldTarget, ends: Sequence[RatedEnd]) -> None:
    """Rate `ends`, in the order folded, as `apply_end` one at a time would, with a batch's
    reads and writes made together: each pool's latest order and its players' ratings read
    once, the matches, their history and the ratings written once. An end folded after a
    later one of its pool is left to `apply_end`, once what came before it is written."""
    if not ends:
        return
    pools = sorted({e.pool for e in ends})
    last = tx.last_orders(pools)
    held = tx.ratings_in({(e.pool, h.player) for e in ends for h in e.seats})
    states: dict[str, dict[str, Rating]] = {pool: {} for pool in pools}
    applied: list[tuple[RatedEnd, SeatRatings]] = []
    # By pool, then player: a dict a pool, not a (pool, player) key made for every seat.
    rated: dict[str, dict[str, Holder]] = {pool: {} for pool in pools}

    def write() -> None:
        tx.add_matches(applied, fresh=True)
        tx.save_ratings([PlayerRating(p, pool, h.name, h.bot, states[pool][p])
                         for pool, seen in rated.items() for p, h in seen.items()])  # fmt: skip
        applied.clear()
        for holders in rated.values():
            holders.clear()

    add = applied.append
    for end in ends:
        pool = end.pool
        state = states[pool]
        if end.order <= last[pool]:
            write()
            apply_end(tx, end)
            # The pool's ratings as that left them, for the ends after it.
            state.clear()
            players = {h.player for e in ends if e.pool == pool for h in e.seats}
            held.update((k, r) for k, r in tx.ratings_in({(pool, p) for p in players}).items())
            continue
        holders = rated[pool]
        for h in end.seats:
            player = h.player
            if player not in state:
                r = held.get((pool, player))
                state[player] = NEWCOMER if r is None else r.rating
            holders[player] = h
        add((end, rate_end(end, state)))
        last[pool] = end.order
    write()


def apply_end(tx: FoldTarget, end: RatedEnd) -> None:
    """Rate `end` in its pool: after the latest end applied, on the ratings as they stand;
    before it (an end folded late), where it belongs, the later ends applied again. An end
    applied already is passed over."""
    last = tx.last_order(end.pool)
    players = [h.player for h in end.seats]
    state: dict[str, Rating] = {}
    if end.order > last:
        current = tx.ratings(end.pool, players)
        state.update({p: current[p].rating if p in current else NEWCOMER for p in players})
        tx.add_match(end, rate_end(end, state))
        tx.save_ratings(_rows(end.pool, end.seats, state))
        return
    later_rated = tx.matches_after(end.pool, end.order - 1)
    later = [m for m, _ in later_rated]
    if any(m.match_id == end.match_id for m in later):
        return
    log.info(
        "ratings: match %s ended before %d later-folded match(es) of pool %s: applied in its place",
        end.match_id,
        len(later),
        end.pool,
    )
    # Each player's rating before the first of the later ends it played (in order).
    for m, rated in later_rated:
        for h, (before, _) in zip(m.seats, rated, strict=True):
            state.setdefault(h.player, before)
    holders = {h.player: h for m in (end, *later) for h in m.seats}
    missing = [p for p in holders if p not in state]
    current = tx.ratings(end.pool, missing)
    for p in missing:
        state[p] = current[p].rating if p in current else NEWCOMER
    tx.drop_matches(later)
    for m in sorted((end, *later), key=lambda m: m.order):
        tx.add_match(m, rate_end(m, state))
    tx.save_ratings(_rows(end.pool, tuple(holders.values()), state))


def rate_end(end: RatedEnd, state: dict[str, Rating]) -> SeatRatings:
    """Rate one match on `state` (each player's rating before it, updated here), RATINGS.md
    section 3: each side a team of its seat holders in seat order. Returns each seat's
    rating before and after, in seat order."""
    seats = end.seats
    sides = end.sides
    if sides == _ONE_A_SIDE.get(len(seats)):
        # A side a seat, in seat order (every pool but partnerships): no side to gather.
        befores = [state[h.player] for h in seats]
        after = rate([[b] for b in befores], end.places)
        rated = []
        for h, before, (new,) in zip(seats, befores, after, strict=True):
            state[h.player] = new
            rated.append((before, new))
        return tuple(rated)
    teams = [[state[seats[s].player] for s in side] for side in sides]
    after = rate(teams, end.places)
    pairs: list[tuple[Rating, Rating]] = [None] * len(seats)  # type: ignore[list-item]
    for side, before_side, after_side in zip(sides, teams, after, strict=True):
        for seat, before, new in zip(side, before_side, after_side, strict=True):
            state[seats[seat].player] = new
            pairs[seat] = (before, new)
    return tuple(pairs)


_ONE_A_SIDE = {n: tuple((seat,) for seat in range(n)) for n in (2, 3, 4)}
"""The sides of a table of `n` seats without partnerships: a side a seat, in seat order."""


def _rows(pool: str, holders: Sequence[Holder], state: dict[str, Rating]) -> list[PlayerRating]:
    return [PlayerRating(h.player, pool, h.name, h.bot, state[h.player]) for h in holders]


# --- queries ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BoardPage:
    """A page of a leaderboard: each player's rank and rating, and the next page's token."""

    entries: list[tuple[int, PlayerRating]]
    next_token: str


def board_token(rank: int, key: BoardKey) -> str:
    """The opaque token of the page after the entry of rank `rank` at `key`."""
    text = json.dumps([rank, key[0], key[1].hex(), key[2], key[3]], separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


_BOARD_TOKEN_MAX = 200


def parse_board_token(token: str) -> tuple[int, BoardKey]:
    """The rank and key a token of `board_token` names. Raises InvalidArgument for anything
    else, with a short message, whatever its size or content."""
    bad = InvalidArgument("page_token is not one this server gave", reason="BAD_PAGE_TOKEN")
    if not isinstance(token, str) or len(token) > _BOARD_TOKEN_MAX:
        raise bad
    try:
        value = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        rank, rating, conservative, matches, player_id = value
        key = (rating, float.fromhex(conservative), matches, player_id)
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError):
        raise bad from None
    if not (
        type(rank) is int
        and rank >= 1
        and type(rating) is int
        and type(matches) is int
        and isinstance(player_id, str)
        and len(player_id) <= 64
    ):
        raise bad
    return rank, key


def _size(size: int) -> int:
    if size < 0:
        raise InvalidArgument("page_size must not be negative")
    return DEFAULT_PAGE if size == 0 else min(size, MAX_PAGE)


def check_pool(pool: str) -> str:
    if pool not in POOLS:
        raise InvalidArgument(
            f"a pool is one of {', '.join(POOLS)}", reason="INVALID_POOL", field="pool"
        )
    return pool


class RatingQueries:
    """Players' ratings as the projection holds them, caught up before each answer (its
    own writes, and what was visible when asked, are then folded)."""

    def __init__(self, store: EventStore, projection: RatingsProjection) -> None:
        self._tables = store.ratings()
        self._projection = projection

    def _checked(self, read: Callable[[], list[T]]) -> list[T]:
        """`read()`'s rows; when one of them does not verify, after the ratings are rebuilt
        from the events (and caught up as far as a page catches up)."""
        try:
            return read()
        except ReadModelTampered as tampered:
            self._projection.rebuild(tampered)
        self._projection.catch_up(PAGE_CATCH_UP_BATCHES)
        return read()

    def ratings_of(self, player_id: str) -> dict[str, Rating]:
        """The player's rating in every pool (a newcomer's where it has none)."""
        self._projection.catch_up(PAGE_CATCH_UP_BATCHES)
        held = {
            r.pool: r.rating for r in self._checked(lambda: self._tables.player_ratings(player_id))
        }
        return {pool: held.get(pool, NEWCOMER) for pool in POOLS}

    def leaderboard(self, pool: str, size: int, token: str) -> BoardPage:
        """A page of `pool`'s leaderboard (RATINGS.md section 4). Raises InvalidArgument
        (INVALID_POOL, BAD_PAGE_TOKEN, a negative size)."""
        check_pool(pool)
        size = _size(size)
        rank, after = parse_board_token(token) if token else (0, None)
        self._projection.catch_up(PAGE_CATCH_UP_BATCHES)
        rows = self._checked(lambda: self._tables.leaderboard(pool, after, size + 1))
        entries = [(rank + 1 + i, r) for i, r in enumerate(rows[:size])]
        if len(rows) <= size:
            return BoardPage(entries, "")
        last_rank, last = entries[-1]
        return BoardPage(entries, board_token(last_rank, board_key(last.player_id, last.rating)))

    def matches(
        self, player_id: str, pool: str | None, size: int, token: str
    ) -> tuple[list[HistoryRow], str]:
        """A page of the player's rated matches, newest first, of `pool` (None: any). Raises
        InvalidArgument (INVALID_POOL, BAD_PAGE_TOKEN, a negative size)."""
        if pool is not None:
            check_pool(pool)
        size = _size(size)
        before = parse_page_token(token) if token else None
        self._projection.catch_up(PAGE_CATCH_UP_BATCHES)
        rows = self._checked(lambda: self._tables.history(player_id, pool, before, size + 1))
        if len(rows) <= size:
            return rows, ""
        rows = rows[:size]
        return rows, page_token(rows[-1].order)


__all__ = [
    "BoardPage",
    "FoldTarget",
    "HeldRatings",
    "RatingQueries",
    "RatingsProjection",
    "SeatedBefore",
    "apply_end",
    "apply_ends",
    "fold_batch",
    "rate_end",
]
