"""Tournaments as the API shows them: views with their tables' live scores, each player's
table, watching, listing, records and audit pack manifests."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bergen.api.audit_pack import MANIFEST_FILE, pack_contents, played_matches
from bergen.api.signing import RecordSigner
from bergen.domain.errors import (
    BergenError,
    CorruptRecord,
    InvalidArgument,
    LogTampered,
    NotFound,
    PermissionDenied,
    RuleViolation,
)
from bergen.domain.tournament_engine import ENDED, REGISTRATION, REVEAL, RUNNING
from bergen.domain.tournament_pairing import seats_of

from ..feed import EventFeed, Subscription
from ..identity import Caller, Identity
from ..matches import MatchRepository
from ..store import StoredEvent, lagging, lagging_reads
from ..tlog import TransparencyLog
from .repository import Tournament, TournamentRepository
from .tables import is_tournament_id, tournament_stream

log = logging.getLogger("bergen.server.tournaments")

MANIFESTS_KEPT = 64
"""Ended tournaments whose audit pack manifest is kept built."""
PAGE = 50
MAX_PAGE = 200
RECORDS_CACHED = 256
"""Tournaments whose latest record `get` keeps built."""

TABLE_MOVES = frozenset({"SeatTaken", "HandEnded", "MatchEnded"})
"""The events of a table's match that change what a tournament's watcher is shown."""


@dataclass(frozen=True, slots=True)
class Assignment:
    """Where a player must play now: its entrant, which of its players, and the table."""

    entrant: int
    player: int
    round: int = 0
    table: int = 0
    match_id: str = ""
    seat: int | None = None


@dataclass(frozen=True, slots=True)
class TournamentView:
    tournament: Tournament
    record: dict[str, Any]
    live_scores: Mapping[str, tuple[int, ...]]
    """Each table's match in play (by match id): its scores now."""
    assignment: Assignment | None = None


class TableWakes:
    """Wakes the watchers of a tournament when a match of its current round is seated, ends a
    hand or ends: a feed listener, given the watchers' own subscriptions."""

    def __init__(self) -> None:
        self._subs: dict[str, set[Subscription]] = {}
        self._lock = threading.Lock()

    def follow(self, sub: Subscription, match_ids: list[str]) -> bool:
        """Wake `sub` for these matches too. Returns whether any was not followed before."""
        added = False
        with self._lock:
            for m in match_ids:
                group = self._subs.setdefault(m, set())
                if sub not in group:
                    group.add(sub)
                    added = True
        return added

    def forget(self, sub: Subscription) -> None:
        with self._lock:
            for m in [m for m, group in self._subs.items() if sub in group]:
                self._subs[m].discard(sub)
                if not self._subs[m]:
                    del self._subs[m]

    def note(self, events: Sequence[StoredEvent]) -> None:
        woken: list[tuple[Subscription, StoredEvent]] = []
        with self._lock:
            if not self._subs:
                return
            for e in events:
                if e.type in TABLE_MOVES:
                    woken += [(sub, e) for sub in self._subs.get(e.stream_id, ())]
        for sub, e in woken:
            sub.put([e])


class TournamentQueries:
    """Every query of a tournament, for callers of the API."""

    def __init__(
        self,
        repository: TournamentRepository,
        matches: MatchRepository,
        identity: Identity,
        signer: RecordSigner | None = None,
        feed: EventFeed | None = None,
        wakes: TableWakes | None = None,
        tlog: TransparencyLog | None = None,
    ) -> None:
        self._tlog = tlog
        """The transparency log whose checkpoints records carry (None: none kept)."""
        self._feed = feed
        self._wakes = wakes
        self._repo = repository
        self._matches = matches
        self._identity = identity
        self._signer = signer
        self._records: OrderedDict[str, tuple[int, dict[str, Any]]] = OrderedDict()
        """Tournament id -> (version, its record at that version): every caller of `get` is
        shown the same record, built once per version (a player's lookup of its table, a
        watcher woken, all between two of the tournament's events)."""
        self._records_lock = threading.Lock()
        self._manifests: OrderedDict[str, dict[str, Any]] = OrderedDict()
        """Tournament id -> its audit pack's signed manifest, for ended tournaments (which
        change no more): a pack's records are read and hashed once."""
        self.record_hits = 0
        """Records served as built before (counted under the records' lock); `record_misses`
        those built anew."""
        self.record_misses = 0

    @property
    def repository(self) -> TournamentRepository:
        return self._repo

    def entrant_of(self, t: Tournament, caller: Caller) -> tuple[int, int] | None:
        """(entrant, player) the caller's token is, None for no token or another one."""
        if caller.token is None:
            return None
        match = self._identity.seat_tokens.matcher(caller.token)
        for entrant, sealed in t.tokens.items():
            for player, s in enumerate(sealed):
                if match(s):
                    return entrant, player
        return None

    @lagging
    def get(self, caller: Caller, tournament_id: str) -> TournamentView:
        """The tournament as a view: the record so far, the live scores of the tables in play,
        and for a player's token where that player plays now. Raises NotFound,
        PermissionDenied (a token that is neither a player's nor the organiser's)."""
        return self._view(caller, self._repo.load(tournament_id))

    @lagging
    def _view(self, caller: Caller, t: Tournament) -> TournamentView:
        """`get`'s view of `t` as loaded: its tables' matches as they are now."""
        tournament_id = t.state.tournament_id
        assignment = None
        if caller.token is not None and not self._identity.is_organiser(caller):
            mine = self.entrant_of(t, caller)
            if mine is None:
                raise PermissionDenied(
                    f"the token is no player's of tournament {tournament_id}",
                    reason="NOT_A_PLAYER_OF_THIS_TOURNAMENT",
                    tournament_id=tournament_id,
                )
            assignment = self._assignment(t, *mine)
        live: dict[str, tuple[int, ...]] = {}
        if t.state.rounds:
            for table in t.state.rounds[-1].tables:
                if table.match_id is not None and table.result is None:
                    match = self._matches.cached(table.match_id)
                    if match is None:
                        try:
                            match = self._matches.load(table.match_id)
                        except NotFound:
                            # Not created yet. The manager takes a round's tables in table
                            # order (a few at once), so later tables are, as a rule, not
                            # created either: one read of the store, not one for each table
                            # of a round being seated. One created just now has no score yet
                            # to show; its assignment is looked up apart (`_seated`).
                            break
                        except LogTampered:
                            # Rows no server wrote at its id: the manager abandons the
                            # table; the tournament is shown meanwhile, without its score.
                            continue
                    live[table.match_id] = tuple(match.state.scores)
        return TournamentView(t, self._record_of(t), live, assignment)

    def _record_of(self, t: Tournament) -> dict[str, Any]:
        """`t`'s record, built once per version; shared, so read only."""
        tournament_id = t.state.tournament_id
        with self._records_lock:
            cached = self._records.get(tournament_id)
            if cached is not None and cached[0] == t.version:
                self._records.move_to_end(tournament_id)
                self.record_hits += 1
                return cached[1]
            self.record_misses += 1
        record = t.state.record()
        with self._records_lock:
            cached = self._records.get(tournament_id)
            if cached is None or cached[0] <= t.version:
                self._records[tournament_id] = (t.version, record)
                self._records.move_to_end(tournament_id)
                while len(self._records) > RECORDS_CACHED:
                    self._records.popitem(last=False)
        return record

    def watch(
        self,
        caller: Caller,
        tournament_id: str,
        active: Callable[[], bool],
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> Generator[TournamentView | Subscription, None, None]:
        """The tournament as `get` shows it, then again each time that changes: an entrant
        registered or withdrew, a round paired, a table's match seated, a hand or a match
        ended, a result recorded; until the tournament ends or `active()` turns false.
        Raises as `get`. With `loop`, yields its subscription where it would wait, as
        `MatchQueries.watch` does."""
        assert self._feed is not None and self._wakes is not None
        stream = tournament_stream(tournament_id)
        sub = self._feed.subscribe(stream, loop)
        try:
            shown: object = None
            t: Tournament | None = None  # as last read; None: read it (again) from the store
            while True:
                v = self.get(caller, tournament_id) if t is None else self._view(caller, t)
                t = v.tournament
                rounds = t.state.rounds
                tables = [x.match_id for x in rounds[-1].tables if x.match_id] if rounds else []
                if self._wakes.follow(sub, tables):
                    continue  # look again: a table may have moved before it was followed
                key = (t.version, sorted(v.live_scores.items()), v.assignment)
                if key != shown:
                    shown = key
                    yield v
                if t.state.phase == ENDED:
                    return
                if not (yield from sub.waiting(active)):
                    return
                # Woken by its tables' matches only (a seat, a hand, an end), the tournament
                # has not moved: its own events reach this subscription, which was made
                # before it was first read. So it is read again only when one did.
                if sub.refused or any(e.stream_id == stream for e in sub.take()):
                    t = None
        finally:
            self._wakes.forget(sub)
            self._feed.unsubscribe(tournament_stream(tournament_id), sub)

    def _assignment(self, t: Tournament, entrant: int, player: int) -> Assignment:
        state = t.state
        if state.phase != RUNNING or not state.rounds:
            return Assignment(entrant, player)
        latest = state.rounds[-1]
        for table in latest.tables:
            if entrant in table.sides and table.result is None and table.match_id is not None:
                for seat, who in enumerate(seats_of(state.settings, table.sides)):
                    if who == (entrant, player):
                        if not self._seated(table.match_id, seat):
                            # Paired, but the server has not seated it yet: nothing to play.
                            return Assignment(entrant, player, latest.round, table.table)
                        return Assignment(
                            entrant, player, latest.round, table.table, table.match_id, seat
                        )
        return Assignment(entrant, player)

    def _seated(self, match_id: str, seat: int) -> bool:
        """Whether `seat` of the match is taken (by the server, for its player)."""
        match = self._matches.cached(match_id)
        if match is None or match.state.players[seat] is None:
            try:
                match = self._matches.load(match_id)
            except (NotFound, LogTampered):
                return False  # not created yet, or not to be played (the manager abandons it)
        return match.state.players[seat] is not None

    @lagging
    def list(self, phase: str | None, size: int, token: str) -> tuple[list[Tournament], str]:
        """A page of tournaments in id order (`phase` None: any). Returns the page and the
        next page's token ("" after the last). Raises InvalidArgument (BAD_PAGE_TOKEN)."""
        if phase not in (None, REGISTRATION, REVEAL, RUNNING, ENDED):
            raise InvalidArgument(f"no tournament phase {phase!r}", reason="INVALID_PHASE")
        size = PAGE if size <= 0 else min(size, MAX_PAGE)
        after = _parse_page_token(token) if token else ""
        out: list[Tournament] = []
        while len(out) < size:
            ids = self._repo.ids(after, size)
            if not ids:
                return out, ""
            for tournament_id in ids:
                after = tournament_id
                try:
                    t = self._repo.load(tournament_id)
                except BergenError as e:
                    log.warning("tournament %s left out of a listing: %s", tournament_id, e)
                    continue
                if phase is None or t.state.phase == phase:
                    out.append(t)
                    if len(out) == size:
                        more = self._repo.ids(after, 1)
                        return out, _page_token(after) if more else ""
        return out, ""

    def record(self, tournament_id: str) -> dict[str, Any]:
        """The section 6 record, signed when the server signs: the seed and every figure
        once ended, the record so far before. Like a match record, it names its stream's
        events and head hash (`log`) and, from a server that keeps the transparency log,
        carries the checkpoint of the tree that ends with its last event and that event's
        inclusion proof (`transparency`). Raises NotFound, LogRolledBack, StorageUnavailable
        (LOG_LAGGING: its last event not in the tree yet)."""
        with lagging_reads():
            t = self._repo.load(tournament_id)
            head = self._repo.head(t)
        record = t.state.record()
        if head is not None:
            record["log"] = {"events": t.version, "head": head.hash.hex()}
            if self._tlog is not None:
                record["transparency"] = self._tlog.record_field(
                    head, f"tournament {tournament_id}", tournament_id=tournament_id
                )
        return self._signer.sign(record) if self._signer is not None else record

    def audit_manifest(
        self, tournament_id: str, match_record: Callable[[str], Mapping[str, Any]]
    ) -> dict[str, Any]:
        """The signed manifest of an ended tournament's audit pack (TOURNAMENT.md section 6):
        the SHA-256 of its record and of each played table's match record as `match_record`
        gives it (GetRecord's), so that anyone who fetches those can write the pack. Built
        once per tournament. Raises NotFound; RuleViolation (TOURNAMENT_NOT_ENDED, or
        RECORDS_NOT_SIGNED on a server that signs nothing); CorruptRecord when a served record
        is not what the pack takes."""
        with self._records_lock:
            known = self._manifests.get(tournament_id)
        if known is not None:
            return known
        if self._signer is None:
            raise RuleViolation(
                "this server signs no records, so it signs no audit pack",
                reason="RECORDS_NOT_SIGNED",
            )
        record = self.record(tournament_id)
        if record.get("ended") is not True:
            raise RuleViolation(
                f"tournament {tournament_id} has not ended: its pack is made at the end",
                reason="TOURNAMENT_NOT_ENDED",
                tournament_id=tournament_id,
            )
        matches = [match_record(match_id) for match_id in played_matches(record)]
        try:
            files = pack_contents(record, matches, self._signer, signed=True)
        except ValueError as e:
            raise CorruptRecord(f"tournament {tournament_id}: no pack: {e}") from None
        manifest: dict[str, Any] = json.loads(files[MANIFEST_FILE])
        with self._records_lock:
            self._manifests[tournament_id] = manifest
            while len(self._manifests) > MANIFESTS_KEPT:
                self._manifests.popitem(last=False)
        return manifest


def _page_token(after: str) -> str:
    return base64.urlsafe_b64encode(f"after:{after}".encode()).decode().rstrip("=")


def _parse_page_token(token: str) -> str:
    bad = InvalidArgument("page_token is not one this server gave", reason="BAD_PAGE_TOKEN")
    if len(token) > 80:
        raise bad
    try:
        body = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode("ascii")
    except (ValueError, UnicodeDecodeError):
        raise bad from None
    if not body.startswith("after:") or not is_tournament_id(body[6:]):
        raise bad
    return body[6:]
