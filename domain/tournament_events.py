"""The facts of a tournament's stream, and their payloads (schema version 2).

A tournament is an aggregate of its own: its events are stored in the same append-only table
as a match's, under these type names, and read back with `decode`. The seed itself is never
in an event before `TournamentEnded` reveals it.

Version 2 added who withdrew an entrant (`EntrantWithdrew.by`, with the organiser's `note`)
and who paired a round (`RoundPaired.by`), and the types `TableSettled` and
`TournamentCancelled`. Stored payloads are never rewritten: a version 1 payload is upcast when
read, who acted taken from the actor its row was written by (the server recorded "organiser"
for the organiser's withdrawals and rounds started by hand; anyone else's withdrawal was the
entrant's own, and anyone else's pairing the server's), and a tournament created at version 1
keeps the record it had (`TournamentCreated.records_interventions`).

Entrants commit to their client seeds at registration and reveal them after the close
(TOURNAMENT.md section 3): `EntrantRegistered` carries `client_seed_commitment`, and its
`client_seed` only when the client gave the seed itself (null otherwise, until
`EntrantSeedRevealed`); `RegistrationClosed` opens the reveal window. These were added to
version 2 as fields and types that older payloads lack: an `EntrantRegistered` without a
commitment is one whose seed was given at registration, its commitment computed when read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import CorruptRecord
from .tournament_fairness import commitment
from .tournament_pairing import Settings
from .tournament_record import (
    ABANDON,
    ACTORS,
    ENTRANT,
    FORFEIT_TABLE,
    ORGANISER,
    SERVER,
    settings_from_json,
    settings_json,
)

TOURNAMENT_SCHEMA_VERSION = 2
ORGANISER_ACTOR = "organiser"
"""The actor the server records on the rows the organiser's token wrote."""


@dataclass(frozen=True, slots=True)
class TournamentCreated:
    """`records_interventions`: false for a tournament created before interventions were
    recorded (a version 1 creation), whose record keeps the shape it had (no interventions,
    no `withdrawn_by`): an abandoned table of it says nothing of who abandoned it. Not in
    the payload: its version says it."""

    tournament_id: str
    name: str
    settings: Settings
    commitment: str
    records_interventions: bool = True


@dataclass(frozen=True, slots=True)
class EntrantRegistered:
    """Entrant number `entrant` (1-based, registration order), its players' names and its
    client seed's commitment; `client_seed` when the client gave the seed itself (counted
    as revealed at the close), else None until `EntrantSeedRevealed`. For players registered
    as such (RATINGS.md), their ids ("" for one entered by name alone) and whether each is a
    program, both empty when none is."""

    entrant: int
    players: tuple[str, ...]
    client_seed: str | None
    client_seed_commitment: str = ""
    player_ids: tuple[str, ...] = ()
    bots: tuple[bool, ...] = ()

    def __post_init__(self) -> None:
        if not self.client_seed_commitment and self.client_seed is not None:
            seeded = commitment(self.client_seed.encode("utf-8"))
            object.__setattr__(self, "client_seed_commitment", seeded)


@dataclass(frozen=True, slots=True)
class RegistrationClosed:
    """The start closed registration: entrants reveal their seeds until `reveal_deadline_ms`
    (Unix ms, the close plus the reveal window), or until every one has."""

    reveal_deadline_ms: int


@dataclass(frozen=True, slots=True)
class EntrantSeedRevealed:
    """Entrant `entrant` revealed its client seed, which hashes to its commitment."""

    entrant: int
    client_seed: str


@dataclass(frozen=True, slots=True)
class EntrantWithdrew:
    """`after_round`: the last round the entrant was paired in (0 before the start); `by`:
    who withdrew it (ENTRANT, ORGANISER, SERVER), `note` why, in the organiser's words."""

    entrant: int
    after_round: int
    by: str = ENTRANT
    note: str = ""


@dataclass(frozen=True, slots=True)
class TournamentStarted:
    seeding: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class RoundTable:
    """A paired table: its match id, or None when an entrant at it had withdrawn (the table
    is then its forfeit), and the entrant of each side."""

    table: int
    match_id: str | None
    sides: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class RoundPaired:
    """`by`: SERVER when the server paired it on its own, ORGANISER when started by hand."""

    round: int
    byes: tuple[int, ...]
    tables: tuple[RoundTable, ...]
    by: str = SERVER


@dataclass(frozen=True, slots=True)
class TableSettled:
    """A table's match ended by someone rather than by play (TOURNAMENT.md section 3), its
    result recorded right after: `action` ABANDON (by the organiser, or the server for a match
    never seated) or FORFEIT_TABLE (by the organiser, for a side that never played: `entrant`
    is its entrant), `note` why."""

    round: int
    table: int
    action: str
    by: str
    entrant: int | None
    note: str


@dataclass(frozen=True, slots=True)
class TournamentCancelled:
    """The organiser ended the tournament before its start; `TournamentEnded` follows."""

    note: str


@dataclass(frozen=True, slots=True)
class ResultRecorded:
    round: int
    table: int
    reason: str
    scores: tuple[int, ...]
    forfeited_side: int | None = None


@dataclass(frozen=True, slots=True)
class TournamentEnded:
    tournament_seed: str


TournamentEvent = (
    TournamentCreated
    | EntrantRegistered
    | RegistrationClosed
    | EntrantSeedRevealed
    | EntrantWithdrew
    | TournamentStarted
    | RoundPaired
    | TableSettled
    | ResultRecorded
    | TournamentCancelled
    | TournamentEnded
)

TOURNAMENT_EVENT_TYPES: tuple[type[TournamentEvent], ...] = (
    TournamentCreated,
    EntrantRegistered,
    RegistrationClosed,
    EntrantSeedRevealed,
    EntrantWithdrew,
    TournamentStarted,
    RoundPaired,
    TableSettled,
    ResultRecorded,
    TournamentCancelled,
    TournamentEnded,
)


def encode_tournament_event(event: TournamentEvent) -> tuple[str, int, dict[str, Any]]:
    """(type name, schema version, JSON-able payload)."""
    payload: dict[str, Any]
    match event:
        case TournamentCreated():
            payload = {
                "tournament_id": event.tournament_id,
                "name": event.name,
                "settings": settings_json(event.settings),
                "commitment": event.commitment,
            }
        case EntrantRegistered():
            payload = {
                "entrant": event.entrant,
                "players": list(event.players),
                "client_seed": event.client_seed,
                "client_seed_commitment": event.client_seed_commitment,
            }
            if event.player_ids:
                # Only when a registered player entered: other payloads keep their bytes.
                payload["player_ids"] = list(event.player_ids)
                payload["bots"] = list(event.bots)
        case RegistrationClosed():
            payload = {"reveal_deadline_ms": event.reveal_deadline_ms}
        case EntrantSeedRevealed():
            payload = {"entrant": event.entrant, "client_seed": event.client_seed}
        case EntrantWithdrew():
            payload = {
                "entrant": event.entrant,
                "after_round": event.after_round,
                "by": event.by,
                "note": event.note,
            }
        case TournamentStarted():
            payload = {"seeding": list(event.seeding)}
        case RoundPaired():
            payload = {
                "round": event.round,
                "byes": list(event.byes),
                "tables": [
                    {"table": t.table, "match_id": t.match_id, "sides": list(t.sides)}
                    for t in event.tables
                ],
                "by": event.by,
            }
        case TableSettled():
            payload = {
                "round": event.round,
                "table": event.table,
                "action": event.action,
                "by": event.by,
                "entrant": event.entrant,
                "note": event.note,
            }
        case TournamentCancelled():
            payload = {"note": event.note}
        case ResultRecorded():
            payload = {
                "round": event.round,
                "table": event.table,
                "reason": event.reason,
                "scores": list(event.scores),
                "forfeited_side": event.forfeited_side,
            }
        case TournamentEnded():
            payload = {"tournament_seed": event.tournament_seed}
    return type(event).__name__, TOURNAMENT_SCHEMA_VERSION, payload


def is_commitment(value: object) -> bool:
    """Whether `value` is a SHA-256 as commitments are written: 64 lowercase hex digits."""
    return (
        isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)
    )


def _bad(type_name: str, why: str) -> CorruptRecord:
    return CorruptRecord(f"{type_name} payload: {why}", event_type=type_name)


def _field(type_name: str, payload: Mapping[str, Any], key: str, kind: str) -> Any:
    if key not in payload:
        raise _bad(type_name, f"{key} is missing")
    v = payload[key]
    ok = {
        "str": isinstance(v, str),
        "str?": v is None or isinstance(v, str),
        "int": isinstance(v, int) and not isinstance(v, bool),
        "int?": v is None or (isinstance(v, int) and not isinstance(v, bool)),
        "ints": isinstance(v, list)
        and all(isinstance(x, int) and not isinstance(x, bool) for x in v),
        "strs": isinstance(v, list) and all(isinstance(x, str) for x in v),
        "bools": isinstance(v, list) and all(isinstance(x, bool) for x in v),
        "list": isinstance(v, list),
        "actor": isinstance(v, str) and v in ACTORS,
        "commitment": is_commitment(v),
        "settle_action": v in (ABANDON, FORFEIT_TABLE),
    }[kind]
    if not ok:
        raise _bad(type_name, f"{key} is not {kind}")
    return tuple(v) if kind in ("ints", "strs", "bools") else v


_FIELDS: dict[str, tuple[str, ...]] = {
    "TournamentCreated": ("tournament_id", "name", "settings", "commitment"),
    "EntrantRegistered": (
        "entrant",
        "players",
        "client_seed",
        "client_seed_commitment",
        "player_ids",
        "bots",
    ),
    "RegistrationClosed": ("reveal_deadline_ms",),
    "EntrantSeedRevealed": ("entrant", "client_seed"),
    "EntrantWithdrew": ("entrant", "after_round", "by", "note"),
    "TournamentStarted": ("seeding",),
    "RoundPaired": ("round", "byes", "tables", "by"),
    "TableSettled": ("round", "table", "action", "by", "entrant", "note"),
    "ResultRecorded": ("round", "table", "reason", "scores", "forfeited_side"),
    "TournamentCancelled": ("note",),
    "TournamentEnded": ("tournament_seed",),
}
_NEW_IN_2 = frozenset(
    {"TableSettled", "TournamentCancelled", "RegistrationClosed", "EntrantSeedRevealed"}
)


def _upcast_1(type_name: str, payload: Mapping[str, Any], actor: str) -> Mapping[str, Any]:
    """A version 1 payload as version 2 writes it: who acted, from the row's `actor`."""
    by_organiser = actor == ORGANISER_ACTOR
    if type_name == "EntrantWithdrew" and "by" not in payload and "note" not in payload:
        return {**payload, "by": ORGANISER if by_organiser else ENTRANT, "note": ""}
    if type_name == "RoundPaired" and "by" not in payload:
        return {**payload, "by": ORGANISER if by_organiser else SERVER}
    return payload


def decode_tournament_event(
    type_name: str, version: int, payload: Mapping[str, Any], actor: str = ""
) -> TournamentEvent:
    """The event a stored payload holds, a version 1 payload upcast (`actor`: who its row
    was written by, as the store records it).

    Raises CorruptRecord for an unknown type or version, or a malformed payload.
    """
    if type_name not in _FIELDS:
        raise CorruptRecord(f"unknown tournament event type {type_name!r}"[:120])
    if version == 1 and type_name not in _NEW_IN_2 and isinstance(payload, Mapping):
        payload = _upcast_1(type_name, payload, actor)
    elif version != TOURNAMENT_SCHEMA_VERSION:
        raise _bad(type_name, f"unknown schema version {version}")
    if not isinstance(payload, Mapping):
        raise _bad(type_name, "not an object")
    extra = set(payload) - set(_FIELDS[type_name])
    if extra:
        raise _bad(type_name, f"unknown fields {sorted(extra)}")

    def f(key: str, kind: str) -> Any:
        return _field(type_name, payload, key, kind)

    match type_name:
        case "TournamentCreated":
            return TournamentCreated(
                f("tournament_id", "str"),
                f("name", "str"),
                settings_from_json(payload.get("settings"), f"{type_name}.settings"),
                f("commitment", "str"),
                records_interventions=version >= 2,
            )
        case "EntrantRegistered":
            registered = "player_ids" in payload or "bots" in payload
            player_ids = f("player_ids", "strs") if registered else ()
            bots = f("bots", "bools") if registered else ()
            if "client_seed_commitment" not in payload:
                # Registered before commitments: the seed was given, and is the commitment's.
                return EntrantRegistered(
                    f("entrant", "int"),
                    f("players", "strs"),
                    f("client_seed", "str"),
                    player_ids=player_ids,
                    bots=bots,
                )
            seed = f("client_seed", "str?")
            said = f("client_seed_commitment", "commitment")
            if seed is not None and commitment(seed.encode("utf-8")) != said:
                raise _bad(type_name, "client_seed does not hash to client_seed_commitment")
            return EntrantRegistered(
                f("entrant", "int"), f("players", "strs"), seed, said, player_ids, bots
            )
        case "RegistrationClosed":
            return RegistrationClosed(f("reveal_deadline_ms", "int"))
        case "EntrantSeedRevealed":
            return EntrantSeedRevealed(f("entrant", "int"), f("client_seed", "str"))
        case "EntrantWithdrew":
            return EntrantWithdrew(
                f("entrant", "int"), f("after_round", "int"), f("by", "actor"), f("note", "str")
            )
        case "TournamentStarted":
            return TournamentStarted(f("seeding", "ints"))
        case "RoundPaired":
            tables = []
            for t in f("tables", "list"):
                if not isinstance(t, Mapping) or set(t) != {"table", "match_id", "sides"}:
                    raise _bad(type_name, "a table is {table, match_id, sides}")
                tables.append(
                    RoundTable(
                        _field(type_name, t, "table", "int"),
                        _field(type_name, t, "match_id", "str?"),
                        _field(type_name, t, "sides", "ints"),
                    )
                )
            return RoundPaired(
                f("round", "int"), f("byes", "ints"), tuple(tables), f("by", "actor")
            )
        case "TableSettled":
            return TableSettled(
                f("round", "int"),
                f("table", "int"),
                f("action", "settle_action"),
                f("by", "actor"),
                f("entrant", "int?"),
                f("note", "str"),
            )
        case "TournamentCancelled":
            return TournamentCancelled(f("note", "str"))
        case "ResultRecorded":
            return ResultRecorded(
                f("round", "int"),
                f("table", "int"),
                f("reason", "str"),
                f("scores", "ints"),
                f("forfeited_side", "int?"),
            )
        case _:
            return TournamentEnded(f("tournament_seed", "str"))
