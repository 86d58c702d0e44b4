"""Running the Alembic migrations from code: the server upgrades at startup, or refuses to start.

Whether the schema is current is checked without Alembic or SQLAlchemy (whose imports take
most of a second): the newest revision is read from the migration files' headers and the
applied one from `alembic_version` through the driver. Alembic is imported only to migrate.
"""

from __future__ import annotations

import re
import sqlite3
from importlib import resources
from typing import TYPE_CHECKING
from urllib.parse import quote

from .url import backend_of, database_url, live_conninfo, sqlalchemy_url, sqlite_path

if TYPE_CHECKING:
    from alembic.config import Config

_REVISION = re.compile(r'^revision(?:: str)? = "([^"]+)"$', re.MULTILINE)
_DOWN = re.compile(r'^down_revision(?:: [^=]+)? = (?:"([^"]+)"|None)$', re.MULTILINE)


def alembic_config(url: str | None = None) -> Config:
    """An Alembic config for the packaged migrations, aimed at `url` (default: the setting)."""
    from alembic.config import Config

    folder = resources.files("bergen.migrations")
    config = Config(str(folder / "alembic.ini"))
    config.set_main_option("script_location", str(folder))
    # Passed as an attribute, not an ini option: a password may hold `%`.
    config.attributes["url"] = url or database_url()
    config.attributes["configure_logger"] = False
    return config


def upgrade_to_head(url: str | None = None) -> None:
    """Apply every migration not yet applied. Raises the driver's error if the database is down."""
    from alembic import command

    command.upgrade(alembic_config(url), "head")


def head_revision() -> str:
    """The newest migration shipped with this version: the revision no other one follows.

    Read from the files' `revision` / `down_revision` lines; Alembic's own reading when they
    do not name a single head.
    """
    revisions: set[str] = set()
    followed: set[str] = set()
    for path in (resources.files("bergen.migrations") / "versions").iterdir():
        if not path.name.endswith(".py") or path.name.startswith("_"):
            continue
        text = path.read_text(encoding="utf-8")
        revision, down = _REVISION.search(text), _DOWN.search(text)
        if revision is None or down is None:
            return _alembic_head()
        revisions.add(revision.group(1))
        if down.group(1):
            followed.add(down.group(1))
    heads = revisions - followed
    return heads.pop() if len(heads) == 1 else _alembic_head()


def _alembic_head() -> str:
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "the migrations folder holds no revision"
    return head


def current_revisions(url: str | None = None) -> tuple[str, ...]:
    """The revisions applied to the database (empty for a database never migrated).

    Raises the driver's error if the database cannot be reached.
    """
    url = url or database_url()
    sqlalchemy_url(url)  # raises ValueError for an unsupported URL
    if backend_of(url) == "postgresql":
        import psycopg

        with psycopg.connect(live_conninfo(url), autocommit=True) as conn:
            if conn.execute("SELECT to_regclass('alembic_version')").fetchone() in (None, (None,)):
                return ()
            rows = conn.execute("SELECT version_num FROM alembic_version").fetchall()
        return tuple(sorted(r[0] for r in rows))
    # Read-only, and never creating the file: a missing file is a database never migrated.
    path = sqlite_path(url)
    try:
        db = sqlite3.connect(f"file:{quote(path)}?mode=ro", uri=True)
    except sqlite3.OperationalError:
        return ()
    try:
        try:
            rows = db.execute("SELECT version_num FROM alembic_version").fetchall()
        except sqlite3.OperationalError as e:
            if "no such table" in str(e):
                return ()
            raise
    finally:
        db.close()
    return tuple(sorted(r[0] for r in rows))


def schema_is_behind(url: str | None = None) -> bool:
    """True when the database lacks a migration this version ships (or was never migrated)."""
    return current_revisions(url) != (head_revision(),)
