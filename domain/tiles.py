"""Tiles of the double-six set, ends of the line, seats and sides."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from .errors import InvalidArgument

MAX_PIPS = 6


@dataclass(frozen=True, order=True, slots=True)
class Tile:
    """An unordered pair `low-high`, `0 <= low <= high <= 6`. Ordered by (low, high)."""

    low: int
    high: int

    @property
    def is_double(self) -> bool:
        return self.low == self.high

    @property
    def pips(self) -> int:
        return self.low + self.high

    def has(self, number: int) -> bool:
        return self.low == number or self.high == number

    def other(self, number: int) -> int:
        """The number opposite `number` on this tile (`number` itself for a double)."""
        return self.high if self.low == number else self.low

    def __str__(self) -> str:
        return f"{self.low}-{self.high}"

    def __repr__(self) -> str:
        return f"Tile({self.low}-{self.high})"

    @staticmethod
    def of(a: int, b: int) -> Tile:
        """The interned tile with numbers `a` and `b`, in either order.

        Raises InvalidArgument when a number is outside 0..6.
        """
        if not (0 <= a <= MAX_PIPS and 0 <= b <= MAX_PIPS):
            raise InvalidArgument(f"tile numbers must be 0..6, got {a} and {b}")
        return _BY_PAIR[a][b]

    @staticmethod
    def parse(text: str) -> Tile:
        """Parse `"a-b"` (either order). Raises InvalidArgument on anything else."""
        if not isinstance(text, str):
            raise InvalidArgument(f"a tile is written 'a-b', got {text!r}")
        parts = text.strip().split("-")
        if len(parts) != 2 or not all(len(p) == 1 and p in "0123456789" for p in parts):
            raise InvalidArgument(f"a tile is written 'a-b' with numbers 0..6, got {text!r}")
        return Tile.of(int(parts[0]), int(parts[1]))


ALL_TILES: tuple[Tile, ...] = tuple(
    Tile(a, b) for a in range(MAX_PIPS + 1) for b in range(a, MAX_PIPS + 1)
)
"""The 28 tiles in canonical order: 0-0, 0-1, ..., 0-6, 1-1, ..., 6-6."""

_BY_PAIR: list[list[Tile]] = [[ALL_TILES[0]] * (MAX_PIPS + 1) for _ in range(MAX_PIPS + 1)]
for _t in ALL_TILES:
    _BY_PAIR[_t.low][_t.high] = _t
    _BY_PAIR[_t.high][_t.low] = _t

TILE_INDEX: dict[Tile, int] = {t: i for i, t in enumerate(ALL_TILES)}


class End(StrEnum):
    """An end of the line."""

    LEFT = "left"
    RIGHT = "right"

    @staticmethod
    def parse(text: str) -> End:
        """Raises InvalidArgument unless `text` is 'left' or 'right'."""
        try:
            return End(text)
        except ValueError:
            raise InvalidArgument(f"an end is 'left' or 'right', got {text!r}") from None


def pips(tiles: tuple[Tile, ...] | list[Tile]) -> int:
    return sum(t.low + t.high for t in tiles)


def hand_size(seats: int) -> int:
    """RULES.md section 1: 6 tiles each with 2 or 3 seats, 5 with 4."""
    return 6 if seats <= 3 else 5


RESERVE = 2
"""The last tiles of the boneyard, never drawn (RULES.md section 1)."""


def side_of(seat: int, partnerships: bool) -> int:
    """Seats 0+2 form side 0 and 1+3 side 1 in partnerships; else each seat is a side."""
    return seat % 2 if partnerships else seat


def sides_of(seats: int, partnerships: bool) -> tuple[tuple[int, ...], ...]:
    if partnerships:
        return ((0, 2), (1, 3))
    return tuple((s,) for s in range(seats))
