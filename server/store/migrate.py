"""Running the Alembic migrations from code: the server upgrades at startup, or refuses to start."""

from __future__ import annotations

from importlib import resources

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, pool

from .url import database_url, sqlalchemy_url


def alembic_config(url: str | None = None) -> Config:
    """An Alembic config for the packaged migrations, aimed at `url` (default: the setting)."""
    folder = resources.files("bergen.migrations")
    config = Config(str(folder / "alembic.ini"))
    config.set_main_option("script_location", str(folder))
    # Passed as an attribute, not an ini option: a password may hold `%`.
    config.attributes["url"] = url or database_url()
    config.attributes["configure_logger"] = False
    return config


def upgrade_to_head(url: str | None = None) -> None:
    """Apply every migration not yet applied. Raises the driver's error if the database is down."""
    command.upgrade(alembic_config(url), "head")


def head_revision() -> str:
    """The newest migration shipped with this version."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "the migrations folder holds no revision"
    return head


def current_revisions(url: str | None = None) -> tuple[str, ...]:
    """The revisions applied to the database (empty for a database never migrated)."""
    engine = create_engine(sqlalchemy_url(url or database_url()), poolclass=pool.NullPool)
    try:
        with engine.connect() as connection:
            return tuple(MigrationContext.configure(connection).get_current_heads())
    finally:
        engine.dispose()


def schema_is_behind(url: str | None = None) -> bool:
    """True when the database lacks a migration this version ships (or was never migrated)."""
    return current_revisions(url) != (head_revision(),)
