"""The ratings' tables on both backends: rated ends applied in any order they are folded give
the ratings of `bergen.domain.ratings.recompute` over the ends in position order; the
leaderboard pages by key along one index; a player's history pages newest first; a reset
empties them."""

from __future__ import annotations

import dataclasses
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from conftest import Backend

from bergen.api.chain import canonical_json
from bergen.domain import codec
from bergen.domain.commands import CreateMatch
from bergen.domain.engine import execute
from bergen.domain.errors import StorageUnavailable
from bergen.domain.events import Event, MatchCreated, MatchEnded, SeatTaken, SeedRevealed
from bergen.domain.ratings import (
    NEWCOMER,
    POOLS,
    RatedMatch,
    leaderboard,
    places_of,
    recompute,
)
from bergen.domain.rules import make_rules
from bergen.domain.tiles import sides_of
from bergen.domain.vocabulary import ForfeitCause, MatchEndReason
from bergen.server import ratings as ratings_module
from bergen.server.keys import LogKeys
from bergen.server.projections import PAGE_CATCH_UP_BATCHES
from bergen.server.ratings import HeldRatings, RatingsProjection, apply_end, apply_ends
from bergen.server.store import Append, EventStore, NewEvent, StoredEvent, open_store, postgres
from bergen.server.store.packed import parse_page
from bergen.server.store.ratings import RATINGS, HistoryRow, Holder, RatedEnd, board_key
from bergen.server.store.sealed import ReadModelTampered

PLAYERS = [str(uuid.uuid5(uuid.NAMESPACE_OID, f"player {i}")) for i in range(12)]
TABLES = {"2": (2, False), "3": (3, False), "4": (4, False), "pairs": (4, True)}
START = datetime(2027, 1, 1, tzinfo=UTC)


@pytest.fixture
def store(backend: Backend) -> Iterator[EventStore]:
    s = open_store(backend.url)
    yield s
    s.close()


def random_ends(rng: random.Random, n: int) -> list[RatedEnd]:
    """`n` rated ends across the pools, with ties and forfeits, in position order."""
    ends = []
    order = 0
    for i in range(n):
        pool = rng.choice(POOLS) if i % 3 else "2"
        seats, partnerships = TABLES[pool]
        sides = sides_of(seats, partnerships)
        chosen = rng.sample(PLAYERS, seats)
        holders = tuple(
            Holder(p, f"name {PLAYERS.index(p)}", PLAYERS.index(p) % 4 == 0) for p in chosen
        )
        scores = [rng.choice((0, 50, 100, 150)) for _ in sides]
        forfeited = rng.randrange(len(sides)) if rng.random() < 0.2 else None
        reason = "forfeit" if forfeited is not None else "target"
        order += rng.randint(1, 30)
        ends.append(
            RatedEnd(
                f"m-{i}", pool, order, holders, sides, places_of(reason, scores, forfeited),
                START + timedelta(seconds=i),
            )
        )  # fmt: skip
    return ends


def as_rated(end: RatedEnd) -> RatedMatch:
    sides = tuple(tuple(end.seats[s].player for s in side) for side in end.sides)
    return RatedMatch(end.pool, sides, end.places)


def fold_in(store: EventStore, ends: list[RatedEnd]) -> None:
    for end in ends:
        with store.ratings().folding(RATINGS) as tx:
            apply_end(tx, end)


def held(store: EventStore) -> dict[str, dict[str, tuple[float, float, int]]]:
    out: dict[str, dict[str, tuple[float, float, int]]] = {pool: {} for pool in POOLS}
    for p in PLAYERS:
        for r in store.ratings().player_ratings(p):
            out[r.pool][p] = (r.rating.mu, r.rating.sigma, r.rating.matches)
    return out


def expected(ends: list[RatedEnd]) -> dict[str, dict[str, tuple[float, float, int]]]:
    pools = recompute(as_rated(e) for e in sorted(ends, key=lambda e: e.order))
    return {
        pool: {p: (r.mu, r.sigma, r.matches) for p, r in ratings.items()}
        for pool, ratings in pools.items()
    }


def assert_same(got: dict, want: dict) -> None:  # type: ignore[type-arg]
    assert got.keys() == want.keys()
    for pool in want:
        assert got[pool].keys() == want[pool].keys(), pool
        for p, (mu, sigma, matches) in want[pool].items():
            assert got[pool][p][0] == pytest.approx(mu, abs=1e-9), (pool, p)
            assert got[pool][p][1] == pytest.approx(sigma, abs=1e-9), (pool, p)
            assert got[pool][p][2] == matches, (pool, p)


def test_ends_folded_in_position_order_give_the_recomputed_ratings(store: EventStore) -> None:
    ends = random_ends(random.Random(1), 60)
    fold_in(store, ends)
    assert_same(held(store), expected(ends))


def test_ends_folded_out_of_position_order_are_put_in_their_place(store: EventStore) -> None:
    """PostgreSQL's commit order may fold an end after a later one: the ratings are still
    those of the ends in position order, and each history row says what the match made."""
    rng = random.Random(2)
    ends = random_ends(rng, 60)
    folded = list(ends)
    for i in range(0, len(folded) - 3, 4):  # swap neighbours, move some far back
        folded[i], folded[i + 1] = folded[i + 1], folded[i]
    folded.insert(5, folded.pop(40))
    fold_in(store, folded)
    assert_same(held(store), expected(ends))
    # The history: each match's rows are the ratings before and after it, in order.
    for p in PLAYERS[:4]:
        rows = store.ratings().history(p, None, None, 1000)
        assert [r.order for r in rows] == sorted((r.order for r in rows), reverse=True)
        mine = [e for e in ends if any(h.player == p for h in e.seats)]
        assert [r.match_id for r in rows] == [e.match_id for e in reversed(mine)]
        last: dict[str, tuple[float, float, int]] = {}
        for r in reversed(rows):
            before = last.get(r.pool, (NEWCOMER.mu, NEWCOMER.sigma, 0))
            assert (r.before.mu, r.before.sigma, r.before.matches) == pytest.approx(before)
            last[r.pool] = (r.after.mu, r.after.sigma, r.after.matches)


def fold_batches(store: EventStore, ends: list[RatedEnd], size: int) -> None:
    for i in range(0, len(ends), size):
        with store.ratings().folding(RATINGS) as tx:
            apply_ends(tx, ends[i : i + size])


def test_ends_applied_a_batch_at_a_time_give_the_recomputed_ratings(store: EventStore) -> None:
    """A batch's ends are rated together (the ratings read once, the rows written in bulk:
    through a temporary table on PostgreSQL past a few dozen), and an end of a batch folded
    after a later one of its pool, in the same batch or an earlier one, still goes in its
    place."""
    rng = random.Random(7)
    ends = random_ends(rng, 240)
    folded = list(ends)
    for i in range(0, len(folded) - 3, 7):
        folded[i], folded[i + 2] = folded[i + 2], folded[i]
    folded.insert(100, folded.pop(170))  # into an earlier batch than its own
    fold_batches(store, folded, 60)
    assert_same(held(store), expected(ends))
    # Each history row is what the match made, in the ends' order.
    for p in PLAYERS[:3]:
        rows = store.ratings().history(p, None, None, 1000)
        mine = [e for e in ends if any(h.player == p for h in e.seats)]
        assert [r.match_id for r in rows] == [e.match_id for e in reversed(mine)]
        last: dict[str, float] = {}
        for r in reversed(rows):
            assert r.before.mu == pytest.approx(last.get(r.pool, NEWCOMER.mu), abs=1e-12)
            last[r.pool] = r.after.mu


def test_an_end_folded_twice_counts_once(store: EventStore) -> None:
    ends = random_ends(random.Random(3), 10)
    fold_in(store, ends)
    fold_in(store, [ends[-1], ends[4]])
    assert_same(held(store), expected(ends))


def test_the_leaderboard_pages_in_its_order_without_the_provisional(store: EventStore) -> None:
    rng = random.Random(4)
    ends = [e for e in random_ends(rng, 400) if e.pool == "2"]
    fold_in(store, ends)
    pools = recompute(as_rated(e) for e in ends)
    want = leaderboard(pools["2"])
    assert want, "some players are no longer provisional"
    assert len(want) < len(pools["2"]) or all(not r.provisional for r in pools["2"].values())
    got: list[str] = []
    after = None
    while True:
        page = store.ratings().leaderboard("2", after, 2)
        got += [r.player_id for r in page]
        if len(page) < 2:
            break
        after = board_key(page[-1].player_id, page[-1].rating)
    assert got == want
    assert store.ratings().leaderboard("3", None, 10) == []


def test_a_deep_page_of_the_leaderboard_is_one_range_of_its_index(
    store: EventStore, backend: Backend
) -> None:
    key = board_key(PLAYERS[0], NEWCOMER)
    sql_key = "(rank_rating, rank_conservative, matches, player_id) > (?, ?, ?, ?)"
    query = (
        "SELECT player_id FROM player_ratings WHERE pool = ? AND shown = ? AND "
        f"{sql_key} ORDER BY rank_rating, rank_conservative, matches, player_id LIMIT 21"
    )
    params = ("2", True, *key)
    if backend.name == "sqlite":
        import sqlite3

        conn = sqlite3.connect(backend.url.removeprefix("sqlite:///"))
        try:
            plan = " ".join(str(r) for r in conn.execute(f"EXPLAIN QUERY PLAN {query}", params))
        finally:
            conn.close()
        assert "ix_player_ratings_board" in plan and "TEMP B-TREE" not in plan, plan
    else:
        import psycopg

        with psycopg.connect(backend.url, autocommit=True) as conn:
            conn.execute("SET enable_seqscan = off")
            rows = conn.execute(f"EXPLAIN {query.replace('?', '%s')}", params).fetchall()
        plan = " ".join(r[0] for r in rows)
        assert "ix_player_ratings_board" in plan and "Sort" not in plan, plan


def test_a_players_matches_page_newest_first_by_pool(store: EventStore) -> None:
    ends = random_ends(random.Random(5), 80)
    fold_in(store, ends)
    p = PLAYERS[3]
    for pool in (None, "2", "pairs"):
        want = [
            e.match_id
            for e in reversed(ends)
            if any(h.player == p for h in e.seats) and pool in (None, e.pool)
        ]
        got: list[str] = []
        before = None
        while True:
            rows = store.ratings().history(p, pool, before, 3)
            got += [r.match_id for r in rows]
            if len(rows) < 3:
                break
            before = rows[-1].order
        assert got == want, pool


def test_a_history_row_is_shown_from_its_matchs_sealed_row_and_a_made_up_one_refused(
    backend: Backend,
) -> None:
    store = open_store(backend.url, log_keys=LogKeys.generate())
    try:
        _history_from_sealed_matches(store, backend)
    finally:
        store.close()


def _history_from_sealed_matches(store: EventStore, backend: Backend) -> None:
    ends = random_ends(random.Random(11), 40)
    fold_in(store, ends)
    two = [e for e in ends if e.pool == "2"]
    p = two[0].seats[0].player
    other = next(e for e in two if all(h.player != p for h in e.seats))
    rows = store.ratings().history(p, "2", None, 1000)
    assert [r.match_id for r in rows] == [
        e.match_id for e in reversed(two) if any(h.player == p for h in e.seats)
    ]
    first = rows[-1]
    assert (first.seat, first.before, first.place) == (0, NEWCOMER, two[0].places[0])
    # A row naming a match the player did not play, or no match at all: not shown.
    for order in (other.order, 10**9):
        backend.tamper(
            "INSERT INTO rating_history (player_id, pool, rated_order) VALUES (%s, %s, %s)",
            (p, "2", order),
        )
        with pytest.raises(ReadModelTampered) as raised:
            store.ratings().history(p, None, None, 1000)
        assert raised.value.table == "rating_history"
        backend.tamper("DELETE FROM rating_history WHERE rated_order = %s", (order,))
    # A seat's ratings changed in its match's row: the row does not verify.
    assert store.ratings().history(p, "2", None, 1000) == rows
    backend.tamper(
        "UPDATE rated_matches SET ratings = %s WHERE match_id = %s",
        (bytes(len(two[0].seats) * 40), two[0].match_id),
    )
    with pytest.raises(ReadModelTampered) as raised:
        store.ratings().history(p, "2", None, 1000)
    assert raised.value.table == "rated_matches"


def test_a_players_page_in_a_pool_is_one_range_of_the_historys_only_index(
    store: EventStore, backend: Backend
) -> None:
    query = (
        "SELECT rated_order FROM rating_history WHERE player_id = ? AND pool = ?"
        " AND rated_order < ? ORDER BY rated_order DESC LIMIT 20"
    )
    params = (PLAYERS[0], "2", 10**9)
    if backend.name == "sqlite":
        import sqlite3

        conn = sqlite3.connect(backend.url.removeprefix("sqlite:///"))
        try:
            plan = " ".join(str(r) for r in conn.execute(f"EXPLAIN QUERY PLAN {query}", params))
            indexes = [r[1] for r in conn.execute("PRAGMA index_list('rating_history')")]
        finally:
            conn.close()
        assert "TEMP B-TREE" not in plan and "SCAN" not in plan, plan
        assert len(indexes) == 1, indexes  # the primary key's
    else:
        import psycopg

        with psycopg.connect(backend.url, autocommit=True) as conn:
            conn.execute("SET enable_seqscan = off")
            rows = conn.execute(f"EXPLAIN {query.replace('?', '%s')}", params).fetchall()
            indexes = [
                r[0]
                for r in conn.execute(
                    "SELECT indexname FROM pg_indexes WHERE tablename = 'rating_history'"
                )
            ]
        plan = " ".join(r[0] for r in rows)
        assert "pk_rating_history" in plan and "Sort" not in plan, plan
        assert indexes == ["pk_rating_history"]


def test_a_reset_empties_the_ratings_and_their_position(store: EventStore) -> None:
    fold_in(store, random_ends(random.Random(6), 5))
    with store.ratings().folding(RATINGS) as tx:
        tx.save_position(77)
    assert store.ratings().position(RATINGS) == 77
    store.ratings().reset(RATINGS)
    assert store.ratings().position(RATINGS) == 0
    assert held(store) == {pool: {} for pool in POOLS}
    assert store.ratings().history(PLAYERS[0], None, None, 10) == []


def _created(store: EventStore) -> StoredEvent:
    """A match created (not rated) in a stream of its own: a row of the global order."""
    match_id = str(uuid.uuid4())
    rules = make_rules(2, False)
    (created,) = execute(None, CreateMatch(match_id, 2, False, rules, bytes(32), ""))[0]
    (stored,) = store.append(Append(match_id, 0, [NewEvent(*codec.encode(created))])).events
    return stored


def _visible(store: EventStore, after: int, last: StoredEvent) -> list[StoredEvent]:
    """The global order after `after` once it reaches `last` (on PostgreSQL a transaction
    elsewhere in the cluster may hold it back for a moment: a bound, not a timing check)."""
    deadline = time.monotonic() + 60
    while True:
        batch = list(store.read_all(after, 1000))
        if batch and batch[-1].position == last.position:
            return batch
        assert time.monotonic() < deadline, f"the order never reached {last.position}"
        time.sleep(0.01)


def test_a_call_after_a_batch_the_feed_offered_folds_what_was_written_since(
    store: EventStore,
) -> None:
    projection = RatingsProjection(store)
    projection.catch_up()
    start = store.ratings().position(RATINGS)
    first = _created(store)
    offered = _visible(store, start, first)
    # The feed read the order up to `first`; then a caller wrote, and asks.
    projection.offer(start, offered, first.position)
    second = _created(store)
    _visible(store, first.position, second)
    projection.catch_up(PAGE_CATCH_UP_BATCHES)
    assert store.ratings().position(RATINGS) == second.position


def fold_held(store: EventStore, ends: list[RatedEnd], start: int, upto: int) -> None:
    """Apply `ends` (as folded) to ratings held in memory from the position `start`, then
    write them in one transaction at position `upto`."""
    held_ratings = HeldRatings(store.ratings(), start)
    apply_ends(held_ratings, ends)
    held_ratings.save_position(upto)
    with store.ratings().folding(RATINGS) as tx:
        assert tx.position == start
        held_ratings.write(tx)


def every_history(store: EventStore) -> list[HistoryRow]:
    return sorted(
        (r for p in PLAYERS for r in store.ratings().history(p, None, None, 10_000)),
        key=lambda r: (r.order, r.player_id),
    )


def shuffled(ends: list[RatedEnd]) -> list[RatedEnd]:
    """`ends` as PostgreSQL's commit order may fold them: neighbours swapped, one far back."""
    folded = list(ends)
    for i in range(0, len(folded) - 3, 4):
        folded[i], folded[i + 1] = folded[i + 1], folded[i]
    folded.insert(5, folded.pop(len(folded) - 3))
    return folded


def test_ends_held_in_memory_are_written_as_the_tables_fold_them(store: EventStore) -> None:
    """Folded in memory and written once, ends in any order give what the tables' own fold
    of them gives: the same ratings and the same history, row for row."""
    ends = random_ends(random.Random(7), 70)
    folded = shuffled(ends)
    fold_in(store, folded)
    want, want_history = held(store), every_history(store)
    assert_same(want, expected(ends))
    store.ratings().reset(RATINGS)
    fold_held(store, folded, 0, 99)
    assert store.ratings().position(RATINGS) == 99
    assert held(store) == want
    assert every_history(store) == want_history


def test_ends_held_in_memory_after_the_tables_read_what_they_have_not_folded(
    store: EventStore,
) -> None:
    """Held from a position the tables have reached, the fold reads their ratings and
    latest orders, and puts an end before one of theirs in its place (their history rows
    of the later ends made again)."""
    ends = random_ends(random.Random(8), 70)
    folded = shuffled(ends)
    first, rest = folded[:40], folded[40:]
    rest.insert(3, first.pop(30))  # an end folded after later ones the tables have
    fold_in(store, folded)
    want_history = every_history(store)
    store.ratings().reset(RATINGS)
    fold_in(store, first)
    with store.ratings().folding(RATINGS) as tx:
        tx.save_position(40)
    fold_held(store, rest, 40, 99)
    assert_same(held(store), expected(ends))
    assert every_history(store) == want_history


def rated_match(rng: random.Random, pool: str, ended: bool = True) -> list[Event]:
    """A rated match's events but its hands: created, each seat taken by a player, then
    (`ended`) its end by target or by a forfeit, and the revealed seed. Half the ends name
    their holders, as the rules now end a rated match; the others are as ends were written
    before (the ratings look their holders up in the stream)."""
    seats, partnerships = TABLES[pool]
    sides = sides_of(seats, partnerships)
    match_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    rules = make_rules(seats, partnerships)
    out: list[Event] = [
        MatchCreated(match_id, seats, partnerships, rules, "0" * 64, "", "ab" * 32, rated=True)
    ]
    holders = []
    for seat, p in enumerate(rng.sample(PLAYERS, seats)):
        out.append(SeatTaken(seat, f"name {PLAYERS.index(p)}", "", player=p))
        holders.append((p, f"name {PLAYERS.index(p)}", False))
    if not ended:
        return out
    named = tuple(holders) if rng.random() < 0.5 else ()
    scores = tuple(rng.choice((0, 50, 100)) for _ in sides)
    if rng.random() < 0.2:
        end = MatchEnded(
            MatchEndReason.FORFEIT, None, scores, None, "", rng.randrange(len(sides)),
            ForfeitCause.RESIGNED, holders=named,
        )  # fmt: skip
    else:
        winner = rng.randrange(len(sides))
        scores = tuple(150 if i == winner else s for i, s in enumerate(scores))
        end = MatchEnded(MatchEndReason.TARGET, winner, scores, None, "", holders=named)
    return [*out, end, SeedRevealed("ab" * 32)]


def append_all(store: EventStore, stream_id: str, version: int, events: list[Event]) -> int:
    store.append(Append(stream_id, version, [NewEvent(*codec.encode(e)) for e in events]))
    return version + len(events)


def visible_head(store: EventStore) -> int:
    """The position of the last event written, once the global order shows it (on
    PostgreSQL a transaction elsewhere in the cluster may hold it back for a moment: a
    bound, not a timing check)."""
    last = store.append(Append(f"other-{uuid.uuid4()}", 0, [NewEvent("Noted", 1, {})]))
    deadline = time.monotonic() + 60
    while store.head_position() != last.events[-1].position:
        assert time.monotonic() < deadline, "the order never showed the last event"
        time.sleep(0.01)
    return last.events[-1].position


def rated_log(store: EventStore, rng: random.Random, count: int) -> None:
    """`count` rated matches across the pools, each written in one append, and one more
    created and seated but not ended."""
    for i in range(count):
        match = rated_match(rng, rng.choice(POOLS) if i % 3 else "2")
        append_all(store, match[0].match_id, 0, match)  # type: ignore[union-attr]


def tables_of(store: EventStore) -> tuple[object, list[HistoryRow]]:
    return held(store), every_history(store)


def test_a_rebuild_folds_in_memory_and_writes_once_what_batches_would(
    store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres, "COPY_ROWS", 5)  # PostgreSQL: the rows in many COPYs
    rng = random.Random(9)
    rated_log(store, rng, 30)
    open_match = rated_match(rng, "3", ended=False)
    open_id = open_match[0].match_id  # type: ignore[union-attr]
    version = append_all(store, open_id, 0, open_match)
    head = visible_head(store)
    # Batch by batch, as while keeping up: a page's catch-up, a few batches at a time.
    batched = RatingsProjection(store, batch=7)
    while store.ratings().position(RATINGS) != head:
        batched.catch_up(PAGE_CATCH_UP_BATCHES)
    want = tables_of(store)
    assert sum(len(h) for h in want[0].values()) > 10  # type: ignore[attr-defined]

    store.ratings().reset(RATINGS)
    rebuilt = RatingsProjection(store, batch=7)
    writes = 0
    folding = rebuilt._tables.folding

    def counted(name: str) -> object:
        nonlocal writes
        writes += 1
        return folding(name)

    rebuilt._tables.folding = counted  # type: ignore[method-assign]
    assert rebuilt.catch_up() == rebuilt.events_read > 7
    assert writes == 1
    assert store.ratings().position(RATINGS) == head
    assert tables_of(store) == want

    # Far behind again (more than a batch): folded in memory from where the tables
    # stand, the open match ended among them.
    rated_log(store, rng, 12)
    end = MatchEnded(MatchEndReason.TARGET, 0, (150, 0, 0), None, "")
    append_all(store, open_id, version, [end])
    head = visible_head(store)
    assert rebuilt.catch_up() > 7
    assert writes == 2
    assert store.ratings().position(RATINGS) == head
    again = tables_of(store)
    store.ratings().reset(RATINGS)
    batched = RatingsProjection(store, batch=7)
    while store.ratings().position(RATINGS) != head:
        batched.catch_up(PAGE_CATCH_UP_BATCHES)
    assert tables_of(store) == again


def test_a_rebuild_whose_write_fails_is_folded_again_from_where_the_tables_stand(
    store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    rated_log(store, random.Random(10), 12)
    head = visible_head(store)
    want = _rated_by_batches(store, head)

    def fails(self: HeldRatings, tx: object) -> None:
        raise StorageUnavailable("the database did not answer in time")

    projection = RatingsProjection(store, batch=7)
    monkeypatch.setattr(HeldRatings, "write", fails)
    with pytest.raises(StorageUnavailable):
        projection.catch_up()
    assert store.ratings().position(RATINGS) == 0
    monkeypatch.undo()
    assert projection.catch_up() > 7
    assert store.ratings().position(RATINGS) == head
    assert tables_of(store) == want


def test_an_end_naming_its_holders_is_rated_alone_and_one_naming_none_from_its_stream(
    store: EventStore,
) -> None:
    # The same matches twice, between players of their own: once with every end naming its
    # holders (as the rules end a rated match now), once with none (as ends were written
    # before). The same ratings; the first without reading a match's stream, the second
    # reading each match's start and seats; a match not rated costs its MatchCreated alone.
    rng = random.Random(11)
    matches = [rated_match(rng, rng.choice(POOLS)) for _ in range(16)]
    again = {p: f"{p}-again" for p in PLAYERS}

    def copy(match: list[Event], named: bool) -> tuple[str, list[Event]]:
        match_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        seats = [e for e in match if isinstance(e, SeatTaken)]
        out: list[Event] = []
        for e in match:
            if isinstance(e, MatchCreated):
                e = dataclasses.replace(e, match_id=match_id)
            elif isinstance(e, SeatTaken) and not named:
                e = dataclasses.replace(e, player=again[e.player])
            elif isinstance(e, MatchEnded):
                holders = tuple((s.player, s.name, s.bot) for s in seats)
                e = dataclasses.replace(e, holders=holders if named else ())
            out.append(e)
        return match_id, out

    named_ids, unnamed_ids = set(), set()
    for match in matches:
        for named, ids in ((True, named_ids), (False, unnamed_ids)):
            match_id, events = copy(match, named)
            append_all(store, match_id, 0, events)
            ids.add(match_id)
    unrated_id, unrated = copy(rated_match(rng, "2"), False)
    unrated[0] = dataclasses.replace(unrated[0], rated=False)  # type: ignore[type-var]
    append_all(store, unrated_id, 0, unrated)
    head = visible_head(store)

    reads: Counter[str] = Counter()
    read_stream = store.read_stream

    def counted(stream_id: str, from_seq: int = 1, limit: int | None = None) -> object:
        reads[stream_id] += 1
        return read_stream(stream_id, from_seq, limit)

    store.read_stream = counted  # type: ignore[method-assign]
    projection = RatingsProjection(store)
    while store.ratings().position(RATINGS) != head:
        projection.catch_up()
    assert not reads.keys() & named_ids
    assert all(reads[m] >= 2 for m in unnamed_ids)
    assert reads[unrated_id] == 1
    rated = 0
    for p in PLAYERS:
        mine = {r.pool: r.rating for r in store.ratings().player_ratings(p)}
        theirs = {r.pool: r.rating for r in store.ratings().player_ratings(again[p])}
        assert mine == theirs
        rated += sum(r.matches for r in mine.values())
    assert rated == sum(len([e for e in m if isinstance(e, SeatTaken)]) for m in matches)


def _rated_by_batches(store: EventStore, head: int) -> tuple[object, list[HistoryRow]]:
    """The tables as folded a few rows at a time (each row read as a StoredEvent), then
    emptied."""
    batched = RatingsProjection(store, batch=7)
    while store.ratings().position(RATINGS) != head:
        batched.catch_up(PAGE_CATCH_UP_BATCHES)
    want = tables_of(store)
    store.ratings().reset(RATINGS)
    return want


def test_a_rebuild_reads_packed_pages_and_refuses_an_end_changed_in_the_database(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    """A rebuild reads the ends packed a page at a time, each checked against its
    authenticator over the bytes it is decoded from: an end whose scores were changed in the
    database is not rated, and every other one is, as read row by row."""
    store = open_store(backend.url, log_keys=LogKeys.generate())
    try:
        rng = random.Random(12)
        rated_log(store, rng, 12)
        match = rated_match(random.Random(4), "2")
        match_id = match[0].match_id  # type: ignore[union-attr]
        append_all(store, match_id, 0, match)
        head = visible_head(store)
        end = next(e for e in store.read_stream(match_id) if e.type == "MatchEnded")
        changed = {**end.payload, "scores": [s + 1 for s in end.payload["scores"]]}
        want = _rated_by_batches(store, head)  # the tampered end's match rated too
        backend.tamper(
            "UPDATE events SET payload = %s WHERE stream_id = %s AND seq = %s",
            [canonical_json(changed, "payload").decode(), match_id, end.seq],
        )
        packed_reads = 0
        read_all_packed = store.read_all_packed

        def counted(after: int, limit: int, types: object) -> object:
            nonlocal packed_reads
            packed_reads += 1
            return read_all_packed(after, limit, types)  # type: ignore[arg-type]

        store.read_all_packed = counted  # type: ignore[method-assign]
        with caplog.at_level("CRITICAL", logger="bergen.server.ratings"):
            RatingsProjection(store).catch_up()
        assert packed_reads >= 1
        assert f"LOG TAMPERED: match {match_id} seq {end.seq} is not rated" in caplog.text
        assert "not written by this server" in caplog.text
        got = tables_of(store)
        assert got != want
        assert not any(r.match_id == match_id for r in got[1])
        # Every other match rated as before: the same rows but the tampered match's.
        store.ratings().reset(RATINGS)
        backend.tamper("DELETE FROM events WHERE stream_id = %s", [match_id])
        RatingsProjection(store).catch_up()
        assert tables_of(store) == got
    finally:
        store.close()


def test_a_packed_page_that_does_not_parse_is_read_again_row_by_row(
    store: EventStore, caplog: pytest.LogCaptureFixture
) -> None:
    rated_log(store, random.Random(13), 10)
    head = visible_head(store)
    want = _rated_by_batches(store, head)

    def corrupt(after: int, limit: int, types: object) -> object:
        return parse_page(b"\0" * 40)

    store.read_all_packed = corrupt  # type: ignore[method-assign]
    with caplog.at_level("CRITICAL", logger="bergen.server.ratings"):
        assert RatingsProjection(store).catch_up() > 0
    assert "is read row by row" in caplog.text and "does not parse" in caplog.text
    assert store.ratings().position(RATINGS) == head
    assert tables_of(store) == want


def test_a_rebuild_reads_each_next_page_while_it_folds_one(
    store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    rated_log(store, random.Random(14), 20)
    head = visible_head(store)
    want = _rated_by_batches(store, head)
    monkeypatch.setattr(ratings_module, "HELD_PAGE", 4)
    readers: Counter[str] = Counter()
    read_all_packed = store.read_all_packed

    def counted(after: int, limit: int, types: object) -> object:
        readers[threading.current_thread().name] += 1
        return read_all_packed(after, limit, types)  # type: ignore[arg-type]

    store.read_all_packed = counted  # type: ignore[method-assign]
    assert RatingsProjection(store).catch_up() > 20
    assert readers["bergen-ratings-ahead"] >= 5  # every page but the first, read ahead
    assert readers[threading.current_thread().name] == 1
    assert store.ratings().position(RATINGS) == head
    assert tables_of(store) == want


def test_a_rebuild_reads_a_short_first_page_then_each_twice_as_long(
    store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    rated_log(store, random.Random(15), 30)
    head = visible_head(store)
    want = _rated_by_batches(store, head)
    monkeypatch.setattr(ratings_module, "HELD_FIRST_PAGE", 2)
    monkeypatch.setattr(ratings_module, "HELD_PAGE", 8)
    monkeypatch.setattr(ratings_module, "HELD_MAX", 20)
    limits: list[int] = []
    read_all_packed = store.read_all_packed

    def counted(after: int, limit: int, types: object) -> object:
        limits.append(limit)
        return read_all_packed(after, limit, types)  # type: ignore[arg-type]

    store.read_all_packed = counted  # type: ignore[method-assign]
    assert RatingsProjection(store).catch_up() > 20
    # Up to HELD_PAGE, and no more than the fold may hold (HELD_MAX) before it writes; the
    # events after it are folded from the tables' position, a batch first.
    assert limits[:4] == [2, 4, 8, 6]
    assert store.ratings().position(RATINGS) == head
    assert tables_of(store) == want
