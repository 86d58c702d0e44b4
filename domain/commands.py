"""Commands: what a caller asks for. `decide` accepts or refuses them."""

from __future__ import annotations

from dataclasses import dataclass

from .rules import Rules
from .tiles import End, Tile


@dataclass(frozen=True, slots=True)
class CreateMatch:
    match_id: str
    seats: int
    partnerships: bool
    rules: Rules
    server_seed: bytes
    name: str = ""


@dataclass(frozen=True, slots=True)
class TakeSeat:
    """Take `seat`, or the lowest free seat when None."""

    name: str
    client_seed: str = ""
    seat: int | None = None


@dataclass(frozen=True, slots=True)
class Play:
    """Lay `tile` at `end`; `end` may be omitted when the tile fits only one end."""

    seat: int
    tile: Tile
    end: End | None = None


@dataclass(frozen=True, slots=True)
class Resign:
    seat: int


@dataclass(frozen=True, slots=True)
class Abandon:
    reason: str = ""


Command = CreateMatch | TakeSeat | Play | Resign | Abandon
