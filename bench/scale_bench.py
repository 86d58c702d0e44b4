"""How the server's cost grows with what it has stored: 10^3, 10^4 and 10^5 matches, in one run.

    python -m bench scale        (or: python -m bench.scale_bench --sizes 1000 10000 100000)

One PostgreSQL database is made for the run from BERGEN_BENCH_DATABASE_URL (default
postgresql://postgres@127.0.0.1:5432/postgres) and dropped afterwards. It is filled in steps,
up to each of `--sizes` stored matches (10^3, 10^4, 10^5; `--quick`: up to 10^4), and at each
size the same figures are taken, each then shown against its figure at the first size.

- **The loader**: whole matches of 2, 3 and 4 seats (pairs too) played by the random and
  greedy policies through the rules (`bergen.domain.simulation.play_match`: real deals,
  draws, plays, points and ends), encoded by the codec, chained and authenticated by the
  server's own `build_rows` under the log key the server is then given, and written with
  COPY by `--loaders` processes, each its own matches, 50 matches' events interleaved as a
  server interleaves them, a transaction every CHUNK matches. Reported: events/s and
  matches/s of the whole step, by the wall clock. Then `VACUUM ANALYZE` (untimed, what
  autovacuum does after such a load). The loader writes only `events`: the listing, the
  ratings and the transparency log are folded by the server's own first start.
- **First start**: the listing's tables are emptied and its position removed, then
  `bergen serve` starts; its listing rebuild from position 0 is timed until its position is
  the log's head (events/s). The ratings and the transparency log catch up on what was
  added since the last step (not timed). Then the database's bytes per stored match:
  `events` (heap and TOAST) and its indexes, and every table with its indexes.
- **Start to SERVING**: the server stopped (SIGTERM) and started again `--restarts` times
  over the caught-up database, from the process's start until the gRPC health service
  answers SERVING (the median).
- On the last restarted server (its caches empty):
  - GetMatch of an ended match not asked for before (each call another match, so none is in
    a cache), p99 of `--calls`;
  - ListMatches, the first page and the page after the first 1,000 matches (20 a page, by
    the token of a walk), p99 of `--calls` each, in turns;
  - WatchMatch joining a live match (matches created and played a few moves first): from
    the call to its first message, p99 of `--calls`;
  - Play p50 and p99 at `--clients` clients (grpc_bench's clients, new matches of two seats)
    for `--seconds`;
  - `bergen export` of every ended match into an empty folder, records/s by the wall clock;
    stopped after `--export-budget` seconds when it takes longer (then the records written
    so far), and the listing of the ended matches it pages through first timed alone.

Goals: every latency at the largest size within 1.3x of its figure at the first; start to
SERVING under 2 s at the largest size; export >= 2,000 records/s. `--svg` writes each
measure's ratio to its first figure against the stored matches (log x axis).
"""

from __future__ import annotations

import argparse
import hashlib
import math
import multiprocessing as mp
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import grpc
import psycopg

from bench import harness
from bench.grpc_bench import CALL_TIMEOUT, OURS, SERVICE, Calls, Player, measure_rate
from bench.harness import Column, ExitStatus, Row, Table, say
from bench.listing_bench import LOG_KEY_FILE, serving
from bench.store_bench import bench_database
from bergen.api.stored import GENESIS_HASH, EventMetadata
from bergen.domain import codec
from bergen.domain.policies import greedy_policy, random_policy
from bergen.domain.rules import make_rules
from bergen.domain.simulation import play_match
from bergen.server.commands import new_match_id
from bergen.server.keys import LogKeys
from bergen.server.projections import MATCH_LIST
from bergen.server.store import NewEvent
from bergen.server.store.batch import build_rows
from bergen.v1 import bergen_pb2 as pb

CHUNK = 250
"""Matches a loader writes in one transaction."""
INTERLEAVED = 50
"""Matches whose events are interleaved in the global order, as concurrent matches are."""
PLAYERS = 1000
"""Distinct player names across the loaded matches."""
PAGE = 20
DEEP = 1000
"""The deep page starts after this many matches."""
LATENCY_GOAL = 1.3
"""Every latency at the largest size against its figure at the first."""
START_GOAL_S = 2.0
EXPORT_GOAL = 2000.0
"""Records a second."""
FOLD_TIMEOUT_S = 3600.0
WATCH_MOVES = 6
"""Moves played in a live match before it is watched."""
WATCHES_A_MATCH = 50
"""Streams opened on one live match before it is played to its end."""

# The measures, in the table's order: (key, what, unit, whether it is a latency held to the goal).
PLAY_P50, PLAY_P99 = "play p50", "play p99"
GET, FIRST, DEEP_PAGE, WATCH = "getmatch", "first page", "deep page", "watch"
GET_P50 = "getmatch p50"
FLOOR = "floor"
START, REBUILD, EXPORT, LISTED = "start", "rebuild", "export", "export listing"
RECORDS = "records"
EVENTS_BYTES, INDEX_BYTES, ALL_BYTES = "events bytes", "index bytes", "all bytes"


@dataclass(frozen=True)
class Measure:
    key: str
    what: str
    unit: str
    latency: bool = False
    fmt: str = ".2f"


MEASURES = (
    Measure(PLAY_P50, "Play p50, 8 clients, new matches", "ms", True),
    Measure(PLAY_P99, "Play p99, 8 clients, new matches", "ms", True),
    Measure(GET, "GetMatch of an ended match, not cached, p99", "ms", True),
    Measure(GET_P50, "  the same, p50", "ms"),
    Measure(FIRST, "ListMatches first page, p99", "ms", True),
    Measure(DEEP_PAGE, "ListMatches page after 1,000 matches, p99", "ms", True),
    Measure(WATCH, "WatchMatch joining a live match, first message, p99", "ms", True),
    Measure(FLOOR, "GetServerInfo (no work) beside GetMatch, p99: the floor", "ms"),
    Measure(START, "bergen serve start to SERVING, median", "s"),
    Measure(REBUILD, "listing rebuild from position 0", "events/s", fmt=",.0f"),
    Measure(RECORDS, "records made by a first start (the recorder)", "records/s", fmt=",.0f"),
    Measure(EXPORT, "bergen export of the ended matches", "records/s", fmt=",.0f"),
    Measure(LISTED, "  of which listing the ended matches", "s", fmt=".3f"),
    Measure(EVENTS_BYTES, "events table (heap, TOAST) per match", "bytes", fmt=",.0f"),
    Measure(INDEX_BYTES, "events indexes per match", "bytes", fmt=",.0f"),
    Measure(ALL_BYTES, "every table and index per match", "bytes", fmt=",.0f"),
)


# --- the loader ----------------------------------------------------------------------------


LOADED_FROM_MS = 1_767_225_600_000
"""2026-01-01 UTC: loaded match k was created k ms later (its id says so)."""


def match_id_of(k: int) -> str:
    """Loaded match number k's id, as the server makes them (a version 7 UUID,
    `bergen.server.commands.new_match_id`): its time LOADED_FROM_MS + k, its random bits
    from k, so that the run can name any loaded match again."""
    random_bits = int.from_bytes(hashlib.sha256(f"scale-{k}".encode()).digest()[:10], "big")
    return new_match_id(lambda: (LOADED_FROM_MS + k) * 1_000_000, lambda _: random_bits)


def match_events(k: int) -> list[NewEvent]:
    """Loaded match number k, played whole by the rules: 2, 3 or 4 seats (pairs every other
    4), each seat the greedy or the random policy, seated by names from PLAYERS."""
    rng = random.Random(k)
    seats = 2 + k % 3
    partnerships = seats == 4 and k % 6 == 5
    names = [f"player{rng.randrange(PLAYERS):04}" for _ in range(seats)]
    policies = [rng.choice((greedy_policy, random_policy)) for _ in range(seats)]
    events, _ = play_match(
        match_id_of(k), make_rules(seats, partnerships), seats, partnerships,
        rng.randbytes(32), policies, rng, names=names,
    )  # fmt: skip
    return [NewEvent(*codec.encode(e)) for e in events]


COPY_SQL = (
    "COPY events (stream_id, seq, type, schema_version, payload, metadata, command_id,"
    " prev_hash, hash, salt, recorded_at, key_id, mac) FROM STDIN"
)


def load_chunk(url: str, key_file: str, first: int, stop: int) -> tuple[int, int]:
    """Play matches first..stop-1 and write their rows with COPY in one transaction, the
    events of INTERLEAVED matches at a time interleaved. Returns (matches, events)."""
    keys = LogKeys.load_or_create(Path(key_file))
    writing = (keys.writing, keys.writing_key)
    meta = EventMetadata("bench", None, "bergen-rules/1", {})
    rng = random.Random(first)
    count = 0
    with psycopg.connect(url) as conn, conn.cursor() as cur:
        with cur.copy(COPY_SQL) as copy:
            for group in range(first, stop, INTERLEAVED):
                at = datetime.now(UTC)
                open_rows = []
                for k in range(group, min(stop, group + INTERLEAVED)):
                    stream = match_id_of(k)
                    rows = build_rows(stream, 0, match_events(k), meta, GENESIS_HASH, at, writing)
                    open_rows.append((stream, rows))
                cursors = [0] * len(open_rows)
                live = list(range(len(open_rows)))
                while live:
                    i = rng.randrange(len(live))
                    m = live[i]
                    stream, rows = open_rows[m]
                    r = rows[cursors[m]]
                    copy.write_row(
                        (stream, r.seq, r.event.type, r.event.schema_version, r.payload_json,
                         r.metadata_json, r.command_id, r.prev_hash, r.hash, r.salt, at,
                         r.key_id, r.mac)
                    )  # fmt: skip
                    count += 1
                    cursors[m] += 1
                    if cursors[m] == len(rows):
                        live[i] = live[-1]
                        live.pop()
        conn.commit()
    return stop - first, count


def _load_chunk(args: tuple[str, str, int, int]) -> tuple[int, int]:
    return load_chunk(*args)


@dataclass(frozen=True)
class Loaded:
    matches: int
    events: int
    seconds: float


def load(url: str, key_file: Path, first: int, stop: int, processes: int) -> Loaded:
    """Matches first..stop-1 written by `processes` processes, CHUNK matches a task."""
    tasks = [(url, str(key_file), a, min(stop, a + CHUNK)) for a in range(first, stop, CHUNK)]
    started = time.perf_counter()
    matches = events = 0
    with mp.get_context("spawn").Pool(processes) as pool:
        for m, e in pool.imap_unordered(_load_chunk, tasks):
            matches += m
            events += e
    return Loaded(matches, events, time.perf_counter() - started)


# --- the database --------------------------------------------------------------------------


def head(url: str) -> int:
    """The position of the last event in the global order the projections fold: by the
    writing transaction, then by position (the loaders' transactions interleave their
    positions, so the greatest position need not be the last)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT position FROM events ORDER BY tx_id DESC, position DESC LIMIT 1"
        ).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def event_count(url: str) -> int:
    """The events stored (positions are not dense: each row takes two of the sequence)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM events").fetchone()
    return int(row[0]) if row else 0


def positions(url: str) -> dict[str, int]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT name, position FROM projection_positions").fetchall()
    return {str(name): int(p) for name, p in rows}


def ended_count(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM match_list WHERE phase = 'ended'").fetchone()
    return int(row[0]) if row else 0


def kept_count(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM match_records").fetchone()
    return int(row[0]) if row else 0


def reset_listing(url: str) -> None:
    """The listing emptied, its position removed: the server's next start folds it from
    position 0."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE match_list, match_list_players")
        conn.execute("DELETE FROM projection_positions WHERE name = %s", [MATCH_LIST])


def vacuum(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def wait_for(done: Callable[[], bool], what: str, timeout: float = FOLD_TIMEOUT_S) -> None:
    """Raises RuntimeError when `done()` is not true within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not within {timeout:.0f} s")
        time.sleep(0.05)


@dataclass(frozen=True)
class Sizes:
    matches: int
    """Matches listed."""
    events: int
    """events: heap and TOAST."""
    indexes: int
    """events' indexes."""
    total: int
    """Every table of the database with its indexes."""


def sizes(url: str) -> Sizes:
    with psycopg.connect(url, autocommit=True) as conn:
        listed = conn.execute("SELECT count(*) FROM match_list").fetchone()
        row = conn.execute(
            "SELECT pg_table_size('events'), pg_indexes_size('events'),"
            " (SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c"
            "  JOIN pg_namespace n ON n.oid = c.relnamespace"
            "  WHERE c.relkind = 'r' AND n.nspname = 'public')"
        ).fetchone()
    assert listed is not None and row is not None
    return Sizes(int(listed[0]), int(row[0]), int(row[1]), int(row[2]))


# --- the calls -----------------------------------------------------------------------------


def unary(channel: grpc.Channel, name: str, response: Any) -> Any:
    return channel.unary_unary(
        SERVICE + name,
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=response.FromString,
    )


def timed(call: Callable[[], object]) -> float:
    """The call's time in ms."""
    t = time.perf_counter()
    call()
    return (time.perf_counter() - t) * 1000


def p99(values: Sequence[float]) -> float:
    return harness.percentile(values, 99)


def get_matches(channel: grpc.Channel, ids: Sequence[str]) -> tuple[list[float], list[float]]:
    """GetMatch of each of `ids` (ended, never asked for), as a spectator, in ms; and after
    each a GetServerInfo (no work: the floor the machine's load puts under a call). Raises
    RuntimeError for a match that is not ended."""
    get = unary(channel, "GetMatch", pb.GetMatchResponse)
    info = unary(channel, "GetServerInfo", pb.GetServerInfoResponse)
    out: list[float] = []
    floor: list[float] = []
    for match_id in ids:
        t = time.perf_counter()
        view = get(pb.GetMatchRequest(match_id=match_id), timeout=CALL_TIMEOUT).view
        out.append((time.perf_counter() - t) * 1000)
        if view.phase != pb.PHASE_ENDED:
            raise RuntimeError(f"loaded match {match_id} is not ended")
        floor.append(timed(lambda: info(pb.GetServerInfoRequest(), timeout=CALL_TIMEOUT)))
    return out, floor


def pages(channel: grpc.Channel, calls: int, deep: int) -> dict[str, list[float]]:
    """ListMatches' first page and the page after `deep` matches, `calls` each in turns, in
    ms (after a walk to the deep page's token and 10 of each untimed)."""
    listing = unary(channel, "ListMatches", pb.ListMatchesResponse)
    token = ""
    for _ in range(deep // PAGE):
        token = listing(
            pb.ListMatchesRequest(page_size=PAGE, page_token=token), timeout=CALL_TIMEOUT
        ).next_page_token
        if not token:
            raise RuntimeError(f"fewer than {deep} matches listed")
    requests = {
        FIRST: pb.ListMatchesRequest(page_size=PAGE),
        DEEP_PAGE: pb.ListMatchesRequest(page_size=PAGE, page_token=token),
    }
    out: dict[str, list[float]] = {FIRST: [], DEEP_PAGE: []}
    for i in range(10 + calls):
        for kind in harness.rotated(list(requests), i):
            ms = timed(partial(listing, requests[kind], timeout=CALL_TIMEOUT))
            if i >= 10:
                out[kind].append(ms)
    return out


def watch_joins(channel: grpc.Channel, calls: int, rng: random.Random) -> list[float]:
    """From a WatchMatch call on a live match to its first message, in ms, `calls` times:
    WATCHES_A_MATCH streams on each of a series of live matches (each played WATCH_MOVES
    moves first), each stream cancelled after its first message, then the match played to
    its end, which ends the streams the server still holds."""
    watch = channel.unary_stream(
        SERVICE + "WatchMatch",
        request_serializer=pb.WatchMatchRequest.SerializeToString,
        response_deserializer=pb.WatchMatchResponse.FromString,
    )
    out: list[float] = []
    while len(out) < calls:
        player = Player(Calls(channel), rng)
        for _ in range(WATCH_MOVES):
            player.play(*player.next_request())
        request = pb.WatchMatchRequest(match_id=player.match_id, batched=True)
        for _ in range(min(WATCHES_A_MATCH, calls - len(out))):
            out.append(first_message(watch, request))
        while True:
            response = player.play(*player.next_request())
            if response is not None and response.view.phase == pb.PHASE_ENDED:
                break
    return out


def first_message(watch: Any, request: pb.WatchMatchRequest) -> float:
    """The time from a WatchMatch call to its first message, in ms, the stream then
    cancelled. A call refused because the server holds too many streams (those cancelled
    are let go once their match moves) is tried again, untimed, for up to CALL_TIMEOUT."""
    deadline = time.monotonic() + CALL_TIMEOUT
    while True:
        t = time.perf_counter()
        stream = watch(request, timeout=CALL_TIMEOUT)
        try:
            next(stream)
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.RESOURCE_EXHAUSTED or time.monotonic() > deadline:
                raise
            time.sleep(0.05)
            continue
        ms = (time.perf_counter() - t) * 1000
        stream.cancel()
        return ms


@dataclass(frozen=True)
class Exported:
    records: int
    seconds: float
    finished: bool
    """False: stopped at the budget."""
    listing_s: float
    """Paging through the ended matches (ListMatches by phase), as the export does first."""


def bergen_script() -> list[str]:
    script = Path(sys.executable).with_name("bergen")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from bergen.cli_client.main import main; "
            "sys.exit(main())"]  # fmt: skip


def export(channel: grpc.Channel, target: str, folder: Path, budget: float) -> Exported:
    """`bergen export` of every ended match into an empty folder, stopped after `budget`
    seconds; and the paging through the ended matches it does first, timed alone here."""
    listing = unary(channel, "ListMatches", pb.ListMatchesResponse)
    t = time.perf_counter()
    token = ""
    while True:
        token = listing(
            pb.ListMatchesRequest(phase=pb.PHASE_ENDED, page_size=100, page_token=token),
            timeout=CALL_TIMEOUT,
        ).next_page_token
        if not token:
            break
    listing_s = time.perf_counter() - t
    out = folder / "export"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    env = {**os.environ, "HOME": str(folder)}  # the server's key is trusted in this folder
    command = [*bergen_script(), "export", "--out", str(out), "--server", target]
    with open(folder / "export.log", "wb") as log:
        start = time.perf_counter()
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            proc.wait(timeout=budget)
            finished = True
        except subprocess.TimeoutExpired:
            proc.terminate()
            proc.wait()
            finished = False
        seconds = time.perf_counter() - start
    if finished and proc.returncode != 0:
        tail = (folder / "export.log").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"bergen export failed ({proc.returncode}):\n{tail}")
    records = sum(1 for p in out.glob("*.json") if p.name != "manifest.json")
    return Exported(records, seconds, finished, listing_s)


# --- one size ------------------------------------------------------------------------------


@dataclass
class Step:
    """Every figure at one size."""

    matches: int
    events: int
    loaded: Loaded
    figures: dict[str, float] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Settings:
    loaders: int
    clients: int
    seconds: float
    calls: int
    restarts: int
    export_budget: float


def measure_size(url: str, folder: Path, loaded: Loaded, stored: int, s: Settings) -> Step:
    """Every figure of a database holding `stored` loaded matches (see the module's doc)."""
    vacuum(url)
    reset_listing(url)
    top = head(url)
    events = event_count(url)
    step = Step(stored, events, loaded)
    kept_before = kept_count(url)
    with serving(url, folder, "first") as first:
        started = time.perf_counter() - first.ready_s
        wait_for(lambda: positions(url).get(MATCH_LIST) == top, "the listing's rebuild")
        rebuilt = time.perf_counter() - started
        step.figures[REBUILD] = events / rebuilt
        step.notes[REBUILD] = f"{events:,} events in {rebuilt:.1f} s"
        say(f"  listing rebuilt from 0: {events:,} events in {rebuilt:.1f} s")
        wait_for(lambda: positions(url).get("tlog", 0) >= top, "the transparency log's catch-up")
        ended = ended_count(url)
        wait_for(lambda: kept_count(url) >= ended, "the records of the ended matches")
        made = time.perf_counter() - started
        step.figures[RECORDS] = (ended - kept_before) / made
        step.notes[RECORDS] = f"{ended - kept_before:,} in {made:.1f} s from the start"
        say(f"  records of {ended - kept_before:,} ended matches made {made:.1f} s after the start")
        step.notes[START + " cold"] = f"{first.ready_s:.2f} s"
    found = sizes(url)
    step.figures[EVENTS_BYTES] = found.events / found.matches
    step.figures[INDEX_BYTES] = found.indexes / found.matches
    step.figures[ALL_BYTES] = found.total / found.matches
    step.notes[ALL_BYTES] = f"{found.total / 2**20:,.0f} MiB, {found.matches:,} matches listed"
    ready = []
    with ExitStack() as stack:
        for i in range(s.restarts):
            stack.close()
            started_server = stack.enter_context(serving(url, folder, f"restart{i}"))
            ready.append(started_server.ready_s)
        step.figures[START] = harness.median(ready)
        step.notes[START] = ", ".join(f"{r:.2f}" for r in ready)
        say(f"  start to SERVING: {step.notes[START]} s")
        target = started_server.target
        channel = stack.enter_context(grpc.insecure_channel(target))
        rng = random.Random(stored)
        ids = [match_id_of(k) for k in rng.sample(range(stored), min(s.calls, stored))]
        got, floor = get_matches(channel, ids)
        step.figures[GET] = p99(got)
        step.figures[GET_P50] = harness.percentile(got, 50)
        step.figures[FLOOR] = p99(floor)
        deep = min(DEEP, stored // 2 // PAGE * PAGE)
        listed = pages(channel, s.calls, deep)
        step.figures[FIRST] = p99(listed[FIRST])
        step.figures[DEEP_PAGE] = p99(listed[DEEP_PAGE])
        step.notes[DEEP_PAGE] = f"after {deep:,}"
        step.figures[WATCH] = p99(watch_joins(channel, s.calls, rng))
        say(
            f"  GetMatch p50/p99 {step.figures[GET_P50]:.2f}/{step.figures[GET]:.2f} ms;"
            f" pages {step.figures[FIRST]:.2f},"
            f" {step.figures[DEEP_PAGE]:.2f} ms; watch {step.figures[WATCH]:.2f} ms"
        )
        run = measure_rate(OURS, target, s.clients, s.seconds, seed=stored)
        step.figures[PLAY_P50] = harness.percentile(run.latencies, 50) * 1000
        step.figures[PLAY_P99] = p99(run.latencies) * 1000
        step.notes[PLAY_P99] = f"{run.rate:,.0f} Play/s"
        say(f"  Play p50/p99 {step.figures[PLAY_P50]:.2f}/{step.figures[PLAY_P99]:.2f} ms")
        done = export(channel, target, folder, s.export_budget)
        step.figures[EXPORT] = done.records / done.seconds
        step.figures[LISTED] = done.listing_s
        step.notes[EXPORT] = f"{done.records:,} in {done.seconds:.1f} s" + (
            "" if done.finished else f" (stopped at {s.export_budget:.0f} s)"
        )
        say(f"  export: {step.notes[EXPORT]}; listing the ended {done.listing_s:.1f} s")
    return step


# --- the report ----------------------------------------------------------------------------


def goal_of(m: Measure, steps: Sequence[Step]) -> tuple[str, bool | None]:
    """The measure's goal as printed, and whether the largest size meets it (None: none)."""
    last = steps[-1].figures[m.key]
    if m.latency:
        ratio = last / steps[0].figures[m.key]
        return f"<= {LATENCY_GOAL}x", ratio <= LATENCY_GOAL
    if m.key == START:
        return f"< {START_GOAL_S:g} s", last < START_GOAL_S
    if m.key == EXPORT:
        return f">= {EXPORT_GOAL:,.0f}/s", last >= EXPORT_GOAL
    return "", None


def rows(steps: Sequence[Step]) -> list[Row]:
    out = []
    for m in MEASURES:
        cells = [f"{m.what} ({m.unit})"]
        cells += [f"{s.figures[m.key]:{m.fmt}}" for s in steps]
        ratio = steps[-1].figures[m.key] / steps[0].figures[m.key]
        goal, passed = goal_of(m, steps)
        out.append(Row((*cells, f"{ratio:.2f}", goal), passed))
    return out


def table(steps: Sequence[Step]) -> Table:
    return Table(
        (
            Column("measure", 56, "<"),
            *(Column(f"{s.matches:,}", 11) for s in steps),
            Column("ratio", 6),
            Column("goal", 10),
        )
    )


def loader_lines(steps: Sequence[Step]) -> list[str]:
    out = []
    for s in steps:
        lo = s.loaded
        out.append(
            f"  up to {s.matches:,} matches: loaded {lo.matches:,} matches, {lo.events:,} events"
            f" in {lo.seconds:.1f} s: {lo.events / lo.seconds:,.0f} events/s,"
            f" {lo.matches / lo.seconds:,.0f} matches/s"
        )
    return out


COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939", "#843c39")  # fmt: skip


def svg(steps: Sequence[Step]) -> str:
    """Each measure's figure over its figure at the first size, against the stored matches
    (log x axis), as an SVG document."""
    width, height, left, right, top, bottom = 860, 460, 60, 330, 30, 50
    xs = [math.log10(s.matches) for s in steps]
    x0, x1 = xs[0], max(xs[-1], xs[0] + 1e-9)
    # A measure not taken at some size (a run stopped early) is drawn where it was.
    series = [
        (
            m,
            [
                (x, s.figures[m.key] / steps[0].figures[m.key])
                for s, x in zip(steps, xs, strict=True)
                if m.key in s.figures
            ],
        )
        for m in MEASURES
        if m.key != LISTED and m.key in steps[0].figures
    ]
    high = max(2.0, *(r for _, rs in series for _, r in rs))
    y_top = math.ceil(high * 2) / 2

    def px(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * (width - left - right)

    def py(y: float) -> float:
        return height - bottom - y / y_top * (height - top - bottom)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}"'
        f' font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{left}" y="18" font-size="14">Each measure against its figure at'
        f" {steps[0].matches:,} stored matches</text>",
    ]
    step_y = 0.5 if y_top <= 5 else 1.0 if y_top <= 10 else math.ceil(y_top / 10)
    y = 0.0
    while y <= y_top + 1e-9:
        parts.append(
            f'<line x1="{left}" y1="{py(y):.1f}" x2="{width - right}" y2="{py(y):.1f}"'
            f' stroke="#ddd"/><text x="{left - 6}" y="{py(y) + 4:.1f}"'
            f' text-anchor="end">{y:g}</text>'
        )
        y += step_y
    parts.append(
        f'<line x1="{left}" y1="{py(LATENCY_GOAL):.1f}" x2="{width - right}"'
        f' y2="{py(LATENCY_GOAL):.1f}" stroke="#c00" stroke-dasharray="4 3"/>'
        f'<text x="{width - right - 4}" y="{py(LATENCY_GOAL) - 4:.1f}" text-anchor="end"'
        f' fill="#c00">latency goal {LATENCY_GOAL}x</text>'
    )
    for s, x in zip(steps, xs, strict=True):
        parts.append(
            f'<line x1="{px(x):.1f}" y1="{top}" x2="{px(x):.1f}" y2="{height - bottom}"'
            f' stroke="#eee"/><text x="{px(x):.1f}" y="{height - bottom + 16}"'
            f' text-anchor="middle">{s.matches:,}</text>'
        )
    parts.append(
        f'<text x="{(left + width - right) / 2}" y="{height - 12}" text-anchor="middle">'
        "stored matches (log scale)</text>"
        f'<text x="16" y="{(top + height - bottom) / 2}" text-anchor="middle"'
        f' transform="rotate(-90 16 {(top + height - bottom) / 2})">ratio to the first</text>'
    )
    for i, (m, ratios) in enumerate(series):
        colour = COLOURS[i % len(COLOURS)]
        points = " ".join(f"{px(x):.1f},{py(r):.1f}" for x, r in ratios)
        parts.append(
            f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2"/>'
        )
        for x, r in ratios:
            parts.append(f'<circle cx="{px(x):.1f}" cy="{py(r):.1f}" r="3" fill="{colour}"/>')
        ly = top + 10 + i * 18
        parts.append(
            f'<line x1="{width - right + 15}" y1="{ly}" x2="{width - right + 35}" y2="{ly}"'
            f' stroke="{colour}" stroke-width="2"/><text x="{width - right + 40}" y="{ly + 4}">'
            f"{escape(m.what)} {ratios[-1][1]:.2f}</text>"
        )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def report(steps: Sequence[Step]) -> None:
    print("\nthe loader:")
    for line in loader_lines(steps):
        print(line)
    print()
    t = table(steps)
    found = rows(steps)
    t.print(found)
    print(harness.goals_line(found))
    print("notes:")
    for s in steps:
        notes = "; ".join(f"{k}: {v}" for k, v in s.notes.items())
        print(f"  {s.matches:,} matches ({s.events:,} events): {notes}")


# --- the run -------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.scale_bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    harness.add_database_url(parser)
    quick_or = harness.quick_or
    parser.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=quick_or([1_000, 10_000, 100_000], [1_000, 10_000]),
        help="stored matches at each step, increasing",
    )
    parser.add_argument(
        "--loaders", type=int, default=max(2, os.cpu_count() or 2), help="loading processes"
    )
    parser.add_argument("--clients", type=int, default=8, help="Play clients")
    parser.add_argument(
        "--seconds", type=float, default=quick_or(10.0, 2.0), help="of Play at each size"
    )
    parser.add_argument(
        "--calls", type=int, default=quick_or(300, 50), help="calls timed a kind and size"
    )
    parser.add_argument("--restarts", type=int, default=quick_or(3, 1))
    parser.add_argument(
        "--export-budget", type=float, default=quick_or(120.0, 60.0), help="seconds"
    )
    parser.add_argument(
        "--svg",
        type=Path,
        default=None,
        help="write the curve here (default docs/scale-curve.svg when the top size is 10^5)",
    )
    args = parser.parse_args(argv)
    sizes_wanted: list[int] = args.sizes
    if sizes_wanted != sorted(set(sizes_wanted)) or sizes_wanted[0] < 2 * PAGE:
        parser.error(f"--sizes must increase, from at least {2 * PAGE}")
    svg_path = args.svg
    if svg_path is None and sizes_wanted[-1] >= 100_000:
        svg_path = Path(__file__).resolve().parent.parent / "docs" / "scale-curve.svg"
    s = Settings(
        args.loaders, args.clients, args.seconds, args.calls, args.restarts, args.export_budget
    )
    say(f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f} at the start")
    steps: list[Step] = []
    with (
        bench_database(args.database_url) as url,
        tempfile.TemporaryDirectory(prefix="bergen-scale-") as tmp,
    ):
        folder = Path(tmp)
        key_file = folder / LOG_KEY_FILE
        LogKeys.load_or_create(key_file)
        stored = 0
        for size in sizes_wanted:
            say(f"loading matches {stored:,} to {size:,} with {s.loaders} processes")
            loaded = load(url, key_file, stored, size, s.loaders)
            say(
                f"  {loaded.events:,} events in {loaded.seconds:.1f} s:"
                f" {loaded.events / loaded.seconds:,.0f} events/s,"
                f" {loaded.matches / loaded.seconds:,.0f} matches/s"
            )
            stored = size
            steps.append(measure_size(url, folder, loaded, stored, s))
    say(f"load average {os.getloadavg()[0]:.1f} at the end")
    report(steps)
    if svg_path is not None:
        svg_path.write_text(svg(steps))
        say(f"the curve: {svg_path}")
    return ExitStatus.OK


if __name__ == "__main__":
    sys.exit(main())
