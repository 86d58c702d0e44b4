"""Tiles of the double-six set, ends of the line, seats and sides."""

from __future__ import annotations

from enum import StrEnum

from .errors import InvalidArgument, shown

MAX_PIPS = 6


class Tile:
    """An unordered pair `low-high`, `0 <= low <= high <= 6`, ordered by (low, high).

    There is one object per tile: `Tile(a, b)` returns it, so equality and hashing are
    identity (as fast as they get, on the engine's hottest path). Immutable.
    """

    __slots__ = ("bit", "high", "index", "is_double", "low", "pips")
    low: int
    high: int
    index: int
    """Position in the canonical order, 0..27."""
    bit: int
    """`1 << index`: a set of tiles is an int of these bits."""
    is_double: bool
    pips: int

    def __new__(cls, low: int, high: int) -> Tile:
        return Tile.of(low, high)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"tiles are immutable: cannot set {name}")

    def __reduce__(self) -> tuple[object, tuple[int, int]]:
        return (Tile.of, (self.low, self.high))

    def __copy__(self) -> Tile:
        return self

    def __deepcopy__(self, memo: object) -> Tile:
        return self

    def __lt__(self, other: Tile) -> bool:
        return self.index < other.index

    def __le__(self, other: Tile) -> bool:
        return self.index <= other.index

    def __gt__(self, other: Tile) -> bool:
        return self.index > other.index

    def __ge__(self, other: Tile) -> bool:
        return self.index >= other.index

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
        """The tile with numbers `a` and `b`, in either order.

        Raises InvalidArgument when a number is outside 0..6.
        """
        if (
            type(a) is not int
            or type(b) is not int
            or not (0 <= a <= MAX_PIPS and 0 <= b <= MAX_PIPS)
        ):
            raise InvalidArgument(
                f"tile numbers must be 0..6, got {shown(a)} and {shown(b)}", reason="INVALID_TILE"
            )
        return _BY_PAIR[a][b]

    @staticmethod
    def parse(text: str) -> Tile:
        """Parse `"a-b"` (either order). Raises InvalidArgument on anything else."""
        if not isinstance(text, str):
            raise InvalidArgument(
                f"a tile is written 'a-b', got {shown(text)}", reason="INVALID_TILE"
            )
        parts = text.strip().split("-")
        if len(parts) != 2 or not all(len(p) == 1 and p in "0123456789" for p in parts):
            raise InvalidArgument(
                f"a tile is written 'a-b' with numbers 0..6, got {shown(text)}",
                reason="INVALID_TILE",
            )
        return Tile.of(int(parts[0]), int(parts[1]))


def _make(low: int, high: int, index: int) -> Tile:
    tile = object.__new__(Tile)
    for name, value in (
        ("low", low),
        ("high", high),
        ("index", index),
        ("bit", 1 << index),
        ("is_double", low == high),
        ("pips", low + high),
    ):
        object.__setattr__(tile, name, value)
    return tile


ALL_TILES: tuple[Tile, ...] = tuple(
    _make(a, b, i)
    for i, (a, b) in enumerate((a, b) for a in range(MAX_PIPS + 1) for b in range(a, MAX_PIPS + 1))
)
"""The 28 tiles in canonical order: 0-0, 0-1, ..., 0-6, 1-1, ..., 6-6."""

_BY_PAIR: list[list[Tile]] = [[ALL_TILES[0]] * (MAX_PIPS + 1) for _ in range(MAX_PIPS + 1)]
for _t in ALL_TILES:
    _BY_PAIR[_t.low][_t.high] = _t
    _BY_PAIR[_t.high][_t.low] = _t

TILE_INDEX: dict[Tile, int] = {t: t.index for t in ALL_TILES}

FITS: tuple[int, ...] = tuple(
    sum(t.bit for t in ALL_TILES if t.has(n)) for n in range(MAX_PIPS + 1)
)
"""For each number, the set (as bits) of tiles showing it."""

ALL_BITS: int = (1 << len(ALL_TILES)) - 1
"""The set of all 28 tiles."""

DOUBLES: int = sum(t.bit for t in ALL_TILES if t.is_double)
"""The set of the 7 doubles."""

PIPS_OF_INDEX: tuple[int, ...] = tuple(t.pips for t in ALL_TILES)
"""Each tile's pips, by canonical index."""

TILE_OF_BIT: dict[int, Tile] = {t.bit: t for t in ALL_TILES}


def tiles_of(mask: int) -> list[Tile]:
    """The tiles of a set, in canonical order."""
    out = []
    while mask:
        low = mask & -mask
        out.append(TILE_OF_BIT[low])
        mask ^= low
    return out


def mask_pips(mask: int) -> int:
    """The pips of a set of tiles."""
    total = 0
    while mask:
        low = mask & -mask
        total += PIPS_OF_INDEX[low.bit_length() - 1]
        mask ^= low
    return total


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
            raise InvalidArgument(
                f"an end is 'left' or 'right', got {shown(text)}", reason="INVALID_END"
            ) from None


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
