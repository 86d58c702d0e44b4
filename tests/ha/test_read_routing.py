"""Reads served by a hot standby (`--read-database`), never older than what was shown.

A standby held back with `pg_wal_replay_pause()` keeps an old state; a plain reader of it sees
that old state (so the hold is real), while the routed store, and `bergen serve
--read-database`, answer with at least what they showed or wrote before.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import pytest
from e2e.client import Client, play_random_move, seat_everyone
from e2e.servers import ServerFarm

from bergen.server.store import Append, NewEvent, lagging_reads, open_store
from bergen.server.store.postgres import PostgresEventStore
from bergen.server.store.routed import RoutedStore
from bergen.v1 import bergen_pb2 as pb

from .clusters import ClusterPair

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def _events(n: int) -> list[NewEvent]:
    return [NewEvent("Noted", 1, {"n": i}) for i in range(n)]


WAIT_S = 60.0
"""The deadline of a wait for the clusters or the servers to do something."""


def _until(condition: Callable[[], bool], what: str) -> None:
    """Wait until `condition()` holds. Raises AssertionError saying `what` did not happen."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"not within {WAIT_S:g} s: {what}"
        time.sleep(0.05)


def _pause(pair: ClusterPair) -> None:
    pair.standby_sql("SELECT pg_wal_replay_pause()")
    _until(
        lambda: pair.standby_sql("SELECT pg_get_wal_replay_pause_state()")[0][0] == "paused",
        "the standby's replay paused",
    )


def _resume(pair: ClusterPair) -> None:
    pair.standby_sql("SELECT pg_wal_replay_resume()")
    pair.wait_replayed()


class _CaughtUp:
    """WAL positions that always say the standby has caught up (to test the second check)."""

    def primary_lsn(self) -> int:
        return 0

    def replayed_lsn(self) -> int | None:
        return 0


def test_a_standby_held_back_never_shows_a_stream_older_than_seen(pg_pair: ClusterPair) -> None:
    store = open_store(pg_pair.primary_url, read_url=pg_pair.standby_url)
    other = open_store(pg_pair.primary_url, read_url=pg_pair.standby_url)  # another replica
    plain = PostgresEventStore(pg_pair.standby_url)  # reads the standby, knowing nothing
    primary = PostgresEventStore(pg_pair.primary_url)
    trusting = RoutedStore(primary, PostgresEventStore(pg_pair.standby_url), _CaughtUp())
    assert isinstance(store, RoutedStore) and isinstance(other, RoutedStore)
    try:
        store.append(Append("m-1", 0, _events(3)))
        pg_pair.wait_replayed()
        with lagging_reads():
            assert [e.seq for e in store.read_stream("m-1")] == [1, 2, 3]
            assert [e.seq for e in trusting.read_stream("m-1")] == [1, 2, 3]
        assert store.stats.standby_reads == 1 and store.stats.behind == 0

        _pause(pg_pair)
        store.append(Append("m-1", 3, _events(2)))
        assert len(plain.read_stream("m-1")) == 3, "the standby should be held back"
        # The primary's WAL position is past the standby's: each query goes to the primary,
        # on this replica and on one that never saw the stream.
        with lagging_reads():
            assert [e.seq for e in store.read_stream("m-1")] == [1, 2, 3, 4, 5]
            assert [r.seq for r in store.read_rows("m-1", 4)] == [4, 5]
        with lagging_reads():
            assert [e.seq for e in other.read_stream("m-1", 2, limit=2)] == [2, 3]
            assert len(other.read_stream("m-1")) == 5
        assert store.stats.standby_reads == 1 and store.stats.behind == 2
        assert other.stats.standby_reads == 0 and other.stats.behind == 2

        # Second check: a standby answer that ends before the seq this process knows (from
        # its feed, which follows the primary) or the reader says it saw, is read again.
        with lagging_reads():
            assert len(trusting.read_stream("m-1")) == 3, "what the standby alone gives"
        trusting.read_all(0, 1000)
        with lagging_reads():
            assert len(trusting.read_stream("m-1")) == 5
            assert len(trusting.read_stream("m-1", 2, limit=2)) == 2
        assert trusting.stats.behind == 1
        fresh = RoutedStore(
            PostgresEventStore(pg_pair.primary_url),
            PostgresEventStore(pg_pair.standby_url),
            _CaughtUp(),
        )
        try:
            with lagging_reads("m-1", 5):
                assert len(fresh.read_stream("m-1")) == 5
            assert fresh.stats.behind == 1
        finally:
            fresh.close()

        # Outside lagging_reads (what decides a command), always the primary.
        before = store.stats.standby_reads
        assert len(store.read_stream("m-1")) == 5
        assert store.stats.standby_reads == before

        _resume(pg_pair)
        with lagging_reads():
            assert len(store.read_stream("m-1")) == 5
        assert store.stats.standby_reads == before + 1, "caught up: the standby serves again"

        # A standby that is gone costs the reader only the read on the primary.
        plain.close()
        pg_pair.stop_standby()
        with lagging_reads():
            assert len(store.read_stream("m-1")) == 5
        with lagging_reads():
            assert len(trusting.read_stream("m-1")) == 5
        assert trusting.stats.failed == 1
    finally:
        store.close()
        other.close()
        plain.close()
        trusting.close()


def _list_version(client: Client, match_id: str) -> int:
    reply = client.stub.ListMatches(pb.ListMatchesRequest(page_size=100), timeout=20)
    found = [m.version for m in reply.matches if m.match_id == match_id]
    assert found, f"match {match_id} not listed"
    return found[0]


def _standby_reads(pair: ClusterPair) -> int:
    """Scans of the tables the server made, on the standby. (Not pg_stat_database's counts:
    each connection made to ask, this one too, reads catalogs and adds to them.)"""
    rows = pair.standby_sql(
        "SELECT coalesce(sum(seq_scan + coalesce(idx_scan, 0)), 0) FROM pg_stat_user_tables"
    )
    return int(rows[0][0])  # type: ignore[call-overload]


def test_bergen_serve_reads_the_standby_and_shows_no_older_state(
    pg_pair: ClusterPair, farm: ServerFarm
) -> None:
    extra = ["--read-database", pg_pair.standby_url]
    a = farm.start(pg_pair.primary_url, name="a", extra_args=extra)
    b = farm.start(pg_pair.primary_url, name="b", extra_args=extra)
    rng = random.Random(5)
    with Client(a.target) as ca, Client(b.target) as cb:
        table = seat_everyone(ca, 2)
        version = table.version
        for _ in range(4):
            version = play_random_move([ca], rng, table, version).response.view.version
        pg_pair.wait_replayed()
        served = _standby_reads(pg_pair)
        for c in (ca, cb):
            assert c.view(table.match_id).version == version
            assert len(c.replay(table.match_id).events) == version
            assert _list_version(c, table.match_id) == version
        # The standby's backends publish their statistics up to seconds after their reads.
        _until(lambda: _standby_reads(pg_pair) > served, "the standby served a read")

        _pause(pg_pair)
        shown = version
        for _ in range(6):
            move = play_random_move([ca, cb], rng, table, shown)
            shown = move.response.view.version
            if move.response.view.phase == pb.PHASE_ENDED:
                break
        held = pg_pair.standby_sql(
            f"SELECT max(seq) FROM events WHERE stream_id = '{table.match_id}'"
        )[0][0]
        assert held == version, "the standby should still hold the state before the pause"
        # Both replicas' feeds follow the primary: each lists the last move.
        _until(
            lambda: all(_list_version(c, table.match_id) >= shown for c in (ca, cb)),
            f"both replicas list the match at version {shown} or later",
        )
        for c in (ca, cb):
            assert c.view(table.match_id).version >= shown
            assert len(c.replay(table.match_id).events) >= shown
            assert len(c.replay(table.match_id, after_seq=version).events) >= shown - version
            assert _list_version(c, table.match_id) >= shown
            watch = c.watch(table.match_id, timeout=10)
            first = next(iter(watch))
            watch.cancel()
            assert first.view.version >= shown
        _resume(pg_pair)
        for c in (ca, cb):
            assert c.view(table.match_id).version >= shown
