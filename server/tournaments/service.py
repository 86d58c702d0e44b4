"""The tournaments' commands: the organiser's, the entrants', and the process manager's
steps (`bergen.server.tournament_manager`), each a few lines on the one unit of work.

Each player's token is sealed at registration like a seat token; the process manager seats
the player with that sealed token in each of the entrant's matches, so the token is the
player's seat token everywhere in the tournament. Nobody joins a tournament's match
(`refuse_join`).

An entrant registers with the commitment to its client seed and reveals the seed, with one
of its players' tokens, between the start and round 1 (`reveal`); the process manager closes
the reveal window (`close_reveal`) once every entrant has revealed or its deadline, recorded
when the start closed registration, has passed.
"""

from __future__ import annotations

import logging
import uuid

from bergen.api.signing import RecordSigner
from bergen.domain.errors import (
    InvalidArgument,
    NotFound,
    PermissionDenied,
    RuleViolation,
    Unauthenticated,
)
from bergen.domain.players import Player
from bergen.domain.tournament_engine import (
    MAX_NAME_CHARS,
    Cancel,
    CloseReveal,
    CreateTournament,
    End,
    PairRound,
    RecordResult,
    Register,
    RevealSeed,
    Start,
    Withdraw,
    check_settle,
    check_settle_match,
    settlement_of,
)
from bergen.domain.tournament_events import ORGANISER_ACTOR, EntrantRegistered
from bergen.domain.tournament_pairing import Settings
from bergen.domain.tournament_record import ABANDON, ENTRANT, ORGANISER, SERVER
from bergen.domain.tournament_standings import ScoredResult

from .. import auth
from ..auth import JOIN_PREFIX
from ..commands import (
    SEATING_TIMEOUT_COMMAND,
    Clock,
    MatchCommands,
    check_client_token,
    players_name,
    wall_ms,
)
from ..feed import EventFeed
from ..identity import Caller, Identity
from ..matches import TOKEN_KEY_ID, Match, MatchRepository
from ..tlog import TransparencyLog
from .repository import (
    BY_HAND_KEY,
    LEGACY_PLAYER_TOKEN,
    PLAYER_TOKEN,
    SEED_KEY,
    Tournament,
    TournamentIntent,
    TournamentRepository,
    TournamentWork,
    TournamentWritten,
)
from .seeds import TournamentSeeds
from .tables import check_match_text, table_match_name, table_rules
from .views import TableWakes, TournamentQueries

log = logging.getLogger("bergen.server.tournaments")

REGISTER_PREFIX = "register-"
"""A registration's command id when the client made the tokens: keyed like a join's."""
END_COMMAND_ID = "end"
CLOSE_REVEAL_COMMAND_ID = "close-reveal"


def pair_command_id(round_number: int) -> str:
    return f"pair-round-{round_number}"


def result_command_id(round_number: int, table: int) -> str:
    return f"result-round-{round_number}-table-{table}"


class TournamentCommands(TournamentQueries):
    """Every command on a tournament, for callers of the API and for the process manager;
    and, as `TournamentQueries`, every query of one."""

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
        clock: Clock = wall_ms,
        tlog: TransparencyLog | None = None,
    ) -> None:
        super().__init__(repository, matches, identity, signer, feed, wakes, tlog)
        self._clock = clock
        """The servers' clock (Unix ms): when the start closes registration."""
        self._match_commands = match_commands
        """How a table's match is ended when the organiser settles it (`settle`)."""
        self._work = work
        self._seeds = seeds

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

    def refuse_rematch(self, match_id: str) -> None:
        """Raises PermissionDenied (TOURNAMENT_MATCH) for a match of a tournament: its players
        go on to the tournament's next round, which the server pairs, not to a rematch."""
        table = self._repo.table_of(match_id)
        if table is not None:
            raise PermissionDenied(
                f"match {match_id} is a table of tournament {table['tournament_id']}: the "
                "tournament pairs its players' next matches, and none is a rematch",
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
        return written.aggregate

    def register(
        self,
        tournament_id: str,
        players: tuple[str, ...],
        client_seed: str = "",
        tokens: tuple[str, ...] = (),
        client_seed_commitment: str = "",
        registered: tuple[Player | None, ...] = (),
    ) -> tuple[int, tuple[str, ...]]:
        """Register an entrant with the commitment to its client seed (or, an older
        client's way, the seed itself), each player holding its token of `tokens` (made here
        when none is given); `registered` names the registered player each one is (None for
        one entering by name alone; empty for none), under its own name. Returns its number
        and the players' tokens. A registration sent again with the tokens it was made with
        is answered with its entrant and writes nothing. Raises NotFound, RuleViolation
        (REGISTRATION_CLOSED, REGISTRATION_FULL, NAME_TAKEN, PLAYER_REQUIRED in a rated
        tournament, PLAYER_ALREADY_ENTERED), InvalidArgument (WRONG_PLAYER_COUNT,
        BAD_SEAT_TOKEN, WEAK_SEAT_TOKEN, WRONG_TOKEN_COUNT, NAME_NOT_PLAYERS,
        BAD_SEED_COMMITMENT, SEED_AND_COMMITMENT, ...)."""
        player_ids: tuple[str, ...] = ()
        bots: tuple[bool, ...] = ()
        if registered:
            if len(registered) != len(players):
                raise InvalidArgument(
                    f"give a player token (or none) for each player ({len(players)}), not "
                    f"{len(registered)}",
                    reason="WRONG_TOKEN_COUNT",
                    tournament_id=tournament_id,
                )
            players = tuple(
                p if r is None else players_name(p, r)
                for p, r in zip(players, registered, strict=True)
            )
            player_ids = tuple("" if r is None else r.player_id for r in registered)
            bots = tuple(r is not None and r.bot for r in registered)
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
        command = Register(tuple(players), client_seed, client_seed_commitment, player_ids, bots)
        said = client_seed_commitment or client_seed
        fingerprint = f"register {list(players)!r} {said!r}"[:200]
        written = self._work.run(
            tournament_id,
            lambda _: TournamentIntent(command, "anonymous", fingerprint, extra),
            command_id=command_id,
        )
        if written.replayed:
            mine = self.entrant_of(written.aggregate, Caller(tokens[0]))
            assert mine is not None
            log.info("tournament %s: entrant %d registered again", tournament_id, mine[0])
            return mine[0], tokens
        (event,) = written.events
        assert isinstance(event, EntrantRegistered)
        log.info("tournament %s: entrant %d registered", tournament_id, event.entrant)
        return event.entrant, tokens

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
                self._require_entrant(t, caller, entrant)
                actor, by = f"entrant:{entrant}", ENTRANT
            return TournamentIntent(Withdraw(entrant, by, note), actor, f"withdraw {entrant}")

        written = self._work.run(tournament_id, authorise)
        log.info("tournament %s: entrant %d withdrawn", tournament_id, entrant)
        return written.aggregate.state.entrants[entrant - 1].withdrawn_after_round or 0

    def _require_entrant(self, t: Tournament, caller: Caller, entrant: int) -> None:
        """Raises PermissionDenied (NOT_THIS_ENTRANT) unless `caller` holds a token of
        `entrant`'s players."""
        mine = self.entrant_of(t, caller)
        if mine is None or mine[0] != entrant:
            tournament_id = t.state.tournament_id
            raise PermissionDenied(
                f"tournament {tournament_id}: this token is not entrant {entrant}'s",
                reason="NOT_THIS_ENTRANT",
                tournament_id=tournament_id,
                entrant=entrant,
            )

    def start(self, caller: Caller, tournament_id: str) -> Tournament:
        """Close registration (organiser): the reveal window opens, or, when every entrant's
        seed is known already, the seeding is fixed at once. Raises Unauthenticated,
        PermissionDenied, NotFound, RuleViolation (ALREADY_STARTED, TOO_FEW_ENTRANTS)."""
        self._identity.require_organiser(caller, "starting a tournament")

        def authorise(t: Tournament | None) -> TournamentIntent:
            assert t is not None
            return TournamentIntent(Start(self.seed_of(t), self._clock()), "organiser", "start")

        written = self._work.run(tournament_id, authorise)
        log.info("tournament %s started", tournament_id)
        return written.aggregate

    def reveal(
        self, caller: Caller, tournament_id: str, entrant: int, client_seed: str
    ) -> Tournament:
        """Reveal an entrant's client seed (one of its players' tokens), which must hash to
        its commitment; the same seed sent again once revealed is answered with the
        tournament and writes nothing. Raises Unauthenticated, PermissionDenied
        (NOT_THIS_ENTRANT), NotFound, InvalidArgument (SEED_DOES_NOT_MATCH, a seed the
        tables' matches would refuse), RuleViolation (REVEAL_NOT_OPEN, REVEAL_CLOSED,
        ALREADY_WITHDRAWN)."""
        if caller.token is None:
            raise Unauthenticated(
                "revealing a seed needs one of the entrant's players' tokens",
                reason="TOKEN_REQUIRED",
            )
        # A seed its matches would refuse is refused here, as at a registration with the seed.
        check_match_text("", ("entrant",), client_seed)

        def authorise(t: Tournament | None) -> TournamentIntent:
            assert t is not None
            self._require_entrant(t, caller, entrant)
            command = RevealSeed(entrant, client_seed)
            return TournamentIntent(command, f"entrant:{entrant}", f"reveal {entrant}")

        try:
            written = self._work.run(tournament_id, authorise)
        except RuleViolation as e:
            if e.reason != "ALREADY_REVEALED":
                raise
            # Decided on the stored state: the seed matched its commitment, so it is the
            # one revealed before (a reveal whose answer was lost, sent again).
            return self._repo.load(tournament_id)
        log.info("tournament %s: entrant %d revealed its seed", tournament_id, entrant)
        return written.aggregate

    def start_next_round(self, caller: Caller, tournament_id: str) -> int:
        """Pair the next round now (organiser), without waiting for the round delay. Returns
        the round paired. Raises Unauthenticated, PermissionDenied, NotFound, RuleViolation
        (ROUND_NOT_FINISHED, NO_ROUND_LEFT, TOURNAMENT_NOT_STARTED, TOURNAMENT_ENDED)."""
        self._identity.require_organiser(caller, "starting a round")
        t = self._repo.load(tournament_id)
        number = t.state.round + 1
        written = self.pair(tournament_id, number, ORGANISER_ACTOR)
        return written.aggregate.state.round if not written.replayed else number

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
        result = written.aggregate.state.rounds[round_number - 1].tables[table - 1].result
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
        """End a tournament whose round 1 is not paired (organiser): no round is played, its
        seed is revealed, its watchers see it end. Raises Unauthenticated, PermissionDenied,
        NotFound, RuleViolation (ALREADY_STARTED, TOURNAMENT_ENDED, TOURNAMENT_CANCELLED),
        InvalidArgument (a note too long or unreadable)."""
        self._identity.require_organiser(caller, "cancelling a tournament")

        def authorise(t: Tournament | None) -> TournamentIntent:
            assert t is not None
            return TournamentIntent(Cancel(self.seed_of(t), note), ORGANISER_ACTOR, "cancel")

        written = self._work.run(tournament_id, authorise)
        log.info("tournament %s cancelled", tournament_id)
        return written.aggregate

    # the process manager's steps ------------------------------------------------------------

    def close_reveal(self, tournament_id: str, at_ms: int) -> TournamentWritten:
        """Close the reveal window (once: its command id is fixed) at `at_ms`: withdraw the
        entrants that have not revealed and fix the seeding from the others. Raises
        RuleViolation (REVEAL_WINDOW_OPEN before the deadline while an entrant has not
        revealed)."""

        def authorise(t: Tournament | None) -> TournamentIntent:
            assert t is not None
            return TournamentIntent(CloseReveal(self.seed_of(t), at_ms), "server", "close reveal")

        return self._work.run(tournament_id, authorise, command_id=CLOSE_REVEAL_COMMAND_ID)

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
