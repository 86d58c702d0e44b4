"""Hand-offs on the server: a seat, or a tournament player's place, carried to another device
by a one-time code (OfferHandOff, ClaimHandOff), through any replica and any gateway.

Every hand-off of one holder is one aggregate (`bergen.domain.handoff`) in a stream of its
own, `handoff-<locator>`, loaded and written by the same repository and unit of work as a
match (`bergen.server.unit_of_work`): how many codes a holder has open is decided on that one
stream, and a claim is appended naming the version it was decided on, so of two claims of one
code, on any replicas, one spends it and the other is decided again and refused.

A code is 40 characters of base64url: the holder's locator (12 bytes, a hash of what the
holder is, naming its stream: it is no secret) and 18 random bytes (144 bits). The stream
keeps only a keyed hash of the whole code (HMAC-SHA256 under a key derived from the log key
for this purpose alone), never the code, and the parcel the caller gave, which the server
never opens.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import re
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bergen.domain.errors import (
    BergenError,
    ConcurrencyConflict,
    CorruptRecord,
    InvalidArgument,
    MatchNotInProgress,
    NotFound,
    PermissionDenied,
    RuleViolation,
    Unauthenticated,
)
from bergen.domain.handoff import (
    ENTRANT,
    SEAT,
    ClaimHandOff,
    HandOffClaimed,
    HandOffCommand,
    HandOffEvent,
    HandOffOffered,
    HandOffs,
    Holder,
    OfferHandOff,
    check_parcel,
    decide_hand_off,
    decode_hand_off_event,
    encode_hand_off_event,
    evolve_hand_off,
    spent_or_unknown,
)
from bergen.domain.state import ENDED
from bergen.domain.tournament_engine import ENDED as TOURNAMENT_ENDED

from .auth import KeyedSecrets, SealedToken
from .commands import Clock, wall_ms
from .identity import Caller, Identity
from .keys import HAND_OFF_CODE_PURPOSE, LogKeys
from .matches import MatchRepository
from .projections import HAND_OFF_STREAM_PREFIX
from .store import EventRow, EventStore, NewEvent, StoredEvent
from .tournaments import TournamentCommands
from .unit_of_work import Intent, Repository, UnitOfWork, Written

log = logging.getLogger("bergen.server.handoffs")

LOCATOR_BYTES = 12
SECRET_BYTES = 18
"""144 random bits a code."""
CODE_CHARS = 40
"""A code's length: (LOCATOR_BYTES + SECRET_BYTES) bytes in base64url, no padding."""
_CODE = re.compile(rf"[A-Za-z0-9_-]{{{CODE_CHARS}}}")
_LOCATOR_LABEL = b"bergen hand-off holder\0"
HAND_OFFS_KEPT = 10_000
"""Holders' hand-offs kept folded in a process."""
CREATE_RETRIES = 4


@dataclass(frozen=True, slots=True)
class HandOffStream:
    """A holder's hand-offs folded up to `version`."""

    state: HandOffs
    version: int


@dataclass(frozen=True, slots=True)
class Made:
    """What an offer answers: the code (said once, kept nowhere) and when it expires (the
    servers' clock, Unix ms)."""

    code: str
    expires_ms: int


@dataclass(frozen=True, slots=True)
class Claimed:
    """What a claim answers: the holder and the parcel given for it."""

    holder: Holder
    parcel: bytes


def locator(holder: Holder) -> bytes:
    """The holder's locator: the first bytes of a hash of what it is, the same on every
    replica and across key rotations."""
    what = f"{holder.kind}:{holder.of}:{holder.number}:{holder.player}".encode()
    return hashlib.sha256(_LOCATOR_LABEL + what).digest()[:LOCATOR_BYTES]


def new_code(holder: Holder) -> str:
    """A fresh code for `holder`: its locator, then SECRET_BYTES random bytes."""
    raw = locator(holder) + secrets.token_bytes(SECRET_BYTES)
    return base64.urlsafe_b64encode(raw).decode("ascii")


def locator_of(code: str) -> bytes:
    """The locator a code begins with. Raises InvalidArgument (INVALID_HAND_OFF_CODE) for a
    text that is no code's shape (never repeated in the message)."""
    if not isinstance(code, str) or not _CODE.fullmatch(code):
        raise InvalidArgument(
            f"a hand-off code is {CODE_CHARS} characters of A-Z a-z 0-9 _ -",
            reason="INVALID_HAND_OFF_CODE",
        )
    try:
        raw = base64.urlsafe_b64decode(code)
    except (binascii.Error, ValueError):
        raise InvalidArgument(
            "a hand-off code is base64url", reason="INVALID_HAND_OFF_CODE"
        ) from None
    return raw[:LOCATOR_BYTES]


def extend(
    known: HandOffStream | None, rows: Sequence[EventRow] | Sequence[StoredEvent]
) -> HandOffStream:
    """`known` with `rows` (the stream's rows after its version) folded on. Raises
    CorruptRecord for rows that do not follow on, do not decode, or mix holders; NotFound
    (spent or unknown) for no hand-off at all."""
    if not rows:
        if known is None:
            raise spent_or_unknown()
        return known
    state = known.state if known is not None else None
    version = known.version if known is not None else 0
    for row in rows:
        where = f"hand-off stream {row.stream_id} seq {row.seq}"
        if row.seq != version + 1:
            raise CorruptRecord(f"{where} does not follow seq {version}")
        event = decode_hand_off_event(row.type, row.schema_version, row.payload)
        if state is None and not isinstance(event, HandOffOffered):
            raise CorruptRecord(f"{where}: the first event is not an offer")
        if isinstance(event, HandOffOffered):
            if state is not None and event.holder != state.holder:
                raise CorruptRecord(f"{where}: an offer for another holder")
            if row.stream_id != HAND_OFF_STREAM_PREFIX + locator(event.holder).hex():
                raise CorruptRecord(f"{where}: an offer in another holder's stream")
        state = evolve_hand_off(state, event)
        version = row.seq
    assert state is not None
    return HandOffStream(state, version)


class HandOffKind:
    """What a holder's hand-offs are to the repository and the unit of work: a stream named
    by the locator (the aggregate's id, in hex), folded by `extend`, decided by
    `decide_hand_off`. No command id is used: an offer sent again makes another code, and a
    claim is not repeated."""

    noun = "handoff"

    def stream_id(self, aggregate_id: str) -> str:
        return HAND_OFF_STREAM_PREFIX + aggregate_id

    def missing(self, aggregate_id: str) -> BergenError:
        return spent_or_unknown()

    def fold(
        self, known: HandOffStream | None, rows: Sequence[EventRow] | Sequence[StoredEvent]
    ) -> HandOffStream:
        return extend(known, rows)

    def decide(
        self, known: HandOffStream | None, command: HandOffCommand
    ) -> tuple[tuple[HandOffEvent, ...], HandOffs]:
        events = decide_hand_off(known.state if known is not None else None, command)
        state = known.state if known is not None else None
        for e in events:
            state = evolve_hand_off(state, e)
        assert state is not None
        return events, state

    def encode(self, event: HandOffEvent) -> NewEvent:
        return NewEvent(*encode_hand_off_event(event))

    def saved(
        self,
        known: HandOffStream | None,
        appended: Sequence[StoredEvent],
        decided: tuple[tuple[HandOffEvent, ...], HandOffs],
    ) -> HandOffStream:
        return HandOffStream(decided[1], appended[-1].seq)

    def fingerprint(self, known: HandOffStream, command_id: str) -> str | None:
        return None

    def replayed(
        self, known: HandOffStream, command_id: str
    ) -> tuple[tuple[HandOffEvent, ...], int, HandOffs]:
        raise AssertionError("hand-offs are written without command ids")


HandOffWritten = Written[HandOffStream, HandOffCommand, HandOffEvent, HandOffs]


class HandOffRepository(Repository[HandOffStream, HandOffCommand, HandOffEvent, HandOffs]):
    """Reads holders' hand-offs through a bounded per-process cache; the store is the truth
    (each load reads the rows after the cached version)."""

    def __init__(self, store: EventStore, cache_size: int = HAND_OFFS_KEPT) -> None:
        super().__init__(store, HandOffKind(), cache_size)


class HandOffCommands:
    """Offering and claiming hand-offs, each a few lines on the one unit of work."""

    def __init__(
        self,
        store: EventStore,
        matches: MatchRepository,
        tournaments: TournamentCommands,
        identity: Identity,
        log_keys: LogKeys | None,
        clock: Clock = wall_ms,
    ) -> None:
        """Codes are hashed under keys derived from `log_keys` (plain SHA-256 without)."""
        self.repository = HandOffRepository(store)
        self._work: UnitOfWork[HandOffStream, HandOffCommand, HandOffEvent, HandOffs] = UnitOfWork(
            store, self.repository, None
        )
        self._matches = matches
        self._tournaments = tournaments
        self._identity = identity
        self._codes = KeyedSecrets(log_keys, HAND_OFF_CODE_PURPOSE)
        self._clock = clock

    def offer_seat(self, caller: Caller, match_id: str, parcel: bytes) -> Made:
        """A code for the caller's seat of `match_id` (its token). Raises InvalidArgument
        (INVALID_PARCEL), NotFound, Unauthenticated, PermissionDenied (a token that holds no
        seat of the match), MatchNotInProgress (MATCH_ENDED), ResourceExhausted
        (TOO_MANY_HAND_OFFS, HAND_OFF_LIMIT)."""
        check_parcel(parcel)
        match = self._matches.load(match_id)
        seat = self._identity.require_seat(match, caller)
        if match.state.phase == ENDED:
            raise MatchNotInProgress(
                f"match {match_id} has ended: its seat is carried to no other device",
                reason="MATCH_ENDED",
                match_id=match_id,
            )
        made = self._offer(Holder(SEAT, match_id, seat), parcel, f"seat:{seat}")
        log.info("match %s: seat %d offered to another device", match_id, seat)
        return made

    def offer_entrant(self, caller: Caller, tournament_id: str, parcel: bytes) -> Made:
        """A code for the caller's place in `tournament_id` (a player's token). Raises
        InvalidArgument (INVALID_PARCEL), NotFound, Unauthenticated (TOKEN_REQUIRED),
        PermissionDenied (NOT_A_PLAYER_OF_THIS_TOURNAMENT), RuleViolation (TOURNAMENT_ENDED,
        TOURNAMENT_CANCELLED), ResourceExhausted (TOO_MANY_HAND_OFFS, HAND_OFF_LIMIT)."""
        check_parcel(parcel)
        t = self._tournaments.repository.load(tournament_id)
        if caller.token is None:
            raise Unauthenticated(
                "handing off a place in a tournament needs the player's token",
                reason="TOKEN_REQUIRED",
            )
        mine = self._tournaments.entrant_of(t, caller)
        if mine is None:
            raise PermissionDenied(
                f"the token is no player's of tournament {tournament_id}",
                reason="NOT_A_PLAYER_OF_THIS_TOURNAMENT",
                tournament_id=tournament_id,
            )
        if t.state.phase == TOURNAMENT_ENDED:
            cancelled = t.state.cancelled
            raise RuleViolation(
                f"tournament {tournament_id} "
                + ("was cancelled" if cancelled else "has ended")
                + ": its places are carried to no other device",
                reason="TOURNAMENT_CANCELLED" if cancelled else "TOURNAMENT_ENDED",
                tournament_id=tournament_id,
            )
        entrant, player = mine
        made = self._offer(
            Holder(ENTRANT, tournament_id, entrant, player), parcel, f"entrant:{entrant}"
        )
        log.info("tournament %s: entrant %d offered to another device", tournament_id, entrant)
        return made

    def _offer(self, holder: Holder, parcel: bytes, actor: str) -> Made:
        code = new_code(holder)
        sealed = self._codes.seal(code)
        aggregate_id = locator(holder).hex()

        def authorise(_: HandOffStream | None) -> Intent[HandOffCommand]:
            command = OfferHandOff(
                holder, sealed.digest, sealed.key_id or "", parcel, self._clock()
            )
            return Intent(command, actor, "offer")

        written = self._run_creating(aggregate_id, authorise)
        (event,) = written.events
        assert isinstance(event, HandOffOffered)
        return Made(code, event.expires_ms)

    def _run_creating(
        self,
        aggregate_id: str,
        authorise: Callable[[HandOffStream | None], Intent[HandOffCommand]],
    ) -> HandOffWritten:
        """Run on the holder's stream, making it with the first offer. Raises what the unit of
        work raises."""
        for _ in range(CREATE_RETRIES):
            try:
                return self._work.run(aggregate_id, authorise)
            except NotFound:
                pass  # no offer yet: this one makes the stream
            try:
                return self._work.run(aggregate_id, authorise, new=True)
            except ConcurrencyConflict:
                continue  # another offer made it first: decided again on it
        raise ConcurrencyConflict("these hand-offs are too busy: try again", reason="CONTENDED")

    def claim(self, code: str) -> Claimed:
        """Spend `code`: the holder and the parcel given for it. Raises InvalidArgument
        (INVALID_HAND_OFF_CODE: not a code's shape), NotFound (HAND_OFF_SPENT_OR_UNKNOWN: a
        code used, expired or never given, alike), ConcurrencyConflict (CONTENDED)."""
        aggregate_id = locator_of(code).hex()
        match = self._codes.matcher(code)

        def authorise(known: HandOffStream | None) -> Intent[HandOffCommand]:
            assert known is not None
            offers = known.state.offers
            sealed = (o.digest for o in offers if match(SealedToken(o.digest, o.key_id or None)))
            return Intent(ClaimHandOff(next(sealed, None), self._clock()), "anonymous", "claim")

        written = self._work.run(aggregate_id, authorise)
        (event,) = written.events
        assert isinstance(event, HandOffClaimed)
        offer = written.aggregate.state.find(event.digest)
        assert offer is not None
        holder = written.aggregate.state.holder
        log.info("%s %s #%d: handed off to another device", holder.kind, holder.of, holder.number)
        return Claimed(holder, offer.parcel)
