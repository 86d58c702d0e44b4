"""`bergen play` in a pseudo-terminal against a real server: a whole match against a bot,
choosing plays by number, and a client killed mid-match that resumes as the same seat."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bergen.v1 import bergen_pb2 as pb

from .client import Client
from .servers import ServerFarm, ServerProcess, bergen_command

pexpect = pytest.importorskip("pexpect")

pytestmark = pytest.mark.timeout(300)

PROMPT = r"choose \[1-(\d+)\] \(r resigns, q leaves\): "
END = r"match over: (you win|seat \d \([^)]*\) wins); final scores"
STEP_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def server(module_farm: ServerFarm, module_sqlite_url: str) -> Iterator[ServerProcess]:
    yield module_farm.start(module_sqlite_url)


def spawn(args: list[str], state_dir: Path) -> pexpect.spawn:
    command = bergen_command()
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERGEN_")}
    # A terminal without colours, so the expected text is not split by escape codes.
    env.update(BERGEN_STATE_DIR=str(state_dir), TERM="dumb", COLUMNS="120")
    child = pexpect.spawn(
        command[0],
        [*command[1:], "play", *args],
        env=env,
        encoding="utf-8",
        timeout=STEP_TIMEOUT_S,
        dimensions=(40, 120),
    )
    return child


def play_on(child: pexpect.spawn, moves: int | None = None, choose: str = "last") -> int:
    """Answer prompts (the last play listed, or the first) until the match ends or `moves`
    plays were made. Returns the plays made."""
    made = 0
    while moves is None or made < moves:
        i = child.expect([PROMPT, END])
        if i == 1:
            return made
        count = int(child.match.group(1))
        child.sendline(str(count if choose == "last" else 1))
        made += 1
    return made


def test_a_whole_match_against_a_bot_from_the_terminal(server: ServerProcess, tmp_path: Path):
    child = spawn(
        ["--server", server.target, "--create", "--players", "2", "--bots", "1", "--name",
         "ann"],
        tmp_path,
    )  # fmt: skip
    child.expect(r"created match ([0-9a-f-]{36})")
    match_id = child.match.group(1)
    child.expect(r"you are seat 1 \(ann\)")
    child.expect(r"seat 2: bot-greedy-\d+")
    # The other seat's plays are shown as they happen.
    child.expect(r"hand 1[^\n]* dealt; your tiles")
    made = play_on(child)
    assert made > 0
    # The match's id and how to replay it come again at the end.
    child.expect(rf"match {match_id} over: ")
    child.expect(rf"replay it: bergen-replay {match_id}")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    with Client(server.target) as client:
        view = client.view(match_id)
    assert view.phase == pb.PHASE_ENDED
    saved = json.loads((tmp_path / f"{match_id}.json").read_text())
    assert saved["seat"] == 0 and saved["bots"][0]["seat"] == 1


def test_a_typo_is_asked_again_and_q_leaves_with_the_seat_saved(
    server: ServerProcess, tmp_path: Path
):
    child = spawn(
        ["--server", server.target, "--create", "--players", "2", "--bots", "1", "--name", "eve"],
        tmp_path,
    )
    child.expect(r"created match ([0-9a-f-]{36})")
    match_id = child.match.group(1)
    child.expect(PROMPT)
    child.sendline("99")
    child.expect(r"type a number from 1 to \d+, r or q")
    child.expect(PROMPT)
    child.sendline("q")
    child.expect(rf"your seat is saved: bergen play --match {match_id} resumes")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_a_killed_client_resumes_as_the_same_seat(server: ServerProcess, tmp_path: Path):
    child = spawn(
        ["--server", server.target, "--create", "--players", "2", "--bots", "1", "--name",
         "bob", "--seat", "2", "--bot-policy", "random"],
        tmp_path,
    )  # fmt: skip
    child.expect(r"created match ([0-9a-f-]{36})")
    match_id = child.match.group(1)
    child.expect(r"you are seat 2 \(bob\)")
    assert play_on(child, moves=3, choose="first") == 3
    child.expect(PROMPT)  # mid-match, waiting for a choice
    child.kill(signal.SIGKILL)
    child.close(force=True)

    with Client(server.target) as client:
        before = client.view(match_id)
    assert before.phase == pb.PHASE_PLAYING

    again = spawn(["--server", server.target, "--match", match_id], tmp_path)
    again.expect(rf"resuming match {match_id} as seat 2 \(bob\)")
    play_on(again, choose="first")
    again.expect(pexpect.EOF)
    again.close()
    assert again.exitstatus == 0
    with Client(server.target) as client:
        view = client.view(match_id)
        replay = client.replay(match_id)
    assert view.phase == pb.PHASE_ENDED
    # bob kept seat 1: only two seats were ever taken, and seat 1 went on playing.
    taken = [e.seat_taken for e in replay.events if e.WhichOneof("body") == "seat_taken"]
    assert [t.seat for t in taken] == [1, 0] and taken[0].name == "bob"
    assert re.fullmatch(r"bot-random-\d+", taken[1].name) and taken[1].bot
    plays_by_1 = [
        e.seq
        for e in replay.events
        if e.WhichOneof("body") == "tile_played" and e.tile_played.seat == 1
    ]
    assert plays_by_1[-1] > before.version or view.result.winner_side == 0


def test_an_unknown_match_is_exit_status_3(server: ServerProcess, tmp_path: Path):
    child = spawn(
        ["--server", server.target, "--match", "00000000-0000-0000-0000-000000000000"],
        tmp_path,
    )
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 3
    assert re.search(r"bergen play: no match \S+ \(MATCH_NOT_FOUND\)", child.before or "")


def test_ctrl_c_leaves_with_status_130_and_the_seat_saved(server: ServerProcess, tmp_path: Path):
    child = spawn(
        ["--server", server.target, "--create", "--players", "2", "--bots", "1", "--name", "cy"],
        tmp_path,
    )
    child.expect(r"created match ([0-9a-f-]{36})")
    match_id = child.match.group(1)
    child.expect(PROMPT)
    child.sendintr()
    child.expect(rf"interrupted; your seat is saved: bergen play --match {match_id} resumes")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130
    assert (tmp_path / f"{match_id}.json").exists()


def test_r_resigns_after_a_confirmation_and_the_other_side_wins(
    server: ServerProcess, tmp_path: Path
):
    child = spawn(
        ["--server", server.target, "--create", "--players", "2", "--bots", "1", "--name", "di"],
        tmp_path,
    )
    child.expect(r"created match ([0-9a-f-]{36})")
    match_id = child.match.group(1)
    child.expect(PROMPT)
    child.sendline("r")
    child.expect(r"resign\? your side forfeits the match \[y/N\]: ")
    child.sendline("n")  # not confirmed: play goes on
    child.expect("you play on")
    child.expect(PROMPT)
    child.sendline("r")
    child.expect(r"resign\? your side forfeits the match \[y/N\]: ")
    child.sendline("y")
    child.expect(r"match over: you forfeit: [^\n]*seat 2 \(bot-greedy-\d+\) wins")
    child.expect(rf"match {match_id} over: ")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    with Client(server.target) as client:
        view = client.view(match_id)
    assert view.phase == pb.PHASE_ENDED
    assert view.result.reason == pb.MATCH_END_REASON_FORFEIT
    assert view.result.forfeited_side == 0 and view.result.winner_side == 1


def _matches_named(server: ServerProcess, name: str) -> list[pb.MatchSummary]:
    with Client(server.target) as client:
        listed = client.stub.ListMatches(pb.ListMatchesRequest(page_size=100))
    return [m for m in listed.matches if m.name == name]


@pytest.mark.parametrize("bots", [2, 5])
def test_more_bots_than_the_free_seats_is_refused_before_anything_is_created(
    server: ServerProcess, tmp_path: Path, bots: int
):
    name = f"zed{bots}"
    child = spawn(
        ["--server", server.target, "--create", "--players", "2", "--bots", str(bots),
         "--name", name],
        tmp_path,
    )  # fmt: skip
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 2
    assert "a 2-seat match has 1 seat(s) besides yours (BOTS_EXCEED_FREE_SEATS)" in child.before
    assert "created match" not in child.before
    assert not _matches_named(server, f"{name}'s")


def test_bots_that_a_joined_match_cannot_seat_are_refused_before_joining(
    server: ServerProcess, tmp_path: Path
):
    with Client(server.target) as client:
        match_id = client.create(3).match_id
        client.join(match_id, "early")
    child = spawn(
        ["--server", server.target, "--match", match_id, "--bots", "2", "--name", "late"],
        tmp_path,
    )
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 2
    assert f"match {match_id} has 1 free seat(s) besides yours" in child.before
    with Client(server.target) as client:
        view = client.view(match_id)
    assert [s.name for s in view.seats if s.taken] == ["early"]


def test_a_created_match_is_abandoned_when_the_client_fails_before_it_starts(
    server: ServerProcess, tmp_path: Path
):
    # The server refuses the join (a name over 64 characters) after the match was created.
    child = spawn(
        ["--server", server.target, "--create", "--players", "2", "--name", "x" * 70],
        tmp_path,
    )
    child.expect(r"created match ([0-9a-f-]{36})")
    match_id = child.match.group(1)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 2, child.before
    assert f"abandoned match {match_id}, which had not started" in child.before
    with Client(server.target) as client:
        view = client.view(match_id)
    assert view.phase == pb.PHASE_ENDED
    assert view.result.reason == pb.MATCH_END_REASON_ABANDONED


def test_json_prints_the_outcome_on_standard_output_and_tells_the_match_on_standard_error(
    server: ServerProcess, tmp_path: Path
):
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERGEN_")}
    env["BERGEN_STATE_DIR"] = str(tmp_path)
    done = subprocess.run(
        [*bergen_command(), "play", "--server", server.target, "--create", "--players", "2",
         "--bots", "1", "--name", "jo", "--json"],
        input="1\n" * 400,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["seat"] == 0 and outcome["side"] == 0 and outcome["name"] == "jo"
    assert outcome["left"] is False and outcome["phase"] == "ended"
    assert outcome["result"]["reason"] == "target"
    assert outcome["result"]["winner_side"] in (0, 1)
    assert "you are seat 1 (jo)" in done.stderr and "match over:" in done.stderr
