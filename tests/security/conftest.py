"""Fixtures of the security tests: real server processes on SQLite, and on PostgreSQL set up
as deploy/ says (the server runs as a role holding only the grants of deploy/grants.sql).

The PostgreSQL databases come from tests/conftest.py and the server processes from
tests/e2e/servers.py; every server is stopped with SIGTERM at the end and must exit 0, and the
logs of a failing test's servers are attached to its report.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg
import pytest
from e2e.servers import ServerFarm

FARMS = pytest.StashKey[list[ServerFarm]]()
ORGANISER_TOKEN = "org_" + secrets.token_urlsafe(24)
GRANTS_SQL = Path(__file__).parents[2] / "deploy" / "grants.sql"


@dataclass(frozen=True)
class Database:
    """A migrated database for a server, and the two kinds of access an attacker may hold.

    On SQLite the file is the whole database, so `server_url` and `owner_url` are the same.
    """

    backend: str
    """"sqlite" or "postgresql"."""
    server_url: str
    """What `bergen serve --database` is given: on PostgreSQL the role of deploy/grants.sql
    (INSERT and SELECT on events, no UPDATE or DELETE)."""
    owner_url: str
    """Full access: the owner of the tables (a superuser here), who can also switch off the
    append-only triggers."""


@contextmanager
def app_role(database_url: str) -> Iterator[str]:
    """A new login role holding exactly deploy/grants.sql on `database_url`'s database; yields
    its URL. The role is dropped on exit."""
    role = f"bergen_app_{uuid.uuid4().hex[:10]}"
    password = secrets.token_urlsafe(16)
    parts = urlsplit(database_url)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
        conn.execute(f"GRANT CONNECT ON DATABASE {parts.path[1:]} TO {role}")
        conn.execute(GRANTS_SQL.read_text().replace("bergen_app", role))
    host = parts.netloc.rpartition("@")[2]
    try:
        yield urlunsplit(parts._replace(netloc=f"{role}:{quote(password, safe='')}@{host}"))
    finally:
        with psycopg.connect(database_url, autocommit=True) as conn:
            # A server still connected as the role would keep it from being dropped.
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (role,),
            )
            conn.execute(f"DROP OWNED BY {role}")
            conn.execute(f"DROP ROLE {role}")


@pytest.fixture
def deployed_pg(pg_database: str) -> Iterator[Database]:
    """A migrated PostgreSQL database of this test's own, served through the deploy role."""
    with app_role(pg_database) as url:
        yield Database("postgresql", url, pg_database)


@pytest.fixture(scope="module")
def module_deployed_pg(module_pg_database: str) -> Iterator[Database]:
    """As `deployed_pg`, shared by the tests of a module."""
    with app_role(module_pg_database) as url:
        yield Database("postgresql", url, module_pg_database)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A SQLite file of this test's own (the server creates and migrates it)."""
    return f"sqlite:///{tmp_path / 'bergen.db'}"


@pytest.fixture(scope="module")
def module_sqlite_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A SQLite file shared by the tests of a module."""
    return f"sqlite:///{tmp_path_factory.mktemp('db') / 'bergen.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest) -> Database:
    """Each backend in turn: a SQLite file, then PostgreSQL served through the deploy role."""
    if request.param == "sqlite":
        url: str = request.getfixturevalue("sqlite_url")
        return Database("sqlite", url, url)
    db: Database = request.getfixturevalue("deployed_pg")
    return db


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def module_database(request: pytest.FixtureRequest) -> Database:
    """As `database`, shared by the tests of a module."""
    if request.param == "sqlite":
        url: str = request.getfixturevalue("module_sqlite_url")
        return Database("sqlite", url, url)
    db: Database = request.getfixturevalue("module_deployed_pg")
    return db


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
