"""`make run` installs only what serving needs, `make test` what testing needs: read from
what make would do on a fresh clone (`make -n`, with a venv that does not exist yet), and
the extras it names read from pyproject.toml."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def installed(target: str, tmp_path: Path) -> set[str]:
    """The distributions `make TARGET` would install into a new venv (by name)."""
    done = subprocess.run(
        ["make", "-n", f"VENV={tmp_path / 'venv'}", target],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    extras: set[str] = set()
    for line in done.stdout.splitlines():
        found = re.search(r"pip install .*-e '\.\[([a-z,]*)\]'", line)
        if found:
            extras |= set(found.group(1).split(","))
    assert extras, done.stdout
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = {r.split("[")[0].split(">")[0].split("=")[0] for r in project["dependencies"]}
    optional = project["optional-dependencies"]
    todo = list(extras)
    while todo:
        extra = todo.pop()
        for requirement in optional[extra]:
            if requirement.startswith("bergen["):  # an extra made of others
                todo += requirement[len("bergen[") : -1].split(",")
            else:
                wanted.add(re.split(r"[\[<>=!~ ]", requirement, maxsplit=1)[0])
    return wanted


def test_make_run_installs_the_server_and_its_web_page_and_nothing_for_developers(
    tmp_path: Path,
) -> None:
    got = installed("run", tmp_path)
    assert {"grpcio", "sqlalchemy", "psycopg", "starlette", "uvicorn"} <= got
    assert not got & {"pytest", "ruff", "mypy", "hypothesis", "playwright", "dominoes",
                      "eventsourcing", "grpcio-tools"}  # fmt: skip


def test_make_test_installs_the_test_tools_and_not_the_linters_or_benchmarks(
    tmp_path: Path,
) -> None:
    got = installed("test", tmp_path)
    assert {"pytest", "pytest-xdist", "hypothesis", "pexpect", "playwright", "starlette"} <= got
    assert not got & {"ruff", "mypy", "dominoes", "eventsourcing"}
