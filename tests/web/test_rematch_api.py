"""Rematches through the players' API, against a real `bergen serve` (PostgreSQL) and two real
`bergen web` processes sharing one seal key, as behind one address: offered only once the
match has ended and only to its seats, proposed through one gateway and accepted through the
other, started when the last person accepts, with each person in their old seat, the
computer in its own (taken by whichever gateway's proposal created the rematch), the same
rules; kept by the game server, so a restarted gateway has forgotten nothing; a reserved seat
refused to a stranger; and no seat token in any answer or log line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e.servers import ServerFarm, ServerProcess

from bergen.api.rematch import rematch_id
from bergen.cli_client.web.players import Sealer

from .gateway import Gateway, start_gateway
from .test_play_api import Player, create, play_one

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(300)]

# Every player connects from 127.0.0.1: one client, as far as the per-client limits go.
ROOMY = ("--client-creates", "200", "--client-joins", "200")


@pytest.fixture(scope="module")
def key_file(module_farm: ServerFarm) -> Path:
    return module_farm.workdir / "rematch-seal.key"


@pytest.fixture(scope="module")
def server(module_farm: ServerFarm, module_pg_database: str) -> ServerProcess:
    return module_farm.start(module_pg_database)


def gateway_on(server: ServerProcess, workdir: Path, key_file: Path, state: Path) -> Gateway:
    return start_gateway(
        server.target, workdir, "--seal-key-file", str(key_file), *ROOMY, state=state
    )


@pytest.fixture(scope="module")
def gateways(
    server: ServerProcess, module_farm: ServerFarm, key_file: Path
) -> Iterator[tuple[Gateway, Gateway]]:
    """Two gateways with one key and a state folder each, as two replicas behind one address."""
    work = module_farm.workdir
    one = gateway_on(server, work, key_file, work / "one-state")
    two = gateway_on(server, work, key_file, work / "two-state")
    yield one, two
    for gw in (one, two):
        assert gw.stop() == 0, gw.log()


def test_proposed_through_one_gateway_accepted_through_the_other_with_the_computer_again(
    gateways: tuple[Gateway, Gateway], key_file: Path
) -> None:
    one, two = gateways
    ada, bo, eve = Player(one), Player(two), Player(two)
    clock = {"initial_s": 300, "increment_s": 5}
    made = create(ada, 3, bots=1, clock=clock, preset="american", match_name="Club night")
    old = made["match_id"]
    assert made["computer_seats"] == [1]  # played by gateway one's computer
    status, joined, _ = bo.post(f"/api/play/matches/{old}/join", {"name": "Bo"})
    assert status == 201 and joined["seat"] == 2, joined
    path = f"/api/play/matches/{old}/rematch"
    # Not before the match has ended.
    status, refused, _ = ada.post(path)
    assert status == 409 and refused["code"] == "MATCH_NOT_ENDED", refused
    status, _, _ = bo.post(f"/api/play/matches/{old}/resign")
    assert status == 200
    # Nobody but the match's seats: neither to see nor to propose.
    assert eve.request("GET", path)[0] == 403
    assert eve.post(path)[0] == 403
    # Nor from another site's page.
    assert ada.post(path, headers={"Sec-Fetch-Site": "cross-site"})[0] == 403
    assert ada.request("GET", path)[1]["state"] == "none"
    # Ada proposes through gateway two: it creates the rematch, so its computer takes the
    # seat gateway one's computer played (the token derived from the shared key shows it).
    ada.gateway = two
    status, proposed, _ = ada.post(path)
    assert status == 200, proposed
    new = rematch_id(old)
    assert (proposed["state"], proposed["match_id"]) == ("proposed", new), proposed
    assert proposed["accepted"] == [0, 1] and proposed["waiting_for"] == [2], proposed
    assert proposed["you_accepted"] is True and "error" not in proposed
    # Bo, through gateway two, sees who has accepted; Ada, back on gateway one, too.
    seen = bo.request("GET", path)[1]
    assert (seen["state"], seen["accepted"], seen["you_accepted"]) == ("proposed", [0, 1], False)
    ada.gateway = one
    assert ada.request("GET", path)[1]["you_accepted"] is True
    # Accepting twice, through the other gateway, changes nothing: no second seat, no bot.
    assert ada.post(path)[1]["waiting_for"] == [2]
    bo.gateway = one
    status, started, _ = bo.post(path)
    assert status == 200 and started["state"] == "started", started
    assert started["match_id"] == new and started["link"].endswith(f"/match?id={new}")
    # Ada's page learns it by asking (through gateway two now), with her seat in the match.
    ada.gateway = two
    status, seen, _ = ada.request("GET", path)
    assert (seen["state"], seen["match_id"], seen["you_accepted"]) == ("started", new, True)
    view = ada.view(new)
    assert view["viewer_seat"] == 0 and bo.view(new).get("viewer_seat") == 2
    assert view["rematch_of"] == old
    names = [s.get("name") for s in view["seats"]]
    assert names == ["Ada", "computer 2 (greedy)", "Bo"], names
    assert view["phase"] == "PHASE_PLAYING"
    assert view["name"] == "Club night"
    rules = view["rules"]
    assert rules["preset"] == "PRESET_AMERICAN", rules
    assert (rules["clock"], rules["clock_initial"], rules["clock_increment"]) == (
        "CLOCK_FISCHER",
        300,
        5,
    )
    # Gateway two plays the computer's seat, gateway one does not.
    assert f"match {new}: the computer plays seats 2" in two.log()
    assert new not in one.log()
    # The stranger is seated nowhere, and no answer carried a seat's token.
    assert eve.request("GET", f"/api/play/matches/{new}")[0] == 403
    sealer = Sealer.from_file(key_file)
    for player in (ada, bo):
        tokens = player.tokens(sealer)
        assert len(tokens) == 2
        for token in tokens:
            for seen_bytes in ada.seen + bo.seen + eve.seen:
                assert token.encode() not in seen_bytes
            for gw in (one, two):
                assert token not in gw.log()


def test_a_reserved_seat_is_refused_to_a_stranger_and_a_restarted_gateway_forgets_nothing(
    gateways: tuple[Gateway, Gateway], server: ServerProcess, module_farm: ServerFarm,
    key_file: Path,
) -> None:  # fmt: skip
    one, two = gateways
    ada, bo, eve = Player(one), Player(one), Player(two)
    old = create(ada)["match_id"]
    assert bo.post(f"/api/play/matches/{old}/join", {"name": "Bo"})[0] == 201
    assert ada.post(f"/api/play/matches/{old}/resign")[0] == 200
    # Bo proposes through a gateway that is then restarted.
    work = module_farm.workdir
    three = gateway_on(server, work, key_file, work / "three-state")
    bo.gateway = three
    status, proposed, _ = bo.post(f"/api/play/matches/{old}/rematch")
    assert status == 200 and proposed["waiting_for"] == [0], proposed
    new = proposed["match_id"]
    # The lobby lists it as a rematch, and its page offers a stranger no seat: the stranger's
    # join is refused by the game server.
    status, listed, _ = eve.request("GET", "/api/matches?phase=seating&page_size=100")
    (summary,) = [m for m in listed["matches"] if m["match_id"] == new]
    assert summary["rematch_of"] == old
    for body in ({"name": "Eve"}, {"name": "Eve", "seat": 0}):
        status, refused, _ = eve.post(f"/api/play/matches/{new}/join", body)
        assert status == 403 and refused["code"] == "REMATCH_SEAT_RESERVED", refused
    assert three.stop() == 0, three.log()
    again = gateway_on(server, work, key_file, work / "three-state")
    try:
        # The restarted gateway knows the proposal (the game server holds it).
        ada.gateway = again
        status, seen, _ = ada.request("GET", f"/api/play/matches/{old}/rematch")
        assert (seen["state"], seen["accepted"], seen["you_accepted"]) == ("proposed", [1], False)
        bo.gateway = again
        assert bo.request("GET", f"/api/play/matches/{old}/rematch")[1]["you_accepted"] is True
        status, started, _ = ada.post(f"/api/play/matches/{old}/rematch")
        assert status == 200 and started["state"] == "started", started
    finally:
        assert again.stop() == 0, again.log()
    # Bo, on another gateway, gets his seat's cookie by asking, and the rematch plays.
    bo.gateway = two
    ada.gateway = one
    assert bo.request("GET", f"/api/play/matches/{old}/rematch")[1]["state"] == "started"
    assert play_one(new, [ada, bo]) is not None
    assert {ada.view(new)["viewer_seat"], bo.view(new)["viewer_seat"]} == {0, 1}
