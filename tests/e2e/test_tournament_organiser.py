"""What an organiser needs to run a tournament on the server a newcomer starts, through real
`bergen serve` and `bergen` processes: the server makes its organiser token on first start
and the organiser's commands on this machine find it with no option; an unclocked
tournament with a no-show is settled table by table (its side forfeited, or the match
abandoned) and runs to its end, shown, watched, exported and verified; a tournament that
never starts is cancelled, its waiting entrants told."""

from __future__ import annotations

import json
import re
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from bergen.api.exit_status import ExitStatus
from bergen.v1 import bergen_pb2 as pb

from .client import Client
from .conftest import ORGANISER_TOKEN, backend_param, on_backend
from .servers import ServerFarm, ServerProcess, bergen_command
from .test_bots_tournament import bots
from .test_cli_tournament import bergen, environment, ok

pytestmark = [pytest.mark.timeout(300)]

NO_SHOW = "absent"
WAIT_S = 120.0


def _json(done: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(ok(done))


def _wait_for(what: Any, timeout: float = WAIT_S) -> Any:
    end = time.monotonic() + timeout
    while True:
        got = what()
        if got:
            return got
        assert time.monotonic() < end, "timed out waiting"
        time.sleep(0.05)


def _view(client: Client, tid: str) -> pb.TournamentView:
    reply = client.stub.GetTournament(pb.GetTournamentRequest(tournament_id=tid))
    return reply.tournament


def _settle_the_no_show(
    env: dict[str, str], client: Client, tid: str, no_show: int, how: str
) -> list[dict[str, Any]]:
    """Settle every table of the no-show's, as each round seats it, until the end; returns
    what each settlement printed. A table whose match is not seated yet is tried again."""
    settled: list[dict[str, Any]] = []
    end = time.monotonic() + WAIT_S
    while True:
        view = _view(client, tid)
        if view.phase == pb.TOURNAMENT_PHASE_ENDED:
            return settled
        assert time.monotonic() < end, "the tournament did not end in time"
        stuck = [
            (r.round, t)
            for r in view.rounds[-1:]
            for t in r.tables
            if no_show in t.sides and not t.HasField("result")
        ]
        for rnd, table in stuck:
            action = ["--abandon"]
            if how == "forfeit":
                action = ["--forfeit", str(list(table.sides).index(no_show) + 1)]
            done = bergen(
                env, "tournament", "settle", tid, "--round", str(rnd), "--table",
                str(table.table), *action, "--note", "did not come", "--json",
            )  # fmt: skip
            if done.returncode != 0 and re.search(
                r"\((TABLE_NOT_READY|MATCH_STILL_SEATING)\)", done.stderr
            ):
                continue  # paired, its match not seated yet
            settled.append({"round": rnd, "sides": list(table.sides), **_json(done)})
        time.sleep(0.05)


# The backend is not what this is about (conftest.on_backend): each way runs on one of them.
@pytest.mark.parametrize(
    ("database", "how"),
    [backend_param("sqlite", "forfeit"), backend_param("postgresql", "abandon")],
    indirect=["database"],
)
def test_a_no_show_settled_by_the_organiser_lets_an_unclocked_tournament_end(
    farm: ServerFarm, database: str, tmp_path: Path, how: str
) -> None:
    server = farm.start(database, organiser_token=ORGANISER_TOKEN)
    state = tmp_path / "state"
    env = environment(server.target, state, BERGEN_ORGANISER_TOKEN=ORGANISER_TOKEN)
    anonymous = environment(server.target, state)
    # To the standard target: a bot cannot end a match alone before its opponent's turn.
    create = ["tournament", "create", "--name", "no-show cup", "--rounds", "2", "--json"]
    created = _json(bergen(env, *create))
    tid = created["tournament_id"]
    no_show = _json(bergen(env, "tournament", "register", tid, "--name", NO_SHOW, "--json"))
    assert no_show["entrant"] == 1
    watcher = subprocess.Popen(
        [*bergen_command(), "tournament", "watch", tid],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=anonymous,
    )  # fmt: skip
    try:
        with (
            Client(server.target) as client,
            bots(server, "--tournament", tid, "--entrants", "2", "--seed", "e2e") as proc,
        ):
            _wait_for(lambda: len(_view(client, tid).entrants) == 3)
            ok(bergen(env, "tournament", "start", tid))
            # The no-show reveals its seed (from here, where `register` kept it), so it is
            # paired, but it never comes to its tables.
            ok(bergen(anonymous, "tournament", "reveal", tid, "1"))
            settled = _settle_the_no_show(env, client, tid, 1, how)
            out, err = proc.communicate(timeout=WAIT_S)
        assert proc.returncode == 0, err + out
        watched, errors = watcher.communicate(timeout=WAIT_S)
    finally:
        watcher.kill()
    assert watcher.returncode == 0, errors
    # The no-show sat at a table in at least one of the two rounds; each was settled.
    assert settled, "the no-show was never seated"
    for s in settled:
        side = s["sides"].index(1)
        result = s["result"]
        if how == "forfeit":
            assert result["reason"] == "MATCH_END_REASON_FORFEIT"
            assert result["forfeited_side"] == side
            assert result["places"][side] == 2
        else:
            assert result["reason"] == "MATCH_END_REASON_ABANDONED"
            assert result["places"] == [1, 1]

    # The record, as exported, says who settled what; the pack verifies.
    pack = tmp_path / "pack"
    ok(bergen(anonymous, "tournament", "export", tid, "--out", str(pack)))
    record = json.loads((pack / "tournament.json").read_text())
    assert record["ended"] is True and len(record["rounds"]) == 2
    assert [(i["action"], i["by"], i["round"], i["reason"]) for i in record["interventions"]] == [
        (how, "organiser", s["round"], "did not come") for s in settled
    ]
    verified = ok(bergen(anonymous, "verify", str(pack)))
    assert verified.startswith(f"OK: tournament {tid}")
    assert f"{len(settled)} intervention" in verified

    # show: the interventions in words, and who won.
    shown = ok(bergen(anonymous, "tournament", "show", tid))
    verb = "forfeited" if how == "forfeit" else "abandoned the match"
    lines = shown.splitlines()
    interventions = lines[lines.index("Interventions") + 1 :]
    assert interventions[0].startswith(f"  round {settled[0]['round']} table ")
    assert f"the organiser {verb}" in interventions[0]
    assert interventions[0].endswith(': "did not come"')
    assert re.search(r"^  (Winner|Shared first place): .+\(#\d\)", shown, re.M), shown
    # watch: the same, as it happened, and who won at the end.
    assert f"the organiser {verb}" in watched
    assert re.search(r"^(winner|shared first place): ", watched.splitlines()[-1]), watched
    assert f"{NO_SHOW} (#1)" in watched


@on_backend("postgresql")
def test_a_tournament_that_never_starts_is_cancelled_and_its_entrants_told(
    farm: ServerFarm, database: str, tmp_path: Path
) -> None:
    server = farm.start(database, organiser_token=ORGANISER_TOKEN)
    state = tmp_path / "state"
    env = environment(server.target, state, BERGEN_ORGANISER_TOKEN=ORGANISER_TOKEN)
    anonymous = environment(server.target, state)
    tid = _json(bergen(env, "tournament", "create", "--rounds", "2", "--json"))["tournament_id"]
    with Client(server.target) as client, bots(server, "--tournament", tid, "--entrants", "2") as p:
        _wait_for(lambda: len(_view(client, tid).entrants) == 2)
        refused = bergen(anonymous, "tournament", "cancel", tid)
        assert refused.returncode == ExitStatus.USAGE
        assert "(NO_ORGANISER_TOKEN)" in refused.stderr
        done = _json(bergen(env, "tournament", "cancel", tid, "--note", "hall closed", "--json"))
        assert done == {"tournament_id": tid, "cancelled": True}
        # The bots waiting for the start see the end, and stop.
        out, err = p.communicate(timeout=WAIT_S)
    assert p.returncode == 0, err + out
    assert f'tournament {tid} cancelled before its start: "hall closed"' in out
    late = bergen(env, "tournament", "register", tid, "--name", "late")
    assert late.returncode == ExitStatus.REFUSED
    assert "cancelled before its start (TOURNAMENT_CANCELLED)" in late.stderr
    again = bergen(env, "tournament", "start", tid)
    assert "(TOURNAMENT_CANCELLED)" in again.stderr
    shown = ok(bergen(anonymous, "tournament", "show", tid))
    assert '  Cancelled before its start: "hall closed"' in shown
    assert "the organiser cancelled the tournament" in shown
    # Its pack: the record alone, signed; it verifies as a tournament cancelled.
    pack = tmp_path / "pack"
    exported = _json(bergen(anonymous, "tournament", "export", tid, "--out", str(pack), "--json"))
    assert exported["files"] == 2
    record = json.loads((pack / "tournament.json").read_text())
    assert record["ended"] is True and record["seeding"] is None and record["tournament_seed"]
    verified = ok(bergen(anonymous, "verify", str(pack)))
    assert verified.startswith(f"OK: tournament {tid}") and "cancelled before its start" in verified


def _serve_here(
    farm: ServerFarm, database: str, folder: Path, state: Path, *args: str
) -> ServerProcess:
    """`bergen serve` in `folder` with no option but its address: its keys in the folder."""
    return farm.start(
        database,
        own_token=True,
        cwd=folder,
        env={"BERGEN_STATE_DIR": str(state), "BERGEN_SIGNING_KEY": None},
        extra_args=args,
    )


def test_the_server_makes_its_organiser_token_and_the_organisers_commands_find_it(
    farm: ServerFarm, sqlite_url: str, tmp_path: Path
) -> None:
    folder, elsewhere, state = tmp_path / "club", tmp_path / "elsewhere", tmp_path / "state"
    folder.mkdir()
    elsewhere.mkdir()
    server = _serve_here(farm, sqlite_url, folder, state)
    token_file = folder / "bergen-organiser-token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    token = token_file.read_text().strip()
    # The server logs from a thread of its own: its lines may come after the port file.
    _wait_for(lambda: "organiser token file named for" in server.log())
    log = server.log()
    assert f"organiser token made now in {token_file}" in log
    assert token not in log
    (pointer,) = state.glob("organiser-token-for-*.json")
    assert stat.S_IMODE(pointer.stat().st_mode) == 0o600
    assert json.loads(pointer.read_text())["token_file"] == str(token_file)
    assert token not in pointer.read_text()

    def create(
        where: Path, server_address: str, state_dir: Path
    ) -> subprocess.CompletedProcess[str]:
        env = environment(server_address, state_dir)
        return subprocess.run(
            [*bergen_command(), "tournament", "create", "--rounds", "1", "--json"],
            capture_output=True, text=True, env=env, cwd=where, timeout=60,
        )  # fmt: skip

    # From the server's folder and from another, the same state folder: no option at all.
    for where in (folder, elsewhere):
        assert json.loads(ok(create(where, server.target, state)))["tournament_id"]
    # Any listener of this machine on that port is that server.
    ok(create(elsewhere, f"localhost:{server.port}", state))
    # Another state folder: the server's folder still holds the token (a local server).
    ok(create(folder, server.target, tmp_path / "other-state"))
    lost = create(elsewhere, server.target, tmp_path / "other-state")
    assert lost.returncode == ExitStatus.USAGE
    assert lost.stderr.startswith(
        f"bergen tournament create: needs the organiser token of {server.target}: give "
        "--organiser-token-file FILE or set BERGEN_ORGANISER_TOKEN"
    ), lost.stderr
    assert lost.stderr.rstrip().endswith("(NO_ORGANISER_TOKEN)")

    # A second start keeps the token, and names it for its new address.
    assert server.terminate() == 0
    again = _serve_here(farm, sqlite_url, folder, state)
    assert token_file.read_text().strip() == token
    _wait_for(lambda: f"organiser token read from {token_file}" in again.log())
    assert (state / f"organiser-token-for-local-{again.port}.json").exists()
    ok(create(elsewhere, again.target, state))
    assert again.terminate() == 0

    # A weak token file is refused at the start, in one line that does not repeat it.
    token_file.write_text("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n")
    refused = subprocess.run(
        [*bergen_command(), "serve", "--listen", "127.0.0.1:0", "--database", sqlite_url],
        capture_output=True, text=True, cwd=folder, timeout=60,
        env=environment("unused:1", state),
    )  # fmt: skip
    assert refused.returncode == ExitStatus.USAGE, refused.stderr
    assert refused.stderr.startswith(f"bergen serve: organiser token file {token_file}: ")
    assert "aaaa" not in refused.stderr

    # --no-organiser: no token made, none named; the organiser's commands are refused.
    bare = tmp_path / "bare"
    bare.mkdir()
    # A start refused for its arguments makes no token file either.
    clear = subprocess.run(
        [*bergen_command(), "serve", "--listen", "0.0.0.0:0", "--database", sqlite_url],
        capture_output=True, text=True, cwd=bare, timeout=60,
        env=environment("unused:1", state),
    )  # fmt: skip
    assert clear.returncode == ExitStatus.USAGE, clear.stderr
    assert len(clear.stderr.splitlines()) == 1, clear.stderr
    assert not (bare / "bergen-organiser-token").exists()
    nobody = _serve_here(farm, sqlite_url.replace("bergen.db", "bare.db"), bare, state,
                         "--no-organiser")  # fmt: skip
    assert not (bare / "bergen-organiser-token").exists()
    assert not any(state.glob(f"organiser-token-for-local-{nobody.port}.json"))
    _wait_for(lambda: "no organiser token" in nobody.log())
    given = environment(nobody.target, state, BERGEN_ORGANISER_TOKEN=token)
    done = subprocess.run(
        [*bergen_command(), "tournament", "create", "--rounds", "1"],
        capture_output=True, text=True, env=given, cwd=bare, timeout=60,
    )  # fmt: skip
    assert done.returncode == ExitStatus.REFUSED, done.stderr
    assert "this server has none (it was started with --no-organiser) (NO_ORGANISER)" in (
        done.stderr
    )
