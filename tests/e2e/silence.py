"""A database that goes silent: a TCP relay to PostgreSQL whose packets can be dropped by the
kernel (iptables), as a network partition or a host that has lost power would, without any
connection being closed or refused. Needs root and iptables; `silencer_or_skip` says why not."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from psycopg.conninfo import conninfo_to_dict

from .balancer import Balancer


def silencer_or_skip() -> None:
    """Skip the test unless this process may add iptables rules (fail instead when
    BERGEN_REQUIRE_POSTGRES=1, as in CI: these are PostgreSQL tests)."""

    def missing(reason: str) -> None:
        if os.environ.get("BERGEN_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"BERGEN_REQUIRE_POSTGRES=1 but {reason}")
        pytest.skip(reason)

    if os.geteuid() != 0 or shutil.which("iptables") is None:
        missing("dropping a connection's packets needs root and iptables (run the tests as root)")
        return
    probe = subprocess.run(["iptables", "-L", "OUTPUT", "-n"], capture_output=True, text=True)
    if probe.returncode != 0:
        missing(f"iptables cannot be used here: {probe.stderr.strip()}")


class Relay(Balancer):
    """Accepts connections on 127.0.0.1:`port` and relays each to `target` in a thread."""

    def __init__(self, target: tuple[str, int]) -> None:
        super().__init__([target], connect_timeout=None)


def _rules(port: int) -> list[list[str]]:
    return [
        ["OUTPUT", "-p", "tcp", "-d", "127.0.0.1", "--dport", str(port), "-j", "DROP"],
        ["OUTPUT", "-p", "tcp", "-s", "127.0.0.1", "--sport", str(port), "-j", "DROP"],
    ]


@contextmanager
def silenced(port: int) -> Iterator[None]:
    """For the block, every packet to or from 127.0.0.1:`port` is dropped."""
    added = []
    try:
        for rule in _rules(port):
            subprocess.run(["iptables", "-I", *rule], check=True, capture_output=True)
            added.append(rule)
        yield
    finally:
        for rule in added:
            subprocess.run(["iptables", "-D", *rule], check=False, capture_output=True)


@contextmanager
def relayed(url: str) -> Iterator[tuple[str, Relay]]:
    """`url` (postgresql://...) reached through a Relay: (the URL through it, the relay)."""
    params = conninfo_to_dict(url)
    host = str(params.get("host") or "127.0.0.1")
    port = int(str(params.get("port") or 5432))
    relay = Relay((host, port))
    try:
        head, _, tail = url.partition("://")
        credentials, at, rest = tail.rpartition("@")
        path = rest.split("/", 1)[1] if "/" in rest else ""
        yield f"{head}://{credentials}{at}127.0.0.1:{relay.port}/{path}", relay
    finally:
        relay.close()
