"""Automatic failover: a pg_auto_failover formation loses its primary's machine while players
play, its monitor promotes the secondary, and the servers carry on against it by themselves
through the URL the monitor gives.

A monitor and two nodes (bergen.tests.ha.autofailover), tuned to fail over in seconds; two
`bergen serve` replicas on `pg_autoctl show uri`, migrated by `bergen migrate` through that
URL; counting players (bergen.tests.ha.players) and a `bergen bots` process on each replica.
Once Plays are acknowledged, the primary's machine is lost: its pg_autoctl, postmaster,
backends and WAL senders stopped at once, then killed (killing the postmaster alone is no
failover: its pg_autoctl starts it again within seconds). No one promotes anything: the test
waits until Plays sent after the kill are acknowledged and each bots process has finished a
match since the promotion. The new primary then holds each acknowledged Play exactly once,
and no other (the secondary acknowledges every commit: pg_auto_failover makes it
synchronous).
The figures printed: from the kill to the monitor's promotion, to the new primary taking
writes, and to the first Play sent after the kill and applied (not answered as a replay).
"""

from __future__ import annotations

import os
import subprocess
import threading
import time

import pytest
from e2e.servers import ServerFarm, bergen_command

from .autofailover import Formation, Service, url
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
PLAYS_BEFORE = PLAYS_AFTER = 20
"""More Plays than this are acknowledged before the primary is lost, and sent after the loss
and acknowledged."""


def _migrate(uri: str) -> None:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("BERGEN_")}
    done = subprocess.run(
        [*bergen_command(), "migrate", "--database", uri],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
    )
    assert done.returncode == 0, f"bergen migrate exited with {done.returncode}: {done.stderr}"


def test_servers_carry_on_through_an_automatic_failover_losing_and_doubling_no_play(
    formation: Formation, farm: ServerFarm
) -> None:
    uri = formation.uri()
    old, new = formation.nodes
    assert formation.primary() is old
    _migrate(uri)
    a = farm.start(uri, name="a", extra_args=["--no-migrate"])
    b = farm.start(uri, name="b", extra_args=["--no-migrate"])
    tally = Tally()
    stop = threading.Event()
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
                "1",
                "--policy",
                "random",
                "--seed",
                f"auto-failover-{s.name}",
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

    def still_playing() -> None:
        """Raises AssertionError once a player has failed or a bots process has exited."""
        with tally.lock:
            assert not tally.errors, tally.errors
        for p, (_, err) in zip(bots, said, strict=True):
            assert p.poll() is None, f"bergen bots exited with {p.returncode}: {err.text()[-2000:]}"

    def sent_since(at: float) -> list[float]:
        """When each Play first applied by a send begun after `at` was acknowledged (not the
        ones answered as replays: a replica may answer those without the database)."""
        with tally.lock:
            return sorted(
                tally.acked[c][1]
                for c, began in tally.last_sent.items()
                if began > at and not tally.acked[c][2]
            )

    for t in players:
        t.start()
    promoted: dict[str, float] = {}
    seen: list[tuple[float, dict[str, tuple[str, str]]]] = []
    """The nodes' states as the monitor held them, each time they changed after the kill."""
    try:

        def played_before() -> bool:
            still_playing()
            return tally.count("acked") > PLAYS_BEFORE

        until(played_before, f"more than {PLAYS_BEFORE} Plays acknowledged")
        before = tally.count("acked")
        # From when the old primary's last process stopped: a Play sent after it cannot be
        # committed there.
        killed = formation.lose(old)

        def watch_promotion(survivor: Service = new) -> None:
            """Note when the monitor names the survivor primary, and when it takes writes."""
            now = time.monotonic()
            states = formation.states()
            if not seen or seen[-1][1] != states:
                seen.append((now, states))
            if "monitor" not in promoted and formation.primary() is survivor:
                promoted["monitor"] = now
            if "writable" not in promoted and formation.writable(survivor):
                promoted["writable"] = now

        def finished_since_promotion() -> list[int]:
            at = promoted.get("writable", float("inf"))
            return [len(out.since(at, " winner ")) for out, _ in said]

        def played_on() -> bool:
            still_playing()
            watch_promotion()
            return len(sent_since(killed)) > PLAYS_AFTER and all(finished_since_promotion())

        until(
            played_on,
            f"more than {PLAYS_AFTER} Plays sent after the primary was lost acknowledged, and"
            " each bergen bots process finished a match after the promotion",
            lambda: (
                f"{len(sent_since(killed))} Plays; matches finished by each bergen bots process:"
                f" {finished_since_promotion()}; promoted: {promoted}\n{formation.logs()}"
            ),
        )
    finally:
        stop.set()
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
    assert before > PLAYS_BEFORE, f"too few Plays before the primary was lost: {before}"
    after = sent_since(killed)
    assert len(after) > PLAYS_AFTER, f"too few Plays after the primary was lost: {len(after)}"
    assert formation.primary() is new, formation.show_state()

    assert_each_acknowledged_play_stored_once(url(new.port), tally)

    bot_matches = [len(out.since(0, " winner ")) for out, _ in said]
    replayed = tally.count("replayed")

    def since_kill(at: float | None) -> str:
        return "not seen" if at is None else f"{at - killed:.2f} s"

    print(
        f"\nauto-failover: {len(tally.acked)} Plays acknowledged ({before} before the primary "
        f"was lost, {len(after)} sent after it; {tally.resent} sends again, {replayed} answered "
        f"as replays), none lost, none doubled; bergen bots beside them played "
        f"{sum(bot_matches)} matches through it\n"
        f"auto-failover: from the kill to the monitor's promotion "
        f"{since_kill(promoted.get('monitor'))}, to the new primary taking writes "
        f"{since_kill(promoted.get('writable'))}, to the first Play accepted again "
        f"{after[0] - killed:.2f} s\n"
        f"auto-failover: the monitor's states (reported/assigned) after the kill: "
        + "; ".join(
            f"{at - killed:.2f} s "
            + ", ".join(f"{name} {r}/{g}" for name, (r, g) in sorted(states.items()))
            for at, states in seen
        )
    )
