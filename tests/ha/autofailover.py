"""A pg_auto_failover formation made on this machine for one test: a monitor and two data
nodes, each a `pg_autoctl` process of its own with its PostgreSQL 15 below it.

Everything lives in a folder of its own under the temporary directory (data directories,
pg_autoctl's configuration and state through the XDG variables, logs), owned by the postgres
user, as whom every pg_autoctl runs (PostgreSQL refuses root). Each node listens on 127.0.0.1
only, with trust authentication and no TLS. A node's processes (pg_autoctl, its services, the
postmaster and its backends) share one process group, so that killing the group is the loss
of the machine. Leftovers of a run killed before its teardown (folders of the same prefix) are
stopped and dropped first; only processes whose group this module recorded are ever signalled.
"""

from __future__ import annotations

import fcntl
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg

VERSION = "15"
BIN = Path(f"/usr/lib/postgresql/{VERSION}/bin")
EXTENSION = Path(f"/usr/lib/postgresql/{VERSION}/lib/pgautofailover.so")
MONITOR_PORT = 5451
NODE_PORTS = (5452, 5453)
DATABASE = "bergen"
PREFIX = "bergen-autofailover-"
FORMATION = "default"

MONITOR_SETTINGS = {
    # How the monitor decides that a primary is lost: it connects to every node each
    # second (1 s to answer, one retry half a second later), and a node is unhealthy once
    # those checks fail and its pg_autoctl has not reported for 3 s (it reports every
    # second). With the defaults (5 s, 5 s, 2 retries 2 s apart, 20 s) the loss is noticed
    # after about 20 s.
    "pgautofailover.health_check_period": "1000",
    "pgautofailover.health_check_timeout": "1000",
    "pgautofailover.health_check_max_retries": "1",
    "pgautofailover.health_check_retry_delay": "500",
    "pgautofailover.node_considered_unhealthy_timeout": "3000",
    # How long the standby waits for a lost primary to have stopped taking writes before it
    # takes writes (30 s by default): above the keepers' network_partition_timeout below, so
    # that a primary cut off from the monitor and its standby has demoted itself first.
    "pgautofailover.primary_demote_timeout": "3000",
}
KEEPER_SETTINGS = {
    # A primary that reaches neither the monitor nor a standby for this long (20 s by
    # default) demotes itself: it must do so before the monitor promotes the standby.
    "timeout.network_partition_timeout": "2",
}
LOCK = Path(tempfile.gettempdir()) / "bergen-autofailover.lock"
"""Held while a formation lives: its ports are the machine's, so another test run on this
machine (another clone, another worker) waits for the formation to be dropped."""


@contextmanager
def held() -> Iterator[None]:
    """The formation's ports, to this process until the block ends."""
    with LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


class FormationFailed(Exception):
    """A step of making or running the formation failed: which, and what pg_autoctl said."""


def why_not() -> str | None:
    """Why a formation cannot be made here, None when it can."""
    if shutil.which("pg_autoctl") is None:
        return "pg_autoctl (pg_auto_failover) is not installed: run .ci/autofailover"
    if not EXTENSION.exists():
        return f"the monitor's extension is missing ({EXTENSION}): run .ci/autofailover"
    if not (BIN / "pg_ctl").exists():
        return f"PostgreSQL {VERSION} server binaries are not installed"
    if os.geteuid() != 0:
        return "running pg_autoctl as the postgres user needs root"
    return None


def url(port: int, database: str = DATABASE) -> str:
    return f"postgresql://postgres@127.0.0.1:{port}/{database}"


def sql(port: int, statement: str, database: str = DATABASE) -> list[tuple[object, ...]]:
    """Run `statement` on the node at `port`. Raises psycopg.Error."""
    with psycopg.connect(url(port, database), autocommit=True, connect_timeout=3) as conn:
        cur = conn.execute(statement)
        return cur.fetchall() if cur.description is not None else []


@dataclass
class Service:
    """One `pg_autoctl` process, the leader of its own process group."""

    name: str
    pgdata: Path
    port: int
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def postmaster_pid(self) -> int | None:
        try:
            return int((self.pgdata / "postmaster.pid").read_text().split("\n", 1)[0])
        except (FileNotFoundError, ValueError):
            return None


@dataclass
class Formation:
    """The monitor on MONITOR_PORT and two nodes on NODE_PORTS, in a folder of `root`."""

    root: Path = field(default_factory=lambda: Path(tempfile.gettempdir()))
    home: Path = field(init=False)
    monitor: Service = field(init=False)
    nodes: tuple[Service, Service] = field(init=False)
    lost: set[str] = field(default_factory=set)
    """The names of the nodes killed."""
    semaphores: set[int] = field(default_factory=set)
    """The postgres user's System V semaphores before the formation was made."""

    def __post_init__(self) -> None:
        self.home = Path(tempfile.mkdtemp(prefix=PREFIX, dir=self.root))
        self.monitor = self._service("monitor", MONITOR_PORT)
        first, second = (self._service(f"node{i + 1}", p) for i, p in enumerate(NODE_PORTS))
        self.nodes = (first, second)

    def _service(self, name: str, port: int) -> Service:
        return Service(name, self.home / name, port, self.home / f"{name}.log")

    @property
    def monitor_uri(self) -> str:
        return f"postgres://autoctl_node@127.0.0.1:{MONITOR_PORT}/pg_auto_failover?sslmode=prefer"

    def _env(self) -> dict[str, str]:
        # pg_autoctl keeps its configuration, state and pid files under these: in the
        # formation's folder, not the postgres user's home.
        return {
            "PATH": f"{BIN}:/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home / "config"),
            "XDG_DATA_HOME": str(self.home / "data"),
            "XDG_RUNTIME_DIR": str(self.home / "run"),
        }

    def autoctl(self, *args: str, timeout: float = 120) -> str:
        """Run `pg_autoctl args` as postgres to its end; returns what it printed. Raises
        FormationFailed if it exits non-zero."""
        done = subprocess.run(
            ["pg_autoctl", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self._env(),
            cwd=self.home,
            user="postgres",
            group="postgres",
            extra_groups=[],
        )
        if done.returncode != 0:
            raise FormationFailed(
                f"pg_autoctl {' '.join(args)} exited with {done.returncode}:\n"
                f"{done.stderr.strip()[-3000:]}"
            )
        return done.stdout

    def _spawn(self, service: Service, *args: str) -> None:
        with open(service.log_path, "ab") as log:
            service.proc = subprocess.Popen(
                ["pg_autoctl", *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self._env(),
                cwd=self.home,
                user="postgres",
                group="postgres",
                extra_groups=[],
                start_new_session=True,  # its own process group: the node's "machine"
            )
        (self.home / f"{service.name}.pgid").write_text(str(service.proc.pid))

    def make(self) -> None:
        """Make the monitor, tune it, and the two nodes; returns once the first is primary
        and the second a secondary in sync with it. Raises FormationFailed (with the logs)."""
        owner = pwd.getpwnam("postgres")
        os.chown(self.home, owner.pw_uid, owner.pw_gid)
        self.semaphores = _semaphores(owner.pw_uid)
        pgctl = str(BIN / "pg_ctl")
        m = self.monitor
        self.autoctl(
            "create", "monitor", "--pgdata", str(m.pgdata), "--pgport", str(m.port),
            "--hostname", "127.0.0.1", "--auth", "trust", "--no-ssl", "--pgctl", pgctl,
        )  # fmt: skip
        # pg_autoctl makes the monitor listen on every address: this one only.
        self.autoctl(
            "config", "set", "--pgdata", str(m.pgdata),
            "postgresql.listen_addresses", "127.0.0.1",
        )  # fmt: skip
        self._spawn(m, "run", "--pgdata", str(m.pgdata))
        self._until(lambda: _answers(m.port, "pg_auto_failover"), "the monitor answers", 60)
        for name, value in MONITOR_SETTINGS.items():
            sql(m.port, f"ALTER SYSTEM SET {name} = {value}", "pg_auto_failover")
        sql(m.port, "SELECT pg_reload_conf()", "pg_auto_failover")
        first, second = self.nodes
        self._create_node(first)
        self._until(lambda: self.states() == {first.name: ("single", "single")}, "node1 runs")
        # Written before the second node exists: its base backup copies them.
        sql(first.port, "ALTER SYSTEM SET fsync = off")
        sql(first.port, "ALTER SYSTEM SET full_page_writes = off")
        sql(first.port, "SELECT pg_reload_conf()")
        self._create_node(second)

        def in_sync() -> bool:
            states = self.states()
            if states.get(second.name, ("", ""))[0] in ("wait_standby", "catchingup"):
                # pg_autoctl's base backup waits for the next checkpoint (five minutes away
                # by default): bring it forward.
                sql(first.port, "CHECKPOINT")
            return states == {first.name: ("primary", "primary"), second.name: ("secondary",) * 2}

        self._until(in_sync, "node1 primary and node2 its secondary", 120)
        self._until(
            lambda: bool(
                sql(
                    first.port,
                    "SELECT 1 FROM pg_stat_replication WHERE state = 'streaming'"
                    " AND sync_state IN ('sync', 'quorum')",
                )
            ),
            "node2 streams synchronously from node1",
            60,
        )
        for node in self.nodes:
            # pg_autoctl's own settings: `config set` writes its file and has the running
            # pg_autoctl read it again.
            for name, value in KEEPER_SETTINGS.items():
                self.autoctl("config", "set", "--pgdata", str(node.pgdata), name, value)

    def _create_node(self, node: Service) -> None:
        self._spawn(
            node,
            "create", "postgres", "--pgdata", str(node.pgdata), "--pgport", str(node.port),
            "--hostname", "127.0.0.1", "--listen", "127.0.0.1", "--auth", "trust", "--no-ssl",
            "--pgctl", str(BIN / "pg_ctl"), "--monitor", self.monitor_uri,
            "--dbname", DATABASE, "--name", node.name, "--run",
        )  # fmt: skip

    def states(self) -> dict[str, tuple[str, str]]:
        """Each node's (reported, assigned) state, as the monitor holds them."""
        rows = sql(
            MONITOR_PORT,
            "SELECT nodename, reportedstate, goalstate FROM pgautofailover.node"
            f" WHERE formationid = '{FORMATION}'",
            "pg_auto_failover",
        )
        return {str(r[0]): (str(r[1]), str(r[2])) for r in rows}

    def show_state(self) -> str:
        """`pg_autoctl show state`, or why it could not be had."""
        try:
            return self.autoctl("show", "state", "--pgdata", str(self.monitor.pgdata), timeout=30)
        except (FormationFailed, subprocess.TimeoutExpired) as e:
            return str(e)

    def uri(self) -> str:
        """The formation's URL as the monitor gives it (every node, read-write), with the user
        the servers connect as and a connect timeout."""
        given = self.autoctl(
            "show", "uri", "--pgdata", str(self.monitor.pgdata), "--formation", FORMATION
        ).strip()
        parts = urlsplit(given)
        query = dict(parse_qsl(parts.query))
        query.setdefault("connect_timeout", "3")
        return urlunsplit(
            ("postgresql", f"postgres@{parts.netloc}", parts.path, urlencode(query), "")
        )

    def primary(self) -> Service | None:
        """The node the monitor has as primary (or promoting), None while there is none."""
        states = self.states()
        for node in self.nodes:
            if states.get(node.name, ("", ""))[1] in ("primary", "wait_primary", "single"):
                return node
        return None

    def writable(self, node: Service) -> bool:
        """Whether `node` takes writes now, as libpq's target_session_attrs=read-write sees it
        (pg_autoctl promotes a standby read-only until the old primary's demote timeout)."""
        try:
            return sql(node.port, "SHOW transaction_read_only")[0][0] == "off"
        except psycopg.Error:
            return False

    def lose(self, node: Service) -> float:
        """The machine of `node` is lost: every process of it stops at once, then is killed.
        Its process group holds pg_autoctl, its services and the postmaster, but each backend
        and WAL sender is a session of its own (PostgreSQL's children call setsid()), and
        they would go on for a moment: a commit could still be made and acknowledged.
        Returns when (time.monotonic()) the last of them stopped."""
        assert node.proc is not None
        postmaster = node.postmaster_pid()
        os.killpg(node.proc.pid, signal.SIGSTOP)  # the postmaster starts no more children
        children = _children(postmaster) if postmaster is not None else []
        for pid in children:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        stopped = time.monotonic()
        os.killpg(node.proc.pid, signal.SIGKILL)
        for pid in children:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        node.proc.wait()
        self.lost.add(node.name)
        return stopped

    def logs(self) -> str:
        return (
            "\n".join(f"--- {s.name}:\n{s.log_tail()}" for s in (self.monitor, *self.nodes))
            + f"\n--- pg_autoctl show state:\n{self.show_state()}"
        )

    def _until(self, condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
        """Wait until `condition()` holds. Raises FormationFailed (with the logs) if it does
        not in time, or if a pg_autoctl not killed on purpose exits."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if condition():
                    return
            except psycopg.Error:
                pass  # a node restarting: asked again
            for s in (self.monitor, *self.nodes):
                if s.proc is not None and s.name not in self.lost and s.proc.poll() is not None:
                    raise FormationFailed(
                        f"{s.name}'s pg_autoctl exited with {s.proc.returncode} while waiting"
                        f" for {what}:\n{self.logs()}"
                    )
            if time.monotonic() > deadline:
                raise FormationFailed(f"not within {timeout:g} s: {what}\n{self.logs()}")
            time.sleep(0.1)

    def drop(self) -> None:
        """Stop every node, then the monitor, and remove the folder."""
        for s in (*self.nodes, self.monitor):
            if s.proc is not None and s.proc.poll() is None:
                s.proc.send_signal(signal.SIGTERM)  # pg_autoctl stops its PostgreSQL
        for s in (*self.nodes, self.monitor):
            if s.proc is not None:
                with suppress(subprocess.TimeoutExpired):
                    s.proc.wait(20)
        _drop(self.home)
        # Each pg_autoctl guards its log with a System V semaphore, which one killed leaves
        # behind: those made while the formation lived (the lock held) are its own.
        for semid in _semaphores(pwd.getpwnam("postgres").pw_uid) - self.semaphores:
            subprocess.run(["ipcrm", "-s", str(semid)], capture_output=True, check=False)


def _answers(port: int, database: str) -> bool:
    try:
        sql(port, "SELECT 1", database)
    except psycopg.Error:
        return False
    return True


def _semaphores(uid: int) -> set[int]:
    """The ids of the System V semaphore sets that `uid` made."""
    lines = Path("/proc/sysvipc/sem").read_text().splitlines()[1:]
    return {int(f[1]) for f in (line.split() for line in lines) if int(f[6]) == uid}


def _children(parent: int) -> list[int]:
    """The processes whose parent is `parent`."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # The command may hold spaces and parentheses: the fields after the last ")".
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == parent:
            found.append(int(stat.parent.name))
    return found


def _ours(pid: int) -> bool:
    """Whether `pid` is a pg_autoctl or PostgreSQL process (not a recycled pid)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"pg_autoctl" in command or b"postgres" in command


def _drop(home: Path) -> None:
    """Kill whatever of the formation in `home` still runs, and remove `home`."""
    for pgid_file in home.glob("*.pgid"):
        pgid = int(pgid_file.read_text())
        if _ours(pgid):
            with suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
    # A postmaster outside its group (its pg_autoctl killed alone): by its pid file.
    for pid_file in home.glob("*/postmaster.pid"):
        try:
            pid = int(pid_file.read_text().split("\n", 1)[0])
        except ValueError:
            continue
        if _ours(pid):
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    shutil.rmtree(home, ignore_errors=True)


def drop_leftovers(root: Path | None = None) -> None:
    """Drop the formations of earlier runs that ended before their teardown. Call with the
    lock held."""
    for home in Path(root or tempfile.gettempdir()).glob(f"{PREFIX}*"):
        if home.is_dir():
            _drop(home)
