"""Scoring and standings of a tournament (TOURNAMENT.md section 5).

A table's result places its sides and gives each its match points and margin; a `Tally`
accumulates results and byes entrant by entrant (match points, margin, Buchholz, wins, and
what pairing needs: opponents met, byes, first sides), one result at a time without going
over the earlier ones again. `Tally.order()` ranks the entrants by every tie-break down to
seeding rank, for the standings (`Tally.standings()`) and the Swiss pairing alike.

Match points are always a multiple of 1/2, so a tally counts them in halves (integers) and
gives them out as `Fraction`s.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from operator import neg

from .errors import InvalidArgument

TARGET = "target"
FORFEIT = "forfeit"
ABANDONED = "abandoned"
RESULT_REASONS = frozenset({TARGET, FORFEIT, ABANDONED})


@dataclass(frozen=True, slots=True)
class TableResult:
    """How a table's match ended: its `reason` (target, forfeit, abandoned), each side's
    final score, and the side that forfeited, if one did."""

    reason: str
    scores: tuple[int, ...]
    forfeited_side: int | None = None


@dataclass(frozen=True, slots=True)
class ScoredResult:
    """A table's result with what section 5 derives from it: each side's place (1 is first),
    match points and margin."""

    reason: str
    scores: tuple[int, ...]
    forfeited_side: int | None
    places: tuple[int, ...]
    match_points: tuple[Fraction, ...]
    margins: tuple[int, ...]

    @property
    def halves(self) -> tuple[int, ...]:
        """Each side's match points in halves."""
        return tuple(int(p * 2) for p in self.match_points)

    @property
    def winner(self) -> int | None:
        """The side placed first alone, if one is."""
        firsts = [i for i, p in enumerate(self.places) if p == 1]
        return firsts[0] if len(firsts) == 1 else None


def score_result(result: TableResult) -> ScoredResult:
    """Places, match points and margins of a table's result (section 5).

    Raises InvalidArgument for an unknown reason, fewer than two sides, or a forfeited side
    that is not one of them (or given with another reason than forfeit).
    """
    sides = len(result.scores)
    places = result_places(result)
    if result.reason == ABANDONED:
        return ScoredResult(
            result.reason,
            result.scores,
            None,
            places,
            (Fraction(sides - 1, 2),) * sides,
            (0,) * sides,
        )
    forfeited = result.forfeited_side
    keys = [(i != forfeited, s) for i, s in enumerate(result.scores)]
    points = tuple(
        Fraction(
            2 * sum(other < key for other in keys) + sum(other == key for other in keys) - 1, 2
        )
        for key in keys
    )
    margins = tuple(
        s - max(o for j, o in enumerate(result.scores) if j != i)
        for i, s in enumerate(result.scores)
    )
    return ScoredResult(result.reason, result.scores, forfeited, places, points, margins)


def result_places(result: TableResult) -> tuple[int, ...]:
    """Each side's place in a table's result (section 5), `score_result`'s places without
    its match points and margins: higher scores first, the forfeiting side below every
    other, equal ones sharing a place; an abandoned match's sides all first.

    Raises InvalidArgument as `score_result` does.
    """
    sides = len(result.scores)
    if result.reason not in RESULT_REASONS:
        raise InvalidArgument(
            f"a table result's reason is one of {sorted(RESULT_REASONS)}, got {result.reason!r}",
            reason="INVALID_RESULT",
        )
    if sides < 2:
        raise InvalidArgument("a table result has at least two sides", reason="INVALID_RESULT")
    forfeited = result.forfeited_side
    if (result.reason == FORFEIT) != (forfeited is not None):
        raise InvalidArgument(
            "a forfeit, and only a forfeit, names its forfeited side", reason="INVALID_RESULT"
        )
    if forfeited is not None and not 0 <= forfeited < sides:
        raise InvalidArgument(
            f"forfeited side {forfeited} is not one of the {sides} sides",
            reason="INVALID_RESULT",
        )
    if result.reason == ABANDONED:
        return (1,) * sides
    keys = [(i != forfeited, s) for i, s in enumerate(result.scores)]
    return tuple(1 + sum(other > key for other in keys) for key in keys)


def walkover(sides: int, withdrawn: Sequence[int]) -> ScoredResult:
    """The result of a round-robin table never played because the entrants of the
    `withdrawn` sides withdrew: a forfeit by the one (the others' margins 0), or, when more
    than one withdrew, an abandoned match."""
    if len(withdrawn) == 1:
        return score_result(TableResult(FORFEIT, (0,) * sides, withdrawn[0]))
    return score_result(TableResult(ABANDONED, (0,) * sides))


def fraction_text(value: Fraction) -> str:
    """A match-point figure as the record writes it: "1", "3/2", "-1/2"."""
    return str(value)


def parse_fraction(text: str) -> Fraction:
    """A figure written as `fraction_text` writes it. Raises InvalidArgument otherwise."""
    try:
        value = Fraction(text)
    except (ValueError, TypeError, ZeroDivisionError):
        raise InvalidArgument(f"not an exact number: {text!r}") from None
    if fraction_text(value) != text:
        raise InvalidArgument(f"not written in lowest terms: {text!r}")
    return value


@dataclass(frozen=True, slots=True)
class Standing:
    """One line of the standings, with every figure the ranking uses (match points and
    Buchholz counted in halves; `match_points` and `buchholz` give them exactly)."""

    rank: int
    entrant: int
    points_halves: int
    margin: int
    buchholz_halves: int
    wins: int

    @property
    def match_points(self) -> Fraction:
        return Fraction(self.points_halves, 2)

    @property
    def buchholz(self) -> Fraction:
        return Fraction(self.buchholz_halves, 2)


@dataclass(frozen=True, slots=True)
class Tally:
    """Every entrant's totals so far, indexed by entrant number (1-based; index 0 unused).

    `points` and `buchholz` are in halves. `opponents[e]` lists, once per table shared,
    every other entrant `e` has sat with (in the order met); `first_sides[e]` counts the
    tables where `e` took the first side, `byes[e]` its byes.
    """

    seeding_rank: tuple[int, ...]
    points: tuple[int, ...]
    margin: tuple[int, ...]
    buchholz: tuple[int, ...]
    wins: tuple[int, ...]
    byes: tuple[int, ...]
    first_sides: tuple[int, ...]
    opponents: tuple[tuple[int, ...], ...]

    @classmethod
    def start(cls, seeding: Sequence[int], entrants: int | None = None) -> Tally:
        """The empty tally of the entrants of `seeding` (entrant numbers in rank order) among
        `entrants` registered (default: as many as `seeding` orders, so a permutation of
        1..n). An entrant `seeding` leaves out (one that never revealed its seed) takes no
        part: no seeding rank, no standing."""
        n = len(seeding) if entrants is None else entrants
        if len(set(seeding)) != len(seeding) or not all(1 <= e <= n for e in seeding):
            raise InvalidArgument("a seeding orders the entrants 1..n, each once")
        rank = [0] * (n + 1)
        for r, e in enumerate(seeding, start=1):
            rank[e] = r
        zeros = (0,) * (n + 1)
        return cls(tuple(rank), zeros, zeros, zeros, zeros, zeros, zeros, ((),) * (n + 1))

    @property
    def entrants(self) -> int:
        return len(self.points) - 1

    def with_bye(self, entrant: int) -> Tally:
        """The tally after a bye: 1 match point, margin 0, no opponents."""
        points = list(self.points)
        buchholz = list(self.buchholz)
        byes = list(self.byes)
        points[entrant] += 2
        byes[entrant] += 1
        for o in self.opponents[entrant]:
            buchholz[o] += 2
        return Tally(
            self.seeding_rank,
            tuple(points),
            self.margin,
            tuple(buchholz),
            self.wins,
            tuple(byes),
            self.first_sides,
            self.opponents,
        )

    def with_table(self, sides: Sequence[int], result: ScoredResult) -> Tally:
        """The tally after a table's result; `sides[i]` is the entrant of side i."""
        points = list(self.points)
        margin = list(self.margin)
        buchholz = list(self.buchholz)
        wins = list(self.wins)
        first_sides = list(self.first_sides)
        opponents = list(self.opponents)
        halves = result.halves
        # Buchholz of everyone already met by a side's entrant grows with that side's points.
        for e, h in zip(sides, halves, strict=True):
            if h:
                for o in self.opponents[e]:
                    buchholz[o] += h
            points[e] += h
        for i, e in enumerate(sides):
            margin[e] += result.margins[i]
            others = tuple(o for o in sides if o != e)
            opponents[e] = self.opponents[e] + others
            buchholz[e] += sum(points[o] for o in others)
        winner = result.winner
        if winner is not None:
            wins[sides[winner]] += 1
        first_sides[sides[0]] += 1
        return Tally(
            self.seeding_rank,
            tuple(points),
            tuple(margin),
            tuple(buchholz),
            tuple(wins),
            self.byes,
            tuple(first_sides),
            tuple(opponents),
        )

    def order(self, entrants: Iterable[int] | None = None) -> list[int]:
        """`entrants` (default all) in standing order: section 5's ranking, match points,
        margin, Buchholz, wins (all higher first), then seeding rank.

        The one place that ranking is written: the standings and the Swiss pairing both take
        their order from here.
        """
        # Sorted column-wise, every entrant at once (a key function called per entrant costs
        # more), then narrowed to `entrants`. The seeding ranks differ, so the entrant number
        # (last) is never compared; index 0's row is no entrant's.
        rows = sorted(
            zip(
                map(neg, self.points),
                map(neg, self.margin),
                map(neg, self.buchholz),
                map(neg, self.wins),
                self.seeding_rank,
                range(len(self.points)),
                strict=True,
            )
        )
        ranked = [row[-1] for row in rows]
        if entrants is None:
            rank = self.seeding_rank  # 0 for index 0 and for an entrant not taking part
            return [e for e in ranked if rank[e]]
        wanted = set(entrants)
        return [e for e in ranked if e in wanted]

    def standings(self) -> tuple[Standing, ...]:
        """Every entrant ranked, withdrawn ones included, each with its figures."""
        points, margin, buchholz, wins = self.points, self.margin, self.buchholz, self.wins
        return tuple(
            Standing(rank, e, points[e], margin[e], buchholz[e], wins[e])
            for rank, e in enumerate(self.order(), start=1)
        )

    def meetings(self, a: int, b: int) -> int:
        """How many tables `a` and `b` have shared."""
        return self.opponents[a].count(b)
