"""The reveal window through real `bergen serve` processes, on SQLite and PostgreSQL:
entrants register with commitments to their seeds, the start opens the window, each reveals
its seed (every refusal saying why and changing nothing), an entrant that never does is
withdrawn by the server at the deadline, and round 1 is paired from the revealers alone; the
tournament played out, its signed record and `bergen verify` of its exported audit pack
check. The deadline is kept in the tournament's events: a server stopped during the window
and started again closes it all the same."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from bergen.cli_client.connect import error_info
from bergen.v1 import bergen_pb2 as pb

from .client import Client, bearer, rule_options
from .conftest import ORGANISER_TOKEN, on_backend
from .servers import ServerFarm, bergen_command
from .test_tournaments import check_record, ended, play_until

pytestmark = [pytest.mark.timeout(240)]

ORG = bearer(ORGANISER_TOKEN)
WINDOW_S = 10


def sha(seed: str) -> str:
    return hashlib.sha256(seed.encode("utf-8")).hexdigest()


def create(client: Client, rounds: int = 1, window: int = WINDOW_S) -> str:
    created = client.stub.CreateTournament(
        pb.CreateTournamentRequest(
            name="reveal cup",
            settings=pb.TournamentSettings(
                format=pb.TOURNAMENT_FORMAT_SWISS,
                seats=2,
                preset=pb.PRESET_STANDARD,
                options=rule_options(target=3),
                rounds=rounds,
                reveal_window=window,
            ),
        ),
        metadata=ORG,
    )
    return str(created.tournament_id)


def register(client: Client, tid: str, n: int) -> dict[int, str]:
    """`n` entrants `p1..pn`, each committed to the seed `seed i`; their tokens."""
    tokens = {}
    for i in range(1, n + 1):
        reply = client.stub.RegisterEntrant(
            pb.RegisterEntrantRequest(
                tournament_id=tid, players=[f"p{i}"], client_seed_commitment=sha(f"seed {i}")
            )
        )
        assert reply.entrant == i
        (tokens[i],) = reply.player_tokens
    return tokens


def view(client: Client, tid: str) -> pb.TournamentView:
    return client.stub.GetTournament(pb.GetTournamentRequest(tournament_id=tid)).tournament


def reveal(client: Client, tid: str, entrant: int, seed: str, token: str | None) -> Any:
    return client.stub.RevealEntrantSeed(
        pb.RevealEntrantSeedRequest(tournament_id=tid, entrant=entrant, client_seed=seed),
        metadata=bearer(token),
    )


def refused(call: Callable[[], object], code: grpc.StatusCode, reason: str) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        call()
    error: Any = caught.value
    assert error.code() == code, error
    info = error_info(error)
    assert info is not None and info.reason == reason, error


def wait_for(check: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def bergen(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERGEN_")}
    return subprocess.run(
        [*bergen_command(), *args], capture_output=True, text=True, timeout=120, env=env
    )


@on_backend("postgresql")
def test_a_no_show_is_withdrawn_at_the_deadline_and_round_1_paired_from_the_revealers(
    farm: ServerFarm, database: str, tmp_path: Path
) -> None:
    server = farm.start(database, organiser_token=ORGANISER_TOKEN)
    with Client(server.target) as client:
        stub = client.stub
        tid = create(client)
        bad = ("ab" * 31, sha("x").upper(), "z" * 64)
        for said in bad:
            refused(
                lambda said=said: stub.RegisterEntrant(
                    pb.RegisterEntrantRequest(
                        tournament_id=tid, players=["eve"], client_seed_commitment=said
                    )
                ),
                grpc.StatusCode.INVALID_ARGUMENT,
                "BAD_SEED_COMMITMENT",
            )
        refused(
            lambda: stub.RegisterEntrant(
                pb.RegisterEntrantRequest(
                    tournament_id=tid,
                    players=["eve"],
                    client_seed="x",
                    client_seed_commitment=sha("x"),
                )
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "SEED_AND_COMMITMENT",
        )
        tokens = register(client, tid, 4)
        refused(
            lambda: reveal(client, tid, 1, "seed 1", tokens[1]),
            grpc.StatusCode.FAILED_PRECONDITION,
            "REVEAL_NOT_OPEN",
        )
        before = view(client, tid)
        assert [e.client_seed_commitment for e in before.entrants] == [
            sha(f"seed {i}") for i in range(1, 5)
        ]
        assert not any(e.revealed or e.client_seed for e in before.entrants)

        started = stub.StartTournament(pb.StartTournamentRequest(tournament_id=tid), metadata=ORG)
        assert list(started.seeding) == [] and started.reveal_deadline_ms > 0
        now = view(client, tid)
        assert now.phase == pb.TOURNAMENT_PHASE_REVEAL
        assert now.reveal_deadline_ms == started.reveal_deadline_ms
        assert now.settings.reveal_window == WINDOW_S
        refused(
            lambda: reveal(client, tid, 1, "seed 2", tokens[1]),
            grpc.StatusCode.INVALID_ARGUMENT,
            "SEED_DOES_NOT_MATCH",
        )
        refused(
            lambda: reveal(client, tid, 1, "seed 1", tokens[2]),
            grpc.StatusCode.PERMISSION_DENIED,
            "NOT_THIS_ENTRANT",
        )
        refused(
            lambda: reveal(client, tid, 1, "seed 1", None),
            grpc.StatusCode.UNAUTHENTICATED,
            "TOKEN_REQUIRED",
        )
        refused(
            lambda: stub.StartNextRound(pb.StartNextRoundRequest(tournament_id=tid), metadata=ORG),
            grpc.StatusCode.FAILED_PRECONDITION,
            "REVEAL_WINDOW_OPEN",
        )
        assert view(client, tid).version == now.version  # the refusals wrote nothing
        for i in (1, 2, 3):
            done = reveal(client, tid, i, f"seed {i}", tokens[i])
            assert done.unrevealed == 4 - i
        again = view(client, tid)
        assert [e.revealed for e in again.entrants] == [True, True, True, False]
        assert [e.client_seed for e in again.entrants] == ["seed 1", "seed 2", "seed 3", ""]
        # Sent again (its answer lost), a reveal is answered as before and writes nothing.
        assert reveal(client, tid, 2, "seed 2", tokens[2]).reveal_deadline_ms
        assert view(client, tid).version == again.version

        # Entrant 4 never reveals: at the deadline the server withdraws it and pairs round 1.
        wait_for(lambda: view(client, tid).round == 1, "round 1 was not paired")
        paired = view(client, tid)
        gone = paired.entrants[3]
        assert (gone.withdrawn_after_round, gone.withdrawn_by) == (0, pb.ACTOR_SERVER)
        (withdrawal,) = paired.interventions
        assert (withdrawal.action, withdrawal.by, withdrawal.entrant, withdrawal.round) == (
            pb.INTERVENTION_ACTION_WITHDRAW,
            pb.ACTOR_SERVER,
            4,
            0,
        )
        assert "did not reveal" in withdrawal.note
        assert sorted(paired.seeding) == [1, 2, 3]
        (round_1,) = paired.rounds
        in_round = {*round_1.byes, *(e for t in round_1.tables for e in t.sides)}
        assert in_round == {1, 2, 3} and len(round_1.tables) == 1
        refused(
            lambda: reveal(client, tid, 4, "seed 4", tokens[4]),
            grpc.StatusCode.FAILED_PRECONDITION,
            "REVEAL_CLOSED",
        )

        play_until(client, tid, {i: tokens[i] for i in (1, 2, 3)}, ended(client, tid), 120)
        record: dict[str, Any] = check_record(client, tid)
        assert record["settings"]["reveal_window"] == WINDOW_S
        assert record["settings"]["round_delay"] == 0
        assert record["settings"]["max_entrants"] is None
        assert [e["client_seed"] for e in record["entrants"]] == [
            "seed 1",
            "seed 2",
            "seed 3",
            None,
        ]
        assert [e["client_seed_commitment"] for e in record["entrants"]] == [
            sha(f"seed {i}") for i in range(1, 5)
        ]
        assert record["entrants"][3]["withdrawn_by"] == "no_reveal"
        assert record["entrants"][3]["withdrawn_after_round"] == 0
        assert {s["entrant"] for s in record["standings"]} == {1, 2, 3}

        # The audit pack, as `bergen tournament export` writes it, verifies.
        key = stub.GetServerInfo(pb.GetServerInfoRequest()).public_key
        pack = tmp_path / "pack"
        exported = bergen(
            "tournament", "export", tid, "--out", str(pack), "--server", server.target
        )
        assert exported.returncode == 0, exported.stdout + exported.stderr
        verified = bergen("verify", str(pack), "--public-key", key)
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert verified.stdout.startswith(f"OK: tournament {tid}")
        packed = json.loads((pack / "tournament.json").read_text(encoding="utf-8"))
        assert packed["entrants"][3]["withdrawn_by"] == "no_reveal"


def test_every_entrant_revealed_pairs_round_1_before_the_deadline(
    farm: ServerFarm, sqlite_url: str
) -> None:
    server = farm.start(sqlite_url, organiser_token=ORGANISER_TOKEN)
    with Client(server.target) as client:
        # A window of a day: only every entrant's reveal can close it.
        tid = create(client, window=86_400)
        tokens = register(client, tid, 3)
        client.stub.StartTournament(pb.StartTournamentRequest(tournament_id=tid), metadata=ORG)
        for i in (3, 1, 2):
            reveal(client, tid, i, f"seed {i}", tokens[i])
        wait_for(lambda: view(client, tid).round == 1, "round 1 was not paired")
        paired = view(client, tid)
        assert not paired.interventions and paired.reveal_deadline_ms == 0
        assert not any(e.HasField("withdrawn_after_round") for e in paired.entrants)


def test_fewer_than_two_revealers_end_the_tournament_at_the_deadline(
    farm: ServerFarm, sqlite_url: str
) -> None:
    server = farm.start(sqlite_url, organiser_token=ORGANISER_TOKEN)
    with Client(server.target) as client:
        tid = create(client)
        tokens = register(client, tid, 3)
        client.stub.StartTournament(pb.StartTournamentRequest(tournament_id=tid), metadata=ORG)
        reveal(client, tid, 2, "seed 2", tokens[2])
        wait_for(ended(client, tid), "the tournament did not end")
        final = view(client, tid)
        assert final.round == 0 and not final.rounds and not final.cancelled
        assert list(final.seeding) == [2]
        assert [e.withdrawn_by for e in final.entrants] == [
            pb.ACTOR_SERVER,
            pb.ACTOR_UNSPECIFIED,
            pb.ACTOR_SERVER,
        ]
        record: dict[str, Any] = check_record(client, tid)
        assert record["rounds"] == [] and [s["entrant"] for s in record["standings"]] == [2]


def test_the_deadline_survives_a_restart_of_the_server(farm: ServerFarm, database: str) -> None:
    server = farm.start(database, organiser_token=ORGANISER_TOKEN)
    with Client(server.target) as client:
        tid = create(client, window=WINDOW_S)
        tokens = register(client, tid, 4)
        started = client.stub.StartTournament(
            pb.StartTournamentRequest(tournament_id=tid), metadata=ORG
        )
        for i in (1, 2, 4):
            reveal(client, tid, i, f"seed {i}", tokens[i])
    assert server.terminate() == 0
    # Down past the deadline: nothing can happen until a server is up again.
    wait_for(lambda: time.time() * 1000 > started.reveal_deadline_ms + 500, "the clock stood still")
    again = farm.start(database, organiser_token=ORGANISER_TOKEN)
    with Client(again.target) as client:
        wait_for(lambda: view(client, tid).round == 1, "round 1 was not paired after the restart")
        paired = view(client, tid)
        assert (paired.entrants[2].withdrawn_after_round, paired.entrants[2].withdrawn_by) == (
            0,
            pb.ACTOR_SERVER,
        )
        assert sorted(paired.seeding) == [1, 2, 4]
