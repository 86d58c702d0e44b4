"""`bergen ratings verify` on rated matches that `bergen bots` played against a real server,
across the four pools, exported with `bergen export`: on PostgreSQL enough of them (144) that
every pool has a leaderboard, on SQLite fewer (80), enough for pool 2's. Every rating and every
leaderboard the records give is the server's; a record changed after it was signed is named;
a rating changed in the server's table, as someone holding the database and the log keys may
(without the keys, the server folds its ratings again: security/test_read_models.py), is named
with its player and its pool, and so is a leaderboard put in another order."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bergen.api.exit_status import ExitStatus
from bergen.domain.ratings import POOLS
from bergen.server.keys import DEFAULT_LOG_KEY_FILE, LogKeys
from bergen.server.store.ratings import seal_rating
from bergen.server.store.sealed import Seals
from bergen.v1 import bergen_pb2 as pb

from .client import Client
from .servers import ServerFarm, ServerProcess, bergen_command
from .test_players import POOL_NUMBER, ratings_sql

pytestmark = [pytest.mark.timeout(900), pytest.mark.slow]

MATCHES_A_POOL = {"sqlite": 20, "postgresql": 36}
"""Rated matches a pool on each backend. A pool's players play its every match, and the first
of them leaves the provisional ratings (enters the leaderboard, RATINGS.md section 4) after 12
to 15 two-seat matches, 15 to 20 three-seat, 19 to 27 four-seat, 22 or 23 in partnerships
(places drawn at random, 300 times each)."""
BOTS = {
    "2": ["--players", "2", "--policy", "greedy", "random"],
    "3": ["--players", "3", "--policy", "greedy", "random", "greedy"],
    "4": ["--players", "4", "--policy", "random"],
    "pairs": ["--players", "4", "--partnerships", "--policy", "greedy", "random"],
}
"""Each pool's matches: fast policies; the bots are bot-greedy-1 and 2, bot-random-1 to 4."""


@dataclass(frozen=True)
class Played:
    server: ServerProcess
    database: str
    records: Path
    env: dict[str, str]
    matches_a_pool: int
    every_leaderboard: bool
    """Enough matches in every pool that none's leaderboard is empty (else only pool 2's)."""


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def module_database(request: pytest.FixtureRequest) -> str:
    """The module's database, on each backend in turn (its server runs as its owner)."""
    fixture = "module_sqlite_url" if request.param == "sqlite" else "module_pg_database"
    url: str = request.getfixturevalue(fixture)
    return url


def backend_of(url: str) -> str:
    return "sqlite" if url.startswith("sqlite:") else "postgresql"


def bergen(
    env: dict[str, str], *args: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*bergen_command(), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def ok_json(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def played(
    module_farm: ServerFarm, module_database: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Played]:
    """Rated bot matches, MATCHES_A_POOL in each pool, to a short target, and their
    records."""
    matches = MATCHES_A_POOL[backend_of(module_database)]
    home = tmp_path_factory.mktemp("ratings")
    server = module_farm.start(module_database)
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERGEN_")}
    env.update(
        BERGEN_SERVER=server.target,
        BERGEN_CONFIG_DIR=str(home / "config"),
        BERGEN_STATE_DIR=str(home / "state"),
    )
    for pool, args in BOTS.items():
        report = ok_json(
            bergen(
                env,
                "bots",
                "--rated",
                "--matches",
                str(matches),
                "--parallel",
                "8",
                "--target",
                "3",
                "--seed",
                f"pool {pool}",
                *args,
                "--json",
            )
        )
        assert report["rated"] is True and len(report["matches"]) == matches
        assert all(m["reason"] == "target" for m in report["matches"])
        assert all(all(b.startswith("bot-") for b in m["bots"]) for m in report["matches"])
    records = home / "records"
    exported = ok_json(bergen(env, "export", "--out", str(records), "--json"))
    assert len(exported["written"]) == 4 * matches and exported["rejected"] == []
    every_leaderboard = matches >= MATCHES_A_POOL["postgresql"]
    yield Played(server, module_database, records, env, matches, every_leaderboard)


def verify(played: Played, records: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return bergen(played.env, "ratings", "verify", str(records), *args)


def test_the_records_of_rated_bot_matches_prove_every_rating_the_server_shows(
    played: Played,
) -> None:
    total = 4 * played.matches_a_pool
    report = ok_json(verify(played, played.records, "--json"))
    assert report["ok"] is True and report["problems"] == [] and report["untrusted"] == []
    assert report["records"] == total
    assert report["rated"] == dict.fromkeys(POOLS, played.matches_a_pool)
    assert report["players"] == 6
    assert report["server"] == played.server.target
    assert report["verdict"].startswith(
        f"OK: {total} record(s) of {total} in {played.records} check"
    )
    assert report["verdict"].endswith(
        f"every rating and every leaderboard agrees with {played.server.target}"
    )

    # What the records give, offline, is what the server shows, field by field.
    offline = ok_json(verify(played, played.records, "--offline", "--json"))
    assert offline["server"] is None and offline["problems"] == []
    with Client(played.server.target) as client:
        for pool in POOLS:
            mine = offline["ratings"][pool]
            assert mine, f"nobody rated in pool {pool}"
            if played.every_leaderboard or pool == "2":
                assert mine[0]["rank"] == 1, f"nobody on the leaderboard of pool {pool}"
            for r in mine:
                got = client.stub.GetPlayer(pb.GetPlayerRequest(player_id=r["player_id"]))
                shown = {x.pool: x for x in got.ratings}[POOL_NUMBER[pool]]
                assert abs(shown.mu - r["mu"]) <= 1e-9 and abs(shown.sigma - r["sigma"]) <= 1e-9
                assert (shown.rating, shown.provisional, shown.rated_matches) == (
                    r["rating"],
                    r["provisional"],
                    r["rated_matches"],
                )
            board = client.stub.ListLeaderboard(
                pb.ListLeaderboardRequest(pool=POOL_NUMBER[pool], page_size=100)
            )
            assert [e.player.player_id for e in board.entries] == [
                r["player_id"] for r in mine if r["rank"] is not None
            ]


def test_a_record_whose_result_was_changed_is_named_and_its_matches_differ(
    played: Played, tmp_path: Path
) -> None:
    records = tmp_path / "records"
    shutil.copytree(played.records, records)
    # A record whose scores read backwards are other scores (not [0, 3, 0], say).
    victim, record = next(
        (p, r)
        for p in sorted(records.glob("*.json"))
        if p.name != "manifest.json"
        and (r := json.loads(p.read_text()))["result"]["scores"]
        != list(reversed(r["result"]["scores"]))
    )
    record["result"]["scores"] = list(reversed(record["result"]["scores"]))
    victim.write_text(json.dumps(record, indent=2))
    done = verify(played, records)
    assert done.returncode == ExitStatus.INVALID, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    (rejected,) = [line for line in lines if line.startswith(f"REJECTED: {victim}: ")]
    assert rejected.startswith(f"REJECTED: {victim}: result: ")
    assert rejected.endswith("its signature fails too: the signature does not match the record")
    # Left out, the match is one the server rates and no record here holds.
    match_id = record["match_id"]
    differ = [line for line in lines if line.startswith("DIFFERS: player ")]
    assert differ and all(f"match {match_id} (order " in line for line in differ)
    assert len(differ) == len(record["seats"])
    assert lines[-1].startswith("REJECTED: 1 record(s) rejected, ")


def set_rating(played: Played, player: str, pool: str, **columns: Any) -> None:
    """Change `columns` of the player's rating in `pool`, sealed again under the server's log
    keys (beside its signing key) so that the server serves it as is."""
    written = (
        "player_id, pool, name, bot, mu, sigma, matches, shown, rank_rating, rank_conservative"
    )
    ((*row,),) = ratings_sql(
        played.database,
        f"SELECT {written} FROM player_ratings WHERE player_id = %s AND pool = %s",
        (player, pool),
    )
    values = dict(zip(written.split(", "), row, strict=True)) | columns
    kinds = (str, str, str, bool, float, float, int, bool, int, float)
    typed = [kind(v) for kind, v in zip(kinds, values.values(), strict=True)]
    keys = LogKeys.load_or_create(played.server.log_path.parent / DEFAULT_LOG_KEY_FILE)
    key_id, mac = seal_rating(Seals(keys), typed)
    changed = ", ".join(f"{c} = %s" for c in columns)
    ratings_sql(
        played.database,
        f"UPDATE player_ratings SET {changed}, key_id = %s, mac = %s"
        " WHERE player_id = %s AND pool = %s",
        (*columns.values(), key_id, mac, player, pool),
    )


@pytest.fixture
def leader(played: Played) -> Iterator[tuple[str, str, float, int]]:
    """The first of pool 2's leaderboard: its id, name, mu and rank_rating, put back as they
    were after the test."""
    with Client(played.server.target) as client:
        first = client.stub.ListLeaderboard(
            pb.ListLeaderboardRequest(pool=pb.RATING_POOL_TWO, page_size=1)
        ).entries[0]
    player = first.player.player_id
    ((mu, rank_rating),) = ratings_sql(
        played.database,
        "SELECT mu, rank_rating FROM player_ratings WHERE player_id = %s AND pool = %s",
        (player, "2"),
    )
    yield player, first.player.name, mu, rank_rating
    set_rating(played, player, "2", mu=mu, rank_rating=rank_rating)


def test_a_rating_changed_in_the_servers_table_is_named_with_its_player_and_pool(
    played: Played, leader: tuple[str, str, float, int]
) -> None:
    player, name, mu, _ = leader
    set_rating(played, player, "2", mu=mu + 0.25)
    done = verify(played, played.records, "--json")
    assert done.returncode == ExitStatus.INVALID, done.stdout + done.stderr
    report = json.loads(done.stdout)
    problems = report["problems"]
    (mine,) = [p for p in problems if p["kind"] == "player"]
    assert (mine["player_id"], mine["pool"]) == (player, "2")
    assert mine["server"]["mu"] == mu + 0.25 and abs(mine["records"]["mu"] - mu) <= 1e-9
    assert mine["line"].startswith(f"DIFFERS: player {name} ({player}), pool 2: ")
    assert "every rated match of its history agrees" in mine["line"]
    (board,) = [p for p in problems if p["kind"] == "leaderboard"]
    assert (board["pool"], board["rank"], board["player_id"]) == ("2", 1, player)
    assert report["verdict"].startswith("REJECTED: 2 difference(s) with ")


def test_a_leaderboard_put_in_another_order_is_named_at_its_rank(
    played: Played, leader: tuple[str, str, float, int]
) -> None:
    player, name, _, _ = leader
    # Its rating stays; its place is last (the leaderboard's key is the negated rating).
    set_rating(played, player, "2", rank_rating=0)
    done = verify(played, played.records)
    assert done.returncode == ExitStatus.INVALID, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    (board,) = [line for line in lines if line.startswith("DIFFERS: leaderboard")]
    assert board.startswith("DIFFERS: leaderboard of pool 2, rank 1: the server has ")
    assert f"the records give {name} ({player}) at " in board
    assert not [line for line in lines if line.startswith("DIFFERS: player")]
