"""Pairing a tournament's rounds (TOURNAMENT.md sections 1, 2 and 4).

`pair_round` gives round r's byes and tables from the settings, the seeding, who has
withdrawn, and the tally of every result before the round. Round robin follows the circle
method by seeding rank; Swiss at two-sided tables pairs in standing order with depth-first
backtracking to avoid rematches; Swiss at multi-sided tables fills tables by fewest earlier
meetings.

The backtracking is exact but not exponential: a candidate is accepted once the entrants left
can still be paired, which a greedy completion shows at once in the common case, Dirac's
condition (every entrant left may meet at least half of the others) shows without a search
while many are left, and a maximum matching (Edmonds) decides otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidArgument
from .tournament_standings import Tally

ROUND_ROBIN = "round_robin"
SWISS = "swiss"
FORMATS = frozenset({ROUND_ROBIN, SWISS})
MAX_SWISS_ROUNDS = 50
REVEAL_WINDOW = 60
"""Seconds from the close of registration to round 1 by default: the entrants' time to reveal
their client seeds (TOURNAMENT.md section 3)."""
MAX_REVEAL_WINDOW = 86_400


@dataclass(frozen=True, slots=True)
class Settings:
    """A tournament's format and table (section 1 and 2). `rules` is the table's match
    rules (a preset and options) as the record writes them; `rounds` is for Swiss only."""

    format: str
    seats: int
    partnerships: bool = False
    rules: Mapping[str, Any] = field(default_factory=lambda: {"preset": "standard"})
    rounds: int | None = None
    double_round_robin: bool = False
    round_delay: int = 0
    max_entrants: int | None = None
    rated: bool = False
    """Its matches are rated (RATINGS.md section 2): every entrant's players are registered
    players."""
    reveal_window: int = REVEAL_WINDOW
    """Seconds after the close of registration that entrants have to reveal their seeds."""

    @property
    def two_sided(self) -> bool:
        """2 seats, or 4 seats in partnerships."""
        return self.seats == 2 or (self.seats == 4 and self.partnerships)

    @property
    def sides(self) -> int:
        """Sides at a full table."""
        return 2 if self.two_sided else self.seats

    def check(self) -> None:
        """Raises InvalidArgument (reason INVALID_SETTINGS) for settings section 1 and 2
        forbid, except the Swiss round count against the entrants (`check_entrants`)."""

        def bad(message: str) -> InvalidArgument:
            return InvalidArgument(message, reason="INVALID_SETTINGS")

        if self.format not in FORMATS:
            raise bad(f"a tournament's format is round_robin or swiss, got {self.format!r}")
        if self.seats not in (2, 3, 4):
            raise bad(f"a table has 2, 3 or 4 seats, got {self.seats}")
        if self.partnerships and self.seats != 4:
            raise bad("partnerships need 4 seats")
        if self.format == ROUND_ROBIN:
            if not self.two_sided:
                raise bad("a round robin is played at two-sided tables only")
            if self.rounds is not None:
                raise bad("a round robin's rounds follow from its entrants")
        else:
            if self.double_round_robin:
                raise bad("double_round_robin is for a round robin")
            if self.rounds is None or not 1 <= self.rounds <= MAX_SWISS_ROUNDS:
                raise bad(f"a Swiss tournament has 1 to {MAX_SWISS_ROUNDS} rounds")
        if self.round_delay < 0:
            raise bad("round_delay is not negative")
        if self.max_entrants is not None and self.max_entrants < 2:
            raise bad("max_entrants is at least 2")
        if not isinstance(self.rated, bool):
            raise bad("rated is true or false")
        if not 1 <= self.reveal_window <= MAX_REVEAL_WINDOW:
            raise bad(f"reveal_window is 1 to {MAX_REVEAL_WINDOW} seconds")

    def check_entrants(self, entrants: int) -> None:
        """Raises InvalidArgument (reason TOO_FEW_ENTRANTS) unless `entrants` may start:
        at least two, and more than the Swiss rounds at two-sided tables."""
        if entrants < 2:
            raise InvalidArgument(
                f"a tournament needs at least two entrants, it has {entrants}",
                reason="TOO_FEW_ENTRANTS",
            )
        rounds = self.rounds
        if self.format == SWISS and self.two_sided and rounds is not None and rounds >= entrants:
            raise InvalidArgument(
                f"{rounds} Swiss rounds at two-sided tables need more than {rounds} entrants, "
                f"there are {entrants}",
                reason="TOO_FEW_ENTRANTS",
            )

    def total_rounds(self, entrants: int) -> int:
        """How many rounds the tournament has with `entrants` seeded."""
        if self.format == SWISS:
            assert self.rounds is not None
            return self.rounds
        m = entrants + entrants % 2
        # None before the first registration (a view of the tournament is asked for then).
        return max(m - 1, 0) * (2 if self.double_round_robin else 1)


@dataclass(frozen=True, slots=True)
class PairedTable:
    """Table `table` (1-based) of a round: `sides[i]` is the entrant of side i. `withdrawn`
    lists the sides whose entrants had withdrawn: such a (round-robin) table is not played
    and counts as their forfeit."""

    table: int
    sides: tuple[int, ...]
    withdrawn: tuple[int, ...] = ()

    @property
    def played(self) -> bool:
        return not self.withdrawn


@dataclass(frozen=True, slots=True)
class Pairing:
    """A round's byes and tables."""

    round: int
    byes: tuple[int, ...]
    tables: tuple[PairedTable, ...]


def active(withdrawn_after: Sequence[int | None], entrant: int, round_number: int) -> bool:
    """Whether `entrant` is paired in `round_number`: it has not withdrawn, or withdrew
    after a later round. `withdrawn_after[e]` is the round after which entrant e withdrew
    (0: before the start), None if it has not; index 0 unused."""
    w = withdrawn_after[entrant]
    return w is None or w >= round_number


def pair_round(
    settings: Settings,
    seeding: Sequence[int],
    withdrawn_after: Sequence[int | None],
    tally: Tally,
    round_number: int,
) -> Pairing:
    """Round `round_number`'s pairing from the results before it (section 4).

    Raises InvalidArgument for a round the tournament does not have.
    """
    n = len(seeding)
    if not 1 <= round_number <= settings.total_rounds(n):
        raise InvalidArgument(f"the tournament has no round {round_number}", reason="NO_SUCH_ROUND")
    if settings.format == ROUND_ROBIN:
        byes, tables = round_robin_round(n, round_number)
        return Pairing(
            round_number,
            tuple(
                seeding[b - 1]
                for b in byes
                if active(withdrawn_after, seeding[b - 1], round_number)
            ),
            tuple(
                PairedTable(
                    t,
                    sides := (seeding[a - 1], seeding[b - 1]),
                    tuple(
                        i
                        for i, e in enumerate(sides)
                        if not active(withdrawn_after, e, round_number)
                    ),
                )
                for t, (a, b) in enumerate(tables, start=1)
            ),
        )
    order = tally.order(e for e in seeding if active(withdrawn_after, e, round_number))
    pairs: tuple[tuple[int, ...], ...]
    if settings.two_sided:
        byes, pairs = swiss_two_sided(order, tally)
    else:
        byes, pairs = swiss_multi_sided(order, tally, settings.seats)
    return Pairing(
        round_number,
        byes,
        tuple(PairedTable(t, sides) for t, sides in enumerate(pairs, start=1)),
    )


def round_robin_round(
    n: int, round_number: int
) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...]]:
    """Byes and tables (first side, second side) of a round robin of `n` entrants, as
    seeding ranks 1..n; rounds past m-1 are the double round robin's return rounds."""
    m = n + n % 2
    single = m - 1
    if not 1 <= round_number <= 2 * single:
        raise InvalidArgument(f"a round robin of {n} has no round {round_number}")
    swap = round_number > single
    r = round_number - single if swap else round_number
    ring = [((i + r - 1) % single) + 1 for i in range(single)]
    pairs = [(m, ring[0])] + [(ring[k], ring[m - 1 - k]) for k in range(1, m // 2)]
    byes: list[int] = []
    tables: list[tuple[int, int]] = []
    for a, b in pairs:
        if n < m and m in (a, b):
            byes.append(b if a == m else a)
            continue
        low, high = min(a, b), max(a, b)
        first, second = (low, high) if r % 2 == 1 else (high, low)
        tables.append((second, first) if swap else (first, second))
    return tuple(byes), tuple(tables)


def swiss_two_sided(
    order: Sequence[int], tally: Tally
) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...]]:
    """Byes and tables (first side, second side) of a Swiss round at two-sided tables,
    `order` being the active entrants in standing order."""
    players = list(order)
    byes: tuple[int, ...] = ()
    if len(players) % 2:
        without = [e for e in players if tally.byes[e] == 0]
        bye = without[-1] if without else players[-1]
        players.remove(bye)
        byes = (bye,)
    met = {e: frozenset(tally.opponents[e]) for e in players}
    pairs = _pair_without_rematches(players, met)
    if pairs is None:
        pairs = [(players[i], players[i + 1]) for i in range(0, len(players), 2)]
    rank = {e: i for i, e in enumerate(order)}
    tables = []
    for a, b in pairs:
        fa, fb = tally.first_sides[a], tally.first_sides[b]
        if fa < fb or (fa == fb and rank[a] < rank[b]):
            tables.append((a, b))
        else:
            tables.append((b, a))
    return byes, tuple(tables)


def _greedy(
    players: Sequence[int], met: Mapping[int, frozenset[int]]
) -> list[tuple[int, int]] | None:
    """Highest unpaired with the highest it has not met, no backtracking; None if stuck."""
    rest = list(players)
    pairs: list[tuple[int, int]] = []
    while rest:
        u = rest.pop(0)
        seen = met[u]
        for i, c in enumerate(rest):
            if c not in seen:
                del rest[i]
                pairs.append((u, c))
                break
        else:
            return None
    return pairs


def _pair_without_rematches(
    players: Sequence[int], met: Mapping[int, frozenset[int]]
) -> list[tuple[int, int]] | None:
    """Section 4's depth-first pairing without rematches, or None when none exists.

    The search pairs the top entrant with its first candidate whose remainder can be
    paired: that is exactly what depth-first backtracking returns, found without trying
    the failing subtrees one by one.
    """
    most_met = max((len(met[e]) for e in players), default=0)
    rest = list(players)
    pairs: list[tuple[int, int]] = []
    while rest:
        u = rest[0]
        seen = met[u]
        left = len(rest) - 2
        chosen = None
        for i in range(1, len(rest)):
            c = rest[i]
            if c in seen:
                continue
            remainder = rest[1:i] + rest[i + 1 :]
            if left >= 2 * (most_met + 1):
                # Dirac: every entrant left may meet at least half of the others.
                chosen = i
                break
            completion = _greedy(remainder, met)
            if completion is not None:
                # The greedy completion is what the backtracking search would find.
                return [*pairs, (u, c), *completion]
            if _perfectly_matchable(remainder, met):
                chosen = i
                break
        if chosen is None:
            return None
        pairs.append((u, rest[chosen]))
        rest = rest[1:chosen] + rest[chosen + 1 :]
    return pairs


def _perfectly_matchable(players: Sequence[int], met: Mapping[int, frozenset[int]]) -> bool:
    """Whether `players` can all be paired without rematches (Edmonds' blossom algorithm)."""
    n = len(players)
    if n % 2:
        return False
    adj = [[j for j in range(n) if j != i and players[j] not in met[players[i]]] for i in range(n)]
    match = [-1] * n
    for v in range(n):
        if match[v] == -1:
            for u in adj[v]:
                if match[u] == -1:
                    match[u], match[v] = v, u
                    break
    for root in range(n):
        if match[root] != -1:
            continue
        end, parent = _augmenting_path(root, adj, match)
        if end == -1:
            # A vertex left unmatched once stays unmatched in a maximum matching.
            return False
        while end != -1:
            pv = parent[end]
            ppv = match[pv]
            match[end], match[pv] = pv, end
            end = ppv
    return True


def _augmenting_path(
    root: int, adj: Sequence[Sequence[int]], match: list[int]
) -> tuple[int, list[int]]:
    n = len(adj)
    used = [False] * n
    parent = [-1] * n
    base = list(range(n))
    used[root] = True
    queue = [root]
    head = 0

    def lca(a: int, b: int) -> int:
        seen = [False] * n
        while True:
            a = base[a]
            seen[a] = True
            if match[a] == -1:
                break
            a = parent[match[a]]
        while True:
            b = base[b]
            if seen[b]:
                return b
            b = parent[match[b]]

    def mark(v: int, b: int, child: int, blossom: list[bool]) -> None:
        while base[v] != b:
            blossom[base[v]] = blossom[base[match[v]]] = True
            parent[v] = child
            child = match[v]
            v = parent[match[v]]

    while head < len(queue):
        v = queue[head]
        head += 1
        for to in adj[v]:
            if base[v] == base[to] or match[v] == to:
                continue
            if to == root or (match[to] != -1 and parent[match[to]] != -1):
                b = lca(v, to)
                blossom = [False] * n
                mark(v, b, to, blossom)
                mark(to, b, v, blossom)
                for i in range(n):
                    if blossom[base[i]]:
                        base[i] = b
                        if not used[i]:
                            used[i] = True
                            queue.append(i)
            elif parent[to] == -1:
                parent[to] = v
                if match[to] == -1:
                    return to, parent
                used[match[to]] = True
                queue.append(match[to])
    return -1, parent


def table_sizes(entrants: int, seats: int) -> tuple[int, ...]:
    """ceil(N / s) tables, sizes differing by at most one, larger first."""
    k = -(-entrants // seats)
    if k == 0:
        return ()
    base, extra = divmod(entrants, k)
    return (base + 1,) * extra + (base,) * (k - extra)


def swiss_multi_sided(
    order: Sequence[int], tally: Tally, seats: int
) -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...]]:
    """Byes and tables (entrants in seat order) of a Swiss round at multi-sided tables,
    `order` being the active entrants in standing order."""
    if len(order) == 1:
        return (order[0],), ()
    unplaced = list(order)
    tables: list[tuple[int, ...]] = []
    for size in table_sizes(len(order), seats):
        members = [unplaced.pop(0)]
        counts: dict[int, int] = {}
        while len(members) < size:
            for o in tally.opponents[members[-1]]:
                counts[o] = counts.get(o, 0) + 1
            best_i, best = 0, -1
            for i, c in enumerate(unplaced):
                k = counts.get(c, 0)
                if best == -1 or k < best:
                    best_i, best = i, k
                    if k == 0:
                        break
            members.append(unplaced.pop(best_i))
        tables.append(tuple(members))
    return (), tuple(tables)


def seats_of(settings: Settings, sides: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """(entrant, player index) on each seat of a table whose sides are `sides`: side i on
    seat i, or, in partnerships, the first side on seats 0 and 2 and the second on 1 and 3,
    each entrant's first player on the lower seat."""
    if settings.partnerships:
        a, b = sides
        return ((a, 0), (b, 0), (a, 1), (b, 1))
    return tuple((e, 0) for e in sides)
