"""Events to and from JSON-able payloads, with versioned types and upcasting on read.

Stored payloads are never rewritten: an old schema version is upgraded here when read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any

from .errors import BergenError, CorruptRecord
from .events import EVENT_TYPES, Event
from .rules import Rules
from .tiles import End, Tile

SCHEMA_VERSION = 1

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
    "reason": "str",
    "base": "int",
    "scores": "ints",
    "winner_side": "int?",
    "resigned_seat": "int?",
    "note": "str",
}
_OPTIONAL_SEAT = {"PointsScored"}
_OPTIONAL_TILE = {"TileDrawn"}
_OPTIONAL_SIDE = {"HandEnded"}

_BY_NAME: dict[str, type[Event]] = {cls.__name__: cls for cls in EVENT_TYPES}
_FIELDS: dict[type[Event], tuple[str, ...]] = {
    cls: tuple(f.name for f in fields(cls)) for cls in EVENT_TYPES
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
    if kind == "ints":
        return list(v)
    return v


def _check(kind: str, v: Any) -> Any:
    optional = kind.endswith("?")
    base = kind.rstrip("?")
    if v is None and optional:
        return None
    if base == "str" and isinstance(v, str):
        return v
    if base == "int" and isinstance(v, int) and not isinstance(v, bool):
        return v
    if base == "bool" and isinstance(v, bool):
        return v
    if base == "rules":
        return Rules.from_dict(v)
    if base == "tile":
        tile = _tile_in(v)
        if tile is None:
            raise CorruptRecord("a tile is missing")
        return tile
    if base == "end" and isinstance(v, str):
        return End.parse(v)
    if base == "tiles" and isinstance(v, list):
        return tuple(_tile_in(t) for t in v)
    if base == "hands" and isinstance(v, list) and all(isinstance(h, list) for h in v):
        return tuple(tuple(_tile_in(t) for t in h) for h in v)
    if (
        base == "ints"
        and isinstance(v, list)
        and all(isinstance(i, int) and not isinstance(i, bool) for i in v)
    ):
        return tuple(v)
    raise CorruptRecord(f"expected {kind}, got {v!r:.60}")


def _kind(type_name: str, field: str) -> str:
    kind = _KINDS[field]
    if field == "seat" and type_name in _OPTIONAL_SEAT:
        return "int?"
    if field == "tile" and type_name in _OPTIONAL_TILE:
        return "tile?"
    if field == "side" and type_name in _OPTIONAL_SIDE:
        return "int?"
    return kind


def encode(event: Event) -> tuple[str, int, dict[str, Any]]:
    """(type name, schema version, payload) of an event."""
    name = type(event).__name__
    payload = {f: _encode_value(_kind(name, f), getattr(event, f)) for f in _FIELDS[type(event)]}
    return name, SCHEMA_VERSION, payload


def decode(type_name: str, version: int, payload: Mapping[str, Any]) -> Event:
    """The event stored as `payload`, upcast to the current schema.

    Raises CorruptRecord for an unknown type or version, or a payload of the wrong shape.
    """
    cls = _BY_NAME.get(type_name) if isinstance(type_name, str) else None
    if cls is None:
        raise CorruptRecord(f"unknown event type {type_name!r}")
    if isinstance(version, bool) or not isinstance(version, int):
        raise CorruptRecord(f"{type_name}: schema version must be a number, got {version!r}")
    if not isinstance(payload, Mapping):
        raise CorruptRecord(f"{type_name}: payload must be an object")
    data = dict(payload)
    while version < SCHEMA_VERSION:
        up = UPCASTERS.get((type_name, version))
        if up is None:
            raise CorruptRecord(f"{type_name}: no upcaster from schema version {version}")
        data = up(data)
        version += 1
    if version != SCHEMA_VERSION:
        raise CorruptRecord(f"{type_name}: unknown schema version {version}")
    names = _FIELDS[cls]
    if set(data) != set(names):
        raise CorruptRecord(f"{type_name}: fields {sorted(data)} do not match {sorted(names)}")
    try:
        return cls(**{f: _check(_kind(type_name, f), data[f]) for f in names})
    except CorruptRecord:
        raise
    except BergenError as e:
        raise CorruptRecord(f"{type_name}: {e}") from e
