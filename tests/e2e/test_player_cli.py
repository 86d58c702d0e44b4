"""`bergen player`, `bergen leaderboard` and rated play at the terminal, against a real
server: a player registered and its token kept for its owner alone, its ratings, history and
leaderboard as the server folds them, the refusals, and `bergen play` sitting as the player
in a rated match."""

from __future__ import annotations

import itertools
import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bergen.api.exit_status import ExitStatus
from bergen.v1 import bergen_pb2 as pb

from .client import Client
from .conftest import ORGANISER_TOKEN
from .servers import ServerFarm, ServerProcess, bergen_command

pexpect = pytest.importorskip("pexpect")

pytestmark = pytest.mark.timeout(300)

PROMPT = r"choose \[1-(\d+)\] \(r resigns, q leaves\): "


@pytest.fixture(scope="module")
def server(module_farm: ServerFarm, module_sqlite_url: str) -> ServerProcess:
    return module_farm.start(module_sqlite_url)


def environment(server: ServerProcess, state: Path) -> dict[str, str]:
    """The test's own configuration folder (tests/conftest.py), this server, no other
    BERGEN_ setting."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERGEN_")}
    env.update(
        BERGEN_SERVER=server.target,
        BERGEN_STATE_DIR=str(state),
        BERGEN_CONFIG_DIR=os.environ["BERGEN_CONFIG_DIR"],
    )
    return env


def bergen(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*bergen_command(), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def ok_json(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def one_error_line(done: subprocess.CompletedProcess[str], command: str, reason: str) -> str:
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"bergen {command}: "), done.stderr
    assert done.stderr.rstrip().endswith(f"({reason})"), done.stderr
    return done.stderr


def token_of(registered: dict[str, Any]) -> str:
    token: str = json.loads(Path(registered["token_file"]).read_text())["player_token"]
    return token


def rated_match(client: Client, tokens: list[str]) -> str:
    """A rated two-seat match seated by `tokens`' players and ended at once: the second
    resigns."""
    created = client.stub.CreateMatch(
        pb.CreateMatchRequest(seats=2, preset=pb.PRESET_STANDARD, rated=True), timeout=20
    )
    seats = []
    for token in tokens:
        joined = client.stub.JoinMatch(
            pb.JoinMatchRequest(match_id=created.match_id, player_token=token), timeout=20
        )
        seats.append(joined.seat_token)
    client.resign(created.match_id, seats[1])
    return str(created.match_id)


def rating_in_two(client: Client, player_id: str) -> pb.PoolRating:
    got = client.stub.GetPlayer(pb.GetPlayerRequest(player_id=player_id), timeout=20)
    served: pb.PoolRating = {r.pool: r for r in got.ratings}[pb.RATING_POOL_TWO]
    return served


def test_a_player_registers_and_its_token_is_kept_for_its_owner_alone(
    server: ServerProcess, tmp_path: Path, own_config_dir: Path
) -> None:
    env = environment(server, tmp_path)
    done = bergen(env, "player", "register", "Ann")
    assert done.returncode == 0, done.stderr
    registered = ok_json(bergen(env, "player", "register", "Bot Ann", "--bot", "--json"))
    assert registered["name"] == "Bot Ann" and registered["bot"] is True
    assert "player_token" not in registered
    token_file = Path(registered["token_file"])
    assert token_file.parent == own_config_dir / "players" / f"local-{server.port}"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(token_file.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(token_file.parent.parent.stat().st_mode) == 0o700
    token = token_of(registered)
    assert token.startswith("bgp_")
    # Printed by nothing unless asked, nor written to the server's log.
    assert token not in done.stdout + done.stderr
    assert token not in server.log()
    shown = ok_json(bergen(env, "player", "register", "Cy", "--show-token", "--json"))
    assert shown["player_token"] == token_of(shown)
    # The token kept is the player's: the server seats the player with it.
    with Client(server.target) as client:
        match_id = client.stub.CreateMatch(
            pb.CreateMatchRequest(seats=2, preset=pb.PRESET_STANDARD, rated=True), timeout=20
        ).match_id
        client.stub.JoinMatch(
            pb.JoinMatchRequest(match_id=match_id, player_token=token), timeout=20
        )
        seat = client.view(match_id).seats[0]
    assert (seat.player_id, seat.name, seat.bot) == (registered["player_id"], "Bot Ann", True)
    first = done.stdout.splitlines()
    assert first[0].startswith("player Ann: ") and first[1].startswith("token kept in ")


def test_a_taken_name_an_invalid_one_and_an_unknown_player_are_refused(
    server: ServerProcess, tmp_path: Path, own_config_dir: Path
) -> None:
    env = environment(server, tmp_path)
    ok_json(bergen(env, "player", "register", "Dora", "--json"))
    for taken in ("dora", "DORA", "\uff24ora"):
        done = bergen(env, "player", "register", taken)
        assert done.returncode == ExitStatus.REFUSED
        one_error_line(done, "player register", "NAME_TAKEN")
    for bad, reason in (
        ("do!ra", "PLAYER_NAME_CHARACTERS"),
        ("x" * 25, "PLAYER_NAME_LENGTH"),
        (" dora2", "PLAYER_NAME_SPACES"),
    ):
        done = bergen(env, "player", "register", bad)
        assert done.returncode == ExitStatus.USAGE
        one_error_line(done, "player register", reason)
    kept = list((own_config_dir / "players" / f"local-{server.port}").iterdir())
    assert len(kept) == 1  # nothing kept for a refusal
    done = bergen(env, "player", "show", "nobody-here")
    assert done.returncode == ExitStatus.NOT_FOUND
    one_error_line(done, "player show", "PLAYER_NOT_FOUND")
    done = bergen(env, "leaderboard", "2", "--page-size", "101")
    assert done.returncode == ExitStatus.USAGE
    one_error_line(done, "leaderboard", "USAGE")


def test_show_history_and_the_leaderboard_are_the_servers_ratings(
    server: ServerProcess, tmp_path: Path
) -> None:
    env = environment(server, tmp_path)
    eve = ok_json(bergen(env, "player", "register", "Eve", "--json"))
    fay = ok_json(bergen(env, "player", "register", "Fay", "--json"))
    # With two players kept, a command without a name must be told which.
    done = bergen(env, "player", "show")
    assert done.returncode == ExitStatus.USAGE
    one_error_line(done, "player show", "WHICH_PLAYER")
    matches = []
    with Client(server.target) as client:
        for i in range(14):
            pair = [eve, fay] if i % 3 else [fay, eve]
            matches.append(rated_match(client, [token_of(p) for p in pair]))
        # The server folds each end before it answers: the last one is there.
        served = rating_in_two(client, eve["player_id"])
    assert served.rated_matches == 14 and not served.provisional

    shown = ok_json(bergen(env, "player", "show", "eve", "--json"))
    assert shown["player"] == {"player_id": eve["player_id"], "name": "Eve", "bot": False}
    by_pool = {r["pool"]: r for r in shown["ratings"]}
    assert list(by_pool) == ["2", "3", "4", "pairs"]
    assert (by_pool["2"]["rating"], by_pool["2"]["mu"], by_pool["2"]["rated_matches"]) == (
        served.rating,
        served.mu,
        14,
    )
    assert by_pool["3"] == {
        "pool": "3",
        "rating": 1500,
        "mu": 25.0,
        "sigma": 25 / 3,
        "provisional": True,
        "rated_matches": 0,
    }
    text = bergen(env, "player", "show", eve["player_id"]).stdout.splitlines()
    assert text[0] == f"Eve: player {eve['player_id']}"
    assert text[2].split()[:2] == ["2", str(served.rating)]
    assert text[3].split()[:2] == ["3", "1500?"]

    # The history a page at a time, newest first, each rating following on the one before.
    first = bergen(env, "player", "history", "Eve", "--page-size", "5")
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert lines[0] == "Eve: rated matches, newest first"
    assert [line.split()[3] for line in lines[2:7]] == list(reversed(matches))[:5]
    more = lines[-1]
    assert more.startswith("more: bergen player history Eve --page-token ")
    token = more.rsplit(" ", 1)[1]
    second = ok_json(bergen(env, "player", "history", "Eve", "--page-size", "5",
                            "--page-token", token, "--json"))  # fmt: skip
    assert [m["match_id"] for m in second["matches"]] == list(reversed(matches))[5:10]
    every = ok_json(bergen(env, "player", "history", "Eve", "--pool", "2", "--all", "--json"))
    assert [m["match_id"] for m in every["matches"]] == list(reversed(matches))
    assert every["next_page_token"] == ""
    oldest_first = list(reversed(every["matches"]))
    assert oldest_first[0]["before"]["rating"] == 1500
    for a, b in itertools.pairwise(oldest_first):
        assert a["after"] == b["before"]
    assert oldest_first[-1]["after"]["mu"] == served.mu
    assert {m["seat"] for m in every["matches"]} == {0, 1}

    board = ok_json(bergen(env, "leaderboard", "2", "--all", "--json"))
    names = [e["player"]["name"] for e in board["entries"]]
    assert {"Eve", "Fay"} <= set(names)
    assert [e["rank"] for e in board["entries"]] == list(range(1, len(names) + 1))
    ratings = [e["rating"]["rating"] for e in board["entries"]]
    assert ratings == sorted(ratings, reverse=True)
    mine = next(e for e in board["entries"] if e["player"]["name"] == "Eve")
    assert mine["rating"]["mu"] == served.mu
    text = bergen(env, "leaderboard", "2").stdout.splitlines()
    assert text[0] == "leaderboard of pool 2"
    assert text[1].split() == ["rank", "rating", "mu", "sigma", "matches", "player"]
    assert any(line.split()[-1] == "Eve" for line in text[2:])


def spawn_play(env: dict[str, str], *args: str) -> Any:
    command = bergen_command()
    child = pexpect.spawn(
        command[0],
        [*command[1:], "play", *args],
        env={**env, "TERM": "dumb", "COLUMNS": "120"},
        encoding="utf-8",
        timeout=60,
        dimensions=(40, 120),
    )
    return child


def test_bergen_play_sits_as_the_kept_player_in_a_rated_match(
    server: ServerProcess, tmp_path: Path
) -> None:
    env = environment(server, tmp_path)
    gus = ok_json(bergen(env, "player", "register", "Gus", "--json"))
    with Client(server.target) as client:
        match_id = client.stub.CreateMatch(
            pb.CreateMatchRequest(seats=2, preset=pb.PRESET_STANDARD, rated=True), timeout=20
        ).match_id
    # The only player kept is the one `bergen play` sits as; its bot is a bot player.
    child = spawn_play(env, "--match", match_id, "--bots", "1")
    child.expect(r"you are seat 1 \(player Gus\)")
    child.expect(r"seat 2: (bot-greedy-\d+) \(greedy bot\)")
    bot_name = child.match.group(1)
    child.expect(PROMPT)
    child.sendline("r")
    child.expect(r"resign\? your side forfeits the match \[y/N\]: ")
    child.sendline("y")
    child.expect(rf"match {match_id} over")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    with Client(server.target) as client:
        view = client.view(match_id)
        record = client.record(match_id)
    assert view.rated and view.phase == pb.PHASE_ENDED
    seat = view.seats[0]
    assert (seat.player_id, seat.name, seat.bot) == (gus["player_id"], "Gus", False)
    assert (view.seats[1].name, view.seats[1].bot) == (bot_name, True)
    assert record["rated"]["pool"] == "2"
    assert record["seats"][0]["player"] == gus["player_id"]
    history = ok_json(bergen(env, "player", "history", "--json"))
    assert [m["match_id"] for m in history["matches"]] == [match_id]
    assert history["matches"][0]["place"] == 2  # Gus resigned


def test_a_rated_match_needs_a_player_and_refuses_a_wrong_token(
    server: ServerProcess, tmp_path: Path
) -> None:
    env = environment(server, tmp_path)
    done = bergen(env, "play", "--create", "--rated", "--bots", "1")
    assert done.returncode == ExitStatus.USAGE
    assert done.stderr.rstrip().endswith("(PLAYER_REQUIRED)"), done.stderr
    assert "bergen player register NAME" in done.stderr
    done = bergen(env, "play", "--create", "--player", "Nobody", "--bots", "1")
    assert done.returncode == ExitStatus.USAGE
    assert done.stderr.rstrip().endswith("(PLAYER_NOT_KEPT)"), done.stderr

    hal = ok_json(bergen(env, "player", "register", "Hal", "--json"))
    path = Path(hal["token_file"])
    data = json.loads(path.read_text())
    data["player_token"] = data["player_token"][:-4] + (
        "AAAA" if not data["player_token"].endswith("AAAA") else "BBBB"
    )
    path.write_text(json.dumps(data))
    done = bergen(env, "play", "--create", "--rated", "--bots", "1")
    assert done.returncode == ExitStatus.REFUSED, done.stdout + done.stderr
    assert done.stderr.rstrip().endswith("(PLAYER_TOKEN_INVALID)"), done.stderr
    assert data["player_token"] not in done.stdout + done.stderr
    # The match it created was left seating, and is abandoned again.
    assert "abandoned match" in done.stdout + done.stderr
    with Client(server.target) as client:
        listing = client.stub.ListMatches(pb.ListMatchesRequest(page_size=1), timeout=20)
        newest = listing.matches[0]
        assert newest.rated and newest.phase == pb.PHASE_ENDED
        reply = client.stub.GetPlayer(pb.GetPlayerRequest(name="hal"), timeout=20)
    assert reply.player.player_id == hal["player_id"]


def test_a_rated_tournament_enters_the_players_kept_under_their_names(
    farm: ServerFarm, sqlite_url: str, tmp_path: Path
) -> None:
    server = farm.start(sqlite_url, organiser_token=ORGANISER_TOKEN)
    env = environment(server, tmp_path)
    organiser = {**env, "BERGEN_ORGANISER_TOKEN": ORGANISER_TOKEN}
    made = ok_json(bergen(organiser, "tournament", "create", "--rated", "--rounds", "1", "--json"))
    tid = made["tournament_id"]
    ivy = ok_json(bergen(env, "player", "register", "Ivy", "--json"))
    done = bergen(env, "tournament", "register", tid, "--name", "Kim")  # not a player: refused
    assert done.returncode == ExitStatus.REFUSED, done.stderr
    one_error_line(done, "tournament register", "PLAYER_REQUIRED")
    ok_json(bergen(env, "tournament", "register", tid, "--name", "ivy", "--json"))
    with Client(server.target) as client:
        view = client.stub.GetTournament(pb.GetTournamentRequest(tournament_id=tid)).tournament
    assert view.settings.rated
    assert [(list(e.players), list(e.player_ids)) for e in view.entrants] == [
        (["Ivy"], [ivy["player_id"]])
    ]
