"""The migrations build, on an empty database, exactly the schema the metadata declares."""

from __future__ import annotations

import time
from pathlib import Path

import psycopg
import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, pool, text
from test_match_list import fold_all, listing, real_match, write_stepwise

from bergen.domain.state import fold
from bergen.server.projections import MATCH_LIST, MatchListProjection
from bergen.server.store import open_store, schema_is_behind, upgrade_to_head
from bergen.server.store.migrate import alembic_config
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


def test_matches_listed_before_the_listing_had_times_are_listed_with_them_after_it(
    empty_url: str,
) -> None:
    """0004 gives the matches an earlier server listed their times and hand from their own
    rows, without folding the listing again (its position stays)."""
    command.upgrade(alembic_config(empty_url), "0003")
    store = open_store(empty_url)
    try:
        written = {
            f"match-{i}": write_stepwise(store, f"match-{i}", real_match(i)) for i in range(8)
        }
        last = max((e for events in written.values() for e in events), key=lambda e: e.position)
        # The listing as an earlier server folded it: every match, without times or hand.
        engine = create_engine(sqlalchemy_url(empty_url), poolclass=pool.NullPool)
        try:
            with engine.begin() as conn:
                for match_id, events in written.items():
                    conn.execute(
                        text(
                            "INSERT INTO match_list (match_id, listed, name, phase, seats,"
                            " partnerships, preset, players, scores, version) VALUES (:m, :l,"
                            " '', 'seating', 2, false, 'standard', '[\"\", \"\"]', '[0, 0]', :v)"
                        ),
                        {"m": match_id, "l": events[0].position, "v": len(events)},
                    )
                conn.execute(
                    text("UPDATE projection_positions SET position = :p WHERE name = :n"),
                    {"p": last.position, "n": MATCH_LIST},
                )
        finally:
            engine.dispose()

        command.upgrade(alembic_config(empty_url), "0007")
        engine = create_engine(sqlalchemy_url(empty_url), poolclass=pool.NullPool)
        try:
            with engine.begin() as conn:
                position = conn.execute(
                    text("SELECT position FROM projection_positions WHERE name = :n"),
                    {"n": MATCH_LIST},
                ).scalar_one()
                given = {
                    r[0]: (r[1], r[2], r[3])
                    for r in conn.execute(
                        text("SELECT match_id, created_at, started_at, hand FROM match_list")
                    )
                }
        finally:
            engine.dispose()
        assert position == last.position
        assert sorted(given) == sorted(written)
        for match_id, events in written.items():
            created_at, started_at, hand = given[match_id]
            dealt = [e for e in events if e.type == "Dealt"]
            assert created_at is not None and (started_at is not None) == bool(dealt)
            state = fold(real_match(int(match_id.split("-")[1])))
            assert hand == state.hand

        # 0008 empties the listing, which cannot be sealed without the log keys: it is
        # folded again, with the same times and hands.
        upgrade_to_head(empty_url)
        assert _differences(empty_url) == []
        projection = MatchListProjection(store)
        assert store.match_list().position(MATCH_LIST) == 0
        # Folded from the start: on PostgreSQL the global order waits out every older
        # transaction of the cluster.
        deadline = time.monotonic() + 30
        while True:
            rows = {r.match_id: r for r in listing(projection)}
            if len(rows) == len(written) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    finally:
        store.close()
    assert sorted(rows) == sorted(written)
    for match_id, events in written.items():
        r = rows[match_id]
        dealt = [e for e in events if e.type == "Dealt"]
        assert r.created_at == events[0].recorded_at
        assert r.started_at == (dealt[0].recorded_at if dealt else None)
        state = fold(real_match(int(match_id.split("-")[1])))
        assert r.hand == state.hand


def test_a_match_an_earlier_server_lists_after_0004_is_listed_without_its_creation_time(
    empty_url: str,
) -> None:
    """During a rolling restart a replica of the earlier version lists a new match without
    the columns it does not know: the listing still reads, and a replica of this version
    adds the start and the hand when it folds the deal."""
    upgrade_to_head(empty_url)
    store = open_store(empty_url)
    try:
        events = write_stepwise(store, "match-4", real_match(4))
        engine = create_engine(sqlalchemy_url(empty_url), poolclass=pool.NullPool)
        try:
            with engine.begin() as conn:
                conn.execute(
                    text(
                        "INSERT INTO match_list (match_id, listed, name, phase, seats,"
                        " partnerships, preset, players, scores, version) VALUES (:m, :l,"
                        " '', 'seating', 2, false, 'standard', '[\"\", \"\"]', '[0, 0]', 1)"
                    ),
                    {"m": "match-4", "l": events[0].position},
                )
                conn.execute(
                    text("UPDATE projection_positions SET position = :p WHERE name = :n"),
                    {"p": events[0].position, "n": MATCH_LIST},
                )
        finally:
            engine.dispose()
        projection = MatchListProjection(store)
        fold_all(projection, store, events[-1])
        [row] = listing(projection)
    finally:
        store.close()
    dealt = [e for e in events if e.type == "Dealt"]
    assert row.created_at is None
    assert row.started_at == dealt[0].recorded_at
    assert row.hand == fold(real_match(4)).hand


def _index_valid(url: str, name: str) -> bool | None:
    """Whether index `name` is valid (None: there is none)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)", (name,)
        ).fetchone()
    return None if row is None else bool(row[0])


@pytest.mark.postgres
def test_an_index_left_invalid_by_an_interrupted_build_is_built_anew(
    empty_pg_database: str,
) -> None:
    """0013 builds its indexes CONCURRENTLY: one interrupted stays, marked invalid (and IF NOT
    EXISTS would take it as built); running the migration again drops and builds it."""
    url = empty_pg_database
    upgrade_to_head(url)
    command.downgrade(alembic_config(url), "0012")
    assert _index_valid(url, "ix_events_match_opened") is None
    with psycopg.connect(url, autocommit=True) as conn:
        # What an interrupted CREATE INDEX CONCURRENTLY leaves behind.
        conn.execute("CREATE INDEX ix_events_match_opened ON events (stream_id)")
        conn.execute(
            "UPDATE pg_index SET indisvalid = false"
            " WHERE indexrelid = 'ix_events_match_opened'::regclass"
        )
    upgrade_to_head(url)
    assert _index_valid(url, "ix_events_match_opened") is True
    assert _index_valid(url, "ix_events_match_ended") is True
    assert _differences(url) == []
