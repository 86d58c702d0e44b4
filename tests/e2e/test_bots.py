"""`bergen bots` against a real server: bots holding only their seat tokens play whole
matches, and the server agrees every match ended."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator

import pytest

from bergen.v1 import bergen_pb2 as pb

from .client import Client
from .screen import Screen
from .servers import ServerFarm, ServerProcess, bergen_command

pytestmark = pytest.mark.timeout(300)

MATCH_LINE = re.compile(r"^([0-9a-f-]{36}) winner (.+) scores ([\d-]+) hands (\d+)", re.M)


@pytest.fixture(scope="module")
def server(module_farm: ServerFarm, module_sqlite_url: str) -> Iterator[ServerProcess]:
    yield module_farm.start(module_sqlite_url)


def bots(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*bergen_command(), "bots", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def check_ended(server: ServerProcess, out: str, matches: int) -> list[str]:
    ids = [m.group(1) for m in MATCH_LINE.finditer(out)]
    assert len(ids) == matches, out
    with Client(server.target) as client:
        for match_id in ids:
            view = client.view(match_id)
            assert view.phase == pb.PHASE_ENDED
            assert view.result.reason == pb.MATCH_END_REASON_TARGET
            assert max(view.scores) >= view.rules.target
    return ids


@pytest.mark.parametrize(
    "args",
    [
        ["--matches", "2", "--policy", "random", "greedy"],
        ["--matches", "1", "--players", "3", "--preset", "eastern", "--policy", "random"],
        ["--matches", "1", "--players", "4", "--partnerships", "--policy", "greedy", "random"],
    ],
    ids=["two-seats", "three-seats-eastern", "partnerships"],
)
def test_random_and_greedy_bots_play_whole_matches(server: ServerProcess, args: list[str]):
    result = bots("--server", server.target, *args)
    assert result.returncode == 0, result.stderr + result.stdout
    matches = int(args[1])
    check_ended(server, result.stdout, matches)
    assert "won" in result.stdout and "hands:" in result.stdout


@pytest.mark.parametrize("policy", ["montecarlo", "ismcts"])
def test_a_searching_bot_plays_whole_matches(server: ServerProcess, policy: str):
    result = bots(
        "--server", server.target, "--matches", "2", "--policy", policy, "greedy",
        "--mc-budget", "0.02", "--seed", "e2e",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr + result.stdout
    check_ended(server, result.stdout, 2)
    # Seats rotate: each policy played each seat once, and the summary counts both.
    assert re.search(rf"{policy}\s+won \d of 2", result.stdout)
    assert re.search(r"greedy\s+won \d of 2", result.stdout)


def test_matches_played_in_parallel_all_end_and_are_all_counted(server: ServerProcess):
    result = bots(
        "--server", server.target, "--matches", "5", "--parallel", "3",
        "--policy", "random", "greedy", "--seed", "parallel",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr + result.stdout
    ids = check_ended(server, result.stdout, 5)
    assert len(set(ids)) == 5
    # Seats rotate by match number, whatever order the matches end in: 5 matches of two
    # policies, each policy in every match.
    assert re.search(r"random\s+won \d of 5", result.stdout)
    assert re.search(r"greedy\s+won \d of 5", result.stdout)
    wins = sum(int(n) for n in re.findall(r"won (\d) of 5", result.stdout))
    assert wins == 5
    seats = re.findall(r"seats (\S+)", result.stdout)
    assert sorted(seats) == sorted(["random,greedy", "greedy,random"] * 2 + ["random,greedy"])


def test_an_unreachable_server_is_exit_status_5():
    result = bots("--server", "127.0.0.1:1", "--matches", "1", timeout=60)
    assert result.returncode == 5
    assert result.stderr == (
        "bergen bots: the server at 127.0.0.1:1 does not answer within 5 s (UNREACHABLE)\n"
    )


@pytest.mark.parametrize(
    "args",
    [
        ["--matches", "0"],
        ["--players", "3", "--partnerships"],
        ["--players", "3", "--policy", "random", "greedy"],
        ["--parallel", "0"],
        ["--parallel", "65"],
    ],
)
def test_bad_options_are_exit_status_2(server: ServerProcess, args: list[str]):
    result = bots("--server", server.target, *args, timeout=60)
    assert result.returncode == 2, result.stderr


def test_json_reports_each_match_and_the_wins(server: ServerProcess):
    result = bots(
        "--server", server.target, "--matches", "2", "--policy", "random", "greedy",
        "--seed", "json", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr + result.stdout
    report = json.loads(result.stdout)
    assert (report["seed"], report["players"], report["preset"]) == ("json", 2, "standard")
    assert len(report["matches"]) == 2
    with Client(server.target) as client:
        for match in report["matches"]:
            view = client.view(match["match_id"])
            assert view.phase == pb.PHASE_ENDED
            assert list(view.scores) == match["scores"]
            assert match["winner_side"] == view.result.winner_side
            assert sorted(match["policies"]) == ["greedy", "random"]
    wins = sum(p["won"] for p in report["policies"].values())
    assert wins == 2 and report["policies"]["greedy"]["played"] == 2


def test_on_a_terminal_the_progress_bar_never_covers_a_match_line(server: ServerProcess):
    pexpect = pytest.importorskip("pexpect")
    command = bergen_command()
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERGEN_")}
    env.update(TERM="xterm-256color", COLUMNS="150")
    child = pexpect.spawn(
        command[0],
        [*command[1:], "bots", "--server", server.target, "--matches", "6", "--parallel",
         "2", "--policy", "random"],
        env=env,
        encoding="utf-8",
        timeout=240,
        dimensions=(40, 150),
    )  # fmt: skip
    raw = ""
    while True:
        try:
            raw += child.read_nonblocking(65536, timeout=240)
        except pexpect.EOF:
            break
    child.close()
    assert child.exitstatus == 0, raw[-3000:]
    assert "matches" in raw  # the bar was drawn
    screen = Screen()
    screen.feed(raw)
    lines = screen.text
    # Every match line whole, on a line of its own; the bar gone (it is transient) and
    # nowhere mixed into a line.
    shown = [m.group(1) for line in lines if (m := MATCH_LINE.match(line))]
    assert len(set(shown)) == 6, "\n".join(lines)
    check_ended(server, "\n".join(lines), 6)
    assert not [line for line in lines if "matches" in line and MATCH_LINE.search(line)]
    assert lines[-4].startswith("6 match(es), 2 seats")
