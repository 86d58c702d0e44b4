"""The server keeps time (RULES.md section 11), through real server processes.

A clocked match whose seats never play is timed out by the server where section 11 puts the
timeouts (an automatic play each, then the forfeit), and `bergen verify` accepts its record
while refusing one with a changed `clock_ms` or a moved `at_ms`. On PostgreSQL with two
replicas, 200 such matches each get exactly the timeouts their clocks call for, though one
replica is killed with SIGKILL in the middle; a clock that fell while no server ran is timed
out as soon as one starts. A Play sent after its seat's time ran out is refused, and the
timeout applied instead.
"""

from __future__ import annotations

import json
import random
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc
import pytest

from bergen.domain import codec
from bergen.domain.events import MatchEnded, TilePlayed
from bergen.domain.vocabulary import ForfeitCause, MatchEndReason
from bergen.server.clocks import Expiry, expiries
from bergen.server.store import StoredEvent
from bergen.v1 import bergen_pb2 as pb

from .client import Client, Table, Watcher, seat_everyone
from .conftest import on_backend
from .refusals import refusal
from .servers import ServerFarm, bergen_command
from .truth import all_streams, store_at

pytestmark = pytest.mark.timeout(300)

EPOCH_KEY = "clock_epoch_ms"
NEVER_PLAYED = {"clock": "fischer", "clock_increment": 0, "timeouts_to_forfeit": 2}
"""Two seats that never play: seat A times out (autoplay), B (autoplay), A again (forfeit,
its second in a row), A's clock being 0 by then."""
TIMEOUTS_PER_MATCH = 3


def wait_until_ended(client: Client, match_ids: Sequence[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    left = list(match_ids)
    while left:
        left = [m for m in left if client.view(m).phase != pb.PHASE_ENDED]
        if not left:
            return
        assert time.monotonic() < deadline, f"{len(left)} matches still in play: {left[:3]}"
        time.sleep(0.1)


def timeouts(stored: Sequence[StoredEvent]) -> list[Expiry]:
    """Each timeout of a stream with the instant its clock fell and the instant it was
    stored; `expiries` raises for one of a seat whose clock did not run, or too early."""
    found = expiries(stored)
    assert all(x.event.at_ms >= x.due_ms - epoch_of(stored) for x in found), found
    return found


def first_turn(view: pb.MatchView) -> int:
    """The seat whose clock runs in `view`."""
    return next(c.seat for c in view.clocks if c.running)


def epoch_of(stored: Sequence[StoredEvent]) -> int:
    return next(int(e.metadata.extra[EPOCH_KEY]) for e in stored if EPOCH_KEY in e.metadata.extra)


@on_backend("sqlite")
def test_a_clocked_match_whose_seats_never_play_is_timed_out_and_forfeited(
    farm: ServerFarm, database: str, tmp_path: Path
) -> None:
    server = farm.start(database)
    with Client(server.target) as client:
        table = seat_everyone(client, 2, clock_initial=1, **NEVER_PLAYED)
        first = table.joins[-1].view
        assert [c.left_ms for c in first.clocks] == [1000, 1000]
        assert sum(c.running for c in first.clocks) == 1
        watcher = Watcher(client, table.match_id).started()
        wait_until_ended(client, [table.match_id], timeout=120)
        assert watcher.finished.wait(60), "the watch stream did not end with the match"
        view = client.view(table.match_id)
        record = client.record(table.match_id)
    # The timeouts and the automatic plays came on the watch stream like any event.
    watched = watcher.events()
    assert [e.timed_out.seat for e in watched if e.HasField("timed_out")] == [
        turn for turn in (first_turn(first), 1 - first_turn(first), first_turn(first))
    ]
    assert sum(e.tile_played.auto for e in watched if e.HasField("tile_played")) == 2
    assert view.result.reason == pb.MATCH_END_REASON_FORFEIT
    assert view.result.cause == pb.FORFEIT_CAUSE_TIMEOUT
    result = record["result"]
    assert result["reason"] == "forfeit" and result["cause"] == "timeout"
    assert result["winner_side"] == 1 - result["forfeited_side"]
    actions = [a for hand in record["hands"] for a in hand["actions"]]
    autos = [a for a in actions if a.get("auto")]
    assert len(autos) == TIMEOUTS_PER_MATCH - 1
    assert all(a["clock_ms"] == 0 for a in autos)
    # The lead is forced and takes no time; the automatic plays come a clock later each.
    lead = actions[0]
    assert lead["at_ms"] == 0 and lead["clock_ms"] == 1000
    assert autos[0]["at_ms"] >= 1000 and autos[1]["at_ms"] >= autos[0]["at_ms"] + 1000
    assert result["at_ms"] >= autos[1]["at_ms"]

    path = tmp_path / "clocked.json"
    path.write_text(json.dumps(record))
    honest = verify_file(path)
    assert honest.returncode == 0, honest.stdout + honest.stderr

    tampered = json.loads(json.dumps(record))
    auto = next(a for h in tampered["hands"] for a in h["actions"] if a.get("auto"))
    auto["clock_ms"] += 1000
    tampered.pop("signature", None)
    changed = verify_file(write(tmp_path / "clock_ms.json", tampered))
    said = changed.stdout + changed.stderr
    assert changed.returncode != 0 and "clock" in said, said

    moved = json.loads(json.dumps(record))
    auto = next(a for h in moved["hands"] for a in h["actions"] if a.get("auto"))
    auto["at_ms"] -= 500  # a timeout before the clock fell
    moved.pop("signature", None)
    early = verify_file(write(tmp_path / "at_ms.json", moved))
    said = early.stdout + early.stderr
    assert early.returncode != 0 and "ms" in said, said


def write(path: Path, record: dict[str, Any]) -> Path:
    path.write_text(json.dumps(record))
    return path


def verify_file(path: Path) -> subprocess.CompletedProcess[str]:
    """`bergen verify PATH`, trusting the key that signed the record, if any, as the server's
    (what these tests check is the clock, not who signed)."""
    signature = json.loads(path.read_text()).get("signature")
    key = ["--public-key", signature["public_key"]] if signature else []
    return subprocess.run(
        [*bergen_command(), "verify", str(path), *key],
        capture_output=True,
        text=True,
        timeout=60,
    )


@on_backend("postgresql")
def test_a_clocked_match_where_one_seat_stops_answering_ends_by_its_forfeit(
    farm: ServerFarm, database: str, tmp_path: Path
) -> None:
    """Seat 0 plays at once every time; seat 1 plays its first 3 plays, then stops answering:
    it is timed out (an automatic play), then again on its next turn (its second in a row),
    which forfeits its side."""
    server = farm.start(database)
    options = {"clock": "fischer", "clock_increment": 1, "timeouts_to_forfeit": 2}
    with Client(server.target) as client:
        table = seat_everyone(client, 2, clock_initial=4, target=1000, **options)
        played = [0, 0]
        deadline = time.monotonic() + 120
        while True:
            assert time.monotonic() < deadline, "the match did not end"
            view = client.view(table.match_id)
            if view.phase == pb.PHASE_ENDED:
                break
            seat = view.turn if view.HasField("turn") else None
            if seat is None or (seat == 1 and played[1] >= 3):
                time.sleep(0.02)
                continue
            mine = client.view(table.match_id, table.tokens[seat])
            if not mine.legal_plays:
                continue
            choice = mine.legal_plays[0]
            try:
                client.play(table.match_id, choice.tile, choice.end, table.tokens[seat])
                played[seat] += 1
            except grpc.RpcError as e:
                # The turn moved on under us (a timeout, a forced pass): look again.
                assert refusal(e).code is grpc.StatusCode.FAILED_PRECONDITION, refusal(e)
        record = client.record(table.match_id)
        events = [e for e in client.replay(table.match_id).events]
    result = record["result"]
    assert (result["reason"], result["cause"], result["forfeited_side"]) == (
        "forfeit",
        "timeout",
        1,
    )
    assert result["winner_side"] == 0
    timed_out = [e.timed_out.seat for e in events if e.HasField("timed_out")]
    assert timed_out == [1, 1]
    actions = [a for hand in record["hands"] for a in hand["actions"]]
    autos = [a for a in actions if a.get("auto")]
    assert [a["seat"] for a in autos] == [1] and autos[0]["clock_ms"] == 1000
    own = [a for a in actions if a["act"] == "play" and a["seat"] == 1 and not a.get("auto")]
    assert len(own) >= 3
    honest = verify_file(write(tmp_path / "stalled.json", record))
    assert honest.returncode == 0, honest.stdout + honest.stderr


def test_a_view_of_a_clocked_match_carries_the_servers_match_time(
    farm: ServerFarm, sqlite_url: str
) -> None:
    server = farm.start(sqlite_url)
    with Client(server.target) as client:
        table = seat_everyone(client, 2, clock_initial=60, **NEVER_PLAYED)
        first = client.view(table.match_id)
        time.sleep(0.3)
        later = client.view(table.match_id)
        unclocked = seat_everyone(client, 2)
        plain = client.view(unclocked.match_id)
    running = next(c for c in later.clocks if c.running)
    assert running.falls_at_ms == 60_000 and first.at_ms == later.at_ms == 0
    assert later.server_at_ms >= first.server_at_ms + 300
    # What a client counts down from: the time left now, on the server's clock.
    assert 0 < running.falls_at_ms - later.server_at_ms <= 60_000 - 300
    assert plain.server_at_ms == 0 and not plain.clocks


def test_a_play_after_the_seats_time_ran_out_is_refused(farm: ServerFarm, sqlite_url: str) -> None:
    # A long clock for the seat to move, so that the server's own timer does not come first:
    # the Play arrives at a server whose clock is far ahead of the keeper's next wake-up.
    server = farm.start(sqlite_url)
    with Client(server.target) as client:
        table = seat_everyone(client, 2, clock_initial=1, **NEVER_PLAYED)
        view = table.joins[-1].view
        turn = next(c.seat for c in view.clocks if c.running)
        mine = client.view(table.match_id, table.tokens[turn])
        play = mine.legal_plays[0]
        time.sleep(1.2)
        try:
            client.play(table.match_id, play.tile, play.end, table.tokens[turn])
        except grpc.RpcError as e:
            got = refusal(e)
            assert got.code is grpc.StatusCode.FAILED_PRECONDITION, got
            assert got.reason in {"CLOCK_EXPIRED", "NOT_YOUR_TURN"}, got
        else:
            pytest.fail("a play after the seat's time ran out was accepted")
        after = client.view(table.match_id)
        assert after.version > view.version
        events = client.replay(table.match_id).events
        assert any(e.HasField("timed_out") for e in events)


@pytest.mark.postgres
def test_two_replicas_write_exactly_one_timeout_per_expiry_though_one_is_killed(
    farm: ServerFarm, pg_database: str
) -> None:
    replicas = [farm.start(pg_database, name=f"replica{i}") for i in range(2)]
    rng = random.Random(11)
    tables: list[Table] = []
    clients = [Client(r.target) for r in replicas]
    try:
        for i in range(200):
            if i == 100:
                # Half the matches in play, timeouts due all the while: replica 1 dies
                # holding its share of them.
                replicas[1].kill()
            client = clients[i % 2] if i < 100 else clients[0]
            tables.append(seat_everyone(client, 2, clock_initial=rng.randint(1, 3), **NEVER_PLAYED))
        wait_until_ended(clients[0], [t.match_id for t in tables], timeout=120)
    finally:
        for client in clients:
            client.close()
    with store_at(pg_database) as store:
        streams = all_streams(store)
    for table in tables:
        stored = streams[table.match_id]
        found = timeouts(stored)
        assert len(found) == TIMEOUTS_PER_MATCH, (table.match_id, found)
        last = codec.decode(stored[-2].type, stored[-2].schema_version, stored[-2].payload)
        assert isinstance(last, MatchEnded), last
        assert last.reason is MatchEndReason.FORFEIT and last.cause is ForfeitCause.TIMEOUT
        autos = [
            e
            for e in (codec.decode(r.type, r.schema_version, r.payload) for r in stored)
            if isinstance(e, TilePlayed) and e.auto
        ]
        assert len(autos) == TIMEOUTS_PER_MATCH - 1


@pytest.mark.postgres
def test_a_clock_that_fell_while_no_server_ran_is_timed_out_when_one_starts(
    farm: ServerFarm, pg_database: str
) -> None:
    server = farm.start(pg_database, name="first")
    with Client(server.target) as client:
        table = seat_everyone(client, 2, clock_initial=3, **NEVER_PLAYED)
    server.kill()
    with store_at(pg_database) as store:
        before = store.read_stream(table.match_id)
    assert not timeouts(before), "the first server timed out before it was killed"
    epoch = epoch_of(before)
    # Let the clock fall while no server runs.
    time.sleep(max(0.0, (epoch + 3500) / 1000 - time.time()))
    started = time.time()
    later = farm.start(pg_database, name="second")
    with Client(later.target) as client:
        wait_until_ended(client, [table.match_id], timeout=120)
    with store_at(pg_database) as store:
        found = timeouts(store.read_stream(table.match_id))
    assert len(found) == TIMEOUTS_PER_MATCH
    due, stored_ms = found[0].due_ms, found[0].stored_ms
    assert due < started * 1000 <= stored_ms, (due, started, stored_ms)
