"""Events to and from JSON-able payloads, with versioned types and upcasting on read.

Stored payloads are never rewritten: an old schema version is upgraded here when read.

Schema version 2 added the clock fields (RULES.md section 11: `at_ms`, `clock_ms`, `auto`)
and the forfeit's (`forfeited_side`, `cause`, `at_ms`) to some events. They are written only
when set, and an event that sets none of them is written exactly as version 1 wrote it, with
version 1: events of unclocked matches (every event stored before clocks existed among
them) keep their bytes and so their hash chain. A version 1 payload reads as version 2 with
those fields unset.

Players came the same way: `MatchCreated.rated` and `SeatTaken.player` and `.bot`
(RATINGS.md) are written only when set, with version 2, so an unrated match's events keep
the bytes they always had.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import MISSING, fields
from typing import Any, TypeVar

from .errors import BergenError, CorruptRecord
from .events import (
    EVENT_TYPES,
    Dealt,
    Event,
    HandEnded,
    MatchEnded,
    Passed,
    PointsScored,
    SeatTaken,
    TileDrawn,
    TilePlayed,
    drawn,
    passed,
    played,
)
from .rules import Rules
from .tiles import ALL_TILES, End, Tile
from .vocabulary import ForfeitCause, HandEndReason, MatchEndReason, PointsReason, word

SCHEMA_VERSION = 2
BASE_VERSION = 1
"""The version of a payload that sets none of the fields version 2 added."""

# Each field's kind: how it is written in a payload.
_KINDS: dict[str, str] = {
    "match_id": "str",
    "seats": "int",
    "partnerships": "bool",
    "rules": "rules",
    "commitment": "str",
    "name": "str",
    "server_seed": "str?",
    "seat": "int",
    "client_seed": "str",
    "hand": "int",
    "attempt": "int",
    "hands": "hands",
    "boneyard": "tiles",
    "tile": "tile",
    "end": "end?",
    "side": "int",
    "points": "int",
    "reason": "reason",
    "base": "int",
    "scores": "ints",
    "winner_side": "int?",
    "resigned_seat": "int?",
    "note": "str",
    "at_ms": "int",
    "clock_ms": "int",
    "auto": "bool",
    "forfeited_side": "int",
    "cause": "forfeit_cause",
    "rated": "bool",
    "player": "str",
    "bot": "bool",
    "holders": "holders",
}
_OPTIONAL_SEAT = {"PointsScored"}
_OPTIONAL_TILE = {"TileDrawn"}
_OPTIONAL_SIDE = {"HandEnded"}
_REASON_KINDS = {
    "PointsScored": "points_reason",
    "HandEnded": "hand_end_reason",
    "MatchEnded": "match_end_reason",
}

_BY_NAME: dict[str, type[Event]] = {cls.__name__: cls for cls in EVENT_TYPES}
_EXTRAS: dict[type[Event], dict[str, object]] = {
    cls: {f.name: f.default for f in fields(cls) if f.default is not MISSING} for cls in EVENT_TYPES
}
"""Each type's fields of version 2, with the value that leaves them out of a payload."""
_FIELDS: dict[type[Event], tuple[str, ...]] = {
    cls: tuple(f.name for f in fields(cls) if f.name not in _EXTRAS[cls]) for cls in EVENT_TYPES
}

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]
UPCASTERS: dict[tuple[str, int], Upcaster] = {}
"""(type, version) -> function giving the payload of version + 1."""


def _tile_out(t: Tile | None) -> str | None:
    return None if t is None else f"{t.low}-{t.high}"


def _tile_in(v: object) -> Tile | None:
    if v is None:
        return None
    if not isinstance(v, str):
        raise CorruptRecord(f"a tile is written 'a-b', got {v!r}")
    return Tile.parse(v)


def _encode_value(kind: str, v: Any) -> Any:
    if kind == "rules":
        return v.as_dict()
    if kind in ("tile", "tile?"):
        return _tile_out(v)
    if kind == "tiles":
        return [_tile_out(t) for t in v]
    if kind == "hands":
        return [[_tile_out(t) for t in h] for h in v]
    if kind in ("end", "end?"):
        return None if v is None else v.value
    if kind.endswith("_reason"):
        return str(v)  # the word itself, never the enum: payloads stay plain JSON
    if kind == "ints":
        return list(v)
    if kind == "holders":
        return [list(h) for h in v]
    return v


_TILE_TEXT: dict[str, Tile] = {f"{t.low}-{t.high}": t for t in ALL_TILES} | {
    f"{t.high}-{t.low}": t for t in ALL_TILES
}


def _tile(v: Any) -> Tile:
    tile = _TILE_TEXT.get(v) if type(v) is str else None
    if tile is None:
        if v is None:
            raise CorruptRecord("a tile is missing")
        result = _tile_in(v)  # raises with the reason
        assert result is not None
        return result
    return tile


def _tile_or_none(v: Any) -> Tile | None:
    return None if v is None else _tile(v)


def _str(v: Any) -> str:
    if type(v) is not str:
        raise CorruptRecord(f"expected text, got {v!r:.60}")
    return v


def _int(v: Any) -> int:
    if type(v) is not int:
        raise CorruptRecord(f"expected a whole number, got {v!r:.60}")
    return v


def _bool(v: Any) -> bool:
    if type(v) is not bool:
        raise CorruptRecord(f"expected true or false, got {v!r:.60}")
    return v


_END_TEXT: dict[str, End] = {e.value: e for e in End}


def _end(v: Any) -> End:
    end = _END_TEXT.get(v) if type(v) is str else None
    if end is None:
        raise CorruptRecord(f"expected an end, 'left' or 'right', got {v!r:.60}")
    return end


def _list(v: Any) -> list[Any]:
    if type(v) is not list:
        raise CorruptRecord(f"expected a list, got {v!r:.60}")
    return v


def _tiles(v: Any) -> tuple[Tile | None, ...]:
    return tuple([_tile_or_none(t) for t in _list(v)])


def _hands(v: Any) -> tuple[tuple[Tile | None, ...], ...]:
    return tuple([_tiles(h) for h in _list(v)])


def _ints(v: Any) -> tuple[int, ...]:
    return tuple([_int(i) for i in _list(v)])


def _holders(v: Any) -> tuple[tuple[str, str, bool], ...]:
    out = []
    for h in _list(v):
        if not (
            type(h) is list
            and len(h) == 3
            and type(h[0]) is str
            and type(h[1]) is str
            and type(h[2]) is bool
        ):
            raise CorruptRecord(f"expected a seat holder [player, name, bot], got {h!r:.60}")
        out.append((h[0], h[1], h[2]))
    return tuple(out)


def _optional(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def optional(v: Any) -> Any:
        return None if v is None else check(v)

    return optional


W = TypeVar("W", PointsReason, HandEndReason, MatchEndReason, ForfeitCause)


def _words(kind: type[W]) -> Callable[[Any], W]:
    """A check of a `kind` word: a dict lookup on the common path (decoding is hot)."""
    table = {m.value: m for m in kind}

    def check(v: Any) -> W:
        member = table.get(v) if type(v) is str else None
        return word(kind, v) if member is None else member  # word() raises saying why

    return check


_CHECKS: dict[str, Callable[[Any], Any]] = {
    "str": _str,
    "int": _int,
    "bool": _bool,
    "rules": Rules.from_dict,
    "tile": _tile,
    "end": _end,
    "tiles": _tiles,
    "hands": _hands,
    "ints": _ints,
    "holders": _holders,
    "points_reason": _words(PointsReason),
    "hand_end_reason": _words(HandEndReason),
    "match_end_reason": _words(MatchEndReason),
    "forfeit_cause": _words(ForfeitCause),
}


def _check(kind: str, v: Any) -> Any:
    check = _CHECKS[kind.rstrip("?")]
    return _optional(check)(v) if kind.endswith("?") else check(v)


def _kind(type_name: str, field: str) -> str:
    kind = _KINDS[field]
    if field == "seat" and type_name in _OPTIONAL_SEAT:
        return "int?"
    if field == "tile" and type_name in _OPTIONAL_TILE:
        return "tile?"
    if field == "side" and type_name in _OPTIONAL_SIDE:
        return "int?"
    if field == "reason":
        return _REASON_KINDS[type_name]
    return kind


def _decoder(cls: type[Event]) -> tuple[tuple[str, Callable[[Any], Any]], ...]:
    name = cls.__name__
    out = []
    for f in _FIELDS[cls]:
        kind = _kind(name, f)
        check = _CHECKS[kind.rstrip("?")]
        out.append((f, _optional(check) if kind.endswith("?") else check))
    return tuple(out)


_NAMES: dict[type[Event], frozenset[str]] = {cls: frozenset(_FIELDS[cls]) for cls in EVENT_TYPES}
_DECODERS: dict[type[Event], tuple[tuple[str, Callable[[Any], Any]], ...]] = {
    cls: _decoder(cls) for cls in EVENT_TYPES
}
_EXTRA_DECODERS: dict[type[Event], dict[str, Callable[[Any], Any]]] = {
    cls: {f: _CHECKS[_kind(cls.__name__, f)] for f in extras} for cls, extras in _EXTRAS.items()
}


def encode(event: Event) -> tuple[str, int, dict[str, Any]]:
    """(type name, schema version, payload) of an event: version 1 when it sets none of the
    fields version 2 added."""
    cls = type(event)
    name = cls.__name__
    payload = {f: _encode_value(_kind(name, f), getattr(event, f)) for f in _FIELDS[cls]}
    version = BASE_VERSION
    for f, default in _EXTRAS[cls].items():
        value = getattr(event, f)
        if value != default:
            payload[f] = _encode_value(_kind(name, f), value)
            version = SCHEMA_VERSION
    return name, version, payload


def decode(type_name: str, version: int, payload: Mapping[str, Any]) -> Event:
    """The event stored as `payload`, upcast to the current schema.

    Raises CorruptRecord for an unknown type or version, or a payload of the wrong shape.
    """
    if type(type_name) is not str:
        raise CorruptRecord(f"unknown event type {type_name!r}")
    fast = _FAST_BY_NAME.get(type_name)
    if fast is not None and type(payload) is dict and type(version) is int:
        read, size, extended = fast
        if (len(payload) == size and BASE_VERSION <= version <= SCHEMA_VERSION) or (
            extended and version == SCHEMA_VERSION
        ):
            # The most common events: a payload with as many keys as the type's fields of
            # version 1, each of which the reader looks up (a KeyError when one is missing).
            try:
                event = read(payload)
            except KeyError:
                event = None
            if event is not None:
                return event
    cls = _BY_NAME.get(type_name)
    if cls is None:
        raise CorruptRecord(f"unknown event type {type_name!r}")
    if (
        type(version) is int
        and version in (BASE_VERSION, SCHEMA_VERSION)
        and type(payload) is dict
        and payload.keys() == _NAMES[cls]
    ):
        return _build(cls, type_name, payload)  # the common case, without the checks below
    if isinstance(version, bool) or not isinstance(version, int):
        raise CorruptRecord(f"{type_name}: schema version must be a number, got {version!r}")
    if not isinstance(payload, Mapping):
        raise CorruptRecord(f"{type_name}: payload must be an object")
    data = payload
    while version < SCHEMA_VERSION:
        up = UPCASTERS.get((type_name, version))
        if up is None:
            if version != BASE_VERSION:
                raise CorruptRecord(f"{type_name}: no upcaster from schema version {version}")
            # Version 2 only added fields that are left out when unset.
            if data.keys() != _NAMES[cls]:
                raise CorruptRecord(
                    f"{type_name}: fields {sorted(map(str, data))} do not match "
                    f"{sorted(_NAMES[cls])}"
                )
        else:
            data = up(dict(data))
        version += 1
    if version != SCHEMA_VERSION:
        raise CorruptRecord(f"{type_name}: unknown schema version {version}")
    keys = set(data.keys())
    if not _NAMES[cls] <= keys or not keys - _NAMES[cls] <= _EXTRAS[cls].keys():
        raise CorruptRecord(
            f"{type_name}: fields {sorted(map(str, data))} do not match "
            f"{sorted(_NAMES[cls])} and any of {sorted(_EXTRAS[cls])}"
        )
    return _build(cls, type_name, data)


def _tile_played(p: dict[str, Any]) -> Event | None:
    hand = p["hand"]
    seat = p["seat"]
    tile = p["tile"]
    end = p["end"]
    if (
        type(hand) is int
        and type(seat) is int
        and type(tile) is str
        and (tile := _TILE_TEXT.get(tile)) is not None
        and (end is None or (type(end) is str and (end := _END_TEXT.get(end)) is not None))
    ):
        return played(hand, seat, tile, end)
    return None


def _tile_drawn(p: dict[str, Any]) -> Event | None:
    hand = p["hand"]
    seat = p["seat"]
    tile = p["tile"]
    if (
        type(hand) is int
        and type(seat) is int
        and (tile is None or (type(tile) is str and (tile := _TILE_TEXT.get(tile)) is not None))
    ):
        return drawn(hand, seat, tile)
    return None


def _passed(p: dict[str, Any]) -> Event | None:
    hand = p["hand"]
    seat = p["seat"]
    if type(hand) is int and type(seat) is int:
        return passed(hand, seat)
    return None


_POINTS_REASONS: dict[str, PointsReason] = {m.value: m for m in PointsReason}


def _points_scored(p: dict[str, Any]) -> Event | None:
    hand = p["hand"]
    side = p["side"]
    points = p["points"]
    reason = p["reason"]
    base = p["base"]
    seat = p["seat"]
    if (
        type(hand) is int
        and type(side) is int
        and type(points) is int
        and type(base) is int
        and (seat is None or type(seat) is int)
        and type(reason) is str
        and (reason := _POINTS_REASONS.get(reason)) is not None
    ):
        return PointsScored(hand, side, points, reason, base, seat)
    return None


_TILE_OR_NONE: dict[object, Tile | None] = dict(_TILE_TEXT.items())
_TILE_OR_NONE[None] = None


def _tiles_fast(v: Any) -> tuple[Tile | None, ...]:
    """A list of tiles (or None); raises KeyError or TypeError on anything else."""
    if type(v) is not list:
        raise TypeError
    return tuple(map(_TILE_OR_NONE.__getitem__, v))


def _dealt(p: dict[str, Any]) -> Event | None:
    hand = p["hand"]
    attempt = p["attempt"]
    hands = p["hands"]
    if type(hand) is not int or type(attempt) is not int or type(hands) is not list:
        return None
    try:
        return Dealt(hand, attempt, tuple(map(_tiles_fast, hands)), _tiles_fast(p["boneyard"]))
    except (KeyError, TypeError):
        return None


_HAND_END_REASONS: dict[str, HandEndReason] = {m.value: m for m in HandEndReason}


def _hand_ended(p: dict[str, Any]) -> Event | None:
    hand = p["hand"]
    reason = p["reason"]
    side = p["side"]
    points = p["points"]
    scores = p["scores"]
    if (
        type(hand) is int
        and (side is None or type(side) is int)
        and type(points) is int
        and type(scores) is list
        and all(type(x) is int for x in scores)
        and type(reason) is str
        and (reason := _HAND_END_REASONS.get(reason)) is not None
    ):
        return HandEnded(hand, reason, side, points, tuple(scores))
    return None


def _seat_taken(p: dict[str, Any]) -> Event | None:
    seat = p["seat"]
    name = p["name"]
    client_seed = p["client_seed"]
    player = p.get("player", "")
    bot = p.get("bot", False)
    if (
        type(seat) is int
        and type(name) is str
        and type(client_seed) is str
        and type(player) is str
        and type(bot) is bool
        and len(p) == 3 + ("player" in p) + ("bot" in p)
    ):
        return SeatTaken(seat, name, client_seed, player, bot)
    return None


_MATCH_END_REASONS: dict[str, MatchEndReason] = {m.value: m for m in MatchEndReason}
_FORFEIT_CAUSES: dict[str, ForfeitCause] = {m.value: m for m in ForfeitCause}


def _holders_or_none(v: Any) -> tuple[tuple[str, str, bool], ...] | None:
    try:
        return _holders(v) or None
    except CorruptRecord:
        return None


def _match_ended(p: dict[str, Any]) -> Event | None:
    reason = p["reason"]
    winner = p["winner_side"]
    scores = p["scores"]
    resigned = p["resigned_seat"]
    note = p["note"]
    side = p.get("forfeited_side")
    cause = p.get("cause")
    at_ms = p.get("at_ms")
    holders = p.get("holders")
    if (
        type(reason) is str
        and (reason := _MATCH_END_REASONS.get(reason)) is not None
        and (winner is None or type(winner) is int)
        and type(scores) is list
        and all(type(x) is int for x in scores)
        and (resigned is None or type(resigned) is int)
        and type(note) is str
        and (side is None or type(side) is int)
        and (at_ms is None or type(at_ms) is int)
        and (cause is None or (type(cause) is str and (cause := _FORFEIT_CAUSES.get(cause))))
        and (holders is None or (holders := _holders_or_none(holders)))
        and len(p)
        == 5 + ("forfeited_side" in p) + ("cause" in p) + ("at_ms" in p) + ("holders" in p)
        and (side is not None or "forfeited_side" not in p)
        and (cause is not None or "cause" not in p)
        and (at_ms is not None or "at_ms" not in p)
    ):
        return MatchEnded(
            reason, winner, tuple(scores), resigned, note, side, cause, at_ms, holders or ()
        )
    return None


_FAST: dict[type[Event], Callable[[dict[str, Any]], Event | None]] = {
    TilePlayed: _tile_played,
    TileDrawn: _tile_drawn,
    Passed: _passed,
    PointsScored: _points_scored,
    Dealt: _dealt,
    HandEnded: _hand_ended,
    SeatTaken: _seat_taken,
    MatchEnded: _match_ended,
}
"""The events most of a stream is made of, read without the generic checks: each gives
None for anything but a plain payload of its version 1 (the generic path then says why)."""
_FAST_BY_NAME: dict[str, tuple[Callable[[dict[str, Any]], Event | None], int, bool]] = {
    cls.__name__: (read, len(_FIELDS[cls]), cls in (SeatTaken, MatchEnded))
    for cls, read in _FAST.items()
}
"""By type: its fast reader, its count of version 1 fields, and whether the reader also
reads the fields of version 2 (and checks the payload has no others)."""


def _build(cls: type[Event], type_name: str, data: Mapping[str, Any]) -> Event:
    try:
        extras = _EXTRA_DECODERS[cls]
        if len(data) == len(_DECODERS[cls]) or not extras:
            return cls(*[check(data[f]) for f, check in _DECODERS[cls]])
        return cls(
            *[check(data[f]) for f, check in _DECODERS[cls]],
            **{f: check(data[f]) for f, check in extras.items() if f in data},
        )
    except CorruptRecord:
        raise
    except BergenError as e:
        raise CorruptRecord(f"{type_name}: {e}") from e
