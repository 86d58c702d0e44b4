"""Fixtures for the store on both backends.

The PostgreSQL databases (`pg_database`, `empty_pg_database`) come from tests/conftest.py.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from bergen.server.store import EventStore, open_store


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


def sqlite_tamper(path: Path) -> Callable[..., None]:
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
def sqlite_url(tmp_path: Path, sqlite_template: Path) -> str:
    """The URL of a migrated SQLite file of this test's own."""
    path = tmp_path / "bergen.db"
    shutil.copyfile(sqlite_template, path)
    return f"sqlite:///{path}"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """Each contract test runs once per backend."""
    if request.param == "sqlite":
        url = request.getfixturevalue("sqlite_url")
        return Backend("sqlite", url, sqlite_tamper(tmp_path / "bergen.db"))
    url = request.getfixturevalue("pg_database")
    return Backend("postgresql", url, _pg_tamper(url))


@pytest.fixture
def store(backend: Backend) -> Iterator[EventStore]:
    s = open_store(backend.url)
    yield s
    s.close()
