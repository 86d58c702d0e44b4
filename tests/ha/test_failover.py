"""Failover: the primary is lost while players play, the standby is promoted, and the servers
carry on against it through a multi-host URL (`target_session_attrs=read-write`).

Players play through two `bergen serve` replicas, each Play with a command id of its own,
sent again with the same id until it is acknowledged, and a `bergen bots` process beside each.
The standby acknowledges each commit (synchronous replication). Its WAL receiver is held
(SIGSTOP) twice, each time until a player's call has timed out with its outcome unknown: once
released, the Plays sent again are answered from the log (`replayed`); the second time the
primary is stopped while they wait, and sent again they are applied by the new primary. The
test goes on until Plays are acknowledged after the promotion and each bots process has
finished a match since. Every acknowledged Play is counted on the client side; afterwards the
new primary holds each of them exactly once, and no other.
The figures printed: the time from the promotion to the first acknowledged Play, and the
replication lag under load (p50, p99, max) sampled from pg_stat_replication.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import threading
import time
from collections.abc import Callable

import psycopg
import pytest
from e2e.servers import ServerFarm, bergen_command

from .clusters import ClusterPair
from .players import (
    PATIENCE_S,
    Output,
    Tally,
    assert_each_acknowledged_play_stored_once,
    player,
    until,
)

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

PLAYERS = 4
LOAD_S = 5.0
"""The least time the replication lag is sampled under load (the load goes on until enough
Plays are acknowledged, however long that takes)."""
PLAYS_BEFORE = PLAYS_AFTER = 20
"""More Plays than this are acknowledged before the primary is stopped, and after the
promotion."""
DOWN_S = 1.0
"""How long the primary is gone before the standby is promoted (an operator's, or a
failover manager's, decision time)."""


def _sample_lag(pair: ClusterPair, stop: threading.Event, out: list[tuple[int, float]]) -> None:
    """(bytes not yet replayed, replay_lag in ms) every 20 ms, from the primary's view."""
    try:
        with psycopg.connect(pair.primary_url, autocommit=True) as conn:
            while not stop.is_set():
                row = conn.execute(
                    "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::bigint,"
                    " coalesce(extract(epoch FROM replay_lag) * 1000, 0)::float8"
                    " FROM pg_stat_replication"
                ).fetchone()
                if row is not None:
                    out.append((int(row[0]), float(row[1])))
                stop.wait(0.02)
    except psycopg.Error:
        pass  # the primary is gone: sampling ends


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def test_promoting_the_standby_while_players_play_loses_and_doubles_no_play(
    pg_sync_pair: ClusterPair, farm: ServerFarm
) -> None:
    pair = pg_sync_pair
    url = pair.multi_host_url
    a = farm.start(url, name="a")
    b = farm.start(url, name="b", extra_args=["--read-database", pair.standby_url])
    tally = Tally()
    stop = threading.Event()
    # `bergen bots` beside them, one process per replica: a bot's failure stops its process
    # from starting matches, and it exits once those running end.
    bots = [
        subprocess.Popen(
            [
                *bergen_command(),
                "bots",
                "--server",
                s.target,
                "--matches",
                "100000",
                "--parallel",
                "2",
                "--policy",
                "random",
                "--seed",
                f"failover-{s.name}",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        for s in (a, b)
    ]
    said = [(Output(p.stdout), Output(p.stderr)) for p in bots]  # type: ignore[arg-type]
    players = [
        threading.Thread(target=player, args=((a, b)[i % 2].target, i, stop, tally))
        for i in range(PLAYERS)
    ]
    lag: list[tuple[int, float]] = []
    stop_sampling = threading.Event()
    sampler = threading.Thread(target=_sample_lag, args=(pair, stop_sampling, lag))

    def still_playing() -> None:
        """Raises AssertionError once a player has failed or a bots process has exited."""
        with tally.lock:
            assert not tally.errors, tally.errors
        for p, (_, err) in zip(bots, said, strict=True):
            assert p.poll() is None, f"bergen bots exited with {p.returncode}: {err.text()[-2000:]}"

    def acked_since(at: float) -> int:
        with tally.lock:
            return sum(1 for _, when, _ in tally.acked.values() if when > at)

    def counted(what: str, more_than: int) -> Callable[[], bool]:
        def condition() -> bool:
            still_playing()
            return tally.count(what) > more_than

        return condition

    for t in (*players, sampler):
        t.start()
    try:
        time.sleep(LOAD_S)  # the lag is sampled under load: how long does not matter
        until(
            lambda: counted("acked", PLAYS_BEFORE)() and bool(lag),
            f"more than {PLAYS_BEFORE} Plays acknowledged, and the lag sampled, under load",
            lambda: f"{tally.count('acked')} Plays, {len(lag)} samples",
        )
        stop_sampling.set()
        sampler.join()
        receiver = int(pair.standby_sql("SELECT pid FROM pg_stat_wal_receiver")[0][0])  # type: ignore[call-overload]
        # Commits wait for the standby: held until a Play's deadline has passed, its outcome
        # unknown to its player.
        timed_out = tally.count("timed_out")
        os.kill(receiver, signal.SIGSTOP)
        until(counted("timed_out", timed_out), "a Play timed out while the standby was held")
        os.kill(receiver, signal.SIGCONT)  # they commit: sent again, answered from the log
        until(
            counted("replayed", 0),
            "a Play sent again after its deadline passed was answered from the log",
        )
        timed_out = tally.count("timed_out")
        os.kill(receiver, signal.SIGSTOP)
        until(counted("timed_out", timed_out), "a Play timed out while the standby was held")
        before = tally.count("acked")
        pair.stop_primary()  # what waited is committed on the lost primary only
        os.kill(receiver, signal.SIGCONT)
        time.sleep(DOWN_S)  # the primary is gone for a while before anyone promotes
        promoting = time.monotonic()
        pair.promote_standby()
        promoted = time.monotonic()

        def finished_since_promotion() -> list[int]:
            return [len(out.since(promoted, " winner ")) for out, _ in said]

        def played_on() -> bool:
            still_playing()
            return acked_since(promoting) > PLAYS_AFTER and all(finished_since_promotion())

        until(
            played_on,
            f"more than {PLAYS_AFTER} Plays acknowledged after the promotion, and each bergen"
            " bots process finished a match after it",
            lambda: (
                f"{acked_since(promoting)} Plays; matches finished by each bergen bots "
                f"process: {finished_since_promotion()}"
            ),
        )
    finally:
        stop.set()
        stop_sampling.set()
        sampler.join(timeout=60)
        for t in players:
            t.join(timeout=PATIENCE_S + 60)
        alive = [p.poll() is None for p in bots]
        for p in bots:
            p.kill()
            p.wait()
        for out, err in said:
            out.finish()
            err.finish()
    stuck = [t.name for t in players if t.is_alive()]
    assert not stuck, f"players still playing after they were told to stop: {stuck}"
    assert not tally.errors, tally.errors
    assert all(alive), f"bergen bots stopped: {[err.text()[-2000:] for _, err in said]}"
    bot_matches = [len(out.since(0, " winner ")) for out, _ in said]
    after = sorted(at for _, at, _ in tally.acked.values() if at > promoting)
    assert before > PLAYS_BEFORE, f"too few Plays before the failover: {before}"
    assert len(after) > PLAYS_AFTER, f"too few Plays after the promotion: {len(after)}"

    assert_each_acknowledged_play_stored_once(pair.standby_url, tally)

    failover_s = after[0] - promoting
    lag_bytes = [float(x) for x, _ in lag]
    lag_ms = [ms for _, ms in lag]
    replayed = sum(1 for _, _, r in tally.acked.values() if r)
    print(
        f"\nfailover: {len(tally.acked)} Plays acknowledged ({before} before the primary was "
        f"stopped, {len(after)} after the promotion; {tally.resent} sends again, {replayed} "
        f"answered as replays), none lost, none doubled; bergen bots beside them played "
        f"{sum(bot_matches)} matches through the failover\n"
        f"failover: promotion took {promoted - promoting:.2f} s; from the promotion to the "
        f"first acknowledged Play {failover_s:.2f} s (primary down {DOWN_S:.1f} s before)\n"
        f"replication lag under load ({len(lag)} samples): bytes p50 "
        f"{statistics.median(lag_bytes):.0f} p99 {_p(lag_bytes, 0.99):.0f} max "
        f"{max(lag_bytes):.0f}; replay_lag ms p50 {statistics.median(lag_ms):.2f} "
        f"p99 {_p(lag_ms, 0.99):.2f} max {max(lag_ms):.2f}"
    )
    assert after, "no Play was acknowledged after the promotion"
    assert replayed > 0, "no Play was answered from the log after its outcome was unknown"
