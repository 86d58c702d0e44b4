"""The event store against its references, on PostgreSQL and on SQLite, in one run.

    python -m bench store            (or: python -m bench.store_bench --seconds 3)

For each backend: single-event appends per second through the store against a bare driver
INSERT + COMMIT of the same row (1 and 4 writers, each writer its own stream, writers are
processes), against the `eventsourcing` library saving one event per save, and append latency
(p50/p99, one writer) with 10 stored matches against 10,000. PostgreSQL runs in a database
created for the run (from BERGEN_BENCH_DATABASE_URL, default
postgresql://postgres@127.0.0.1:5432/postgres) and dropped afterwards; SQLite in a temporary
folder.

`eventsourcing_rebuild_seconds(...)` times eventsourcing rebuilding an aggregate of N events,
for the load-and-fold comparison.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg

from bench import harness
from bench.harness import Column, ExitStatus, Line, Table
from bergen.api.stored import GENESIS_HASH
from bergen.server.store import Append, EventMetadata, NewEvent, open_store, upgrade_to_head
from bergen.server.store.batch import build_rows

PAYLOAD: dict[str, Any] = {"seat": 1, "tile": "3-5", "end": "left", "points": 0}
EVENT = NewEvent("TilePlayed", 1, PAYLOAD)
EVENTS_PER_MATCH = 30


# --- the writers (run in separate processes) ----------------------------------------------


def _bare_row(stream: str, seq: int) -> tuple[Any, ...]:
    (row,) = build_rows(stream, seq - 1, [EVENT], EventMetadata("bench", None, "r"), GENESIS_HASH)
    return (
        stream,
        seq,
        EVENT.type,
        1,
        row.payload_json,
        row.metadata_json,
        row.prev_hash,
        row.hash,
        row.salt,
    )


_PG_BARE = (
    "INSERT INTO events (stream_id, seq, type, schema_version, payload, metadata, prev_hash,"
    " hash, salt) VALUES (%s, %s, %s, %s, %s::json, %s::json, %b, %b, %b)"
    " RETURNING position, recorded_at"
)
_SQLITE_BARE = (
    "INSERT INTO events (stream_id, seq, position, type, schema_version, payload, metadata,"
    " prev_hash, hash, salt, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _loop(step: Callable[[int], None], ready: Any, seconds: float) -> int:
    """Warm up, wait at the `ready` barrier for every writer, run step(i) for `seconds`;
    how many steps were done."""
    for i in range(1, 6):  # warm up: connections, prepared statements
        step(-i)
    ready.wait()
    end = time.perf_counter() + seconds
    done = 0
    while time.perf_counter() < end:
        step(done)
        done += 1
    return done


def _writer(kind: str, url: str, stream: str, ready: Any, seconds: float) -> int:
    """One writer appending single events to its own stream; how many it appended."""
    if kind == "store":
        store = open_store(url)
        version = 0

        def step(_: int) -> None:
            nonlocal version
            version = store.append(Append(stream, version, [EVENT])).last_seq

        try:
            return _loop(step, ready, seconds)
        finally:
            store.close()
    if kind == "bare-postgresql":
        with psycopg.connect(url, autocommit=True) as pg:
            seqs = iter(range(1, 10**9))

            def pg_step(_: int) -> None:
                pg.execute(_PG_BARE, _bare_row(stream, next(seqs)), prepare=True).fetchone()

            return _loop(pg_step, ready, seconds)
    conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None, timeout=60)
    conn.execute("PRAGMA journal_mode=WAL")  # as the store sets it
    conn.execute("PRAGMA synchronous=FULL")
    sqlite_seqs = iter(range(1, 10**9))

    def sqlite_step(_: int) -> None:
        seq = next(sqlite_seqs)
        r = _bare_row(stream, seq)
        conn.execute("BEGIN IMMEDIATE")
        row = conn.execute("SELECT coalesce(max(position), 0) + 1 FROM events").fetchone()
        conn.execute(_SQLITE_BARE, (*r[:2], row[0], *r[2:], "2025-01-01 00:00:00+00:00"))
        conn.execute("COMMIT")

    try:
        return _loop(sqlite_step, ready, seconds)
    finally:
        conn.close()


def _write_and_report(
    kind: str, url: str, stream: str, ready: Any, seconds: float, results: Any
) -> None:
    results.put(_writer(kind, url, stream, ready, seconds))


def _rate(kind: str, url: str, writers: int, seconds: float) -> float:
    """Appends per second of `writers` processes of `kind`, each on its own stream, all
    measured over the same window (they start together at a barrier)."""
    ctx = mp.get_context("spawn")
    tag = uuid.uuid4().hex[:8]
    ready = ctx.Barrier(writers)
    results = ctx.Queue()
    procs = [
        ctx.Process(
            target=_write_and_report,
            args=(kind, url, f"{kind}-{tag}-{i}", ready, seconds, results),
        )
        for i in range(writers)
    ]
    for proc in procs:
        proc.start()
    counts: list[int] = [results.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join()
    return sum(counts) / seconds


# --- eventsourcing -----------------------------------------------------------------------


def _es_env(backend: str, url: str) -> dict[str, str]:
    if backend == "sqlite":
        return {
            "PERSISTENCE_MODULE": "eventsourcing.sqlite",
            "SQLITE_DBNAME": url.removeprefix("sqlite:///"),
        }
    parts = urlsplit(url)
    return {
        "PERSISTENCE_MODULE": "eventsourcing.postgres",
        "POSTGRES_DBNAME": parts.path.lstrip("/"),
        "POSTGRES_HOST": parts.hostname or "127.0.0.1",
        "POSTGRES_PORT": str(parts.port or 5432),
        "POSTGRES_USER": parts.username or "postgres",
        "POSTGRES_PASSWORD": parts.password or "",
    }


def _es_app(backend: str, url: str) -> Any:
    from eventsourcing.application import Application

    return Application(env=_es_env(backend, url))


_ES_CLASS: list[Any] = []


def _es_aggregate_class() -> Any:
    """The eventsourcing aggregate, defined once (the library registers each class by name)."""
    if _ES_CLASS:
        return _ES_CLASS[0]
    from eventsourcing.domain import Aggregate, event

    class Match(Aggregate):
        def __init__(self) -> None:
            self.plays: list[dict[str, Any]] = []

        @event("TilePlayed")
        def play(self, seat: int, tile: str, end: str, points: int) -> None:
            self.plays.append({"seat": seat, "tile": tile, "end": end, "points": points})

    _ES_CLASS.append(Match)
    return Match


def eventsourcing_sqlite_settings(url: str) -> str:
    """The journal mode and synchronous level eventsourcing's own SQLite connection runs
    with (it sets WAL and leaves synchronous at the build's default)."""
    app = _es_app("sqlite", url)
    try:
        with app.recorder.datastore.transaction(commit=False) as cursor:
            cursor.execute("PRAGMA journal_mode")
            mode = cursor.fetchone()[0]
            cursor.execute("PRAGMA synchronous")
            sync = cursor.fetchone()[0]
    finally:
        app.close()
    levels = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
    return f"journal_mode={str(mode).upper()}, synchronous={levels.get(int(sync), sync)}"


def eventsourcing_save_rate(backend: str, url: str, seconds: float) -> float:
    """Saves per second of one eventsourcing aggregate, one event per save (one writer)."""
    app = _es_app(backend, url)
    match = _es_aggregate_class()()
    app.save(match)
    for _ in range(5):
        match.play(**PAYLOAD)
        app.save(match)
    done = 0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        match.play(**PAYLOAD)
        app.save(match)
        done += 1
    app.close()
    return done / seconds


def eventsourcing_rebuild_seconds(
    backend: str, url: str, events: int = 300, repeats: int = 50
) -> float:
    """Median seconds for eventsourcing to rebuild an aggregate of `events` events from its
    store (`backend` "postgresql" with a postgresql:// URL, or "sqlite" with sqlite:///path).

    The aggregate is created and saved first, one save for all events.
    """
    app = _es_app(backend, url)
    match = _es_aggregate_class()()
    for _ in range(events - 1):
        match.play(**PAYLOAD)
    app.save(match)
    app.repository.get(match.id)  # warm up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        rebuilt = app.repository.get(match.id)
        times.append(time.perf_counter() - start)
    assert rebuilt.version == events
    app.close()
    return statistics.median(times)


def load_and_fold_seconds(url: str, events: int = 300, repeats: int = 50) -> float:
    """Median seconds to load a stored match of `events` events through a cold repository:
    read the stream, decode every event, fold it (what a replica does on a cache miss)."""
    from bench.domain_bench import recorded_match
    from bergen.domain import encode
    from bergen.domain.errors import LogTampered
    from bergen.server.keys import LogKeys
    from bergen.server.matches import MatchRepository, recheck

    # As a server reads: every row's authenticator and chain link checked, the rules re-checked.
    store = open_store(url, log_keys=LogKeys.generate())
    try:
        match = recorded_match(events)
        # A server appends whole commands: cut the prefix where a command ends, as stored
        # matches do (the rules re-check refuses a command cut short).
        while True:
            try:
                recheck("fold", 0, match, None)
                break
            except LogTampered:
                match = match[:-1]
        events = len(match)
        stream = f"fold-{uuid.uuid4().hex[:8]}"
        for start in range(0, len(match), 20):
            batch = [NewEvent(*encode(e)) for e in match[start : start + 20]]
            store.append(Append(stream, start, batch))
        MatchRepository(store).load(stream)  # warm up
        times = []
        for _ in range(repeats):
            begin = time.perf_counter()
            loaded = MatchRepository(store).load(stream)
            times.append(time.perf_counter() - begin)
        assert loaded.version == events
        return statistics.median(times)
    finally:
        store.close()


# --- latency with few and many stored matches --------------------------------------------


def _latencies(url: str, streams: list[str], appends: int) -> tuple[float, float]:
    """p50 and p99 in ms of single-event appends spread over `streams` (read first, as the
    server loads a match before a command)."""
    store = open_store(url)
    versions = {s: len(store.read_stream(s)) for s in streams}
    times = []
    for i in range(appends):
        s = streams[i % len(streams)]
        start = time.perf_counter()
        versions[s] = store.append(Append(s, versions[s], [EVENT])).last_seq
        times.append(time.perf_counter() - start)
    store.close()
    p50, p99 = (harness.percentile(times, p, "exclusive") for p in (50, 99))
    return p50 * 1000, p99 * 1000


def _populate_through_store(url: str, matches: int) -> list[str]:
    store = open_store(url)
    names = [f"match-{uuid.uuid4().hex[:12]}" for _ in range(matches)]
    for name in names:
        store.append(Append(name, 0, [EVENT] * EVENTS_PER_MATCH))
    store.close()
    return names


def _bulk_rows(matches: int) -> Iterator[tuple[Any, ...]]:
    """Filler matches in the store's schema: real payloads and metadata, one salt and hash per
    row but not chained (computing 300,000 chained hashes would dominate the run)."""
    (row,) = build_rows("x", 0, [EVENT], EventMetadata("bench", None, "r"), GENESIS_HASH)
    for m in range(matches):
        stream = f"filler-{m:06d}"
        for seq in range(1, EVENTS_PER_MATCH + 1):
            yield (
                stream,
                seq,
                EVENT.type,
                1,
                row.payload_json,
                row.metadata_json,
                row.prev_hash,
                os.urandom(32),
                os.urandom(16),
            )


def _bulk_fill_postgres(url: str, matches: int) -> None:
    with psycopg.connect(url) as conn:
        with conn.cursor().copy(
            "COPY events (stream_id, seq, type, schema_version, payload, metadata, prev_hash,"
            " hash, salt) FROM STDIN"
        ) as copy:
            for r in _bulk_rows(matches):
                copy.write_row(r)
        conn.commit()
        conn.autocommit = True
        conn.execute("VACUUM ANALYZE events")


def _bulk_fill_sqlite(url: str, matches: int) -> None:
    conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    (base,) = conn.execute("SELECT coalesce(max(position), 0) FROM events").fetchone()
    conn.executemany(
        _SQLITE_BARE,
        (
            (*r[:2], base + 1 + i, *r[2:], "2025-01-01 00:00:00+00:00")
            for i, r in enumerate(_bulk_rows(matches))
        ),
    )
    conn.execute("COMMIT")
    conn.execute("ANALYZE")
    conn.close()


# --- the run -----------------------------------------------------------------------------


TABLE = Table(
    (
        Column("measure", 50, "<"),
        Column("bergen", 14),
        Column("reference", 14),
        Column("ratio", 7),
        Column("goal", 8),
    ),
    met="ok",
)


def _line(measure: str, ours: str, reference: str, ratio: float, goal: str) -> Line:
    """A figure against its reference, its goal (an operator and a ratio) judged."""
    return Line(measure, ours, reference, ratio, goal, harness.meets(ratio, goal) if goal else None)


def measure(backend: str, url: str, seconds: float, appends: int, rounds: int = 2) -> list[Line]:
    """Every figure for one backend whose migrated, empty database is at `url`."""
    lines = []
    bare = f"bare-{backend}"
    for writers in (1, 4):
        # Best of `rounds`, alternating which goes first: fsync times on a shared machine drift.
        def rate(kind: str, _: int, writers: int = writers) -> float:
            return _rate(kind, url, writers, seconds)

        runs = harness.rounds(("store", bare), rounds, rate)
        ours, ref = max(runs["store"]), max(runs[bare])
        lines.append(
            _line(
                f"appends/s, {writers} writer(s), vs bare INSERT+COMMIT",
                f"{ours:,.0f}/s",
                f"{ref:,.0f}/s",
                ours / ref,
                ">= 0.95",
            )
        )
        if writers == 1:
            single, bare_single = ours, ref
    es = eventsourcing_save_rate(backend, url, seconds)
    lines.append(
        _line(
            "appends/s, 1 writer, vs eventsourcing save()",
            f"{single:,.0f}/s",
            f"{es:,.0f}/s",
            single / es,
            ">= 3.0",
        )
    )
    # What one durable commit per append allows at best against eventsourcing: the bare
    # INSERT + COMMIT's own rate over its save() rate (both one writer, this run).
    lines.append(
        _line(
            " (bare INSERT+COMMIT vs eventsourcing save())",
            f"{bare_single:,.0f}/s",
            f"{es:,.0f}/s",
            bare_single / es,
            "",
        )
    )
    ours_load = load_and_fold_seconds(url)
    es_load = eventsourcing_rebuild_seconds(backend, url)
    lines.append(
        _line(
            "load + fold a 300-event match vs eventsourcing rebuild",
            f"{ours_load * 1000:.2f} ms",
            f"{es_load * 1000:.2f} ms",
            es_load / ours_load,
            ">= 8.0",
        )
    )
    few = _populate_through_store(url, 10)
    p50_few, p99_few = _latencies(url, few, appends)
    (_bulk_fill_postgres if backend == "postgresql" else _bulk_fill_sqlite)(url, 10_000)
    many = [f"filler-{m:06d}" for m in range(0, 10_000, 1000)]
    p50_many, p99_many = _latencies(url, many, appends)
    lines.append(
        _line(
            "append p50 latency, 10,000 matches vs 10",
            f"{p50_many:.3f} ms",
            f"{p50_few:.3f} ms",
            p50_many / p50_few,
            "<= 1.25",
        )
    )
    lines.append(
        _line(
            "append p99 latency, 10,000 matches vs 10",
            f"{p99_many:.3f} ms",
            f"{p99_few:.3f} ms",
            p99_many / p99_few,
            "<= 1.5",
        )
    )
    return lines


@contextmanager
def bench_database(admin_url: str) -> Iterator[str]:
    """A migrated PostgreSQL database made for the run, dropped afterwards."""
    name = f"bergen_bench_{uuid.uuid4().hex[:10]}"
    admin = "postgresql://" + admin_url.split("://", 1)[1]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = urlunsplit(urlsplit(admin)._replace(path=f"/{name}"))
    try:
        upgrade_to_head(url)
        yield url
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.store_bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    harness.add_database_url(parser)
    quick_or = harness.quick_or
    parser.add_argument(
        "--seconds", type=float, default=quick_or(2.0, 0.3), help="per throughput run"
    )
    parser.add_argument(
        "--rounds", type=int, default=quick_or(2, 1), help="runs per throughput figure (best)"
    )
    parser.add_argument(
        "--appends", type=int, default=quick_or(2000, 200), help="per latency figure"
    )
    parser.add_argument("--backend", choices=["both", "postgresql", "sqlite"], default="both")
    args = parser.parse_args(argv)
    print(
        f"{os.cpu_count()} cores; writers are separate processes; every append is one event "
        "and one commit. Filler for 10,000 matches: "
        f"{EVENTS_PER_MATCH} events each, bulk-loaded (real rows, hashes not chained)."
    )
    if args.backend in ("both", "postgresql"):
        with bench_database(args.database_url) as url:
            TABLE.print(
                measure("postgresql", url, args.seconds, args.appends, args.rounds),
                "\nPostgreSQL",
            )
    if args.backend in ("both", "sqlite"):
        with tempfile.TemporaryDirectory(prefix="bergen-bench-") as folder:
            url = f"sqlite:///{folder}/bench.db"
            upgrade_to_head(url)
            print(f"\neventsourcing's SQLite connection: {eventsourcing_sqlite_settings(url)}")
            TABLE.print(
                measure("sqlite", url, args.seconds, args.appends, args.rounds),
                "\nSQLite (synchronous=FULL, WAL)",
            )
    return ExitStatus.OK


if __name__ == "__main__":
    sys.exit(main())
