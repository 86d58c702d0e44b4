"""`bergen tournament` as processes against a real server: a 4-entrant Swiss created,
filled and started by the command line, followed by `watch` from before its first entrant
to its end, played by its players' saved tokens, then shown (standings with every tie-break
figure, the crosstable, the last round's tables) and exported to an audit pack that
`bergen verify DIR` accepts."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from bergen.api.exit_status import ExitStatus
from bergen.v1 import bergen_pb2 as pb

from .client import Client
from .conftest import ORGANISER_TOKEN
from .servers import ServerFarm, bergen_command
from .test_tournaments import ended, play_until

pytestmark = [pytest.mark.timeout(180)]

ENTRANTS = 4
ROUNDS = 2


def environment(server: str, state: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERGEN_")}
    env.update(BERGEN_SERVER=server, BERGEN_STATE_DIR=str(state), **extra)
    return env


def bergen(
    env: dict[str, str], *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`bergen ARGS`, in the folder of the state folder `env` names (no organiser token file
    of the working tree's is found there), or in `cwd`."""
    where = cwd or Path(env.get("BERGEN_STATE_DIR", ".")).parent
    return subprocess.run(
        [*bergen_command(), *args], capture_output=True, text=True, env=env, cwd=where, timeout=60
    )


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def create_and_fill(env: dict[str, str], state: Path) -> tuple[str, dict[int, str]]:
    """A Swiss created and 4 entrants registered by the command line; their saved tokens."""
    out = ok(
        bergen(
            env,
            "tournament",
            "create",
            "--name",
            "cli cup",
            "--format",
            "swiss",
            "--rounds",
            str(ROUNDS),
            "--seats",
            "2",
            "--target",
            "3",
        )
    )
    tid = re.search(r"^tournament (\S+)$", out, re.M)
    assert tid is not None, out
    assert re.search(r"^commitment [0-9a-f]{64}$", out, re.M), out
    tokens: dict[int, str] = {}
    for i in range(ENTRANTS):
        out = ok(
            bergen(
                env, "tournament", "register", tid[1], "--name", f"p{i}", "--client-seed", f"c{i}"
            )
        )
        entrant = int(re.search(r"^entrant (\d+)$", out, re.M)[1])  # type: ignore[index]
        saved = state / f"tournament-{tid[1]}-{entrant}.json"
        assert stat.S_IMODE(saved.stat().st_mode) == 0o600
        data = json.loads(saved.read_text())
        assert data["entrant"] == entrant
        assert [p["name"] for p in data["players"]] == [f"p{i}"]
        tokens[entrant] = data["players"][0]["token"]
    assert sorted(tokens) == [1, 2, 3, 4]
    return tid[1], tokens


def columns(line: str) -> list[str]:
    return line.split()


def section(text: str, heading: str) -> list[str]:
    """The lines under `heading` up to the next blank line."""
    lines = text.splitlines()
    start = lines.index(heading) + 1
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start:end]


def test_a_swiss_is_run_shown_watched_and_exported_from_the_command_line(
    farm: ServerFarm, sqlite_url: str, tmp_path: Path
) -> None:
    server = farm.start(sqlite_url, organiser_token=ORGANISER_TOKEN)
    state = tmp_path / "state"
    env = environment(server.target, state, BERGEN_ORGANISER_TOKEN=ORGANISER_TOKEN)
    anonymous = environment(server.target, state)
    refused = bergen(anonymous, "tournament", "create", "--rounds", "1")
    assert refused.returncode == ExitStatus.USAGE
    assert "organiser token" in refused.stderr

    tid, tokens = create_and_fill(env, state)
    watcher = subprocess.Popen(
        [*bergen_command(), "tournament", "watch", tid],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=anonymous,
    )
    try:
        assert watcher.stdout is not None
        # Its first line says the stream is open: the start is then seen as a change.
        first = watcher.stdout.readline()
        out = ok(bergen(env, "tournament", "start", tid))
        assert out.startswith("registration closed; the entrants reveal their seeds"), out
        # Each entrant reveals the seed `register` made and kept beside its token.
        for entrant in sorted(tokens):
            out = ok(bergen(anonymous, "tournament", "reveal", tid, str(entrant)))
            assert (
                out
                == f"entrant {entrant}: seed revealed; {4 - entrant} entrant(s) still to reveal\n"
            )
        with Client(server.target) as client:
            play_until(client, tid, tokens, ended(client, tid), 120)
            record: dict[str, Any] = json.loads(
                client.stub.GetTournamentRecord(
                    pb.GetTournamentRecordRequest(tournament_id=tid)
                ).record_json
            )
        watched, errors = watcher.communicate(timeout=60)
    finally:
        watcher.kill()
    assert watcher.returncode == 0, errors

    # watch: the rounds started, each table's end, the standings and the end, in order.
    lines = [first.rstrip("\n"), *watched.splitlines()]
    assert lines[0].startswith(f"tournament {tid}: registration")
    assert [x for x in lines if x.startswith("round") and "started" in x] == [
        f"round {r} started: 2 tables" for r in (1, 2)
    ]
    # The close, each entrant's seed revealed, then round 1.
    closed = lines.index("registration closed: the entrants reveal their seeds")
    revealed = [x for x in lines if x.endswith("revealed its seed")]
    assert revealed == [f"p{i} (#{i + 1}) revealed its seed" for i in range(ENTRANTS)]
    assert closed < lines.index(revealed[0]) < lines.index("round 1 started: 2 tables")
    tables = [x for x in lines if re.match(r"round \d table \d ended", x)]
    assert len(tables) == ROUNDS * ENTRANTS // 2
    assert lines.index("round 2 started: 2 tables") > lines.index(tables[1])
    players = {e["entrant"]: e["players"][0] for e in record["entrants"]}
    final = ", ".join(
        f"{s['rank']}. {players[s['entrant']]} (#{s['entrant']}) {s['match_points']} MP"
        for s in record["standings"]
    )
    first = record["standings"][0]
    winner = f"{players[first['entrant']]} (#{first['entrant']}), {first['match_points']} match"
    assert lines[-3:-1] == [f"standings: {final}", "tournament ended"]
    # Who won: the first, or the first place shared by those equal in every figure.
    assert lines[-1].startswith(("winner: " + winner, "shared first place: ")), lines[-1]

    # show: every tie-break column, with the record's figures.
    shown = ok(bergen(anonymous, "tournament", "show", tid))
    standings = section(shown, "Standings")
    assert columns(standings[0]) == [
        "Rank",
        "Entrant",
        "Players",
        "MP",
        "Margin",
        "Buchholz",
        "Wins",
    ]
    names = {e["entrant"]: e["players"][0] for e in record["entrants"]}
    assert [columns(x) for x in standings[1:]] == [
        [
            str(s["rank"]),
            str(s["entrant"]),
            names[s["entrant"]],
            s["match_points"],
            f"{s['margin']:+d}",
            s["buchholz"],
            str(s["wins"]),
        ]
        for s in record["standings"]
    ]
    # Each of the 4 had 2 two-sided matches: the match points sum to the matches played.
    assert sum(Fraction(s["match_points"]) for s in record["standings"]) == ROUNDS * 2
    # The crosstable: each entrant's opponent and match points in each round.
    cross = section(shown, "Crosstable")
    assert columns(cross[0]) == ["Entrant", "R1", "R2", "MP"]
    for row, s in zip(cross[1:], record["standings"], strict=True):
        e = s["entrant"]
        cells = [str(e)]
        for r in record["rounds"]:
            (t,) = [t for t in r["tables"] if [e] in t["sides"]]
            side = t["sides"].index([e])
            (other,) = [x[0] for x in t["sides"] if x != [e]]
            cells += [f"v{other}", t["result"]["match_points"][side]]
        assert columns(row) == [*cells, s["match_points"]]
    # Entrant by entrant: the row's match points against the column's entrant, "." for a
    # pair that never met, "x" on the diagonal; both sides of a meeting agree with its result.
    grid = section(shown, "Crosstable, entrant by entrant")
    order = [s["entrant"] for s in record["standings"]]
    assert columns(grid[0]) == ["#", "Entrant", *(str(i + 1) for i in range(len(order))), "MP"]
    expected: dict[tuple[int, int], str] = {}
    for r in record["rounds"]:
        for t in r["tables"]:
            (a,), (b,) = t["sides"]
            expected[a, b], expected[b, a] = t["result"]["match_points"]
    for i, (row, s) in enumerate(zip(grid[1:], record["standings"], strict=True)):
        e = s["entrant"]
        cells = ["x" if e == o else expected.get((e, o), ".") for o in order]
        assert columns(row) == [str(i + 1), str(e), *cells, s["match_points"]]
    assert (
        sum(columns(row)[2:-1].count(".") for row in grid[1:])
        == len(order) * (len(order) - 1) - 2 * ROUNDS * len(order) // 2
    )
    last = section(shown, "Round 2")
    assert len(last) == 2 and all("ended" in x for x in last)

    as_json = json.loads(ok(bergen(anonymous, "tournament", "show", tid, "--json")))
    assert as_json["tournament_id"] == tid
    assert [s["entrant"] for s in as_json["standings"]] == [
        s["entrant"] for s in record["standings"]
    ]

    # export: the audit pack of the served records, accepted by bergen verify DIR. Anyone may
    # export it: the server signs the manifest (GetAuditManifest), no key is needed here.
    pack = tmp_path / "pack"
    out = ok(bergen(anonymous, "tournament", "export", tid, "--out", str(pack)))
    assert f"{ROUNDS * ENTRANTS // 2 + 2} files" in out
    served = json.loads((pack / "tournament.json").read_text())
    assert served == record  # written as the server signed it
    verified = ok(bergen(anonymous, "verify", str(pack)))
    assert verified.startswith(f"OK: tournament {tid}")
    # Every record's checkpoint and proof checked, the tournament record's included.
    assert "every record logged in the transparency log" in verified
    assert served["transparency"]["tree_size"] == served["transparency"]["leaf_index"] + 1
    manifest = json.loads((pack / "manifest.json").read_text())
    assert manifest["public_key"] == record["signature"]["public_key"]
    assert set(manifest["files"]) == {"tournament.json"} | {
        f"matches/{t['match_id']}.json" for r in record["rounds"] for t in r["tables"]
    }
    again = bergen(anonymous, "tournament", "export", tid, "--out", str(pack))
    assert again.returncode == ExitStatus.USAGE
    assert "not an empty folder" in again.stderr
    elsewhere = tmp_path / "p2"
    ok(bergen(anonymous, "tournament", "export", tid, "--out", str(elsewhere)))
    assert {p.name: p.read_bytes() for p in elsewhere.rglob("*.json")} == {
        p.name: p.read_bytes() for p in pack.rglob("*.json")
    }


def test_an_entrant_registered_from_here_withdraws_with_its_saved_token(
    farm: ServerFarm, sqlite_url: str, tmp_path: Path
) -> None:
    server = farm.start(sqlite_url, organiser_token=ORGANISER_TOKEN)
    state = tmp_path / "state"
    env = environment(server.target, state, BERGEN_ORGANISER_TOKEN=ORGANISER_TOKEN)
    tid, _ = create_and_fill(env, state)
    anonymous = environment(server.target, state)
    out = ok(bergen(anonymous, "tournament", "withdraw", tid, "3"))
    assert out.strip() == "entrant 3 withdrawn after round 0"
    (state / f"tournament-{tid}-4.json").unlink()
    # Without its saved token nor the organiser's, nothing is sent.
    refused = bergen(anonymous, "tournament", "withdraw", tid, "4")
    assert refused.returncode == ExitStatus.USAGE
    assert "no token of entrant 4" in refused.stderr
    shown = json.loads(ok(bergen(anonymous, "tournament", "show", tid, "--json")))
    withdrawn = {e["entrant"] for e in shown["entrants"] if "withdrawn_after_round" in e}
    assert withdrawn == {3}
