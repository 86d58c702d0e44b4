"""The tournament aggregate: `decide`, `evolve`, `fold`, as for a match.

`decide_tournament(state, command)` checks a command against TOURNAMENT.md and returns the
events it causes, or raises; `evolve_tournament(state, event)` applies one fact without
checking; `fold_tournament(events)` rebuilds the state. Pairing, scoring and standings are
the pure functions of `tournament_pairing` and `tournament_standings`; the state keeps a
running `Tally`, so a result costs no recount.

The tournament seed is the server's secret until the end: the commands that need it carry
it, and only its commitment is recorded until `End` reveals it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import singledispatch

from .errors import InvalidArgument, NotFound, RuleViolation
from .tournament_events import (
    EntrantRegistered,
    EntrantWithdrew,
    ResultRecorded,
    RoundPaired,
    RoundTable,
    TournamentCreated,
    TournamentEnded,
    TournamentEvent,
    TournamentStarted,
)
from .tournament_fairness import commitment, seeding_order
from .tournament_pairing import Settings, active, pair_round
from .tournament_record import (
    Entrant,
    PlayedRound,
    PlayedTable,
    Tournament,
    build_tournament_record,
    play_round,
)
from .tournament_standings import TableResult, Tally, score_result, walkover

REGISTRATION = "registration"
RUNNING = "running"
ENDED = "ended"

MAX_NAME_CHARS = 100
MAX_CLIENT_SEED_CHARS = 256


# Commands


@dataclass(frozen=True, slots=True)
class CreateTournament:
    tournament_id: str
    settings: Settings
    tournament_seed: bytes
    name: str = ""


@dataclass(frozen=True, slots=True)
class Register:
    """Register an entrant: one player, or two at partnership tables."""

    players: tuple[str, ...]
    client_seed: str = ""


@dataclass(frozen=True, slots=True)
class Withdraw:
    entrant: int


@dataclass(frozen=True, slots=True)
class Start:
    tournament_seed: bytes


@dataclass(frozen=True, slots=True)
class PairRound:
    """Pair the next round from the results so far."""


@dataclass(frozen=True, slots=True)
class RecordResult:
    round: int
    table: int
    reason: str
    scores: tuple[int, ...]
    forfeited_side: int | None = None


@dataclass(frozen=True, slots=True)
class End:
    tournament_seed: bytes


TournamentCommand = CreateTournament | Register | Withdraw | Start | PairRound | RecordResult | End


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
        return self.settings.total_rounds(len(self.entrants))

    @property
    def over(self) -> bool:
        """Whether a running tournament has nothing left to play: its latest round has
        finished and it was the last, or fewer than two entrants are left."""
        if self.phase != RUNNING or not self.round_finished:
            return False
        return self.round >= self.total_rounds or len(self.active_entrants(self.round + 1)) < 2

    def as_tournament(self) -> Tournament:
        return Tournament(
            tournament_id=self.tournament_id,
            settings=self.settings,
            commitment=self.commitment,
            entrants=self.entrants,
            seeding=self.seeding,
            rounds=self.rounds,
            tournament_seed=self.tournament_seed,
            name=self.name,
            ended=self.phase == ENDED,
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
    return TournamentState(e.tournament_id, e.name, e.settings, e.commitment)


def _existing(state: TournamentState | None) -> TournamentState:
    if state is None:
        raise TypeError("a tournament's first event creates it")
    return state


@_apply.register
def _(e: EntrantRegistered, state: TournamentState | None) -> TournamentState:
    s = _existing(state)
    return replace(s, entrants=(*s.entrants, Entrant(e.entrant, e.client_seed, e.players)))


@_apply.register
def _(e: EntrantWithdrew, state: TournamentState | None) -> TournamentState:
    s = _existing(state)
    entrants = tuple(
        replace(x, withdrawn_after_round=e.after_round) if x.entrant == e.entrant else x
        for x in s.entrants
    )
    return replace(s, entrants=entrants)


@_apply.register
def _(e: TournamentStarted, state: TournamentState | None) -> TournamentState:
    s = _existing(state)
    return replace(s, phase=RUNNING, seeding=e.seeding, tally=Tally.start(e.seeding))


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
    return replace(s, rounds=(*s.rounds, PlayedRound(e.round, e.byes, tuple(tables))), tally=tally)


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


def _running(state: TournamentState | None) -> TournamentState:
    if state is None:
        raise NotFound("no such tournament", reason="TOURNAMENT_NOT_FOUND")
    if state.phase == REGISTRATION:
        raise RuleViolation(
            f"tournament {state.tournament_id} has not started",
            reason="TOURNAMENT_NOT_STARTED",
            **_tid(state),
        )
    if state.phase == ENDED:
        raise RuleViolation(
            f"tournament {state.tournament_id} has ended", reason="TOURNAMENT_ENDED", **_tid(state)
        )
    return state


def decide_tournament(
    state: TournamentState | None, command: TournamentCommand
) -> tuple[TournamentEvent, ...]:
    """The events `command` causes.

    Raises InvalidArgument (malformed settings, names, seeds, results), NotFound (no such
    tournament, entrant or table), or RuleViolation (not allowed now: REGISTRATION_CLOSED,
    REGISTRATION_FULL, TOO_FEW_ENTRANTS, ROUND_NOT_FINISHED, NO_ROUND_LEFT, ...).
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
        case PairRound():
            return _pair(_running(state))
        case RecordResult():
            return _record(_running(state), command)
        case End():
            return _end(_running(state), command)


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
    seed = _text(c.client_seed, "a client seed", MAX_CLIENT_SEED_CHARS, empty=True)
    cap = state.settings.max_entrants
    if cap is not None and len(state.active_entrants(1)) >= cap:
        raise RuleViolation(
            f"tournament {state.tournament_id} is full ({cap} entrants)",
            reason="REGISTRATION_FULL",
            **_tid(state),
        )
    return (EntrantRegistered(len(state.entrants) + 1, players, seed),)


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
        raise RuleViolation(
            f"tournament {state.tournament_id} has ended", reason="TOURNAMENT_ENDED", **_tid(state)
        )
    entrant = _entrant(state, c.entrant)
    if entrant.withdrawn_after_round is not None:
        raise RuleViolation(
            f"tournament {state.tournament_id}: entrant {c.entrant} has withdrawn already",
            reason="ALREADY_WITHDRAWN",
            entrant=c.entrant,
            **_tid(state),
        )
    return (EntrantWithdrew(c.entrant, state.round),)


def _start(state: TournamentState | None, c: Start) -> tuple[TournamentEvent, ...]:
    if state is None:
        raise NotFound("no such tournament", reason="TOURNAMENT_NOT_FOUND")
    if state.phase != REGISTRATION:
        raise RuleViolation(
            f"tournament {state.tournament_id} has started already",
            reason="ALREADY_STARTED",
            **_tid(state),
        )
    _check_seed(state, c.tournament_seed)
    try:
        state.settings.check_entrants(len(state.active_entrants(1)))
    except InvalidArgument as error:
        raise RuleViolation(error.message, reason=error.reason, **_tid(state)) from None
    order = seeding_order(
        c.tournament_seed, state.tournament_id, [e.client_seed for e in state.entrants]
    )
    return (TournamentStarted(order),)


def _pair(state: TournamentState) -> tuple[TournamentEvent, ...]:
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
        ),
    )


def _record(state: TournamentState, c: RecordResult) -> tuple[TournamentEvent, ...]:
    if not 1 <= c.round <= state.round or not 1 <= c.table <= len(state.rounds[c.round - 1].tables):
        raise NotFound(
            f"tournament {state.tournament_id} has no table {c.table} in round {c.round}",
            reason="NO_SUCH_TABLE",
            round=c.round,
            table=c.table,
            **_tid(state),
        )
    table = state.rounds[c.round - 1].tables[c.table - 1]
    if table.result is not None:
        raise RuleViolation(
            f"tournament {state.tournament_id}: round {c.round} table {c.table} has its result",
            reason="RESULT_ALREADY_RECORDED",
            round=c.round,
            table=c.table,
            **_tid(state),
        )
    if len(c.scores) != len(table.sides):
        raise InvalidArgument(
            f"round {c.round} table {c.table} has {len(table.sides)} sides, "
            f"got {len(c.scores)} scores",
            reason="INVALID_RESULT",
            **_tid(state),
        )
    score_result(TableResult(c.reason, tuple(c.scores), c.forfeited_side))
    return (ResultRecorded(c.round, c.table, c.reason, tuple(c.scores), c.forfeited_side),)


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


__all__ = [
    "ENDED",
    "REGISTRATION",
    "RUNNING",
    "CreateTournament",
    "End",
    "PairRound",
    "RecordResult",
    "Register",
    "Start",
    "TournamentCommand",
    "TournamentState",
    "Withdraw",
    "decide_tournament",
    "evolve_tournament",
    "fold_tournament",
]
