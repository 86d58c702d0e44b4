"""The tournament record `bergen-tournament-record/1` (TOURNAMENT.md section 6): built from a
tournament's data, read back, and checked by recomputing everything that follows from the
seed, the entrants and the table results (commitment, seeding, every round's pairing, match
ids, each result's places, match points and margins, and the standings), naming the first
place that differs. The match records themselves are checked by the match verifier.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import CorruptRecord, InvalidArgument
from .tournament_fairness import (
    commitment,
    match_id,
    parse_seed,
    seeding_order,
    table_server_seed,
)
from .tournament_pairing import (
    FORMATS,
    REVEAL_WINDOW,
    ROUND_ROBIN,
    Pairing,
    Settings,
    active,
    pair_round,
    seats_of,
)
from .tournament_standings import (
    ABANDONED,
    FORFEIT,
    ScoredResult,
    Standing,
    TableResult,
    Tally,
    fraction_text,
    parse_fraction,
    score_result,
    walkover,
)

TOURNAMENT_RECORD_FORMAT = "bergen-tournament-record/1"
TOURNAMENT_STREAM_PREFIX = "tournament-"
"""Begins a tournament's stream id in the event log (no match id does): the stream its
record's `log` and `transparency` name (`tournament_stream`)."""
TRANSPARENCY_KEYS = frozenset(
    {"checkpoint", "leaf_index", "tree_size", "position", "recorded_us", "proof"}
)
"""The fields of a record's `transparency` (a match record's too: RECORD.md's, docs/api.md)."""


def tournament_stream(tournament_id: str) -> str:
    """The stream id of a tournament's events."""
    return TOURNAMENT_STREAM_PREFIX + tournament_id


# Who did something to a tournament (section 3), as the events and the record name them.
ENTRANT = "entrant"
ORGANISER = "organiser"
SERVER = "server"
ACTORS = frozenset({ENTRANT, ORGANISER, SERVER})

# What an intervention did: every result not reached by play, and every step taken by hand.
WITHDRAW = "withdraw"
ABANDON = "abandon"
FORFEIT_TABLE = "forfeit"
START_ROUND = "start_round"
CANCEL = "cancel"
ACTIONS = frozenset({WITHDRAW, ABANDON, FORFEIT_TABLE, START_ROUND, CANCEL})

NO_REVEAL = "no_reveal"
"""The record's `withdrawn_by` for an entrant the server withdrew (section 3: it did not
reveal its seed); the events and the interventions say `server`."""
MAX_NOTE_CHARS = 200
"""The longest note the organiser gives an intervention."""
UNPLAYABLE = "no match: the store holds rows at this table's match id that no server wrote"
"""How the reason begins when the server abandons a table whose match it cannot trust (rows
at its derived id that fail their authenticators, put there before or during its play): the
table scores as abandoned, and its match is in no audit pack, for no record of it can be
made."""


def unplayable_tables(interventions: Sequence[Mapping[str, Any]]) -> frozenset[tuple[int, int]]:
    """(round, table) of every table the server abandoned as `UNPLAYABLE`, from a record's
    `interventions` (JSON objects)."""
    return frozenset(
        (int(i["round"]), int(i["table"]))
        for i in interventions
        if i.get("action") == ABANDON
        and i.get("by") == SERVER
        and i.get("table") is not None
        and str(i.get("reason", "")).startswith(UNPLAYABLE)
    )


@dataclass(frozen=True, slots=True)
class Entrant:
    """An entrant: its 1-based registration number, its players' names (two in
    partnerships), its client seed (None until revealed, and for good when it never was),
    and the round after which it withdrew (0: before the start) and who withdrew it
    (ENTRANT, ORGANISER, SERVER; None when unknown, as in a record written before it was
    recorded), if it did; its seed's commitment, and its registered players."""

    entrant: int
    client_seed: str | None
    players: tuple[str, ...] | None = None
    withdrawn_after_round: int | None = None
    withdrawn_by: str | None = None
    client_seed_commitment: str | None = None
    """SHA-256 of the client seed (lowercase hex), given at registration; None in a record
    written before entrants committed to their seeds."""
    player_ids: tuple[str, ...] = ()
    """Each player's registered player id ("" for a player entered by name alone), or
    empty when none is registered (RATINGS.md)."""
    bots: tuple[bool, ...] = ()
    """Whether each registered player is a program (not in the record, which names ids)."""

    @property
    def revealed(self) -> bool:
        return self.client_seed is not None

    @property
    def seed(self) -> str:
        """The client seed of an entrant that has revealed it (every entrant that is seeded
        or seated has). Raises ValueError for one that has not."""
        if self.client_seed is None:
            raise ValueError(f"entrant {self.entrant} has not revealed its client seed")
        return self.client_seed


@dataclass(frozen=True, slots=True)
class Intervention:
    """What the organiser or the server did that play did not (section 3), in the order it
    happened: `round` is the latest round paired then (0 before the first); `table` the
    table it settled, if one; `entrant` the entrant withdrawn or forfeiting, if one; `note`
    the organiser's words."""

    round: int
    table: int | None
    action: str
    by: str
    entrant: int | None = None
    note: str = ""


@dataclass(frozen=True, slots=True)
class PlayedTable:
    """A table of a round: its match id (None for a table not played because an entrant
    withdrew), the entrant of each side, and its result once the match has ended."""

    table: int
    match_id: str | None
    sides: tuple[int, ...]
    result: ScoredResult | None = None


@dataclass(frozen=True, slots=True)
class PlayedRound:
    round: int
    byes: tuple[int, ...]
    tables: tuple[PlayedTable, ...]

    @property
    def finished(self) -> bool:
        return all(t.result is not None for t in self.tables)


@dataclass(frozen=True, slots=True)
class Tournament:
    """What a tournament record holds, as data. `seeding` is None until the start,
    `tournament_seed` (hex) until the end."""

    tournament_id: str
    settings: Settings
    commitment: str
    entrants: tuple[Entrant, ...]
    seeding: tuple[int, ...] | None = None
    rounds: tuple[PlayedRound, ...] = ()
    tournament_seed: str | None = None
    name: str | None = None
    ended: bool = False
    interventions: tuple[Intervention, ...] | None = None
    """None for a record written before interventions were recorded (then no entrant says
    who withdrew it either)."""

    @property
    def cancelled(self) -> bool:
        """Ended by the organiser before its start."""
        return any(i.action == CANCEL for i in self.interventions or ())

    def taking_part(self) -> tuple[Entrant, ...]:
        """The entrants that take part in the seeding: all but those withdrawn before round 1
        for not revealing their seeds (section 3), and those that withdrew before revealing
        theirs (no seed, so no part in the seeding key)."""
        return tuple(
            e
            for e in self.entrants
            if e.revealed and not (e.withdrawn_after_round == 0 and e.withdrawn_by == SERVER)
        )

    def withdrawn_after(self) -> tuple[int | None, ...]:
        """`withdrawn_after_round` by entrant number (index 0 unused)."""
        return (None, *(e.withdrawn_after_round for e in self.entrants))


def tally_of(
    seeding: Sequence[int], rounds: Sequence[PlayedRound], entrants: int | None = None
) -> Tally:
    """The tally of every bye and every result recorded in `rounds`, among `entrants`
    registered (Tally.start)."""
    tally = Tally.start(seeding, entrants)
    for r in rounds:
        for b in r.byes:
            tally = tally.with_bye(b)
        for t in r.tables:
            if t.result is not None:
                tally = tally.with_table(t.sides, t.result)
    return tally


def play_round(tournament_id: str, pairing: Pairing) -> PlayedRound:
    """A paired round as recorded: each played table's derived match id; a table not
    played because an entrant withdrew has no match id and its walkover result."""
    return PlayedRound(
        pairing.round,
        pairing.byes,
        tuple(
            PlayedTable(t.table, match_id(tournament_id, pairing.round, t.table), t.sides)
            if t.played
            else PlayedTable(t.table, None, t.sides, walkover(len(t.sides), t.withdrawn))
            for t in pairing.tables
        ),
    )


def next_round(tournament: Tournament) -> PlayedRound:
    """The next round of a started tournament, paired from the results so far.

    Raises InvalidArgument when the tournament has not started or has no further round.
    """
    if tournament.seeding is None:
        raise InvalidArgument("the tournament has not started", reason="NOT_STARTED")
    tally = tally_of(tournament.seeding, tournament.rounds, len(tournament.entrants))
    number = len(tournament.rounds) + 1
    pairing = pair_round(
        tournament.settings, tournament.seeding, tournament.withdrawn_after(), tally, number
    )
    return play_round(tournament.tournament_id, pairing)


@dataclass(frozen=True, slots=True)
class TableMatch:
    """What a table's match must be: its id, server seed, and (entrant, player index) on
    each seat, for checking its match record."""

    round: int
    table: int
    match_id: str
    server_seed: str
    seats: tuple[tuple[int, int], ...]


def table_matches(tournament: Tournament) -> tuple[TableMatch, ...]:
    """Every played table's match, once the seed is revealed (a table the server abandoned
    as `UNPLAYABLE` has none).

    Raises InvalidArgument when it is not.
    """
    if tournament.tournament_seed is None:
        raise InvalidArgument("the tournament seed is not revealed yet", reason="NOT_ENDED")
    seed = parse_seed(tournament.tournament_seed)
    unplayable = unplayable_tables([intervention_json(i) for i in tournament.interventions or ()])
    return tuple(
        TableMatch(
            r.round,
            t.table,
            t.match_id,
            table_server_seed(seed, t.match_id).hex(),
            seats_of(tournament.settings, t.sides),
        )
        for r in tournament.rounds
        for t in r.tables
        if t.match_id is not None and (r.round, t.table) not in unplayable
    )


# Writing


def settings_json(s: Settings, every: bool = True) -> dict[str, Any]:
    """The settings as the record and the events write them: every one, defaults included
    (section 6); with `every` false, the round delay, the reveal window, the entrant cap and
    `rated` only when they are not the defaults, as records made before section 6 asked for every
    one (the test vectors) have them."""
    out: dict[str, Any] = {"format": s.format}
    if s.format == ROUND_ROBIN:
        out["double_round_robin"] = s.double_round_robin
    else:
        out["rounds"] = s.rounds
    if every or s.round_delay:
        out["round_delay"] = s.round_delay
    if every or s.reveal_window != REVEAL_WINDOW:
        out["reveal_window"] = s.reveal_window
    if every or s.max_entrants is not None:
        out["max_entrants"] = s.max_entrants
    if every or s.rated:
        out["rated"] = s.rated
    out["table"] = {"seats": s.seats, "partnerships": s.partnerships, "rules": dict(s.rules)}
    return out


def result_json(r: ScoredResult) -> dict[str, Any]:
    return {
        "reason": r.reason,
        "scores": list(r.scores),
        "places": list(r.places),
        "match_points": [fraction_text(p) for p in r.match_points],
        "margins": list(r.margins),
        "forfeited_side": r.forfeited_side,
    }


def standing_json(s: Standing) -> dict[str, Any]:
    return {
        "rank": s.rank,
        "entrant": s.entrant,
        "match_points": fraction_text(s.match_points),
        "margin": s.margin,
        "buchholz": fraction_text(s.buchholz),
        "wins": s.wins,
    }


def withdrawn_by_json(by: str | None) -> str | None:
    """An entrant's `withdrawn_by` as the record writes it (section 1)."""
    return NO_REVEAL if by == SERVER else by


def intervention_json(i: Intervention) -> dict[str, Any]:
    return {
        "round": i.round,
        "table": i.table,
        "action": i.action,
        "by": i.by,
        "entrant": i.entrant,
        "reason": i.note,
    }


def build_tournament_record(t: Tournament, tally: Tally | None = None) -> dict[str, Any]:
    """The section 6 record of `t` (without `signature`), standings from every result
    recorded. `name` and the players' names are written when known, each entrant's seed
    commitment when known, and its client seed as null until it is revealed. When `t` knows
    its interventions, the record has them, each entrant's `withdrawn_by`, and every setting,
    defaults included; a record made before they were recorded (as the test vectors are) has
    neither, and the settings' round delay, reveal window and entrant cap only when they are
    not the defaults. `tally`, when given, is the tally of `t`'s byes and results already
    counted (the aggregate keeps one), so they are not counted again."""
    record: dict[str, Any] = {"format": TOURNAMENT_RECORD_FORMAT, "tournament_id": t.tournament_id}
    if t.name is not None:
        record["name"] = t.name
    record["settings"] = settings_json(t.settings, every=t.interventions is not None)
    record["commitment"] = t.commitment
    if t.tournament_seed is not None:
        record["tournament_seed"] = t.tournament_seed
    entrants = []
    for e in t.entrants:
        item: dict[str, Any] = {"entrant": e.entrant}
        if e.players is not None:
            item["players"] = list(e.players)
        if any(e.player_ids):
            # TOURNAMENT.md section 6: the players also name each registered player's id,
            # in the order of `players` (null for one entered by name alone).
            item["player_ids"] = [p or None for p in e.player_ids]
        if e.client_seed_commitment is not None:
            item["client_seed_commitment"] = e.client_seed_commitment
        item["client_seed"] = e.client_seed
        item["withdrawn_after_round"] = e.withdrawn_after_round
        if t.interventions is not None:
            item["withdrawn_by"] = withdrawn_by_json(e.withdrawn_by)
        entrants.append(item)
    record["entrants"] = entrants
    if t.interventions is not None:
        record["interventions"] = [intervention_json(i) for i in t.interventions]
    record["seeding"] = None if t.seeding is None else list(t.seeding)
    record["rounds"] = [
        {
            "round": r.round,
            "byes": list(r.byes),
            "tables": [
                {
                    "table": tb.table,
                    "match_id": tb.match_id,
                    "sides": [[e] for e in tb.sides],
                    "result": None if tb.result is None else result_json(tb.result),
                }
                for tb in r.tables
            ],
        }
        for r in t.rounds
    ]
    if t.seeding is None:
        standings: tuple[Standing, ...] = ()
    else:
        standings = (tally or tally_of(t.seeding, t.rounds, len(t.entrants))).standings()
    record["standings"] = [standing_json(s) for s in standings]
    record["ended"] = t.ended
    return record


# Reading


def _bad(place: str, message: str) -> CorruptRecord:
    return CorruptRecord(f"tournament record, {place}: {message}", place=place)


def _get(obj: Mapping[str, Any], key: str, place: str) -> Any:
    if key not in obj:
        raise _bad(place, f"{key} is missing")
    return obj[key]


def _obj(value: Any, place: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise _bad(place, "not an object")
    return value


def _list(value: Any, place: str) -> list[Any]:
    if not isinstance(value, list):
        raise _bad(place, "not a list")
    return value


def _int(value: Any, place: str, *, optional: bool = False) -> Any:
    if value is None and optional:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise _bad(place, f"not an integer: {value!r}"[:120])
    return value


def _str(value: Any, place: str, *, optional: bool = False) -> Any:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise _bad(place, "not a string")
    return value


def _bool(value: Any, place: str) -> bool:
    if not isinstance(value, bool):
        raise _bad(place, "not a boolean")
    return value


def _sides(value: Any, place: str) -> tuple[int, ...]:
    sides = []
    for i, side in enumerate(_list(value, place)):
        members = _list(side, f"{place}[{i}]")
        if len(members) != 1:
            raise _bad(f"{place}[{i}]", "a side holds one entrant")
        sides.append(_int(members[0], f"{place}[{i}][0]"))
    return tuple(sides)


def _result(value: Any, place: str) -> ScoredResult | None:
    if value is None:
        return None
    r = _obj(value, place)
    reason = _str(_get(r, "reason", place), f"{place}.reason")
    scores = tuple(
        _int(s, f"{place}.scores[{i}]")
        for i, s in enumerate(_list(_get(r, "scores", place), f"{place}.scores"))
    )
    forfeited = _int(_get(r, "forfeited_side", place), f"{place}.forfeited_side", optional=True)
    try:
        scored = score_result(TableResult(reason, scores, forfeited))
    except InvalidArgument as e:
        raise _bad(place, e.message) from None
    for key, got, want in (
        ("places", r.get("places"), list(scored.places)),
        ("match_points", r.get("match_points"), [fraction_text(p) for p in scored.match_points]),
        ("margins", r.get("margins"), list(scored.margins)),
    ):
        if got != want:
            raise _bad(f"{place}.{key}", f"is {got!r}, the scores give {want!r}")
    return scored


def settings_from_json(value: Any, place: str = "settings") -> Settings:
    """Settings as `settings_json` writes them, checked.

    Raises CorruptRecord naming the place of the first malformed field.
    """
    s = _obj(value, place)
    table = _obj(_get(s, "table", place), f"{place}.table")
    fmt = _str(_get(s, "format", place), f"{place}.format")
    if fmt not in FORMATS:
        raise _bad(f"{place}.format", f"unknown format {fmt!r}")
    settings = Settings(
        format=fmt,
        seats=_int(_get(table, "seats", f"{place}.table"), f"{place}.table.seats"),
        partnerships=_bool(
            _get(table, "partnerships", f"{place}.table"), f"{place}.table.partnerships"
        ),
        rules=_obj(_get(table, "rules", f"{place}.table"), f"{place}.table.rules"),
        rounds=_int(s.get("rounds"), f"{place}.rounds", optional=True),
        double_round_robin=_bool(s.get("double_round_robin", False), f"{place}.double_round_robin"),
        round_delay=_int(s.get("round_delay", 0), f"{place}.round_delay"),
        max_entrants=_int(s.get("max_entrants"), f"{place}.max_entrants", optional=True),
        reveal_window=_int(s.get("reveal_window", REVEAL_WINDOW), f"{place}.reveal_window"),
        rated=_bool(s.get("rated", False), f"{place}.rated"),
    )
    try:
        settings.check()
    except InvalidArgument as error:
        raise _bad(place, error.message) from None
    return settings


def parse_tournament_record(record: Any) -> Tournament:
    """A record read back as data, each result's places, match points and margins checked
    against its scores.

    Raises CorruptRecord naming the place of the first malformed or inconsistent field.
    """
    r = _obj(record, "record")
    if r.get("format") != TOURNAMENT_RECORD_FORMAT:
        raise _bad("format", f"is not {TOURNAMENT_RECORD_FORMAT}")
    tid = _str(_get(r, "tournament_id", "record"), "tournament_id")
    settings = settings_from_json(_get(r, "settings", "record"))
    known = "interventions" in r
    entrants = []
    for i, value in enumerate(_list(_get(r, "entrants", "record"), "entrants")):
        place = f"entrants[{i}]"
        e = _obj(value, place)
        number = _int(_get(e, "entrant", place), f"{place}.entrant")
        if number != i + 1:
            raise _bad(f"{place}.entrant", f"is {number}, registration number {i + 1}")
        players = None
        if "players" in e:
            players = tuple(
                _str(p, f"{place}.players[{j}]")
                for j, p in enumerate(_list(e["players"], f"{place}.players"))
            )
        player_ids: tuple[str, ...] = ()
        if "player_ids" in e:
            ids = _list(e["player_ids"], f"{place}.player_ids")
            player_ids = tuple(
                "" if p is None else _str(p, f"{place}.player_ids[{j}]") for j, p in enumerate(ids)
            )
            if players is not None and len(player_ids) != len(players):
                raise _bad(f"{place}.player_ids", "has not one entry for each player")
        entrants.append(
            Entrant(
                number,
                _str(_get(e, "client_seed", place), f"{place}.client_seed", optional=True),
                players,
                _int(
                    e.get("withdrawn_after_round"), f"{place}.withdrawn_after_round", optional=True
                ),
                # Required since interventions are recorded; read wherever it is given.
                _withdrawn_by(_get(e, "withdrawn_by", place), f"{place}.withdrawn_by")
                if known or "withdrawn_by" in e
                else None,
                _str(
                    e.get("client_seed_commitment"),
                    f"{place}.client_seed_commitment",
                    optional=True,
                ),
                player_ids,
            )
        )
    interventions = (
        tuple(
            _intervention(v, f"interventions[{i}]")
            for i, v in enumerate(_list(r["interventions"], "interventions"))
        )
        if known
        else None
    )
    seeding_value = _get(r, "seeding", "record")
    seeding = (
        None
        if seeding_value is None
        else tuple(_int(x, f"seeding[{i}]") for i, x in enumerate(_list(seeding_value, "seeding")))
    )
    rounds = []
    for i, value in enumerate(_list(_get(r, "rounds", "record"), "rounds")):
        place = f"rounds[{i}]"
        rd = _obj(value, place)
        tables = []
        for j, tv in enumerate(_list(_get(rd, "tables", place), f"{place}.tables")):
            tplace = f"{place}.tables[{j}]"
            tb = _obj(tv, tplace)
            tables.append(
                PlayedTable(
                    _int(_get(tb, "table", tplace), f"{tplace}.table"),
                    _str(_get(tb, "match_id", tplace), f"{tplace}.match_id", optional=True),
                    _sides(_get(tb, "sides", tplace), f"{tplace}.sides"),
                    _result(_get(tb, "result", tplace), f"{tplace}.result"),
                )
            )
        rounds.append(
            PlayedRound(
                _int(_get(rd, "round", place), f"{place}.round"),
                tuple(
                    _int(b, f"{place}.byes[{k}]")
                    for k, b in enumerate(_list(_get(rd, "byes", place), f"{place}.byes"))
                ),
                tuple(tables),
            )
        )
    _check_log(r)
    return Tournament(
        tournament_id=tid,
        settings=settings,
        commitment=_str(_get(r, "commitment", "record"), "commitment"),
        entrants=tuple(entrants),
        seeding=seeding,
        rounds=tuple(rounds),
        tournament_seed=_str(r.get("tournament_seed"), "tournament_seed", optional=True),
        name=_str(r.get("name"), "name", optional=True),
        ended=_bool(_get(r, "ended", "record"), "ended"),
        interventions=interventions,
    )


def _check_log(r: Mapping[str, Any]) -> None:
    """The shape of `log` (the tournament's stream: its events and the hash at its head)
    and of `transparency` (the checkpoint and inclusion proof of its last event), when the
    record has them, as a match record's. What they prove is checked with the signing key
    (`bergen verify`)."""
    if "log" in r:
        log = _obj(r["log"], "log")
        if set(log) != {"events", "head"}:
            raise _bad("log", "has not exactly the fields events and head")
        if _int(log["events"], "log.events") < 1:
            raise _bad("log.events", "a tournament's stream holds at least one event")
        head = _str(log["head"], "log.head")
        if len(head) != 64 or any(c not in "0123456789abcdef" for c in head):
            raise _bad("log.head", "not a SHA-256 (64 lowercase hex digits)")
    if "transparency" not in r:
        return
    if "log" not in r:
        raise _bad("transparency", "a transparency proof needs the record's log")
    t = _obj(r["transparency"], "transparency")
    if set(t) != TRANSPARENCY_KEYS:
        missing, unknown = sorted(TRANSPARENCY_KEYS - set(t)), sorted(set(t) - TRANSPARENCY_KEYS)
        why = f"missing {', '.join(missing)}" if missing else f"unknown {', '.join(unknown)}"
        raise _bad("transparency", f"{why}"[:200])
    _str(t["checkpoint"], "transparency.checkpoint")
    for key in ("leaf_index", "tree_size", "position", "recorded_us"):
        _int(t[key], f"transparency.{key}")
    for i, h in enumerate(_list(t["proof"], "transparency.proof")):
        _str(h, f"transparency.proof[{i}]")


_WITHDRAWN_BY = {ENTRANT: ENTRANT, ORGANISER: ORGANISER, NO_REVEAL: SERVER}


def _withdrawn_by(value: Any, place: str) -> str | None:
    if value is None:
        return None
    if value not in _WITHDRAWN_BY:
        raise _bad(place, f"is {value!r}, not one of {sorted(_WITHDRAWN_BY)}"[:200])
    return _WITHDRAWN_BY[value]


def _intervention(value: Any, place: str) -> Intervention:
    i = _obj(value, place)
    action = _str(_get(i, "action", place), f"{place}.action")
    if action not in ACTIONS:
        raise _bad(f"{place}.action", f"is {action!r}, not one of {sorted(ACTIONS)}"[:200])
    by = _str(_get(i, "by", place), f"{place}.by")
    if by not in ACTORS:
        raise _bad(f"{place}.by", f"is {by!r}, not one of {sorted(ACTORS)}"[:200])
    return Intervention(
        _int(_get(i, "round", place), f"{place}.round"),
        _int(_get(i, "table", place), f"{place}.table", optional=True),
        action,
        by,
        _int(_get(i, "entrant", place), f"{place}.entrant", optional=True),
        _str(_get(i, "reason", place), f"{place}.reason"),
    )


# Checking


def _differ(place: str, got: Any, want: Any) -> CorruptRecord:
    return _bad(place, f"is {got!r}, the results before it give {want!r}"[:300])


def check_tournament_record(record: Any) -> Tournament:
    """Check a tournament record (everything but its `signature`): the commitment against the
    revealed seed, the seeding order, every round's byes, tables, sides and match ids
    recomputed from the results before it, every result's derived figures, the standings,
    and that an ended tournament has played every round it had. Returns the tournament.

    Raises CorruptRecord naming the first place that differs.
    """
    t = parse_tournament_record(record)
    r = _obj(record, "record")
    n = len(t.entrants)
    seed: bytes | None = None
    if t.tournament_seed is not None:
        try:
            seed = parse_seed(t.tournament_seed)
        except InvalidArgument as e:
            raise _bad("tournament_seed", e.message) from None
        if commitment(seed) != t.commitment:
            raise _bad("commitment", "is not the SHA-256 of the tournament seed")
    if t.ended and seed is None:
        raise _bad("tournament_seed", "an ended tournament reveals its seed")
    if not t.ended and seed is not None:
        raise _bad("tournament_seed", "revealed before the end")
    if t.seeding is None:
        if t.rounds or r.get("standings"):
            raise _bad("seeding", "missing in a started tournament")
        _check_interventions(t)
        return t
    part = t.taking_part()
    for i, entrant in enumerate(t.entrants):
        said = entrant.client_seed_commitment
        if (
            said is not None
            and entrant.client_seed is not None
            and said != commitment(entrant.client_seed.encode("utf-8"))
        ):
            raise _bad(
                f"entrants[{i}].client_seed_commitment", "is not the SHA-256 of its client seed"
            )
    if seed is not None:
        want = seeding_order(
            seed, t.tournament_id, [e.seed for e in part], [e.entrant for e in part]
        )
        if t.seeding != want:
            raise _differ("seeding", list(t.seeding), list(want))
    elif sorted(t.seeding) != [e.entrant for e in part]:
        raise _bad("seeding", "does not order the entrants that take part once each")
    try:
        if len(part) == n:
            # Fewer may be left once the reveal window closes (section 3): the tournament
            # then plays on with them, or ends at once when fewer than two are left.
            t.settings.check_entrants(len(part))
        total = t.settings.total_rounds(len(part))
    except InvalidArgument as error:
        raise _bad("entrants", error.message) from None
    withdrawn_after = t.withdrawn_after()
    for i, entrant in enumerate(t.entrants):
        w = entrant.withdrawn_after_round
        if w is not None and not 0 <= w <= len(t.rounds):
            raise _bad(
                f"entrants[{i}].withdrawn_after_round",
                f"is {w}, after {len(t.rounds)} rounds paired",
            )
    tally = Tally.start(t.seeding, n)
    for i, rd in enumerate(t.rounds):
        place = f"rounds[{i}]"
        number = i + 1
        if rd.round != number:
            raise _differ(f"{place}.round", rd.round, number)
        if i > 0 and not t.rounds[i - 1].finished:
            raise _bad(place, "paired before the round before it finished")
        if number > total:
            raise _bad(place, f"the tournament has {total} rounds")
        if sum(active(withdrawn_after, e, number) for e in t.seeding) < 2:
            raise _bad(place, "paired with fewer than two entrants left")
        want_round = play_round(
            t.tournament_id, pair_round(t.settings, t.seeding, withdrawn_after, tally, number)
        )
        if rd.byes != want_round.byes:
            raise _differ(f"{place}.byes", list(rd.byes), list(want_round.byes))
        if len(rd.tables) != len(want_round.tables):
            raise _differ(f"{place}.tables", len(rd.tables), len(want_round.tables))
        for j, (got, expected) in enumerate(zip(rd.tables, want_round.tables, strict=True)):
            tplace = f"{place}.tables[{j}]"
            if got.table != expected.table:
                raise _differ(f"{tplace}.table", got.table, expected.table)
            if got.sides != expected.sides:
                raise _differ(
                    f"{tplace}.sides", [[e] for e in got.sides], [[e] for e in expected.sides]
                )
            if got.match_id != expected.match_id:
                raise _differ(f"{tplace}.match_id", got.match_id, expected.match_id)
            if expected.match_id is None and got.result != expected.result:
                raise _bad(f"{tplace}.result", "a table not played is its withdrawn side's forfeit")
            if got.result is not None and len(got.result.scores) != len(got.sides):
                raise _bad(f"{tplace}.result.scores", "one score a side")
        for b in rd.byes:
            tally = tally.with_bye(b)
        for tb in rd.tables:
            if tb.result is not None:
                tally = tally.with_table(tb.sides, tb.result)
    if t.ended:
        if t.rounds and not t.rounds[-1].finished:
            raise _bad("ended", "the last round has not finished")
        left = sum(active(withdrawn_after, e, len(t.rounds) + 1) for e in t.seeding)
        if len(t.rounds) < total and left >= 2:
            raise _bad("ended", f"after {len(t.rounds)} of {total} rounds")
    want_standings = [standing_json(s) for s in tally.standings()]
    got_standings = _list(_get(r, "standings", "record"), "standings")
    for k, want_s in enumerate(want_standings):
        if k >= len(got_standings):
            raise _bad("standings", f"has {len(got_standings)} lines, not {len(want_standings)}")
        if got_standings[k] != want_s:
            g = _obj(got_standings[k], f"standings[{k}]")
            key = next((key for key in want_s if g.get(key) != want_s[key]), "rank")
            raise _differ(f"standings[{k}].{key}", g.get(key), want_s[key])
    if len(got_standings) != len(want_standings):
        raise _bad("standings", f"has {len(got_standings)} lines, not {len(want_standings)}")
    _check_interventions(t)
    return t


def _check_interventions(t: Tournament) -> None:
    """Every intervention against what it did, and every result not reached by play and
    every withdrawal by another than the entrant against an intervention that says who did
    it (section 3). Nothing to check in a record made before they were recorded. Raises
    CorruptRecord."""
    if t.interventions is None:
        return
    withdrawals: set[int] = set()
    settled: set[tuple[int, int]] = set()
    latest = 0
    for k, i in enumerate(t.interventions):
        place = f"interventions[{k}]"
        if not latest <= i.round <= len(t.rounds):
            raise _bad(
                f"{place}.round",
                f"is {i.round}, after round {latest} and before {len(t.rounds) + 1}",
            )
        latest = i.round
        table_wanted = i.action in (ABANDON, FORFEIT_TABLE)
        if (i.table is not None) != table_wanted:
            raise _bad(
                f"{place}.table", f"a {i.action} names {'a' if table_wanted else 'no'} table"
            )
        entrant_wanted = i.action in (WITHDRAW, FORFEIT_TABLE)
        if (i.entrant is not None) != entrant_wanted:
            raise _bad(
                f"{place}.entrant", f"a {i.action} names {'an' if entrant_wanted else 'no'} entrant"
            )
        allowed = (ORGANISER, SERVER) if i.action in (WITHDRAW, ABANDON) else (ORGANISER,)
        if i.by not in allowed:
            raise _bad(f"{place}.by", f"a {i.action} is not done by the {i.by}")
        if i.action == WITHDRAW:
            assert i.entrant is not None
            if not 1 <= i.entrant <= len(t.entrants) or i.entrant in withdrawals:
                raise _bad(f"{place}.entrant", f"entrant {i.entrant} cannot be withdrawn here")
            e = t.entrants[i.entrant - 1]
            if (e.withdrawn_by, e.withdrawn_after_round) != (i.by, i.round):
                raise _bad(
                    f"{place}.entrant",
                    f"entrant {i.entrant} was not withdrawn by the {i.by} after round {i.round}",
                )
            withdrawals.add(i.entrant)
        elif table_wanted:
            assert i.table is not None
            rounds = t.rounds[i.round - 1].tables if i.round else ()
            tb = rounds[i.table - 1] if 1 <= i.table <= len(rounds) else None
            if tb is None or tb.match_id is None or (i.round, i.table) in settled:
                raise _bad(
                    f"{place}.table", f"round {i.round} has no match at table {i.table} to settle"
                )
            res = tb.result
            reason = ABANDONED if i.action == ABANDON else FORFEIT
            if res is None or res.reason != reason:
                raise _bad(
                    f"{place}.action", f"round {i.round} table {i.table} did not end {reason}"
                )
            if res.forfeited_side is not None and tb.sides[res.forfeited_side] != i.entrant:
                raise _bad(
                    f"{place}.entrant",
                    f"round {i.round} table {i.table} was forfeited "
                    f"by entrant {tb.sides[res.forfeited_side]}",
                )
            settled.add((i.round, i.table))
        elif i.action == START_ROUND and i.round < 1:
            raise _bad(f"{place}.round", "no round was paired")
        elif i.action == CANCEL and (
            t.seeding is not None or not t.ended or k != len(t.interventions) - 1
        ):
            raise _bad(place, "only a tournament that never started is cancelled, last")
    for k, e in enumerate(t.entrants):
        if (e.withdrawn_by is None) != (e.withdrawn_after_round is None):
            raise _bad(f"entrants[{k}].withdrawn_by", "says who withdrew it, and only if it did")
        if e.withdrawn_by in (ORGANISER, SERVER) and e.entrant not in withdrawals:
            raise _bad(f"entrants[{k}].withdrawn_by", "no intervention withdraws it")
    for n, rd in enumerate(t.rounds):
        for tb in rd.tables:
            abandoned = tb.result is not None and tb.result.reason == ABANDONED
            if abandoned and tb.match_id is not None and (rd.round, tb.table) not in settled:
                raise _bad(
                    f"rounds[{n}].tables[{tb.table - 1}].result",
                    "abandoned, but no intervention says who abandoned it",
                )
    if t.ended and t.seeding is None and not t.cancelled:
        raise _bad("seeding", "missing in a tournament that ended without being cancelled")


__all__ = [
    "ABANDON",
    "ACTIONS",
    "ACTORS",
    "CANCEL",
    "ENTRANT",
    "FORFEIT_TABLE",
    "MAX_NOTE_CHARS",
    "NO_REVEAL",
    "ORGANISER",
    "SERVER",
    "START_ROUND",
    "TOURNAMENT_RECORD_FORMAT",
    "WITHDRAW",
    "Entrant",
    "Intervention",
    "PlayedRound",
    "PlayedTable",
    "TableMatch",
    "Tournament",
    "build_tournament_record",
    "check_tournament_record",
    "intervention_json",
    "next_round",
    "parse_fraction",
    "parse_tournament_record",
    "play_round",
    "table_matches",
    "tally_of",
]
