"""Rematches through the players' API, against a real `bergen serve` (PostgreSQL) and a real
`bergen web`: offered only once the match has ended and only to its seats, started when the
last person accepts, with each person in their old seat, the computer in its own, the same
rules, and no seat token in any answer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e.servers import ServerFarm, ServerProcess

from bergen.cli_client.web.players import Sealer

from .gateway import Gateway, start_gateway
from .test_play_api import Player, create

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def key_file(module_farm: ServerFarm) -> Path:
    return module_farm.workdir / "rematch-seal.key"


@pytest.fixture(scope="module")
def server(module_farm: ServerFarm, module_pg_database: str) -> ServerProcess:
    return module_farm.start(module_pg_database)


@pytest.fixture(scope="module")
def gateway(server: ServerProcess, module_farm: ServerFarm, key_file: Path) -> Iterator[Gateway]:
    gw = start_gateway(server.target, module_farm.workdir, "--seal-key-file", str(key_file))
    yield gw
    assert gw.stop() == 0, gw.log()


def test_a_rematch_seats_each_person_again_and_the_computer_in_its_seat(
    gateway: Gateway, key_file: Path
) -> None:
    ada, bo, eve = Player(gateway), Player(gateway), Player(gateway)
    clock = {"initial_s": 300, "increment_s": 5}
    made = create(ada, 3, bots=1, clock=clock, preset="american", match_name="Club night")
    old = made["match_id"]
    assert made["computer_seats"] == [1]
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
    status, proposed, _ = ada.post(path)
    assert status == 200, proposed
    assert proposed["state"] == "proposed" and proposed["waiting_for"] == [2], proposed
    assert "match_id" not in proposed
    assert bo.request("GET", path)[1]["you_accepted"] is False
    # Accepting twice changes nothing.
    assert ada.post(path)[1]["waiting_for"] == [2]
    status, started, _ = bo.post(path)
    assert status == 200 and started["state"] == "started", started
    new = started["match_id"]
    assert new != old and started["link"].endswith(f"/match?id={new}")
    # Ada's page learns it by asking, and gets her seat in the new match with the answer.
    status, seen, _ = ada.request("GET", path)
    assert seen["match_id"] == new
    view = ada.view(new)
    assert view["viewer_seat"] == 0 and bo.view(new).get("viewer_seat") == 2
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
    # The stranger is seated nowhere, and no answer carried a seat's token.
    assert eve.request("GET", f"/api/play/matches/{new}")[0] == 403
    sealer = Sealer.from_file(key_file)
    for player in (ada, bo):
        tokens = player.tokens(sealer)
        assert len(tokens) == 2
        for token in tokens:
            for seen_bytes in ada.seen + bo.seen + eve.seen:
                assert token.encode() not in seen_bytes
    for token in ada.tokens(sealer) + bo.tokens(sealer):
        assert token not in gateway.log()
