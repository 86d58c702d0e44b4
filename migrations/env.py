"""Alembic environment: the database URL is the caller's, else BERGEN_DATABASE_URL."""

from __future__ import annotations

import logging.config

from alembic import context
from sqlalchemy import create_engine, pool

from bergen.server.store.schema import metadata
from bergen.server.store.url import database_url, sqlalchemy_url

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    logging.config.fileConfig(config.config_file_name, disable_existing_loggers=False)

url = sqlalchemy_url(config.attributes.get("url") or database_url())


def run_migrations_offline() -> None:
    """Emit the SQL instead of running it (`alembic upgrade head --sql`)."""
    context.configure(url=url, target_metadata=metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    """Run the migrations on a connection, one transaction for all of them."""
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, target_metadata=metadata)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(url, poolclass=pool.NullPool)
    with engine.connect() as connection:
        context.configure(connection=connection, target_metadata=metadata)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
