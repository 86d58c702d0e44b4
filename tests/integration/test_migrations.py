"""The migrations build, on an empty database, exactly the schema the metadata declares."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, pool

from bergen.server.store import open_store, schema_is_behind, upgrade_to_head
from bergen.server.store.schema import metadata
from bergen.server.store.url import sqlalchemy_url


def _differences(url: str) -> list[object]:
    engine = create_engine(sqlalchemy_url(url), poolclass=pool.NullPool)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            return list(compare_metadata(context, metadata))
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'empty.db'}"
    url: str = request.getfixturevalue("empty_pg_database")
    return url


def test_migrating_an_empty_database_gives_the_declared_schema(empty_url: str) -> None:
    assert _differences(empty_url) != [], "the comparison sees nothing on an empty database"
    upgrade_to_head(empty_url)
    assert _differences(empty_url) == []


def test_the_schema_is_behind_until_upgraded_and_upgrading_twice_is_harmless(
    empty_url: str,
) -> None:
    assert schema_is_behind(empty_url)
    upgrade_to_head(empty_url)
    assert not schema_is_behind(empty_url)
    upgrade_to_head(empty_url)
    assert not schema_is_behind(empty_url)


def test_open_store_can_upgrade_the_database_it_opens(empty_url: str) -> None:
    store = open_store(empty_url, upgrade=True)
    try:
        assert store.stream_version("m") == 0
    finally:
        store.close()
    assert not schema_is_behind(empty_url)
