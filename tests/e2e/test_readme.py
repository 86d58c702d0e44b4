"""The README's commands are the real ones: its first-match, tournament and verify blocks are
run verbatim, as a newcomer pastes them, against a server started as `make run` starts it.

Each block is read from README.md itself. `MATCH` and `TOURNAMENT` stand for the ids the
earlier commands printed, and are replaced by them; nothing else is changed. The server
listens on a port of its own (the README's default address is told to every command through
BERGEN_SERVER, as a user whose server listens elsewhere would), in a folder of its own that
stands for the clone: `.venv` there is this checkout's, and the organiser token the server
makes on its first start is found there by the organiser's commands. A person's turns are
answered with the first legal play. Commands that play until a tournament ends, which the
README gives a terminal of their own, run in the background.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DEADLINE_S = 300.0
ID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
BACKGROUND = ("bots --tournament", "play --tournament")
"""Commands the README runs in a terminal of their own, until the tournament ends."""


def block(heading: str) -> list[str]:
    """The commands of the first `sh` block under `## heading`."""
    text = README.read_text(encoding="utf-8")
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```sh\n(.*?)```", section, re.S)
    assert found is not None, f"no sh block under {heading!r}"
    return [line for line in found.group(1).splitlines() if line.strip()]


@dataclass
class Session:
    """A newcomer's shell in the clone: the ids seen so far, and what runs in the
    background."""

    folder: Path
    env: dict[str, str]
    ids: dict[str, str] = field(default_factory=dict)
    background: list[tuple[str, subprocess.Popen[str], list[str]]] = field(default_factory=list)

    def words(self, line: str) -> list[str]:
        for name, value in self.ids.items():
            line = re.sub(rf"\b{name}\b", value, line)
        return shlex.split(line, comments=True)

    def run(self, line: str) -> str:
        """Run one README line to its end; returns its output."""
        answers = "1\n" * 2000 if " play " in f" {line} " else ""
        done = subprocess.run(
            self.words(line),
            cwd=self.folder,
            env=self.env,
            input=answers,
            capture_output=True,
            text=True,
            timeout=DEADLINE_S,
        )
        assert done.returncode == 0, f"{line}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        return done.stdout

    def start(self, line: str, ready: str = "", times: int = 0) -> None:
        """Start a README line that runs until the tournament ends; with `ready`, wait until
        it has printed that `times` times (what a person waits to see before going on)."""
        proc = subprocess.Popen(
            self.words(line),
            cwd=self.folder,
            env=self.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        lines: list[str] = []

        def feed() -> None:
            try:
                assert proc.stdin is not None
                proc.stdin.write("1\n" * 2000)
                proc.stdin.close()
            except (BrokenPipeError, OSError):
                pass

        def read() -> None:
            assert proc.stdout is not None
            lines.extend(proc.stdout)

        threading.Thread(target=feed, daemon=True).start()
        threading.Thread(target=read, daemon=True).start()
        self.background.append((line, proc, lines))
        deadline = time.monotonic() + DEADLINE_S
        while sum(ready in x for x in list(lines)) < times:
            assert proc.poll() is None or sum(ready in x for x in lines) >= times, (
                f"{line} ended before it printed {ready!r} {times} times:\n{''.join(lines)}"
            )
            assert time.monotonic() < deadline, f"{line}: no {ready!r} in time:\n{''.join(lines)}"
            time.sleep(0.05)

    def finish_background(self) -> None:
        for line, proc, lines in self.background:
            code = proc.wait(timeout=DEADLINE_S)
            assert code == 0, f"{line}\n{''.join(lines)[-3000:]}"
        self.background.clear()


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    clone = tmp_path / "clone"
    clone.mkdir()
    (clone / ".venv").symlink_to(Path(sys.prefix))
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERGEN_")}
    env["BERGEN_STATE_DIR"] = str(tmp_path / "state")
    # The server as `make run` starts it: `bergen serve` in the clone with its defaults (the
    # SQLite file, the keys and the organiser token made there on its first start), but on
    # a port of its own.
    port_file = tmp_path / "port"
    log = (tmp_path / "serve.log").open("wb")
    server = subprocess.Popen(
        [str(clone / ".venv" / "bin" / "bergen"), "serve", "--listen", "127.0.0.1:0",
         "--port-file", str(port_file)],
        cwd=clone,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    s = Session(clone, env)
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not port_file.exists():
            assert server.poll() is None, (tmp_path / "serve.log").read_text()
            assert time.monotonic() < deadline, "the server wrote no port file"
            time.sleep(0.05)
        env["BERGEN_SERVER"] = f"127.0.0.1:{port_file.read_text().strip()}"
        yield s
    finally:
        for _, proc, _ in s.background:
            if proc.poll() is None:
                proc.kill()
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def test_the_readme_blocks_work_verbatim(session: Session) -> None:
    s = session

    # Your first match.
    first = block("Your first match")
    out = s.run(first[0])
    s.ids["MATCH"] = re.search(rf"created match ({ID})", out).group(1)  # type: ignore[union-attr]
    assert "match over: " in out
    for line in first[1:]:
        assert s.ids["MATCH"] in s.run(line) or "replay" in line

    # Running a tournament.
    for line in block("Running a tournament"):
        if any(b in line for b in BACKGROUND):
            # A person starts the tournament once the bots have entered.
            entrants = re.search(r"--entrants (\d+)", line)
            s.start(line, "entrant ", int(entrants.group(1)) if entrants else 0)
            continue
        if " export " in line or line.split()[1:2] == ["verify"]:
            s.finish_background()
        out = s.run(line)
        if " tournament create " in line:
            s.ids["TOURNAMENT"] = re.search(rf"({ID})", out).group(1)  # type: ignore[union-attr]
        if " tournament watch " in line:
            assert "ended" in out
    s.finish_background()

    # Verifying a match.
    for line in block("Verifying a match"):
        out = s.run(line)
        if " verify " in line:
            assert out.startswith("OK"), out
