"""Database URLs naming several hosts (for failover): each driver's spelling, and no
password in messages."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from e2e.servers import bergen_command
from psycopg.conninfo import conninfo_to_dict
from sqlalchemy.engine import make_url

from bergen.api.exit_status import ExitStatus
from bergen.server.store.url import (
    LIVENESS,
    backend_of,
    live_conninfo,
    psycopg_conninfo,
    redact,
    sqlalchemy_url,
)

MULTI = (
    "postgresql://bergen:s3cr%40t@db1.example:5432,db2.example:5433/bergen"
    "?target_session_attrs=read-write&connect_timeout=3"
)


def test_a_multi_host_url_is_postgresql_and_psycopg_takes_it_as_it_is() -> None:
    assert backend_of(MULTI) == "postgresql"
    assert psycopg_conninfo(MULTI) == MULTI
    assert psycopg_conninfo("postgresql+psycopg" + MULTI[len("postgresql") :]) == MULTI


def test_the_server_s_connections_give_a_silent_database_up_and_the_url_s_own_values_win() -> None:
    given = conninfo_to_dict(live_conninfo(MULTI))
    assert given["connect_timeout"] == "3"  # the URL's own
    assert given["target_session_attrs"] == "read-write"
    assert given["host"] == "db1.example,db2.example" and given["port"] == "5432,5433"
    assert given["password"] == "s3cr@t"
    for key, value in LIVENESS.items():
        if key != "connect_timeout":
            assert given[key] == value, key
    plain = conninfo_to_dict(live_conninfo("postgresql://u@h/db"))
    assert {k: plain[k] for k in LIVENESS} == LIVENESS
    assert plain["host"] == "h" and plain["dbname"] == "db"
    assert live_conninfo(live_conninfo(MULTI)) == live_conninfo(MULTI)
    # Behind a pooler that refuses the `options` startup parameter, an empty one in the URL
    # keeps the server's out.
    pooled = conninfo_to_dict(live_conninfo("postgresql://u@h/db?options="))
    assert pooled["options"] == ""


def test_a_url_libpq_cannot_parse_is_refused_without_its_password() -> None:
    with pytest.raises(ValueError) as raised:
        live_conninfo("postgresql://u:hunter2@h/db?no_such_setting=1")
    assert "hunter2" not in str(raised.value)


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
