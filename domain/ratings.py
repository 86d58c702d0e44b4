"""Players' ratings (RATINGS.md): the update after a rated match, what is shown, and the
leaderboard's order. Pure: anyone holding the records of the rated matches recomputes every
rating with these functions alone.

The update is the Weng–Lin Bayesian approximation with the Plackett–Luce model, written out
as `openskill` 6.2.0's `PlackettLuce()` computes it with its defaults (RATINGS.md section 3);
the shared test vectors hold it to 1e-9.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import InvalidArgument
from .tiles import sides_of
from .tournament_standings import TableResult, result_places

MU = 25.0
"""A newcomer's mean."""
SIGMA = 25.0 / 3.0
"""A newcomer's standard deviation."""
BETA = 25.0 / 6.0
"""The spread of one performance around a player's mean."""
TAU = 25.0 / 300.0
"""The dynamics: added (in quadrature) to each sigma before a match."""
KAPPA = 0.0001
"""The floor of a sigma's shrink factor, squared."""
_TAU2 = TAU * TAU
_BETA2 = BETA * BETA
PROVISIONAL_ABOVE = 6.0
"""A rating is provisional while its sigma is above this (RATINGS.md section 4)."""

POOLS = ("2", "3", "4", "pairs")
"""The pools a player has a rating in: two, three or four seats, and four in partnerships."""


def pool_of(seats: int, partnerships: bool) -> str:
    """The pool of a match of `seats` seats (section 1). Raises InvalidArgument for a table
    the rules have not."""
    if partnerships:
        if seats != 4:
            raise InvalidArgument("partnerships are four seats")
        return "pairs"
    if seats not in (2, 3, 4):
        raise InvalidArgument(f"a match has 2, 3 or 4 seats, not {seats}")
    return str(seats)


def rated_table(players: Sequence[str], sides: int) -> tuple[str, tuple[tuple[int, ...], ...]]:
    """The pool and each side's seats of a rated match whose end names `players` (its seat
    holders, seat order) and gives `sides` scores: four seats in two sides are partnerships.
    Raises InvalidArgument for a table the rules have not, or players they would not seat
    (a seat without one, one in two seats)."""
    seats = len(players)
    table = _TABLES.get((seats, sides))
    if table is None:
        partnerships = seats == 4 and sides == 2
        pool = pool_of(seats, partnerships)
        each = sides_of(seats, partnerships)
        if len(each) != sides:
            raise InvalidArgument(f"{sides} scores for {len(each)} sides")
        table = _TABLES[seats, sides] = (pool, each)
    if not all(players) or len(set(players)) != seats:
        raise InvalidArgument("a seat without a player, or a player in two seats")
    return table


_TABLES: dict[tuple[int, int], tuple[str, tuple[tuple[int, ...], ...]]] = {}
"""`rated_table`'s pool and sides by (seats, scores): the few tables the rules have, each
made once (a rebuild asks for one a rated match)."""


@dataclass(frozen=True, slots=True)
class Rating:
    """A player's rating in one pool: `mu` and `sigma` (section 1), and how many rated
    matches made it."""

    mu: float = MU
    sigma: float = SIGMA
    matches: int = 0

    @property
    def display(self) -> int:
        """The rating shown: round(1500 + 60 * (mu - 25)); a newcomer shows 1500."""
        return round(1500 + 60 * (self.mu - 25))

    @property
    def provisional(self) -> bool:
        """Shown with a "?" and kept off the leaderboard while sigma is above 6."""
        return self.sigma > PROVISIONAL_ABOVE

    @property
    def conservative(self) -> float:
        """mu - 3 * sigma: the leaderboard's second key."""
        return self.mu - 3 * self.sigma


NEWCOMER = Rating()


def rate(teams: Sequence[Sequence[Rating]], places: Sequence[int]) -> list[list[Rating]]:
    """Each side's players' ratings after a match: `teams[i]` holds side i's seat holders'
    ratings before it (seat order), `places[i]` its place (1 is first, equal places tied).

    Raises InvalidArgument for fewer than two sides, an empty side, or places that do not
    match the sides.
    """
    n = len(teams)
    if n < 2 or not all(teams):
        raise InvalidArgument("a rated match has two sides or more, each with a player")
    if len(places) != n:
        raise InvalidArgument("one place (1 or more) for each side")
    for p in places:
        if (type(p) is not int and (isinstance(p, bool) or not isinstance(p, int))) or p < 1:
            raise InvalidArgument("one place (1 or more) for each side")
    # Written out with loops rather than generators and sum() (a rebuild rates every rated
    # match: this is most of its arithmetic), each sum in the same order as openskill's.
    # The dynamics first: each sigma grows by tau before the match (no limit on sigma).
    sqrt = math.sqrt
    sigmas: list[list[float]] = []
    mus: list[float] = []
    variances: list[float] = []
    spread = 0.0
    for team in teams:
        grown = []
        mu = variance = 0.0
        for r in team:
            sigma = sqrt(r.sigma * r.sigma + _TAU2)
            grown.append(sigma)
            mu += r.mu
            variance += sigma * sigma
        sigmas.append(grown)
        mus.append(mu)
        variances.append(variance)
        spread += variance + _BETA2
    c = sqrt(spread)
    c2 = c * c
    exp = math.exp
    strengths = [exp(mu / c) for mu in mus]
    # For each side q: its place, the strengths of the sides placed at q or below it, and
    # how many share its place.
    by_q = []
    for place in places:
        total = 0.0
        ties = 0
        for other, strength in zip(places, strengths, strict=True):
            if other >= place:
                total += strength
                if other == place:
                    ties += 1
        by_q.append((place, total, ties))
    after: list[list[Rating]] = []
    for i in range(n):
        omega = delta = 0.0
        mine = places[i]
        strength = strengths[i]
        q = -1
        for place, total, ties in by_q:
            q += 1
            if place > mine:
                continue
            share = strength / total
            delta += share * (1 - share) / ties
            omega += ((1 - share) if q == i else -share) / ties
        variance = variances[i]
        omega *= variance / c
        delta *= variance / c2
        delta *= sqrt(variance) / c  # gamma, openskill's default
        rated = []
        for rating, sigma in zip(teams[i], sigmas[i], strict=True):
            part = sigma * sigma / variance
            rated.append(
                Rating(
                    rating.mu + part * omega,
                    sigma * sqrt(max(1 - part * delta, KAPPA)),
                    rating.matches + 1,
                )
            )
        after.append(rated)
    return after


@dataclass(frozen=True, slots=True)
class RatedMatch:
    """A rated match as its record gives it: its pool, each side's players (seat order), and
    each side's place (section 3)."""

    pool: str
    sides: tuple[tuple[str, ...], ...]
    places: tuple[int, ...]


def places_of(
    reason: str, scores: Sequence[int], forfeited_side: int | None = None
) -> tuple[int, ...]:
    """Each side's place in a match that ended by `reason` (target or forfeit) with
    `scores`, as TOURNAMENT.md section 5 places sides (section 3): higher scores first, the
    forfeiting side below every other, equal scores sharing a place. Raises InvalidArgument
    for another reason or a forfeited side that is not one."""
    if reason not in ("target", "forfeit"):
        raise InvalidArgument(f"a rated match ends by its target or a forfeit, not {reason!r}")
    return result_places(TableResult(reason, tuple(scores), forfeited_side))


def rated_match_of_record(record: Mapping[str, Any]) -> tuple[int, RatedMatch] | None:
    """A rated match as its record gives it (RECORD.md, section 5 here), with its
    `rated.order`; None for a record of a match that is not rated. The record is taken as
    it is: check it first (`bergen verify`). Raises InvalidArgument for a rated record
    that does not name a player on every seat."""
    rated = record.get("rated")
    if rated is None:
        return None
    result = record["result"]
    seats = record["seats"]
    if any("player" not in seat for seat in seats):
        raise InvalidArgument("a rated match's record names a player on every seat")
    sides = tuple(tuple(seats[s]["player"] for s in side) for side in record["sides"])
    places = places_of(result["reason"], result["scores"], result.get("forfeited_side"))
    return int(rated["order"]), RatedMatch(str(rated["pool"]), sides, places)


def rating_steps(
    matches: Iterable[RatedMatch],
) -> Iterator[tuple[RatedMatch, dict[str, tuple[Rating, Rating]]]]:
    """Each of `matches`, applied one at a time in the order given (their `rated.order`),
    with its players' ratings in its pool before and after it: a player's history as
    ListPlayerMatches shows it. Raises InvalidArgument for a match of an unknown pool or
    with a player on two seats."""
    pools: dict[str, dict[str, Rating]] = {pool: {} for pool in POOLS}
    for m in matches:
        if m.pool not in pools:
            raise InvalidArgument(f"no pool {m.pool!r}: the pools are {', '.join(POOLS)}")
        players = [p for side in m.sides for p in side]
        if len(set(players)) != len(players):
            raise InvalidArgument("a rated match has no player on two seats")
        ratings = pools[m.pool]
        teams = [[ratings.get(p, NEWCOMER) for p in side] for side in m.sides]
        step: dict[str, tuple[Rating, Rating]] = {}
        for side, team, rated in zip(m.sides, teams, rate(teams, m.places), strict=True):
            for player, before, after in zip(side, team, rated, strict=True):
                ratings[player] = after
                step[player] = (before, after)
        yield m, step


def recompute(
    matches: Iterable[RatedMatch],
) -> dict[str, dict[str, Rating]]:
    """Every player's rating in every pool after `matches`, applied one at a time in the
    order given (their `rated.order`). Raises InvalidArgument for a match of an unknown pool
    or with a player on two seats."""
    pools: dict[str, dict[str, Rating]] = {pool: {} for pool in POOLS}
    for m, step in rating_steps(matches):
        pools[m.pool].update((player, after) for player, (_, after) in step.items())
    return pools


def leaderboard(ratings: Mapping[str, Rating]) -> list[str]:
    """A pool's leaderboard (section 4): the players who are not provisional, by displayed
    rating (higher first), then mu - 3 sigma (higher first), then fewer rated matches, then
    player id."""
    shown = [p for p, r in ratings.items() if not r.provisional]
    return sorted(
        shown,
        key=lambda p: (
            -ratings[p].display,
            -ratings[p].conservative,
            ratings[p].matches,
            p,
        ),
    )
