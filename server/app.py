"""The application service: existence, identity and permissions, then the rules.

Servicers translate messages to calls here; `decide` checks the rules; the store keeps
the facts. A play is decided on this process's cached copy of its match and appended at
that copy's version; if another replica wrote since, the store refuses the append and the
play is decided again on the latest state. Nothing is refused (a rule, a version, a seat)
without a fresh read. A command id already applied is answered with its first result, so
no command is applied twice.
"""

from __future__ import annotations

import logging
import secrets
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from bergen.api.signing import RecordSigner
from bergen.domain import codec
from bergen.domain.commands import Abandon, Command, CreateMatch, Play, Resign, TakeSeat
from bergen.domain.engine import execute
from bergen.domain.errors import (
    BergenError,
    ConcurrencyConflict,
    CorruptRecord,
    InvalidArgument,
    MatchNotInProgress,
    NotFound,
    PermissionDenied,
    Unauthenticated,
)
from bergen.domain.events import Event, SeatTaken
from bergen.domain.record import build_record
from bergen.domain.rules import RULES_VERSION, make_rules
from bergen.domain.state import ENDED, State
from bergen.domain.tiles import End, Tile
from bergen.domain.views import View, redact_event, view

from . import auth
from .feed import EventFeed, MatchSummary
from .matches import COMMAND_KEY, TOKEN_KEY, Applied, Match, MatchRepository, extend
from .store import EventStore, NewEvent, StoredEvent

log = logging.getLogger("bergen.server")

RETRIES = 8
MAX_COMMAND_ID = 100


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is calling: a bearer token or nobody."""

    token: str | None = None


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a command did: its events with their seqs, seen by `viewer`, and the view after."""

    events: tuple[tuple[int, Event], ...]
    view: View
    replayed: bool = False


@dataclass(frozen=True, slots=True)
class Settings:
    organiser_token: str | None = None
    restrict_create: bool = False
    signer: RecordSigner | None = None
    """Signs finished matches' records; unsigned records when None."""


Deadline = Callable[[], None]
"""Raises when the caller's deadline has passed; called before each costly step."""


def _no_deadline() -> None:
    return None


class MatchService:
    def __init__(self, store: EventStore, feed: EventFeed, settings: Settings) -> None:
        self._store = store
        self._feed = feed
        self._settings = settings
        self._repo = MatchRepository(store)
        self._organiser_hash = (
            auth.token_hash(settings.organiser_token) if settings.organiser_token else None
        )

    @property
    def repository(self) -> MatchRepository:
        return self._repo

    # identity -------------------------------------------------------------------------

    def _is_organiser(self, caller: Caller) -> bool:
        return (
            caller.token is not None
            and self._organiser_hash is not None
            and auth.matches(caller.token, self._organiser_hash)
        )

    def _require_organiser(self, caller: Caller, what: str) -> None:
        if caller.token is None:
            raise Unauthenticated(f"{what} needs the organiser token")
        if not self._is_organiser(caller):
            raise PermissionDenied(f"{what} needs the organiser token; this token is not it")

    @staticmethod
    def _seat_of(match: Match, caller: Caller) -> int | None:
        """The seat the caller's token holds in `match`; None for no token.

        Raises PermissionDenied for a token that holds no seat of this match.
        """
        if caller.token is None:
            return None
        for seat, stored in enumerate(match.token_hashes):
            if stored is not None and auth.matches(caller.token, stored):
                return seat
        raise PermissionDenied(f"the token holds no seat in match {match.state.match_id}")

    def _viewer(self, match: Match, caller: Caller) -> int | None:
        """A seat, or None for a spectator (the organiser included)."""
        if caller.token is not None and self._is_organiser(caller):
            return None
        return self._seat_of(match, caller)

    def _require_seat(self, match: Match, caller: Caller) -> int:
        if caller.token is None:
            raise Unauthenticated(
                f"match {match.state.match_id}: send the seat token as 'authorization: Bearer'"
            )
        seat = self._seat_of(match, caller)
        assert seat is not None
        return seat

    # commands ---------------------------------------------------------------------------

    def create_match(
        self,
        caller: Caller,
        seats: int,
        partnerships: bool,
        preset: str | None,
        options: dict[str, object],
        name: str,
        deadline: Deadline = _no_deadline,
    ) -> State:
        """Create a match with a fresh server seed. Raises InvalidOptions, InvalidArgument,
        Unauthenticated / PermissionDenied when creation is restricted to the organiser."""
        if self._settings.restrict_create:
            self._require_organiser(caller, "creating a match on this server")
        rules = make_rules(seats, partnerships, preset, options)
        match_id = str(uuid.uuid4())
        command = CreateMatch(match_id, seats, partnerships, rules, secrets.token_bytes(32), name)
        deadline()
        events, state = execute(None, command)
        self._append(
            match_id,
            None,
            events,
            state,
            None,
            "organiser" if self._is_organiser(caller) else "anonymous",
            {COMMAND_KEY: "create"},
        )
        log.info("match %s created: %d seats, %s", match_id, seats, rules.preset)
        return state

    def join_match(
        self,
        match_id: str,
        seat: int | None,
        name: str,
        client_seed: str,
        deadline: Deadline = _no_deadline,
    ) -> tuple[int, str, View]:
        """Take a seat. Returns (seat, token, the seat's view). Raises NotFound,
        SeatUnavailable, InvalidArgument."""
        token = auth.new_seat_token()
        extra = {TOKEN_KEY: auth.token_hash(token), COMMAND_KEY: "join"}
        events, state, _ = self._retrying(
            match_id, TakeSeat(name, client_seed, seat), "seat", extra, deadline
        )
        first = events[0]
        assert isinstance(first, SeatTaken)
        log.info("match %s: seat %d taken by %r", match_id, first.seat, name)
        return first.seat, token, view(state, first.seat)

    def play(
        self,
        caller: Caller,
        match_id: str,
        tile: Tile,
        end: End | None,
        expected_version: int | None,
        command_id: str | None,
        deadline: Deadline = _no_deadline,
    ) -> Outcome:
        """Play for the caller's seat. Raises NotFound, Unauthenticated, PermissionDenied,
        RuleViolation, ConcurrencyConflict (stale expected version), InvalidArgument."""
        fingerprint = f"play {tile} {end.value if end else '-'}"
        return self._command(
            caller,
            match_id,
            lambda seat: Play(seat, tile, end),
            fingerprint,
            expected_version,
            command_id,
            deadline,
        )

    def resign(
        self,
        caller: Caller,
        match_id: str,
        command_id: str | None,
        deadline: Deadline = _no_deadline,
    ) -> Outcome:
        """Resign for the caller's seat. Raises as `play`."""
        return self._command(caller, match_id, Resign, "resign", None, command_id, deadline)

    def _command(
        self,
        caller: Caller,
        match_id: str,
        build: Callable[[int], Command],
        fingerprint: str,
        expected_version: int | None,
        command_id: str | None,
        deadline: Deadline,
    ) -> Outcome:
        if command_id is not None and not 0 < len(command_id) <= MAX_COMMAND_ID:
            raise InvalidArgument(f"a command id is 1 to {MAX_COMMAND_ID} characters")
        # Decided first on this process's copy of the match, without a read: the append's
        # (stream, seq) key refuses it if another replica wrote since. Anything refused on the
        # copy is decided again on the latest state before it is answered.
        reread = False
        for _ in range(RETRIES):
            match = None if reread else self._repo.cached(match_id)
            read = match is None
            if match is None:
                match = self._repo.load(match_id)
            deadline()
            try:
                seat = self._require_seat(match, caller)
                fp = f"seat {seat} {fingerprint}"
                if command_id is not None and command_id in match.commands:
                    return self._replayed(match, match.commands[command_id], fp, seat)
                if expected_version is not None and expected_version != match.version:
                    raise ConcurrencyConflict(
                        f"match {match_id} is at version {match.version}, not {expected_version}"
                    )
                events, state = execute(match.state, build(seat))
            except BergenError:
                if read:
                    raise
                reread = True
                continue
            try:
                first = self._append(
                    match_id, match, events, state, command_id, f"seat:{seat}", {COMMAND_KEY: fp}
                )
            except ConcurrencyConflict:
                if read and expected_version is not None:
                    raise
                reread = True
                continue
            if first is None:  # the store had this command id already
                match = self._repo.load(match_id)
                assert command_id is not None
                return self._replayed(match, match.commands[command_id], fp, seat)
            log.info(
                "match %s: seat %d %s -> %d events, version %d",
                match_id,
                seat,
                fingerprint,
                len(events),
                state.version,
            )
            return Outcome(self._seen(events, first, state, seat), view(state, seat))
        raise ConcurrencyConflict(f"match {match_id}: too busy, try again")

    def _replayed(self, match: Match, applied: Applied, fingerprint: str, seat: int) -> Outcome:
        if applied.fingerprint != fingerprint:
            raise InvalidArgument(
                f"command id already used in match {match.state.match_id} for another command"
            )
        state = match.state_at(applied.last_seq)
        events = match.events[applied.first_seq - 1 : applied.last_seq]
        return Outcome(
            self._seen(events, applied.first_seq, state, seat), view(state, seat), replayed=True
        )

    @staticmethod
    def _seen(
        events: tuple[Event, ...], first_seq: int, after: State, viewer: int | None
    ) -> tuple[tuple[int, Event], ...]:
        ended = after.phase == ENDED
        return tuple(
            (first_seq + i, e if ended else redact_event(e, viewer)) for i, e in enumerate(events)
        )

    def abandon(
        self, caller: Caller, match_id: str, reason: str, deadline: Deadline = _no_deadline
    ) -> tuple[tuple[int, Event], ...]:
        """End a match early. Raises Unauthenticated / PermissionDenied without the organiser
        token, NotFound, MatchNotInProgress."""
        self._require_organiser(caller, "abandoning a match")
        events, state, first = self._retrying(
            match_id, Abandon(reason), "organiser", {COMMAND_KEY: "abandon"}, deadline
        )
        log.info("match %s abandoned: %s", match_id, reason)
        return self._seen(events, first, state, None)

    def _retrying(
        self,
        match_id: str,
        command: Command,
        actor: str,
        extra: dict[str, str],
        deadline: Deadline,
    ) -> tuple[tuple[Event, ...], State, int]:
        """Decide `command` on the latest state and append it, again on a lost race.
        Returns the events, the state after them and the first seq written. Raises what
        `decide` raises, NotFound, or ConcurrencyConflict when every retry lost."""
        for _ in range(RETRIES):
            match = self._repo.load(match_id)
            deadline()
            events, state = execute(match.state, command)
            taker = events[0]
            who = f"seat:{taker.seat}" if isinstance(taker, SeatTaken) else actor
            try:
                first = self._append(match_id, match, events, state, None, who, extra)
            except ConcurrencyConflict:
                continue
            assert first is not None
            return events, state, first
        raise ConcurrencyConflict(f"match {match_id}: too busy, try again")

    def _append(
        self,
        match_id: str,
        match: Match | None,
        events: tuple[Event, ...],
        state: State,
        command_id: str | None,
        actor: str,
        extra: dict[str, str],
    ) -> int | None:
        """Append and cache; returns the first seq written, None for a replayed command id.
        Raises ConcurrencyConflict."""
        version = match.version if match is not None else 0
        new = [NewEvent(*codec.encode(e)) for e in events]
        result = self._store.append(
            match_id,
            version,
            new,
            command_id=command_id,
            actor=actor,
            rules_version=RULES_VERSION,
            extra=extra,
        )
        if result.replayed:
            return None
        updated = extend(match, result.events, decided=(events, state))
        self._repo.remember(match_id, updated)
        self._feed.observe(result.events)
        return result.first_seq

    # queries ----------------------------------------------------------------------------

    def get_view(self, caller: Caller, match_id: str) -> View:
        """Raises NotFound, Unauthenticated, PermissionDenied."""
        match = self._repo.load(match_id)
        return view(match.state, self._viewer(match, caller))

    def replay(
        self, caller: Caller, match_id: str, after_seq: int
    ) -> tuple[tuple[tuple[int, Event], ...], bool]:
        """The events after `after_seq` as the caller may see them, and whether the match has
        ended (then nothing is hidden). Raises NotFound, PermissionDenied."""
        match = self._repo.load(match_id)
        viewer = self._viewer(match, caller)
        ended = match.state.phase == ENDED
        events = match.events[after_seq:]
        return self._seen(events, after_seq + 1, match.state, viewer), ended

    def record(self, caller: Caller, match_id: str) -> dict[str, object]:
        """The RECORD.md record of a finished match. Raises NotFound, MatchNotInProgress."""
        match = self._repo.load(match_id)
        if match.state.phase != ENDED:
            raise MatchNotInProgress(
                f"match {match_id} has not ended: its record would reveal every hand"
            )
        head = self._store.read_stream(match_id, match.version)
        log_info = {"events": match.version, "head": head[-1].hash.hex()} if head else None
        record = build_record(match.events, log=log_info)
        signer = self._settings.signer
        return signer.sign(record) if signer is not None else record

    def audit_log(self, caller: Caller, match_id: str) -> tuple[StoredEvent, ...]:
        """Every stored event of a finished match, as stored. The organiser may read a live
        match's too. Raises NotFound, MatchNotInProgress (live, for anyone else)."""
        if self._is_organiser(caller):
            stored = self._store.read_stream(match_id)
            if not stored:
                raise NotFound(f"no match {match_id}")
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
                f"match {match_id} has not ended: its log would reveal every hand"
            )
        return stored

    @property
    def public_key(self) -> str:
        signer = self._settings.signer
        return signer.public_key if signer is not None else ""

    def list_matches(
        self, phase: str | None, player: str, page_size: int, page_token: str
    ) -> tuple[list[MatchSummary], str]:
        """Raises InvalidArgument for a bad page token."""
        return self._feed.index.page(phase, player, page_size, page_token)

    def watch(
        self, caller: Caller, match_id: str, after_seq: int, active: Callable[[], bool]
    ) -> Iterator[View | tuple[int, Event]]:
        """The caller's view, then every event after it (or after `after_seq`) as the caller
        may see it, until the match ends or `active()` turns false. Raises NotFound,
        PermissionDenied, CorruptRecord."""
        subscription = self._feed.subscribe(match_id)
        try:
            match = self._repo.load(match_id)
            viewer = self._viewer(match, caller)
            yield view(match.state, viewer)
            sent = min(after_seq, match.version) if after_seq else match.version
            while True:
                ended = match.state.phase == ENDED
                for event in match.events[sent:]:
                    sent += 1
                    yield sent, event if ended else redact_event(event, viewer)
                if ended:
                    return
                if not subscription.wait(active):
                    return
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


__all__ = ["Caller", "MatchService", "Outcome", "Settings"]
