"""Commands: what a caller asks for. `decide` accepts or refuses them.

Time is an input (RULES.md section 11). In a clocked match every command that acts in play
(`Play`, `Resign`, `Timeout`) carries `at_ms`, the server's reading when it decides it:
whole milliseconds since the first deal of the match. The first deal is at 0 by definition
(it is made by the `TakeSeat` that fills the last seat, which carries no time; before it
there is no match time), and the forced actions a command causes are recorded at its
`at_ms`. An `at_ms` earlier than the latest one recorded is taken as that one: time never
runs backwards in a match, whichever server read it. Without a clock `at_ms` is ignored.
"""

from __future__ import annotations

from dataclasses import dataclass

from .frozen import fast_init
from .rules import Rules
from .tiles import End, Tile


@dataclass(frozen=True, slots=True)
class CreateMatch:
    """`rated`: a match for the players' ratings (RATINGS.md section 2)."""

    match_id: str
    seats: int
    partnerships: bool
    rules: Rules
    server_seed: bytes
    name: str = ""
    rated: bool = False


@dataclass(frozen=True, slots=True)
class TakeSeat:
    """Take `seat`, or the lowest free seat when None; for the registered player `player`
    (its id; a program when `bot`), or "" for a seat held by a name alone."""

    name: str
    client_seed: str = ""
    seat: int | None = None
    player: str = ""
    bot: bool = False


@dataclass(frozen=True, slots=True)
class Play:
    """Lay `tile` at `end`; `end` may be omitted when the tile fits only one end."""

    seat: int
    tile: Tile
    end: End | None = None
    at_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Resign:
    """`seat` forfeits for its side (RULES.md section 11). `note`, the end's, says why
    when it is not the seat's own resignation (the organiser's forfeit of a tournament
    side); empty: `seat N resigned`."""

    seat: int
    at_ms: int | None = None
    note: str = ""


@dataclass(frozen=True, slots=True)
class Timeout:
    """`seat`'s clock has run out by `at_ms`: only the server sends it, when the state's
    `due_at_ms` has come."""

    seat: int
    at_ms: int


@dataclass(frozen=True, slots=True)
class Abandon:
    """The organiser stops the match. `resigned_seat` only replays a resignation recorded
    before resignation was a forfeit, which ended the match this way."""

    reason: str = ""
    resigned_seat: int | None = None


Command = CreateMatch | TakeSeat | Play | Resign | Timeout | Abandon

for _cls in (CreateMatch, TakeSeat, Play, Resign, Timeout, Abandon):
    fast_init(_cls)
