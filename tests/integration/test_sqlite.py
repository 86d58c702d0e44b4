"""What only the embedded SQLite store has to get right: many processes sharing one file."""

from __future__ import annotations

from pathlib import Path

from helpers import start_worker

from bergen.server.store import open_store, upgrade_to_head


def test_processes_first_opening_a_fresh_file_at_once_all_get_an_answer(tmp_path: Path) -> None:
    # The first connection of each process switches the file to WAL; when several do so at the
    # same moment SQLite can refuse at once with "database is locked". No append may fail that way.
    # The same processes go from file to file: a store opens its connection on first use.
    workers_n, files = 6, 8
    urls = [f"sqlite:///{tmp_path / f'fresh-{f}.db'}" for f in range(files)]
    for url in urls:
        upgrade_to_head(url)
    workers = [start_worker(urls[0], "race", "s") for _ in range(workers_n)]

    def tell_all(line: str) -> list[str]:
        for w in workers:
            assert w.stdin is not None
            w.stdin.write(f"{line}\n")
            w.stdin.flush()
        return [w.stdout.readline().strip() for w in workers if w.stdout]

    try:
        for w in workers:
            assert w.stdout is not None and w.stdout.readline().strip() == "ready"
        for f, url in enumerate(urls):
            if f:
                assert tell_all(f"open {url}") == ["ready"] * workers_n
            answers = sorted(tell_all("append 0"))
            assert answers == ["lost"] * (workers_n - 1) + ["won"], f"file {f}: {answers}"
            store = open_store(url)
            try:
                assert store.stream_version("s") == 1
            finally:
                store.close()
    finally:
        for w in workers:
            if w.stdin is not None:
                w.stdin.close()
            w.wait(timeout=30)
    assert [w.returncode for w in workers] == [0] * workers_n
