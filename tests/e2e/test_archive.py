"""`bergen archive`: old ended matches exported to signed records and removed from PostgreSQL,
then verified and replayed from the archive, while the server answers for them clearly."""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest

from bergen.api.exit_status import ExitStatus
from bergen.cli_client import archive
from bergen.v1 import bergen_pb2 as pb

from .client import Client, play_to_end, seat_everyone
from .conftest import ORGANISER_TOKEN
from .refusals import refusal
from .replay_support import run_replay
from .servers import ServerFarm, bergen_command
from .test_players import await_ratings, recomputed, register, resign
from .test_players import rated_table as new_rated_table
from .test_verify import MIXED, play_matches

pytestmark = pytest.mark.postgres

WAIT_S = 30.0
GAP_S = 2.0
"""Between the ends of the old matches and of the newer ones."""


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*bergen_command(), *args], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def run_archive(database: str, cutoff: float, out: Path, *more: str) -> dict[str, Any]:
    """`bergen archive` of the matches that ended before `cutoff` (a time.time())."""
    before = datetime.fromtimestamp(cutoff, UTC).isoformat()
    done = run_cli("archive", "--database", database, "--ended-before", before,
                   "--to", str(out), "--json", *more)  # fmt: skip
    assert done.returncode == ExitStatus.SUCCESS, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def sql(database: str, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(database, autocommit=True) as conn:
        cursor = conn.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


def rows_of(database: str, match_ids: list[str]) -> dict[str, list[tuple[int, str]]]:
    found: dict[str, list[tuple[int, str]]] = {m: [] for m in match_ids}
    for stream, seq, kind in sql(
        database,
        "SELECT stream_id, seq, type FROM events WHERE stream_id = ANY(%s) ORDER BY 1, 2",
        (match_ids,),
    ):
        found[stream].append((seq, kind))
    return found


def ended_listed(client: Client) -> set[str]:
    ids: set[str] = set()
    token = ""
    while True:
        page = client.stub.ListMatches(
            pb.ListMatchesRequest(phase=pb.PHASE_ENDED, page_size=100, page_token=token)
        )
        ids |= {m.match_id for m in page.matches}
        token = page.next_page_token
        if not token:
            return ids


def archived_refusal(client: Client, match_id: str) -> Any:
    """The refusal GetMatch answers for `match_id` once it is archived (a replica that had
    it in its cache looks again within ARCHIVED_CHECK_S)."""
    deadline = time.monotonic() + 15.0
    while True:
        try:
            client.stub.GetMatch(pb.GetMatchRequest(match_id=match_id), timeout=20)
        except grpc.RpcError as e:
            return refusal(e)
        assert time.monotonic() < deadline, f"{match_id} is still served"
        time.sleep(0.5)


def wait_until_archivable(database: str, cutoff: float, out: Path, wanted: set[str]) -> None:
    """Wait until a dry run would archive every match of `wanted` (their records kept, and
    folded by the listing, the ratings and the transparency log)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        report = run_archive(database, cutoff, out, "--dry-run")
        if wanted <= set(report["archived"]):
            return
        assert time.monotonic() < deadline, report["skipped"]
        time.sleep(0.5)


def test_old_ended_matches_are_archived_verified_and_replayed_and_answered_as_archived(
    farm: ServerFarm, pg_database: str, tmp_path: Path
) -> None:
    server = farm.start(pg_database, organiser_token=ORGANISER_TOKEN)
    out = tmp_path / "archive"
    rng = random.Random(7)
    with Client(server.target) as client:
        key = client.stub.GetServerInfo(pb.GetServerInfoRequest()).public_key
        ann, bob, cy = (register(client, n) for n in ("Ann", "Bob", "Cy"))
        players = [p.player_id for p in (ann, bob, cy)]
        rated_old = []
        for pair in ([ann, bob], [bob, cy]):
            table = new_rated_table(client, pair)
            resign(client, table, 0)
            rated_old.append(table.match_id)
        old = rated_old + play_matches(client, rng, (MIXED[0], MIXED[1], MIXED[5]))
        old_done = time.time()
        time.sleep(GAP_S)
        table = new_rated_table(client, [cy, ann])
        resign(client, table, 1)
        newer = [table.match_id, *play_matches(client, rng, (MIXED[0],))]
        live = seat_everyone(client, 2)
        records = {m: client.record(m) for m in old + newer}  # kept by now
        before_listed = ended_listed(client)
        assert set(old + newer) <= before_listed
    cutoff = old_done + 0.5  # the old ones ended before, the newer ones well after

    # A dry run says what it would archive, and changes nothing.
    wait_until_archivable(pg_database, cutoff, out, set(old))
    rows_before = rows_of(pg_database, old + newer + [live.match_id])
    dry = run_archive(pg_database, cutoff, out, "--dry-run")
    assert set(dry["archived"]) == set(old) and dry["dry_run"] is True
    assert not out.exists()
    assert rows_of(pg_database, old + newer + [live.match_id]) == rows_before

    # A run stopped after its files were written, before anything was removed: the folder
    # verifies and the matches are served as before.
    with psycopg.connect(pg_database, autocommit=True) as conn:
        plan = archive.make_plan(conn, timedelta(seconds=time.time() - cutoff), out, None)
        # (an age, as --older-than gives it: here counted at once)
        assert {c.match_id for c in plan.chosen} == set(old)
        archive.write(plan, out)
    assert rows_of(pg_database, old + newer + [live.match_id]) == rows_before
    done = run_cli("verify", str(out), "--public-key", key)
    assert done.returncode == ExitStatus.SUCCESS, done.stdout + done.stderr
    hashes = {p.name: hashlib.sha256(p.read_bytes()).digest() for p in out.iterdir()}
    with Client(server.target) as client:
        assert client.stub.GetMatch(pb.GetMatchRequest(match_id=old[0])).view.match_id == old[0]

    # Run again, whole: it archives them; the files it had written stay as they were.
    report = run_archive(pg_database, cutoff, out)
    assert set(report["archived"]) == set(old)
    assert report["listed"] == len(old)
    for name, digest in hashes.items():
        if name != "manifest.json":
            assert hashlib.sha256((out / name).read_bytes()).digest() == digest
    after = rows_of(pg_database, old + newer + [live.match_id])
    for m in old:
        ends = [seq for seq, kind in rows_before[m] if kind == "MatchEnded"]
        assert after[m] == [(seq, kind) for seq, kind in rows_before[m] if seq >= ends[0]]
    for m in [*newer, live.match_id]:
        assert after[m] == rows_before[m]
    assert sql(pg_database, "SELECT count(*) FROM match_records WHERE match_id = ANY(%s)",
               (old,)) == [(0,)]  # fmt: skip

    # The archive verifies, and each record replays, without the server.
    done = run_cli("verify", str(out), "--public-key", key, "--json")
    assert done.returncode == ExitStatus.SUCCESS, done.stdout + done.stderr
    assert json.loads(done.stdout)["records"] == len(old)
    for m in old:
        assert json.loads((out / f"{m}.json").read_text()) == records[m]
    replayed = run_replay("--file", str(out / f"{old[2]}.json"), "--plain")
    assert replayed.returncode == ExitStatus.SUCCESS, replayed.stderr
    assert replayed.stdout.strip()

    # The server answers for an archived match clearly; the others as before.
    with Client(server.target) as client:
        for m in old:
            said = archived_refusal(client, m)
            assert said.code == grpc.StatusCode.FAILED_PRECONDITION
            assert said.reason == "MATCH_ARCHIVED" and said.metadata["match_id"] == m
            assert "archive" in said.message and said.metadata["archived_at"]
        with pytest.raises(grpc.RpcError) as info:
            client.stub.GetRecord(pb.GetRecordRequest(match_id=old[0]))
        assert refusal(info.value).reason == "MATCH_ARCHIVED"
        with pytest.raises(grpc.RpcError) as info:
            list(client.stub.WatchMatch(pb.WatchMatchRequest(match_id=old[1]), timeout=20))
        assert refusal(info.value).reason == "MATCH_ARCHIVED"
        assert client.record(newer[1]) == records[newer[1]]
        assert client.stub.GetMatch(pb.GetMatchRequest(match_id=live.match_id)).view
        assert ended_listed(client) == before_listed - set(old)
        want = recomputed(list(records.values()))
        await_ratings(client, players, want)
    assert server.terminate() == 0

    # Nothing is taken for tampering after a restart; the ratings and the listing folded
    # again from position 0 are the same.
    rebuilt = run_cli("migrate", "--rebuild-ratings", "--database", pg_database)
    assert rebuilt.returncode == 0, rebuilt.stderr
    sql(pg_database, "DELETE FROM match_list_players")
    sql(pg_database, "DELETE FROM match_list")
    sql(pg_database, "DELETE FROM projection_positions WHERE name = 'match_list'")
    server = farm.start(pg_database, organiser_token=ORGANISER_TOKEN)
    with Client(server.target) as client:
        await_ratings(client, players, want)
        deadline = time.monotonic() + WAIT_S
        while ended_listed(client) != before_listed - set(old):
            assert time.monotonic() < deadline, ended_listed(client) ^ before_listed
            time.sleep(0.3)
        said = archived_refusal(client, old[0])
        assert said.reason == "MATCH_ARCHIVED"
        play_to_end([client], rng, live)  # the live one plays on
    assert server.terminate() == 0
    assert "LOG ROLLED BACK" not in server.log() and "TAMPERED" not in server.log()

    # Run again: nothing more is archived (the live match has just ended: too new).
    report = run_archive(pg_database, cutoff, out)
    assert report["archived"] == [] and report["listed"] == len(old), (
        report,
        old,
        newer,
        live,
        cutoff,
        time.time(),
    )
