"""The command side: one unit of work serves every command.

A command is authorised against the match it names (who may do this, for which seat), then
decided by the rules on the match at a version, and its events are appended naming that
version. The match is first taken from this process's cache, without a read: if another
replica wrote since, the store refuses the append and the command is decided again on the
latest state, and nothing is refused (a rule, a version, a seat) without a fresh read. A
command id already applied is answered with its first result, so no command is applied
twice.
"""

from __future__ import annotations

import logging
import re
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from bergen.api.rematch import MAX_ATTEMPTS, rematch_id
from bergen.domain.commands import (
    Abandon,
    Command,
    CreateMatch,
    Play,
    Resign,
    TakeSeat,
    Timeout,
)
from bergen.domain.errors import (
    ClockViolation,
    ConcurrencyConflict,
    InvalidArgument,
    MatchNotInProgress,
    NotFound,
    PermissionDenied,
)
from bergen.domain.events import Event, SeatTaken
from bergen.domain.players import Player, name_key
from bergen.domain.rules import make_rules
from bergen.domain.state import ENDED, PLAYING, SEATING, State
from bergen.domain.tiles import End, Tile
from bergen.domain.tournament_engine import forfeit_note
from bergen.domain.views import View, redact_event, view
from bergen.domain.vocabulary import MatchEndReason

from . import auth, unit_of_work
from .identity import Caller, Identity
from .matches import (
    EPOCH_KEY,
    REMATCH_KEY,
    Match,
    MatchRepository,
    creator_metadata,
    token_metadata,
)
from .unit_of_work import Deadline, no_deadline

log = logging.getLogger("bergen.server")

SEATING_TIMEOUT_COMMAND = "server-seating-timeout"
"""The command id of the server's abandoning of a match left seating too long."""

Clock = Callable[[], int]
"""The servers' clock: Unix time in whole milliseconds."""


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


Intent = unit_of_work.Intent[Command]
"""A command on a match as authorised for one caller."""
Written = unit_of_work.Written[Match, Command, Event, State]
"""What one command on a match wrote (or had written, for a repeated command id)."""
Authorise = Callable[[Match | None], Intent]
"""Builds a command's intent from the match it names (None for a match not yet created).
Raises what identity and existence checks raise."""


class UnitOfWork(unit_of_work.UnitOfWork[Match, Command, Event, State]):
    """The unit of work of matches (`bergen.server.unit_of_work.UnitOfWork`)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a command did: its events with their seqs as `viewer` may see them, the view
    after, and the match time as the answer is made (None: no running match time), all
    from what the command decided: the answer reads nothing."""

    events: tuple[tuple[int, Event], ...]
    view: View
    replayed: bool = False
    at_ms: int | None = None
    rematch_of: str | None = None
    """For a rematch, the match it is the rematch of."""


def seen(
    events: tuple[Event, ...], first_seq: int, after: State, viewer: int | None
) -> tuple[tuple[int, Event], ...]:
    """`events` from `first_seq` as `viewer` (None: a spectator) may see them in `after`."""
    ended = after.phase == ENDED
    return tuple(
        (first_seq + i, e if ended else redact_event(e, viewer)) for i, e in enumerate(events)
    )


_CLIENT_TOKEN = re.compile(r"[A-Za-z0-9_\-]{32,200}")
_ANY_TOKEN = re.compile(r"[A-Za-z0-9_\-]{16,200}")
"""A token a bearer entry carries (`bergen.server.auth.bearer_token`): any seat's."""
MIN_TOKEN_CHARACTERS = 16
"""Distinct characters a client's seat token has at least: a random one of 32 characters
has about 23, so fewer means a token that repeats itself (`aaaa...`, `abab...`)."""


def check_client_token(token: str, field: str = "seat_token") -> None:
    """Raises InvalidArgument for a token a client made (a seat's, or a creator's named by
    `field`) that a bearer entry cannot carry or that cannot hold enough randomness. The
    message never repeats the token."""
    kind = field.removesuffix("_token").upper()
    if not _CLIENT_TOKEN.fullmatch(token):
        raise InvalidArgument(
            f"{field} must be 32 to 200 characters of A-Z a-z 0-9 _ -",
            reason=f"BAD_{kind}_TOKEN",
        )
    if len(set(token)) < MIN_TOKEN_CHARACTERS:
        raise InvalidArgument(
            f"{field} repeats itself ({len(set(token))} distinct characters); draw it at random",
            reason=f"WEAK_{kind}_TOKEN",
        )


def players_name(name: str, player: Player) -> str:
    """The name a registered player's seat (or entrant) takes: its own. Raises
    InvalidArgument (NAME_NOT_PLAYERS) for another name given with its token."""
    if name and name_key(name) != name_key(player.name):
        raise InvalidArgument(
            f"a registered player plays under its own name, {player.name!r}: give that name or "
            "none with its player token",
            reason="NAME_NOT_PLAYERS",
            field="name",
        )
    return player.name


class MatchCommands:
    """Every command on a match, each an intent for the one unit of work."""

    def __init__(
        self,
        work: UnitOfWork,
        repository: MatchRepository,
        identity: Identity,
        restrict_create: bool,
        clock: Clock = wall_ms,
    ) -> None:
        self._work = work
        self._repository = repository
        self._identity = identity
        self._restrict_create = restrict_create
        self._clock = clock

    def at_ms(self, match: Match) -> int | None:
        """The match time now (RULES.md section 11): ms since its first deal on the servers'
        clock; None for a match without a running match time (no clock, or not dealt)."""
        if match.epoch_ms is None:
            return None
        return max(0, self._clock() - match.epoch_ms)

    def create_match(
        self,
        caller: Caller,
        seats: int,
        partnerships: bool,
        preset: str | None,
        options: dict[str, object],
        name: str,
        deadline: Deadline = no_deadline,
        creator_token: str | None = None,
        rated: bool = False,
    ) -> State:
        """Create a match with a fresh server seed; `creator_token` (made by the client) may
        abandon it while it is still seating; `rated`: a match for the players' ratings.
        Raises InvalidOptions, InvalidArgument (a malformed or repetitive creator token),
        Unauthenticated / PermissionDenied when creation is restricted to the organiser."""
        if self._restrict_create:
            self._identity.require_organiser(caller, "creating a match on this server")
        extra: dict[str, str] = {}
        if creator_token is not None:
            check_client_token(creator_token, "creator_token")
            extra = creator_metadata(self._identity.seat_tokens.seal(creator_token))
        rules = make_rules(seats, partnerships, preset, options)
        match_id = new_match_id()
        command = CreateMatch(
            match_id, seats, partnerships, rules, secrets.token_bytes(32), name, rated
        )
        actor = "organiser" if self._identity.is_organiser(caller) else "anonymous"
        written = self._work.run(
            match_id, lambda _: Intent(command, actor, "create", extra), new=True, deadline=deadline
        )
        log.info(
            "match %s created: %d seats, %s%s",
            match_id,
            seats,
            rules.preset,
            " (rated)" if rated else "",
        )
        return written.state

    def create_rematch(
        self, caller: Caller, old_id: str, deadline: Deadline = no_deadline
    ) -> tuple[Match, bool]:
        """The rematch of the ended match `old_id`, with its seats, partnerships, name and
        rules and a server seed of its own, each seat kept for whoever held it there; and
        whether it had been created before (by any seat, through any replica: its id is
        derived from `old_id`, `bergen.api.rematch`), when nothing is written. A rematch
        abandoned before its start is followed by the next one. The caller's token holds a
        seat of `old_id` or is the organiser's.

        Raises NotFound, Unauthenticated / PermissionDenied (also when creation is
        restricted to the organiser), MatchNotInProgress (MATCH_NOT_ENDED, MATCH_ABANDONED,
        TOO_MANY_REMATCHES)."""
        if self._restrict_create:
            self._identity.require_organiser(caller, "creating a match on this server")
        old = self._repository.load(old_id)
        organiser = self._identity.is_organiser(caller)
        actor = "organiser" if organiser else f"seat:{self._identity.require_seat(old, caller)}"
        result = old.state.result
        if old.state.phase != ENDED or result is None:
            raise MatchNotInProgress(
                f"match {old_id} has not ended: a rematch follows its end",
                reason="MATCH_NOT_ENDED",
                match_id=old_id,
            )
        if result.reason == MatchEndReason.ABANDONED and result.resigned_seat is None:
            # Abandoned by the organiser, its creator or the server (left seating): ended by
            # none of its players, perhaps with seats never taken, so nothing to play again.
            raise MatchNotInProgress(
                f"match {old_id} was abandoned: only a match ended by its target or a "
                "forfeit is rematched",
                reason="MATCH_ABANDONED",
                match_id=old_id,
            )
        for attempt in range(1, MAX_ATTEMPTS + 1):
            match_id = rematch_id(old_id, attempt)
            try:
                known = self._repository.load(match_id)
            except NotFound:
                try:
                    return self._new_rematch(match_id, old, actor, deadline), False
                except ConcurrencyConflict:
                    known = self._repository.load(match_id)  # asked for at once elsewhere
            if not (known.state.phase == ENDED and known.state.hand == 0):
                return known, True
            # Abandoned before every seat was taken: the next attempt is the rematch now.
        raise MatchNotInProgress(
            f"match {old_id} has had {MAX_ATTEMPTS} rematches abandoned before their start",
            reason="TOO_MANY_REMATCHES",
            match_id=old_id,
        )

    def _new_rematch(self, match_id: str, old: Match, actor: str, deadline: Deadline) -> Match:
        """Create `match_id`, the rematch of `old`. Raises ConcurrencyConflict when it exists."""
        info, old_id = old.state.info, old.state.match_id
        seed = secrets.token_bytes(32)
        command = CreateMatch(match_id, info.seats, info.partnerships, info.rules, seed, info.name)
        intent = Intent(command, actor, f"rematch of {old_id}", {REMATCH_KEY: old_id})
        written = self._work.run(match_id, lambda _: intent, new=True, deadline=deadline)
        log.info("match %s created: the rematch of match %s", match_id, old_id)
        return written.aggregate

    def join_match(
        self,
        match_id: str,
        seat: int | None,
        name: str,
        client_seed: str,
        deadline: Deadline = no_deadline,
        token: str | None = None,
        previous_token: str | None = None,
        player: Player | None = None,
    ) -> tuple[int, str, View]:
        """Take a seat, held by `token` (made here when None), for the registered `player`
        when given (its name is the seat's: `name` is empty or that name). Returns (seat,
        token, the seat's view). A join sent again with the token of a seat it took is
        answered with that seat and writes nothing. A rematch's seat is taken only with
        `previous_token`, the token that held the same seat in the match it is the rematch
        of. Raises NotFound, SeatUnavailable, RuleViolation (PLAYER_REQUIRED in a rated
        match, PLAYER_ALREADY_SEATED), InvalidArgument (a malformed or repetitive token; the
        token of another join of this match; a previous token for a match that is no
        rematch; NAME_NOT_PLAYERS), PermissionDenied (REMATCH_SEAT_RESERVED)."""
        if previous_token is not None and not _ANY_TOKEN.fullmatch(previous_token):
            raise InvalidArgument(
                "previous_seat_token must be a seat token: 16 to 200 characters of A-Z a-z 0-9 _ -",
                reason="BAD_SEAT_TOKEN",
            )
        if player is not None:
            name = players_name(name, player)
        command_id = None
        earlier: tuple[str, ...] = ()
        seat_tokens = self._identity.seat_tokens
        if token is None:
            token = auth.new_seat_token()
        else:
            check_client_token(token)
            # The token's own join is its command: a retry is answered from the log. Its id
            # is keyed like the token's seal (a plain hash of a client's token, published in
            # the audit log, could be searched offline); a retry after a key rotation is
            # found under the ids of every key held.
            command_id, *rest = seat_tokens.join_command_ids(token)
            earlier = tuple(rest)
        sealed = token_metadata(seat_tokens.seal(token))

        def authorise(match: Match | None) -> Intent:
            assert match is not None
            asked = seat
            if match.rematch_of is not None:
                asked = self._reserved_seat(match, match.rematch_of, previous_token, seat)
            elif previous_token is not None:
                raise InvalidArgument(
                    f"match {match_id} is no rematch: previous_seat_token is for a rematch's "
                    "seats only",
                    reason="NOT_A_REMATCH",
                    match_id=match_id,
                )
            free = [s for s, p in enumerate(match.state.players) if p is None]
            taking = asked if asked is not None else (free[0] if free else None)
            extra = sealed
            if len(free) == 1 and match.state.info.rules.clocked:
                # This join deals: the match's time starts now.
                extra = {**sealed, EPOCH_KEY: str(self._clock())}
            command = TakeSeat(name, client_seed, asked)
            if player is not None:
                command = TakeSeat(name, client_seed, asked, player.player_id, player.bot)
            return Intent(
                command,
                f"seat:{taking}",
                f"join {name!r} seat {'any' if seat is None else seat}"
                + (f" player {player.player_id}" if player is not None else ""),
                extra,
            )

        written = self._work.run(
            match_id, authorise, command_id=command_id, deadline=deadline, earlier_ids=earlier
        )
        first = written.events[0]
        assert isinstance(first, SeatTaken)
        if written.replayed:
            log.info("match %s: seat %d join sent again by %r", match_id, first.seat, name)
        else:
            log.info("match %s: seat %d taken by %r", match_id, first.seat, name)
        return first.seat, token, view(written.state, first.seat)

    def _reserved_seat(
        self, match: Match, old_id: str, previous_token: str | None, seat: int | None
    ) -> int:
        """The seat of the rematch `match` that `previous_token` may take: the one it held in
        `old_id`. Raises PermissionDenied (REMATCH_SEAT_RESERVED) for no token, a token that
        held no seat there, or another seat asked for; NotFound without that match."""
        match_id = match.state.match_id
        if previous_token is None:
            raise PermissionDenied(
                f"match {match_id} is the rematch of match {old_id}: each of its seats is kept "
                "for whoever held it there (send that seat's token as previous_seat_token)",
                reason="REMATCH_SEAT_RESERVED",
                match_id=match_id,
            )
        old = self._repository.cached(old_id) or self._repository.load(old_id)
        matches = self._identity.seat_tokens.matcher(previous_token)
        tokens = old.seat_tokens
        held = next((s for s, t in enumerate(tokens) if t is not None and matches(t)), None)
        if held is None:
            raise PermissionDenied(
                f"match {match_id} is the rematch of match {old_id}, and previous_seat_token "
                "held no seat there: its seats are kept for that match's players",
                reason="REMATCH_SEAT_RESERVED",
                match_id=match_id,
            )
        if seat is not None and seat != held:
            raise PermissionDenied(
                f"match {match_id}: seat {seat} is kept for whoever held it in match {old_id}; "
                f"previous_seat_token held seat {held}",
                reason="REMATCH_SEAT_RESERVED",
                match_id=match_id,
                seat=seat,
            )
        return held

    def play(
        self,
        caller: Caller,
        match_id: str,
        tile: Tile,
        end: End | None,
        expected_version: int | None,
        command_id: str | None,
        deadline: Deadline = no_deadline,
    ) -> Outcome:
        """Play for the caller's seat. Raises NotFound, Unauthenticated, PermissionDenied,
        RuleViolation, ConcurrencyConflict (stale expected version), InvalidArgument."""
        what = f"play {tile} {end.value if end else '-'}"
        return self._for_seat(
            caller,
            match_id,
            lambda match, seat: Play(seat, tile, end, self.at_ms(match)),
            what,
            expected_version,
            command_id,
            deadline,
            # Each play is already logged as its call (bergen.server.calls: rpc, status,
            # match, seat); its events and version are there for DEBUG.
            logging.DEBUG,
        )

    def resign(
        self,
        caller: Caller,
        match_id: str,
        command_id: str | None,
        deadline: Deadline = no_deadline,
    ) -> Outcome:
        """Resign for the caller's seat. Raises as `play`."""
        return self._for_seat(
            caller,
            match_id,
            lambda match, seat: Resign(seat, self.at_ms(match)),
            "resign",
            None,
            command_id,
            deadline,
        )

    def _for_seat(
        self,
        caller: Caller,
        match_id: str,
        build: Callable[[Match, int], Command],
        what: str,
        expected_version: int | None,
        command_id: str | None,
        deadline: Deadline,
        level: int = logging.INFO,
    ) -> Outcome:
        """Load, decide and append in one unit of work, then answer from what was decided
        (the match as it stands after it: no second read)."""

        def authorise(match: Match | None) -> Intent:
            assert match is not None
            seat = self._identity.require_seat(match, caller)
            return Intent(build(match, seat), f"seat:{seat}", f"seat {seat} {what}", seat=seat)

        try:
            written = self._work.run(
                match_id,
                authorise,
                command_id=command_id,
                expected_version=expected_version,
                deadline=deadline,
            )
        except ClockViolation as e:
            if e.reason == "CLOCK_EXPIRED":
                # The seat's time ran out before it acted: the timeout comes first, and the
                # caller is told why its command was refused.
                self.time_out(match_id)
            raise
        seat = written.intent.seat
        if not written.replayed and log.isEnabledFor(level):
            log.log(
                level,
                "match %s: seat %d %s -> %d events, version %d",
                match_id,
                seat,
                what,
                len(written.events),
                written.state.version,
            )
        return Outcome(
            seen(written.events, written.first_seq, written.state, seat),
            view(written.state, seat),
            replayed=written.replayed,
            at_ms=self.at_ms(written.aggregate) if written.state.clocks else None,
            rematch_of=written.aggregate.rematch_of,
        )

    def time_out(self, match_id: str) -> int | None:
        """Apply the timeout of `match_id`'s running clock if it has fallen (RULES.md section
        11): the server's own command. Several replicas may try at once; the expected version
        lets one write it, and the others find the clock no longer due. Returns the version
        after the timeout, None when no timeout was due (no clock runs, or not yet fallen: the
        caller may look again at `due_ms`). Raises NotFound, StorageUnavailable, LogTampered."""

        def authorise(match: Match | None) -> Intent:
            assert match is not None
            seat, now = match.state.running, self.at_ms(match)
            if seat is None or now is None:
                raise ClockViolation(f"match {match_id}: no clock runs", reason="CLOCK_NOT_RUNNING")
            # Whether the clock has fallen by `now` is the rules' to say (CLOCK_NOT_EXPIRED).
            return Intent(Timeout(seat, now), "server", f"timeout seat {seat}")

        try:
            written = self._work.run(match_id, authorise)
        except ClockViolation:
            return None
        last = written.first_seq + len(written.events) - 1
        log.info("match %s: timeout applied at version %d", match_id, last)
        return last

    def due_ms(self, match: Match) -> int | None:
        """When `match`'s running clock falls, on the servers' clock (Unix ms); None when no
        clock runs."""
        due = match.state.due_at_ms
        if due is None or match.epoch_ms is None or match.state.phase != PLAYING:
            return None
        return match.epoch_ms + due

    def abandon_unseated(self, match_id: str, note: str) -> bool:
        """Abandon `match_id` with `note` if it is still seating; the server's own command, so
        that of several replicas doing it at once one writes and the others are answered from
        the log. Returns whether it was abandoned (False: it was not seating any more).
        Raises NotFound, StorageUnavailable."""

        def authorise(match: Match | None) -> Intent:
            assert match is not None
            if match.state.phase != SEATING:
                raise MatchNotInProgress(
                    f"match {match_id} is no longer seating",
                    reason="MATCH_NOT_SEATING",
                    match_id=match_id,
                )
            return Intent(Abandon(note), "server", "abandon: seating timed out")

        try:
            written = self._work.run(match_id, authorise, command_id=SEATING_TIMEOUT_COMMAND)
        except MatchNotInProgress:
            return False
        if not written.replayed:
            log.info("match %s abandoned: %s", match_id, note)
        return True

    def forfeit_side(
        self,
        caller: Caller,
        match_id: str,
        side: int,
        note: str,
        check: Callable[[Match], None],
    ) -> None:
        """End a match as a forfeit of `side` for the organiser, as if the side's first seat
        had resigned, the end's note saying the organiser did and why (`forfeit_note`).
        `check` is given the match each time the forfeit is decided on it, and raises to
        refuse (a side that has played: the append names that version, so nobody plays in
        between). Raises Unauthenticated / PermissionDenied without the organiser token,
        NotFound, ClockViolation (the clock of the seat to play had fallen: the timeout is
        applied first), what `check` and the rules raise."""
        self._identity.require_organiser(caller, "forfeiting a side")

        def authorise(match: Match | None) -> Intent:
            assert match is not None
            check(match)
            seat = match.state.sides[side][0]
            command = Resign(seat, self.at_ms(match), forfeit_note(note))
            return Intent(command, "organiser", f"organiser forfeit side {side}")

        try:
            self._work.run(match_id, authorise)
        except ClockViolation as e:
            if e.reason == "CLOCK_EXPIRED":
                self.time_out(match_id)
            raise
        log.info("match %s: side %d forfeited by the organiser: %s", match_id, side, note)

    def abandon(
        self, caller: Caller, match_id: str, reason: str, deadline: Deadline = no_deadline
    ) -> tuple[tuple[int, Event], ...]:
        """End a match early: the organiser at any time, the creator (its creator token)
        while the match is still seating. Raises Unauthenticated / PermissionDenied for
        another caller, NotFound, MatchNotInProgress (ended; or started, for the creator)."""

        def authorise(match: Match | None) -> Intent:
            assert match is not None
            if self._identity.is_organiser(caller):
                return Intent(Abandon(reason), "organiser", "abandon")
            if self._identity.is_creator(match, caller):
                if match.state.phase != SEATING:
                    raise MatchNotInProgress(
                        f"match {match_id} has started: only the organiser may abandon it now",
                        reason="MATCH_NOT_SEATING",
                        match_id=match_id,
                    )
                return Intent(Abandon(reason or "abandoned by its creator"), "creator", "abandon")
            self._identity.require_organiser(caller, "abandoning a match")
            raise AssertionError("require_organiser refuses a caller who is not the organiser")

        written = self._work.run(match_id, authorise, deadline=deadline)
        log.info("match %s abandoned by %s: %s", match_id, written.intent.actor, reason)
        return seen(written.events, written.first_seq, written.state, None)


def new_match_id(
    now_ns: Callable[[], int] = time.time_ns, randbits: Callable[[int], int] = secrets.randbits
) -> str:
    """A new match's id: a version 7 UUID (RFC 9562), the milliseconds since 1970 in its
    first 48 bits and 74 random bits from the OS's CSPRNG after them. Ids made later sort
    later, so a new match's rows go to the right edge of the indexes keyed by stream (the
    events' key, the command ids'), pages a busy server holds in memory, where a random id
    put each new match's first row on a page of its own that a large log keeps on disk."""
    ms = now_ns() // 1_000_000 & (1 << 48) - 1
    value = ms << 80 | randbits(80) & (1 << 80) - 1
    value = value & ~(0xF << 76) | 0x7 << 76  # the version, 7
    value = value & ~(0x3 << 62) | 0x2 << 62  # the variant, RFC 9562's
    return str(uuid.UUID(int=value))
