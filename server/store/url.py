"""The one database setting, `BERGEN_DATABASE_URL`, and its spellings for each driver."""

from __future__ import annotations

import os
from urllib.parse import quote, unquote

DATABASE_URL_ENV = "BERGEN_DATABASE_URL"
DEFAULT_DATABASE_URL = "sqlite:///./bergen.db"

_PG_PREFIXES = ("postgresql+psycopg://", "postgresql://", "postgres://")
_SQLITE_PREFIX = "sqlite:///"


def database_url() -> str:
    """The configured URL: `BERGEN_DATABASE_URL`, else the embedded SQLite file."""
    return os.environ.get(DATABASE_URL_ENV) or DEFAULT_DATABASE_URL


def backend_of(url: str) -> str:
    """`"postgresql"` or `"sqlite"`. Raises ValueError for any other scheme."""
    if url.startswith(_PG_PREFIXES):
        return "postgresql"
    if url.startswith(_SQLITE_PREFIX):
        return "sqlite"
    raise ValueError(
        f"unsupported database URL {redact(url)!r}: "
        "use postgresql://..., postgresql+psycopg://... or sqlite:///path"
    )


def sqlalchemy_url(url: str) -> str:
    """The URL for SQLAlchemy, with the psycopg 3 driver named. Raises ValueError as backend_of.

    A URL naming several hosts (`postgresql://u@h1:5432,h2:5432/db?target_session_attrs=...`,
    libpq's spelling, which psycopg takes as it is) is given to SQLAlchemy as its `host`
    parameters (`postgresql+psycopg://u@/db?host=h1:5432&host=h2:5432&...`)."""
    if backend_of(url) != "postgresql":
        return url
    rest = url.split("://", 1)[1]
    hosts = _hosts(rest)
    if len(hosts) < 2:
        return "postgresql+psycopg://" + rest
    head, question, query = rest.partition("?")
    credentials, at, authority = head.rpartition("@")
    database = authority.split("/", 1)[1] if "/" in authority else ""
    params = "&".join(f"host={h}" for h in hosts)
    return (
        f"postgresql+psycopg://{credentials}{at}/{database}?{params}"
        f"{'&' + query if question and query else ''}"
    )


def _hosts(rest: str) -> list[str]:
    """The hosts (with their ports) a URL's part after `scheme://` names."""
    authority = rest.split("?", 1)[0].rpartition("@")[2].split("/", 1)[0]
    return [h for h in authority.split(",") if h]


def psycopg_conninfo(url: str) -> str:
    """The URL for psycopg (`postgresql://...`). Raises ValueError for a non-PostgreSQL URL."""
    if backend_of(url) != "postgresql":
        raise ValueError(f"not a PostgreSQL URL: {redact(url)!r}")
    return "postgresql://" + url.split("://", 1)[1]


LIVENESS: dict[str, str] = {
    "connect_timeout": "10",
    "keepalives": "1",
    "keepalives_idle": "5",
    "keepalives_interval": "2",
    "keepalives_count": "3",
    "tcp_user_timeout": "10000",
    "options": "-c statement_timeout=30000",
}
"""libpq settings of the server's own connections, so that a database gone silent (a
partition, a host lost with its power: no packet answers, none refuses) fails the calls that
wait on it within seconds rather than when the kernel gives the connection up (about 15
minutes, holding their threads): a connection attempt gives up after 10 s; a connection
waiting for an answer is probed after 5 s without a packet and given up when no probe is
answered; data unacknowledged for 10 s gives the connection up. A slow database that answers
is not cut off: its kernel acknowledges both the query and the probes. Ignored on a Unix
socket. A database that answers but holds a statement (a lock someone keeps) cancels it after
30 s (`statement_timeout`), so that it does not hold a call's thread for ever either. The
URL's own values win (its `options` replace these in whole)."""


def live_conninfo(url: str) -> str:
    """`psycopg_conninfo(url)` with the `LIVENESS` settings it does not give itself (added to
    its query). Raises ValueError as psycopg_conninfo, or for a URL libpq cannot parse."""
    from psycopg import conninfo as pg_conninfo

    text = psycopg_conninfo(url)
    try:
        given = pg_conninfo.conninfo_to_dict(text)
    except Exception as e:  # psycopg.ProgrammingError: not a URL libpq takes
        raise ValueError(f"cannot parse the database URL {redact(url)!r}: {e}") from e
    missing = "&".join(f"{k}={quote(v, safe='')}" for k, v in LIVENESS.items() if k not in given)
    if not missing:
        return text
    return f"{text}{'&' if '?' in text else '?'}{missing}"


def sqlite_path(url: str) -> str:
    """The file path of a `sqlite:///path` URL (`sqlite:////abs/path` for an absolute one).

    Raises ValueError for another scheme or for an in-memory database, which a store shared by
    several connections cannot use.
    """
    if backend_of(url) != "sqlite":
        raise ValueError(f"not a SQLite URL: {redact(url)!r}")
    path = unquote(url[len(_SQLITE_PREFIX) :].split("?", 1)[0])
    if path in ("", ":memory:"):
        raise ValueError("an in-memory SQLite database cannot hold a shared event store")
    return path


def redact(url: str) -> str:
    """The URL with any password replaced by `***`, for messages."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    credentials, _, host = rest.rpartition("@")
    user, colon, _ = credentials.partition(":")
    return f"{scheme}://{user}{':***' if colon else ''}@{host}"
