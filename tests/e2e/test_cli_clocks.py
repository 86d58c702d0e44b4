"""The clients on a clock (RULES.md section 11), as real processes against a real server:
`bergen bots --clock` plays a clocked match to its end and its record verifies,
`bergen-replay` shows the clocks, the timeouts and the automatic plays of a match the server
timed out, `--clock` is refused clearly when it is not INITIAL+INCREMENT, and `bergen play`
counts the player's clock down and says when a timeout played for them."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bergen.api.exit_status import ExitStatus
from bergen.v1 import bergen_pb2 as pb

from .client import Client, seat_everyone
from .replay_support import clean_env, run_replay
from .servers import ServerFarm, ServerProcess, bergen_command

pytestmark = pytest.mark.timeout(300)

MATCH_LINE = re.compile(r"^([0-9a-f-]{36}) winner (.+) scores ([\d-]+) hands (\d+)", re.M)
NEVER_PLAYED = {"clock": "fischer", "clock_initial": 1, "clock_increment": 0}
"""Two seats that never play: the server times each out in turn (1 s, then at once, their
clocks being 0), autoplaying for them, until a seat's third timeout in a row forfeits."""


@pytest.fixture(scope="module")
def server(module_farm: ServerFarm, module_sqlite_url: str) -> Iterator[ServerProcess]:
    yield module_farm.start(module_sqlite_url)


def bergen(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*bergen_command(), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env=clean_env(),
    )


def wait_for_the_end(client: Client, match_id: str) -> pb.MatchView:
    """Follow the match's WatchMatch stream, which ends after its last event."""
    for _ in client.watch(match_id, timeout=120):
        pass
    view = client.view(match_id)
    assert view.phase == pb.PHASE_ENDED
    return view


@pytest.fixture(scope="module")
def timed_out(server: ServerProcess) -> str:
    """A clocked match whose seats never played, ended by the server alone."""
    with Client(server.target) as client:
        table = seat_everyone(client, 2, **NEVER_PLAYED)
        view = wait_for_the_end(client, table.match_id)
    assert view.result.reason == pb.MATCH_END_REASON_FORFEIT
    assert view.result.cause == pb.FORFEIT_CAUSE_TIMEOUT
    return table.match_id


# ----- bergen bots --------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["greedy", "montecarlo", "ismcts"])
def test_bots_play_a_clocked_match_to_its_end_and_its_record_verifies(
    server: ServerProcess, policy: str
):
    result = bergen("bots", "--server", server.target, "--clock", "2+0", "--policy", policy)
    assert result.returncode == 0, result.stderr
    assert "clock 2+0" in result.stdout
    (match_id,) = [m.group(1) for m in MATCH_LINE.finditer(result.stdout)]
    with Client(server.target) as client:
        view = client.view(match_id)
    assert view.phase == pb.PHASE_ENDED
    assert view.rules.clock == pb.CLOCK_FISCHER
    assert (view.rules.clock_initial, view.rules.clock_increment) == (2, 0)
    # On 2 s for the whole match a bot may run out of time: the match then ends by forfeit,
    # which is an end like any other.
    assert view.result.reason in (pb.MATCH_END_REASON_TARGET, pb.MATCH_END_REASON_FORFEIT)
    verified = bergen("verify", match_id, "--server", server.target)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert verified.stdout.startswith(f"OK: match {match_id}")


def test_bots_report_the_clock_and_a_forfeit_in_json(server: ServerProcess):
    result = bergen(
        "bots", "--server", server.target, "--clock", "1+0", "--on-timeout", "forfeit", "--json"
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["clock"] == "1+0"
    (match,) = summary["matches"]
    assert match["reason"] in ("target", "forfeit")
    if match["reason"] == "forfeit":
        assert match["cause"] == "timeout" and match["forfeited_side"] in (0, 1)
        assert match["winner_side"] == 1 - match["forfeited_side"]
    else:
        assert match["forfeited_side"] is None and match["cause"] is None


# ----- the --clock flags --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--clock", "60"], "--clock is INITIAL+INCREMENT in whole seconds, like 60+2"),
        (["--clock", "1m+2"], "--clock is INITIAL+INCREMENT in whole seconds, like 60+2"),
        (["--clock", "60+2+1"], "--clock is INITIAL+INCREMENT in whole seconds, like 60+2"),
        (["--clock", "1.5+0"], "--clock is INITIAL+INCREMENT in whole seconds, like 60+2"),
        (["--clock", "0+2"], "--clock: option clock_initial must be a whole number 1..86400"),
        (["--clock", "60+3601"], "--clock: option clock_increment must be a whole number 0..3600"),
        (["--clock", "60+2", "--timeouts-to-forfeit", "0"], "--timeouts-to-forfeit: option"),
        (["--on-timeout", "forfeit"], "--on-timeout needs --clock"),
    ],
    ids=["no-increment", "units", "three-parts", "fraction", "zero", "too-much", "ttf", "alone"],
)
@pytest.mark.parametrize("command", ["bots", "play"])
def test_a_bad_clock_is_a_usage_error_that_says_why(
    server: ServerProcess, command: str, args: list[str], says: str
):
    extra = ["--create"] if command == "play" else []
    result = bergen(command, "--server", server.target, *extra, *args)
    assert result.returncode == ExitStatus.USAGE, result.stdout + result.stderr
    assert says in " ".join(result.stderr.split()), result.stderr
    assert result.stdout == ""


def test_play_refuses_a_clock_for_a_match_it_joins(server: ServerProcess):
    result = bergen("play", "--server", server.target, "--match", "m", "--clock", "60+2")
    assert result.returncode == ExitStatus.USAGE
    assert "--clock is for a match you --create" in result.stderr


# ----- bergen-replay ------------------------------------------------------------------------


def test_replay_shows_the_clocks_the_timeouts_and_the_automatic_plays(
    server: ServerProcess, timed_out: str
):
    result = run_replay(timed_out, "--server", server.target, "--plain")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "clock 1+0 (a timeout plays for the seat; 3 in a row forfeit)" in out.splitlines()[0]
    # The lead keeps its seat's time; each automatic play follows its own timeout row.
    rows = [r for r in out.splitlines() if re.match(r"^\s+(\d+  |timeout: )", r)]
    assert re.search(r"^\s+1  player \d leads \d-\d .*clock 1\.0 s$", rows[0])
    timeouts = [i for i, r in enumerate(rows) if "timeout:" in r]
    assert len(timeouts) == 5 and sum("automatically" in r for r in rows) == 4
    for i in timeouts[:-1]:
        who = re.search(
            r"timeout: (player \d) runs out of time \(\d+\.\d s into the match\)", rows[i]
        )
        assert who is not None, rows[i]
        auto = rows[i + 1]
        assert re.search(rf"^\s+\d+  {who[1]} plays \d-\d (left|right) automatically .*"
                         r"clock 0\.0 s$", auto), auto  # fmt: skip
    # Timeouts are no actions of the record: the actions are numbered 1, 2, 3... all the same.
    numbers = [int(r.split()[0]) for r in rows if "timeout:" not in r]
    assert numbers == list(range(1, len(numbers) + 1))
    assert "the match ended during this hand" in out
    assert re.search(r"result: player (\d) forfeits \(out of time\); player (?!\1)\d wins", out)


def test_replay_json_gives_the_times_the_timeouts_and_the_forfeit(
    server: ServerProcess, timed_out: str
):
    result = run_replay(timed_out, "--server", server.target, "--json")
    assert result.returncode == 0, result.stderr
    story = json.loads(result.stdout)
    steps = [s for s in story["steps"] if s["kind"] in ("lead", "play", "timeout")]
    assert [s["kind"] for s in steps] == ["lead", *["timeout", "play"] * 4, "timeout"]
    assert steps[0]["clock_ms"] == 1000 and steps[0]["auto"] is False
    for timeout, play in zip(steps[1::2], steps[2::2], strict=False):
        assert play["auto"] is True and play["clock_ms"] == 0
        assert play["seat"] == timeout["seat"] and play["at_ms"] >= timeout["at_ms"] >= 1000
    result_json = story["result"]
    assert result_json["reason"] == "forfeit" and result_json["cause"] == "timeout"
    assert result_json["forfeited_side"] == steps[-1]["seat"]
    assert result_json["at_ms"] >= steps[-1]["at_ms"]


# ----- bergen play ------------------------------------------------------------------------


def test_play_counts_the_clock_down_and_says_a_timeout_played_for_you(
    server: ServerProcess, tmp_path: Path
):
    pexpect = pytest.importorskip("pexpect")
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERGEN_")}
    env.update(BERGEN_STATE_DIR=str(tmp_path), TERM="dumb", COLUMNS="120")
    command = bergen_command()
    child = pexpect.spawn(
        command[0],
        [*command[1:], "play", "--server", server.target, "--create", "--bots", "1",
         "--name", "ann", "--clock", "3+0", "--timeouts-to-forfeit", "2"],
        env=env,
        encoding="utf-8",
        timeout=60,
        dimensions=(40, 120),
    )  # fmt: skip
    child.expect(r"created match ([0-9a-f-]{36})")
    # The player never answers. Every clock is shown at the turn, under 10 s a warning, and
    # the player's clock counts down on the prompt's line until the server's timeout.
    child.expect(r"clocks: (▶ )?you \d\.\d s[^\n]* · (▶ )?bot-greedy-\d+ \d\.\d s")
    child.expect(r"under 10 s left on your clock \(\d\.\d s\): choose now")
    child.expect(r"your clock ▶ 2\.\d s · choose \[1-\d+\] \(r resigns, q leaves\): ")
    child.expect(r"your clock ▶ 1\.\d s · choose \[1-\d+\] \(r resigns, q leaves\): ")
    child.expect(r"seat 1 \(ann, you\) runs out of time \(\d+\.\d s into the match\)")
    child.expect(r"seat 1 \(ann, you\) plays \d-\d (left|right) automatically "
                 r"\(your time ran out: the server played this for you\)")  # fmt: skip
    # With no time left, the next turn of the player times out at once: its second in a row.
    child.expect(
        r"match over: you forfeit: seat 1 \(ann, you\) forfeits \(out of time\); "
        r"seat 2 \(bot-greedy-\d+\) wins; final scores"
    )
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
