"""`bergen serve` on a store it cannot write refuses to start: exit status 7 and one line
saying which database and why, with no traceback (it used to start, report SERVING and fail
every write; on a read-only filesystem it died with a traceback)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from e2e.servers import bergen_command
from psycopg import sql

from bergen.api.exit_status import ExitStatus

pytestmark = pytest.mark.timeout(120)

SERVE_TIMEOUT_S = 60.0
ROOT = os.geteuid() == 0


def run_serve(database: str, workdir: Path) -> tuple[int, str]:
    """Run `bergen serve` on `database` from `workdir` until it exits. Returns its exit status
    and its output. Fails the test when it is still running after SERVE_TIMEOUT_S (it started
    serving)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERGEN_")}
    env["BERGEN_LOG_LEVEL"] = "INFO"
    args = [*bergen_command(), "serve", "--listen", "127.0.0.1:0", "--database", database]
    args.append("--no-organiser")
    proc = subprocess.Popen(
        args, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        out, _ = proc.communicate(timeout=SERVE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"bergen serve started on a store it cannot write:\n{out.decode()[-2000:]}")
    return proc.returncode, out.decode("utf-8", errors="replace")


@contextmanager
def read_only_mount(path: Path) -> Iterator[None]:
    """`path` (a file or a directory) bound read-only onto itself for the block. Skips where
    the tests may not mount (only root with CAP_SYS_ADMIN may)."""
    mount = shutil.which("mount")
    if not ROOT or mount is None:
        pytest.skip("mounting a read-only filesystem needs root")
    bound = subprocess.run([mount, "--bind", str(path), str(path)], capture_output=True)
    if bound.returncode != 0:
        pytest.skip(f"cannot mount here: {bound.stderr.decode().strip()}")
    try:
        subprocess.run([mount, "-o", "remount,ro,bind", str(path)], check=True, capture_output=True)
        yield
    finally:
        subprocess.run(["umount", str(path)], check=True)


def migrated(path: Path) -> str:
    url = f"sqlite:///{path}"
    subprocess.run(
        [*bergen_command(), "migrate", "--database", url], check=True, capture_output=True
    )
    return url


def assert_refused(code: int, output: str, database: str) -> None:
    assert code == ExitStatus.NOT_READY, output
    assert "Traceback" not in output, output
    refusal = [line for line in output.splitlines() if line.startswith("bergen serve:")]
    assert len(refusal) == 1, output
    assert database in refusal[0] and "cannot be written" in refusal[0], refusal[0]
    assert "SERVING" not in output and "serving bergen.v1" not in output, output


def test_a_read_only_sqlite_file_is_refused_at_start(tmp_path: Path) -> None:
    db = tmp_path / "bergen.db"
    database = migrated(db)
    db.chmod(0o444)
    if ROOT:
        # root writes whatever the mode says: the file is mounted read-only instead.
        with read_only_mount(db):
            code, output = run_serve(database, tmp_path)
    else:
        code, output = run_serve(database, tmp_path)
    assert_refused(code, output, database)


def test_a_sqlite_file_on_a_read_only_filesystem_is_refused_at_start(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    database = migrated(store / "bergen.db")
    with read_only_mount(store):
        code, output = run_serve(database, tmp_path)
    assert_refused(code, output, database)


@pytest.mark.postgres
def test_a_read_only_postgresql_database_is_refused_at_start(
    pg_database: str, tmp_path: Path
) -> None:
    name = psycopg.conninfo.conninfo_to_dict(pg_database)["dbname"]
    assert isinstance(name, str)
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute(
            sql.SQL("ALTER DATABASE {} SET default_transaction_read_only = on").format(
                sql.Identifier(name)
            )
        )
    code, output = run_serve(pg_database, tmp_path)
    assert_refused(code, output, pg_database)
