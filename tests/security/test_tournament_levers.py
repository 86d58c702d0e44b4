"""The levers a tournament's server and organiser held over its outcome, and what is left.

The entrants' client seeds fix the seeding and every deal with the server's seed. Registered
as commitments and revealed only once registration has closed, they are unknown to whoever
holds the server's keys until no entrant can be added: neither the start's timing nor a last
entrant with a chosen seed can steer the draw. What the organiser and the server may still do
(withdraw an entrant, abandon a table) is written as an intervention, saying who and why, and
an audit pack holding all three kinds verifies.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from e2e.client import Client, bearer
from e2e.conftest import on_backend
from e2e.servers import ServerFarm, bergen_command
from e2e.test_tournament_reveal import create, register, reveal, sha, view, wait_for
from e2e.test_tournaments import ended, play_until

from bergen.cli_client.connect import error_info
from bergen.domain.tournament_standings import ABANDONED
from bergen.v1 import bergen_pb2 as pb

from .conftest import ORGANISER_TOKEN, Database

pytestmark = pytest.mark.timeout(300)

ORG = bearer(ORGANISER_TOKEN)
WINDOW_S = 4


def bergen(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERGEN_")}
    return subprocess.run(
        [*bergen_command(), *args], capture_output=True, text=True, timeout=120, env=env
    )


def abandon_a_table(client: Client, tid: str) -> pb.TableResult:
    """The organiser abandons round 1's first table once its match is in play."""
    deadline = time.monotonic() + 60
    while True:
        request = pb.SettleTableRequest(
            tournament_id=tid,
            round=1,
            table=1,
            action=pb.SETTLE_ACTION_ABANDON,
            note="power cut",
        )
        try:
            return client.stub.SettleTable(request, metadata=ORG).result
        except grpc.RpcError as e:
            info = error_info(e)
            reason = info.reason if info else ""
            if reason not in ("TABLE_NOT_READY", "MATCH_STILL_SEATING"):
                raise
        assert time.monotonic() < deadline, "round 1's first table never came into play"
        time.sleep(0.05)


@on_backend("postgresql")
def test_no_seed_is_known_before_registration_closes_and_every_lever_is_written(
    farm: ServerFarm, database: Database, tmp_path: Path
) -> None:
    server = farm.start(database.server_url, organiser_token=ORGANISER_TOKEN)
    with Client(server.target) as client:
        stub = client.stub
        tid = create(client, rounds=2, window=WINDOW_S)
        tokens = register(client, tid, 6)
        # While anyone may still register, no entrant's seed is known to anyone, the server
        # included: it holds commitments only.
        open_view = view(client, tid)
        assert [e.client_seed_commitment for e in open_view.entrants] == [
            sha(f"seed {i}") for i in range(1, 7)
        ]
        assert not any(e.client_seed for e in open_view.entrants)
        assert list(open_view.seeding) == []
        stub.StartTournament(pb.StartTournamentRequest(tournament_id=tid), metadata=ORG)
        # Registration has closed: a last entrant cannot come in with a seed of its choosing.
        with pytest.raises(grpc.RpcError) as late:
            stub.RegisterEntrant(
                pb.RegisterEntrantRequest(
                    tournament_id=tid, players=["late"], client_seed_commitment=sha("chosen")
                )
            )
        assert late.value.code() == grpc.StatusCode.FAILED_PRECONDITION  # type: ignore[attr-defined]
        for i in range(1, 6):  # entrant 6 never reveals
            reveal(client, tid, i, f"seed {i}", tokens[i])
        wait_for(lambda: view(client, tid).round == 1, "round 1 was not paired", 60)

        abandoned = abandon_a_table(client, tid)
        assert list(abandoned.places) == [1, 1]
        paired = view(client, tid)
        playing = {e for t in paired.rounds[0].tables[1:] for e in t.sides}
        leaver = max(playing)
        stub.WithdrawEntrant(
            pb.WithdrawEntrantRequest(tournament_id=tid, entrant=leaver, note="left early"),
            metadata=ORG,
        )
        play_until(client, tid, {i: tokens[i] for i in range(1, 6)}, ended(client, tid), 180)

        key = stub.GetServerInfo(pb.GetServerInfoRequest()).public_key
    pack = tmp_path / "pack"
    exported = bergen("tournament", "export", tid, "--out", str(pack), "--server", server.target)
    assert exported.returncode == 0, exported.stdout + exported.stderr
    verified = bergen("verify", str(pack), "--public-key", key)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert verified.stdout.startswith(f"OK: tournament {tid}"), verified.stdout

    record: dict[str, Any] = json.loads((pack / "tournament.json").read_text(encoding="utf-8"))
    said = [
        (i["action"], i["by"], i["round"], i["table"], i["entrant"], i["reason"])
        for i in record["interventions"]
    ]
    assert said[0][:5] == ("withdraw", "server", 0, None, 6), said
    assert "reveal" in said[0][5], said
    assert said[1:] == [
        ("abandon", "organiser", 1, 1, None, "power cut"),
        ("withdraw", "organiser", 1, None, leaver, "left early"),
    ], said
    withdrawn = {
        e["entrant"]: e["withdrawn_by"] for e in record["entrants"] if e.get("withdrawn_by")
    }
    assert withdrawn == {6: "no_reveal", leaver: "organiser"}
    (first,) = [t for t in record["rounds"][0]["tables"] if t["table"] == 1]
    assert first["result"]["reason"] == ABANDONED
    assert first["result"]["places"] == [1, 1]
    # Every setting is written, defaults included.
    for name in ("reveal_window", "round_delay", "max_entrants", "rounds", "format"):
        assert name in record["settings"], record["settings"]
