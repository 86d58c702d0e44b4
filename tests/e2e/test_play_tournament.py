"""`bergen play --tournament` in a terminal: a person registers (`--register --name`), and
plays each match the server seats them in, one after another, against bots entered by
`bergen bots --tournament`, until the tournament ends and its final standings are shown; the
entrant's tokens are kept where `bergen play --tournament ID` finds them again."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from bergen.domain.tournament_fairness import commitment
from bergen.v1 import bergen_pb2 as pb

from .client import Client
from .conftest import ORGANISER_TOKEN
from .servers import ServerFarm, bergen_command
from .test_bots_tournament import create, start_when_filled

pexpect = pytest.importorskip("pexpect")

pytestmark = pytest.mark.timeout(300)

PROMPT = r"choose \[1-(\d+)\] \(r resigns, q leaves\): "
SEATED = r"round (\d+), table \d+: match \S+, you are seat \d+"
STEP_TIMEOUT_S = 60


def spawn(args: list[str], state_dir: Path) -> pexpect.spawn:
    command = bergen_command()
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERGEN_")}
    env.update(BERGEN_STATE_DIR=str(state_dir), TERM="dumb", COLUMNS="120")
    return pexpect.spawn(
        command[0],
        [*command[1:], "play", *args],
        env=env,
        encoding="utf-8",
        timeout=STEP_TIMEOUT_S,
        dimensions=(40, 120),
    )


def test_a_player_registers_and_plays_every_round_to_the_end(
    farm: ServerFarm, sqlite_url: str, tmp_path: Path
) -> None:
    server = farm.start(sqlite_url, organiser_token=ORGANISER_TOKEN)
    with Client(server.target) as client:
        tid = create(client, seats=2, rounds=2)
        child = spawn(
            ["--server", server.target, "--tournament", tid, "--register", "--name", "ann"],
            tmp_path,
        )
        child.expect(rf"registered in tournament {tid} as entrant (\d+) \(ann\)")
        entrant = int(child.match.group(1))
        bots = subprocess.Popen(
            [*bergen_command(), "bots", "--server", server.target, "--tournament", tid,
             "--entrants", "3", "--policy", "greedy"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        try:
            start_when_filled(client, tid, 4)
            rounds_seen: set[int] = set()
            while True:
                i = child.expect([PROMPT, SEATED, rf"tournament {tid} ended after (\d+) round"])
                if i == 0:
                    child.sendline("1")
                elif i == 1:
                    rounds_seen.add(int(child.match.group(1)))
                else:
                    assert child.match.group(1) == "2"
                    break
            child.expect(pexpect.EOF)
            child.close()
            out, err = bots.communicate(timeout=120)
        finally:
            if bots.poll() is None:
                bots.kill()
                bots.communicate()
        assert bots.returncode == 0, err + out
        assert child.exitstatus == 0, child.before
        assert rounds_seen == {1, 2}
        final = client.stub.GetTournament(pb.GetTournamentRequest(tournament_id=tid)).tournament
        assert final.phase == pb.TOURNAMENT_PHASE_ENDED
    # Its final standings, the player's own line starred.
    mine = [line for line in str(child.before).splitlines() if line.startswith("*")]
    assert len(mine) == 1 and " ann " in mine[0] and f" {entrant} " in mine[0]
    saved = tmp_path / f"tournament-{tid}-{entrant}.json"
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    # The seed it made is kept beside the token; only its commitment was sent at
    # registration, and the player revealed it on its own once the tournament started.
    kept = json.loads(saved.read_text())["client_seed"]
    me = final.entrants[entrant - 1]
    assert me.client_seed_commitment == commitment(kept.encode())
    assert me.revealed and me.client_seed == kept
    assert not any(e.HasField("withdrawn_after_round") for e in final.entrants)
    # Run again, the saved token finds the player's entrant: the tournament has ended.
    again = spawn(["--server", server.target, "--tournament", tid], tmp_path)
    again.expect(rf"tournament {tid} ended after 2 round\(s\)")
    again.expect(pexpect.EOF)
    again.close()
    assert again.exitstatus == 0


def test_play_without_a_saved_registration_says_how_to_register(
    farm: ServerFarm, sqlite_url: str, tmp_path: Path
) -> None:
    server = farm.start(sqlite_url, organiser_token=ORGANISER_TOKEN)
    with Client(server.target) as client:
        tid = create(client, seats=2, rounds=1)
    child = spawn(["--server", server.target, "--tournament", tid], tmp_path)
    child.expect(rf"no registration saved for tournament {tid}; --register --name NAME")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 2
