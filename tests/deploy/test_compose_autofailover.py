"""deploy/compose-autofailover.yaml run for real with podman: a pg_auto_failover monitor, two
nodes and two server replicas whose URLs name both nodes.

The formation comes up with a primary and its synchronous standby, the replicas serve, and
`bergen bots` plays a match; the primary's container is killed, the monitor promotes the
standby by itself, and a match is played through each replica again; the killed container,
started again, rejoins as the standby. Everything the test starts is removed at its end.
Needs the images of `.ci/containers` (PG_AUTO_FAILOVER_IMAGE besides BERGEN_IMAGE): skipped
without them, saying why, or failing with BERGEN_REQUIRE_PODMAN=1 (CI).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from .test_containers import (
    BERGEN_IMAGE,
    DEPLOY,
    bergen,
    container_logs,
    free_ports,
    make_secrets,
    podman_unavailable,
    remove_compose_project,
    run,
    wait_serving,
)

PG_AUTO_FAILOVER_IMAGE = os.environ.get(
    "PG_AUTO_FAILOVER_IMAGE", "localhost/bergen-pg-auto-failover:15"
)
WAIT_S = 180.0

pytestmark = pytest.mark.slow


@pytest.fixture
def podman_af_env() -> dict[str, str]:
    """The environment podman runs in, once the images are there."""
    env = dict(os.environ)
    env.setdefault("CONTAINERS_CONF", str(DEPLOY / "podman" / "containers.conf"))
    why = podman_unavailable(env)
    if why is None:
        found = subprocess.run(["podman", "image", "exists", PG_AUTO_FAILOVER_IMAGE], env=env)
        if found.returncode != 0:
            why = f"no image {PG_AUTO_FAILOVER_IMAGE}: build it with .ci/containers"
    if why is not None:
        if os.environ.get("BERGEN_REQUIRE_PODMAN") == "1":
            pytest.fail(f"BERGEN_REQUIRE_PODMAN=1 but {why}", pytrace=False)
        pytest.skip(f"{why} (set BERGEN_REQUIRE_PODMAN=1 to fail instead)")
    return env


def _states(env: Mapping[str, str], monitor: str) -> dict[str, tuple[str, str]]:
    """Each node's (reported, assigned) state as the monitor holds them; empty while it does
    not answer."""
    done = run(
        ["podman", "exec", monitor, "pg_autoctl", "show", "state", "--json"],
        env,
        check=False,
        timeout=30,
    )
    try:
        nodes = json.loads(done.stdout)
    except json.JSONDecodeError:
        return {}
    return {n["nodename"]: (n["current_group_state"], n["assigned_group_state"]) for n in nodes}


def _until(condition: Callable[[], bool], what: str, logs: Callable[[], str]) -> float:
    """Wait until `condition()` holds; returns when. Raises AssertionError with `logs()`."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {WAIT_S:g} s: {what}\n{logs()}")
        time.sleep(0.5)
    return time.monotonic()


def _plays_a_match(target: str, seed: str) -> None:
    done = bergen(
        "bots", "--server", target, "--matches", "1", "--policy", "random", "--seed", seed
    )
    assert done.returncode == 0, f"bergen bots through {target}: {done.stdout}{done.stderr}"
    assert " winner " in done.stdout, done.stdout


def test_compose_fails_over_to_the_standby_and_the_replicas_carry_on(
    podman_af_env: dict[str, str], tmp_path: Path
) -> None:
    project = "bergenaf" + uuid.uuid4().hex[:8]
    secrets = make_secrets(tmp_path / "secrets", "node1,node2")
    p1, p2 = free_ports(2)
    env = {
        **podman_af_env,
        "BERGEN_SECRETS": str(secrets),
        "BERGEN_IMAGE": BERGEN_IMAGE,
        "PG_AUTO_FAILOVER_IMAGE": PG_AUTO_FAILOVER_IMAGE,
        "BERGEN_PORT_1": str(p1),
        "BERGEN_PORT_2": str(p2),
    }
    compose = ["podman-compose", "-p", project, "-f", str(DEPLOY / "compose-autofailover.yaml")]
    services = ("monitor", "node1", "node2", "migrate", "bergen-1", "bergen-2")
    names = [f"{project}_{s}_1" for s in services]
    monitor = names[0]
    r1, r2 = f"127.0.0.1:{p1}", f"127.0.0.1:{p2}"

    def logs() -> str:
        return container_logs(env, names)

    def roles() -> dict[str, str]:
        """Node name -> its state, once one is primary and the other its standby."""
        states = _states(env, monitor)
        settled = {name: r for name, (r, g) in states.items() if r == g}
        if sorted(settled.values()) == ["primary", "secondary"]:
            return settled
        return {}

    try:
        run([*compose, "up", "-d"], env)
        _until(lambda: bool(roles()), "a primary and its standby", logs)
        wait_serving([r1, r2], logs)
        _plays_a_match(r1, f"{project}-before")
        primary = next(name for name, role in roles().items() if role == "primary")
        standby = next(name for name, role in roles().items() if role == "secondary")
        killed = time.monotonic()
        run(["podman", "kill", f"{project}_{primary}_1"], env)
        promoted = _until(
            lambda: _states(env, monitor).get(standby, ("", ""))[0] == "wait_primary",
            f"{standby} promoted",
            logs,
        )
        _plays_a_match(r1, f"{project}-after-1")
        _plays_a_match(r2, f"{project}-after-2")
        # The lost node comes back: it rejoins as the standby of the new primary.
        run(["podman", "start", f"{project}_{primary}_1"], env)
        _until(
            lambda: roles() == {standby: "primary", primary: "secondary"},
            f"{primary} back as the standby of {standby}",
            logs,
        )
        _plays_a_match(r2, f"{project}-rejoined")
        print(f"compose-autofailover: {standby} promoted {promoted - killed:.1f} s after the kill")
    except BaseException:
        print(logs())
        raise
    finally:
        remove_compose_project(env, project)
