"""Tournaments through real `bergen serve` processes: a small Swiss created, filled, started
and then played to its end by its players' tokens alone, the server pairing each round and
creating and seating its matches with no organiser action; its signed record checks. With two
replicas on one PostgreSQL database, one SIGKILLed mid-tournament, the other finishes it with
no match or result missing or doubled."""

from __future__ import annotations

import json
import secrets
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

from bergen.api.signing import RecordSigner, verify_signature
from bergen.cli_client.tournament_pack import write_pack
from bergen.domain.tournament_fairness import match_id
from bergen.domain.tournament_record import check_tournament_record
from bergen.server.tournaments import tournament_stream
from bergen.v1 import bergen_pb2 as pb

from .client import Client, bearer, rule_options
from .conftest import ORGANISER_TOKEN, on_backend
from .servers import ServerFarm, ServerProcess, bergen_command
from .truth import store_at

pytestmark = [pytest.mark.timeout(180)]

ORG = bearer(ORGANISER_TOKEN)
ENTRANTS = 4
ROUNDS = 2


def create_swiss(client: Client) -> tuple[str, dict[int, str]]:
    """A 4-entrant 2-round Swiss at 2-seat tables to 3 points, filled and started."""
    stub = client.stub
    created = stub.CreateTournament(
        pb.CreateTournamentRequest(
            name="e2e cup",
            settings=pb.TournamentSettings(
                format=pb.TOURNAMENT_FORMAT_SWISS,
                seats=2,
                preset=pb.PRESET_STANDARD,
                options=rule_options(target=3),
                rounds=ROUNDS,
            ),
        ),
        metadata=ORG,
    )
    tid = created.tournament_id
    tokens: dict[int, str] = {}
    for i in range(ENTRANTS):
        reply = stub.RegisterEntrant(
            pb.RegisterEntrantRequest(tournament_id=tid, players=[f"p{i}"], client_seed=f"c{i}")
        )
        (tokens[reply.entrant],) = reply.player_tokens
    started = stub.StartTournament(pb.StartTournamentRequest(tournament_id=tid), metadata=ORG)
    assert sorted(started.seeding) == [1, 2, 3, 4]
    return tid, tokens


def play_some(client: Client, tid: str, tokens: dict[int, str]) -> bool:
    """Every player whose turn it is in the match the server names for it plays its first
    legal play. Returns whether the tournament has ended."""
    stub = client.stub
    for token in tokens.values():
        got = stub.GetTournament(pb.GetTournamentRequest(tournament_id=tid), metadata=bearer(token))
        if got.tournament.phase == pb.TOURNAMENT_PHASE_ENDED:
            return True
        where = got.assignment
        if not where.match_id:
            continue
        view = stub.GetMatch(pb.GetMatchRequest(match_id=where.match_id), metadata=bearer(token))
        assert view.view.viewer_seat == where.seat
        if view.view.phase != pb.PHASE_PLAYING or view.view.turn != where.seat:
            continue
        move = view.view.legal_plays[0]
        try:
            stub.Play(
                pb.PlayRequest(match_id=where.match_id, tile=move.tile, end=move.end),
                metadata=bearer(token),
            )
        except grpc.RpcError as e:
            # The match ended meanwhile (a last play), or another replica moved it on.
            if e.code() not in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.ABORTED):  # type: ignore[attr-defined]
                raise
    return False


def play_until(
    client: Client, tid: str, tokens: dict[int, str], done: Callable[[], bool], timeout: float
) -> None:
    """Play until `done()`; between rounds the server pairs the next one on its own."""
    end = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < end, "the tournament did not move on in time"
        if not play_some(client, tid, tokens):
            time.sleep(0.01)


def ended(client: Client, tid: str) -> Callable[[], bool]:
    def check() -> bool:
        got = client.stub.GetTournament(pb.GetTournamentRequest(tournament_id=tid))
        return got.tournament.phase == pb.TOURNAMENT_PHASE_ENDED

    return check


def check_record(client: Client, tid: str) -> dict[str, object]:
    reply = client.stub.GetTournamentRecord(pb.GetTournamentRecordRequest(tournament_id=tid))
    record = json.loads(reply.record_json)
    key = client.stub.GetServerInfo(pb.GetServerInfoRequest()).public_key
    verify_signature(record, key)
    check_tournament_record({k: v for k, v in record.items() if k != "signature"})
    assert record["ended"] is True
    return record  # type: ignore[no-any-return]


def check_stored(database: str, tid: str) -> None:
    """Exactly the events a clean run writes: 2 rounds paired, 4 results, one end; each
    round's matches created once and seated once per seat."""
    with store_at(database) as store:
        types = [e.type for e in store.read_stream(tournament_stream(tid))]
        assert types.count("RoundPaired") == ROUNDS
        assert types.count("ResultRecorded") == ROUNDS * ENTRANTS // 2
        assert types.count("TournamentEnded") == 1
        for r in range(1, ROUNDS + 1):
            for t in range(1, ENTRANTS // 2 + 1):
                events = [e.type for e in store.read_stream(match_id(tid, r, t))]
                assert events.count("MatchCreated") == 1
                assert events.count("SeatTaken") == 2
                assert events.count("MatchEnded") == 1


@on_backend("postgresql")
def test_a_swiss_is_played_to_its_end_with_no_organiser_action(
    farm: ServerFarm, database: str
) -> None:
    server = farm.start(database, organiser_token=ORGANISER_TOKEN)
    with Client(server.target) as client:
        tid, tokens = create_swiss(client)
        play_until(client, tid, tokens, ended(client, tid), 120)
        record = check_record(client, tid)
        got = client.stub.GetTournament(pb.GetTournamentRequest(tournament_id=tid)).tournament
        assert [s.entrant for s in got.standings] == [
            s["entrant"]
            for s in record["standings"]  # type: ignore[attr-defined]
        ]
        assert all(t.HasField("result") for r in got.rounds for t in r.tables)
        listed = client.stub.ListTournaments(
            pb.ListTournamentsRequest(phase=pb.TOURNAMENT_PHASE_ENDED)
        )
        assert [t.tournament_id for t in listed.tournaments] == [tid]
        # A tournament is no match: the match listing holds only its tables' matches.
        matches = client.stub.ListMatches(pb.ListMatchesRequest(page_size=100)).matches
        assert len(matches) == ROUNDS * ENTRANTS // 2
        verify_pack(client, record, farm.workdir)
        # Nobody joins a tournament's match: its seats are the server's to give.
        with pytest.raises(grpc.RpcError) as joined:
            client.stub.JoinMatch(
                pb.JoinMatchRequest(match_id=match_id(tid, 1, 1), name="intruder")
            )
        assert joined.value.code() == grpc.StatusCode.PERMISSION_DENIED  # type: ignore[attr-defined]
        assert "TOURNAMENT_MATCH" in str(joined.value.trailing_metadata())  # type: ignore[attr-defined]
    check_stored(database, tid)


def unsigned(record: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in record.items() if k != "signature"}


def verify_pack(client: Client, record: dict[str, object], workdir: Path) -> None:
    """The audit pack of the served records, signed by the server's key, is accepted whole
    by `bergen verify DIR`: every match the server created has its derived id and seed, its
    entrants seated, its `tournament` field, and the table's result."""
    tid = str(record["tournament_id"])
    matches = []
    for r in record["rounds"]:  # type: ignore[attr-defined]
        for t in r["tables"]:
            served = client.stub.GetRecord(pb.GetRecordRequest(match_id=t["match_id"]))
            match = json.loads(served.record_json)
            assert match["tournament"] == {
                "tournament_id": tid,
                "round": r["round"],
                "table": t["table"],
            }
            matches.append(unsigned(match))
    signer = RecordSigner.load_or_create(workdir / "signing-key.pem")
    out = workdir / "pack"
    write_pack(out, unsigned(record), matches, signer)
    done = subprocess.run(
        [*bergen_command(), "verify", str(out), "--public-key", signer.public_key],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"OK: tournament {tid}")


def test_a_player_watching_is_shown_each_match_it_must_play_and_the_end(
    farm: ServerFarm, sqlite_url: str
) -> None:
    server = farm.start(sqlite_url, organiser_token=ORGANISER_TOKEN)
    with Client(server.target) as client:
        tid, tokens = create_swiss(client)
        seen: list[pb.WatchTournamentResponse] = []
        first = threading.Event()

        def watch() -> None:
            stream = client.stub.WatchTournament(
                pb.WatchTournamentRequest(tournament_id=tid), metadata=bearer(tokens[1])
            )
            for reply in stream:
                seen.append(reply)
                first.set()

        watcher = threading.Thread(target=watch)
        watcher.start()
        assert first.wait(30)
        play_until(client, tid, tokens, ended(client, tid), 120)
        watcher.join(30)
        assert not watcher.is_alive(), "the stream did not end with the tournament"
    assert seen[-1].tournament.phase == pb.TOURNAMENT_PHASE_ENDED
    # Entrant 1 was told of its match of each round, its seat taken, before it played it.
    told = {(r.assignment.round, r.assignment.match_id) for r in seen if r.assignment.match_id}
    assert {r for r, _ in told} == {1, 2}
    for r, mid in told:
        assert any(mid == match_id(tid, r, t) for t in (1, 2))
    assert all(r.assignment.entrant == 1 for r in seen)
    versions = [r.tournament.version for r in seen]
    assert versions == sorted(versions)


def test_refusals_name_their_reason(farm: ServerFarm, sqlite_url: str) -> None:
    server = farm.start(sqlite_url, organiser_token=ORGANISER_TOKEN)
    with Client(server.target) as client:
        stub = client.stub
        settings = pb.TournamentSettings(format=pb.TOURNAMENT_FORMAT_SWISS, seats=2, rounds=1)
        with pytest.raises(grpc.RpcError) as anonymous:
            stub.CreateTournament(pb.CreateTournamentRequest(settings=settings))
        assert anonymous.value.code() == grpc.StatusCode.UNAUTHENTICATED  # type: ignore[attr-defined]
        with pytest.raises(grpc.RpcError) as bad_id:
            stub.GetTournament(pb.GetTournamentRequest(tournament_id="nope"))
        assert bad_id.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]
        with pytest.raises(grpc.RpcError) as missing:
            stub.GetTournament(
                pb.GetTournamentRequest(tournament_id="00000000-0000-4000-8000-000000000000")
            )
        assert missing.value.code() == grpc.StatusCode.NOT_FOUND  # type: ignore[attr-defined]
        tid = stub.CreateTournament(
            pb.CreateTournamentRequest(settings=settings), metadata=ORG
        ).tournament_id
        token = "bgs_" + secrets.token_urlsafe(32)
        ann = pb.RegisterEntrantRequest(tournament_id=tid, players=["ann"], player_tokens=[token])
        first, again = stub.RegisterEntrant(ann), stub.RegisterEntrant(ann)  # an answer lost
        assert (first.entrant, list(first.player_tokens)) == (1, [token])
        assert (again.entrant, list(again.player_tokens)) == (1, [token])
        with pytest.raises(grpc.RpcError) as taken:
            stub.RegisterEntrant(pb.RegisterEntrantRequest(tournament_id=tid, players=["ann"]))
        assert taken.value.code() == grpc.StatusCode.FAILED_PRECONDITION  # type: ignore[attr-defined]
        with pytest.raises(grpc.RpcError) as few:
            stub.StartTournament(pb.StartTournamentRequest(tournament_id=tid), metadata=ORG)
        assert few.value.code() == grpc.StatusCode.FAILED_PRECONDITION  # type: ignore[attr-defined]
        assert "TOO_FEW_ENTRANTS" in str(few.value.trailing_metadata())  # type: ignore[attr-defined]


@pytest.mark.postgres
@pytest.mark.slow
def test_two_replicas_one_killed_mid_tournament_lose_and_double_nothing(
    farm: ServerFarm, pg_database: str
) -> None:
    doomed = farm.start(pg_database, organiser_token=ORGANISER_TOKEN, name="doomed")
    other = farm.start(pg_database, organiser_token=ORGANISER_TOKEN, name="survivor")
    with Client(doomed.target) as a, Client(other.target) as b:
        tid, tokens = create_swiss(a)

        def first_result() -> bool:
            got = b.stub.GetTournament(pb.GetTournamentRequest(tournament_id=tid)).tournament
            return any(t.HasField("result") for r in got.rounds for t in r.tables)

        # Played through both replicas until a result is in, then one is killed outright.
        play_until(a, tid, tokens, first_result, 120)
        kill(doomed)
        play_until(b, tid, tokens, ended(b, tid), 120)
        check_record(b, tid)
    check_stored(pg_database, tid)


def kill(server: ServerProcess) -> None:
    server.kill()
    assert server.exit_code == -9


@pytest.mark.slow
def test_a_server_killed_as_each_match_ends_and_restarted_finishes_the_tournament_exactly(
    farm: ServerFarm, sqlite_url: str
) -> None:
    """Each kill comes as the server's manager has a step to take (record the result, pair the
    next round, create and seat its matches, end the tournament): the restarted server finds
    it undone, or half done, and does it once."""
    server = farm.start(sqlite_url, organiser_token=ORGANISER_TOKEN, name="run0")
    with Client(server.target) as client:
        tid, tokens = create_swiss(client)
    kills = 0
    finished = 0
    deadline = time.monotonic() + 120
    while True:
        assert time.monotonic() < deadline, "the tournament did not finish"
        with Client(server.target) as client:
            if play_some(client, tid, tokens):
                break
            ended_now = len(
                client.stub.ListMatches(pb.ListMatchesRequest(phase=pb.PHASE_ENDED)).matches
            )
        if ended_now > finished:
            finished = ended_now
            kill(server)
            kills += 1
            server = farm.start(sqlite_url, organiser_token=ORGANISER_TOKEN, name=f"run{kills}")
    assert kills >= ROUNDS  # at least once in each round (two matches may end in one pass)
    with Client(server.target) as client:
        record = check_record(client, tid)
        verify_pack(client, record, farm.workdir)
    check_stored(sqlite_url, tid)
