"""ListMatches and a server restart, over 20,000 stored matches against 20, in one run.

    python -m bench listing      (or: python -m bench.listing_bench --matches 20000 --calls 400)

For each backend (PostgreSQL in a database made for the run from BERGEN_BENCH_DATABASE_URL,
default postgresql://postgres@127.0.0.1:5432/postgres, dropped afterwards; SQLite in a
temporary folder) and each size (20 matches, then --matches):

- seeding: real matches (played by the greedy policy, then cut: 40% still seating, 40%
  playing, 20% ended) written as their real events through the store's batch builder in one
  bulk statement, authenticated under the log key the server is then given, so the listing
  has every event to check and fold;
- first start: `bergen serve` is started and folds the listing from position 0 in the
  background; the time until it has folded every event is reported (events per second);
- pages: ListMatches through the server's gRPC port on a warm channel, a mix of first pages,
  pages deep in a walk (by token), a phase, a player, a player and a phase; p50 and p99 of the
  call as the client sees it (an upper bound on the server's time), and of the server's own
  work for the same pages (the projection's `page` in this process on the same database:
  catch up, then the keyset query);
- restart: the server is stopped (SIGTERM) and started again over the same database, timed
  from the process's start until the health service answers SERVING (median of --restarts).

Goals (issue 9): a page in under 5 ms at p99 with 20,000 matches; ready in under 2 s.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import psycopg
from grpc_health.v1 import health_pb2, health_pb2_grpc

from bench import harness
from bench.harness import Column, ExitStatus, Row, Table
from bench.store_bench import bench_database
from bergen.api.stored import GENESIS_HASH, EventMetadata
from bergen.domain import codec
from bergen.domain.events import Event, MatchCreated, SeatTaken
from bergen.domain.policies import greedy_policy
from bergen.domain.rules import make_rules
from bergen.domain.simulation import play_match
from bergen.server.keys import LogKeys
from bergen.server.projections import MATCH_LIST, MatchListProjection
from bergen.server.store import NewEvent, open_store, upgrade_to_head
from bergen.server.store.batch import build_rows
from bergen.v1 import bergen_pb2 as pb

PAGE_GOAL_MS = 5.0
RESTART_GOAL_S = 2.0
START_TIMEOUT = 600.0
LOG_KEY_FILE = "bergen-log-key"
"""In the run's folder: the seeding authenticates rows under it, and the server is given it."""
PLAYERS = 300
"""Distinct player names across the seeded matches."""
SERVICE = next(
    s.full_name
    for s in pb.DESCRIPTOR.services_by_name.values()
    if "ListMatches" in s.methods_by_name
)
PHASES = {"seating": pb.PHASE_SEATING, "playing": pb.PHASE_PLAYING, "ended": pb.PHASE_ENDED}


# --- seeding -------------------------------------------------------------------------------


def _templates(count: int = 48) -> list[list[Event]]:
    """Whole real matches of 2, 3 and 4 seats (partnerships too), played once per run."""
    out = []
    for i in range(count):
        seats = 2 + i % 3
        partnerships = seats == 4 and i % 2 == 1
        events, _ = play_match(
            f"t{i}",
            make_rules(seats, partnerships),
            seats,
            partnerships,
            i.to_bytes(32, "big"),
            [greedy_policy] * seats,
            random.Random(i),
        )
        out.append(events)
    return out


def _match_events(k: int, templates: list[list[Event]], rng: random.Random) -> list[Event]:
    """Match number k: a template's events under a new id and names, cut to its phase."""
    template = templates[k % len(templates)]
    created = template[0]
    assert isinstance(created, MatchCreated)
    seats = created.seats
    kind = k % 10
    if kind < 4:
        cut = 1 + rng.randrange(seats)  # seating: some seats still empty
    elif kind < 8:
        cut = min(len(template) - 3, 1 + seats + 1 + rng.randrange(40))  # playing
    else:
        cut = len(template)  # ended
    out: list[Event] = []
    for e in template[:cut]:
        if isinstance(e, MatchCreated):
            e = dataclasses.replace(e, match_id=f"match-{k:06}", name=f"table {k}")
        elif isinstance(e, SeatTaken):
            e = dataclasses.replace(e, name=f"player{rng.randrange(PLAYERS):03}")
        out.append(e)
    return out


def _rows(n: int, keys: LogKeys, at: datetime) -> Iterator[tuple[str, list[Any]]]:
    """(stream id, rows from build_rows) for n seeded matches, recorded `at`, authenticated
    under `keys`' writing key."""
    templates = _templates()
    rng = random.Random(9)
    meta = EventMetadata("bench", None, "bergen-rules/1", {})
    writing = (keys.writing, keys.writing_key)
    for k in range(n):
        stream = f"match-{k:06}"
        events = [NewEvent(*codec.encode(e)) for e in _match_events(k, templates, rng)]
        yield stream, build_rows(stream, 0, events, meta, GENESIS_HASH, at, writing)


def seed_postgres(url: str, n: int, keys: LogKeys) -> int:
    """Write n matches' events with one COPY. Returns the events written."""
    count = 0
    at = datetime.now(UTC)
    with psycopg.connect(url) as conn, conn.cursor() as cur:
        with cur.copy(
            "COPY events (stream_id, seq, type, schema_version, payload, metadata, command_id,"
            " prev_hash, hash, salt, recorded_at, key_id, mac) FROM STDIN"
        ) as copy:
            for stream, rows in _rows(n, keys, at):
                for r in rows:
                    copy.write_row(
                        (stream, r.seq, r.event.type, r.event.schema_version, r.payload_json,
                         r.metadata_json, r.command_id, r.prev_hash, r.hash, r.salt, at,
                         r.key_id, r.mac)
                    )  # fmt: skip
                    count += 1
        conn.commit()
    return count


def seed_sqlite(url: str, n: int, keys: LogKeys) -> int:
    """Write n matches' events in one transaction. Returns the events written."""
    conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
    now = datetime.now(UTC)
    at = now.isoformat(sep=" ")
    position = 0
    try:
        conn.execute("BEGIN")
        batch = []
        for stream, rows in _rows(n, keys, now):
            for r in rows:
                position += 1
                batch.append(
                    (stream, r.seq, position, r.event.type, r.event.schema_version,
                     r.payload_json, r.metadata_json, r.command_id, r.prev_hash, r.hash,
                     r.salt, at, r.key_id, r.mac)
                )  # fmt: skip
        conn.executemany(
            "INSERT INTO events (stream_id, seq, position, type, schema_version, payload,"
            " metadata, command_id, prev_hash, hash, salt, recorded_at, key_id, mac)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            batch,
        )
        conn.execute("COMMIT")
    finally:
        conn.close()
    return position


# --- the server ----------------------------------------------------------------------------


def _serve_command(url: str, port_file: Path, extra: Sequence[str] = ()) -> list[str]:
    script = Path(sys.executable).with_name("bergen")
    prefix = (
        [str(script)]
        if script.exists()
        else [sys.executable, "-c", "import sys; from bergen.cli_client.main import main; "
              "sys.exit(main())"]
    )  # fmt: skip
    return [*prefix, "serve", "--listen", "127.0.0.1:0", "--database", url,
            "--port-file", str(port_file),
            "--log-key", str(port_file.with_name(LOG_KEY_FILE)), "--no-organiser",
            *extra]  # fmt: skip


@dataclass
class Started:
    process: subprocess.Popen[bytes]
    target: str
    ready_s: float
    """From the process's start until health answered SERVING."""


@contextmanager
def serving(url: str, folder: Path, name: str, extra: Sequence[str] = ()) -> Iterator[Started]:
    """`bergen serve` on `url`, with the options `extra` too, until the block ends (SIGTERM).
    Raises RuntimeError if it does not answer SERVING within START_TIMEOUT."""
    port_file = folder / f"{name}.port"
    port_file.unlink(missing_ok=True)
    log = folder / f"{name}.log"
    env = {**os.environ, "BERGEN_LOG_LEVEL": "WARNING"}
    with open(log, "wb") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(
            _serve_command(url, port_file, extra), stdout=out, stderr=subprocess.STDOUT, env=env,
            cwd=folder,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not port_file.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"bergen serve did not start (exit {proc.poll()}):\n{tail}")
            time.sleep(0.005)
        target = f"127.0.0.1:{int(port_file.read_text())}"
        with grpc.insecure_channel(target) as channel:
            health: Any = health_pb2_grpc.HealthStub(channel)
            while True:
                try:
                    answer = health.Check(health_pb2.HealthCheckRequest(), timeout=1.0)
                    if answer.status == health_pb2.HealthCheckResponse.SERVING:
                        break
                except grpc.RpcError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("bergen serve never answered SERVING")
                time.sleep(0.005)
        ready = time.perf_counter() - start
        yield Started(proc, target, ready)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _folded(url: str, head: int) -> bool:
    store = open_store(url)
    try:
        return store.match_list().position(MATCH_LIST) == head
    finally:
        store.close()


# --- pages ---------------------------------------------------------------------------------


def _requests(tokens: list[str], rng: random.Random, n: int) -> list[tuple[str, Any]]:
    """n ListMatches requests of each kind, shuffled."""
    out: list[tuple[str, Any]] = []
    for _ in range(n):
        phase = rng.choice(list(PHASES))
        name = f"player{rng.randrange(PLAYERS):03}"
        out += [
            ("first page", {}),
            ("deep page", {"page_token": rng.choice(tokens)} if tokens else {}),
            ("phase", {"phase": PHASES[phase]}),
            ("player", {"player_name": name}),
            ("player+phase", {"player_name": name, "phase": PHASES[phase]}),
        ]
    rng.shuffle(out)
    return out


def _walk(call: Callable[..., Any], pages: int) -> list[str]:
    """The tokens of the first `pages` pages of the whole listing."""
    tokens, token = [], ""
    for _ in range(pages):
        token = call(
            pb.ListMatchesRequest(page_size=20, page_token=token), timeout=30
        ).next_page_token
        if not token:
            break
        tokens.append(token)
    return tokens


def _quantiles(xs: list[float]) -> tuple[float, float]:
    xs = sorted(xs)
    return statistics.median(xs), xs[min(len(xs) - 1, int(len(xs) * 0.99))]


def measure_pages(target: str, url: str, calls: int) -> dict[str, tuple[float, float]]:
    """p50/p99 in ms: through gRPC ("grpc"), and of the projection's page in process
    ("server"), each over the same mix, after a warm-up."""
    rng = random.Random(5)
    with grpc.insecure_channel(target) as channel:
        call: Any = channel.unary_unary(
            f"/{SERVICE}/ListMatches",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=pb.ListMatchesResponse.FromString,
        )
        tokens = _walk(call, 200)
        requests = _requests(tokens, rng, max(1, calls // 5))
        for _, fields in requests[:50]:
            call(pb.ListMatchesRequest(**fields), timeout=30)
        grpc_ms = []
        for _, fields in requests:
            t = time.perf_counter()
            call(pb.ListMatchesRequest(**fields), timeout=30)
            grpc_ms.append((time.perf_counter() - t) * 1000)
    store = open_store(url)
    try:
        projection = MatchListProjection(store)
        names = {v: k for k, v in PHASES.items()}
        server_ms = []
        for i, (_, fields) in enumerate(requests):
            args = (
                names.get(fields.get("phase", 0)),
                fields.get("player_name", ""),
                20,
                fields.get("page_token", ""),
            )
            t = time.perf_counter()
            projection.page(*args)
            if i >= 50:
                server_ms.append((time.perf_counter() - t) * 1000)
    finally:
        store.close()
    return {"grpc": _quantiles(grpc_ms), "server": _quantiles(server_ms)}


# --- the run -------------------------------------------------------------------------------


@dataclass
class Figures:
    matches: int
    events: int
    seed_s: float
    build_s: float
    pages: dict[str, tuple[float, float]]
    restarts: list[float]


def run_one(url: str, folder: Path, n: int, calls: int, restarts: int) -> Figures:
    t = time.perf_counter()
    keys = LogKeys.load_or_create(folder / LOG_KEY_FILE)
    events = (seed_postgres if url.startswith("postgresql") else seed_sqlite)(url, n, keys)
    seed_s = time.perf_counter() - t
    # A fresh database: the seeded events hold positions 1 to `events`. (The store's head
    # may not show them yet while a transaction elsewhere in the cluster is older.)
    head = events
    with serving(url, folder, "first") as first:
        t = time.perf_counter()
        while not _folded(url, head):
            time.sleep(0.05)
        build_s = time.perf_counter() - t + first.ready_s
        pages = measure_pages(first.target, url, calls)
    ready = []
    for i in range(restarts):
        with serving(url, folder, f"restart{i}") as again:
            ready.append(again.ready_s)
    return Figures(n, events, seed_s, build_s, pages, ready)


@contextmanager
def sqlite_database() -> Iterator[tuple[str, Path]]:
    with tempfile.TemporaryDirectory(prefix="bergen-listing-") as folder:
        url = f"sqlite:///{Path(folder) / 'bergen.db'}"
        upgrade_to_head(url)
        yield url, Path(folder)


@contextmanager
def postgres_database(admin_url: str) -> Iterator[tuple[str, Path]]:
    with bench_database(admin_url) as url, tempfile.TemporaryDirectory() as folder:
        yield url, Path(folder)


def report(backend: str, small: Figures, large: Figures) -> None:
    print(f"\n{backend}: {small.matches} matches ({small.events} events) against "
          f"{large.matches} matches ({large.events} events)")  # fmt: skip
    print(f"  seeded {large.events} events in {large.seed_s:.1f} s; first start folded them "
          f"in {large.build_s:.1f} s ({large.events / large.build_s:,.0f} events/s)")  # fmt: skip
    table = Table(
        (
            Column("measure", 44, "<"),
            Column(str(small.matches), 10),
            Column(str(large.matches), 10),
            Column("ratio", 7),
            Column("goal", 9),
        ),
        verdicts=False,
        indent="  ",
    )

    def row(what: str, a: float, b: float, goal: str) -> Row:
        return Row((what, f"{a:.2f}", f"{b:.2f}", f"{b / a:.2f}", goal))

    rows = []
    for key, what in (("server", "page, server's work"), ("grpc", "page, gRPC call")):
        for i, q in enumerate(("p50", "p99")):
            a, b = small.pages[key][i], large.pages[key][i]
            goal = ""
            if key == "server" and q == "p99":
                goal = f"< {PAGE_GOAL_MS:g} ms {harness.verdict(b < PAGE_GOAL_MS, 'met')}"
            rows.append(row(f"{what} {q} (ms)", a, b, goal))
    a, b = statistics.median(small.restarts), statistics.median(large.restarts)
    goal = f"< {RESTART_GOAL_S:g} s {harness.verdict(b < RESTART_GOAL_S, 'met')}"
    rows.append(row("restart until SERVING, median (s)", a, b, goal))
    table.print(rows)
    print(f"  restarts over {large.matches}: " + ", ".join(f"{s:.2f}" for s in large.restarts))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.listing_bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    harness.add_database_url(parser)
    quick_or = harness.quick_or
    parser.add_argument(
        "--matches", type=int, default=quick_or(20_000, 200), help="the large listing"
    )
    parser.add_argument("--small", type=int, default=20, help="the small listing")
    parser.add_argument(
        "--calls", type=int, default=quick_or(500, 100), help="pages timed per figure"
    )
    parser.add_argument("--restarts", type=int, default=quick_or(3, 1))
    parser.add_argument("--no-sqlite", action="store_true", help="PostgreSQL only")
    args = parser.parse_args(argv)
    backends: list[tuple[str, Callable[[], Any]]] = [
        ("PostgreSQL", lambda: postgres_database(args.database_url))
    ]
    if not args.no_sqlite:
        backends.append(("SQLite", sqlite_database))
    for backend, database in backends:
        figures = []
        for n in (args.small, args.matches):
            with database() as (url, folder):
                figures.append(run_one(url, folder, n, args.calls, args.restarts))
        report(backend, *figures)
    return ExitStatus.OK


if __name__ == "__main__":
    sys.exit(main())
