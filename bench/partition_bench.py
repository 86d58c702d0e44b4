"""One `events` table against the same rows in a declaratively partitioned table, in one run.

    python -m bench partition        (or: python -m bench.partition_bench --matches 100000)

One PostgreSQL database is made for the run from BERGEN_BENCH_DATABASE_URL and dropped
afterwards. It is loaded by the scale benchmark's loader (`bench.scale_bench.load`: whole
matches played by the rules, chained and authenticated, COPY, 50 matches interleaved) with
`--matches` (10^5; `--quick`: 10^4), then `VACUUM ANALYZE`. Then, beside the migrated
`events` (kept as loaded: the one table), the schema `part` gets `part.events`: the same
columns, defaults, check, indexes and append-only triggers, partitioned by RANGE of
`position` into PARTS partitions of equal width (a month each of a year of steady play), the
first from MINVALUE and the last to MAXVALUE (a host would make the next month's ahead; the
last open keeps the appends of the run in it). Its indexes are made first, then the rows
copied by one INSERT ... SELECT in position order (so both tables' indexes grew row by row),
keeping each row's position and transaction id (the position trigger is made after), then
`VACUUM ANALYZE`. Then every block of both is read into the operating system's cache
(`pg_prewarm`'s 'read'): the copy, written last, must not be the warmer.

Why `position`: it is the store's own counter (an identity column its trigger assigns), so it
grows with the append order, which is the age a host archives by; the global order's reads
name a position (`WHERE position = %s`), which then probes one partition; and the unique
position stays enforced (the partition key is in it). `recorded_at` is the server's clock
(each replica's), not the database's, and no read names it.

What the partition key costs: a partitioned table's unique constraints must hold the key,
so `pk_events` becomes (stream_id, seq, position) and `ix_events_stream_id_command_id` a
plain index. Neither (stream_id, seq) nor (stream_id, command_id) is then unique across the
partitions: the version check of an append (a lost race is a unique violation on
`pk_events`) and the replay of a command already applied are no longer the database's. And
the statement triggers against TRUNCATE are not cloned onto the partitions.

The same SQL runs on both, the store's own text (`bergen.server.store.postgres`), the
partitioned one by a connection whose search_path starts with `part`. `--rounds` rounds, the
two tables in turns (rotated each round), each round of `--calls` / `--rounds` calls of each
kind on each table:

- the load of an ended match by stream id (`read_rows` with log keys: the checked rows from
  seq 1), each call another match from a sample drawn afresh each round (none read before);
- its first event (`read_stream(id, 1, limit=1)`: the clocks' and the janitor's read), and
  its version (`stream_version`: `max(seq)`), the same matches;
- the append of a new match's events, one prepared INSERT ... RETURNING an event (one
  autocommit transaction each, as `append` does), a new match each round;
- the global order read after a position (`read_all`: `READ_AFTER`, 1,000 rows, the folds'
  batch) at a recent position (500 events before the head) and at an old one (5 % in);
- the ends read after a position (the ratings' `read_all_packed` of MatchEnded), recent
  and old;
- the head of the global order (`head_position`: the feed's and the recorder's start).

Then `EXPLAIN (ANALYZE, BUFFERS)` of a match's load on each (the partitions probed), and the
archival of the oldest twelfth (the matches opened in the first partition's range): on the
one table the archive's DELETE of each match's rows before its end (listed in
archived_matches first, as `bergen archive` does; the guard judges every row), then a plain
`VACUUM`; on the partitioned one DETACH PARTITION and DROP of the first partition (every row
in its range: the ends too, and the first rows of matches that straddle its bound). The bytes
of each table (heap, TOAST, indexes) before and after.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import psycopg

from bench import harness
from bench.harness import Column, ExitStatus, Row, Table, say
from bench.listing_bench import LOG_KEY_FILE
from bench.scale_bench import load, match_events, match_id_of, vacuum
from bench.store_bench import bench_database
from bergen.api.chain import micros
from bergen.api.stored import GENESIS_HASH, EventMetadata
from bergen.server.keys import LogKeys
from bergen.server.store.batch import build_rows
from bergen.server.store.postgres import (
    CHECKED_ROWS,
    PG_EPOCH_US,
    READ_AFTER,
    SQL,
    VISIBLE,
    insert_rows,
    pack_i4,
    pack_i8,
    packed_reads,
    text_param,
)

PARTS = 12
"""Partitions: a month each of a year of play."""
SCHEMA = "part"
"""Where the partitioned copy lives, under the name `events`."""
FEED_LIMIT = 1000
"""Rows a fold reads at a time (`bergen.server.projections.BATCH`)."""
RECENT = 500
"""The recent position: this many events before the head."""
OLD_FRACTION = 0.05
"""The old position: this far into the log."""
ENDS = frozenset({"MatchEnded"})
"""The types the ratings read (`bergen.server.ratings`)."""

ONE, PARTITIONED = "one table", "partitioned"
TABLES = (ONE, PARTITIONED)

EXPECTED_INDEXES = frozenset(
    {
        "pk_events",
        "uq_events_position",
        "ix_events_stream_id_command_id",
        "ix_events_tx_id_position",
        "ix_events_match_opened",
        "ix_events_match_ended",
    }
)
"""The indexes the migrations give `events`: the copy makes each of them (a migration that
adds one stops the run until the copy makes it too)."""
EXPECTED_TRIGGERS = frozenset(
    {"events_no_update_delete", "events_no_truncate", "events_own_position"}
)


# --- the partitions ------------------------------------------------------------------------


def bounds(low: int, high: int, parts: int = PARTS) -> list[int]:
    """The parts - 1 cuts between `parts` ranges of equal width over positions low..high
    (both stored): range i is [cut i-1, cut i), the first from MINVALUE, the last to MAXVALUE.
    Raises ValueError unless 1 <= parts <= high - low + 1."""
    span = high - low + 1
    if parts < 1 or span < parts:
        raise ValueError(f"{parts} partitions of positions {low}..{high}")
    return [low + span * i // parts for i in range(1, parts)]


def partition_name(i: int) -> str:
    """The i-th partition (from 1) of `part.events`."""
    return f"{SCHEMA}.events_p{i:02}"


def partitions_ddl(cuts: Sequence[int]) -> list[str]:
    """The partitions of `part.events` between `cuts` (increasing): len(cuts) + 1 of them."""
    if list(cuts) != sorted(set(cuts)):
        raise ValueError(f"cuts must increase: {list(cuts)}")
    edges = ["MINVALUE", *(str(c) for c in cuts), "MAXVALUE"]
    return [
        f"CREATE TABLE {partition_name(i + 1)} PARTITION OF {SCHEMA}.events"
        f" FOR VALUES FROM ({a}) TO ({b})"
        for i, (a, b) in enumerate(itertools.pairwise(edges))
    ]


def table_ddl() -> list[str]:
    """`part.events` partitioned by position, with the columns, defaults (the identity of
    `position`, the transaction of `tx_id`, the time of `recorded_at`), check and indexes of
    the migrated `events` (0001, 0013), the unique ones widened by the partition key."""
    t = f"{SCHEMA}.events"
    return [
        f"CREATE SCHEMA {SCHEMA}",
        f"CREATE TABLE {t} (LIKE public.events INCLUDING DEFAULTS INCLUDING IDENTITY"
        " INCLUDING CONSTRAINTS INCLUDING STORAGE) PARTITION BY RANGE (position)",
        # (stream_id, seq) alone, and (stream_id, command_id), cannot be unique here.
        f"ALTER TABLE {t} ADD CONSTRAINT pk_events PRIMARY KEY (stream_id, seq, position)",
        f"ALTER TABLE {t} ADD CONSTRAINT uq_events_position UNIQUE (position)",
        f"CREATE INDEX ix_events_stream_id_command_id ON {t} (stream_id, command_id)",
        f"CREATE INDEX ix_events_tx_id_position ON {t} (tx_id, position)",
        f"CREATE INDEX ix_events_match_opened ON {t} (stream_id, tx_id, position)"
        " WHERE seq = 1 AND type = 'MatchCreated'",
        f"CREATE INDEX ix_events_match_ended ON {t} (tx_id, position) WHERE type = 'MatchEnded'",
    ]


def triggers_ddl() -> list[str]:
    """The append-only guards and the position trigger of the migrated `events` (0001, 0005,
    0016), on `part.events` (the row triggers are cloned onto each partition; the TRUNCATE
    one is not). The functions are the migrations' own: `bergen_events_own_position` finds
    the sequence of `events` by the search_path, which names `part` first where it writes."""
    t = f"{SCHEMA}.events"
    return [
        f"CREATE TRIGGER events_no_update_delete BEFORE UPDATE OR DELETE ON {t}"
        " FOR EACH ROW EXECUTE FUNCTION public.bergen_events_guard()",
        f"CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON {t}"
        " FOR EACH STATEMENT EXECUTE FUNCTION public.bergen_events_append_only()",
        f"CREATE TRIGGER events_own_position BEFORE INSERT ON {t}"
        " FOR EACH ROW EXECUTE FUNCTION public.bergen_events_own_position()",
        *(
            f"ALTER TABLE {t} ENABLE ALWAYS TRIGGER {name}"
            for name in ("events_no_update_delete", "events_no_truncate", "events_own_position")
        ),
    ]


COPY_COLUMNS = (
    "stream_id, seq, position, type, schema_version, payload, metadata, command_id,"
    " prev_hash, hash, salt, tx_id, recorded_at, key_id, mac"
)
COPY_ROWS = (
    f"INSERT INTO {SCHEMA}.events ({COPY_COLUMNS}) OVERRIDING SYSTEM VALUE"
    f" SELECT {COPY_COLUMNS} FROM public.events ORDER BY position"
)


def _names(conn: psycopg.Connection[Any], sql: str, table: str) -> frozenset[str]:
    return frozenset(str(r[0]) for r in conn.execute(sql, (table,)).fetchall())


def build_partitioned(url: str) -> tuple[list[int], float]:
    """`part.events` made and filled from `events` (see the module's doc): the cuts and the
    seconds the copy took. Raises RuntimeError when `events` has an index or a trigger the
    copy does not make."""
    with psycopg.connect(url, autocommit=True) as conn:
        indexes = _names(conn, "SELECT indexname FROM pg_indexes WHERE tablename = %s", "events")
        triggers = _names(
            conn,
            "SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass AND NOT tgisinternal",
            "public.events",
        )
        if indexes != EXPECTED_INDEXES or triggers != EXPECTED_TRIGGERS:
            raise RuntimeError(
                f"events has indexes {sorted(indexes)} and triggers {sorted(triggers)}:"
                " make the partitioned copy the same"
            )
        row = conn.execute("SELECT min(position), max(position) FROM events").fetchone()
        assert row is not None and row[0] is not None
        low, high = int(row[0]), int(row[1])
        cuts = bounds(low, high)
        for sql in (*table_ddl(), *partitions_ddl(cuts)):
            conn.execute(sql)
        started = time.perf_counter()
        conn.execute(COPY_ROWS)
        copied = time.perf_counter() - started
        for sql in triggers_ddl():
            conn.execute(sql)
        # The next appended position follows the copied ones, as it does in `events`.
        conn.execute(
            "SELECT setval(pg_get_serial_sequence(%s, 'position'), %s::bigint)",
            (f"{SCHEMA}.events", high),
        )
        conn.execute(f"VACUUM ANALYZE {SCHEMA}.events")
    return cuts, copied


# --- the connections -----------------------------------------------------------------------


@contextmanager
def connect(url: str, table: str) -> Iterator[psycopg.Connection[Any]]:
    """An autocommit connection whose `events` is `table`'s."""
    options = f"-c search_path={SCHEMA},public" if table == PARTITIONED else None
    with psycopg.connect(url, autocommit=True, options=options) as conn:
        yield conn


def table_bytes(conn: psycopg.Connection[Any], table: str) -> int:
    """Heap, TOAST and indexes of `table` (all its partitions)."""
    if table == PARTITIONED:
        sql = "SELECT coalesce(sum(pg_total_relation_size(relid)), 0) FROM pg_partition_tree(%s)"
        name = f"{SCHEMA}.events"
    else:
        sql, name = "SELECT pg_total_relation_size(%s)", "public.events"
    row = conn.execute(sql, (name,)).fetchone()
    return int(row[0]) if row else 0


def prewarm(url: str) -> tuple[int, float]:
    """Every block of both tables (heap, TOAST, indexes) read into the operating system's
    cache (`pg_prewarm`'s 'read', not into shared_buffers), the partitioned one first, so that
    neither is the warmer for having been written or read last: the 8 KB blocks read, and
    the seconds."""
    started = time.perf_counter()
    blocks = 0
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        for name in (f"{SCHEMA}.events", "public.events"):
            tables = conn.execute(
                "SELECT relid::oid FROM pg_partition_tree(%s::regclass) WHERE isleaf"
                " UNION SELECT %s::regclass::oid",
                (name, name),
            ).fetchall()
            for (table,) in tables:
                row = conn.execute(
                    "SELECT coalesce(sum(pg_prewarm(r, 'read')), 0) FROM"
                    " (SELECT %s::oid::regclass AS r UNION ALL"
                    "  SELECT reltoastrelid::regclass FROM pg_class"
                    "   WHERE oid = %s::oid AND reltoastrelid <> 0"
                    "  UNION ALL SELECT indexrelid::regclass FROM pg_index"
                    "   WHERE indrelid = %s::oid) x"
                    # Those with blocks: not a partitioned table or index.
                    " JOIN pg_class c ON c.oid = x.r WHERE c.relkind IN ('r', 't', 'i')",
                    (table, table, table),
                ).fetchone()
                blocks += int(row[0]) if row else 0
    return blocks, time.perf_counter() - started


# --- the calls -----------------------------------------------------------------------------

LOAD, FIRST_EVENT, VERSION, APPEND = "load", "first event", "version", "append"
STALE = "stale"
FEED_RECENT, FEED_OLD = "feed recent", "feed old"
ENDS_RECENT, ENDS_OLD, HEAD = "ends recent", "ends old", "head"


@dataclass(frozen=True)
class Kind:
    key: str
    what: str


KINDS = (
    Kind(LOAD, "load an ended match by stream id (read_rows, checked rows)"),
    Kind(FIRST_EVENT, "its first event (read_stream limit 1)"),
    Kind(VERSION, "its version (stream_version, max(seq))"),
    Kind(STALE, "a ListMatches page's staleness probes, 20 rows (one SELECT)"),
    Kind(APPEND, "append a new match's event (prepared INSERT, 1 row)"),
    Kind(FEED_RECENT, f"global order after a recent position, {FEED_LIMIT:,} rows"),
    Kind(FEED_OLD, f"global order after an old position, {FEED_LIMIT:,} rows"),
    Kind(ENDS_RECENT, "ends after a recent position (ratings, packed)"),
    Kind(ENDS_OLD, "ends after an old position (ratings, packed)"),
    Kind(HEAD, "head of the global order (head_position)"),
)


def timed(call: Callable[[], object]) -> float:
    """The call's time in ms."""
    t = time.perf_counter()
    call()
    return (time.perf_counter() - t) * 1000


@dataclass
class Appender:
    """New matches' events, each appended by the store's own INSERT (one row, one autocommit
    transaction, RETURNING its position), the rows chained and authenticated as the store
    builds them."""

    keys: LogKeys
    prepared: dict[str, set[int | str]] = field(default_factory=dict)

    def match(self, conn: psycopg.Connection[Any], table: str, k: int) -> list[float]:
        """Match number k appended to `table` an event at a time: each INSERT's ms."""
        stream = match_id_of(k)
        meta = EventMetadata("bench", None, "bergen-rules/1", {})
        writing = (self.keys.writing, self.keys.writing_key)
        prepared = self.prepared.setdefault(table, set())
        prev, out = GENESIS_HASH, []
        for seq, event in enumerate(match_events(k)):
            at = datetime.now(UTC)
            (r,) = build_rows(stream, seq, [event], meta, prev, at, writing)
            values: list[bytes | None] = [
                stream.encode(), pack_i8(r.seq), r.event.type.encode(),
                pack_i4(r.event.schema_version), r.payload_json.encode(),
                r.metadata_json.encode(), text_param(r.command_id), r.prev_hash, r.hash, r.salt,
                pack_i8(micros(at) - PG_EPOCH_US), text_param(r.key_id), r.mac,
            ]  # fmt: skip
            out.append(timed(partial(insert_rows, conn, prepared, values, 1)))
            prev = r.hash
        return out


@dataclass(frozen=True)
class Positions:
    recent: int
    old: int


def positions_of(conn: psycopg.Connection[Any], events: int) -> Positions:
    """A position RECENT events before the head, and one OLD_FRACTION into the log."""

    def nth(order: str, offset: int) -> int:
        row = conn.execute(
            f"SELECT position FROM events ORDER BY position {order} OFFSET %s LIMIT 1", (offset,)
        ).fetchone()
        assert row is not None
        return int(row[0])

    return Positions(nth("DESC", RECENT), nth("ASC", int(events * OLD_FRACTION)))


PAGE = 20
"""Rows of a ListMatches page."""


def stale_probe() -> str:
    """The test a ListMatches page makes of each of its rows (whether the match has an event
    after its listed version, at or before the listing's position), as the store says it,
    of the rows of a page in one statement: its parameters the position, the match ids and
    their versions (arrays)."""
    page = SQL.pages[(False, False)]
    start = page.index("EXISTS (")
    depth, end = 0, start
    for end in range(start, len(page)):
        depth += {"(": 1, ")": -1}.get(page[end], 0)
        if depth == 0 and page[end] == ")":
            break
    return (
        f"SELECT {page[start : end + 1]}"
        " FROM unnest(%s::text[], %s::bigint[]) AS m(match_id, version)"
    )


def run_kind(
    conn: psycopg.Connection[Any], kind: str, ids: Sequence[str], where: Positions
) -> list[float]:
    """Each of `ids` (or as many calls) of one kind on `conn`, in ms."""
    after = packed_reads(ENDS)[1]
    stale = stale_probe()
    # Each match's page: it and the PAGE - 1 matches after it in `ids`, round.
    page = {s: [ids[(i + j) % len(ids)] for j in range(PAGE)] for i, s in enumerate(ids)}
    calls: dict[str, Callable[[str], object]] = {
        LOAD: lambda s: conn.execute(
            CHECKED_ROWS.format("%s", "%s::bigint"), (s, 1), binary=True
        ).fetchall(),
        FIRST_EVENT: lambda s: conn.execute(SQL.stream_page, (s, 1, 1), binary=True).fetchall(),
        VERSION: lambda s: conn.execute(
            "SELECT max(seq) FROM events WHERE stream_id = %s", (s,)
        ).fetchone(),
        # Ended matches listed at their last version: nothing after them (the usual answer).
        STALE: lambda s: conn.execute(stale, (where.recent, page[s], [10_000] * PAGE)).fetchall(),
        FEED_RECENT: lambda _: conn.execute(READ_AFTER, (where.recent, FEED_LIMIT)).fetchall(),
        FEED_OLD: lambda _: conn.execute(READ_AFTER, (where.old, FEED_LIMIT)).fetchall(),
        ENDS_RECENT: lambda _: conn.execute(
            after, (where.recent, FEED_LIMIT, FEED_LIMIT), binary=True
        ).fetchone(),
        ENDS_OLD: lambda _: conn.execute(
            after, (where.old, FEED_LIMIT, FEED_LIMIT), binary=True
        ).fetchone(),
        HEAD: lambda _: conn.execute(
            f"SELECT position FROM events WHERE {VISIBLE}"
            " ORDER BY tx_id DESC, position DESC LIMIT 1"
        ).fetchone(),
    }
    call = calls[kind]
    return [timed(partial(call, s)) for s in ids]


# --- the plans -----------------------------------------------------------------------------


def plan_summary(lines: Sequence[str]) -> list[str]:
    """What an EXPLAIN (ANALYZE, BUFFERS) of a match's load says of its reads: the scans of
    tables (one a partition probed; a bitmap's index scan is its heap scan's), the first and
    the last, the buffers of the top node, and the planning and execution times."""
    nodes = [x.strip().removeprefix("->").strip() for x in lines]
    scans = [x for x in nodes if "Scan" in x and not x.startswith("Bitmap Index Scan")]
    buffers = next((x.strip() for x in lines if x.strip().startswith("Buffers:")), "")
    timing = [x.strip() for x in lines if x.strip().startswith(("Planning Time", "Execution Time"))]
    out = [f"{len(scans)} scan(s): {scans[0]}" if scans else "no scan"]
    if len(scans) > 1:
        out.append(f"... {scans[-1]}")
    return [*out, buffers, *timing]


def explain_load(url: str, table: str, stream: str, other: str) -> list[str]:
    """The plan of the load of `stream` (not read before) on a connection that has planned
    the load of `other` first (the partitions' catalogs read: a server's plan is not its
    connection's first)."""
    sql = CHECKED_ROWS.format("%s", "%s::bigint")
    with connect(url, table) as conn:
        conn.execute("EXPLAIN " + sql, (other, 1)).fetchall()
        rows = conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, (stream, 1)).fetchall()
    return plan_summary([str(r[0]) for r in rows])


# --- the archival --------------------------------------------------------------------------


@dataclass
class Archived:
    rows: int
    seconds: float
    bytes_before: int
    bytes_after: int
    vacuum_seconds: float = 0.0
    bytes_vacuumed: int = 0


def archive_one(url: str, cut: int) -> Archived:
    """The matches opened before `cut` archived as `bergen archive` removes them (listed in
    archived_matches, then their rows before the end deleted a match at a time, in one
    transaction here), then a plain VACUUM."""
    with psycopg.connect(url, autocommit=True) as conn:
        before = table_bytes(conn, ONE)
        ends = conn.execute(
            "SELECT e.stream_id, e.seq, e.hash FROM events o JOIN events e"
            " ON e.stream_id = o.stream_id AND e.type = 'MatchEnded'"
            " WHERE o.seq = 1 AND o.type = 'MatchCreated' AND o.position < %s",
            (cut,),
        ).fetchall()
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO archived_matches (match_id, end_seq, events, head, record_sha256)"
                " VALUES (%s, %s, %s, %s, 'bench')",
                [(s, seq, seq, h) for s, seq, h in ends],
            )
        started = time.perf_counter()
        with conn.transaction(), conn.cursor() as cur:
            rows = 0
            for stream, end_seq, _ in ends:
                cur.execute(
                    "DELETE FROM events WHERE stream_id = %s AND seq < %s", (stream, end_seq)
                )
                rows += cur.rowcount
        seconds = time.perf_counter() - started
        after = table_bytes(conn, ONE)
        started = time.perf_counter()
        conn.execute("VACUUM events")
        vacuumed = time.perf_counter() - started
        return Archived(rows, seconds, before, after, vacuumed, table_bytes(conn, ONE))


def archive_partitioned(url: str) -> Archived:
    """The first partition detached and dropped."""
    first = partition_name(1)
    with psycopg.connect(url, autocommit=True) as conn:
        before = table_bytes(conn, PARTITIONED)
        row = conn.execute(f"SELECT count(*) FROM {first}").fetchone()
        rows = int(row[0]) if row else 0
        started = time.perf_counter()
        with conn.transaction():
            conn.execute(f"ALTER TABLE {SCHEMA}.events DETACH PARTITION {first}")
            conn.execute(f"DROP TABLE {first}")
        seconds = time.perf_counter() - started
        return Archived(rows, seconds, before, table_bytes(conn, PARTITIONED))


# --- the run -------------------------------------------------------------------------------


@dataclass
class Figures:
    times: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    plans: dict[str, tuple[int, int]] = field(default_factory=dict)
    """By table: the generic and the custom plans its connection's prepared statements ran
    (psycopg prepares a statement on its fifth call; PostgreSQL then plans it for each
    call's parameters, or once for all)."""

    def add(self, table: str, kind: str, ms: Sequence[float]) -> None:
        self.times.setdefault((table, kind), []).extend(ms)


def measure(url: str, keys: LogKeys, stored: int, rounds: int, calls: int) -> Figures:
    """Every kind of call on both tables, in turns (see the module's doc)."""
    figures = Figures()
    appender = Appender(keys)
    rng = random.Random(stored)
    per_round = max(2, calls // rounds)
    order = rng.sample(range(stored), min(stored, per_round * rounds))
    with connect(url, ONE) as one, connect(url, PARTITIONED) as part:
        where = positions_of(one, stored)
        conns = {ONE: one, PARTITIONED: part}

        def one_round(table: str, r: int) -> None:
            conn = conns[table]
            # Each round's matches drawn afresh: read by neither table before.
            ids = [match_id_of(k) for k in order[r * per_round : (r + 1) * per_round]]
            for kind in (LOAD, FIRST_EVENT, VERSION, STALE):
                figures.add(table, kind, run_kind(conn, kind, ids, where))
            figures.add(table, APPEND, appender.match(conn, table, stored + 1 + r))
            for kind in (FEED_RECENT, FEED_OLD, ENDS_RECENT, ENDS_OLD, HEAD):
                figures.add(table, kind, run_kind(conn, kind, ids, where))

        def warm(table: str) -> None:
            # The statements prepared and the catalogs read: the first round is not a start-up.
            conn = conns[table]
            probe = [match_id_of(stored - 1)]
            for kind in (LOAD, FIRST_EVENT, VERSION, STALE, FEED_RECENT, ENDS_RECENT, HEAD):
                run_kind(conn, kind, probe, where)

        def after_round(r: int, _: dict[str, None]) -> None:
            if (r + 1) % max(1, rounds // 5) == 0:
                say(f"  round {r + 1} of {rounds}")

        harness.rounds(TABLES, rounds, one_round, warm, after_round)
        for table, conn in conns.items():
            row = conn.execute(
                "SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0)"
                " FROM pg_prepared_statements"
            ).fetchone()
            assert row is not None
            figures.plans[table] = (int(row[0]), int(row[1]))
    return figures


def ratio(a: float, b: float) -> float:
    return b / a if a else float("nan")


def report(
    figures: Figures, archived: dict[str, Archived], sizes: dict[str, int], copy_s: float
) -> None:
    t = Table(
        (
            Column("measure", 62, "<"),
            Column(ONE, 11),
            Column(PARTITIONED, 11),
            Column("ratio p/1", 9),
        ),
        verdicts=False,
    )
    rows = []
    for k in KINDS:
        for p in (50, 99):
            a = harness.percentile(figures.times[(ONE, k.key)], p)
            b = harness.percentile(figures.times[(PARTITIONED, k.key)], p)
            label = f"{k.what}, p{p} (ms)"
            rows.append(Row((label, f"{a:.3f}", f"{b:.3f}", f"{ratio(a, b):.2f}")))
    o, q = archived[ONE], archived[PARTITIONED]
    rows += [
        Row(("table bytes (heap, TOAST, indexes), MiB", *_mib(sizes[ONE], sizes[PARTITIONED]))),
        Row(
            (
                "archival: oldest twelfth removed, s",
                f"{o.seconds:.3f}",
                f"{q.seconds:.3f}",
                f"{ratio(o.seconds, q.seconds):.4f}",
            )
        ),
        Row(("  rows removed", f"{o.rows:,}", f"{q.rows:,}", f"{ratio(o.rows, q.rows):.2f}")),
        Row(("  bytes after, MiB", *_mib(o.bytes_after, q.bytes_after))),
        Row(("  one table: then VACUUM, s", f"{o.vacuum_seconds:.2f}", "", "")),
        Row(("  one table: bytes after VACUUM, MiB", f"{o.bytes_vacuumed / 2**20:,.0f}", "", "")),
    ]
    print()
    t.print(rows)
    calls = {k: len(v) for k, v in figures.times.items()}
    print(f"calls a figure: {min(calls.values())} to {max(calls.values())}")
    plans = "; ".join(f"{t} {g:,} / {c:,}" for t, (g, c) in figures.plans.items())
    print(f"prepared statements' plans run, generic / custom: {plans}")
    print(f"the partitioned copy's INSERT ... SELECT: {copy_s:.1f} s")


def _mib(a: int, b: int) -> tuple[str, str, str]:
    return f"{a / 2**20:,.0f}", f"{b / 2**20:,.0f}", f"{ratio(a, b):.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.partition_bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    harness.add_database_url(parser)
    quick_or = harness.quick_or
    parser.add_argument(
        "--matches", type=int, default=quick_or(100_000, 10_000), help="matches loaded"
    )
    parser.add_argument(
        "--loaders", type=int, default=max(2, os.cpu_count() or 2), help="loading processes"
    )
    parser.add_argument("--rounds", type=int, default=10, help="turns of the two tables")
    parser.add_argument(
        "--calls", type=int, default=quick_or(300, 100), help="calls of each kind on each table"
    )
    args = parser.parse_args(argv)
    if args.matches < 100 * PARTS:
        parser.error(f"--matches must be at least {100 * PARTS}")
    say(f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f} at the start")
    with (
        bench_database(args.database_url) as url,
        tempfile.TemporaryDirectory(prefix="bergen-partition-") as tmp,
    ):
        key_file = Path(tmp) / LOG_KEY_FILE
        keys = LogKeys.load_or_create(key_file)
        say(f"loading {args.matches:,} matches with {args.loaders} processes")
        loaded = load(url, key_file, 0, args.matches, args.loaders)
        say(
            f"  {loaded.events:,} events in {loaded.seconds:.1f} s:"
            f" {loaded.events / loaded.seconds:,.0f} events/s"
        )
        vacuum(url)
        say(f"partitioning a copy into {PARTS} partitions by position")
        cuts, copy_s = build_partitioned(url)
        say(f"  copied in {copy_s:.1f} s; cuts at {', '.join(f'{c:,}' for c in cuts)}")
        with psycopg.connect(url, autocommit=True) as conn:
            sizes = {t: table_bytes(conn, t) for t in TABLES}
        blocks, warmed = prewarm(url)
        say(f"  {blocks * 8192 / 2**20:,.0f} MiB read into the OS cache in {warmed:.1f} s")
        say(f"timing {args.calls} calls of each kind on each table in {args.rounds} rounds")
        figures = measure(url, keys, args.matches, args.rounds, args.calls)
        fresh = match_id_of(args.matches // 3)  # not among the timed (most likely)
        plans = {t: explain_load(url, t, fresh, match_id_of(0)) for t in TABLES}
        say("archiving the oldest twelfth on each")
        archived = {ONE: archive_one(url, cuts[0]), PARTITIONED: archive_partitioned(url)}
    say(f"load average {os.getloadavg()[0]:.1f} at the end")
    report(figures, archived, sizes, copy_s)
    print("\nEXPLAIN (ANALYZE, BUFFERS) of a match's load:")
    for t in TABLES:
        print(f"  {t}:")
        for line in plans[t]:
            print(f"    {line}")
    return ExitStatus.OK


if __name__ == "__main__":
    sys.exit(main())
