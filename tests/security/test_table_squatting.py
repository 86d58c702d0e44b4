"""A row at a future table's match id cannot stop a tournament.

Table match ids are derived from the tournament id (TOURNAMENT.md section 3), so whoever holds
the server's database role can put a row at a table's id before the server creates its match.
That table's match can then never be trusted, but the tournament goes on: the server settles
the table as abandoned (an intervention in the record, saying why), every other table and
round is played, and the tournament's views and record are served throughout.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest
from e2e.client import Client, bearer
from e2e.servers import ServerFarm, bergen_command
from e2e.test_tournaments import ENTRANTS, ORG, ROUNDS, ended, play_some

from bergen.api.audit_pack import played_matches
from bergen.cli_client.tournament_pack import served_pack, write_files
from bergen.domain.tournament_fairness import match_id
from bergen.domain.tournament_record import check_tournament_record
from bergen.v1 import bergen_pb2 as pb

from .conftest import ORGANISER_TOKEN, Database

pytestmark = pytest.mark.timeout(240)


def squat(database: Database, stream_id: str) -> None:
    """As the server's database role: one row at `stream_id`, its seq 1, with no valid
    authenticator (the role does not hold the log key)."""
    columns = (
        "stream_id, seq, type, schema_version, payload, metadata, prev_hash, hash, salt,"
        " key_id, mac"
    )
    row: tuple[Any, ...] = (
        stream_id, 1, "MatchCreated", 1, json.dumps({"squatted": True}), "{}",
        bytes(32), bytes(32), bytes(16), "k1", bytes(32),
    )  # fmt: skip
    if database.backend == "sqlite":
        path = database.server_url.removeprefix("sqlite:///")
        with sqlite3.connect(path, isolation_level=None) as conn:
            (head,) = conn.execute("SELECT coalesce(max(position), 0) FROM events").fetchone()
            conn.execute(
                f"INSERT INTO events ({columns}, position) VALUES"
                " (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*row, head + 1),
            )
        return
    with psycopg.connect(database.server_url, autocommit=True) as conn:
        conn.execute(
            f"INSERT INTO events ({columns}) VALUES"
            " (%s, %s, %s, %s, %s::json, %s::json, %s, %s, %s, %s, %s)",
            row,
        )


def test_a_row_at_a_future_tables_id_does_not_stop_the_tournament(
    farm: ServerFarm, database: Database, tmp_path: Path
) -> None:
    server = farm.start(database.server_url, organiser_token=ORGANISER_TOKEN)
    with Client(server.target) as client:
        stub = client.stub
        tid = stub.CreateTournament(
            pb.CreateTournamentRequest(
                name="squatted cup",
                settings=pb.TournamentSettings(
                    format=pb.TOURNAMENT_FORMAT_SWISS,
                    seats=2,
                    preset=pb.PRESET_STANDARD,
                    options=pb.RuleOptions(target=3),
                    rounds=ROUNDS,
                ),
            ),
            metadata=ORG,
        ).tournament_id
        tokens: dict[int, str] = {}
        for i in range(ENTRANTS):
            reply = stub.RegisterEntrant(
                pb.RegisterEntrantRequest(tournament_id=tid, players=[f"p{i}"], client_seed=f"c{i}")
            )
            (tokens[reply.entrant],) = reply.player_tokens
        squatted = match_id(tid, 1, 1)
        squat(database, squatted)
        stub.StartTournament(pb.StartTournamentRequest(tournament_id=tid), metadata=ORG)
        # The other table of round 1 and both of round 2 are played; the tournament ends.
        done = ended(client, tid)
        deadline = time.monotonic() + 180
        while not done():
            assert time.monotonic() < deadline, "the tournament did not move on in time"
            try:
                if not play_some(client, tid, tokens):
                    time.sleep(0.01)
            except grpc.RpcError as e:  # a player sent to the squatted match, before it is settled
                assert e.code() == grpc.StatusCode.DATA_LOSS, e  # type: ignore[attr-defined]
        got = stub.GetTournament(pb.GetTournamentRequest(tournament_id=tid)).tournament
        first = got.rounds[0].tables[0]
        assert first.match_id == squatted
        assert first.result.reason == pb.MATCH_END_REASON_ABANDONED
        for token in tokens.values():  # every player is served its view
            stub.GetTournament(pb.GetTournamentRequest(tournament_id=tid), metadata=bearer(token))
        record = json.loads(
            stub.GetTournamentRecord(pb.GetTournamentRecordRequest(tournament_id=tid)).record_json
        )
        check_tournament_record({k: v for k, v in record.items() if k != "signature"})
        (intervention,) = record["interventions"]
        assert intervention["action"] == "abandon" and intervention["by"] == "server"
        assert (intervention["round"], intervention["table"]) == (1, 1)
        assert "no server wrote" in intervention["reason"]
        # Its audit pack holds every other match, and verifies whole.
        served = [
            json.loads(stub.GetRecord(pb.GetRecordRequest(match_id=m)).record_json)
            for m in played_matches(record)
        ]
        assert squatted not in {m["match_id"] for m in served} and len(served) == 3
        out = tmp_path / "pack"
        write_files(out, served_pack(record, served, json.loads(
            stub.GetAuditManifest(pb.GetAuditManifestRequest(tournament_id=tid)).manifest_json
        )))  # fmt: skip
        key = stub.GetServerInfo(pb.GetServerInfoRequest()).public_key
        verified = subprocess.run(
            [*bergen_command(), "verify", str(out), "--public-key", key],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert "1 intervention" in verified.stdout
        # The squatted match itself stays refused, as any log with a forged row.
        with pytest.raises(grpc.RpcError) as info:
            stub.GetMatch(pb.GetMatchRequest(match_id=squatted))
        assert info.value.code() == grpc.StatusCode.DATA_LOSS  # type: ignore[attr-defined]
