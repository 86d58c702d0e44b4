"""Fixtures of the end-to-end tests: real server processes on SQLite and PostgreSQL.

Every server started through a farm is stopped with SIGTERM at the end and must exit 0; the
logs of a failing test's servers are attached to its report.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from bergen.server.auth import new_organiser_token

from .servers import ServerFarm

FARMS = pytest.StashKey[list[ServerFarm]]()
ORGANISER_TOKEN = new_organiser_token()


def _farm(request: pytest.FixtureRequest, workdir: Path) -> Iterator[ServerFarm]:
    farm = ServerFarm(workdir)
    request.node.stash.setdefault(FARMS, []).append(farm)
    yield farm
    problems = farm.stop_all()
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)


@pytest.fixture
def farm(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServerFarm]:
    """Servers of this test's own."""
    yield from _farm(request, tmp_path)


@pytest.fixture(scope="module")
def module_farm(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerFarm]:
    """Servers shared by the tests of a module."""
    yield from _farm(request, tmp_path_factory.mktemp("servers"))


def migrated_sqlite(template: Path, path: Path) -> str:
    """The URL of `path`, made a copy of the migrated `template` (tests/conftest.py)."""
    shutil.copyfile(template, path)
    return f"sqlite:///{path}"


@pytest.fixture
def sqlite_url(tmp_path: Path, sqlite_template: Path) -> str:
    """A migrated SQLite file of this test's own: a copy of the migrations' file, so that a
    server starts on it without running them (a test of a fresh file makes its own)."""
    return migrated_sqlite(sqlite_template, tmp_path / "bergen.db")


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest, sqlite_url: str) -> str:
    """A database of this test's own, on each backend in turn."""
    if request.param == "sqlite":
        return sqlite_url
    url: str = request.getfixturevalue("pg_database")
    return url


def backend_param(name: str, *values: object) -> object:
    """A parameter naming backend `name` ("sqlite" or "postgresql") for `database`, with more
    `values` after it, marked as needing PostgreSQL when it does."""
    marks = [pytest.mark.postgres] if name == "postgresql" else []
    return pytest.param(name, *values, marks=marks)


def on_backend(name: str) -> pytest.MarkDecorator:
    """A test that takes `database` run on the one backend `name`, not on each: for the tests
    the backend is not what they are about (tests/integration's store contract tests prove
    the two alike). The tests about storage (tampering, crashes, restarts, the read models)
    keep both."""
    return pytest.mark.parametrize("database", [backend_param(name)], indirect=True)


@pytest.fixture(scope="module")
def module_sqlite_url(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path) -> str:
    return migrated_sqlite(sqlite_template, tmp_path_factory.mktemp("db") / "bergen.db")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if not report.failed:
        return
    for node in item.listchain():
        for farm in node.stash.get(FARMS, []):
            for server in farm.servers:
                report.sections.append(
                    (f"log of {server.name} ({server.database})", server.log_tail(200))
                )
