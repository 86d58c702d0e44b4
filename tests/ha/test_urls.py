"""Database URLs naming several hosts (for failover): each driver's spelling, and no
password in messages."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from e2e.servers import bergen_command
from sqlalchemy.engine import make_url

from bergen.api.exit_status import ExitStatus
from bergen.server.store.url import backend_of, psycopg_conninfo, redact, sqlalchemy_url

MULTI = (
    "postgresql://bergen:s3cr%40t@db1.example:5432,db2.example:5433/bergen"
    "?target_session_attrs=read-write&connect_timeout=3"
)


def test_a_multi_host_url_is_postgresql_and_psycopg_takes_it_as_it_is() -> None:
    assert backend_of(MULTI) == "postgresql"
    assert psycopg_conninfo(MULTI) == MULTI
    assert psycopg_conninfo("postgresql+psycopg" + MULTI[len("postgresql") :]) == MULTI


def test_sqlalchemy_gets_the_hosts_as_host_parameters() -> None:
    url = make_url(sqlalchemy_url(MULTI))
    assert url.drivername == "postgresql+psycopg"
    assert url.username == "bergen" and url.password == "s3cr@t"
    assert url.database == "bergen"
    assert url.query["host"] == ("db1.example:5432", "db2.example:5433")
    assert url.query["target_session_attrs"] == "read-write"
    assert url.query["connect_timeout"] == "3"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://u@h/db", "postgresql+psycopg://u@h/db"),
        ("postgresql://u@h1,h2/db", "postgresql+psycopg://u@/db?host=h1&host=h2"),
        ("postgres://h1:1,h2:2/db?a=b", "postgresql+psycopg:///db?host=h1:1&host=h2:2&a=b"),
    ],
)
def test_sqlalchemy_spellings(url: str, expected: str) -> None:
    assert sqlalchemy_url(url) == expected


def test_redact_hides_the_password_of_a_multi_host_url() -> None:
    shown = redact(MULTI)
    assert "s3cr" not in shown
    assert shown.startswith("postgresql://bergen:***@db1.example:5432,db2.example:5433/bergen")


def test_serve_refuses_a_read_database_beside_sqlite(tmp_path: Path) -> None:
    done = subprocess.run(
        [*bergen_command(), "serve", "--listen", "127.0.0.1:0",
         "--database", f"sqlite:///{tmp_path / 'bergen.db'}",
         "--read-database", "postgresql://bergen:pw@127.0.0.1:1/bergen"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
        env={**os.environ, "BERGEN_SIGNING_KEY": str(tmp_path / "key.pem")},
    )  # fmt: skip
    assert done.returncode == ExitStatus.USAGE, done.stderr
    assert "a read database needs PostgreSQL" in done.stderr
    assert "pw" not in done.stderr
