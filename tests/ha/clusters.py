"""A PostgreSQL 15 primary and its hot standby made on this machine for one test.

The pair is two clusters of Debian's postgresql-common, made as root for the postgres user:
`pg_createcluster` for the primary, `pg_basebackup -R` for the standby (streaming replication,
hot standby). Both listen on 127.0.0.1 only with trust authentication, replication allowed.
Leftovers of the same names (a run killed before its teardown) are dropped first; the
teardown is `pg_dropcluster --stop`. Only these two clusters are ever stopped, promoted or
reconfigured: the cluster every other test uses is left alone.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

VERSION = "15"
PRIMARY = "bergen_ha_primary"
STANDBY = "bergen_ha_standby"
PRIMARY_PORT = 5441
STANDBY_PORT = 5442
DATABASE = "bergen"
_HBA = (
    "local all all trust\n"
    "local replication all trust\n"
    "host all all 127.0.0.1/32 trust\n"
    "host replication all 127.0.0.1/32 trust\n"
)
_SETTINGS = """\
listen_addresses = '127.0.0.1'
wal_level = replica
max_wal_senders = 8
wal_keep_size = '512MB'
hot_standby = on
hot_standby_feedback = on
shared_buffers = '64MB'
max_connections = 200
# The clusters live as long as a test: a crash of this machine loses nothing of value,
# and fsync would make the shared disk the bottleneck of every figure.
fsync = off
full_page_writes = off
"""


LOCK = Path(tempfile.gettempdir()) / "bergen-ha-clusters.lock"
"""Held while a pair lives: the names and ports are the machine's, so another test run on
this machine (another clone, another worker) waits for the pair to be dropped."""


@contextmanager
def held() -> Iterator[None]:
    """The clusters' names and ports, to this process until the block ends."""
    with LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


class ClustersUnavailable(Exception):
    """The machine cannot make clusters (no postgresql-common, not root): the reason."""


def why_not() -> str | None:
    """Why clusters cannot be made here, None when they can."""
    if shutil.which("pg_createcluster") is None:
        return "pg_createcluster (postgresql-common) is not installed"
    if not Path(f"/usr/lib/postgresql/{VERSION}/bin/pg_basebackup").exists():
        return f"PostgreSQL {VERSION} server binaries are not installed"
    if os.geteuid() != 0:
        return "making PostgreSQL clusters needs root (to act as the postgres user)"
    return None


def _run(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise ClustersUnavailable(
            f"{' '.join(args)} exited with {done.returncode}: {done.stderr.strip()[-2000:]}"
        )
    return done


def _as_postgres(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return _run("runuser", "-u", "postgres", "--", *args, check=check)


def _exists(name: str) -> bool:
    return Path(f"/etc/postgresql/{VERSION}/{name}").exists()


def drop(name: str) -> None:
    """Stop and remove the cluster `name` if it exists."""
    if _exists(name) or Path(f"/var/lib/postgresql/{VERSION}/{name}").exists():
        _run("pg_dropcluster", "--stop", VERSION, name, check=False)
        shutil.rmtree(f"/var/lib/postgresql/{VERSION}/{name}", ignore_errors=True)
        shutil.rmtree(f"/etc/postgresql/{VERSION}/{name}", ignore_errors=True)


def _configure(name: str) -> None:
    conf = Path(f"/etc/postgresql/{VERSION}/{name}")
    (conf / "pg_hba.conf").write_text(_HBA)
    (conf / "conf.d").mkdir(exist_ok=True)
    (conf / "conf.d" / "bergen-ha.conf").write_text(_SETTINGS)


def url(port: int, database: str = DATABASE) -> str:
    return f"postgresql://postgres@127.0.0.1:{port}/{database}"


def _wait_ready(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with psycopg.connect(url(port, "postgres"), connect_timeout=2):
                return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@dataclass
class ClusterPair:
    """The primary on PRIMARY_PORT streaming to the standby on STANDBY_PORT."""

    primary_port: int = PRIMARY_PORT
    standby_port: int = STANDBY_PORT
    synchronous: bool = False
    log: list[str] = field(default_factory=list)

    @property
    def primary_url(self) -> str:
        return url(self.primary_port)

    @property
    def standby_url(self) -> str:
        return url(self.standby_port)

    @property
    def multi_host_url(self) -> str:
        """Both hosts: libpq connects to whichever takes writes."""
        return (
            f"postgresql://postgres@127.0.0.1:{self.primary_port},127.0.0.1:{self.standby_port}"
            f"/{DATABASE}?target_session_attrs=read-write&connect_timeout=3"
        )

    def make(self) -> None:
        """Make both clusters and the database `bergen` (empty). Raises
        subprocess.CalledProcessError naming the step that failed."""
        drop(STANDBY)
        drop(PRIMARY)
        _run(
            "pg_createcluster", VERSION, PRIMARY, "-p", str(self.primary_port),
            "--start-conf=manual", "--", "--auth=trust",
        )  # fmt: skip
        _configure(PRIMARY)
        _run("pg_ctlcluster", VERSION, PRIMARY, "start")
        _wait_ready(self.primary_port)
        with psycopg.connect(url(self.primary_port, "postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {DATABASE}")
        # The standby: a cluster of its own (its configuration), its data a base backup.
        _run(
            "pg_createcluster", VERSION, STANDBY, "-p", str(self.standby_port),
            "--start-conf=manual", "--", "--auth=trust",
        )  # fmt: skip
        _configure(STANDBY)
        data = Path(f"/var/lib/postgresql/{VERSION}/{STANDBY}")
        for child in data.iterdir():  # empty, keeping the directory the postgres user owns
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
        _as_postgres(
            f"/usr/lib/postgresql/{VERSION}/bin/pg_basebackup",
            "-h", "127.0.0.1", "-p", str(self.primary_port), "-U", "postgres",
            "-D", str(data), "-R", "-X", "stream", "-c", "fast",
        )  # fmt: skip
        # -R wrote primary_conninfo; name the standby so that the primary can wait for it.
        with open(data / "postgresql.auto.conf", "a", encoding="utf-8") as f:
            f.write(
                f"primary_conninfo = 'host=127.0.0.1 port={self.primary_port} user=postgres"
                f" application_name={STANDBY}'\n"
            )
        _run("pg_ctlcluster", VERSION, STANDBY, "start")
        _wait_ready(self.standby_port)
        self.wait_streaming()
        if self.synchronous:
            # A commit is acknowledged once the standby has it on disk: a failover loses
            # nothing a client was told is written.
            self.primary_sql(f"ALTER SYSTEM SET synchronous_standby_names = '{STANDBY}'")
            self.primary_sql("SELECT pg_reload_conf()")

    def wait_streaming(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            rows = self.primary_sql("SELECT state FROM pg_stat_replication")
            if rows and rows[0][0] == "streaming":
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the standby is not streaming: {rows}")
            time.sleep(0.1)

    def wait_replayed(self, timeout: float = 120.0) -> None:
        """Wait until the standby has replayed everything the primary has written so far."""
        target = self.primary_sql("SELECT pg_current_wal_lsn()")[0][0]
        deadline = time.monotonic() + timeout
        while True:
            done = self.standby_sql(f"SELECT pg_last_wal_replay_lsn() >= '{target}'::pg_lsn")[0][0]
            if done:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the standby has not replayed up to {target}")
            time.sleep(0.02)

    def primary_sql(self, sql: str) -> list[tuple[object, ...]]:
        return _sql(self.primary_port, sql)

    def standby_sql(self, sql: str) -> list[tuple[object, ...]]:
        return _sql(self.standby_port, sql)

    def stop_primary(self) -> None:
        """Stop the primary at once, as a crash would (no shutdown checkpoint)."""
        _run("pg_ctlcluster", VERSION, PRIMARY, "stop", "-m", "immediate")

    def stop_standby(self) -> None:
        _run("pg_ctlcluster", VERSION, STANDBY, "stop", "-m", "fast")

    def promote_standby(self) -> None:
        """Promote the standby; returns once it takes writes."""
        _run("pg_ctlcluster", VERSION, STANDBY, "promote")
        deadline = time.monotonic() + 60
        while self.standby_sql("SELECT pg_is_in_recovery()")[0][0]:
            if time.monotonic() > deadline:
                raise AssertionError("the standby did not leave recovery")
            time.sleep(0.02)

    def drop(self) -> None:
        drop(STANDBY)
        drop(PRIMARY)


def _sql(port: int, sql: str) -> list[tuple[object, ...]]:
    with psycopg.connect(url(port), autocommit=True, connect_timeout=5) as conn:
        cur = conn.execute(sql)
        return cur.fetchall() if cur.description is not None else []
