"""Tournaments' names for things: their streams, their ids, their tables' matches.

A tournament is a stream of its own in the events table, `tournament-<uuid>`: no match id
(a bare UUID) starts so, so the match listing, the clock keeper and the janitor pass over it
(`is_tournament_stream`). A tournament's match records its tournament, round and table with
its creation (`table_metadata`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from bergen.domain.commands import CreateMatch, TakeSeat
from bergen.domain.engine import execute
from bergen.domain.errors import InvalidArgument
from bergen.domain.rules import Rules, make_rules
from bergen.domain.tournament_pairing import Settings
from bergen.domain.tournament_record import TOURNAMENT_STREAM_PREFIX

STREAM_PREFIX = TOURNAMENT_STREAM_PREFIX
TABLE_KEYS = ("tournament_id", "tournament_round", "tournament_table")
"""A tournament match's MatchCreated metadata: its tournament, round and table."""
MAX_MATCH_NAME = 100

_TOURNAMENT_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def is_tournament_id(value: str) -> bool:
    """Whether `value` is an id as CreateTournament returns it."""
    return _TOURNAMENT_ID.fullmatch(value) is not None


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
    if not is_tournament_id(value):
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
