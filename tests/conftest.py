"""Fixtures shared by every suite: PostgreSQL databases of a test's (or a module's) own, and
a migrated SQLite file to copy.

PostgreSQL: BERGEN_TEST_DATABASE_URL (an admin URL, e.g. postgresql://postgres@127.0.0.1:5432/test),
else a testcontainers PostgreSQL when a Docker engine answers, else the tests that need it are
skipped, or fail when BERGEN_REQUIRE_POSTGRES=1. Each database is cloned from a migrated
template made once per session (or created empty), and dropped afterwards.
"""

from __future__ import annotations

import os

# The tests fork (pexpect's pseudo-terminals) from a process holding gRPC channels; gRPC's
# fork handlers can then block the fork for ever. Nothing here needs gRPC in a forked child.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")

import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from bergen.server.store import upgrade_to_head
from bergen.server.store.url import psycopg_conninfo


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file, made once, that each test's file is a copy of (the migrations
    write nothing of a file's own: a copy is the file they would make)."""
    path = tmp_path_factory.mktemp("sqlite-template") / "bergen.db"
    upgrade_to_head(f"sqlite:///{path}")
    # The last connection closed folds the write-ahead log into the file: one file to copy.
    sqlite3.connect(path).close()
    assert not path.with_name(f"{path.name}-wal").exists(), "the template's log was not folded"
    return path


HOW_TO_RUN = (
    "PostgreSQL tests need a server: set BERGEN_TEST_DATABASE_URL="
    "postgresql://postgres@127.0.0.1:5432/test (a role that may CREATE DATABASE), "
    "or run a Docker engine for testcontainers"
)


def _docker_answers() -> bool:
    try:
        import docker  # type: ignore[import-untyped]

        docker.from_env(timeout=3).ping()
    except Exception:
        return False
    return True


@pytest.fixture(scope="session")
def pg_admin_url() -> Iterator[str]:
    """A URL on which the tests may create and drop databases."""
    url = os.environ.get("BERGEN_TEST_DATABASE_URL")
    if url:
        yield psycopg_conninfo(url)
        return
    if _docker_answers():
        from testcontainers.postgres import PostgresContainer

        with PostgresContainer("postgres:15-alpine", driver=None) as pg:
            yield psycopg_conninfo(pg.get_connection_url())
        return
    if os.environ.get("BERGEN_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"BERGEN_REQUIRE_POSTGRES=1 but no PostgreSQL: {HOW_TO_RUN}")
    pytest.skip(HOW_TO_RUN)


def with_database(admin_url: str, name: str) -> str:
    """`admin_url` pointing at database `name`."""
    return urlunsplit(urlsplit(admin_url)._replace(path=f"/{name}"))


def admin_execute(admin_url: str, *statements: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


@contextmanager
def new_database(admin_url: str, template: str | None = None) -> Iterator[str]:
    """The URL of a new database (a copy of `template`, else empty), dropped on exit."""
    name = f"bergen_test_{uuid.uuid4().hex[:12]}"
    clause = f" TEMPLATE {template}" if template else ""
    admin_execute(admin_url, f"CREATE DATABASE {name}{clause}")
    try:
        yield with_database(admin_url, name)
    finally:
        admin_execute(admin_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(scope="session")
def pg_template(pg_admin_url: str) -> Iterator[str]:
    """A migrated database that each test's database is cloned from."""
    name = f"bergen_tmpl_{uuid.uuid4().hex[:12]}"
    admin_execute(pg_admin_url, f"CREATE DATABASE {name}")
    try:
        upgrade_to_head(with_database(pg_admin_url, name))
        yield name
    finally:
        admin_execute(pg_admin_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def pg_database(pg_admin_url: str, pg_template: str) -> Iterator[str]:
    """The URL of a migrated database of this test's own, dropped at the end."""
    with new_database(pg_admin_url, pg_template) as url:
        yield url


@pytest.fixture
def empty_pg_database(pg_admin_url: str) -> Iterator[str]:
    """The URL of an empty database of this test's own, dropped at the end."""
    with new_database(pg_admin_url) as url:
        yield url


@pytest.fixture(scope="module")
def module_pg_database(pg_admin_url: str, pg_template: str) -> Iterator[str]:
    """The URL of a migrated database of this module's own, dropped after its last test."""
    with new_database(pg_admin_url, pg_template) as url:
        yield url


@pytest.hookimpl(tryfirst=True)
@pytest.fixture(autouse=True)
def own_config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test its own user configuration folder (the known servers' keys, player tokens),
    so that no test reads or writes the user's, nor another test's."""
    folder = tmp_path / "config" / "bergen"
    monkeypatch.setenv("BERGEN_CONFIG_DIR", str(folder))
    # The same folder for a command run with the BERGEN_ variables left out.
    monkeypatch.setenv("XDG_CONFIG_HOME", str(folder.parent))
    return folder


LONGEST_FIRST = ["web", "deploy", "ha", "e2e", "security", "integration", "unit"]
"""The suites by the time a file of theirs takes, longest first (a suite not named goes
first)."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under `--dist loadfile` (`make test` runs pytest-xdist's workers so), hand out the files
    with a test marked `slow` first, then the suites whose files are long (the browsers', the
    servers') before those whose files are short, so that the workers end together: the unit
    tests, by the thousand and quick, come last and fill the gaps.

    Each file goes to one worker as a whole, so a module's fixtures (its servers, its database,
    its browser) are made once; the files go out in the order of their first test
    (`--no-loadscope-reorder`). What files share outside any test waits for its turn
    (tests/ha's clusters: a lock)."""
    # pytest-xdist's workers collect with `dist` "no": the order they collect in is the one
    # the controller hands the files out in.
    if getattr(config.option, "dist", "no") != "loadfile" and not hasattr(config, "workerinput"):
        return
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::")[0], []).append(item)

    def order(tests: list[pytest.Item]) -> tuple[bool, int]:
        suite = tests[0].nodeid.split("/")[1] if tests[0].nodeid.count("/") > 1 else ""
        slow = any(t.get_closest_marker("slow") for t in tests)
        return not slow, LONGEST_FIRST.index(suite) if suite in LONGEST_FIRST else 0

    slow_first = sorted(files.values(), key=order)
    items[:] = [item for tests in slow_first for item in tests]
