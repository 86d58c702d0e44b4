"""`bergen bots --tournament` against a real server: bots register as entrants with tokens of
their own and play every match the server seats them in, round after round, with no
organiser action after the start (they reveal their seeds on their own), until the
tournament ends; the standings they report are the server's, and its signed record and audit
pack check."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from bergen.domain.tournament_fairness import commitment
from bergen.v1 import bergen_pb2 as pb

from .client import Client, bearer, rule_options
from .conftest import ORGANISER_TOKEN
from .servers import ServerFarm, ServerProcess, bergen_command
from .test_tournaments import check_record, verify_pack

pytestmark = [pytest.mark.timeout(300)]

ORG = bearer(ORGANISER_TOKEN)


def create(client: Client, seats: int, rounds: int, partnerships: bool = False) -> str:
    """A Swiss of `rounds` rounds at `seats`-seat tables to 3 points; with `partnerships`, a
    round robin of pairs."""
    created = client.stub.CreateTournament(
        pb.CreateTournamentRequest(
            name="bots cup",
            settings=pb.TournamentSettings(
                format=pb.TOURNAMENT_FORMAT_ROUND_ROBIN
                if partnerships
                else pb.TOURNAMENT_FORMAT_SWISS,
                seats=seats,
                partnerships=partnerships,
                preset=pb.PRESET_STANDARD,
                options=rule_options(target=3),
                rounds=0 if partnerships else rounds,
            ),
        ),
        metadata=ORG,
    )
    return str(created.tournament_id)


@contextmanager
def bots(server: ServerProcess, *args: str) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [*bergen_command(), "bots", "--server", server.target, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def start_when_filled(client: Client, tid: str, entrants: int) -> None:
    """Wait on the tournament's stream for `entrants` registrations, then start it."""
    stream = client.stub.WatchTournament(pb.WatchTournamentRequest(tournament_id=tid))
    for reply in stream:
        if len(reply.tournament.entrants) >= entrants:
            stream.cancel()
            break
    client.stub.StartTournament(pb.StartTournamentRequest(tournament_id=tid), metadata=ORG)


def play_out(
    farm: ServerFarm,
    server: ServerProcess,
    seats: int,
    entrants: int,
    rounds: int,
    partnerships: bool = False,
) -> dict[str, object]:
    with Client(server.target) as client:
        tid = create(client, seats, rounds, partnerships)
        with bots(
            server, "--tournament", tid, "--entrants", str(entrants),
            "--policy", "greedy", "random", "--seed", "e2e", "--json",
        ) as proc:  # fmt: skip
            start_when_filled(client, tid, entrants)
            out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err + out
        report = json.loads(out)
        got = client.stub.GetTournament(pb.GetTournamentRequest(tournament_id=tid)).tournament
        assert got.phase == pb.TOURNAMENT_PHASE_ENDED
        assert got.round == rounds
        # Each entrant's players are bot players of its policy, numbered in turn.
        size = 2 if partnerships else 1
        numbers = {"greedy": 0, "random": 0}
        names = []
        for i in range(entrants):
            policy = ("greedy", "random")[i % 2]
            names.append([f"bot-{policy}-{numbers[policy] + k + 1}" for k in range(size)])
            numbers[policy] += size
        assert [list(e.players) for e in got.entrants] == names
        assert all(all(e.bots) and len(e.player_ids) == size for e in got.entrants)
        # The bots report the server's final standings, and every match it paired them in.
        assert [(s["entrant"], s["match_points"]) for s in report["standings"]] == [
            (s.entrant, s.match_points) for s in got.standings
        ]
        assert report["rounds"] == rounds
        paired = {t.match_id for r in got.rounds for t in r.tables if t.match_id}
        assert set(report["matches"]) == paired
        for r in got.rounds:
            for t in r.tables:
                assert t.HasField("result")
                assert t.result.reason == pb.MATCH_END_REASON_TARGET
        # Each bot committed to its seed at registration and revealed it after the start,
        # on its own: nobody was withdrawn for not revealing.
        for e in got.entrants:
            assert e.revealed and not e.HasField("withdrawn_after_round"), e
            assert e.client_seed_commitment == commitment(e.client_seed.encode())
        record = check_record(client, tid)
        assert record["settings"]["reveal_window"] == 60  # type: ignore[index]
        verify_pack(client, record, farm.workdir)
    return report


def test_bots_fill_a_two_seat_swiss_and_play_it_to_its_end(
    farm: ServerFarm, sqlite_url: str
) -> None:
    server = farm.start(sqlite_url, organiser_token=ORGANISER_TOKEN)
    report = play_out(farm, server, seats=2, entrants=6, rounds=3)
    assert len(report["matches"]) == 3 * 3  # type: ignore[arg-type]


def test_bots_play_a_four_seat_individual_swiss_of_five_entrants(
    farm: ServerFarm, sqlite_url: str
) -> None:
    server = farm.start(sqlite_url, organiser_token=ORGANISER_TOKEN)
    play_out(farm, server, seats=4, entrants=5, rounds=2)


def test_bot_pairs_play_a_round_robin_at_partnership_tables(
    farm: ServerFarm, sqlite_url: str
) -> None:
    server = farm.start(sqlite_url, organiser_token=ORGANISER_TOKEN)
    report = play_out(farm, server, seats=4, entrants=4, rounds=3, partnerships=True)
    assert len(report["matches"]) == 3 * 2  # type: ignore[arg-type]


def test_a_tournament_not_open_for_registration_is_refused(
    farm: ServerFarm, sqlite_url: str
) -> None:
    server = farm.start(sqlite_url, organiser_token=ORGANISER_TOKEN)
    with Client(server.target) as client:
        tid = create(client, 2, 1)
        for name in ("a", "b"):
            client.stub.RegisterEntrant(
                pb.RegisterEntrantRequest(tournament_id=tid, players=[name])
            )
        client.stub.StartTournament(pb.StartTournamentRequest(tournament_id=tid), metadata=ORG)
    with bots(server, "--tournament", tid, "--entrants", "2") as proc:
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 4, err + out
    assert f"tournament {tid} is not open for registration" in err


def test_two_bot_processes_fill_one_tournament_under_names_of_their_own(
    farm: ServerFarm, sqlite_url: str
) -> None:
    """Both processes start at `bot-greedy-1`, kept in one configuration folder: the one that
    finds a bot entered already goes on to the next, so neither is refused and the four
    entrants are four different bot players."""
    server = farm.start(sqlite_url, organiser_token=ORGANISER_TOKEN)
    with Client(server.target) as client:
        tid = create(client, 2, 1)
        args = ("--tournament", tid, "--entrants", "2", "--policy", "greedy", "--json")
        with (
            bots(server, *args, "--seed", "one") as one,
            bots(server, *args, "--seed", "two") as two,
        ):
            start_when_filled(client, tid, 4)
            outs = [proc.communicate(timeout=240) for proc in (one, two)]
        for proc, (out, err) in zip((one, two), outs, strict=True):
            assert proc.returncode == 0, err + out
        got = client.stub.GetTournament(pb.GetTournamentRequest(tournament_id=tid)).tournament
        assert got.phase == pb.TOURNAMENT_PHASE_ENDED
        entered = [p for e in got.entrants for p in e.players]
        assert len(set(entered)) == 4, entered
        assert all(p.startswith("bot-greedy-") for p in entered), entered
        reported = [json.loads(out)["matches"] for out, _ in outs]
        paired = {t.match_id for r in got.rounds for t in r.tables if t.match_id}
        assert set(reported[0]) | set(reported[1]) == paired
