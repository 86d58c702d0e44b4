"""`bergen watch`, `bergen resign` and `bergen abandon` against a real server: a spectator's
live view in a pseudo-terminal and as JSON lines, a resignation with the seat `bergen play`
saved, and abandoning as the organiser or as a match's creator while it seats."""

from __future__ import annotations

import itertools
import json
import os
import random
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bergen.api.exit_status import ExitStatus
from bergen.v1 import bergen_pb2 as pb

from .client import Client, Table, play_to_end, seat_everyone
from .conftest import ORGANISER_TOKEN
from .servers import ServerFarm, ServerProcess, bergen_command

pexpect = pytest.importorskip("pexpect")

pytestmark = pytest.mark.timeout(300)

STEP_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def server(module_farm: ServerFarm, module_sqlite_url: str) -> Iterator[ServerProcess]:
    yield module_farm.start(module_sqlite_url, organiser_token=ORGANISER_TOKEN)


def _env(state_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERGEN_")}
    env.update(BERGEN_STATE_DIR=str(state_dir), TERM="dumb", COLUMNS="160", **extra)
    return env


def bergen(
    *args: str, state_dir: Path, stdin: str = "", **env: str
) -> subprocess.CompletedProcess[str]:
    # In a folder of its own: an organiser token file in the checkout is none of its business.
    state_dir.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        [*bergen_command(), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=_env(state_dir, **env),
        timeout=120,
        cwd=state_dir,
    )


def _play_slowly(server: ServerProcess, table: Table, started: threading.Event) -> None:
    """Random legal moves to the end, after the watcher has started, a little apart so that
    the watcher sees the match live."""
    started.wait(STEP_TIMEOUT_S)
    with Client(server.target) as client:
        play_to_end([client], random.Random(7), table, after_move=lambda _: time.sleep(0.02))


def test_watch_follows_a_live_match_to_its_end_in_a_terminal(
    server: ServerProcess, tmp_path: Path
) -> None:
    with Client(server.target) as client:
        table = seat_everyone(client, 2)
    command = bergen_command()
    child = pexpect.spawn(
        command[0],
        [*command[1:], "watch", table.match_id, "--server", server.target],
        env=_env(tmp_path),
        encoding="utf-8",
        timeout=STEP_TIMEOUT_S,
        dimensions=(40, 160),
    )
    child.expect(rf"match {table.match_id}")
    child.expect(r"seats: seat 1 player 0, seat 2 player 1")
    started = threading.Event()
    player = threading.Thread(target=_play_slowly, args=(server, table, started))
    player.start()
    started.set()
    try:
        # Each action as it happens, seats counted from 1, the line as it lies after each
        # play (each tile touching the next) with its ends, and a live line with the scores.
        child.expect(r"seat [12] \(player [01]\) plays \d-\d (left|right)")
        child.expect(r"\n  line: ((?:\[\d\|\d\])+)   ends (\d)\|(\d)\r")
        tiles = child.match.group(1)[1:-1].split("][")
        assert all(a[-1] == b[0] for a, b in itertools.pairwise(tiles)), tiles
        assert (child.match.group(2), child.match.group(3)) == (tiles[0][0], tiles[-1][-1])
        child.expect(r"hand \d+ · scores player 0 \d+, player 1 \d+")
        child.expect(r"match over: [^\n]*; final scores ")
        child.expect(rf"match {table.match_id} is over; replay it: bergen-replay")
        child.expect(pexpect.EOF)
    finally:
        player.join()
    child.close()
    assert child.exitstatus == 0


def test_watch_shows_every_seats_clock_on_its_live_line_in_a_clocked_match(
    server: ServerProcess, tmp_path: Path
) -> None:
    with Client(server.target) as client:
        table = seat_everyone(
            client, 2, clock="fischer", clock_initial=600, clock_increment=5, target=10
        )
    command = bergen_command()
    child = pexpect.spawn(
        command[0],
        [*command[1:], "watch", table.match_id, "--server", server.target],
        env=_env(tmp_path),
        encoding="utf-8",
        timeout=STEP_TIMEOUT_S,
        dimensions=(40, 200),
    )
    child.expect(rf"match {table.match_id}")
    # The seat to play's clock runs on the live line, the other's stands: both shown, named.
    child.expect(r"clocks: (▶ )?player 0 (\d+:)?\d+\.\d( s)? · (▶ )?player 1 (\d+:)?\d+\.\d")
    started = threading.Event()
    player = threading.Thread(target=_play_slowly, args=(server, table, started))
    player.start()
    started.set()
    try:
        child.expect(r"match over: [^\n]*; final scores ", timeout=STEP_TIMEOUT_S * 3)
        child.expect(pexpect.EOF)
    finally:
        player.join()
    child.close()
    assert child.exitstatus == 0


def test_watch_json_prints_every_event_then_the_outcome(
    server: ServerProcess, tmp_path: Path
) -> None:
    with Client(server.target) as client:
        table = seat_everyone(client, 3)
    started = threading.Event()
    player = threading.Thread(target=_play_slowly, args=(server, table, started))
    player.start()
    watcher = subprocess.Popen(
        [*bergen_command(), "watch", table.match_id, "--server", server.target, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(tmp_path),
    )
    started.set()
    out, err = watcher.communicate(timeout=STEP_TIMEOUT_S * 3)
    player.join()
    assert watcher.returncode == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    *events, outcome = lines
    with Client(server.target) as client:
        view = client.view(table.match_id)
    # Every event once, in order, and nothing else.
    assert [e["seq"] for e in events] == list(range(1, view.version + 1))
    assert events[0]["kind"] == "MatchCreated" and events[-1]["kind"] == "SeedRevealed"
    assert outcome["match_id"] == table.match_id and outcome["phase"] == "ended"
    assert outcome["result"]["scores"] == list(view.result.scores)
    assert outcome["result"]["winner_side"] == view.result.winner_side


def test_watch_an_unknown_match_is_exit_status_3(server: ServerProcess, tmp_path: Path) -> None:
    done = bergen(
        "watch", "00000000-0000-4000-8000-000000000000", "--server", server.target,
        state_dir=tmp_path,
    )  # fmt: skip
    assert done.returncode == ExitStatus.NOT_FOUND
    assert done.stderr.startswith("bergen watch: no match ")
    assert done.stderr.rstrip().endswith("(MATCH_NOT_FOUND)")


def _left_match(server: ServerProcess, state_dir: Path, players: int = 2, bots: int = 1) -> str:
    """A match created by `bergen play`, left at the first prompt (the seat stays saved)."""
    done = bergen(
        "play", "--server", server.target, "--create", "--players", str(players),
        "--bots", str(bots), "--name", "ann", state_dir=state_dir, stdin="q\n",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("created match "))
    return line.split()[-1]


def _seating_match(server: ServerProcess, state_dir: Path) -> str:
    """A 3-seat match created by `bergen play`, left with Ctrl-C while it waits for players."""
    command = bergen_command()
    child = pexpect.spawn(
        command[0],
        [*command[1:], "play", "--server", server.target, "--create", "--players", "3",
         "--name", "cal"],
        env=_env(state_dir),
        encoding="utf-8",
        timeout=STEP_TIMEOUT_S,
    )  # fmt: skip
    child.expect(r"created match ([0-9a-f-]{36})")
    match_id = str(child.match.group(1))
    child.expect("waiting for 2 more player")
    child.sendintr()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == ExitStatus.INTERRUPTED
    return match_id


def test_resign_with_the_seat_bergen_play_saved(server: ServerProcess, tmp_path: Path) -> None:
    match_id = _left_match(server, tmp_path)
    other = tmp_path / "elsewhere"
    refused = bergen("resign", match_id, "--server", server.target, "--yes", state_dir=other)
    assert refused.returncode == ExitStatus.USAGE
    assert refused.stderr == (
        f"bergen resign: no seat of match {match_id} is saved here: give its token with "
        "--token (NO_SEAT_TOKEN)\n"
    )
    done = bergen("resign", match_id, "--server", server.target, "--yes", state_dir=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"seat 1 (ann) resigned match {match_id}: ")
    assert re.search(r"bot-greedy-\d+ wins", done.stdout), done.stdout
    with Client(server.target) as client:
        view = client.view(match_id)
    assert view.result.reason == pb.MATCH_END_REASON_FORFEIT
    assert view.result.forfeited_side == 0 and view.result.resigned_seat == 0
    again = bergen(
        "resign", match_id, "--server", server.target, "--yes", "--json", state_dir=tmp_path
    )
    assert again.returncode == ExitStatus.REFUSED
    assert again.stderr.startswith("bergen resign: ")


def test_abandon_as_the_organiser_and_as_the_creator_while_it_seats(
    server: ServerProcess, tmp_path: Path
) -> None:
    playing = _left_match(server, tmp_path)
    nobody = bergen("abandon", playing, "--server", server.target, state_dir=tmp_path / "x")
    assert nobody.returncode == ExitStatus.USAGE
    assert nobody.stderr.rstrip().endswith("(NO_ORGANISER_TOKEN)")
    # The creator token bergen play saved no longer abandons a match that has started.
    creator = bergen("abandon", playing, "--server", server.target, state_dir=tmp_path)
    assert creator.returncode == ExitStatus.REFUSED
    assert "only the organiser may abandon it now (MATCH_NOT_SEATING)" in creator.stderr
    done = bergen(
        "abandon", playing, "--server", server.target, "--note", "the hall closes", "--json",
        state_dir=tmp_path, BERGEN_ORGANISER_TOKEN=ORGANISER_TOKEN,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["match_id"] == playing and answer["result"]["reason"] == "abandoned"

    seating = _seating_match(server, tmp_path)
    done = bergen("abandon", seating, "--server", server.target, state_dir=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"match {seating} abandoned\n"
    with Client(server.target) as client:
        for match_id, note in ((playing, "the hall closes"), (seating, "")):
            view = client.view(match_id)
            assert view.result.reason == pb.MATCH_END_REASON_ABANDONED
            if note:
                assert view.result.note == note
