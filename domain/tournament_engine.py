"""The tournament aggregate: `decide`, `evolve`, `fold`, as for a match.

`decide_tournament(state, command)` checks a command against TOURNAMENT.md and returns the
events it causes, or raises; `evolve_tournament(state, event)` applies one fact without
checking; `fold_tournament(events)` rebuilds the state. Pairing, scoring and standings are
the pure functions of `tournament_pairing` and `tournament_standings`; the state keeps a
running `Tally`, so a result costs no recount.

The tournament seed is the server's secret until the end: the commands that need it carry
it, and only its commitment is recorded until `End` (or `Cancel`) reveals it.

Entrants register with a commitment to their client seeds and reveal them after the close
(TOURNAMENT.md section 3): `Start` closes registration and opens the reveal window (phase
REVEAL), `RevealSeed` takes each seed, and `CloseReveal` (the server's, once every entrant
has revealed or the window has passed) withdraws those that did not and fixes the seeding
from the others. An entrant registered with its seed itself (an older client) counts as
revealed, so a tournament whose entrants all did starts at once, as before.

What the organiser or the server does that play does not is an intervention of the state
(TOURNAMENT.md section 3): a withdrawal by another than the entrant, a round started by hand,
a table settled (its match abandoned, or forfeited for a side that never played), a
cancellation. A table is settled on its match, so that any replica records the same thing
from the match alone: `check_settle` and `check_settle_match` say whether the organiser may,
the match is ended as `forfeit_note` says, and the result of the match records the
intervention with it (`RecordResult.settled_by`, from `settlement_of` the match's end).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import singledispatch

from .engine import check_text, is_player_id
from .errors import InvalidArgument, MatchNotInProgress, NotFound, RuleViolation
from .events import Event, MatchEnded, TilePlayed
from .state import PLAYING, SEATING
from .state import State as MatchState
from .tournament_events import (
    EntrantRegistered,
    EntrantSeedRevealed,
    EntrantWithdrew,
    RegistrationClosed,
    ResultRecorded,
    RoundPaired,
    RoundTable,
    TableSettled,
    TournamentCancelled,
    TournamentCreated,
    TournamentEnded,
    TournamentEvent,
    TournamentStarted,
    is_commitment,
)
from .tournament_fairness import commitment, seeding_order
from .tournament_pairing import Settings, active, pair_round
from .tournament_record import (
    ABANDON,
    CANCEL,
    ENTRANT,
    FORFEIT_TABLE,
    MAX_NOTE_CHARS,
    ORGANISER,
    SERVER,
    START_ROUND,
    WITHDRAW,
    Entrant,
    Intervention,
    PlayedRound,
    PlayedTable,
    Tournament,
    build_tournament_record,
    play_round,
)
from .tournament_standings import (
    ABANDONED,
    FORFEIT,
    TableResult,
    Tally,
    score_result,
    walkover,
)
from .vocabulary import ForfeitCause, MatchEndReason

REGISTRATION = "registration"
REVEAL = "reveal"
"""Registration closed; entrants reveal their client seeds before round 1 is paired."""
RUNNING = "running"
ENDED = "ended"

MAX_NAME_CHARS = 100
MAX_CLIENT_SEED_CHARS = 256
NO_REVEAL_NOTE = "did not reveal its client seed in the reveal window"
"""The reason the server's withdrawal of an entrant that did not reveal gives."""


# Commands


@dataclass(frozen=True, slots=True)
class CreateTournament:
    tournament_id: str
    settings: Settings
    tournament_seed: bytes
    name: str = ""


@dataclass(frozen=True, slots=True)
class Register:
    """Register an entrant: one player, or two at partnership tables, with the commitment
    to its client seed (SHA-256, lowercase hex), revealed after the close by `RevealSeed`.
    Without a commitment, `client_seed` is the seed itself (an older client's way): its
    commitment is recorded, and the seed counts as revealed at the close. `player_ids` names
    each player's registered player ("" for one entered by name alone; empty for none) and
    `bots` whether each is a program."""

    players: tuple[str, ...]
    client_seed: str = ""
    client_seed_commitment: str = ""
    player_ids: tuple[str, ...] = ()
    bots: tuple[bool, ...] = ()


@dataclass(frozen=True, slots=True)
class Withdraw:
    """Withdraw `entrant`, by itself (ENTRANT), the organiser, or the server; `note` why."""

    entrant: int
    by: str = ENTRANT
    note: str = ""


@dataclass(frozen=True, slots=True)
class Start:
    """Close registration (the organiser), at `at_ms` (Unix ms): the reveal window runs
    from then; when every entrant has its seed already, the seeding is fixed at once."""

    tournament_seed: bytes
    at_ms: int = 0


@dataclass(frozen=True, slots=True)
class RevealSeed:
    """Entrant `entrant` reveals its client seed, which must hash to its commitment."""

    entrant: int
    client_seed: str


@dataclass(frozen=True, slots=True)
class CloseReveal:
    """Close the reveal window (the server), at `at_ms` (Unix ms): once every entrant still
    in has revealed, or the window has passed."""

    tournament_seed: bytes
    at_ms: int


@dataclass(frozen=True, slots=True)
class PairRound:
    """Pair the next round from the results so far: by the server on its own, or by the
    organiser (a round started by hand)."""

    by: str = SERVER


@dataclass(frozen=True, slots=True)
class RecordResult:
    """A table's result, from its match's end. `settled_by` names who ended the match when
    play did not (an abandon, or the organiser's forfeit: `settlement_of`), `note` why."""

    round: int
    table: int
    reason: str
    scores: tuple[int, ...]
    forfeited_side: int | None = None
    settled_by: str | None = None
    note: str = ""


@dataclass(frozen=True, slots=True)
class End:
    tournament_seed: bytes


@dataclass(frozen=True, slots=True)
class Cancel:
    """End a tournament still open for registration (the organiser); its seed is revealed
    as at any end."""

    tournament_seed: bytes
    note: str = ""


TournamentCommand = (
    CreateTournament
    | Register
    | Withdraw
    | Start
    | RevealSeed
    | CloseReveal
    | PairRound
    | RecordResult
    | End
    | Cancel
)


# State


@dataclass(frozen=True, slots=True)
class TournamentState:
    """What a view of a tournament needs: settings, entrants, rounds with their tables and
    results, and the running tally the standings come from."""

    tournament_id: str
    name: str
    settings: Settings
    commitment: str
    phase: str = REGISTRATION
    entrants: tuple[Entrant, ...] = ()
    seeding: tuple[int, ...] | None = None
    rounds: tuple[PlayedRound, ...] = ()
    tally: Tally | None = None
    tournament_seed: str | None = None
    interventions: tuple[Intervention, ...] = ()
    cancelled: bool = False
    records_interventions: bool = True
    """False for a tournament created before interventions were recorded: its record keeps
    the shape it had then (see `TournamentCreated`)."""
    reveal_deadline_ms: int | None = None
    """When the reveal window closes (Unix ms), once registration has closed."""

    @property
    def round(self) -> int:
        """The latest round paired (0 before the first)."""
        return len(self.rounds)

    @property
    def round_finished(self) -> bool:
        """Whether every table of the latest round has its result (true before round 1)."""
        return not self.rounds or self.rounds[-1].finished

    def withdrawn_after(self) -> tuple[int | None, ...]:
        return (None, *(e.withdrawn_after_round for e in self.entrants))

    def active_entrants(self, round_number: int) -> list[int]:
        """The entrants who would be paired in `round_number`."""
        w = self.withdrawn_after()
        return [e.entrant for e in self.entrants if active(w, e.entrant, round_number)]

    @property
    def total_rounds(self) -> int:
        """The rounds it has: with the entrants seeded once started, else all registered."""
        seeded = self.seeding if self.seeding is not None else self.entrants
        return self.settings.total_rounds(len(seeded))

    def unrevealed(self) -> list[int]:
        """The entrants still in (not withdrawn) that have not revealed their seeds."""
        return [
            e.entrant
            for e in self.entrants
            if e.withdrawn_after_round is None and e.client_seed is None
        ]

    @property
    def over(self) -> bool:
        """Whether a running tournament has nothing left to play: its latest round has
        finished and it was the last, or fewer than two entrants are left."""
        if self.phase != RUNNING or not self.round_finished:
            return False
        return self.round >= self.total_rounds or len(self.active_entrants(self.round + 1)) < 2

    def as_tournament(self) -> Tournament:
        """The tournament as its record shows it: no client seed before the close (one
        given at registration is shown from then, with those revealed)."""
        entrants = self.entrants
        if self.phase == REGISTRATION:
            entrants = tuple(replace(e, client_seed=None) for e in entrants)
        return Tournament(
            tournament_id=self.tournament_id,
            settings=self.settings,
            commitment=self.commitment,
            entrants=entrants,
            seeding=self.seeding,
            rounds=self.rounds,
            tournament_seed=self.tournament_seed,
            name=self.name,
            ended=self.phase == ENDED,
            interventions=self.interventions if self.records_interventions else None,
        )

    def record(self) -> dict[str, object]:
        """The section 6 record of the tournament so far (without `signature`), its standings
        from the running tally."""
        return build_tournament_record(self.as_tournament(), self.tally)

    def find_table(self, match_id: str) -> tuple[int, int] | None:
        """(round, table) of the table whose match is `match_id`."""
        for r in self.rounds:
            for t in r.tables:
                if t.match_id == match_id:
                    return r.round, t.table
        return None


# Evolve


@singledispatch
def _apply(event: object, state: TournamentState | None) -> TournamentState:
    raise TypeError(f"not a tournament event: {type(event).__name__}")


@_apply.register
def _(e: TournamentCreated, state: TournamentState | None) -> TournamentState:
    return TournamentState(
        e.tournament_id,
        e.name,
        e.settings,
        e.commitment,
        records_interventions=e.records_interventions,
    )


def _existing(state: TournamentState | None) -> TournamentState:
    if state is None:
        raise TypeError("a tournament's first event creates it")
    return state


@_apply.register
def _(e: EntrantRegistered, state: TournamentState | None) -> TournamentState:
    s = _existing(state)
    entrant = Entrant(
        e.entrant,
        e.client_seed,
        e.players,
        client_seed_commitment=e.client_seed_commitment,
        player_ids=e.player_ids,
        bots=e.bots,
    )
    return replace(s, entrants=(*s.entrants, entrant))


@_apply.register
def _(e: RegistrationClosed, state: TournamentState | None) -> TournamentState:
    s = _existing(state)
    return replace(s, phase=REVEAL, reveal_deadline_ms=e.reveal_deadline_ms)


@_apply.register
def _(e: EntrantSeedRevealed, state: TournamentState | None) -> TournamentState:
    s = _existing(state)
    entrants = tuple(
        replace(x, client_seed=e.client_seed) if x.entrant == e.entrant else x for x in s.entrants
    )
    return replace(s, entrants=entrants)


@_apply.register
def _(e: EntrantWithdrew, state: TournamentState | None) -> TournamentState:
    s = _existing(state)
    entrants = tuple(
        replace(x, withdrawn_after_round=e.after_round, withdrawn_by=e.by)
        if x.entrant == e.entrant
        else x
        for x in s.entrants
    )
    s = replace(s, entrants=entrants)
    if e.by == ENTRANT:
        return s
    return _intervened(s, Intervention(e.after_round, None, WITHDRAW, e.by, e.entrant, e.note))


def _intervened(s: TournamentState, i: Intervention) -> TournamentState:
    return replace(s, interventions=(*s.interventions, i))


@_apply.register
def _(e: TournamentStarted, state: TournamentState | None) -> TournamentState:
    s = _existing(state)
    tally = Tally.start(e.seeding, len(s.entrants))
    return replace(s, phase=RUNNING, seeding=e.seeding, tally=tally)


@_apply.register
def _(e: RoundPaired, state: TournamentState | None) -> TournamentState:
    s = _existing(state)
    assert s.tally is not None
    tally = s.tally
    for b in e.byes:
        tally = tally.with_bye(b)
    withdrawn = s.withdrawn_after()
    tables = []
    for t in e.tables:
        table = PlayedTable(t.table, t.match_id, t.sides)
        if t.match_id is None:
            # A table not played: its withdrawn entrants' forfeit, at once.
            gone = [i for i, x in enumerate(t.sides) if not active(withdrawn, x, e.round)]
            result = walkover(len(t.sides), gone)
            table = replace(table, result=result)
            tally = tally.with_table(t.sides, result)
        tables.append(table)
    s = replace(s, rounds=(*s.rounds, PlayedRound(e.round, e.byes, tuple(tables))), tally=tally)
    if e.by == SERVER:
        return s
    return _intervened(s, Intervention(e.round, None, START_ROUND, e.by))


@_apply.register
def _(e: TableSettled, state: TournamentState | None) -> TournamentState:
    s = _existing(state)
    return _intervened(s, Intervention(e.round, e.table, e.action, e.by, e.entrant, e.note))


@_apply.register
def _(e: TournamentCancelled, state: TournamentState | None) -> TournamentState:
    s = _existing(state)
    s = replace(s, cancelled=True)
    return _intervened(s, Intervention(s.round, None, CANCEL, ORGANISER, None, e.note))


@_apply.register
def _(e: ResultRecorded, state: TournamentState | None) -> TournamentState:
    s = _existing(state)
    assert s.tally is not None
    result = score_result(TableResult(e.reason, e.scores, e.forfeited_side))
    rounds = list(s.rounds)
    r = rounds[e.round - 1]
    tables = list(r.tables)
    t = tables[e.table - 1]
    tables[e.table - 1] = replace(t, result=result)
    rounds[e.round - 1] = replace(r, tables=tuple(tables))
    return replace(s, rounds=tuple(rounds), tally=s.tally.with_table(t.sides, result))


@_apply.register
def _(e: TournamentEnded, state: TournamentState | None) -> TournamentState:
    s = _existing(state)
    return replace(s, phase=ENDED, tournament_seed=e.tournament_seed)


def evolve_tournament(state: TournamentState | None, event: TournamentEvent) -> TournamentState:
    """The state after `event`; never checks."""
    return _apply(event, state)


def fold_tournament(
    events: Iterable[TournamentEvent], state: TournamentState | None = None
) -> TournamentState:
    """The state `events` build. Raises TypeError for an empty stream."""
    for e in events:
        state = evolve_tournament(state, e)
    if state is None:
        raise TypeError("no events: no tournament")
    return state


# Decide


def _tid(state: TournamentState) -> dict[str, str]:
    return {"tournament_id": state.tournament_id}


def _check_seed(state: TournamentState, seed: bytes) -> None:
    if commitment(seed) != state.commitment:
        raise InvalidArgument(
            f"tournament {state.tournament_id}: the seed does not match its commitment",
            reason="SEED_DOES_NOT_MATCH_COMMITMENT",
            **_tid(state),
        )


def _text(value: object, what: str, limit: int, *, empty: bool) -> str:
    if not isinstance(value, str) or len(value) > limit or (not empty and not value.strip()):
        raise InvalidArgument(
            f"{what} is a string of {'0' if empty else '1'} to {limit} characters",
            reason="INVALID_ARGUMENT",
        )
    return value


def _ended(state: TournamentState) -> RuleViolation:
    """The refusal of anything but a look at an ended tournament."""
    if state.cancelled:
        return RuleViolation(
            f"tournament {state.tournament_id} was cancelled before its start",
            reason="TOURNAMENT_CANCELLED",
            **_tid(state),
        )
    return RuleViolation(
        f"tournament {state.tournament_id} has ended", reason="TOURNAMENT_ENDED", **_tid(state)
    )


def _running(state: TournamentState | None) -> TournamentState:
    if state is None:
        raise NotFound("no such tournament", reason="TOURNAMENT_NOT_FOUND")
    if state.phase == REGISTRATION:
        raise RuleViolation(
            f"tournament {state.tournament_id} has not started",
            reason="TOURNAMENT_NOT_STARTED",
            **_tid(state),
        )
    if state.phase == REVEAL:
        raise _revealing(state)
    if state.phase == ENDED:
        raise _ended(state)
    return state


def _revealing(state: TournamentState) -> RuleViolation:
    """The refusal of a step of play while the entrants reveal their seeds."""
    return RuleViolation(
        f"tournament {state.tournament_id} is in its reveal window: round 1 is paired once "
        "every entrant has revealed its client seed, or the window has passed",
        reason="REVEAL_WINDOW_OPEN",
        reveal_deadline_ms=state.reveal_deadline_ms or 0,
        **_tid(state),
    )


def _actor(value: object, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise InvalidArgument(
            f"who acts is one of {', '.join(allowed)}, not {value!r}"[:160], reason="INVALID_ACTOR"
        )
    return str(value)


def _note(value: object) -> str:
    return check_text(value, "note", MAX_NOTE_CHARS)


def decide_tournament(
    state: TournamentState | None, command: TournamentCommand
) -> tuple[TournamentEvent, ...]:
    """The events `command` causes.

    Raises InvalidArgument (malformed settings, names, seeds, results, notes), NotFound (no
    such tournament, entrant or table), or RuleViolation (not allowed now:
    REGISTRATION_CLOSED, REGISTRATION_FULL, TOO_FEW_ENTRANTS, ROUND_NOT_FINISHED,
    NO_ROUND_LEFT, TOURNAMENT_CANCELLED, ALREADY_STARTED, ...).
    """
    match command:
        case CreateTournament():
            return _create(state, command)
        case Register():
            return _register(state, command)
        case Withdraw():
            return _withdraw(state, command)
        case Start():
            return _start(state, command)
        case RevealSeed():
            return _reveal(state, command)
        case CloseReveal():
            return _close_reveal(state, command)
        case PairRound():
            return _pair(_running(state), command)
        case RecordResult():
            return _record(_running(state), command)
        case End():
            return _end(_running(state), command)
        case Cancel():
            return _cancel(state, command)


def _create(state: TournamentState | None, c: CreateTournament) -> tuple[TournamentEvent, ...]:
    if state is not None:
        raise RuleViolation(
            f"tournament {state.tournament_id} exists", reason="TOURNAMENT_EXISTS", **_tid(state)
        )
    try:
        uuid.UUID(c.tournament_id)
    except (ValueError, TypeError, AttributeError):
        raise InvalidArgument("a tournament id is a UUID", reason="INVALID_ARGUMENT") from None
    c.settings.check()
    if len(c.tournament_seed) != 32:
        raise InvalidArgument("a tournament seed is 32 bytes", reason="INVALID_ARGUMENT")
    name = _text(c.name, "a tournament's name", MAX_NAME_CHARS, empty=True)
    return (TournamentCreated(c.tournament_id, name, c.settings, commitment(c.tournament_seed)),)


def _register(state: TournamentState | None, c: Register) -> tuple[TournamentEvent, ...]:
    if state is None:
        raise NotFound("no such tournament", reason="TOURNAMENT_NOT_FOUND")
    if state.cancelled:
        raise _ended(state)
    if state.phase != REGISTRATION:
        raise RuleViolation(
            f"tournament {state.tournament_id}: registration closed at the start",
            reason="REGISTRATION_CLOSED",
            **_tid(state),
        )
    want = 2 if state.settings.partnerships else 1
    if not isinstance(c.players, tuple) or len(c.players) != want:
        raise InvalidArgument(
            f"an entrant here is {want} player{'s' if want > 1 else ''}",
            reason="WRONG_PLAYER_COUNT",
            **_tid(state),
        )
    players = tuple(_text(p, "a player's name", MAX_NAME_CHARS, empty=False) for p in c.players)
    player_ids, bots = _registered(state, c, len(players))
    taken = {p for e in state.entrants for p in (e.players or ())}
    clash = [p for p in players if p in taken] or (
        [players[0]] if len(set(players)) < len(players) else []
    )
    if clash:
        raise RuleViolation(
            f"tournament {state.tournament_id}: {clash[0]!r} is already registered"[:160],
            reason="NAME_TAKEN",
            **_tid(state),
        )
    said = c.client_seed_commitment
    seed: str | None = None
    if said:
        if not is_commitment(said):
            raise InvalidArgument(
                "client_seed_commitment is the SHA-256 of the client seed: 64 lowercase hex digits",
                reason="BAD_SEED_COMMITMENT",
                **_tid(state),
            )
        if c.client_seed:
            raise InvalidArgument(
                "give the client seed's commitment alone: the seed is revealed after the close",
                reason="SEED_AND_COMMITMENT",
                **_tid(state),
            )
    else:
        seed = _text(c.client_seed, "a client seed", MAX_CLIENT_SEED_CHARS, empty=True)
        said = commitment(seed.encode("utf-8"))
    cap = state.settings.max_entrants
    if cap is not None and len(state.active_entrants(1)) >= cap:
        raise RuleViolation(
            f"tournament {state.tournament_id} is full ({cap} entrants)",
            reason="REGISTRATION_FULL",
            **_tid(state),
        )
    return (EntrantRegistered(len(state.entrants) + 1, players, seed, said, player_ids, bots),)


def _registered(
    state: TournamentState, c: Register, players: int
) -> tuple[tuple[str, ...], tuple[bool, ...]]:
    """The registered players of an entrant (RATINGS.md): an id for each player ("" for
    one entered by name alone), each a program or not; both empty when none is registered.
    Raises InvalidArgument for lists that do not match the players, RuleViolation for a
    player without an id in a rated tournament (PLAYER_REQUIRED) or a registered player
    entered twice (PLAYER_ALREADY_ENTERED)."""
    ids, bots = c.player_ids, c.bots
    if not ids and not bots:
        ids, bots = ("",) * players, (False,) * players
    if (
        not isinstance(ids, tuple)
        or not isinstance(bots, tuple)
        or len(ids) != players
        or len(bots) != players
        or not all(p == "" or is_player_id(p) for p in ids)
        or not all(isinstance(b, bool) and (p or not b) for p, b in zip(ids, bots, strict=True))
    ):
        raise InvalidArgument(
            "an entrant's registered players are an id (or nothing) and a bot flag for each player",
            **_tid(state),
        )
    if state.settings.rated and not all(ids):
        raise RuleViolation(
            f"tournament {state.tournament_id} is rated: every player is a registered player, "
            "with its player token",
            reason="PLAYER_REQUIRED",
            **_tid(state),
        )
    entered = {p for e in state.entrants for p in e.player_ids if p}
    named = [p for p in ids if p]
    if len(set(named)) < len(named) or entered.intersection(named):
        raise RuleViolation(
            f"tournament {state.tournament_id}: a registered player enters a tournament once",
            reason="PLAYER_ALREADY_ENTERED",
            **_tid(state),
        )
    if not named:
        return (), ()
    return ids, bots


def _entrant(state: TournamentState, number: object) -> Entrant:
    if isinstance(number, bool) or not isinstance(number, int):
        raise InvalidArgument("an entrant is its registration number", **_tid(state))
    if not 1 <= number <= len(state.entrants):
        raise NotFound(
            f"tournament {state.tournament_id} has no entrant {number}",
            reason="NOT_AN_ENTRANT",
            entrant=number,
            **_tid(state),
        )
    return state.entrants[number - 1]


def _withdraw(state: TournamentState | None, c: Withdraw) -> tuple[TournamentEvent, ...]:
    if state is None:
        raise NotFound("no such tournament", reason="TOURNAMENT_NOT_FOUND")
    if state.phase == ENDED:
        raise _ended(state)
    entrant = _entrant(state, c.entrant)
    if entrant.withdrawn_after_round is not None:
        raise RuleViolation(
            f"tournament {state.tournament_id}: entrant {c.entrant} has withdrawn already",
            reason="ALREADY_WITHDRAWN",
            entrant=c.entrant,
            **_tid(state),
        )
    by = _actor(c.by, (ENTRANT, ORGANISER, SERVER))
    return (EntrantWithdrew(c.entrant, state.round, by, _note(c.note)),)


def _registering(state: TournamentState | None, started: str) -> TournamentState:
    """`state`, open for registration. Raises NotFound, RuleViolation (TOURNAMENT_ENDED,
    TOURNAMENT_CANCELLED, ALREADY_STARTED: the tournament `started`)."""
    if state is None:
        raise NotFound("no such tournament", reason="TOURNAMENT_NOT_FOUND")
    if state.phase == ENDED:
        raise _ended(state)
    if state.phase != REGISTRATION:
        raise RuleViolation(
            f"tournament {state.tournament_id} {started}", reason="ALREADY_STARTED", **_tid(state)
        )
    return state


def _start(state: TournamentState | None, c: Start) -> tuple[TournamentEvent, ...]:
    state = _registering(state, "has started already")
    _check_seed(state, c.tournament_seed)
    try:
        state.settings.check_entrants(len(state.active_entrants(1)))
    except InvalidArgument as error:
        raise RuleViolation(error.message, reason=error.reason, **_tid(state)) from None
    if not state.unrevealed():
        # Every entrant gave its seed at registration: nothing to wait for.
        return (_seeded(state, c.tournament_seed),)
    if isinstance(c.at_ms, bool) or not isinstance(c.at_ms, int) or c.at_ms < 0:
        raise InvalidArgument("the close's time is Unix ms", **_tid(state))
    return (RegistrationClosed(c.at_ms + state.settings.reveal_window * 1000),)


def _seeded(state: TournamentState, tournament_seed: bytes) -> TournamentStarted:
    """The seeding of the entrants that have their seeds (section 3), in registration
    order: those withdrawn before revealing take no part."""
    part = [e for e in state.entrants if e.client_seed is not None]
    order = seeding_order(
        tournament_seed,
        state.tournament_id,
        [e.seed for e in part],
        [e.entrant for e in part],
    )
    return TournamentStarted(order)


def _reveal(state: TournamentState | None, c: RevealSeed) -> tuple[TournamentEvent, ...]:
    if state is None:
        raise NotFound("no such tournament", reason="TOURNAMENT_NOT_FOUND")
    if state.phase == REGISTRATION:
        raise RuleViolation(
            f"tournament {state.tournament_id} is open for registration: seeds are revealed "
            "once the organiser has started it",
            reason="REVEAL_NOT_OPEN",
            **_tid(state),
        )
    entrant = _entrant(state, c.entrant)
    seed = _text(c.client_seed, "a client seed", MAX_CLIENT_SEED_CHARS, empty=True)
    if commitment(seed.encode("utf-8")) != entrant.client_seed_commitment:
        raise InvalidArgument(
            f"tournament {state.tournament_id}: this seed does not hash to entrant "
            f"{c.entrant}'s commitment",
            reason="SEED_DOES_NOT_MATCH",
            entrant=c.entrant,
            **_tid(state),
        )
    if entrant.client_seed is not None:
        raise RuleViolation(
            f"tournament {state.tournament_id}: entrant {c.entrant} has revealed its seed already",
            reason="ALREADY_REVEALED",
            entrant=c.entrant,
            **_tid(state),
        )
    if state.phase != REVEAL:
        raise RuleViolation(
            f"tournament {state.tournament_id}: the reveal window has closed",
            reason="REVEAL_CLOSED",
            entrant=c.entrant,
            **_tid(state),
        )
    if entrant.withdrawn_after_round is not None:
        raise RuleViolation(
            f"tournament {state.tournament_id}: entrant {c.entrant} has withdrawn",
            reason="ALREADY_WITHDRAWN",
            entrant=c.entrant,
            **_tid(state),
        )
    return (EntrantSeedRevealed(c.entrant, seed),)


def _close_reveal(state: TournamentState | None, c: CloseReveal) -> tuple[TournamentEvent, ...]:
    if state is None:
        raise NotFound("no such tournament", reason="TOURNAMENT_NOT_FOUND")
    if state.phase != REVEAL:
        raise RuleViolation(
            f"tournament {state.tournament_id} has no reveal window open",
            reason="REVEAL_NOT_OPEN",
            **_tid(state),
        )
    _check_seed(state, c.tournament_seed)
    silent = state.unrevealed()
    assert state.reveal_deadline_ms is not None
    if silent and c.at_ms < state.reveal_deadline_ms:
        raise _revealing(state)
    withdrawn = tuple(EntrantWithdrew(e, 0, SERVER, NO_REVEAL_NOTE) for e in silent)
    after = fold_tournament(withdrawn, state)
    return (*withdrawn, _seeded(after, c.tournament_seed))


def _pair(state: TournamentState, c: PairRound) -> tuple[TournamentEvent, ...]:
    by = _actor(c.by, (SERVER, ORGANISER))
    if not state.round_finished:
        raise RuleViolation(
            f"tournament {state.tournament_id}: round {state.round} has not finished",
            reason="ROUND_NOT_FINISHED",
            round=state.round,
            **_tid(state),
        )
    if state.over:
        raise RuleViolation(
            f"tournament {state.tournament_id} has no round left to play",
            reason="NO_ROUND_LEFT",
            **_tid(state),
        )
    assert state.seeding is not None and state.tally is not None
    number = state.round + 1
    pairing = pair_round(
        state.settings, state.seeding, state.withdrawn_after(), state.tally, number
    )
    played = play_round(state.tournament_id, pairing)
    return (
        RoundPaired(
            number,
            played.byes,
            tuple(RoundTable(t.table, t.match_id, t.sides) for t in played.tables),
            by,
        ),
    )


def _table(state: TournamentState, round_number: int, table: int) -> PlayedTable:
    """The table, which must exist and wait for its result. Raises NotFound (NO_SUCH_TABLE),
    RuleViolation (RESULT_ALREADY_RECORDED)."""
    rounds = state.rounds
    if not 1 <= round_number <= len(rounds) or not 1 <= table <= len(
        rounds[round_number - 1].tables
    ):
        where = f"round {round_number}" if state.round else "any round: none has been paired"
        raise NotFound(
            f"tournament {state.tournament_id} has no table {table} in {where}"[:200],
            reason="NO_SUCH_TABLE",
            round=round_number,
            table=table,
            **_tid(state),
        )
    found = rounds[round_number - 1].tables[table - 1]
    if found.result is not None:
        raise RuleViolation(
            f"tournament {state.tournament_id}: round {round_number} table {table} has its "
            "result already",
            reason="RESULT_ALREADY_RECORDED",
            round=round_number,
            table=table,
            **_tid(state),
        )
    return found


def _record(state: TournamentState, c: RecordResult) -> tuple[TournamentEvent, ...]:
    table = _table(state, c.round, c.table)
    if len(c.scores) != len(table.sides):
        raise InvalidArgument(
            f"round {c.round} table {c.table} has {len(table.sides)} sides, "
            f"got {len(c.scores)} scores",
            reason="INVALID_RESULT",
            **_tid(state),
        )
    score_result(TableResult(c.reason, tuple(c.scores), c.forfeited_side))
    recorded = ResultRecorded(c.round, c.table, c.reason, tuple(c.scores), c.forfeited_side)
    if c.settled_by is None:
        return (recorded,)
    if c.reason == ABANDONED:
        by, action, entrant = _actor(c.settled_by, (ORGANISER, SERVER)), ABANDON, None
    elif c.reason == FORFEIT and c.forfeited_side is not None:
        by, action = _actor(c.settled_by, (ORGANISER,)), FORFEIT_TABLE
        entrant = table.sides[c.forfeited_side]
    else:
        raise InvalidArgument(
            f"round {c.round} table {c.table}: a match that ended by play was not settled",
            reason="INVALID_RESULT",
            **_tid(state),
        )
    settled = TableSettled(c.round, c.table, action, by, entrant, _note(c.note))
    return (settled, recorded)


def _end(state: TournamentState, c: End) -> tuple[TournamentEvent, ...]:
    if not state.over:
        raise RuleViolation(
            f"tournament {state.tournament_id} is not over: round {state.round} of "
            f"{state.total_rounds}",
            reason="TOURNAMENT_NOT_OVER",
            round=state.round,
            **_tid(state),
        )
    _check_seed(state, c.tournament_seed)
    return (TournamentEnded(c.tournament_seed.hex()),)


def _cancel(state: TournamentState | None, c: Cancel) -> tuple[TournamentEvent, ...]:
    if state is None or state.phase != REVEAL:
        state = _registering(
            state,
            "has started: only a tournament whose round 1 is not paired yet can be "
            "cancelled (withdraw its entrants, or settle its tables)",
        )
    _check_seed(state, c.tournament_seed)
    return (TournamentCancelled(_note(c.note)), TournamentEnded(c.tournament_seed.hex()))


# Settling a table


def check_settle(
    state: TournamentState | None,
    round_number: int,
    table: int,
    action: str,
    forfeited_side: int | None = None,
    note: str = "",
) -> PlayedTable:
    """The table the organiser may settle now by `action` (ABANDON, or FORFEIT_TABLE of
    `forfeited_side`, from 0): it must exist, have a match, and wait for its result.

    Raises NotFound (TOURNAMENT_NOT_FOUND, NO_SUCH_TABLE), RuleViolation
    (TOURNAMENT_NOT_STARTED, TOURNAMENT_ENDED, TABLE_NOT_PLAYED, RESULT_ALREADY_RECORDED),
    InvalidArgument (INVALID_SETTLE_ACTION, SIDE_REQUIRED, NO_SUCH_SIDE, a note too long).
    """
    s = _running(state)
    if action not in (ABANDON, FORFEIT_TABLE):
        raise InvalidArgument(
            "settling a table abandons its match or forfeits a side of it",
            reason="INVALID_SETTLE_ACTION",
            **_tid(s),
        )
    if (action == FORFEIT_TABLE) != (forfeited_side is not None):
        raise InvalidArgument(
            "a forfeit names the side that forfeits, and only a forfeit does",
            reason="SIDE_REQUIRED",
            **_tid(s),
        )
    _note(note)
    found = _table(s, round_number, table)
    if found.match_id is None:
        raise RuleViolation(
            f"tournament {s.tournament_id}: round {round_number} table {table} has no match: "
            "it is its withdrawn entrant's forfeit",
            reason="TABLE_NOT_PLAYED",
            **_tid(s),
        )
    if forfeited_side is not None and not 0 <= forfeited_side < len(found.sides):
        raise InvalidArgument(
            f"round {round_number} table {table} has {len(found.sides)} sides (indexes 0 to "
            f"{len(found.sides) - 1}): there is no side index {forfeited_side}",
            reason="NO_SUCH_SIDE",
            sides=len(found.sides),
            **_tid(s),
        )
    return found


def own_plays(events: Iterable[Event]) -> frozenset[int]:
    """The seats that made a play of their own in a match: not the lead (the server's, as
    every draw and pass), nor a play a timeout made for the seat."""
    return frozenset(
        e.seat for e in events if isinstance(e, TilePlayed) and e.end is not None and not e.auto
    )


def check_settle_match(
    match: MatchState, events: Iterable[Event], action: str, forfeited_side: int | None
) -> None:
    """Whether the table's match, `match` after `events`, may be settled by `action` now:
    it must not have ended; a forfeit needs every seat taken and a side none of whose seats
    has played (`own_plays`).

    Raises MatchNotInProgress (MATCH_ENDED), RuleViolation (MATCH_STILL_SEATING,
    SIDE_HAS_PLAYED)."""
    where = {"match_id": match.match_id}
    if match.result is not None:
        raise MatchNotInProgress(
            f"match {match.match_id} has ended ({match.result.reason}): its result stands",
            reason="MATCH_ENDED",
            **where,
        )
    if action == ABANDON:
        return
    assert forfeited_side is not None
    if match.phase == SEATING:
        raise RuleViolation(
            f"match {match.match_id} is still seating: abandon it, or forfeit a side once "
            "every seat is taken",
            reason="MATCH_STILL_SEATING",
            **where,
        )
    played = own_plays(events) & set(match.sides[forfeited_side])
    if played:
        raise RuleViolation(
            f"match {match.match_id}: side {forfeited_side + 1} (index {forfeited_side}) has "
            "made a play of its own, so it cannot be forfeited; abandon the table instead",
            reason="SIDE_HAS_PLAYED",
            **where,
        )
    assert match.phase == PLAYING


ORGANISER_FORFEIT = "forfeited by the organiser"
"""How the note of a match the organiser forfeits for a side begins."""


def forfeit_note(note: str) -> str:
    """The note of the match's end when the organiser forfeits a side of it, `note` why."""
    return f"{ORGANISER_FORFEIT}: {note}" if note else ORGANISER_FORFEIT


def settlement_of(ended: MatchEnded, by_server: bool = False) -> tuple[str, str] | None:
    """Who settled a table's match that `ended` so, and why: (ORGANISER or SERVER, note)
    for an abandon (the server's when `by_server`: a match it abandoned because its seats
    were never all taken) or the organiser's forfeit (`forfeit_note`); None for an end by
    play, a timeout or a seat's own resignation."""
    if ended.reason == MatchEndReason.ABANDONED and ended.resigned_seat is None:
        return (SERVER if by_server else ORGANISER), ended.note
    if ended.reason == MatchEndReason.FORFEIT and ended.cause == ForfeitCause.RESIGNED:
        head, sep, why = ended.note.partition(": ")
        if ended.note == ORGANISER_FORFEIT or (sep and head == ORGANISER_FORFEIT):
            return ORGANISER, why
    return None


__all__ = [
    "ENDED",
    "NO_REVEAL_NOTE",
    "ORGANISER_FORFEIT",
    "REGISTRATION",
    "REVEAL",
    "RUNNING",
    "Cancel",
    "CloseReveal",
    "CreateTournament",
    "End",
    "PairRound",
    "RecordResult",
    "Register",
    "RevealSeed",
    "Start",
    "TournamentCommand",
    "TournamentState",
    "Withdraw",
    "check_settle",
    "check_settle_match",
    "decide_tournament",
    "evolve_tournament",
    "fold_tournament",
    "forfeit_note",
    "own_plays",
    "settlement_of",
]
