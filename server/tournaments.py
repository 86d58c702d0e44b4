"""Tournaments on the server: their streams, their seeds, their commands and their queries.

A tournament is a stream of its own in the events table, `tournament-<uuid>`: no match id
(a bare UUID) starts so, so the match listing, the clock keeper and the janitor pass over it
(`is_tournament_stream`). Its events are the tournament aggregate's (bergen.domain
.tournament_events, schema version 1, read with their own decoder), each applied by
`evolve_tournament`; every row is authenticated by the store like any other.

The tournament seed is in no event before the end. Every replica recomputes it: it is
HMAC-SHA256 of the tournament id under a key derived from a log key for that purpose alone
(`SEED_PURPOSE`), and the creation records the id of that log key (`SEED_KEY`).

Each player's token is sealed at registration like a seat token (the sealed form is kept
with the `EntrantRegistered` row); the process manager (`tournament_manager`) seats the
player with that sealed token in each of the entrant's matches, so the token is the player's
seat token everywhere in the tournament. Nobody joins a tournament's match (`refuse_join`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import re
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bergen.api.audit_pack import MANIFEST_FILE, pack_contents, played_matches
from bergen.api.signing import RecordSigner
from bergen.domain.commands import CreateMatch, TakeSeat
from bergen.domain.engine import execute
from bergen.domain.errors import (
    BergenError,
    ConcurrencyConflict,
    CorruptRecord,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    RuleViolation,
    Unauthenticated,
)
from bergen.domain.rules import RULES_VERSION, Rules, make_rules
from bergen.domain.tournament_engine import (
    ENDED,
    MAX_NAME_CHARS,
    REGISTRATION,
    RUNNING,
    Cancel,
    CreateTournament,
    End,
    PairRound,
    RecordResult,
    Register,
    Start,
    TournamentCommand,
    TournamentState,
    Withdraw,
    check_settle,
    check_settle_match,
    decide_tournament,
    evolve_tournament,
    settlement_of,
)
from bergen.domain.tournament_events import (
    ORGANISER_ACTOR,
    EntrantRegistered,
    TournamentCreated,
    TournamentEvent,
    decode_tournament_event,
    encode_tournament_event,
)
from bergen.domain.tournament_pairing import Settings, seats_of
from bergen.domain.tournament_record import ABANDON, ENTRANT, ORGANISER, SERVER
from bergen.domain.tournament_standings import ScoredResult

from . import auth
from .auth import JOIN_PREFIX, SealedToken
from .commands import SEATING_TIMEOUT_COMMAND, Clock, MatchCommands, check_client_token, wall_ms
from .feed import EventFeed, Subscription
from .identity import Caller, Identity
from .keys import LogKeys
from .matches import COMMAND_KEY, TOKEN_KEY_ID, Match, MatchRepository
from .projections import TOURNAMENT_STREAM_PREFIX
from .store import EventStore, NewEvent, StoredEvent, lagging

log = logging.getLogger("bergen.server.tournaments")

STREAM_PREFIX = TOURNAMENT_STREAM_PREFIX
SEED_PURPOSE = b"bergen tournament seed v1"
"""What the keys that derive tournament seeds are derived for (`bergen.server.keys`)."""
SEED_KEY = "tournament_seed_key"
"""The creation's metadata: the id of the log key the tournament seed is derived under."""
BY_HAND_KEY = "rounds_by_hand"
"""The creation's metadata: "1" when the organiser starts rounds after the first by hand."""
AT_KEY = "at_ms"
"""Every tournament row's metadata: the servers' clock (Unix ms) when it was written."""
TABLE_KEYS = ("tournament_id", "tournament_round", "tournament_table")
"""A tournament match's MatchCreated metadata: its tournament, round and table."""
PLAYER_TOKEN = "player_{}_token_hmac"
LEGACY_PLAYER_TOKEN = "player_{}_token_sha256"
RETRIES = 8
MANIFESTS_KEPT = 64
"""Ended tournaments whose audit pack manifest is kept built."""
REGISTER_PREFIX = "register-"
"""A registration's command id when the client made the tokens: keyed like a join's."""
TABLES_KEPT = 100_000
MAX_MATCH_NAME = 100
PAGE = 50
MAX_PAGE = 200

_TOURNAMENT_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def tournament_stream(tournament_id: str) -> str:
    """The stream id of a tournament."""
    return STREAM_PREFIX + tournament_id


def is_tournament_stream(stream_id: str) -> bool:
    """Whether a stream is a tournament's (a match's id never starts with the prefix)."""
    return stream_id.startswith(STREAM_PREFIX)


def table_metadata(tournament_id: str, round_number: int, table: int) -> dict[str, str]:
    """What a tournament match's creation records of its table."""
    return dict(zip(TABLE_KEYS, (tournament_id, str(round_number), str(table)), strict=True))


def tournament_table(extra: Mapping[str, str]) -> dict[str, object] | None:
    """The match record's `tournament` field (RECORD.md) from its creation's metadata; None
    for a match of no tournament."""
    tid, r, t = (extra.get(k) for k in TABLE_KEYS)
    if tid is None or r is None or t is None or not r.isdigit() or not t.isdigit():
        return None
    return {"tournament_id": tid, "round": int(r), "table": int(t)}


def check_tournament_id(value: str) -> str:
    """Raises InvalidArgument for anything but an id CreateTournament returns."""
    if not value:
        raise InvalidArgument("tournament_id is required", reason="TOURNAMENT_ID_REQUIRED")
    if not _TOURNAMENT_ID.fullmatch(value):
        raise InvalidArgument(
            "tournament_id must be an id as CreateTournament returns it",
            reason="INVALID_TOURNAMENT_ID",
        )
    return value


def table_match_name(name: str, round_number: int, table: int) -> str:
    """The name of a tournament match: the tournament's, its round and its table."""
    where = f"round {round_number} table {table}"
    return f"{name[: MAX_MATCH_NAME - len(where) - 2]}: {where}" if name else where


_PROBE = make_rules(2, False, "standard")


def check_match_text(name: str, players: tuple[str, ...] = (), client_seed: str = "") -> None:
    """Raises InvalidArgument (TEXT_TOO_LONG, TEXT_BLANK, CONTROL_CHARACTER,
    INVISIBLE_CHARACTER...) for a tournament name, a player's name or a client seed that the
    tournament's matches would refuse, so that none is accepted that could never be seated."""
    probe = "00000000-0000-4000-8000-000000000000"
    state = execute(None, CreateMatch(probe, 2, False, _PROBE, bytes(32), name))[1]
    for player in players:
        execute(state, TakeSeat(player, client_seed, 0))


def table_rules(settings: Settings, seats: int) -> Rules:
    """The rules of a table of `seats` seats: the tournament's preset and options, with the
    targets of RULES.md section 7 for that many seats. Raises InvalidOptions."""
    options = {k: v for k, v in settings.rules.items() if k != "preset"}
    preset = settings.rules.get("preset")
    return make_rules(
        seats, settings.partnerships, None if preset is None else str(preset), options
    )


class TournamentSeeds:
    """Derives each tournament's seed from the log keys, so every replica holding them
    computes the same seed and none is stored before the end. Without log keys (a store
    that authenticates nothing, in tests) a key of this process alone is used."""

    def __init__(self, log_keys: LogKeys | None) -> None:
        self._keys = (log_keys or LogKeys.generate("local")).derive(SEED_PURPOSE)

    @property
    def writing(self) -> str:
        return self._keys.writing

    def seed(self, tournament_id: str, key_id: str) -> bytes:
        """The tournament's seed under log key `key_id`. Raises RuleViolation when this
        server does not hold that key."""
        key = self._keys.key(key_id)
        if key is None:
            raise RuleViolation(
                f"tournament {tournament_id}: its seed is derived under log key {key_id!r}, "
                "which this server does not hold",
                reason="SEED_KEY_UNKNOWN",
                tournament_id=tournament_id,
            )
        return hmac.new(key, tournament_id.encode(), hashlib.sha256).digest()


@dataclass(frozen=True, slots=True)
class Tournament:
    """A tournament folded up to `version`, with what the server keeps beside its state."""

    state: TournamentState
    version: int
    commands: Mapping[str, str]
    """Command id -> what the command was (its fingerprint)."""
    tokens: Mapping[int, tuple[SealedToken, ...]]
    """Each entrant's players' tokens, sealed."""
    seed_key: str
    by_hand: bool
    changed_ms: int
    """The servers' clock when its latest row was written (Unix ms)."""


def _sealed_players(extra: Mapping[str, str], players: int) -> tuple[SealedToken, ...]:
    out = []
    for i in range(players):
        digest = extra.get(PLAYER_TOKEN.format(i))
        if digest is not None and TOKEN_KEY_ID in extra:
            out.append(SealedToken(digest, extra[TOKEN_KEY_ID]))
            continue
        legacy = extra.get(LEGACY_PLAYER_TOKEN.format(i))
        if legacy is None:
            raise CorruptRecord(f"player {i}'s token is not recorded")
        out.append(SealedToken(legacy))
    return tuple(out)


def extend(t: Tournament | None, rows: tuple[Any, ...]) -> Tournament:
    """`t` with `rows` (the stream's rows after its version) folded in. Raises CorruptRecord
    for rows that do not follow on or do not decode, NotFound for no tournament at all."""
    if not rows:
        if t is None:
            raise NotFound("no such tournament", reason="TOURNAMENT_NOT_FOUND")
        return t
    state = t.state if t is not None else None
    version = t.version if t is not None else 0
    commands = dict(t.commands) if t is not None else {}
    tokens = dict(t.tokens) if t is not None else {}
    seed_key = t.seed_key if t is not None else ""
    by_hand = t.by_hand if t is not None else False
    changed = t.changed_ms if t is not None else 0
    for row in rows:
        where = f"tournament stream {row.stream_id} seq {row.seq}"
        if row.seq != version + 1:
            raise CorruptRecord(f"{where} does not follow seq {version}")
        try:
            meta = row.metadata
            event = decode_tournament_event(
                row.type, row.schema_version, row.payload, meta.actor or ""
            )
            if (state is None) != isinstance(event, TournamentCreated):
                raise CorruptRecord("only the first event creates the tournament")
            if isinstance(event, TournamentCreated):
                seed_key = meta.extra.get(SEED_KEY, "")
                by_hand = meta.extra.get(BY_HAND_KEY) == "1"
            if isinstance(event, EntrantRegistered):
                tokens[event.entrant] = _sealed_players(meta.extra, len(event.players))
            state = evolve_tournament(state, event)
        except (CorruptRecord, TypeError, IndexError, AssertionError) as err:
            message = err.message if isinstance(err, CorruptRecord) else str(err)
            raise CorruptRecord(f"{where}: {message}"[:300]) from err
        if meta.command_id:
            commands.setdefault(meta.command_id, meta.extra.get(COMMAND_KEY, ""))
        at = meta.extra.get(AT_KEY, "")
        if at.isdigit() and len(at) <= 16:
            changed = int(at)
        version = row.seq
    assert state is not None
    return Tournament(state, version, commands, tokens, seed_key, by_hand, changed)


class TournamentRepository:
    """Reads tournaments through a per-process cache of folded state; the store is the
    truth (each load reads the rows after the cached version, checked as authentic)."""

    def __init__(self, store: EventStore) -> None:
        self._store = store
        self._cache: dict[str, Tournament] = {}
        self._tables: OrderedDict[str, dict[str, object] | None] = OrderedDict()
        """What `table_of` found of each match (a match's creation never changes)."""
        self._lock = threading.Lock()
        self.hits = 0
        """Loads that found the tournament folded here, counted under the lock; `misses`
        those that did not."""
        self.misses = 0

    def load(self, tournament_id: str) -> Tournament:
        """Raises NotFound, CorruptRecord, LogTampered, StorageUnavailable."""
        with self._lock:
            cached = self._cache.get(tournament_id)
            if cached is None:
                self.misses += 1
            else:
                self.hits += 1
        rows = self._store.read_rows(
            tournament_stream(tournament_id), cached.version + 1 if cached else 1
        )
        if not rows and cached is None:
            raise NotFound(
                f"no tournament {tournament_id}",
                reason="TOURNAMENT_NOT_FOUND",
                tournament_id=tournament_id,
            )
        t = extend(cached, rows)
        self.remember(tournament_id, t)
        return t

    def remember(self, tournament_id: str, t: Tournament) -> None:
        with self._lock:
            known = self._cache.get(tournament_id)
            if known is None or known.version < t.version:
                self._cache[tournament_id] = t

    def table_of(self, match_id: str) -> dict[str, object] | None:
        """The tournament, round and table of a match (its creation records them), None for
        a match of no tournament or no match. Raises StorageUnavailable."""
        with self._lock:
            if match_id in self._tables:
                return self._tables[match_id]
        first = self._store.read_stream(match_id, 1, limit=1)
        if not first:
            return None
        table = tournament_table(first[0].metadata.extra)
        with self._lock:
            self._tables[match_id] = table
            while len(self._tables) > TABLES_KEPT:
                self._tables.popitem(last=False)
        return table

    def ids(self, after: str = "", limit: int = 100) -> list[str]:
        """Up to `limit` tournament ids in id order, after the id `after`."""
        found: list[str] = []
        cursor = tournament_stream(after) if after else STREAM_PREFIX
        while len(found) < limit:
            streams = self._store.list_streams(cursor, limit)
            for s in streams:
                if not is_tournament_stream(s.stream_id):
                    return found
                found.append(s.stream_id[len(STREAM_PREFIX) :])
                if len(found) == limit:
                    return found
            if len(streams) < limit:
                return found
            cursor = streams[-1].stream_id
        return found


@dataclass(frozen=True, slots=True)
class TournamentIntent:
    command: TournamentCommand
    actor: str
    fingerprint: str
    extra: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TournamentWritten:
    events: tuple[TournamentEvent, ...]
    tournament: Tournament
    replayed: bool = False


class TournamentWork:
    """The tournament's unit of work: load, authorise, decide, append with the expected
    version; again on a lost race; a command id already applied answered from the log."""

    def __init__(
        self,
        store: EventStore,
        repository: TournamentRepository,
        feed: EventFeed | None,
        clock: Clock = wall_ms,
    ) -> None:
        self._store = store
        self._repo = repository
        self._feed = feed
        self._clock = clock

    def run(
        self,
        tournament_id: str,
        authorise: Callable[[Tournament | None], TournamentIntent],
        *,
        new: bool = False,
        command_id: str | None = None,
    ) -> TournamentWritten:
        """Raises what `authorise` and the rules raise, InvalidArgument (a command id used
        for another command), ConcurrencyConflict (every retry lost a race)."""
        stream = tournament_stream(tournament_id)
        for _ in range(RETRIES):
            t = None if new else self._repo.load(tournament_id)
            intent = authorise(t)
            if t is not None and command_id is not None and command_id in t.commands:
                return self._replayed(t, command_id, intent)
            events = decide_tournament(t.state if t else None, intent.command)
            try:
                result = self._store.append(
                    stream,
                    t.version if t else 0,
                    [NewEvent(*encode_tournament_event(e)) for e in events],
                    command_id=command_id,
                    actor=intent.actor,
                    rules_version=RULES_VERSION,
                    extra={
                        **intent.extra,
                        COMMAND_KEY: intent.fingerprint,
                        AT_KEY: str(self._clock()),
                    },
                )
            except ConcurrencyConflict:
                if new:
                    raise
                continue
            if self._feed is not None:
                self._feed.observe(result.events)
            after = self._repo.load(tournament_id)
            if result.replayed:
                assert command_id is not None
                return self._replayed(after, command_id, intent)
            return TournamentWritten(events, after)
        raise ConcurrencyConflict(
            f"tournament {tournament_id}: too busy, try again",
            reason="CONTENDED",
            tournament_id=tournament_id,
        )

    @staticmethod
    def _replayed(t: Tournament, command_id: str, intent: TournamentIntent) -> TournamentWritten:
        if t.commands[command_id] != intent.fingerprint:
            raise InvalidArgument(
                f"command id already used in tournament {t.state.tournament_id} for another "
                "command",
                reason="COMMAND_ID_REUSED",
            )
        return TournamentWritten((), t, replayed=True)


def pair_command_id(round_number: int) -> str:
    return f"pair-round-{round_number}"


def result_command_id(round_number: int, table: int) -> str:
    return f"result-round-{round_number}-table-{table}"


END_COMMAND_ID = "end"


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


RECORDS_CACHED = 256
"""Tournaments whose latest record `get` keeps built."""

TABLE_MOVES = frozenset({"SeatTaken", "HandEnded", "MatchEnded"})
"""The events of a table's match that change what a tournament's watcher is shown."""


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


class TournamentCommands:
    """Every command on a tournament and every query of one, for callers of the API."""

    def __init__(
        self,
        work: TournamentWork,
        repository: TournamentRepository,
        matches: MatchRepository,
        identity: Identity,
        seeds: TournamentSeeds,
        signer: RecordSigner | None = None,
        feed: EventFeed | None = None,
        wakes: TableWakes | None = None,
        match_commands: MatchCommands | None = None,
    ) -> None:
        self._feed = feed
        self._wakes = wakes
        self._match_commands = match_commands
        """How a table's match is ended when the organiser settles it (`settle`)."""
        self._work = work
        self._repo = repository
        self._matches = matches
        self._identity = identity
        self._seeds = seeds
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

    def refuse_join(self, match_id: str) -> None:
        """Raises PermissionDenied (TOURNAMENT_MATCH) for a match of a tournament: the server
        seats its players, each with the token of its registration, and nobody else."""
        table = self._repo.table_of(match_id)
        if table is not None:
            raise PermissionDenied(
                f"match {match_id} is a table of tournament {table['tournament_id']}: the "
                "server seats its entrants",
                reason="TOURNAMENT_MATCH",
                match_id=match_id,
                tournament_id=str(table["tournament_id"]),
            )

    def seed_of(self, t: Tournament) -> bytes:
        return self._seeds.seed(t.state.tournament_id, t.seed_key)

    # commands -----------------------------------------------------------------------------

    def create(
        self, caller: Caller, settings: Settings, name: str, by_hand: bool = False
    ) -> Tournament:
        """Create a tournament (organiser token). Raises Unauthenticated, PermissionDenied,
        InvalidArgument (INVALID_SETTINGS), InvalidOptions."""
        self._identity.require_organiser(caller, "creating a tournament")
        settings.check()
        if not isinstance(name, str) or len(name) > MAX_NAME_CHARS:
            raise InvalidArgument(
                f"a tournament's name is at most {MAX_NAME_CHARS} characters",
                reason="TEXT_TOO_LONG",
                field="name",
            )
        check_match_text(table_match_name(name, 1, 1))
        sides = range(2, settings.seats + 1) if not settings.two_sided else (settings.seats,)
        for seats in sides:
            table_rules(settings, seats)
        tournament_id = str(uuid.uuid4())
        key_id = self._seeds.writing
        command = CreateTournament(
            tournament_id, settings, self._seeds.seed(tournament_id, key_id), name
        )
        extra = {SEED_KEY: key_id, BY_HAND_KEY: "1" if by_hand else "0"}
        written = self._work.run(
            tournament_id,
            lambda _: TournamentIntent(command, "organiser", "create", extra),
            new=True,
        )
        log.info("tournament %s created: %s", tournament_id, settings.format)
        return written.tournament

    def register(
        self,
        tournament_id: str,
        players: tuple[str, ...],
        client_seed: str,
        tokens: tuple[str, ...] = (),
    ) -> tuple[int, tuple[str, ...]]:
        """Register an entrant, each player holding its token of `tokens` (made here when
        none is given). Returns its number and the players' tokens. A registration sent again
        with the tokens it was made with is answered with its entrant and writes nothing.
        Raises NotFound, RuleViolation (REGISTRATION_CLOSED, REGISTRATION_FULL, NAME_TAKEN),
        InvalidArgument (WRONG_PLAYER_COUNT, BAD_SEAT_TOKEN, WEAK_SEAT_TOKEN, ...)."""
        check_match_text("", players, client_seed)
        command_id = None
        if tokens:
            if len(tokens) != len(players):
                raise InvalidArgument(
                    f"give a token for each player ({len(players)}), not {len(tokens)}",
                    reason="WRONG_TOKEN_COUNT",
                    tournament_id=tournament_id,
                )
            for token in tokens:
                check_client_token(token)
            if len(set(tokens)) < len(tokens):
                raise InvalidArgument(
                    "each player needs a token of its own", reason="BAD_SEAT_TOKEN"
                )
            command_id = REGISTER_PREFIX + self._identity.seat_tokens.join_command_ids(tokens[0])[
                0
            ].removeprefix(JOIN_PREFIX)
        else:
            tokens = tuple(auth.new_seat_token() for _ in players)
        extra: dict[str, str] = {}
        for i, token in enumerate(tokens):
            sealed = self._identity.seat_tokens.seal(token)
            if sealed.key_id is None:
                extra[LEGACY_PLAYER_TOKEN.format(i)] = sealed.digest
            else:
                extra[PLAYER_TOKEN.format(i)] = sealed.digest
                extra[TOKEN_KEY_ID] = sealed.key_id
        command = Register(tuple(players), client_seed)
        fingerprint = f"register {list(players)!r} {client_seed!r}"[:200]
        written = self._work.run(
            tournament_id,
            lambda _: TournamentIntent(command, "anonymous", fingerprint, extra),
            command_id=command_id,
        )
        if written.replayed:
            mine = self.entrant_of(written.tournament, Caller(tokens[0]))
            assert mine is not None
            log.info("tournament %s: entrant %d registered again", tournament_id, mine[0])
            return mine[0], tokens
        (event,) = written.events
        assert isinstance(event, EntrantRegistered)
        log.info("tournament %s: entrant %d registered", tournament_id, event.entrant)
        return event.entrant, tokens

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

    def withdraw(self, caller: Caller, tournament_id: str, entrant: int, note: str = "") -> int:
        """Withdraw an entrant (its player's token, or the organiser's: the record says
        which, and `note` why). Returns the last round it was paired in. Raises
        Unauthenticated, PermissionDenied, NotFound, RuleViolation (ALREADY_WITHDRAWN,
        TOURNAMENT_ENDED), InvalidArgument (a note too long or unreadable)."""

        def authorise(t: Tournament | None) -> TournamentIntent:
            assert t is not None
            if caller.token is None:
                raise Unauthenticated(
                    "withdrawing needs the entrant's token or the organiser's",
                    reason="TOKEN_REQUIRED",
                )
            actor, by = ORGANISER_ACTOR, ORGANISER
            if not self._identity.is_organiser(caller):
                mine = self.entrant_of(t, caller)
                if mine is None or mine[0] != entrant:
                    raise PermissionDenied(
                        f"tournament {tournament_id}: this token is not entrant {entrant}'s",
                        reason="NOT_THIS_ENTRANT",
                        tournament_id=tournament_id,
                        entrant=entrant,
                    )
                actor, by = f"entrant:{entrant}", ENTRANT
            return TournamentIntent(Withdraw(entrant, by, note), actor, f"withdraw {entrant}")

        written = self._work.run(tournament_id, authorise)
        log.info("tournament %s: entrant %d withdrawn", tournament_id, entrant)
        return written.tournament.state.entrants[entrant - 1].withdrawn_after_round or 0

    def start(self, caller: Caller, tournament_id: str) -> Tournament:
        """Close registration and fix the seeding (organiser). Raises Unauthenticated,
        PermissionDenied, NotFound, RuleViolation (ALREADY_STARTED, TOO_FEW_ENTRANTS)."""
        self._identity.require_organiser(caller, "starting a tournament")

        def authorise(t: Tournament | None) -> TournamentIntent:
            assert t is not None
            return TournamentIntent(Start(self.seed_of(t)), "organiser", "start")

        written = self._work.run(tournament_id, authorise)
        log.info("tournament %s started", tournament_id)
        return written.tournament

    def start_next_round(self, caller: Caller, tournament_id: str) -> int:
        """Pair the next round now (organiser), without waiting for the round delay. Returns
        the round paired. Raises Unauthenticated, PermissionDenied, NotFound, RuleViolation
        (ROUND_NOT_FINISHED, NO_ROUND_LEFT, TOURNAMENT_NOT_STARTED, TOURNAMENT_ENDED)."""
        self._identity.require_organiser(caller, "starting a round")
        t = self._repo.load(tournament_id)
        number = t.state.round + 1
        written = self.pair(tournament_id, number, ORGANISER_ACTOR)
        return written.tournament.state.round if not written.replayed else number

    def settle(
        self,
        caller: Caller,
        tournament_id: str,
        round_number: int,
        table: int,
        action: str,
        forfeited_side: int | None,
        note: str,
    ) -> ScoredResult:
        """Settle a table whose match cannot end by play (organiser): abandon its match, or
        forfeit `forfeited_side` of it (from 0), a side none of whose seats has made a play of
        its own. The match ends first; its result is then recorded as any other, with the
        intervention (the process manager records the same from the match alone, under the
        same command id, so a crash in between loses nothing and a replica doubles nothing).
        Returns the table's result. Raises Unauthenticated, PermissionDenied, NotFound
        (NO_SUCH_TABLE), RuleViolation (TABLE_NOT_PLAYED, RESULT_ALREADY_RECORDED,
        TABLE_NOT_READY, MATCH_ENDED, MATCH_STILL_SEATING, SIDE_HAS_PLAYED, TOURNAMENT_ENDED,
        ...), InvalidArgument (NO_SUCH_SIDE, a note too long or unreadable)."""
        self._identity.require_organiser(caller, "settling a table")
        assert self._match_commands is not None
        t = self._repo.load(tournament_id)
        found = check_settle(t.state, round_number, table, action, forfeited_side, note)
        assert found.match_id is not None
        match_id = found.match_id
        try:
            match = self._matches.load(match_id)
        except NotFound:
            raise RuleViolation(
                f"tournament {tournament_id}: the match of round {round_number} table {table} "
                "is being created: try again in a moment",
                reason="TABLE_NOT_READY",
                tournament_id=tournament_id,
            ) from None

        def check(m: Match) -> None:
            check_settle_match(m.state, m.events, action, forfeited_side)

        check(match)
        if action == ABANDON:
            self._match_commands.abandon(caller, match_id, note)
        else:
            assert forfeited_side is not None
            self._match_commands.forfeit_side(caller, match_id, forfeited_side, note, check)
        written = self.record_match_result(
            tournament_id, round_number, table, self._matches.load(match_id)
        )
        result = written.tournament.state.rounds[round_number - 1].tables[table - 1].result
        assert result is not None
        log.info(
            "tournament %s: round %d table %d settled by the organiser (%s)",
            tournament_id,
            round_number,
            table,
            action,
        )
        return result

    def cancel(self, caller: Caller, tournament_id: str, note: str) -> Tournament:
        """End a tournament still open for registration (organiser): no round is played, its
        seed is revealed, its watchers see it end. Raises Unauthenticated, PermissionDenied,
        NotFound, RuleViolation (ALREADY_STARTED, TOURNAMENT_ENDED, TOURNAMENT_CANCELLED),
        InvalidArgument (a note too long or unreadable)."""
        self._identity.require_organiser(caller, "cancelling a tournament")

        def authorise(t: Tournament | None) -> TournamentIntent:
            assert t is not None
            return TournamentIntent(Cancel(self.seed_of(t), note), ORGANISER_ACTOR, "cancel")

        written = self._work.run(tournament_id, authorise)
        log.info("tournament %s cancelled", tournament_id)
        return written.tournament

    # the process manager's steps ------------------------------------------------------------

    def pair(self, tournament_id: str, number: int, actor: str = SERVER) -> TournamentWritten:
        """Pair round `number` (once: its command id is the round's), by the server or by
        the organiser (`ORGANISER_ACTOR`: a round started by hand)."""
        by = ORGANISER if actor == ORGANISER_ACTOR else SERVER
        return self._work.run(
            tournament_id,
            lambda _: TournamentIntent(PairRound(by), actor, f"pair round {number}"),
            command_id=pair_command_id(number),
        )

    def record_match_result(
        self, tournament_id: str, round_number: int, table: int, match: Match
    ) -> TournamentWritten:
        """Record the result of a table's ended `match`, and who settled it when play did not
        end it (`settlement_of`: an abandon, whose by the server when it abandoned a match
        never seated; the organiser's forfeit)."""
        r = match.state.result
        assert r is not None
        settled = settlement_of(r, by_server=SEATING_TIMEOUT_COMMAND in match.commands)
        by, note = settled if settled is not None else (None, "")
        return self.record_result(
            tournament_id,
            round_number,
            table,
            r.reason.value,
            tuple(r.scores),
            r.forfeited_side,
            by,
            note,
        )

    def record_result(
        self,
        tournament_id: str,
        round_number: int,
        table: int,
        reason: str,
        scores: tuple[int, ...],
        forfeited_side: int | None,
        settled_by: str | None = None,
        note: str = "",
    ) -> TournamentWritten:
        command = RecordResult(
            round_number, table, reason, scores, forfeited_side, settled_by, note
        )
        return self._work.run(
            tournament_id,
            lambda _: TournamentIntent(command, "server", f"result {round_number}/{table}"),
            command_id=result_command_id(round_number, table),
        )

    def end(self, tournament_id: str) -> TournamentWritten:
        def authorise(t: Tournament | None) -> TournamentIntent:
            assert t is not None
            return TournamentIntent(End(self.seed_of(t)), "server", "end")

        return self._work.run(tournament_id, authorise, command_id=END_COMMAND_ID)

    # queries ------------------------------------------------------------------------------

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
        self, caller: Caller, tournament_id: str, active: Callable[[], bool]
    ) -> Iterator[TournamentView]:
        """The tournament as `get` shows it, then again each time that changes: an entrant
        registered or withdrew, a round paired, a table's match seated, a hand or a match
        ended, a result recorded; until the tournament ends or `active()` turns false.
        Raises as `get`."""
        assert self._feed is not None and self._wakes is not None
        stream = tournament_stream(tournament_id)
        sub = self._feed.subscribe(stream)
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
                if not sub.wait(active):
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
            except NotFound:
                return False
        return match.state.players[seat] is not None

    @lagging
    def list(self, phase: str | None, size: int, token: str) -> tuple[list[Tournament], str]:
        """A page of tournaments in id order (`phase` None: any). Returns the page and the
        next page's token ("" after the last). Raises InvalidArgument (BAD_PAGE_TOKEN)."""
        if phase not in (None, REGISTRATION, RUNNING, ENDED):
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

    @lagging
    def record(self, tournament_id: str) -> dict[str, Any]:
        """The section 6 record, signed when the server signs: the seed and every figure
        once ended, the record so far before. Raises NotFound."""
        t = self._repo.load(tournament_id)
        record = t.state.record()
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
    if not body.startswith("after:") or not _TOURNAMENT_ID.fullmatch(body[6:]):
        raise bad
    return body[6:]


__all__ = [
    "STREAM_PREFIX",
    "Assignment",
    "TableWakes",
    "Tournament",
    "TournamentCommands",
    "TournamentRepository",
    "TournamentSeeds",
    "TournamentView",
    "TournamentWork",
    "check_match_text",
    "check_tournament_id",
    "is_tournament_stream",
    "table_match_name",
    "table_metadata",
    "table_rules",
    "tournament_stream",
    "tournament_table",
]
