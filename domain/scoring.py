"""Points: headers, the double bonus, the near-target reduction, blocked hands, the lead."""

from __future__ import annotations

from collections.abc import Sequence

from .rules import Rules
from .tiles import ALL_TILES, Tile, pips
from .vocabulary import PointsReason

BLOCKED_POINTS = 2
"""Every blocked-hand rule gives 2 points (RULES.md section 9)."""


def header(
    left: int, right: int, left_double: bool, right_double: bool, tiles_on_line: int
) -> tuple[int, PointsReason | None]:
    """The header made by the line as it stands after a play (RULES.md section 4).

    Returns (points, reason) with reason None when none.
    """
    if tiles_on_line == 1:
        return (2, PointsReason.DOUBLE_HEADER) if left_double else (0, None)
    if left != right:
        return 0, None
    if left_double != right_double:
        return 3, PointsReason.TRIPLE_HEADER
    return 2, PointsReason.DOUBLE_HEADER


def reduce(rules: Rules, points: int, side_score: int) -> int:
    """Apply the near-target reduction (RULES.md section 5) to what a play scores."""
    if points <= 0 or rules.endgame_reduction == "off":
        return points
    distance = rules.target - side_score
    if distance <= 2:
        return 1
    if distance == 3:
        return min(points, 2)
    return points


def play_award(
    rules: Rules,
    tile: Tile,
    ends: tuple[int, int, bool, bool],
    tiles_on_line: int,
    side_score: int,
) -> tuple[int, int, PointsReason | None]:
    """What a play scores given the ends after it: (points, value before reduction, reason),
    reason None when it scores nothing.

    With `double_bonus` a double scores that much; a play scores only its best award, the
    header winning a tie.
    """
    base, reason = header(ends[0], ends[1], ends[2], ends[3], tiles_on_line)
    if rules.double_bonus and tile.is_double and rules.double_bonus > base:
        base, reason = rules.double_bonus, PointsReason.DOUBLE_BONUS
    return reduce(rules, base, side_score), base, reason


def place(
    ends: tuple[int, int, bool, bool] | None, tile: Tile, at_left: bool
) -> tuple[int, int, bool, bool]:
    """The ends after laying `tile` (which must fit) at one end; the first tile low-left."""
    if ends is None:
        return (tile.low, tile.high, tile.is_double, tile.is_double)
    left, right, ld, rd = ends
    if at_left:
        return (tile.other(left), right, tile.is_double, rd)
    return (left, tile.other(right), ld, tile.is_double)


def lead_of(rules: Rules, hands: Sequence[Sequence[Tile | None]]) -> tuple[int, Tile] | None:
    """Who leads which tile (RULES.md sections 2 and 9), or None when the deal is void."""
    holder: dict[Tile, int] = {}
    for seat, hand in enumerate(hands):
        for tile in hand:
            if tile is not None:
                holder[tile] = seat
    doubles = [t for t in ALL_TILES if t.is_double and t in holder]
    if doubles:
        tile = doubles[-1] if rules.lead == "highest_double" else doubles[0]
        return holder[tile], tile
    if rules.lead == "lowest_double_else_lowest_tile" and holder:
        tile = min(holder)
        return holder[tile], tile
    return None


def blocked_winner(rules: Rules, side_tiles: Sequence[Sequence[Tile]]) -> int | None:
    """The side that wins a blocked hand under `rules.blocked`, or None on a tie for best."""
    if rules.blocked == "german":
        keys = [(sum(t.is_double for t in ts), pips(list(ts))) for ts in side_tiles]
        return _unique_best(keys)
    if rules.blocked == "pips":
        return _unique_best([pips(list(ts)) for ts in side_tiles])
    # american and eastern
    without = [i for i, ts in enumerate(side_tiles) if not any(t.is_double for t in ts)]
    if len(without) == 1:
        return without[0]
    if without:
        if rules.blocked == "american":
            keys2 = {i: (len(side_tiles[i]), pips(list(side_tiles[i]))) for i in without}
        else:
            keys2 = {i: (0, pips(list(side_tiles[i]))) for i in without}
        best = min(keys2.values())
        winners = [i for i, k in keys2.items() if k == best]
        return winners[0] if len(winners) == 1 else None
    lowest = min((min(t for t in ts if t.is_double), i) for i, ts in enumerate(side_tiles))
    return lowest[1]


def _unique_best(keys: Sequence[object]) -> int | None:
    best = min(keys)  # type: ignore[type-var]
    winners = [i for i, k in enumerate(keys) if k == best]
    return winners[0] if len(winners) == 1 else None


def ranking(
    reason: str, scores: Sequence[int], forfeited_side: int | None = None
) -> tuple[tuple[int, ...], ...] | None:
    """The sides in rank order, best first, sides tied on score sharing a place: by score,
    and after a forfeit (RULES.md section 11) the forfeiting side below every other whatever
    its score. None for an abandoned match, which has no ranking."""
    if reason == "abandoned":
        return None
    others = [side for side in range(len(scores)) if side != forfeited_side]
    places: list[tuple[int, ...]] = []
    for score in sorted({scores[side] for side in others}, reverse=True):
        places.append(tuple(side for side in others if scores[side] == score))
    if forfeited_side is not None:
        places.append((forfeited_side,))
    return tuple(places)
