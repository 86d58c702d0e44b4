"""Seats the computer plays for the gateway (`ComputerSeats`), against a real `bergen serve`
on PostgreSQL: bots that join free seats with their own tokens, play the match to its end
beside a person's seat, play on after a restart of the gateway, are refused (with no seat
taken) past the gateway's bound or the match's free seats, and in a rated match are the
gateway's own registered players."""

from __future__ import annotations

import json
import logging
import random
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e.servers import ServerFarm, ServerProcess

from bergen.cli_client.client import Client
from bergen.cli_client.seat import SeatLink, run_seat
from bergen.cli_client.web.computer import (
    ComputerSeats,
    NoFreeSeats,
    TooManyBots,
    computer_name,
)
from bergen.domain.deciders import decider
from bergen.domain.montecarlo import Settings
from bergen.domain.state import ENDED
from bergen.v1 import bergen_pb2 as pb

from .gateway import start_gateway

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(300, method="signal")]

MATCH_S = 180.0
"""How long a match between a scripted seat and the computer may take."""


@pytest.fixture
def client(server: ServerProcess) -> Iterator[Client]:
    with Client(server.target) as c:
        yield c


def seated_person(client: Client, seats: int, name: str) -> SeatLink:
    """A match of `seats` seats with a scripted person in seat 1 (0 to the API), following it."""
    match_id = client.create(seats, name=name).match_id
    joined = client.join(match_id, "person", seat=0)
    link = SeatLink(client, match_id, 0, joined.seat_token)
    link.start()
    return link


def play_to_the_end(link: SeatLink) -> None:
    """The scripted person plays (a random legal play each turn) until the match ends."""
    final = run_seat(link, decider("random"), random.Random(3), time.monotonic() + MATCH_S)
    assert final.phase == ENDED


def written(seats: ComputerSeats) -> list[dict[str, object]]:
    body = json.loads(seats.path.read_text())
    found: list[dict[str, object]] = body["seats"]
    return found


def wait_until(predicate: object, what: str, timeout: float = 30.0) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"not so after {timeout} s: {what}"
        time.sleep(0.05)


def test_two_bots_fill_a_three_seat_match_and_play_it_to_its_end_with_a_person(
    server: ServerProcess, client: Client, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="bergen")
    link = seated_person(client, 3, "person and two bots")
    computer = ComputerSeats(server.target, tmp_path)
    try:
        assert computer.fill(link.match_id, 2, "greedy") == [1, 2]
        tokens = [str(s["token"]) for s in written(computer)]
        assert len(tokens) == 2 and all(len(t) >= 32 for t in tokens)
        assert not any(t in repr(computer.playing) for t in tokens)
        assert stat.S_IMODE(computer.path.stat().st_mode) == 0o600
        assert {(s["seat"], s["policy"]) for s in written(computer)} == {
            (1, "greedy"),
            (2, "greedy"),
        }
        view = client.get_match(link.match_id)
        assert [s.name for s in view.seats] == [
            "person",
            computer_name(1, "greedy"),
            computer_name(2, "greedy"),
        ]
        play_to_the_end(link)
        # Each bot forgets its seat (and the file its token) once the match has ended.
        wait_until(lambda: not computer.playing, "the bots let their seats go")
        assert written(computer) == []
        assert "computer plays seats 2, 3 (greedy)" in caplog.text
        assert not any(t in caplog.text for t in tokens)  # no token in any log line
    finally:
        link.close()
        computer.close()


def test_a_restarted_gateway_resumes_its_bots_from_the_state_folder(
    server: ServerProcess, client: Client, tmp_path: Path
) -> None:
    link = seated_person(client, 2, "restarted")
    first = ComputerSeats(server.target, tmp_path)
    second: ComputerSeats | None = None
    try:
        assert first.fill(link.match_id, 1, "random") == [1]
        # The person plays while the first gateway's bot plays, until a few events in.
        decide = decider("random")
        rng = random.Random(5)
        while link.seq < 6 and not link.ended:
            if link.my_turn():
                link.play(*decide(link.k, rng))
            else:
                link.wait(0.25)
        first.close()  # the gateway stops: its bot with it, its seat kept in the file
        assert [s["seat"] for s in written(first)] == [1]
        second = ComputerSeats(server.target, tmp_path)
        resumed = second.resume()
        assert [(s.match_id, s.seat, s.policy) for s in resumed] == [(link.match_id, 1, "random")]
        # Without the resumed bot the person would wait for seat 2 until the deadline.
        play_to_the_end(link)
        wait_until(lambda: second is not None and not second.playing, "the bot let go")
    finally:
        link.close()
        first.close()
        if second is not None:
            second.close()


@pytest.mark.parametrize("policy", ["montecarlo", "ismcts"])
def test_a_searching_computer_seat_plays_a_match_to_its_end(
    server: ServerProcess, client: Client, tmp_path: Path, policy: str
) -> None:
    link = seated_person(client, 2, f"person and {policy}")
    computer = ComputerSeats(server.target, tmp_path, settings=Settings(budget_s=0.02))
    try:
        assert computer.fill(link.match_id, 1, policy) == [1]
        assert {(s["seat"], s["policy"]) for s in written(computer)} == {(1, policy)}
        assert [s.name for s in client.get_match(link.match_id).seats] == [
            "person",
            computer_name(1, policy),
        ]
        play_to_the_end(link)
        wait_until(lambda: not computer.playing, "the bot let its seat go")
    finally:
        link.close()
        computer.close()


def test_too_many_bots_are_refused_with_no_seat_taken(
    server: ServerProcess, client: Client, tmp_path: Path
) -> None:
    link = seated_person(client, 3, "too many")
    computer = ComputerSeats(server.target, tmp_path, max_bots=1)
    try:
        with pytest.raises(TooManyBots, match="at most 1"):
            computer.fill(link.match_id, 2, "greedy")
        roomy = ComputerSeats(server.target, tmp_path / "roomy")
        try:
            with pytest.raises(NoFreeSeats, match="2 free seats, not 3"):
                roomy.fill(link.match_id, 3, "greedy")
        finally:
            roomy.close()
        with pytest.raises(ValueError, match="policy"):
            computer.fill(link.match_id, 1, "clairvoyant")
        view = client.get_match(link.match_id)
        assert [s.taken for s in view.seats] == [True, False, False]
        assert view.phase == pb.PHASE_SEATING
        assert not computer.playing
        assert not computer.path.exists() or written(computer) == []
    finally:
        link.close()
        computer.close()


def test_bergen_web_plays_on_the_seats_another_gateway_left_in_its_state_folder(
    server: ServerProcess, client: Client, module_farm: ServerFarm, tmp_path: Path
) -> None:
    link = seated_person(client, 2, "handed over")
    before = ComputerSeats(server.target, tmp_path)
    try:
        assert before.fill(link.match_id, 1, "greedy") == [1]
    finally:
        before.close()  # a gateway stopped with the match just begun
    gw = start_gateway(server.target, module_farm.workdir, "--state-dir", str(tmp_path))
    try:
        play_to_the_end(link)  # the real gateway's bot plays seat 2
        wait_until(lambda: written(before) == [], "the gateway let the seat go")
    finally:
        link.close()
        assert gw.stop() == 0, gw.log()
    assert "resumed 1 computer seats" in gw.log() and "Traceback" not in gw.log()


def rated_with_person(client: Client, seats: int) -> str:
    """A rated match of `seats` seats with a registered person in seat 1."""
    person = client.stub.RegisterPlayer(
        pb.RegisterPlayerRequest(name=f"person {random.randrange(10**6)}"), timeout=20
    )
    match_id = client.stub.CreateMatch(
        pb.CreateMatchRequest(seats=seats, preset=pb.PRESET_STANDARD, rated=True), timeout=20
    ).match_id
    client.stub.JoinMatch(
        pb.JoinMatchRequest(match_id=match_id, seat=0, player_token=person.player_token),
        timeout=20,
    )
    return str(match_id)


def test_rated_seats_are_the_computers_own_players_each_with_a_name_of_its_own(
    client: Client, tmp_path: Path
) -> None:
    """In a rated match each computer seat is a registered bot of the gateway's, registered
    once and kept (0600) for later matches; a name another gateway holds gets a suffix."""
    first = ComputerSeats(client.target, tmp_path / "one")
    second = ComputerSeats(client.target, tmp_path / "two")
    try:
        match_id = rated_with_person(client, 3)
        assert first.fill(match_id, 2, "greedy", rated=True) == [1, 2]
        seats = client.get_match(match_id).seats
        assert all(s.bot and s.player_id for s in seats[1:])
        names = [s.name for s in seats[1:]]
        assert names[0].startswith("greedy bot 1") and names[1].startswith("greedy bot 2")
        assert stat.S_IMODE(first.players_path.stat().st_mode) == 0o600
        kept = json.loads(first.players_path.read_text())["players"]
        assert [p["name"] for p in kept] == names
        assert not any(p["token"] in repr(first.playing) for p in kept)
        # Another match: the same players, registered once.
        again = rated_with_person(client, 2)
        assert first.fill(again, 1, "greedy", rated=True) == [1]
        assert client.get_match(again).seats[1].player_id == seats[1].player_id
        assert len(json.loads(first.players_path.read_text())["players"]) == 2
        # Another gateway (another state folder): the names are taken, so its own differ.
        other = rated_with_person(client, 2)
        assert second.fill(other, 1, "greedy", rated=True) == [1]
        theirs = client.get_match(other).seats[1]
        assert theirs.bot and theirs.player_id != seats[1].player_id
        assert theirs.name.startswith("greedy bot 1 ") and theirs.name not in names
        # An unrated match's computer seats hold no player.
        unrated = client.create(2, name="unrated").match_id
        assert first.fill(unrated, 1, "greedy") == [0]
        seat = client.get_match(unrated).seats[0]
        assert (seat.name, seat.player_id) == (computer_name(0, "greedy"), "")
    finally:
        first.close()
        second.close()
