"""Tournaments at their sizes, end to end through real processes: a 16-entrant 5-round Swiss
at 2-seat tables and a 6-pair double round robin at partnership tables on PostgreSQL with two
replicas of one database, a 10-entrant Swiss at 4-seat individual tables on SQLite with one
`bergen serve` (the backend is not what this is about: conftest.on_backend), are created by
`bergen tournament create`, filled by `bergen bots` (one process per replica, each registering
its share of the entrants), started by `bergen tournament start` (the organiser's one step: a
tournament does not start by itself), played to their end with no other organiser action,
exported by `bergen tournament export` and accepted by `bergen verify DIR`; the same pack with
one field changed (a pairing's sides, a standing's figure, a match's action, a seed, a
manifest hash), signed again by the server's key where the change needs it, is rejected
naming its place."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from unit.test_tournament_pack import (
    Pack,
    change_action,
    change_seat_seed,
    change_standing,
    change_tournament_seed,
    half_more,
    in_match,
    swap_sides,
)

from bergen.api.exit_status import ExitStatus
from bergen.api.signing import RecordSigner
from bergen.cli_client.tournament_pack import (
    MANIFEST_FILE,
    TOURNAMENT_FILE,
    build_manifest,
    file_bytes,
)
from bergen.cli_client.verify import verify_pack
from bergen.v1 import bergen_pb2 as pb

from .client import Client
from .conftest import ORGANISER_TOKEN, backend_param
from .servers import ServerFarm, ServerProcess, bergen_command
from .test_bots_tournament import bots
from .test_cli_tournament import bergen, environment, ok

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

T = TOURNAMENT_FILE

# name: (`bergen tournament create` arguments, entrants, rounds played, backend)
RUNS = {
    "16-entrant 5-round swiss at 2 seats": (
        ["--format", "swiss", "--rounds", "5", "--seats", "2"],
        16,
        5,
        "postgresql",
    ),
    "10-entrant swiss at 4 individual seats": (
        ["--format", "swiss", "--rounds", "3", "--seats", "4"],
        10,
        3,
        "sqlite",
    ),
    "6-pair double round robin at partnership tables": (
        ["--format", "double_round_robin", "--seats", "4", "--partnerships"],
        6,
        10,
        "postgresql",
    ),
}


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def replicas(
    request: pytest.FixtureRequest, farm: ServerFarm, sqlite_url: str
) -> list[ServerProcess]:
    """One server on SQLite, or two replicas of one PostgreSQL database."""
    if request.param == "sqlite":
        return [farm.start(sqlite_url, organiser_token=ORGANISER_TOKEN)]
    url: str = request.getfixturevalue("pg_database")
    return [farm.start(url, organiser_token=ORGANISER_TOKEN, name=f"replica{i}") for i in (1, 2)]


def wait_filled(server: ServerProcess, tid: str, entrants: int) -> None:
    """Follow the tournament's stream until `entrants` are registered."""
    with Client(server.target) as client:
        stream = client.stub.WatchTournament(
            pb.WatchTournamentRequest(tournament_id=tid), timeout=120
        )
        for reply in stream:
            if len(reply.tournament.entrants) >= entrants:
                stream.cancel()
                return
    raise AssertionError(f"the stream of {tid} ended before {entrants} entrants registered")


def write(pack: Pack, folder: Path, signer: RecordSigner, resign: set[str]) -> Path:
    """The pack written into `folder`, the files named in `resign` signed again by the
    server's key and the manifest made again for the files as they now are, unless the
    manifest itself is named in `resign` (then only signed again as changed)."""
    (folder / "matches").mkdir(parents=True)
    data: dict[str, bytes] = {}
    for path, record in pack.files.items():
        if path != MANIFEST_FILE:
            data[path] = file_bytes(signer.sign(record) if path in resign else record)
    manifest = pack.files[MANIFEST_FILE]
    if MANIFEST_FILE not in resign:
        manifest = build_manifest(pack.tournament["tournament_id"], data, signer.public_key)
    data[MANIFEST_FILE] = file_bytes(signer.sign(manifest))
    for path, raw in data.items():
        (folder / path).write_bytes(raw)
    return folder


def _manifest_hash(pack: Pack) -> str:
    path, _ = pack.match(1, 1)
    pack.files[MANIFEST_FILE]["files"][path] = "0" * 64
    return MANIFEST_FILE


# (name, change returning the file it changed or None for the tournament record, the place
# named: a function of the pack and the changed file)
CHANGES: list[tuple[str, Callable[[Pack], Any], Callable[[Pack, str], str]]] = [
    ("a pairing's sides", swap_sides, lambda p, f: f"{T}, rounds[1].tables[0].sides"),
    (
        "a standing's match points",
        change_standing("match_points", 0, half_more),
        lambda p, f: f"{T}, standings",
    ),
    (
        "a match's action",
        in_match(change_action),
        lambda p, f: f"{f} (round 1, table 1), hand 1, action ",
    ),
    (
        "a seat's client seed",
        in_match(change_seat_seed, 2, 1),
        lambda p, f: f"{f} (round 2, table 1), seats[0].client_seed",
    ),
    ("the tournament seed", change_tournament_seed, lambda p, f: f"{T}, commitment"),
    ("a manifest hash", _manifest_hash, lambda p, f: p.match(1, 1)[0]),
]


def verify(folder: Path, public_key: str) -> tuple[int, dict[str, Any]]:
    """`bergen verify DIR`: its exit status and its --json."""
    done = subprocess.run(
        [*bergen_command(), "verify", str(folder), "--public-key", public_key, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode, json.loads(done.stdout)


def verify_here(folder: Path, public_key: str) -> tuple[int, dict[str, Any]]:
    """The same verdict from the check `bergen verify DIR` runs, in this process: for the
    changed packs, each one process fewer to start."""
    outcome = verify_pack(folder, public_key)
    return outcome.status, outcome.as_json()


@pytest.mark.parametrize(
    ("replicas", "run"),
    [backend_param(backend, run) for run, (*_, backend) in RUNS.items()],
    indirect=["replicas"],
)
def test_a_tournament_at_its_size_is_filled_by_bots_played_exported_and_verified(
    farm: ServerFarm, replicas: list[ServerProcess], tmp_path: Path, run: str
) -> None:
    create_args, entrants, rounds, _ = RUNS[run]
    first, last = replicas[0], replicas[-1]
    env = environment(first.target, tmp_path / "state", BERGEN_ORGANISER_TOKEN=ORGANISER_TOKEN)
    out = ok(
        bergen(env, "tournament", "create", "--name", "size cup", *create_args, "--target", "3")
    )
    found = re.search(r"^tournament (\S+)$", out, re.M)
    assert found is not None, out
    tid = found[1]

    # One bots process per replica, each registering its share of the entrants.
    shares = [
        entrants // len(replicas) + (i < entrants % len(replicas)) for i in range(len(replicas))
    ]
    # A bot is named after its policy and its number in its process ("greedy1", "random2"...)
    # and a name is registered once: the second process takes the policies in the other turn.
    policies = [("greedy", "random"), ("random", "greedy")]
    with ExitStack() as stack:
        procs = [
            stack.enter_context(
                bots(
                    server,
                    "--tournament",
                    tid,
                    "--entrants",
                    str(share),
                    "--policy",
                    *policies[i],
                    "--seed",
                    f"run{i}",
                    "--json",
                )
            )
            for i, (server, share) in enumerate(zip(replicas, shares, strict=True))
        ]
        wait_filled(last, tid, entrants)
        # The organiser's one step: nothing more is done by hand until the end.
        # It closes registration; the bots reveal their seeds on their own, then round 1.
        started = ok(bergen(dict(env, BERGEN_SERVER=last.target), "tournament", "start", tid))
        assert started.startswith("registration closed; the entrants reveal their seeds")
        reports = []
        for proc in procs:
            stdout, stderr = proc.communicate(timeout=240)
            assert proc.returncode == 0, stderr + stdout
            reports.append(json.loads(stdout))

    with Client(first.target) as client:
        got = client.stub.GetTournament(pb.GetTournamentRequest(tournament_id=tid)).tournament
    assert got.phase == pb.TOURNAMENT_PHASE_ENDED
    assert got.round == rounds == len(got.rounds)
    assert len(got.entrants) == entrants
    assert sorted(got.seeding) == list(range(1, entrants + 1))  # every bot revealed in time
    assert all(t.HasField("result") for r in got.rounds for t in r.tables)
    paired = {t.match_id for r in got.rounds for t in r.tables if t.match_id}
    # Every match was played by the bots that registered its entrants, through both replicas.
    assert set().union(*(set(r["matches"]) for r in reports)) == paired
    for report in reports:
        assert [(s["entrant"], s["match_points"]) for s in report["standings"]] == [
            (s.entrant, s.match_points) for s in got.standings
        ]

    key = farm.workdir / "signing-key.pem"
    signer = RecordSigner.load_or_create(key)
    folder = tmp_path / "pack"
    exported = ok(bergen(env, "tournament", "export", tid, "--out", str(folder)))
    assert f"{len(paired) + 2} files" in exported
    status, verdict = verify(folder, signer.public_key)
    assert status == ExitStatus.SUCCESS, verdict
    assert verdict["verdict"].startswith(f"OK: tournament {tid}")
    assert (verdict["rounds"], verdict["matches"]) == (rounds, len(paired))

    pack = Pack.of({str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*.json")})
    for what, change, where in CHANGES:
        changed = pack.copy()
        path = change(changed) or TOURNAMENT_FILE
        written = write(changed, tmp_path / what, signer, {path})
        status, verdict = verify_here(written, signer.public_key)
        assert status == ExitStatus.INVALID, (what, verdict)
        assert verdict["verdict"].startswith("REJECTED: "), (what, verdict)
        assert verdict["where"].startswith(where(changed, path)), (what, verdict)
    assert "SHA-256" in verdict["why"], verdict  # the last: the manifest's hash of a match
