"""The clients carry on when the replica they talk to is killed under them.

Two `bergen serve` replicas on one PostgreSQL database stand behind one address (a TCP front
that sends each new connection to the first replica that accepts it, as a load balancer
does). `bergen bots` playing matches, `bergen bots --tournament` playing a tournament's
entrants and `bergen play` with a person's answers all talk to that address, so all of them
reach the first replica, which is then killed (SIGKILL) in the middle of their matches. Every
call that failed is sent again and every stream opened again, through the front, to the other
replica: each process goes on to its end and exits 0, the tournament ends, and no match is
left unfinished.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bergen.v1 import bergen_pb2 as pb

from .balancer import Balancer
from .client import Client, bearer, create_swiss
from .conftest import ORGANISER_TOKEN
from .servers import ServerFarm, bergen_command

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(600)]

DEADLINE_S = 300.0
"""How long anything here may take on a loaded machine: work is waited for, never timed."""
MATCHES = 6
ENTRANTS = 4


class Output:
    """A process's output lines, read as they come in a thread."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self.changed = threading.Condition()
        assert proc.stdout is not None
        self._thread = threading.Thread(target=self._read, args=(proc.stdout,), daemon=True)
        self._thread.start()

    def _read(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            with self.changed:
                self.lines.append(line)
                self.changed.notify_all()

    def wait_for(self, text: str, timeout: float = DEADLINE_S) -> None:
        with self.changed:
            if not self.changed.wait_for(
                lambda: any(text in x for x in self.lines), timeout=timeout
            ):
                raise AssertionError(f"{text!r} never came:\n{''.join(self.lines)[-3000:]}")

    def finish(self, timeout: float = DEADLINE_S) -> tuple[int, str, str]:
        code = self.proc.wait(timeout=timeout)
        self._thread.join(timeout=10)
        assert self.proc.stderr is not None
        return code, "".join(self.lines), self.proc.stderr.read()


def spawn(args: list[str], state_dir: Path, stdin: int | None = subprocess.DEVNULL) -> Output:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERGEN_")}
    env["BERGEN_STATE_DIR"] = str(state_dir)
    proc = subprocess.Popen(
        [*bergen_command(), *args],
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    return Output(proc)


@pytest.fixture
def front(farm: ServerFarm, pg_database: str) -> Iterator[tuple[Balancer, list]]:
    a = farm.start(pg_database, organiser_token=ORGANISER_TOKEN, name="a")
    b = farm.start(pg_database, organiser_token=ORGANISER_TOKEN, name="b")
    balancer = Balancer([("127.0.0.1", a.port), ("127.0.0.1", b.port)])
    try:
        yield balancer, [a, b]
    finally:
        balancer.close()


def test_bots_tournament_bots_and_play_carry_on_when_their_replica_is_killed(
    front: tuple[Balancer, list], tmp_path: Path
) -> None:
    balancer, (a, b) = front
    with Client(b.target) as client:
        tid = create_swiss(client, "failover cup", ORGANISER_TOKEN, rounds=2, target=8)
    entrants = spawn(
        ["bots", "--server", balancer.target, "--tournament", tid, "--entrants", str(ENTRANTS),
         "--policy", "random", "--seed", "failover"],
        tmp_path / "entrants",
    )  # fmt: skip
    matches = spawn(
        ["bots", "--server", balancer.target, "--matches", str(MATCHES), "--parallel", "2",
         "--policy", "random", "--seed", "failover"],
        tmp_path / "bots",
    )  # fmt: skip
    person = spawn(
        ["play", "--server", balancer.target, "--create", "--players", "2", "--bots", "1",
         "--name", "ann"],
        tmp_path / "person",
        stdin=subprocess.PIPE,
    )  # fmt: skip
    assert person.proc.stdin is not None
    # The person answers every prompt with its first legal play, a little at a time.
    stop_typing = threading.Event()

    def type_answers() -> None:
        while not stop_typing.wait(0.05) and person.proc.poll() is None:
            try:
                person.proc.stdin.write("1\n")  # type: ignore[union-attr]
                person.proc.stdin.flush()  # type: ignore[union-attr]
            except (BrokenPipeError, ValueError):
                return

    typist = threading.Thread(target=type_answers, daemon=True)
    try:
        for i in range(1, ENTRANTS + 1):
            entrants.wait_for(f"entrant {i}: ")
        with Client(b.target) as client:
            client.stub.StartTournament(
                pb.StartTournamentRequest(tournament_id=tid), metadata=bearer(ORGANISER_TOKEN)
            )
        typist.start()
        # Everyone is mid-way: a bots match ended and others are being played, the person
        # has made a play, and the tournament's first round is seated.
        matches.wait_for(" winner ")
        person.wait_for("line: ")
        deadline = time.monotonic() + DEADLINE_S
        with Client(b.target) as client:
            while not client.stub.GetTournament(
                pb.GetTournamentRequest(tournament_id=tid)
            ).tournament.rounds:
                assert time.monotonic() < deadline, "round 1 was never paired"
                time.sleep(0.1)
        assert set(balancer.accepted) == {("127.0.0.1", a.port)}, "all of them talk to a"
        a.kill()

        results = {
            name: out.finish()
            for name, out in (("entrants", entrants), ("matches", matches), ("person", person))
        }
    finally:
        stop_typing.set()
        for out in (entrants, matches, person):
            if out.proc.poll() is None:
                out.proc.kill()
    for name, (code, stdout, stderr) in results.items():
        assert code == 0, f"{name} exited {code}:\n{stdout[-2000:]}\n{stderr[-2000:]}"
    assert ("127.0.0.1", b.port) in balancer.accepted
    _, bots_out, _ = results["matches"]
    assert bots_out.count(" winner ") == MATCHES
    _, entrants_out, _ = results["entrants"]
    assert f"tournament {tid} ended after 2 round(s)" in entrants_out
    _, person_out, _ = results["person"]
    assert "match over: " in person_out
    with Client(b.target) as client:
        view = client.stub.GetTournament(pb.GetTournamentRequest(tournament_id=tid)).tournament
        assert view.phase == pb.TOURNAMENT_PHASE_ENDED
        playing = client.stub.ListMatches(
            pb.ListMatchesRequest(phase=pb.PHASE_PLAYING, page_size=100)
        )
        assert not playing.matches, [m.match_id for m in playing.matches]
