"""What `bergen archive` saves: bytes a match in PostgreSQL before and after, and in the archive.

    python -m bench archive      (or: python -m bench.archive_bench --matches 200)

One PostgreSQL database is made for the run from BERGEN_BENCH_DATABASE_URL and dropped
afterwards. It is loaded with --matches whole ended matches by the scale benchmark's loader
(real deals and plays, chained and authenticated under the log key the server is given),
then `bergen serve` folds its listing, ratings and transparency log and makes and keeps
every match's record; it is stopped, and `VACUUM ANALYZE` run. Measured then, a match at a
time (bytes divided by the matches): `events` (heap and TOAST), its indexes, and
`match_records` with its indexes. Then `bergen archive --older-than 0s` (timed, by the wall
clock, a process of its own), and the same sizes after a plain `VACUUM` (the space of the
rows removed is free for the next appends, the files keep their size) and after `VACUUM
FULL` of the two tables (the files rewritten: what they take now). The archive's bytes a
match are its files' sizes (the records and the manifest), and as one .tar.gz; `bergen
verify` of the folder (every record replayed) is timed too.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import psycopg

from bench import harness
from bench.harness import say
from bench.listing_bench import LOG_KEY_FILE, serving
from bench.scale_bench import head, kept_count, load, positions, vacuum
from bench.store_bench import bench_database
from bergen.server.keys import LogKeys

SIZES = (
    ("events heap", "pg_table_size('events')"),
    ("events indexes", "pg_indexes_size('events')"),
    ("match_records", "pg_total_relation_size('match_records')"),
)
WAIT_S = 300.0


def sizes(url: str) -> dict[str, int]:
    with psycopg.connect(url, autocommit=True) as conn:
        return {
            name: int(conn.execute(f"SELECT {expr}").fetchone()[0])  # type: ignore[index]
            for name, expr in SIZES
        }


def bergen(*args: str) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).with_name("bergen")
    return subprocess.run([str(script), *args], capture_output=True, text=True, timeout=3600)


def wait_folded(url: str, matches: int) -> None:
    deadline = time.monotonic() + WAIT_S
    last = head(url)
    while True:
        at = positions(url)
        if kept_count(url) >= matches and all(
            at.get(name) == last for name in ("match_list", "ratings", "tlog")
        ):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"not folded and recorded in {WAIT_S:.0f} s: {at}")
        time.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.archive_bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    harness.add_database_url(parser)
    parser.add_argument("--matches", type=int, default=harness.quick_or(200, 20))
    args = parser.parse_args(argv)
    n = args.matches
    with bench_database(args.database_url) as url, tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        key_file = folder / LOG_KEY_FILE
        LogKeys.load_or_create(key_file)
        os.environ["BERGEN_SIGNING_KEY"] = str(folder / "signing-key.pem")
        loaded = load(url, key_file, 0, n, 2)
        say(f"loaded {loaded.matches} matches, {loaded.events} events")
        with serving(url, folder, "server"):
            wait_folded(url, n)
        vacuum(url)
        before = sizes(url)
        out = folder / "archive"
        started = time.perf_counter()
        done = bergen("archive", "--database", url, "--older-than", "0s", "--to", str(out),
                      "--json")  # fmt: skip
        took = time.perf_counter() - started
        if done.returncode != 0:
            say(done.stderr)
            return 1
        archived = len(json.loads(done.stdout)["archived"])
        key = json.loads((out / "manifest.json").read_text())["public_key"]
        started = time.perf_counter()
        verified = bergen("verify", str(out), "--public-key", key)
        verify_s = time.perf_counter() - started
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE events")
            conn.execute("VACUUM ANALYZE match_records")
        after_vacuum = sizes(url)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM FULL events")
            conn.execute("VACUUM FULL match_records")
        after_full = sizes(url)
        files = [p for p in out.iterdir() if p.is_file()]
        archive_bytes = sum(p.stat().st_size for p in files)
        packed = io.BytesIO()
        with tarfile.open(fileobj=packed, mode="w:gz") as tar:
            tar.add(out, arcname="archive")
        packed_bytes = packed.tell()
    say(f"archived {archived} of {n} matches in {took:.2f} s ({archived / took:.0f} matches/s);"
        f" bergen verify of the folder {verify_s:.2f} s (exit {verified.returncode})")  # fmt: skip
    say(f"{'bytes a match':<18}{'before':>10}{'VACUUM':>10}{'VACUUM FULL':>13}")
    for name, _ in SIZES:
        say(f"{name:<18}{before[name] / n:>10,.0f}{after_vacuum[name] / n:>10,.0f}"
            f"{after_full[name] / n:>13,.0f}")  # fmt: skip
    total = [sum(s.values()) / n for s in (before, after_vacuum, after_full)]
    say(f"{'all three':<18}{total[0]:>10,.0f}{total[1]:>10,.0f}{total[2]:>13,.0f}")
    say(f"archive folder: {archive_bytes / n:,.0f} bytes a match ({len(files)} files);"
        f" as a .tar.gz {packed_bytes / n:,.0f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
