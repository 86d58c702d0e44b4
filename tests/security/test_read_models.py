"""The read models are not what the server's database role says they are, but what the events
(authenticated) give.

An attacker holding the role of deploy/grants.sql (on SQLite: the file) may UPDATE and DELETE
the listing's rows and the projections' positions, but cannot make their authenticators,
which take the servers' log keys: a row edited, made up, moved to another match or put back
from an older copy is rebuilt from the events before ListMatches answers with it, a deleted
row is listed again when a server starts, and a position moved past the log makes the
listing fold again instead of answering NOT_FOUND. Each is logged as READ MODEL TAMPERED,
naming the table and the row.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
from e2e.client import Client, seat_everyone
from e2e.servers import ServerFarm, ServerProcess, bergen_command
from e2e.test_metrics import metrics_url, scrape, value
from e2e.test_players import rated_table, register, resign, shown

from bergen.api.exit_status import ExitStatus
from bergen.v1 import bergen_pb2 as pb

from .conftest import Database
from .test_listing_authenticity import Listed, connected, listed

WAIT_S = 30.0


def sql(database: Database, statement: str) -> str:
    """`statement` written with `?` markers, in the backend's."""
    return statement if database.backend == "sqlite" else statement.replace("?", "%s")


def run(database: Database, statement: str, params: tuple[Any, ...] = ()) -> None:
    """One statement as the server's role."""
    with connected(database.server_url) as conn:
        conn.execute(sql(database, statement), params)


def listing_row(database: Database, match_id: str) -> dict[str, Any]:
    """The listing's row of `match_id`, column by column."""
    with connected(database.server_url) as conn:
        cur = conn.execute(
            sql(database, "SELECT * FROM match_list WHERE match_id = ?"), (match_id,)
        )
        names = [d[0] for d in cur.description]
        row = cur.fetchone()
    assert row is not None, match_id
    return dict(zip(names, row, strict=True))


def put_row(database: Database, match_id: str, values: dict[str, Any]) -> None:
    """Set the listing's row of `match_id` to `values` (every column but its match id)."""
    columns = [c for c in values if c != "match_id"]
    run(
        database,
        f"UPDATE match_list SET {', '.join(f'{c} = ?' for c in columns)} WHERE match_id = ?",
        (*(values[c] for c in columns), match_id),
    )


def listed_when(
    server: ServerProcess, ok: Callable[[dict[str, Listed]], bool]
) -> dict[str, Listed]:
    """The listing once `ok` says it is as expected; fails after WAIT_S (PostgreSQL's global
    order waits out every older transaction of the cluster)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        now = listed(server)
        if ok(now):
            return now
        assert time.monotonic() < deadline, now
        time.sleep(0.2)


def listed_until(server: ServerProcess, match_id: str, expected: Listed) -> dict[str, Listed]:
    """The listing once it shows `match_id` as `expected`."""
    return listed_when(server, lambda now: now.get(match_id) == expected)


def players_of(now: dict[str, Listed], match_id: str) -> tuple[str, ...]:
    return now[match_id][2] if match_id in now else ()


def tampered_logged(server: ServerProcess, table: str, key: str) -> bool:
    return f"READ MODEL TAMPERED: table {table} row {key} " in server.log()


def two_matches(server: ServerProcess) -> tuple[str, str]:
    """A match being played and one seating, both listed (their rows written)."""
    with Client(server.target) as client:
        playing = seat_everyone(client, 2, name="playing").match_id
        seating = client.create(2, name="seating").match_id
        client.join(seating, "ada")
    listed_when(
        server,
        lambda now: (
            all(players_of(now, playing) or ("",)) and players_of(now, seating) == ("ada", "")
        ),
    )
    return playing, seating


def test_an_edited_or_made_up_listing_row_is_not_listed(
    farm: ServerFarm, database: Database
) -> None:
    server = farm.start(database.server_url, extra_args=["--metrics", "127.0.0.1:0"])
    playing, seating = two_matches(server)
    before = listed(server)
    put_row(
        database,
        playing,
        {
            "name": "FREE MONEY http://evil",
            "players": '["mallory", "eve"]',
            "scores": "[500, 0]",
        },
    )
    made_up = {**listing_row(database, seating), "name": "FREE MONEY http://evil"}
    made_up.update(match_id="made-up", listed=made_up["listed"] + 10**9)
    run(
        database,
        f"INSERT INTO match_list ({', '.join(made_up)}) VALUES ({', '.join('?' * len(made_up))})",
        tuple(made_up.values()),
    )

    after = listed(server)
    assert after[playing] == before[playing]
    assert "made-up" not in after
    assert tampered_logged(server, "match_list", playing)
    assert tampered_logged(server, "match_list", "made-up")
    assert listing_row(database, playing)["name"] == "playing"  # rebuilt in the table too
    repairs = value(
        scrape(metrics_url(server)), "bergen_read_model_repairs_total", table="match_list"
    )
    assert repairs == 2

    server = farm.start(database.server_url, name="restarted")
    assert listed(server) == after


def test_a_deleted_listing_row_is_listed_again_when_a_server_starts(
    farm: ServerFarm, database: Database
) -> None:
    server = farm.start(database.server_url)
    _, seating = two_matches(server)
    before = listed(server)
    run(database, "DELETE FROM match_list_players WHERE match_id = ?", (seating,))
    run(database, "DELETE FROM match_list WHERE match_id = ?", (seating,))
    assert server.terminate() == 0

    server = farm.start(database.server_url)
    assert listed_until(server, seating, before[seating]) == before
    assert tampered_logged(server, "match_list", seating)
    assert seating in by_player(server, "ada")


def by_player(server: ServerProcess, player: str) -> set[str]:
    """The ids of the matches ListMatches lists for `player`."""
    with Client(server.target) as client:
        page = client.stub.ListMatches(
            pb.ListMatchesRequest(page_size=100, player_name=player), timeout=10
        )
    return {m.match_id for m in page.matches}


def test_a_row_copied_from_another_match_is_not_listed(
    farm: ServerFarm, database: Database
) -> None:
    server = farm.start(database.server_url)
    playing, seating = two_matches(server)
    before = listed(server)
    copy = listing_row(database, playing)
    del copy["listed"]  # unique: the copy keeps its own place in the listing
    put_row(database, seating, copy)

    assert listed(server) == before
    assert tampered_logged(server, "match_list", seating)


def test_an_older_authentic_row_put_back_is_not_listed(
    farm: ServerFarm, database: Database
) -> None:
    server = farm.start(database.server_url)
    _, seating = two_matches(server)
    older = listing_row(database, seating)
    with Client(server.target) as client:
        client.join(seating, "bo")
    before = listed_when(server, lambda now: players_of(now, seating) == ("ada", "bo"))
    put_row(database, seating, older)

    assert listed(server) == before
    assert tampered_logged(server, "match_list", seating)


def test_a_position_past_the_log_is_folded_again_and_export_works(
    farm: ServerFarm, database: Database, tmp_path: Path
) -> None:
    server = farm.start(database.server_url)
    two_matches(server)
    before = listed(server)
    far = "UPDATE projection_positions SET position = 1000000000000 WHERE name = 'match_list'"
    run(database, far)
    with Client(server.target) as client:
        fresh = client.create(2, name="after").match_id  # folded from where it was
    now = listed(server)
    assert {m: now[m] for m in before} == before and fresh in now

    assert server.terminate() == 0
    run(database, far)
    server = farm.start(database.server_url)
    assert listed_until(server, fresh, now[fresh]) == now
    assert tampered_logged(server, "projection_positions", "match_list")
    out = subprocess.run(
        [
            *bergen_command(),
            "export",
            "--out",
            str(tmp_path / "records"),
            "--server",
            server.target,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == ExitStatus.SUCCESS, out.stderr


def test_a_forged_rating_is_not_shown_and_the_ratings_are_folded_again(
    farm: ServerFarm, database: Database
) -> None:
    server = farm.start(database.server_url)
    with Client(server.target) as client:
        ann, bob = register(client, "ann"), register(client, "bob")
        resign(client, rated_table(client, [ann, bob]), 0)
        deadline = time.monotonic() + WAIT_S
        while shown(client, ann.player_id)["2"].rated_matches != 1:
            assert time.monotonic() < deadline, "the rated match was never rated"
            time.sleep(0.1)
        before = {p.player_id: shown(client, p.player_id) for p in (ann, bob)}
        run(
            database,
            "UPDATE player_ratings SET name = 'FREE MONEY http://evil', mu = 60, sigma = 1,"
            " matches = 500 WHERE player_id = ?",
            (ann.player_id,),
        )
        assert {p.player_id: shown(client, p.player_id) for p in (ann, bob)} == before
    assert tampered_logged(server, "player_ratings", f"{ann.player_id} 2")


SECURITY_MD = Path(__file__).parents[2] / "docs" / "security.md"


def granted_in_docs() -> dict[str, set[str]]:
    """What docs/security.md's table says the server's role of deploy/grants.sql may do to
    each table (a row may name several tables)."""
    lines = SECURITY_MD.read_text(encoding="utf-8").splitlines()
    header = "| table | SELECT | INSERT | UPDATE | DELETE |"
    at = lines.index(header)
    columns = [c.strip() for c in header.strip("|").split("|")][1:]
    granted: dict[str, set[str]] = {}
    for line in lines[at + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        held = {p for p, said in zip(columns, cells[1:], strict=True) if said == "yes"}
        for table in re.findall(r"`([a-z_]+)`", cells[0]):
            granted[table] = held
    return granted


UPDATED = {
    "match_list_players": "match_id",
    "rating_history": "rated_order",
    "rated_matches": "match_id",
}
"""A column of each table the role may not UPDATE."""


@pytest.mark.postgres
def test_the_server_role_holds_exactly_what_docs_security_says(deployed_pg: Database) -> None:
    role = urlsplit(deployed_pg.server_url).username
    privileges = ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER")
    with psycopg.connect(deployed_pg.owner_url, autocommit=True) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
            ).fetchall()
        ]
        held = {
            t: {
                p
                for p in privileges
                if conn.execute("SELECT has_table_privilege(%s, %s, %s)", (role, t, p)).fetchone()[
                    0
                ]
            }
            for t in tables
        }
    granted = granted_in_docs()
    assert sorted(tables) == sorted(granted), "a table docs/security.md does not name"
    assert held == granted
    with psycopg.connect(deployed_pg.server_url, autocommit=True) as conn:
        for table in ("match_list_players", "rating_history", "rated_matches"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(f"UPDATE {table} SET {UPDATED[table]} = {UPDATED[table]}")
