"""The entrants' API against a real `bergen serve` (PostgreSQL) and a real `bergen web`:
registering from a browser (again gives back the same entrant), "my tournament", the seat of
the entrant's table handed to the browser when a round seats it, withdrawing, the link that
carries the entrant to another device (through another gateway process, once), and the
refusals (another site, no entrant, a malformed id or body, a cookie carried elsewhere) that
change nothing. No answer holds the entrant's token."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import grpc
import pytest
from e2e.client import rule_options
from e2e.servers import ServerFarm, ServerProcess

from bergen.cli_client.connect import bearer
from bergen.cli_client.web.players import Sealer
from bergen.domain.tournament_fairness import commitment
from bergen.v1 import bergen_pb2 as pb
from bergen.v1 import bergen_pb2_grpc

from .conftest import ORGANISER_TOKEN
from .gateway import Gateway, start_gateway
from .test_play_api import Player

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(300)]

ORG = bearer(ORGANISER_TOKEN)


@pytest.fixture(scope="module")
def key_file(module_farm: ServerFarm) -> Path:
    return module_farm.workdir / "entrants-seal.key"


@pytest.fixture(scope="module")
def entrants_gateway(
    server: ServerProcess, module_farm: ServerFarm, key_file: Path
) -> Iterator[Gateway]:
    gw = start_gateway(server.target, module_farm.workdir, "--seal-key-file", str(key_file))
    yield gw
    assert gw.stop() == 0, gw.log()


@pytest.fixture(scope="module")
def stub(server: ServerProcess) -> Iterator[Any]:
    channel = grpc.insecure_channel(server.target)
    yield bergen_pb2_grpc.BergenServiceStub(channel)
    channel.close()


def create(stub: Any, rounds: int = 1) -> str:
    created = stub.CreateTournament(
        pb.CreateTournamentRequest(
            name="API cup",
            settings=pb.TournamentSettings(
                format=pb.TOURNAMENT_FORMAT_SWISS,
                seats=2,
                preset=pb.PRESET_STANDARD,
                options=rule_options(target=3),
                rounds=rounds,
            ),
        ),
        metadata=ORG,
    )
    return str(created.tournament_id)


def entrants(stub: Any, tid: str) -> list[Any]:
    return list(stub.GetTournament(pb.GetTournamentRequest(tournament_id=tid)).tournament.entrants)


def tokens(player: Player, key_file: Path) -> list[str]:
    return player.tokens(Sealer.from_file(key_file))


def test_register_once_per_browser_see_my_tournament_and_withdraw(
    entrants_gateway: Gateway, stub: Any, key_file: Path
) -> None:
    tid = create(stub)
    ann, bo = Player(entrants_gateway), Player(entrants_gateway)
    status, body, _ = ann.post(f"/api/play/tournaments/{tid}/register", {"name": "Ann"})
    assert (status, body) == (201, {"tournament_id": tid, "entrant": 1})
    (cookie,) = [
        raw.decode().lower()
        for raw in ann.seen
        if raw.lower().startswith(f"set-cookie: bergen_entrant_{tid}=".encode())
    ]
    assert f"bergen_entrant_{tid}=" in cookie and "httponly" in cookie
    assert "samesite=strict" in cookie and f"path=/api/play/tournaments/{tid}" in cookie
    status, body, _ = ann.post(f"/api/play/tournaments/{tid}/register", {"name": "Ann again"})
    assert (status, body["entrant"]) == (200, 1)
    assert bo.post(f"/api/play/tournaments/{tid}/register", {"name": "Bo"})[:2] == (
        201,
        {"tournament_id": tid, "entrant": 2},
    )
    assert [list(e.players) for e in entrants(stub, tid)] == [["Ann"], ["Bo"]]
    status, mine, _ = ann.request("GET", f"/api/play/tournaments/{tid}")
    assert status == 200, mine
    assert mine["phase"] == "registration" and mine["entrant"] == 1
    assert mine["players"] == ["Ann"] and mine["table"] is None and not mine["withdrawn"]
    status, gone, _ = bo.post(f"/api/play/tournaments/{tid}/withdraw")
    assert (status, gone["entrant"], gone["after_round"]) == (200, 2, 0), gone
    status, mine, _ = bo.request("GET", f"/api/play/tournaments/{tid}")
    assert status == 200 and mine["withdrawn"], mine
    assert entrants(stub, tid)[1].withdrawn_by == pb.ACTOR_ENTRANT
    # The tokens the cookies hold appear in no answer.
    held = tokens(ann, key_file) + tokens(bo, key_file)
    assert len(held) == 2
    for player in (ann, bo):
        assert not any(t.encode() in raw for t in held for raw in player.seen)


def test_a_round_hands_the_browser_its_tables_seat(
    entrants_gateway: Gateway, stub: Any, key_file: Path
) -> None:
    tid = create(stub)
    ann, bo = Player(entrants_gateway), Player(entrants_gateway)
    for p, name in ((ann, "Ann"), (bo, "Bo")):
        assert p.post(f"/api/play/tournaments/{tid}/register", {"name": name})[0] == 201
    stub.StartTournament(pb.StartTournamentRequest(tournament_id=tid), metadata=ORG)
    # Each entrant's page asks for "my tournament" when its stream shows the reveal phase:
    # the gateway reveals the seed sealed in its cookie before it answers.
    status, mine, _ = bo.request("GET", f"/api/play/tournaments/{tid}")
    assert status == 200 and mine["table"] is None, mine
    assert mine["phase"] == "reveal" and mine["reveal"]["revealed"], mine
    deadline = time.monotonic() + 30
    while True:
        status, mine, _ = ann.request("GET", f"/api/play/tournaments/{tid}")
        assert status == 200, mine
        if mine["table"] is not None:
            break
        assert time.monotonic() < deadline, mine
        time.sleep(0.1)
    table = mine["table"]
    assert table["playing"] and table["round"] == 1 and table["table"] == 1
    assert sorted(table["sides"]) == [1, 2]
    match = table["match_id"]
    assert f"bergen_seat_{match}" in ann.cookies
    view = ann.view(match)
    assert view.get("viewer_seat", 0) == table["seat"]
    assert len(view["my_tiles"]) > 0
    # The seat's cookie holds the entrant's token, which no answer showed.
    sealer = Sealer.from_file(key_file)
    seat = sealer.open(ann.cookies[f"bergen_seat_{match}"][0])
    assert seat is not None and (seat.match_id, seat.seat) == (match, table["seat"])
    assert not any(seat.token.encode() in raw for raw in ann.seen)
    # Bo, who did not ask yet, holds no seat of the match.
    status, body, _ = bo.request("GET", f"/api/play/matches/{match}")
    assert (status, body["code"]) == (403, "NO_SEAT")


def test_the_gateway_reveals_the_sealed_seed_and_a_browser_that_lost_it_is_withdrawn(
    entrants_gateway: Gateway, stub: Any, key_file: Path
) -> None:
    created = stub.CreateTournament(
        pb.CreateTournamentRequest(
            name="reveal cup",
            settings=pb.TournamentSettings(
                format=pb.TOURNAMENT_FORMAT_SWISS,
                seats=2,
                preset=pb.PRESET_STANDARD,
                options=rule_options(target=3),
                rounds=1,
                reveal_window=8,
            ),
        ),
        metadata=ORG,
    )
    tid = created.tournament_id
    path = f"/api/play/tournaments/{tid}"
    ann, bo, cy = (Player(entrants_gateway) for _ in range(3))
    for p, name in ((ann, "Ann"), (bo, "Bo"), (cy, "Cy")):
        assert p.post(f"{path}/register", {"name": name})[0] == 201
    # Only the seed's commitment went to the server; the seed is sealed in the cookie.
    sealer = Sealer.from_file(key_file)
    held = sealer.open(ann.cookies[f"bergen_entrant_{tid}"][0])
    assert held is not None and held.client_seed is not None
    listed = entrants(stub, tid)
    assert listed[0].client_seed_commitment == commitment(held.client_seed.encode())
    assert not listed[0].revealed and listed[0].client_seed == ""
    assert not any(held.client_seed.encode() in raw for raw in ann.seen)
    cy.cookies.clear()  # Cy's browser loses its cookies: nobody can reveal Cy's seed
    stub.StartTournament(pb.StartTournamentRequest(tournament_id=tid), metadata=ORG)
    for p in (ann, bo):
        status, mine, _ = p.request("GET", path)
        assert status == 200 and mine["phase"] == "reveal", mine
        assert mine["reveal"]["revealed"] and mine["reveal"]["entrants"] == 3, mine
        assert 0 < mine["reveal"]["closes_in_s"] <= 8
    assert [e.revealed for e in entrants(stub, tid)] == [True, True, False]
    assert entrants(stub, tid)[0].client_seed == held.client_seed
    deadline = time.monotonic() + 30
    while (mine := ann.request("GET", path)[1])["table"] is None:
        assert time.monotonic() < deadline, mine
        time.sleep(0.1)
    assert sorted(mine["table"]["sides"]) == [1, 2]
    gone = entrants(stub, tid)[2]
    assert (gone.withdrawn_after_round, gone.withdrawn_by) == (0, pb.ACTOR_SERVER)


def test_refusals_say_why_and_change_nothing(entrants_gateway: Gateway, stub: Any) -> None:
    tid, other = create(stub), create(stub)
    ann = Player(entrants_gateway)
    path = f"/api/play/tournaments/{tid}"
    status, body, _ = ann.post(
        f"{path}/register", {"name": "Ann"}, headers={"Sec-Fetch-Site": "cross-site"}
    )
    assert (status, body["code"]) == (403, "CROSS_SITE")
    status, body, _ = ann.post(
        f"{path}/register",
        {"name": "Ann"},
        headers={"Sec-Fetch-Site": "", "Origin": "http://evil.example"},
    )
    assert (status, body["code"]) == (403, "CROSS_SITE")
    status, body, _ = ann.post(f"{path}/register", {"name": "  "})
    assert (status, body["code"]) == (400, "BAD_REQUEST")
    status, body, _ = ann.request("POST", f"{path}/register", None, {"Content-Type": "text/plain"})
    assert (status, body["code"]) == (400, "BAD_REQUEST")
    status, body, _ = ann.post("/api/play/tournaments/not%20an%20id/register", {"name": "Ann"})
    assert status in (400, 404), body
    assert entrants(stub, tid) == []
    for method, what in (("GET", ""), ("POST", "/withdraw")):
        status, body, _ = ann.request(method, f"{path}{what}", {} if method == "POST" else None)
        assert (status, body["code"]) == (403, "NO_ENTRANT"), (method, body)
    assert ann.post(f"{path}/register", {"name": "Ann"})[0] == 201
    sealed = ann.cookies[f"bergen_entrant_{tid}"][0]
    # The entrant's cookie opens in no other tournament, and never as a match's seat.
    ann.cookies[f"bergen_entrant_{other}"] = (sealed, f"/api/play/tournaments/{other}")
    status, body, _ = ann.request("GET", f"/api/play/tournaments/{other}")
    assert (status, body["code"]) == (403, "NO_ENTRANT")
    ann.cookies[f"bergen_seat_{tid}"] = (sealed, f"/api/play/matches/{tid}")
    status, body, _ = ann.request("GET", f"/api/play/matches/{tid}")
    assert (status, body["code"]) == (403, "NO_SEAT")
    # Registration closed: the game server's refusal, with its reason.
    Player(entrants_gateway).post(f"{path}/register", {"name": "Bo"})
    stub.StartTournament(pb.StartTournamentRequest(tournament_id=tid), metadata=ORG)
    status, body, _ = Player(entrants_gateway).post(f"{path}/register", {"name": "Cy"})
    assert status in (409, 412, 400), body
    assert [list(e.players) for e in entrants(stub, tid)] == [["Ann"], ["Bo"]]


def create_pairs(stub: Any, rounds: int = 1) -> str:
    created = stub.CreateTournament(
        pb.CreateTournamentRequest(
            name="Pairs cup",
            settings=pb.TournamentSettings(
                format=pb.TOURNAMENT_FORMAT_SWISS,
                seats=4,
                partnerships=True,
                preset=pb.PRESET_STANDARD,
                options=rule_options(target=3),
                rounds=rounds,
            ),
        ),
        metadata=ORG,
    )
    return str(created.tournament_id)


def as_player(browser: Player, tid: str, player: int | None) -> dict[str, Any]:
    """ "My tournament" as one of the entrant's players (the first held, for None)."""
    query = "" if player is None else f"?player={player}"
    status, mine, _ = browser.request("GET", f"/api/play/tournaments/{tid}{query}")
    assert status == 200, mine
    assert isinstance(mine, dict)
    return mine


def test_a_pair_registers_from_one_browser_and_each_partner_plays_their_own_seat(
    entrants_gateway: Gateway, stub: Any, key_file: Path
) -> None:
    """Two pairs, each registered from one browser, play a partnership tournament to its
    final standings through the gateway: each browser switches between its two players
    (`?player=`), and each answer seats it as that player, in that player's own seat."""
    tid = create_pairs(stub)
    ann, cy = Player(entrants_gateway), Player(entrants_gateway)
    path = f"/api/play/tournaments/{tid}"
    status, body, _ = ann.post(f"{path}/register", {"name": "Ann", "partner": "Bo"})
    assert (status, body) == (201, {"tournament_id": tid, "entrant": 1}), body
    for name in (f"bergen_entrant_{tid}", f"bergen_partner_{tid}"):
        (cookie,) = [
            raw.decode().lower()
            for raw in ann.seen
            if raw.lower().startswith(f"set-cookie: {name}=".encode())
        ]
        assert "httponly" in cookie and "samesite=strict" in cookie, cookie
        assert f"path=/api/play/tournaments/{tid}" in cookie
    # Again from the same browser: the same entrant, never a second.
    status, body, _ = ann.post(f"{path}/register", {"name": "Ann", "partner": "Bo"})
    assert (status, body["entrant"]) == (200, 1)
    assert cy.post(f"{path}/register", {"name": "Cy", "partner": "Di"})[:2] == (
        201,
        {"tournament_id": tid, "entrant": 2},
    )
    assert [list(e.players) for e in entrants(stub, tid)] == [["Ann", "Bo"], ["Cy", "Di"]]
    mine = as_player(ann, tid, None)
    assert (mine["player"], mine["held"], mine["partnerships"]) == (0, [0, 1], True)
    assert mine["players"] == ["Ann", "Bo"] and mine["table"] is None
    assert as_player(ann, tid, 1)["player"] == 1
    stub.StartTournament(pb.StartTournamentRequest(tournament_id=tid), metadata=ORG)
    # Cy's page, told of the reveal phase, asks: the gateway reveals the pair's seed.
    assert as_player(cy, tid, 1)["reveal"]["revealed"]
    deadline = time.monotonic() + 30
    while as_player(ann, tid, 0)["table"] is None:
        assert time.monotonic() < deadline, "round 1 was not paired"
        time.sleep(0.1)
    # Each player has a seat of their own, partners on one side (seats 0+2 or 1+3).
    who: dict[int, tuple[Player, int]] = {}
    for browser in (ann, cy):
        for player in (0, 1):
            table = as_player(browser, tid, player)["table"]
            assert table["playing"] and table["round"] == 1
            who[table["seat"]] = (browser, player)
    match = table["match_id"]
    assert sorted(who) == [0, 1, 2, 3]
    assert {who[0][0], who[2][0]} in ({ann}, {cy}) and who[0][0] is not who[1][0]
    plays = 0
    while True:
        status, public, _ = entrants_gateway.get(f"/api/matches/{match}")
        assert status == 200, public
        if public["phase"] == "PHASE_ENDED":
            break
        if "turn" not in public:  # a forced action under way: nobody to choose yet
            time.sleep(0.05)
            continue
        browser, player = who[int(public["turn"])]
        # Asked as the player whose turn it is, the browser is seated in that player's seat.
        as_player(browser, tid, player)
        view = browser.view(match)
        if view["phase"] == "PHASE_ENDED":
            break
        assert view["viewer_seat"] == view["turn"], (player, view["viewer_seat"])
        choice = view["playable"][0]
        status, after, _ = browser.post(
            f"/api/play/matches/{match}/play",
            {"tile": choice["tile"], "end": choice["ends"][0], "version": int(view["version"])},
        )
        assert status == 200, after
        plays += 1
        assert plays < 500
    deadline = time.monotonic() + 30
    while (final := as_player(cy, tid, 1))["phase"] != "ended":
        assert time.monotonic() < deadline, final
        time.sleep(0.1)
    assert final["rank"] in (1, 2) and [r["entrant"] for r in final["standings"]] in (
        [1, 2],
        [2, 1],
    )
    assert final["player"] == 1 and final["table"] is None  # nothing left to play
    # No answer held any of the four tokens the cookies hold.
    held = tokens(ann, key_file) + tokens(cy, key_file)
    assert len(set(held)) == 4
    for browser in (ann, cy):
        assert not any(t.encode() in raw for t in held for raw in browser.seen)


def test_each_partners_cookie_stands_alone_and_pairs_are_refused_clearly(
    entrants_gateway: Gateway, stub: Any
) -> None:
    pairs, singles = create_pairs(stub), create(stub)
    ann = Player(entrants_gateway)
    path = f"/api/play/tournaments/{pairs}"
    cases: list[tuple[str, dict[str, Any], str, str]] = [
        (path, {"name": "Ann"}, "WRONG_PLAYER_COUNT", "give partner"),
        (path, {"name": "Ann", "partner": "  "}, "BAD_REQUEST", "partner is required"),
        (path, {"name": "Ann", "partner": "ann"}, "BAD_REQUEST", "not yours again"),
        (path, {"name": "Ann", "partner": 7}, "BAD_REQUEST", "partner"),
        (
            f"/api/play/tournaments/{singles}",
            {"name": "Ann", "partner": "Bo"},
            "WRONG_PLAYER_COUNT",
            "give no partner",
        ),
    ]
    for where, body, code, words in cases:
        status, answer, _ = ann.post(f"{where}/register", body)
        assert (status, answer["code"]) == (400, code), (body, answer)
        assert words in answer["error"], answer
    assert entrants(stub, pairs) == [] and entrants(stub, singles) == []
    assert not ann.cookies
    assert ann.post(f"{path}/register", {"name": "Ann", "partner": "Bo"})[0] == 201
    for query, status_code, code in (
        ("?player=2", 400, "BAD_REQUEST"),
        ("?player=x", 400, "BAD_REQUEST"),
    ):
        status, answer, _ = ann.request("GET", f"{path}{query}")
        assert (status, answer["code"]) == (status_code, code), (query, answer)
    # A device holding the partner's cookie alone (as a hand-off to the partner's own device
    # would leave it) is that player, and only that one.
    bo = Player(entrants_gateway)
    bo.cookies[f"bergen_partner_{pairs}"] = ann.cookies[f"bergen_partner_{pairs}"]
    mine = as_player(bo, pairs, None)
    assert (mine["entrant"], mine["player"], mine["held"]) == (1, 1, [1])
    status, answer, _ = bo.request("GET", f"{path}?player=0")
    assert (status, answer["code"]) == (403, "NO_ENTRANT"), answer
    status, answer, _ = bo.post(f"{path}/register", {"name": "Bo", "partner": "Ann"})
    assert (status, answer["entrant"]) == (200, 1)
    # One player's cookie never opens as the other's.
    eve = Player(entrants_gateway)
    eve.cookies[f"bergen_entrant_{pairs}"] = (
        ann.cookies[f"bergen_partner_{pairs}"][0],
        f"/api/play/tournaments/{pairs}",
    )
    status, answer, _ = eve.request("GET", path)
    assert (status, answer["code"]) == (403, "NO_ENTRANT"), answer
    assert [list(e.players) for e in entrants(stub, pairs)] == [["Ann", "Bo"]]


def test_a_link_carries_the_entrant_to_another_device_through_another_gateway_once(
    entrants_gateway: Gateway,
    server: ServerProcess,
    module_farm: ServerFarm,
    stub: Any,
    key_file: Path,
) -> None:
    tid = create(stub)
    path = f"/api/play/tournaments/{tid}"
    ann = Player(entrants_gateway)
    assert ann.post(f"{path}/register", {"name": "Ann"})[0] == 201
    status, body, _ = Player(entrants_gateway).post(f"{path}/link")
    assert (status, body["code"]) == (403, "NO_ENTRANT")
    status, made, _ = ann.post(f"{path}/link")
    assert status == 201, made
    assert 590 <= made["expires_in_s"] <= 600
    url = urlsplit(made["url"])
    assert url.path == "/claim"
    other = start_gateway(server.target, module_farm.workdir, "--seal-key-file", str(key_file))
    try:
        phone = Player(other)
        status, _, headers = phone.request("GET", f"/claim?{url.query}")
        assert status == 303, headers
        assert headers["location"] == f"/tournament?id={tid}"
        cookies = headers["set-cookie"].lower()
        assert f"bergen_entrant_{tid}=" in cookies and "httponly" in cookies
        assert f"path={path}" in cookies
        assert phone.cookies[f"bergen_entered_{tid}"][0] == "1"
        status, mine, _ = phone.request("GET", path)
        assert status == 200, mine
        assert (mine["entrant"], mine["players"]) == (1, ["Ann"])
        for where in (entrants_gateway, other):
            thief = Player(where)
            assert thief.request("GET", f"/claim?{url.query}")[0] == 410
            assert not thief.cookies
        # Both devices hold the entrant: either withdraws it.
        status, gone, _ = phone.post(f"{path}/withdraw")
        assert (status, gone["entrant"]) == (200, 1), gone
        assert ann.request("GET", path)[1]["withdrawn"]
        # The token is in no answer, on either device.
        held = tokens(ann, key_file) + tokens(phone, key_file)
        assert len(held) == 2 and len(set(held)) == 1
        for player in (ann, phone):
            assert not any(held[0].encode() in raw for raw in player.seen)
    finally:
        assert other.stop() == 0, other.log()
    stub.CancelTournament(pb.CancelTournamentRequest(tournament_id=tid), metadata=ORG)
    status, body, _ = ann.post(f"{path}/link")
    assert (status, body["code"]) == (409, "TOURNAMENT_CANCELLED"), body
