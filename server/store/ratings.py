"""The ratings' tables (RATINGS.md), and what a store offers to fold and read them.

Like the listing, the ratings are a read model folded from the events by a projection
(`bergen.server.ratings`), with the global position it reached written in the same
transaction as its rows. The SQL is written once here for both backends: each hands the
statements a `Db` (one connection, its parameter marker) inside its own transaction.

A leaderboard's page is one range of an index: the order of RATINGS.md section 4 is kept as
ascending columns (the rating and mu - 3 sigma negated, then the rated matches and the
player id), and a page token names the last key given.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from bergen.api.chain import micros
from bergen.domain.ratings import POOLS, Rating

from .listing import POSITIONS_TABLE, position_fault, sealed_position
from .sealed import ReadModelTampered, Seals, compact_json
from .statements import Dialect

RATINGS = "ratings"
"""The ratings' name in projection_positions."""
_CHUNK = 500
"""Values per `IN (...)`: below every SQLite build's limit on bound parameters."""


# The rows a fold makes are named tuples, immutable as frozen dataclasses are and made
# five times as fast (a frozen dataclass sets each field through object.__setattr__): a
# rebuild makes a history row and a holder a seat of every rated match.


class Holder(NamedTuple):
    """Who held a seat of a rated match: the registered player, its name and bot flag."""

    player: str
    name: str
    bot: bool


class PlayerRating(NamedTuple):
    """A player's rating in a pool, with its name and bot flag."""

    player_id: str
    pool: str
    name: str
    bot: bool
    rating: Rating


class HistoryRow(NamedTuple):
    """A player's rating before and after one rated match of a pool."""

    player_id: str
    pool: str
    match_id: str
    order: int
    seat: int
    place: int
    before: Rating
    after: Rating
    ended_at: datetime


SeatRatings = tuple[tuple[Rating, Rating], ...]
"""A rated match's ratings, in seat order: each seat holder's rating before it and after."""


class RatedEnd(NamedTuple):
    """A rated match's end as applied: its pool, the global position of its end, every
    seat's holder, each side's seats and place, and when it ended."""

    match_id: str
    pool: str
    order: int
    seats: tuple[Holder, ...]
    sides: tuple[tuple[int, ...], ...]
    places: tuple[int, ...]
    ended_at: datetime


BoardKey = tuple[int, float, int, str]
"""A leaderboard position: rank_rating, rank_conservative, matches, player_id."""


def board_key(player_id: str, r: Rating) -> BoardKey:
    """Where `r` stands on its pool's leaderboard: each part ascending."""
    return (-r.display, -r.conservative, r.matches, player_id)


class Db(Protocol):
    """One connection inside a transaction (or autocommit, for reads), as the statements
    use it."""

    dialect: Dialect

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

    def run(self, sql: str, params: Sequence[Any] = ()) -> None: ...

    def insert(
        self, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]], conflict: str = ""
    ) -> None:
        """Insert `rows` into `table`'s `columns`, with `conflict` (an ON CONFLICT clause) or
        none, as the backend writes many rows fastest (PostgreSQL: COPY when there is no
        conflict clause, the rows sent as `rows` makes them; rows that offer them, their
        own `copy_blocks`, as `HistoryRows` does)."""
        ...

    def time_in(self, at: datetime) -> Any: ...

    def time_of(self, value: Any) -> datetime: ...


# A rated match's JSON columns, compact, from the seals' encoder (made once: json.dumps
# makes one a call, and a rebuild writes these for every rated match).
_dumps = compact_json


def _holders_json(seats: Sequence[Holder | None]) -> str:
    # A Holder is a tuple (player, name, bot): the encoder writes it as that list.
    return _dumps(seats)


def _holders(text: str) -> tuple[Holder | None, ...]:
    return tuple(None if h is None else Holder(h[0], h[1], bool(h[2])) for h in json.loads(text))


def _sides_json(sides: Sequence[Sequence[int]]) -> str:
    return _dumps([list(s) for s in sides])


def _sides(text: str) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(s) for s in json.loads(text))


_RATING_COLUMNS = "player_id, pool, name, bot, mu, sigma, matches"
_RATING_WRITTEN = (*_RATING_COLUMNS.split(", "), "shown", "rank_rating", "rank_conservative")
_RATING_READ = ", ".join((*_RATING_WRITTEN, "key_id", "mac"))
_HISTORY_COLUMNS = ("player_id", "pool", "rated_order")
_RATED_COLUMNS = (
    "match_id", "pool", "rated_order", "seats", "sides", "places", "ratings", "ended_at"
)  # fmt: skip
_RATED_READ = ", ".join(f"m.{c}" for c in (*_RATED_COLUMNS, "key_id", "mac"))

# A rating and a rated match carry an authenticator (bergen.server.store.sealed) of their
# columns as written, among them what binds them to the log: a rating's player and pool, a
# match's id and the order of its end. A row read that does not verify raises
# ReadModelTampered. A rated match's row holds every seat's rating before and after it
# (`ratings`, packed), so a player's history row is its key alone, (player, pool, order),
# unsealed: what it shows is read from the match's sealed row, and a row naming a match
# that player did not play in that pool is refused as tampered with. A rebuild then seals
# one row a rated match, not one a seat. The bytes sealed
# are the table's name and its columns packed in a fixed layout (`struct`): each text's
# length, then the numbers (an int as 8 bytes, a float as its 8 IEEE bytes, a time as whole
# microseconds since 1970 UTC), then the texts in UTF-8. A rebuild seals every row it
# writes, and packing costs a fifth of encoding the same columns as JSON (the floats'
# shortest decimal form was most of it).

_RATING_PACK = struct.Struct("<III?ddq?qd")
_RATED_PACK = struct.Struct("<IIIIIIqq")
_SEAT_PACK = struct.Struct("<ddddq")
"""A seat's ratings in a rated match's `ratings`: mu and sigma before, after, and the rated
matches after (before: one fewer)."""
_RATING_TAG = b"player_ratings\0"
_RATED_TAG = b"rated_matches\0"


def pack_ratings(rated: SeatRatings) -> bytes:
    """A rated match's `ratings` column: each seat's ratings (`_SEAT_PACK`), in seat order."""
    pack = _SEAT_PACK.pack
    return b"".join([pack(b.mu, b.sigma, a.mu, a.sigma, a.matches) for b, a in rated])


def unpack_ratings(packed: bytes) -> SeatRatings:
    """The ratings `pack_ratings` packed. Raises struct.error for bytes it did not make."""
    return tuple(
        (Rating(mb, sb, n - 1), Rating(ma, sa, n))
        for mb, sb, ma, sa, n in _SEAT_PACK.iter_unpack(packed)
    )


def rating_message(v: Sequence[Any]) -> bytes:
    """The bytes a `player_ratings` row's authenticator covers, its columns as written
    (_RATING_WRITTEN). Raises struct.error, TypeError or ValueError for a value that does not
    fit its column."""
    texts: str = v[0] + v[1] + v[2]
    return (
        _RATING_TAG
        + _RATING_PACK.pack(
            len(v[0]), len(v[1]), len(v[2]), v[3], v[4], v[5], v[6], v[7], v[8], v[9]
        )
        + texts.encode()
    )


def rated_message(v: Sequence[Any], ended_us: int) -> bytes:
    """The bytes a `rated_matches` row's authenticator covers (_RATED_COLUMNS but ended_at,
    given as `ended_us`): the texts in UTF-8, then the packed ratings."""
    texts: str = v[0] + v[1] + v[3] + v[4] + v[5]
    ratings: bytes = v[6]
    return b"".join((
        _RATED_TAG,
        _RATED_PACK.pack(
            len(v[0]), len(v[1]), len(v[3]), len(v[4]), len(v[5]), len(ratings), v[2], ended_us
        ),
        texts.encode(),
        ratings,
    ))  # fmt: skip


def seal_rating(seals: Seals | None, values: Sequence[Any]) -> tuple[Any, Any]:
    """(key_id, mac) to write with a `player_ratings` row holding `values` (_RATING_WRITTEN;
    NULLs without `seals`)."""
    return (None, None) if seals is None else seals.seal_message(rating_message(values))


def _check(
    seals: Seals,
    table: str,
    key: str,
    message: Callable[..., bytes],
    args: tuple[Any, ...],
    key_id: str | None,
    mac: bytes | None,
) -> None:
    """Raises ReadModelTampered when the row of `table` named `key` whose bytes are
    `message(*args)` does not verify under `seals`."""
    try:
        why = seals.message_fault(message(*args), key_id, mac)
    except (struct.error, TypeError, ValueError, UnicodeError) as e:
        why = f"its columns cannot be sealed: {e}"
    if why is not None:
        raise ReadModelTampered(table, key, why)


def _rating_values(r: PlayerRating) -> tuple[Any, ...]:
    """A rating's columns as written (_RATING_WRITTEN)."""
    g = r.rating
    return (
        r.player_id, r.pool, r.name, bool(r.bot), float(g.mu), float(g.sigma), int(g.matches),
        not g.provisional, -int(g.display), -float(g.conservative),
    )  # fmt: skip


def _rating_row(r: tuple[Any, ...], seals: Seals | None = None) -> PlayerRating:
    """The PlayerRating of a row selected as _RATING_READ, checked under `seals`."""
    rating = PlayerRating(r[0], r[1], r[2], bool(r[3]), Rating(float(r[4]), float(r[5]), int(r[6])))
    if seals is not None:
        values = (*_rating_values(rating)[:7], bool(r[7]), r[8], r[9])
        _check(seals, "player_ratings", f"{r[0]} {r[1]}", rating_message, (values,), r[10], r[11])
    return rating


def _rated_row(db: Db, r: Sequence[Any], seals: Seals | None) -> tuple[RatedEnd, SeatRatings]:
    """The end and ratings of a row selected as _RATED_READ, checked under `seals`. Raises
    ReadModelTampered."""
    ended_at = db.time_of(r[7])
    packed = bytes(r[6])
    if seals is not None:
        values = (r[0], r[1], int(r[2]), r[3], r[4], r[5], packed)
        _check(seals, "rated_matches", r[0], rated_message, (values, micros(ended_at)), r[8], r[9])
    try:
        end = RatedEnd(
            r[0], r[1], int(r[2]), tuple(h for h in _holders(r[3]) if h is not None),
            _sides(r[4]), tuple(json.loads(r[5])), ended_at,
        )  # fmt: skip
        rated = unpack_ratings(packed)
    except (ValueError, TypeError, IndexError, struct.error) as e:
        # Sealed as written: only rows written without seals get here.
        raise ReadModelTampered("rated_matches", r[0], f"its columns cannot be read: {e}") from e
    if len(rated) != len(end.seats):
        raise ReadModelTampered("rated_matches", r[0], "its ratings are not one a seat")
    return end, rated


def history_row(player_id: str, end: RatedEnd, rated: SeatRatings) -> HistoryRow:
    """`player_id`'s history row in the rated match `end` with its `rated`. Raises
    ReadModelTampered when that player held no seat of it."""
    for seat, h in enumerate(end.seats):
        if h.player == player_id:
            place = next(end.places[i] for i, side in enumerate(end.sides) if seat in side)
            before, after = rated[seat]
            return HistoryRow(
                player_id, end.pool, end.match_id, end.order, seat, place, before, after,
                end.ended_at,
            )  # fmt: skip
    raise ReadModelTampered(
        "rating_history", f"{player_id} {end.pool} {end.order}", "its player has no seat there"
    )


def _chunks(values: Sequence[Any], size: int = _CHUNK) -> Iterator[Sequence[Any]]:
    for i in range(0, len(values), size):
        yield values[i : i + size]


def _among(db: Db, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
    """`column` among `values`: the SQL and its parameters in the dialect."""
    d = db.dialect
    if d.any_list:
        return d.among(column, len(values)), [list(values)]
    return d.among(column, len(values)), list(values)


_COPY_SIGNATURE = b"PGCOPY\n\xff\r\n\0" + bytes(8)
"""A binary COPY's header: its signature, no flags and no header extension."""
_COPY_TRAILER = b"\xff\xff"
_COPY_FIELDS = struct.pack(">h", 3)
"""A history row's count of fields, as a binary COPY's row begins."""
_COPY_LENGTH = struct.Struct(">i").pack
_COPY_ORDER = struct.Struct(">iq").pack
"""A history row's last field in a binary COPY: its length (8) and the order."""


class HistoryRows:
    """The history rows (player, pool, order) of rated matches, one a seat, in the order of
    their key, not the matches': the key's index then takes each row next to the one
    before it, where rows in the matches' order land all over it (PostgreSQL stored a
    rebuild's 300,000 rows in 0.6 to 0.7 s, against 1.6 to 1.8). Each player's orders in a
    pool are gathered as they come (in order, as a rebuild applies them); the players are
    sorted when the rows are taken. Iterated, the rows; `copy_blocks`, the same rows as the
    data of PostgreSQL's binary COPY, made here with `struct`: the driver's `write_row`,
    a row at a time, cost a rebuild some 2.5 µs of CPU a match more."""

    def __init__(self) -> None:
        self._pools: dict[str, dict[str, list[int]]] = {}
        """By pool, by player: the orders."""

    def add(self, end: RatedEnd) -> None:
        """The rows of `end`: one for each of its seats."""
        players = self._pools.get(end.pool)
        if players is None:
            players = self._pools[end.pool] = {}
        order = end.order
        for h in end.seats:
            orders = players.get(h.player)
            if orders is None:
                players[h.player] = [order]
            else:
                orders.append(order)

    def _groups(self) -> Iterator[tuple[str, str, list[int]]]:
        pools = self._pools
        for player, pool in sorted((p, pool) for pool, players in pools.items() for p in players):
            orders = pools[pool][player]
            orders.sort()  # in order already, but for an end applied late
            yield player, pool, orders

    def __iter__(self) -> Iterator[tuple[str, str, int]]:
        for player, pool, orders in self._groups():
            for order in orders:
                yield (player, pool, order)

    def copy_blocks(self, rows: int) -> Iterator[bytes]:
        """The rows as the whole data of binary COPYs of (player_id, pool, rated_order), a
        COPY of at most `rows` rows each (none when there is no row)."""
        out: list[bytes] = [_COPY_SIGNATURE]
        count = 0
        add = out.append
        for player, pool, orders in self._groups():
            p, q = player.encode(), pool.encode()
            head = b"".join((_COPY_FIELDS, _COPY_LENGTH(len(p)), p, _COPY_LENGTH(len(q)), q))
            for order in orders:
                add(head)
                add(_COPY_ORDER(8, order))
                count += 1
                if count == rows:
                    add(_COPY_TRAILER)
                    yield b"".join(out)
                    out.clear()
                    add(_COPY_SIGNATURE)
                    count = 0
        if count:
            add(_COPY_TRAILER)
            yield b"".join(out)


class RatingsFold:
    """The ratings' transaction: the projection's position row is locked until it ends."""

    def __init__(
        self,
        db: Db,
        projection: str,
        position: tuple[int, str | None],
        seals: Seals | None = None,
    ) -> None:
        self._db = db
        self._projection = projection
        self._seals = seals
        self.position, self.fault = position
        """What the projection had folded up to when the lock was taken, and why that must
        not be trusted (None: it may)."""
        p = db.dialect.param
        self._p = p
        self._big = p + db.dialect.int8

    # ratings --------------------------------------------------------------------------------

    def ratings(self, pool: str, player_ids: Sequence[str]) -> dict[str, PlayerRating]:
        """The ratings in `pool` of those of `player_ids` who have one."""
        found: dict[str, PlayerRating] = {}
        for chunk in _chunks(list(player_ids)):
            where, params = _among(self._db, "player_id", chunk)
            for r in self._db.rows(
                f"SELECT {_RATING_READ} FROM player_ratings WHERE pool = {self._p} AND {where}",
                [pool, *params],
            ):
                found[r[0]] = _rating_row(r, self._seals)
        return found

    def ratings_in(
        self, wanted: Collection[tuple[str, str]]
    ) -> dict[tuple[str, str], PlayerRating]:
        """The ratings of those of `wanted` (pool, player) who have one, by (pool, player):
        one statement for every pool, a lookup of the primary key each (where a list of
        player ids alone would have PostgreSQL scan the table, whose updated rows a rebuild
        leaves many dead ones in)."""
        found: dict[tuple[str, str], PlayerRating] = {}
        pairs = sorted(wanted)
        p = self._p
        size = len(pairs) if self._db.dialect.any_list else _CHUNK // 2  # two values a pair
        for chunk in _chunks(pairs, max(size, 1)):
            if self._db.dialect.any_list:
                where = f"(player_id, pool) IN (SELECT unnest({p}::text[]), unnest({p}::text[]))"
                params: list[Any] = [[player for _, player in chunk], [pool for pool, _ in chunk]]
            else:
                where = f"(player_id, pool) IN (VALUES {', '.join([f'({p}, {p})'] * len(chunk))})"
                params = [v for pool, player in chunk for v in (player, pool)]
            for r in self._db.rows(
                f"SELECT {_RATING_READ} FROM player_ratings WHERE {where}", params
            ):
                found[r[1], r[0]] = _rating_row(r, self._seals)
        return found

    def save_ratings(self, ratings: Sequence[PlayerRating], fresh: bool = False) -> None:
        """Write `ratings`, new or changed: at most one a player and pool (`fresh`: none of
        them in the table yet, as in a rebuild's tables, which then takes one bulk write)."""
        rows = [_rating_values(r) for r in ratings]
        self._db.insert(
            "player_ratings",
            (*_RATING_WRITTEN, "key_id", "mac"),
            [(*v, *seal_rating(self._seals, v)) for v in rows],
            ""
            if fresh
            else "ON CONFLICT (player_id, pool) DO UPDATE SET name = excluded.name,"
            " bot = excluded.bot, mu = excluded.mu, sigma = excluded.sigma,"
            " matches = excluded.matches, shown = excluded.shown,"
            " rank_rating = excluded.rank_rating, rank_conservative = excluded.rank_conservative,"
            " key_id = excluded.key_id, mac = excluded.mac",
        )

    # the rated matches applied ----------------------------------------------------------------

    def last_order(self, pool: str) -> int:
        """The order of the latest match applied in `pool` (0: none yet)."""
        return self.last_orders([pool])[pool]

    def last_orders(self, pools: Sequence[str]) -> dict[str, int]:
        """The order of the latest match applied in each of `pools` (0: none yet), in one
        statement: a lookup of the index on (pool, rated_order) each."""
        if not pools:
            return {}
        latest = ", ".join(
            f"(SELECT max(rated_order) FROM rated_matches WHERE pool = {self._p})" for _ in pools
        )
        row = self._db.rows(f"SELECT {latest}", list(pools))[0]
        return {pool: 0 if v is None else int(v) for pool, v in zip(pools, row, strict=True)}

    def matches_after(self, pool: str, order: int) -> list[tuple[RatedEnd, SeatRatings]]:
        """The matches applied in `pool` after `order`, in order, with their ratings."""
        return [
            _rated_row(self._db, r, self._seals)
            for r in self._db.rows(
                f"SELECT {_RATED_READ} FROM rated_matches AS m WHERE m.pool = {self._p}"
                f" AND m.rated_order > {self._big} ORDER BY m.rated_order",
                [pool, order],
            )
        ]

    def drop_matches(self, ends: Sequence[RatedEnd]) -> None:
        """Delete the rows of `ends` (to be applied again): the matches and their players'
        history."""
        for where, params in self._history_keys(ends):
            self._db.run(f"DELETE FROM rating_history WHERE {where}", params)
        for chunk in _chunks(sorted({e.match_id for e in ends})):
            where, params = _among(self._db, "match_id", chunk)
            self._db.run(f"DELETE FROM rated_matches WHERE {where}", params)

    def _history_keys(self, ends: Sequence[RatedEnd]) -> Iterator[tuple[str, list[Any]]]:
        """The rows of `ends`' history by their primary key (player, pool, order): a WHERE
        clause and its parameters a chunk."""
        keys = sorted({(h.player, e.pool, e.order) for e in ends for h in e.seats})
        p = self._p
        if self._db.dialect.any_list:
            if keys:
                players, pools, orders = (list(k) for k in zip(*keys, strict=True))
                yield (
                    "(player_id, pool, rated_order) IN (SELECT unnest("
                    f"{p}::text[]), unnest({p}::text[]), unnest({p}::bigint[]))",
                    [players, pools, orders],
                )
            return
        for chunk in _chunks(keys, _CHUNK // 3):  # three values a key
            marks = ", ".join([f"({p}, {p}, {p})"] * len(chunk))
            yield (
                f"(player_id, pool, rated_order) IN (VALUES {marks})",
                [v for key in chunk for v in key],
            )

    def add_match(self, end: RatedEnd, rated: SeatRatings) -> None:
        """Record `end` as applied (unless it is already), with its seats' ratings."""
        self.add_matches([(end, rated)])

    def add_matches(
        self, applied: Sequence[tuple[RatedEnd, SeatRatings]], fresh: bool = False
    ) -> None:
        """Record each end as applied (unless it is already: `fresh` says none is, as of an
        end after its pool's latest), with its seats' ratings and its players' history
        rows (none written yet), each table's rows in one bulk write."""
        if not applied:
            return
        db, seals = self._db, self._seals
        time_in = db.time_in

        # Generators: each row is made and sealed as the backend takes it (PostgreSQL's
        # COPY sends rows from a thread of its own, and the database stores them meanwhile).
        # A few tables and results recur: their JSON made once each.
        sides_json: dict[tuple[tuple[int, ...], ...], str] = {}
        places_json: dict[tuple[int, ...], str] = {}

        def matches() -> Iterator[tuple[Any, ...]]:
            for end, rated in applied:
                sides = sides_json.get(end.sides)
                if sides is None:
                    sides = sides_json[end.sides] = _sides_json(end.sides)
                places = places_json.get(end.places)
                if places is None:
                    places = places_json[end.places] = _dumps(list(end.places))
                e = (
                    end.match_id, end.pool, end.order, _holders_json(end.seats), sides, places,
                    pack_ratings(rated),
                )  # fmt: skip
                sealed = (
                    (None, None)
                    if seals is None
                    else seals.seal_message(rated_message(e, micros(end.ended_at)))
                )
                yield (*e, time_in(end.ended_at), *sealed)

        db.insert(
            "rated_matches",
            (*_RATED_COLUMNS, "key_id", "mac"),
            matches(),
            "" if fresh else "ON CONFLICT (match_id) DO NOTHING",
        )
        history = HistoryRows()
        for end, _ in applied:
            history.add(end)
        db.insert("rating_history", _HISTORY_COLUMNS, history)

    def save_position(self, position: int) -> None:
        self._db.run(
            f"UPDATE projection_positions SET position = {self._big}, key_id = {self._p},"
            f" mac = {self._p} WHERE name = {self._p}",
            (*sealed_position(self._seals, self._projection, position), self._projection),
        )
        self.position, self.fault = position, None


class RatingsTables(Protocol):
    """The ratings' tables in one store. Every method raises StorageUnavailable when the
    database cannot be reached or written."""

    def position(self, projection: str) -> int:
        """What `projection` has folded up to (0: nothing yet), as stored (unchecked)."""
        ...

    def checked_position(self, projection: str) -> tuple[int, str | None]:
        """What `projection` has folded up to, and why that must not be trusted (None: it
        may)."""
        ...

    def folding(self, projection: str) -> AbstractContextManager[RatingsFold]:
        """A transaction holding the lock on `projection`'s position: committed when the
        block ends, rolled back if it raises."""
        ...

    def looking(self, projection: str) -> AbstractContextManager[RatingsFold]:
        """The tables as they stand, to read with a `RatingsFold`'s reads and no lock (its
        position: what `projection` had folded up to when it was read): where a fold held
        in memory starts from, before `folding` writes it."""
        ...

    def player_ratings(self, player_id: str) -> list[PlayerRating]:
        """The player's rating in each pool it has one in."""
        ...

    def leaderboard(self, pool: str, after: BoardKey | None, limit: int) -> list[PlayerRating]:
        """Up to `limit` players of `pool`'s leaderboard after the key `after` (None: from
        the first), in its order: those who are not provisional."""
        ...

    def history(
        self, player_id: str, pool: str | None, before: int | None, limit: int
    ) -> list[HistoryRow]:
        """Up to `limit` of the player's rated matches, newest first, of `pool` (None: any),
        ended before the order `before` (None: from the newest)."""
        ...

    def reset(self, projection: str) -> None:
        """Empty the ratings and set `projection` back to position 0: the servers fold every
        rated match again, in order."""
        ...


class SqlRatings:
    """`RatingsTables` on a backend that gives a `Db` to read with (`reading`) and one
    inside a transaction holding a projection's position (`locked`)."""

    def __init__(
        self,
        reading: Callable[[], AbstractContextManager[Db]],
        locked: Callable[[str], AbstractContextManager[tuple[Db, tuple[Any, ...]]]],
        seals: Seals | None = None,
    ) -> None:
        """`locked` gives the projection's position row as read: (position, key_id, mac)."""
        self._reading = reading
        self._locked = locked
        self._seals = seals

    def position(self, projection: str) -> int:
        return self.checked_position(projection)[0]

    def checked_position(self, projection: str) -> tuple[int, str | None]:
        with self._reading() as db:
            rows = db.rows(
                f"SELECT position, key_id, mac FROM {POSITIONS_TABLE}"
                f" WHERE name = {db.dialect.param}",
                [projection],
            )
        return position_fault(self._seals, projection, rows[0] if rows else None)

    @contextmanager
    def folding(self, projection: str) -> Iterator[RatingsFold]:
        with self._locked(projection) as (db, row):
            yield RatingsFold(
                db, projection, position_fault(self._seals, projection, row), self._seals
            )

    @contextmanager
    def looking(self, projection: str) -> Iterator[RatingsFold]:
        position = self.position(projection)
        with self._reading() as db:
            yield RatingsFold(db, projection, (position, None), self._seals)

    def player_ratings(self, player_id: str) -> list[PlayerRating]:
        with self._reading() as db:
            rows = db.rows(
                f"SELECT {_RATING_READ} FROM player_ratings WHERE player_id = {db.dialect.param}",
                [player_id],
            )
        return [_rating_row(r, self._seals) for r in rows]

    def leaderboard(self, pool: str, after: BoardKey | None, limit: int) -> list[PlayerRating]:
        with self._reading() as db:
            p, d = db.dialect.param, db.dialect
            order = " ORDER BY rank_rating, rank_conservative, matches, player_id"
            where = f"pool = {p} AND shown = {p}"
            params: list[Any] = [pool, True]
            if after is not None:
                where += (
                    f" AND (rank_rating, rank_conservative, matches, player_id) >"
                    f" ({p}{d.int4}, {p}, {p}{d.int4}, {p})"
                )
                params += list(after)
            rows = db.rows(
                f"SELECT {_RATING_READ} FROM player_ratings WHERE {where}{order} LIMIT {p}{d.int8}",
                [*params, limit],
            )
        return [_rating_row(r, self._seals) for r in rows]

    def history(
        self, player_id: str, pool: str | None, before: int | None, limit: int
    ) -> list[HistoryRow]:
        with self._reading() as db:
            p, d = db.dialect.param, db.dialect
            # Each pool's newest first, a range of the primary key (player, pool, order)
            # backwards, each row's match joined (its sealed row holds what is shown); for
            # every pool, the pools' ranges merged.
            where = f"h.player_id = {p} AND h.pool = {p}"
            if before is not None:
                where += f" AND h.rated_order < {p}{d.int8}"
            one = (
                f"SELECT h.pool AS h_pool, h.rated_order AS h_order, {_RATED_READ}"
                " FROM rating_history AS h LEFT JOIN rated_matches AS m"
                f" ON m.pool = h.pool AND m.rated_order = h.rated_order WHERE {where}"
                f" ORDER BY h.rated_order DESC LIMIT {p}{d.int8}"
            )
            pools = POOLS if pool is None else (pool,)
            params: list[Any] = []
            for each in pools:
                params += [player_id, each, *([] if before is None else [before]), limit]
            if len(pools) == 1:
                rows = db.rows(one, params)
            else:
                merged = " UNION ALL ".join(
                    f"SELECT * FROM ({one}) AS in_{i}" for i in range(len(pools))
                )
                rows = db.rows(
                    f"{merged} ORDER BY h_order DESC LIMIT {p}{d.int8}", [*params, limit]
                )
            out = []
            for r in rows:
                if r[2] is None:
                    raise ReadModelTampered(
                        "rating_history", f"{player_id} {r[0]} {r[1]}", "it names no rated match"
                    )
                out.append(history_row(player_id, *_rated_row(db, r[2:], self._seals)))
            return out

    def reset(self, projection: str) -> None:
        with self._locked(projection) as (db, _):
            for table in ("player_ratings", "rating_history", "rated_matches"):
                db.run(f"DELETE FROM {table}")
            db.run(
                f"UPDATE projection_positions SET position = 0, key_id = NULL, mac = NULL"
                f" WHERE name = {db.dialect.param}",
                [projection],
            )


__all__ = [
    "RATINGS",
    "BoardKey",
    "Db",
    "HistoryRow",
    "HistoryRows",
    "Holder",
    "PlayerRating",
    "RatedEnd",
    "RatingsFold",
    "RatingsTables",
    "SeatRatings",
    "SqlRatings",
    "board_key",
    "history_row",
    "pack_ratings",
    "rated_message",
    "rating_message",
    "seal_rating",
]
