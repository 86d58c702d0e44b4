"""Run the benchmarks in turn: `python -m bench [names...]` (all by default), `--list`.

A benchmark is a module with `main() -> int`. Adding one is one line in BENCHMARKS. The exit
status (`harness.ExitStatus`) is nonzero only when a benchmark crashes (or its `main` returns
nonzero); a missed goal is printed as MISSED by the benchmark and is not a failure, and a
benchmark whose module or service is unavailable here is reported as SKIPPED. `--quick` runs
each with short defaults (BERGEN_BENCH_QUICK=1), a smoke test rather than figures.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from bench.harness import QUICK_ENV, ExitStatus, database_url


def _runs_anywhere() -> str | None:
    return None


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def postgres_reachable() -> str | None:
    """None when PostgreSQL at database_url() accepts a connection, else why not."""
    url = database_url()
    try:
        import psycopg
    except ImportError as e:
        return f"psycopg is not installed ({e})"
    # SQLAlchemy spells the driver into the scheme (postgresql+psycopg://); libpq does not.
    scheme, sep, rest = url.partition("://")
    libpq_url = scheme.split("+", 1)[0] + sep + rest
    try:
        with psycopg.connect(libpq_url, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as e:  # any failure to connect means: not reachable from here
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return f"PostgreSQL not reachable at {_without_password(url)}: {reason}"
    return None


@dataclass(frozen=True)
class Benchmark:
    name: str
    module: str
    about: str
    needs: Callable[[], str | None] = _runs_anywhere
    """Why the benchmark cannot run here, or None when it can."""
    optional: bool = False
    """An optional module that cannot be imported is skipped rather than a crash."""


BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark("domain", "bench.domain_bench", "rules engine vs the peer `dominoes` package"),
    Benchmark("store", "bench.store_bench", "event store on PostgreSQL", postgres_reachable, True),
    Benchmark("grpc", "bench.grpc_bench", "gRPC service on PostgreSQL", postgres_reachable, True),
    Benchmark(
        "archive",
        "bench.archive_bench",
        "bytes a match before and after bergen archive, 200 matches",
        postgres_reachable,
        True,
    ),
    Benchmark(
        "listing",
        "bench.listing_bench",
        "ListMatches and restarts, 20,000 matches vs 20",
        postgres_reachable,
        True,
    ),
    Benchmark("openhands", "bench.openhands_bench", "the open-hands par of whole hands, p50/p99"),
    Benchmark(
        "analysis", "bench.analysis_bench", "a whole match analysed; the win model's calibration"
    ),
    Benchmark("bots", "bench.bots_bench", "Monte Carlo vs greedy vs random bots, win rates"),
    Benchmark(
        "strength",
        "bench.strength_bench",
        "round robin of the four bots at equal time per decision, win rates",
    ),
    Benchmark(
        "abuse",
        "bench.abuse_bench",
        "Play p99, 8 honest clients, with and without 4 abusers",
        postgres_reachable,
        True,
    ),
    Benchmark(
        "clocks",
        "bench.clocks_bench",
        "timeout delay on 2 replicas, idle CPU, Play/s with clocks",
        postgres_reachable,
        True,
    ),
    Benchmark(
        "tournament",
        "bench.tournament_bench",
        "Swiss pairing, standings, a Swiss by bots",
        postgres_reachable,
        True,
    ),
    Benchmark(
        "ratings",
        "bench.ratings_bench",
        "ratings rebuilt vs openskill, leaderboard pages, end to new rating",
        postgres_reachable,
        True,
    ),
    Benchmark(
        "tlog",
        "bench.tlog_bench",
        "Play/s with the transparency log vs without; proofs at 10 million events",
        postgres_reachable,
        True,
    ),
    Benchmark(
        "web",
        "bench.web_bench",
        "500 SSE spectators, then 200 players, through bergen web",
        postgres_reachable,
        True,
    ),
    Benchmark(
        "scale",
        "bench.scale_bench",
        "the server's figures at 10^3, 10^4 and 10^5 stored matches, a loader's rate",
        postgres_reachable,
        True,
    ),
    Benchmark(
        "partition",
        "bench.partition_bench",
        "one events table vs 12 partitions by position at 10^5 matches: reads, appends, archival",
        postgres_reachable,
        True,
    ),
    Benchmark(
        "live",
        "bench.live_bench",
        "10,000 live matches watched, clocks running: memory, CPU at rest, Play p99",
        postgres_reachable,
        True,
    ),
)


@dataclass
class Outcome:
    name: str
    status: str  # ok, SKIPPED, CRASHED
    detail: str
    seconds: float


def _print_traceback() -> None:
    sys.stdout.flush()  # so the traceback lands after what the benchmark printed
    traceback.print_exc()


def _call_main(name: str, main: Callable[[], object]) -> int:
    # A module that parses its own arguments must not see ours.
    saved = sys.argv
    sys.argv = [f"python -m bench {name}"]
    try:
        code = main()
    except SystemExit as e:
        code = e.code
    finally:
        sys.argv = saved
    if code is None:
        return ExitStatus.OK
    return code if isinstance(code, int) else ExitStatus.CRASHED


def run(bench: Benchmark) -> Outcome:
    """Import and run one benchmark, reporting a skip or a crash instead of raising."""
    start = time.perf_counter()

    def outcome(status: str, detail: str) -> Outcome:
        return Outcome(bench.name, status, detail, time.perf_counter() - start)

    print(f"\n=== {bench.name}: {bench.about} ===", flush=True)
    try:
        module = importlib.import_module(bench.module)
    except ImportError as e:
        if bench.optional:
            print(f"SKIPPED: {bench.module} cannot be imported ({e})")
            return outcome("SKIPPED", f"not importable: {e}")
        _print_traceback()
        return outcome("CRASHED", f"import failed: {e}")
    except Exception as e:
        _print_traceback()
        return outcome("CRASHED", f"import failed: {type(e).__name__}: {e}")
    reason = bench.needs()
    if reason is not None:
        print(f"SKIPPED: {reason}")
        return outcome("SKIPPED", reason)
    main = getattr(module, "main", None)
    if not callable(main):
        return outcome("CRASHED", f"{bench.module} has no main()")
    try:
        code = _call_main(bench.name, main)
    except Exception as e:
        _print_traceback()
        return outcome("CRASHED", f"{type(e).__name__}: {e}")
    sys.stdout.flush()
    if code != 0:
        return outcome("CRASHED", f"main() returned {code}")
    return outcome("ok", "")


def main(argv: Sequence[str] | None = None) -> int:
    names = [b.name for b in BENCHMARKS]
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Run the Bergen benchmarks (all, or those named) and print their figures.",
    )
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"any of: {', '.join(names)}")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"short runs with small defaults, a smoke test, not figures (${QUICK_ENV}=1)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        os.environ[QUICK_ENV] = "1"
    if args.list:
        for b in BENCHMARKS:
            print(f"{b.name:10} {b.about}")
        return ExitStatus.OK
    unknown = [n for n in args.names if n not in names]
    if unknown:
        parser.print_usage(sys.stderr)
        print(
            f"python -m bench: unknown benchmark(s) {', '.join(unknown)}; "
            f"choose from {', '.join(names)}",
            file=sys.stderr,
        )
        return ExitStatus.USAGE
    wanted = dict.fromkeys(args.names) or dict.fromkeys(names)
    by_name = {b.name: b for b in BENCHMARKS}
    outcomes = [run(by_name[n]) for n in wanted]

    print("\n=== summary ===")
    for o in outcomes:
        detail = f"  {o.detail}" if o.detail else ""
        print(f"{o.name:10} {o.status:8} {o.seconds:6.1f} s{detail}")
    crashed = [o.name for o in outcomes if o.status == "CRASHED"]
    if crashed:
        print(f"crashed: {', '.join(crashed)}")
        return ExitStatus.CRASHED
    return ExitStatus.OK


if __name__ == "__main__":
    sys.exit(main())
