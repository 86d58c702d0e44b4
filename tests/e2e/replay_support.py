"""Helpers of the `bergen-replay` tests: run the command, read its plain listing back into
hands, deals and actions, and find simulated matches that show a given thing."""

from __future__ import annotations

import hashlib
import os
import random
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bergen.domain import POLICIES, build_record, make_rules
from bergen.domain.events import Event
from bergen.domain.simulation import play_match
from bergen.domain.tiles import Tile

RUN_TIMEOUT_S = 60.0

TILE = re.compile(r"(?<![\w|\[-])([0-6])-([0-6])(?![\w-])")
"""A tile as `a-b` (not inside a longer word such as a match id)."""
LINE_TILE = re.compile(r"\[([0-6])\|([0-6])\]")
ACTION = re.compile(
    r"^\s+(?P<number>\d+)  (?P<name>.+?) (?P<verb>leads|plays|draws|passes)"
    r"(?: (?P<tile>[0-6]-[0-6]|a tile))?(?: (?P<end>left|right))?(?:\s|$)"
)
POINTS = re.compile(
    r"^\s+\+(?P<points>\d+) (?P<reason>double header|triple header|double bonus|going out|"
    r"blocked hand)(?: \((?P<base>\d+) cut to (?P=points) near the target\))? → "
    r"(?P<side>.+) (?P<total>\d+)$"
)
REASON_WORDS = {
    "double_header": "double header",
    "triple_header": "triple header",
    "double_bonus": "double bonus",
    "domino": "going out",
    "blocked": "blocked hand",
}


def replay_command() -> list[str]:
    """The `bergen-replay` entry point of the interpreter running the tests."""
    exe = shutil.which("bergen-replay", path=str(Path(sys.executable).parent))
    if exe is not None:
        return [exe]
    return [sys.executable, "-m", "bergen.cli_client.replay"]


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without the caller's BERGEN_* settings (a server or token of the
    developer's must not leak into a test)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERGEN_")}
    env.update(extra)
    return env


def run_replay(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `bergen-replay` with its output captured (so not on a terminal)."""
    return subprocess.run(
        [*replay_command(), *args],
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env if env is not None else clean_env(),
        timeout=RUN_TIMEOUT_S,
        stdin=None if stdin is not None else subprocess.DEVNULL,
    )


# ----- reading the listing back -----------------------------------------------------------


@dataclass
class ListedHand:
    number: int
    lines: list[str] = field(default_factory=list)
    deals: list[dict[str, Any]] = field(default_factory=list)
    """Each deal: {"void": bool, "rows": {name: text}}."""
    actions: list[dict[str, Any]] = field(default_factory=list)
    """Each action: seat, act, tile, end, points, and the points rows after it."""
    end: list[str] = field(default_factory=list)
    """The rows after the last action."""

    @property
    def deal_lines(self) -> list[str]:
        return [row for d in self.deals for row in d["lines"]]


def parse_listing(text: str, names: Sequence[str]) -> tuple[list[str], dict[int, ListedHand]]:
    """The header lines, and each hand's section of a plain `bergen-replay` listing."""
    header: list[str] = []
    hands: dict[int, ListedHand] = {}
    current: ListedHand | None = None
    seat_of = {n: i for i, n in enumerate(names)}
    for line in text.splitlines():
        m = re.match(r"^hand (\d+)$", line)
        if m:
            current = ListedHand(int(m.group(1)))
            hands[current.number] = current
            continue
        if current is None:
            header.append(line)
            continue
        current.lines.append(line)
        if re.match(r"^  deal \d+", line):
            current.deals.append({"void": "void" in line, "rows": {}, "lines": [line]})
            continue
        action = ACTION.match(line)
        if action:
            tile = action.group("tile")
            act = {"leads": "play", "plays": "play", "draws": "draw", "passes": "pass"}[
                action.group("verb")
            ]
            entry: dict[str, Any] = {
                "number": int(action.group("number")),
                "seat": seat_of[action.group("name")],
                "act": act,
                "line": line,
                "points_rows": [],
            }
            if act != "pass":
                entry["tile"] = None if tile == "a tile" else tile
            if act == "play":
                entry["end"] = action.group("end")
                entry["points"] = 0
            current.actions.append(entry)
            continue
        points = POINTS.match(line)
        if points and current.actions and not current.end:
            current.actions[-1]["points_rows"].append(points)
            if points.group("reason") in ("double header", "triple header", "double bonus"):
                current.actions[-1]["points"] += int(points.group("points"))
            continue
        if current.deals and not current.actions and line.startswith("    "):
            name, _, tiles = line.strip().partition("  ")
            current.deals[-1]["rows"][name.strip()] = tiles.strip()
            current.deals[-1]["lines"].append(line)
            continue
        if line.strip():
            current.end.append(line)
    return header, hands


def comparable(action: dict[str, Any]) -> dict[str, Any]:
    """An action of the listing in the shape of a RECORD.md action."""
    keep = {"seat", "act", "tile", "end", "points"}
    return {k: v for k, v in action.items() if k in keep}


def tiles_shown(text: str) -> set[Tile]:
    """Every tile written `a-b` or `[a|b]` in `text`."""
    found = {Tile.of(int(a), int(b)) for a, b in TILE.findall(text)}
    found |= {Tile.of(int(a), int(b)) for a, b in LINE_TILE.findall(text)}
    return found


# ----- simulated matches that show something ----------------------------------------------


def find_match(
    wanted: Callable[[list[Event]], bool],
    *,
    seats: int = 2,
    partnerships: bool = False,
    preset: str = "standard",
    tries: int = 3000,
) -> tuple[list[Event], dict[str, Any]]:
    """The events and record of the first simulated match (over fixed seeds) for which
    `wanted(events)` holds. Raises AssertionError when none does within `tries`."""
    rules = make_rules(seats, partnerships, preset)
    for i in range(tries):
        digest = hashlib.sha256(f"replay-test|{preset}|{seats}|{i}".encode()).digest()
        names = ["greedy", "random"] * 2
        events, _ = play_match(
            f"sim-{i}",
            rules,
            seats,
            partnerships,
            digest,
            [POLICIES[names[s]] for s in range(seats)],
            random.Random(digest),
            names=[f"{names[s]}{s}" for s in range(seats)],
        )
        if wanted(events):
            return events, build_record(events)
    raise AssertionError(f"no simulated match in {tries} shows what the test needs")
