"""Fixtures for the store on both backends.

PostgreSQL: BERGEN_TEST_DATABASE_URL (an admin URL, e.g. postgresql://postgres@127.0.0.1:5432/test),
else a testcontainers PostgreSQL when a Docker engine answers, else the tests are skipped, or
fail when BERGEN_REQUIRE_POSTGRES=1. Each test gets its own database, cloned from a migrated
template made once per session, and dropped afterwards.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from bergen.server.store import EventStore, open_store, upgrade_to_head
from bergen.server.store.url import psycopg_conninfo

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
    name = f"bergen_test_{uuid.uuid4().hex[:12]}"
    admin_execute(pg_admin_url, f"CREATE DATABASE {name} TEMPLATE {pg_template}")
    try:
        yield with_database(pg_admin_url, name)
    finally:
        admin_execute(pg_admin_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def empty_pg_database(pg_admin_url: str) -> Iterator[str]:
    """The URL of an empty database of this test's own, dropped at the end."""
    name = f"bergen_test_{uuid.uuid4().hex[:12]}"
    admin_execute(pg_admin_url, f"CREATE DATABASE {name}")
    try:
        yield with_database(pg_admin_url, name)
    finally:
        admin_execute(pg_admin_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@dataclass(frozen=True)
class Backend:
    """A migrated database of one backend, and a way around its append-only guards."""

    name: str
    url: str
    tamper: Callable[..., None]
    """tamper(sql, params): run a statement with the guards off (superuser, or triggers dropped)."""


def _pg_tamper(url: str) -> Callable[..., None]:
    def tamper(sql: str, params: Any = ()) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ALTER TABLE events DISABLE TRIGGER ALL")
            conn.execute(sql, params)

    return tamper


def _sqlite_tamper(path: Path) -> Callable[..., None]:
    def tamper(sql: str, params: Any = ()) -> None:
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            conn.execute("DROP TRIGGER IF EXISTS events_no_update")
            conn.execute("DROP TRIGGER IF EXISTS events_no_delete")
            conn.execute(sql.replace("%s", "?"), params)
        finally:
            conn.close()

    return tamper


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """The URL of a migrated SQLite file of this test's own."""
    url = f"sqlite:///{tmp_path / 'bergen.db'}"
    upgrade_to_head(url)
    return url


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """Each contract test runs once per backend."""
    if request.param == "sqlite":
        url = request.getfixturevalue("sqlite_url")
        return Backend("sqlite", url, _sqlite_tamper(tmp_path / "bergen.db"))
    url = request.getfixturevalue("pg_database")
    return Backend("postgresql", url, _pg_tamper(url))


@pytest.fixture
def store(backend: Backend) -> Iterator[EventStore]:
    s = open_store(backend.url)
    yield s
    s.close()
