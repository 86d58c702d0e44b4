"""The transparency log: what it costs Play, and how fast its proofs are at 10 million events.

- **play**: `bergen serve` on a fresh PostgreSQL database, `--clients` clients playing two-seat
  matches for `--seconds` (grpc_bench's clients), with the transparency log (the default:
  checkpoints every 2 s and at every match end, the tree folded beside the listing) and
  with `--no-transparency-log`, in turns, `--rounds` rounds. Goal: Play/s with the log over
  Play/s without it >= 0.95 (the median round's of each).
- **proofs**: a tree of `--events` leaves (10 million) written straight into the tree's
  tables of a fresh database by SQL (each leaf SHA-256(0x00 || index), each node
  SHA-256(0x01 || left || right), level by level), then `--calls` inclusion proofs of random
  leaves and consistency proofs between random sizes, as the server makes them (one read of
  the stored nodes each: `bergen.domain.merkle` over `SqlTlog`), each checked against the
  root computed from the stored nodes. Goal: p99 < 5 ms for each.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

import psycopg

from bench import harness
from bench.grpc_bench import (
    OURS,
    bergen_command,
    launch_server,
    measure_rate,
    stop_server,
    wait_for_port,
)
from bench.store_bench import bench_database
from bergen.domain.merkle import (
    Frontier,
    consistency_proof,
    inclusion_proof,
    verify_consistency,
    verify_inclusion,
)
from bergen.server.store import open_store

WITH, WITHOUT = "with the log", "without"


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


BUILD_CHUNK = 200_000
"""Rows a transaction writes while the tree is built: a long transaction would hold back
every reader of the commit-safe global order in the whole cluster."""


def build_tree(url: str, events: int) -> None:
    """Leaves 0..events-1 and every complete node above them, by SQL, level by level, a
    chunk of BUILD_CHUNK rows a transaction."""
    with psycopg.connect(url, autocommit=True) as conn:
        for start in range(0, events, BUILD_CHUNK):
            conn.execute(
                "INSERT INTO tlog_leaves (idx, position, stream_id, seq, hash)"
                " SELECT i, i + 1, 'bench-' || (i / 100), i %% 100 + 1,"
                " sha256('\\x00'::bytea || int8send(i))"
                " FROM generate_series(%s::bigint, %s::bigint) AS i",
                (start, min(events, start + BUILD_CHUNK) - 1),
            )
        level, width = 0, events
        while width >= 2:
            below = (
                "tlog_leaves a JOIN tlog_leaves b ON b.idx = a.idx + 1 WHERE"
                if level == 0
                else "tlog_nodes a JOIN tlog_nodes b ON b.level = a.level AND b.idx = a.idx + 1"
                f" WHERE a.level = {level} AND"
            )
            for start in range(0, width, 2 * BUILD_CHUNK):
                conn.execute(
                    "INSERT INTO tlog_nodes (level, idx, hash)"
                    f" SELECT {level + 1}, a.idx / 2, sha256('\\x01'::bytea || a.hash || b.hash)"
                    f" FROM {below} a.idx %% 2 = 0 AND a.idx >= %s AND a.idx < %s",
                    (start, start + 2 * BUILD_CHUNK),
                )
            level, width = level + 1, width // 2
        conn.execute("ANALYZE tlog_leaves")
        conn.execute("ANALYZE tlog_nodes")


def time_proofs(url: str, events: int, calls: int, seed: int) -> tuple[list[float], list[float]]:
    """Milliseconds per inclusion proof and per consistency proof, each checked."""
    store = open_store(url)
    try:
        tree = store.tlog()
        rng = random.Random(seed)
        roots: dict[int, bytes] = {}

        def root_of(size: int) -> bytes:
            if size not in roots:
                roots[size] = Frontier.read(tree, size).root()
            return roots[size]

        sizes = [events, *(rng.randrange(events // 2, events) for _ in range(7))]
        for size in sizes:
            root_of(size)
        inclusion, consistency = [], []
        for _ in range(calls):
            size = rng.choice(sizes)
            index = rng.randrange(size)
            start = time.perf_counter()
            proof = inclusion_proof(tree, index, size)
            inclusion.append((time.perf_counter() - start) * 1000)
            leaf = tree.nodes([(0, index)])[(0, index)]
            verify_inclusion(index, size, leaf, proof, root_of(size))
            old, new = sorted(rng.sample(sizes, 2)) if len(set(sizes)) > 1 else (1, events)
            old = rng.randrange(1, new) if old == new else old
            start = time.perf_counter()
            proof = consistency_proof(tree, old, new)
            consistency.append((time.perf_counter() - start) * 1000)
            verify_consistency(old, new, root_of(old), root_of(new), proof)
        return inclusion, consistency
    finally:
        store.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.tlog_bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    harness.add_database_url(parser)
    quick_or = harness.quick_or
    parser.add_argument("--parts", nargs="+", default=["play", "proofs"])
    parser.add_argument("--clients", type=int, default=quick_or(8, 2))
    parser.add_argument("--seconds", type=float, default=quick_or(20.0, 2.0))
    parser.add_argument("--rounds", type=int, default=quick_or(3, 1))
    parser.add_argument("--events", type=int, default=quick_or(10_000_000, 100_000))
    parser.add_argument("--calls", type=int, default=quick_or(2000, 200))
    args = parser.parse_args(argv)
    if "play" in args.parts:
        rates: dict[str, list[float]] = {WITH: [], WITHOUT: []}
        for r in range(args.rounds):
            for which in harness.rotated([WITH, WITHOUT], r):
                rate = play_rate(args.database_url, which == WITH, args.clients, args.seconds, r)
                rates[which].append(rate)
                harness.say(f"round {r + 1}, {which}: {rate:,.0f} Play/s")
        with_, without = harness.median(rates[WITH]), harness.median(rates[WITHOUT])
        ratio = with_ / without
        print(
            f"Play/s, {args.clients} clients: with the log {with_:,.0f}"
            f" ({harness.spread(rates[WITH])}), without {without:,.0f}"
            f" ({harness.spread(rates[WITHOUT])}); ratio {ratio:.3f}, goal >= 0.95:"
            f" {harness.verdict(ratio >= 0.95)}"
        )
    if "proofs" in args.parts:
        with bench_database(args.database_url) as url:
            start = time.perf_counter()
            build_tree(url, args.events)
            harness.say(
                f"tree of {args.events:,} leaves built in {time.perf_counter() - start:.0f} s"
            )
            inclusion, consistency = time_proofs(url, args.events, args.calls, 1)
        for name, times in (("inclusion", inclusion), ("consistency", consistency)):
            p50, p99 = harness.percentile(times, 50), harness.percentile(times, 99)
            print(
                f"{name} proofs at {args.events:,} events, {args.calls} calls: p50 {p50:.2f} ms,"
                f" p99 {p99:.2f} ms, goal p99 < 5 ms: {harness.verdict(p99 < 5)}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
