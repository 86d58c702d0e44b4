"""Registered players and ratings through a real `bergen web` in front of a real `bergen serve`
(PostgreSQL): registering a player from a browser (its token shown once, then held sealed in
an HttpOnly cookie), signing in with a token (a wrong one answered as one of no player) and
out, a rated match between two browsers and one against the computer's own players rating
them, a rated tournament's entrants with their ratings, the leaderboard a page at a time,
registrations limited for each client, and refusals that change nothing. The player token is
in the one answer that registers it, and in no other answer, header or log line."""

from __future__ import annotations

import itertools
import json
import stat
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from e2e.client import Client
from e2e.servers import ServerFarm, ServerProcess
from e2e.test_players import rated_table, register, resign

from bergen.cli_client.connect import bearer
from bergen.domain.ratings import Rating, rate
from bergen.v1 import bergen_pb2 as pb

from .conftest import ORGANISER_TOKEN
from .gateway import Gateway, start_gateway
from .test_play_api import Player, to_play

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(300)]

WAIT_S = 60.0


@pytest.fixture(scope="module")
def state(module_farm: ServerFarm) -> Path:
    return module_farm.workdir / "ratings-web-state"


@pytest.fixture(scope="module")
def gateway(server: ServerProcess, module_farm: ServerFarm, state: Path) -> Iterator[Gateway]:
    key = module_farm.workdir / "ratings-seal.key"
    gw = start_gateway(
        server.target,
        module_farm.workdir,
        "--seal-key-file",
        str(key),
        "--client-registers",
        "1000",  # the limit has a test of its own
        state=state,
    )
    yield gw
    assert gw.stop() == 0, gw.log()


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Iterator[Client]:
    with Client(server.target) as c:
        yield c


def eventually(check: Callable[[], Any], what: str) -> Any:
    """What `check` gives once it is true. The ratings are folded from the commit-safe global
    order, which a transaction running anywhere in the database cluster may hold back for a
    moment: a match's end shows within moments, not always at once."""
    deadline = time.monotonic() + WAIT_S
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def unique(name: str) -> str:
    """A name no other test of the module's server has taken (names are for good)."""
    return f"{name} {uuid.uuid4().hex[:6]}"


def sign_up(gateway: Gateway, name: str) -> tuple[Player, dict[str, Any]]:
    player = Player(gateway)
    status, made, _ = player.post("/api/play/players", {"name": name})
    assert status == 201, made
    return player, made


def me(player: Player) -> dict[str, Any]:
    status, body, _ = player.request("GET", "/api/play/me")
    assert status == 200, body
    assert isinstance(body, dict)
    return body


def rating_in(body: dict[str, Any], pool: str = "RATING_POOL_TWO") -> dict[str, Any]:
    return next(r for r in body["ratings"] if r["pool"] == pool)


def cookie_lines(headers: dict[str, str], name: str) -> list[str]:
    return [
        line.lower()
        for line in headers.get("set-cookie", "").splitlines()
        if line.startswith(f"{name}=")
    ]


def test_register_sign_in_and_out(gateway: Gateway, client: Client) -> None:
    name = unique("Ada")
    ada = Player(gateway)
    status, made, headers = ada.post("/api/play/players", {"name": name})
    assert status == 201, made
    token = made["player_token"]
    assert (made["name"], made["bot"], token[:4]) == (name, False, "bgp_")
    (sealed,) = cookie_lines(headers, "bergen_player")
    assert "httponly" in sealed and "samesite=strict" in sealed and "path=/api/play" in sealed
    assert token.lower() not in sealed
    (mark,) = cookie_lines(headers, "bergen_player_in")
    assert "bergen_player_in=1" in mark and "path=/" in mark and "httponly" not in mark
    got = me(ada)
    assert got["signed_in"] and got["player"] == {
        "player_id": made["player_id"],
        "name": name,
        "bot": False,
    }
    assert [r["rating"] for r in got["ratings"]] == [1500] * 4
    assert all(r["provisional"] for r in got["ratings"])
    # The player's page data, read as anyone may.
    status, public, _ = gateway.get(f"/api/players/{made['player_id']}")
    assert (status, public["player"]["name"]) == (200, name)

    # The name again, in another case, or a name that breaks a rule: refused, nothing made.
    other = Player(gateway)
    status, refused, _ = other.post("/api/play/players", {"name": name.upper()})
    assert (status, refused["code"]) == (409, "NAME_TAKEN"), refused
    status, refused, _ = other.post("/api/play/players", {"name": "no!"})
    assert (status, refused["code"]) == (400, "PLAYER_NAME_CHARACTERS"), refused
    for body in ({}, {"name": 7}, {"name": " "}):
        assert other.post("/api/play/players", body)[0] == 400
    assert not other.cookies
    assert me(other) == {"signed_in": False}

    # Signing in on another browser with the token (pasted with a newline).
    phone = Player(gateway)
    status, signed, headers = phone.post("/api/play/me", {"player_token": f" {token}\n"})
    assert status == 200, signed
    assert signed["player"]["player_id"] == made["player_id"]
    assert cookie_lines(headers, "bergen_player")
    assert me(phone)["player"]["name"] == name

    # A wrong secret, a token of no player, and text that is no token: one answer, no cookie.
    wrong = token[:-6] + ("AAAAAA" if not token.endswith("AAAAAA") else "BBBBBB")
    nobody = "bgp_" + "A" * 22 + token[26:]
    answers = set()
    for bad in (wrong, nobody, "nonsense", "bgp_" + "x" * 300):
        stranger = Player(gateway)
        status, refused, _ = stranger.post("/api/play/me", {"player_token": bad})
        answers.add((status, json.dumps(refused, sort_keys=True)))
        assert not stranger.cookies
    assert len(answers) == 1, answers
    ((status, body),) = answers
    assert (status, json.loads(body)["code"]) == (403, "PLAYER_TOKEN_INVALID")
    assert Player(gateway).post("/api/play/me", {"player_token": ""})[0] == 400

    # Another site's page may neither register, sign in nor sign out.
    cross = {"Sec-Fetch-Site": "cross-site"}
    taken = unique("Cross")
    for who, path, body in (
        (Player(gateway), "/api/play/players", {"name": taken}),
        (Player(gateway), "/api/play/me", {"player_token": token}),
        (phone, "/api/play/me/sign-out", {}),
    ):
        status, refused, headers = who.post(path, body, headers=cross)
        assert (status, refused["code"]) == (403, "CROSS_SITE"), path
        assert "set-cookie" not in headers
    with pytest.raises(grpc.RpcError) as info:
        client.stub.GetPlayer(pb.GetPlayerRequest(name=taken), timeout=20)
    assert info.value.code() == grpc.StatusCode.NOT_FOUND
    assert me(phone)["signed_in"]

    # Signing out forgets the player on that browser alone.
    status, out, headers = phone.post("/api/play/me/sign-out", {})
    assert (status, out) == (200, {"signed_in": False})
    assert any("max-age=0" in line for line in cookie_lines(headers, "bergen_player"))
    assert me(phone) == {"signed_in": False}
    assert me(ada)["signed_in"]

    # The token: in the answer that registered it, and nowhere else.
    seen = b"".join(ada.seen[1:] + other.seen + phone.seen)
    assert token.encode() in b"".join(ada.seen[:1])
    assert token.encode() not in seen
    assert token not in gateway.log()


def test_a_rated_match_between_two_browsers_rates_both(gateway: Gateway) -> None:
    ada, made_ada = sign_up(gateway, unique("Ann"))
    bo, made_bo = sign_up(gateway, unique("Bo"))
    guest = Player(gateway)
    body = {"name": "Guest", "seats": 2, "rated": True}
    status, refused, _ = guest.post("/api/play/matches", body)
    assert (status, refused["code"]) == (403, "NO_PLAYER"), refused
    assert guest.post("/api/play/matches", {**body, "rated": "yes"})[0] == 400
    status, made, _ = ada.post("/api/play/matches", {"seats": 2, "rated": True})
    assert status == 201, made
    assert made["rated"] is True
    match = made["match_id"]
    # Without a player a browser takes no seat of it; the same player takes one seat only.
    status, refused, _ = guest.post(f"/api/play/matches/{match}/join", {"name": "Guest"})
    assert (status, refused["code"]) == (409, "PLAYER_REQUIRED"), refused
    twin = Player(gateway)
    assert twin.post("/api/play/me", {"player_token": made_ada["player_token"]})[0] == 200
    status, refused, _ = twin.post(f"/api/play/matches/{match}/join", {})
    assert (status, refused["code"]) == (409, "PLAYER_ALREADY_SEATED"), refused
    status, joined, _ = bo.post(f"/api/play/matches/{match}/join", {"name": "ignored"})
    assert (status, joined["seat"]) == (201, 1), joined
    view = ada.view(match)
    assert view["rated"] is True
    assert [(s["player_id"], s["name"], s["bot"]) for s in view["seats"]] == [
        (made_ada["player_id"], made_ada["name"], False),
        (made_bo["player_id"], made_bo["name"], False),
    ]
    # A few plays, then Bo resigns: a forfeit counts.
    for _ in range(3):
        player, v = to_play(match, [ada, bo])
        choice = v["playable"][0]
        status, _, _ = player.post(
            f"/api/play/matches/{match}/play",
            {"tile": choice["tile"], "end": choice["ends"][0], "version": int(v["version"])},
        )
        assert status == 200
    status, ended, _ = bo.post(f"/api/play/matches/{match}/resign", {})
    assert (status, ended["phase"]) == (200, "PHASE_ENDED")

    rated = lambda p: rating_in(me(p))["rated_matches"] == 1  # noqa: E731
    eventually(lambda: rated(ada) and rated(bo), "the match to be rated")
    a, b = me(ada), me(bo)
    assert rating_in(a)["rating"] > 1500 > rating_in(b)["rating"]
    assert rating_in(a, "RATING_POOL_THREE")["rated_matches"] == 0
    status, history, _ = gateway.get(f"/api/players/{made_ada['player_id']}/matches?pool=2")
    assert status == 200, history
    (m,) = history["matches"]
    assert (m["match_id"], m["pool"], m["seat"], m["place"]) == (match, "RATING_POOL_TWO", 0, 1)
    assert (m["before"]["rating"], m["after"]["rating"]) == (1500, rating_in(a)["rating"])
    assert m["before"]["provisional"] and m["after"]["provisional"]
    assert gateway.get(f"/api/players/{made_ada['player_id']}/matches?pool=3")[1]["matches"] == []
    # Its rematch, accepted by both players' browsers, seats them again as an ordinary match:
    # the game server keeps a rematch's seats by the seat tokens of the match before.
    path = f"/api/play/matches/{match}/rematch"
    assert ada.post(path)[1]["state"] == "proposed"
    status, started, _ = bo.post(path)
    assert (status, started["state"]) == (200, "started"), started
    again = bo.view(started["match_id"])
    assert again["rated"] is False
    assert [s["name"] for s in again["seats"]] == [s["name"] for s in bo.view(match)["seats"]]
    # Both provisional: on no leaderboard yet.
    status, board, _ = gateway.get("/api/leaderboard?pool=2&page_size=100")
    assert status == 200
    ids = {e["player"]["player_id"] for e in board["entries"]}
    assert not ids & {made_ada["player_id"], made_bo["player_id"]}


def test_a_rated_match_against_the_computer_rates_its_own_player(
    gateway: Gateway, state: Path
) -> None:
    name = unique("Cy")
    ada, made = sign_up(gateway, name)
    player_id = made["player_id"]
    status, created, _ = ada.post(
        "/api/play/matches", {"seats": 2, "rated": True, "bots": 1, "bot_policy": "random"}
    )
    assert status == 201, created
    assert created["computer_seats"] == [1], created
    match = created["match_id"]
    deadline = time.monotonic() + WAIT_S
    view = ada.view(match)
    while view["phase"] != "PHASE_PLAYING":
        assert time.monotonic() < deadline, view
        time.sleep(0.05)
        view = ada.view(match)
    bot = view["seats"][1]
    assert view["seats"][0]["player_id"] == player_id
    assert bot["bot"] and bot["player_id"] and bot["name"].startswith("random bot 1"), bot
    assert ada.post(f"/api/play/matches/{match}/resign", {})[0] == 200
    eventually(lambda: rating_in(me(ada))["rated_matches"] == 1, "the match to be rated")
    assert rating_in(me(ada))["rating"] < 1500
    status, player, _ = gateway.get(f"/api/players/{bot['player_id']}")
    assert status == 200 and player["player"]["bot"] is True
    assert rating_in(player)["rated_matches"] >= 1
    # The computer's players, with their tokens, in a file only the gateway's user reads.
    (players_file,) = state.glob("computer-players-*.json")
    assert stat.S_IMODE(players_file.stat().st_mode) == 0o600
    kept = json.loads(players_file.read_text())["players"]
    assert [(p["policy"], p["number"], p["player_id"]) for p in kept] == [
        ("random", 1, bot["player_id"])
    ]
    assert kept[0]["token"] not in gateway.log()
    # A second rated match seats the same computer player again.
    status, again, _ = ada.post(
        "/api/play/matches", {"seats": 2, "rated": True, "bots": 1, "bot_policy": "random"}
    )
    assert status == 201, again
    deadline = time.monotonic() + WAIT_S
    while not ada.view(again["match_id"])["seats"][1]["taken"]:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert ada.view(again["match_id"])["seats"][1]["player_id"] == bot["player_id"]
    assert ada.post(f"/api/play/matches/{again['match_id']}/resign", {})[0] == 200
    # Its rematch is an ordinary match, the computer in its seat again.
    status, started, _ = ada.post(f"/api/play/matches/{again['match_id']}/rematch")
    assert (status, started["state"]) == (200, "started"), started
    rematch = ada.view(started["match_id"])
    assert rematch["rated"] is False and rematch["seats"][1]["taken"]
    assert ada.post(f"/api/play/matches/{started['match_id']}/resign", {})[0] == 200


def settled_players(
    client: Client, prefix: str, count: int = 5, bot: int | None = None
) -> tuple[list[pb.RegisterPlayerResponse], list[Rating]]:
    """`count` new players (the `bot`-th a program) who have played rated two-seat matches,
    each won by the lower number, until none is provisional: their ratings far apart, first
    to last. Returns them and their ratings as RATINGS.md makes them."""
    players = [register(client, unique(f"{prefix}{i}"), bot=i == bot) for i in range(count)]
    pairs = itertools.cycle(itertools.combinations(range(count), 2))
    expected = [Rating() for _ in players]
    while any(r.provisional for r in expected):
        a, b = next(pairs)
        table = rated_table(client, [players[a], players[b]])
        resign(client, table, 1)
        (expected[a],), (expected[b],) = rate([[expected[a]], [expected[b]]], [1, 2])

    def settled() -> bool:
        return not any(
            rating_in_pb(
                client.stub.GetPlayer(pb.GetPlayerRequest(player_id=p.player_id), timeout=20)
            ).provisional
            for p in players
        )

    eventually(settled, "the players to be settled")
    return players, expected


def test_the_leaderboard_a_page_at_a_time(gateway: Gateway, client: Client) -> None:
    players, expected = settled_players(client, "Lb")
    ours = {p.player_id for p in players}
    seen: list[dict[str, Any]] = []
    token = ""
    pages = 0
    while True:
        path = "/api/leaderboard?pool=2&page_size=2" + (f"&page_token={token}" if token else "")
        status, page, _ = gateway.get(path)
        assert status == 200, page
        assert len(page["entries"]) <= 2 and page["pool"] == "2"
        seen += page["entries"]
        pages += 1
        token = page["next_page_token"]
        if not token:
            break
    assert pages >= 3
    assert [e["rank"] for e in seen] == list(range(1, len(seen) + 1))
    listed = [e["player"]["player_id"] for e in seen if e["player"]["player_id"] in ours]
    assert listed == [p.player_id for p in players]
    assert all(not e["rating"]["provisional"] for e in seen)
    shown = {e["player"]["player_id"]: e["rating"]["rating"] for e in seen}
    assert [shown[p.player_id] for p in players] == [r.display for r in expected]
    ratings = [e["rating"]["rating"] for e in seen]
    assert ratings == sorted(ratings, reverse=True)
    # Malformed asks: 400, and the other pools' leaderboards are their own.
    for bad in ("pool=5", "pool=2&page_token=%21%21", "pool=2&page_size=x"):
        status, refused, _ = gateway.get(f"/api/leaderboard?{bad}")
        assert status == 400, (bad, refused)
    status, threes, _ = gateway.get("/api/leaderboard?pool=3")
    assert status == 200 and not ours & {e["player"]["player_id"] for e in threes["entries"]}
    assert gateway.get("/api/players/not-a-player")[0] == 400
    assert gateway.get(f"/api/players/{uuid.uuid4()}")[0] == 404


def rating_in_pb(reply: pb.GetPlayerResponse) -> pb.PoolRating:
    return next(r for r in reply.ratings if r.pool == pb.RATING_POOL_TWO)


def test_a_rated_tournament_enters_signed_in_players_with_their_ratings(
    gateway: Gateway, client: Client
) -> None:
    created = client.stub.CreateTournament(
        pb.CreateTournamentRequest(
            name="Rated cup",
            settings=pb.TournamentSettings(
                format=pb.TOURNAMENT_FORMAT_SWISS,
                seats=2,
                preset=pb.PRESET_STANDARD,
                rounds=1,
                rated=True,
            ),
        ),
        metadata=bearer(ORGANISER_TOKEN),
        timeout=20,
    )
    tid = created.tournament_id
    path = f"/api/play/tournaments/{tid}/register"
    guest = Player(gateway)
    status, refused, _ = guest.post(path, {"name": "Guest"})
    assert (status, refused["code"]) == (409, "PLAYER_REQUIRED"), refused
    ann, made_ann = sign_up(gateway, unique("Tann"))
    bo, made_bo = sign_up(gateway, unique("Tbo"))
    for player in (ann, bo):
        status, entered, _ = player.post(path, {})
        assert status == 201, entered
    status, ratings, _ = gateway.get(f"/api/tournaments/{tid}/ratings")
    assert status == 200, ratings
    assert (ratings["pool"], ratings["rated"]) == ("2", True)
    rows = {
        e["entrant"]: [(p["player_id"], p["rating"]["rating"]) for p in e["players"]]
        for e in ratings["entrants"]
    }
    assert rows == {
        1: [(made_ann["player_id"], 1500)],
        2: [(made_bo["player_id"], 1500)],
    }
    assert gateway.get("/api/tournaments/no!such/ratings")[0] in (400, 404)


def test_registrations_are_limited_for_each_client(
    server: ServerProcess, module_farm: ServerFarm
) -> None:
    gw = start_gateway(server.target, module_farm.workdir, "--client-registers", "2")
    try:
        browser = Player(gw)
        made = [browser.post("/api/play/players", {"name": unique("Rl")}) for _ in range(2)]
        assert [status for status, _, _ in made] == [201, 201]
        status, refused, headers = browser.post("/api/play/players", {"name": unique("Rl")})
        assert (status, refused["code"]) == (429, "CLIENT_LIMIT"), refused
        assert int(headers["retry-after"]) >= 1
        # Signing in counts alike, and is refused before the token goes anywhere.
        status, _, _ = Player(gw).post("/api/play/me", {"player_token": "bgp_x"})
        assert status == 429
    finally:
        assert gw.stop() == 0, gw.log()
