"""Archiving keeps the events append-only for everyone but the owner's `bergen archive`: the
server's role deletes nothing and lists nothing as archived, and even the owner deletes only
an archived match's rows before its end."""

from __future__ import annotations

import json
import random
import subprocess
import time
from pathlib import Path

import psycopg
import pytest
from e2e.client import Client
from e2e.servers import ServerFarm, bergen_command
from e2e.test_verify import MIXED, play_matches

from bergen.api.exit_status import ExitStatus

from .conftest import ORGANISER_TOKEN, Database


def archive_as(url: str, out: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [*bergen_command(), "archive", "--database", url, "--older-than", "0s",
         "--to", str(out), "--json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    return done


def refused(url: str, statement: str, *params: object) -> str:
    """The error `statement` is refused with (it must be refused)."""
    with psycopg.connect(url, autocommit=True) as conn, pytest.raises(psycopg.Error) as info:
        conn.execute(statement, params)
    return str(info.value)


@pytest.mark.postgres
def test_only_the_owner_archives_and_only_an_archived_matchs_rows_before_its_end_go(
    farm: ServerFarm, deployed_pg: Database, tmp_path: Path
) -> None:
    server = farm.start(deployed_pg.server_url, organiser_token=ORGANISER_TOKEN)
    with Client(server.target) as client:
        first, second = play_matches(client, random.Random(3), (MIXED[0], MIXED[0]))
        client.record(first)  # kept: archivable at once
        client.record(second)
    app, owner = deployed_pg.server_url, deployed_pg.owner_url

    # The server's role cannot archive, delete an event, nor list a match as archived.
    done = archive_as(app, tmp_path / "by-app")
    assert done.returncode == ExitStatus.REFUSED, done.stderr
    assert "owner" in done.stderr
    assert not (tmp_path / "by-app").exists()
    for statement in (
        "DELETE FROM events WHERE stream_id = %s",
        "INSERT INTO archived_matches (match_id, end_seq, events, head, record_sha256)"
        " VALUES (%s, 1000, 0, '\\x00', '')",
    ):
        assert "permission denied" in refused(app, statement, first)

    # The owner cannot delete the events of a match not archived.
    assert "append-only" in refused(owner, "DELETE FROM events WHERE stream_id = %s", first)

    archived: set[str] = set()
    deadline = time.monotonic() + 30.0
    while not archived >= {first, second}:  # once the server has folded their ends
        assert time.monotonic() < deadline, done.stdout + done.stderr
        done = archive_as(owner, tmp_path / "archive")
        assert done.returncode == ExitStatus.SUCCESS, done.stderr
        archived |= set(json.loads(done.stdout)["archived"])

    # Archived: still nothing for the server's role; for the owner, not the end nor what
    # follows it, and the list of archived matches cannot be changed.
    assert "permission denied" in refused(app, "DELETE FROM events WHERE stream_id = %s", first)
    assert "append-only" in refused(
        owner, "DELETE FROM events WHERE stream_id = %s AND type = 'MatchEnded'", first
    )
    assert "append-only" in refused(owner, "UPDATE events SET type = type WHERE stream_id = %s",
                                    first)  # fmt: skip
    for statement in (
        "UPDATE archived_matches SET end_seq = 10000 WHERE match_id = %s",
        "DELETE FROM archived_matches WHERE match_id = %s",
    ):
        assert "append-only" in refused(owner, statement, first)
    assert "append-only" in refused(owner, "TRUNCATE events")
    assert "append-only" in refused(owner, "TRUNCATE archived_matches")
    assert server.terminate() == 0
