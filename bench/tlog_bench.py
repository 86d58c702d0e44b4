"""The transparency log: what it costs Play, how fast its proofs are at 10 million events,
and how long a witness takes to check a new checkpoint of such a log.

- **play**: `bergen serve` on a fresh PostgreSQL database, `--clients` clients playing two-seat
  matches for `--seconds` (grpc_bench's clients), with the transparency log (the default:
  checkpoints every 2 s and at every match end, the tree folded beside the listing) and
  with `--no-transparency-log`, in turns, `--rounds` rounds. The table shows each round and
  the median of each column. Goal: the median of the rounds' ratios (Play/s with the log over
  Play/s without it, the two measured one after the other) >= 0.95.
- **proofs**: a tree of `--events` leaves (10 million; each leaf SHA-256(0x00 || index))
  written into the tree's tables of a fresh database as a server writes them (the leaves
  and the nodes they complete, a chunk a transaction, in the order they are made), then
  vacuumed and checkpointed, as the tables of a server that has run for a while are. Then
  `--calls` inclusion proofs of random leaves of trees of 8 sizes (the whole tree and 7
  random sizes above half of it: its checkpoints) and consistency proofs from a random size
  to one of those, made by the server's code (`bergen.server.tlog.proved_inclusion` and
  `proved_consistency` over the store's `SqlTlog`), each proof checked against the root of
  its size (the signed root, in the server) before it is answered; 50 of each first, not
  timed. First the server's local copy of the tree is made from the tables (the leaves'
  file and the upper nodes in memory, as a server does at its first start; timed), and the
  proofs are read from it; beside each, the same proof from the tables alone (the nodes a
  server keeps in memory, one statement for the others: the reference), and a bare
  `SELECT 1`. Goal: p99 < 5 ms for each, from the copy.
- **witness**: `bergen serve` on that tree's database (its events numbered after the
  tree's leaves, so that what is played is folded onto the tree), and `--checks` times what
  `bergen witness` does for one new checkpoint: fetch it with the consistency proof from
  the size it verified last (one call), check the log's signature and the proof, cosign,
  keep its state durably (one slot of its state file written and synced). Between two
  checks a move is played and the server is asked for its newest checkpoint (not timed), as
  its fold signs one every 2 s and at every match end before a witness polls; after each, a
  bare call (GetServerInfo, no work) is timed beside it. Goal: p99 < 10 ms.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from bench import harness
from bench.grpc_bench import (
    OURS,
    Calls,
    Player,
    bergen_command,
    launch_server,
    measure_rate,
    open_channel,
    stop_server,
    wait_for_port,
)
from bench.store_bench import bench_database
from bergen.api.checkpoints import parse_checkpoint, parse_note
from bergen.api.signing import load_or_create_key
from bergen.cli_client.client import Client
from bergen.cli_client.witness import (
    KEY_FILE,
    ServerSource,
    StateFile,
    Witness,
    WitnessState,
)
from bergen.domain.merkle import Frontier, leaf_hash
from bergen.server.store import SqlTlog, open_store
from bergen.server.store.tlog import RECORD, TILE, LocalTree
from bergen.server.tlog import CHECKPOINT_FILE, proved_consistency, proved_inclusion

WITH, WITHOUT = "with the log", "without"
INCLUSION, CONSISTENCY, ROUND_TRIP = "inclusion", "consistency", "round trip"
FROM_TABLES = " (tables only)"
CHECK, FETCH, KEEP, REST, BARE = (
    "check", "GetCheckpoint (the proof with it)", "state kept (one sync)", "checks and cosignature",
    "bare call",
)  # fmt: skip
PLAY_GOAL = 0.95
PROOF_GOAL_MS = 5.0
WITNESS_GOAL_MS = 10.0


def play_rate(admin_url: str, tlog: bool, clients: int, seconds: float, seed: int) -> float:
    """Play/s of one server on a fresh database, with or without the log."""
    with bench_database(admin_url) as url, tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        port_file = folder / "server.port"
        command = bergen_command(url, port_file)
        if not tlog:
            command.append("--no-transparency-log")
        proc = launch_server("server", command, folder)
        try:
            port = wait_for_port("server", proc, port_file, folder / "server.log")
            run = measure_rate(OURS, f"127.0.0.1:{port}", clients, seconds, seed)
        finally:
            stop_server(proc)
        return run.rate


PLAY_TABLE = harness.Table(
    (
        harness.Column("Play/s", 8, "<"),
        harness.Column(WITH, 12),
        harness.Column(WITHOUT, 8),
        harness.Column("ratio", 6),
        harness.Column("goal", 8),
    ),
    gap="  ",
)


def play_rows(rates: dict[str, list[float]]) -> tuple[list[harness.Row], float]:
    """A row a round (the two rates and their ratio), then their medians, the goal on the
    median ratio; and that ratio."""
    rows: list[harness.Row] = []
    ratios = []
    for r, (w, wo) in enumerate(zip(rates[WITH], rates[WITHOUT], strict=True)):
        ratios.append(w / wo)
        rows.append(harness.Row((f"round {r + 1}", f"{w:,.0f}", f"{wo:,.0f}", f"{w / wo:.3f}")))
    ratio = harness.median(ratios)
    median = (
        "median",
        f"{harness.median(rates[WITH]):,.0f}",
        f"{harness.median(rates[WITHOUT]):,.0f}",
        f"{ratio:.3f}",
        f">= {PLAY_GOAL}",
    )
    rows.append(harness.Row(median, ratio >= PLAY_GOAL))
    return rows, ratio


BUILD_CHUNK = 100_000
"""Leaves a transaction writes while the tree is built, with the nodes they complete: a long
transaction would hold back every reader of the commit-safe global order in the cluster."""


def build_tree(url: str, events: int) -> None:
    """Leaves 0..events-1 (leaf i of position i + 1) and every complete node above them,
    written as a server's fold writes them: a chunk of leaves a transaction, then the nodes
    they complete in the order they are made (each beside the others of its leaves on disk);
    then the tables vacuumed and analyzed, and a checkpoint made (when the user may), so that
    no bulk write of the build is still being flushed while proofs are timed."""
    frontier = Frontier()
    with psycopg.connect(url, autocommit=True) as conn:
        for start in range(0, events, BUILD_CHUNK):
            leaves = []
            nodes: list[tuple[int, int, bytes]] = []
            for i in range(start, min(events, start + BUILD_CHUNK)):
                h = leaf_hash(i.to_bytes(8, "big"))
                leaves.append((i, i + 1, f"bench-{i // 100}", i % 100 + 1, h))
                nodes += frontier.append(h)[1:]
            with conn.transaction(), conn.cursor() as cur:
                with cur.copy(
                    "COPY tlog_leaves (idx, position, stream_id, seq, hash) FROM STDIN"
                    " (FORMAT BINARY)"
                ) as copy:
                    copy.set_types(["int8", "int8", "text", "int8", "bytea"])
                    for row in leaves:
                        copy.write_row(row)
                with cur.copy(
                    "COPY tlog_nodes (level, idx, hash) FROM STDIN (FORMAT BINARY)"
                ) as copy:
                    copy.set_types(["int2", "int8", "bytea"])
                    for node in nodes:
                        copy.write_row(node)
        conn.execute("VACUUM ANALYZE tlog_leaves")
        conn.execute("VACUUM ANALYZE tlog_nodes")
        try:
            conn.execute("CHECKPOINT")
        except psycopg.errors.InsufficientPrivilege:
            harness.say("no CHECKPOINT (not allowed to this user): the build may still be flushing")


WARMUP_PROOFS = 50
"""Proofs of each kind made before the timed ones: the statement prepared on the connection,
its plan settled, the upper levels of the tree read once, as in a server that has run."""


COPY_WAIT_S = 3600.0
"""How long the local copy may take to be made from the tables."""


def time_proofs(
    url: str, events: int, calls: int, seed: int
) -> tuple[dict[str, list[float]], float]:
    """Milliseconds per inclusion proof and per consistency proof, each checked (after
    WARMUP_PROOFS of each, not counted), from the local copy of the tree (made first: the
    seconds it took are returned) and, beside each, from the tables alone (FROM_TABLES: a
    second store, without the copy), and per bare round trip to the database (SELECT 1, one
    after each pair of proofs: what the machine's load alone costs a query)."""
    store, tables = open_store(url), open_store(url)
    try:
        tree, reference = store.tlog(), tables.tlog()
        with tempfile.TemporaryDirectory() as tmp:
            local = tree.local = LocalTree(Path(tmp) / "leaves", tree)
            start = time.perf_counter()
            local.start(events)
            if not local.wait_for(events, COPY_WAIT_S):
                raise RuntimeError(f"the local copy holds {local.size} leaves, not {events}")
            made_s = time.perf_counter() - start
            try:
                return _time_proofs(url, tree, reference, events, calls, seed), made_s
            finally:
                local.close()
    finally:
        store.close()
        tables.close()


def _time_proofs(
    url: str, tree: SqlTlog, reference: SqlTlog, events: int, calls: int, seed: int
) -> dict[str, list[float]]:
    rng = random.Random(seed)
    roots: dict[int, bytes] = {}

    def root_of(size: int) -> bytes:
        if size not in roots:
            roots[size] = Frontier.read(reference, size).root()
        return roots[size]

    sizes = [events, *(rng.randrange(events // 2, events) for _ in range(7))]
    for size in sizes:
        root_of(size)
    names = (INCLUSION, CONSISTENCY, INCLUSION + FROM_TABLES, CONSISTENCY + FROM_TABLES)
    times: dict[str, list[float]] = {name: [] for name in (*names, ROUND_TRIP)}
    warm = min(WARMUP_PROOFS, calls)
    with psycopg.connect(url, autocommit=True, prepare_threshold=0) as conn:
        for call in range(warm + calls):
            if call == warm:
                for kept in times.values():
                    kept.clear()
            size = rng.choice(sizes)
            index = rng.randrange(size)
            new = rng.choice(sizes)
            old = rng.randrange(1, new)
            # the server has the leaf's hash: its row
            leaf = reference.stored_nodes([(0, index)])[(0, index)]
            for source, suffix in ((tree, ""), (reference, FROM_TABLES)):
                start = time.perf_counter()
                proved_inclusion(source, index, size, leaf, root_of(size))
                times[INCLUSION + suffix].append((time.perf_counter() - start) * 1000)
                start = time.perf_counter()
                proved_consistency(source, old, new, root_of(new))
                times[CONSISTENCY + suffix].append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            conn.execute("SELECT 1").fetchall()
            times[ROUND_TRIP].append((time.perf_counter() - start) * 1000)
    return times


@contextmanager
def serving(url: str, events: int) -> Iterator[str]:
    """`bergen serve` on the database of a tree of `events` leaves built by `build_tree`,
    its events numbered from events + 1 (after the leaves' positions): the target."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"ALTER TABLE events ALTER COLUMN position RESTART WITH {events + 1}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        port_file = folder / "server.port"
        proc = launch_server("server", bergen_command(url, port_file), folder)
        try:
            port = wait_for_port("server", proc, port_file, folder / "server.log")
            wait_for_copy(folder, events)
            yield f"127.0.0.1:{port}"
        finally:
            stop_server(proc)


def wait_for_copy(folder: Path, events: int) -> None:
    """Wait until the server running in `folder` has made its local copy of the tree of
    `events` leaves from the tables (its file holds their whole tiles), as one that has run a
    while has: its reads of the tables would fall on what is timed. Raises RuntimeError
    after COPY_WAIT_S."""
    deadline = time.monotonic() + COPY_WAIT_S
    while True:
        held = sum(f.stat().st_size for f in folder.glob(f"{CHECKPOINT_FILE}-*.leaves"))
        if held >= events // TILE * RECORD:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the server's local copy holds {held} bytes after {COPY_WAIT_S} s")
        time.sleep(0.5)


def size_of(note: str) -> int:
    return parse_checkpoint(parse_note(note)[0]).size


class TimedSource:
    """A witness's source, its GetCheckpoint timed (milliseconds, FETCH): the consistency
    proof comes with it."""

    def __init__(self, source: ServerSource, times: dict[str, list[float]]) -> None:
        self._source = source
        self._times = times

    def checkpoint(self, since: int = 0) -> str:
        start = time.perf_counter()
        note = self._source.checkpoint(since)
        self._times[FETCH].append((time.perf_counter() - start) * 1000)
        return note

    def consistency(self, old: int, new: int) -> list[bytes]:
        return self._source.consistency(old, new)


def time_witness(target: str, checks: int, seed: int) -> tuple[dict[str, list[float]], int]:
    """Milliseconds per check of a new checkpoint by a witness of the log at `target` (CHECK),
    and the parts of each: its call (FETCH: GetCheckpoint, the consistency proof with it),
    its state kept (KEEP), and the rest (REST: the signature and the proof checked, the
    cosignature made); a bare call after each (BARE: GetServerInfo, which does no work: what
    the machine's load alone costs a call); and the size of the last checkpoint it cosigned.
    Raises RuntimeError when the server does not give the proof with the checkpoint."""
    parts = (CHECK, FETCH, KEEP, REST)
    times: dict[str, list[float]] = {part: [] for part in (*parts, BARE)}
    with (
        Client(target) as client,
        tempfile.TemporaryDirectory() as tmp,
        StateFile(Path(tmp)) as state_file,  # open for the run, as `bergen witness` keeps it
    ):
        source = ServerSource(client)
        key = load_or_create_key(Path(tmp) / KEY_FILE)
        state = WitnessState(source.public_key(), None, None, "bench/witness")
        state_file.save(state)

        def keep(state: WitnessState) -> None:
            start = time.perf_counter()
            state_file.save(state)
            times[KEEP].append((time.perf_counter() - start) * 1000)

        witness = Witness(key, state, save=keep)
        timed = TimedSource(source, times)
        witness.observe(source.checkpoint(), source)  # the first: trusted, nothing to prove
        channel = open_channel(target)
        try:
            player = Player(Calls(channel), random.Random(seed))
            for check in range(checks + 1):
                if check == 1:  # the first: connections and statements made
                    for kept in times.values():
                        kept.clear()
                last = witness.state.last
                assert last is not None
                seen = last.checkpoint.size
                deadline = time.monotonic() + 30
                player.play(*player.next_request())
                # The move's events join the commit-safe order once older transactions end.
                while size_of(source.checkpoint()) <= seen:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"the log did not grow past {seen} in 30 s")
                start = time.perf_counter()
                cosigned = witness.observe(timed.checkpoint(witness.verified_size), timed)
                times[CHECK].append((time.perf_counter() - start) * 1000)
                assert cosigned, "a checkpoint the witness had verified already"
                times[REST].append(times[CHECK][-1] - sum(times[p][-1] for p in parts[1:3]))
                start = time.perf_counter()
                source.public_key()
                times[BARE].append((time.perf_counter() - start) * 1000)
        finally:
            channel.close()
        if source.proofs_asked:
            raise RuntimeError("the server gave no consistency proof with its checkpoint")
        last = witness.state.last
        assert last is not None
        return times, last.checkpoint.size


def p50_p99(times: list[float]) -> str:
    p50, p99 = harness.percentile(times, 50), harness.percentile(times, 99)
    return f"p50 {p50:.2f} ms, p99 {p99:.2f} ms"


def percentiles_line(what: str, times: list[float], goal_ms: float) -> str:
    p50, p99 = harness.percentile(times, 50), harness.percentile(times, 99)
    return (
        f"{what}: p50 {p50:.2f} ms, p99 {p99:.2f} ms, goal p99 < {goal_ms:g} ms:"
        f" {harness.verdict(p99 < goal_ms)}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.tlog_bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    harness.add_database_url(parser)
    quick_or = harness.quick_or
    parser.add_argument(
        "--parts", nargs="+", choices=["play", "proofs", "witness"],
        default=["play", "proofs", "witness"],
    )  # fmt: skip
    parser.add_argument("--clients", type=int, default=quick_or(8, 2))
    parser.add_argument("--seconds", type=float, default=quick_or(20.0, 2.0))
    parser.add_argument("--rounds", type=int, default=quick_or(3, 1))
    parser.add_argument("--events", type=int, default=quick_or(10_000_000, 100_000))
    parser.add_argument("--calls", type=int, default=quick_or(2000, 200))
    parser.add_argument("--checks", type=int, default=quick_or(300, 20))
    args = parser.parse_args(argv)
    if args.events < 2:
        parser.error("--events: a tree of 2 leaves at least")
    for name in ("rounds", "calls", "checks"):
        if getattr(args, name) < (1 if name == "rounds" else 2):
            parser.error(f"--{name}: {'1' if name == 'rounds' else '2'} at least")
    if "play" in args.parts:
        rates: dict[str, list[float]] = {WITH: [], WITHOUT: []}
        for r in range(args.rounds):
            for which in harness.rotated([WITH, WITHOUT], r):
                rate = play_rate(args.database_url, which == WITH, args.clients, args.seconds, r)
                rates[which].append(rate)
                harness.say(f"round {r + 1}, {which}: {rate:,.0f} Play/s")
        rows, ratio = play_rows(rates)
        PLAY_TABLE.print(rows, f"Play/s, {args.clients} clients, {args.rounds} rounds:")
        print(f"Play/s ratio (median of the rounds) {ratio:.3f}, goal >= {PLAY_GOAL}:"
              f" {harness.verdict(ratio >= PLAY_GOAL)}")  # fmt: skip
    if "proofs" in args.parts or "witness" in args.parts:
        with bench_database(args.database_url) as url:
            start = time.perf_counter()
            build_tree(url, args.events)
            harness.say(
                f"tree of {args.events:,} leaves built in {time.perf_counter() - start:.0f} s"
            )
            if "proofs" in args.parts:
                times, made_s = time_proofs(url, args.events, args.calls, 1)
                harness.say(f"the local copy made from the tables in {made_s:.0f} s")
                for name in (INCLUSION, CONSISTENCY):
                    what = f"{name} proofs at {args.events:,} events, {args.calls} calls"
                    print(percentiles_line(what, times[name], PROOF_GOAL_MS), flush=True)
                    tables = times[name + FROM_TABLES]
                    ratio = harness.percentile(times[name], 99) / harness.percentile(tables, 99)
                    print(f"  from the tables alone: {p50_p99(tables)} (p99 ratio {ratio:.2f})")
                print(f"  beside them, a bare round trip (SELECT 1): {p50_p99(times[ROUND_TRIP])}")
            if "witness" in args.parts:
                with serving(url, args.events) as target:
                    checks, size = time_witness(target, args.checks, 1)
                what = (
                    f"a witness's check of a new checkpoint, {args.checks} checks up to"
                    f" {size:,} events"
                )
                print(percentiles_line(what, checks[CHECK], WITNESS_GOAL_MS))
                for part in (FETCH, KEEP, REST):
                    print(f"  {part}: {p50_p99(checks[part])}")
                print(f"  beside them, a bare call (GetServerInfo): {p50_p99(checks[BARE])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
