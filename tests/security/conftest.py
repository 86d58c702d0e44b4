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
from e2e.conftest import (  # the e2e servers' fixtures, and the hook that shows their logs
    ORGANISER_TOKEN,
    farm,
    module_farm,
    module_sqlite_url,
    pytest_runtest_makereport,
    sqlite_url,
)

__all__ = [
    "ORGANISER_TOKEN",
    "Database",
    "farm",
    "module_farm",
    "module_sqlite_url",
    "pytest_runtest_makereport",
    "sqlite_url",
]

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
