"""The container images, deploy/compose.yaml and deploy/k8s, run for real with podman.

Each installation is PostgreSQL, the migration step as the owner role and two server replicas
as the INSERT-and-SELECT role sharing one signing key, log key and organiser token. A match is
played through one replica while a spectator watches it on the other; the `bergen` command
line on this machine plays matches with bots through one replica, replays them and verifies
every match through each replica; a replica stops gracefully on SIGTERM well before podman's
kill timeout. Everything a test starts is removed at its end, failed or not; ports are
published on 127.0.0.1 only.

The images come from `.ci/containers` (BERGEN_IMAGE, POSTGRES_IMAGE). Without podman, its
tools or the images these tests are skipped, saying why; with BERGEN_REQUIRE_PODMAN=1 (CI)
they fail instead.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from pathlib import Path

import grpc
import pytest
from e2e.client import Client, Watcher, play_to_end, seat_everyone
from e2e.servers import bergen_command
from grpc_health.v1 import health_pb2

from bergen.v1 import bergen_pb2 as pb

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
SYSTEM_PYTHON = "/usr/bin/python3"
BERGEN_IMAGE = os.environ.get("BERGEN_IMAGE", "localhost/bergen:ci")
POSTGRES_IMAGE = os.environ.get("POSTGRES_IMAGE", "localhost/bergen-postgres:15")
START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 30
"""What podman is told to wait before SIGKILL; a replica must be gone well before."""
GRACEFUL_STOP_S = 12.0
"""The server's own shutdown (commands in flight get 10 s) must end within this."""

pytestmark = pytest.mark.slow


def podman_unavailable(env: Mapping[str, str]) -> str | None:
    """Why these tests cannot run here, or None."""
    for tool in ("podman", "podman-compose", "openssl"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (.ci/containers installs it)"
    yaml = subprocess.run([SYSTEM_PYTHON, "-c", "import yaml"], capture_output=True)
    if yaml.returncode != 0:
        return f"{SYSTEM_PYTHON} has no yaml module for deploy/podman/render-kube.py"
    for image in (BERGEN_IMAGE, POSTGRES_IMAGE):
        found = subprocess.run(["podman", "image", "exists", image], env=dict(env))
        if found.returncode != 0:
            return f"no image {image}: build it with .ci/containers"
    return None


@pytest.fixture(scope="module")
def podman_env() -> dict[str, str]:
    """The environment podman runs in (CONTAINERS_CONF: deploy/podman/containers.conf)."""
    env = dict(os.environ)
    env.setdefault("CONTAINERS_CONF", str(DEPLOY / "podman" / "containers.conf"))
    why = podman_unavailable(env)
    if why is not None:
        if os.environ.get("BERGEN_REQUIRE_PODMAN") == "1":
            pytest.fail(f"BERGEN_REQUIRE_PODMAN=1 but {why}", pytrace=False)
        pytest.skip(f"{why} (set BERGEN_REQUIRE_PODMAN=1 to fail instead)")
    return env


def run(
    args: list[str], env: Mapping[str, str], *, timeout: float = 300, check: bool = True
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        args, env=dict(env), capture_output=True, text=True, timeout=timeout, check=False
    )
    if check and done.returncode != 0:
        raise AssertionError(
            f"{' '.join(args)} exited {done.returncode}:\n{done.stdout[-3000:]}\n"
            f"{done.stderr[-3000:]}"
        )
    return done


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def make_secrets(directory: Path, database_host: str) -> Path:
    run([str(DEPLOY / "make-secrets"), str(directory), database_host], os.environ)
    return directory


def bergen(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERGEN_")}
    return subprocess.run(
        [*bergen_command(), *args], capture_output=True, text=True, timeout=timeout, env=env
    )


def bergen_replay(*args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(bergen_command()[0]).with_name("bergen-replay")
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120)


def serving(target: str) -> bool:
    """Whether the server at `target` says SERVING (asked in process: a `bergen health` run
    per poll would cost a process start each)."""
    with grpc.insecure_channel(target) as channel:
        check = channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString,
        )
        try:
            answer = check(health_pb2.HealthCheckRequest(), timeout=2)
        except grpc.RpcError:
            return False
    return bool(answer.status == health_pb2.HealthCheckResponse.SERVING)


def published(env: Mapping[str, str], container: str, timeout: float = 60.0) -> str:
    """What `podman port` says `container` publishes, once it says anything: a replica is
    started only after the migration has run, which `compose up -d` does not wait for."""
    deadline = time.monotonic() + timeout
    while True:
        ports = run(["podman", "port", container], env, check=False).stdout.strip()
        if ports or time.monotonic() > deadline:
            return ports
        time.sleep(0.5)


def wait_serving(targets: list[str], logs: Callable[[], str]) -> None:
    """Until every target's health service says SERVING, then `bergen health` agrees. Raises
    AssertionError with `logs()`."""
    deadline = time.monotonic() + START_TIMEOUT_S
    for target in targets:
        while not serving(target):
            if time.monotonic() > deadline:
                raise AssertionError(f"{target} not serving in {START_TIMEOUT_S:.0f} s\n{logs()}")
            time.sleep(1)
        answer = bergen("health", "--server", target)
        assert answer.returncode == 0, answer.stdout + answer.stderr
        assert answer.stdout.strip() == f"{target} server: SERVING"


def container_logs(env: Mapping[str, str], names: list[str]) -> str:
    out = []
    for name in names:
        done = run(["podman", "logs", "--tail", "40", name], env, check=False, timeout=30)
        out.append(f"--- {name}\n{done.stdout}{done.stderr}")
    return "\n".join(out)


def play_through_one_watch_on_the_other(r1: str, r2: str, organiser_token: str) -> str:
    """A match created, joined and played to its end through r1, watched from r2 by a
    spectator from its first event on; the organiser's token abandons a match through r2 that
    r1 created. Returns the played match's id."""
    rng = random.Random(20261201)
    with Client(r1) as c1, Client(r2) as c2:
        watchers: list[Watcher] = []

        def watch(match_id: str) -> None:
            watchers.append(Watcher(c2, match_id).started(timeout=30))

        table = seat_everyone(c1, 2, before_joining=watch)
        moves = play_to_end([c1], rng, table)
        final = moves[-1].response.view
        assert final.phase == pb.PHASE_ENDED
        watcher = watchers[0]
        watcher.join(60)
        assert watcher.finished.is_set() and watcher.error is None, watcher.error
        first = watcher.view().version
        seen = watcher.events()
        assert [e.seq for e in seen] == list(range(first + 1, final.version + 1)), (
            "the watcher on the other replica missed or repeated events"
        )
        replay = c2.replay(table.match_id)
        assert replay.complete
        kinds = [(e.seq, e.WhichOneof("body")) for e in seen]
        assert [(e.seq, e.WhichOneof("body")) for e in replay.events[first:]] == kinds
        assert "match_ended" in {kind for _, kind in kinds}

        other = c1.create(2, name="to abandon")
        c2.abandon(other.match_id, organiser_token, note="deployment test")
        assert c1.view(other.match_id).phase == pb.PHASE_ENDED
        with pytest.raises(grpc.RpcError) as refused:
            c2.abandon(c1.create(2).match_id, "x" * 43, note="not the organiser")
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED  # type: ignore[attr-defined]
        return table.match_id


def bots_verify_and_replay(r1: str, r2: str, played: str) -> None:
    """`bergen bots` through r1; `bergen-replay` of its matches through r2 tells the same
    results; `bergen verify` accepts every match through each replica, signed by one key."""
    bots = bergen(
        "bots", "--server", r1, "--matches", "1", "--players", "2", "--seed", "deploy", "--json"
    )
    assert bots.returncode == 0, bots.stderr
    matches = json.loads(bots.stdout)["matches"]
    assert len(matches) == 1
    for match in matches:
        replay = bergen_replay(match["match_id"], "--server", r2, "--json")
        assert replay.returncode == 0, replay.stderr
        result = json.loads(replay.stdout)["result"]
        assert (result["winner_side"], result["scores"]) == (
            match["winner_side"],
            match["scores"],
        )
    keys = set()
    for match_id in [played] + [m["match_id"] for m in matches]:
        for target in (r1, r2):
            verified = bergen("verify", match_id, "--server", target, "--json")
            assert verified.returncode == 0, verified.stdout + verified.stderr
            verdict = json.loads(verified.stdout)
            assert verdict["ok"] is True and verdict["chain"] == "intact", verdict
            keys.add(verdict["public_key"])
    assert len(keys) == 1, f"the replicas sign with different keys: {keys}"


def stops_gracefully(env: Mapping[str, str], container: str) -> None:
    """`podman stop` (SIGTERM) ends the replica with exit 0 (SIGKILL would give 137), the
    server taking well under the kill timeout from the signal to its last line."""
    started = time.monotonic()
    run(["podman", "stop", "-t", str(STOP_TIMEOUT_S), container], env, timeout=120)
    took = time.monotonic() - started
    code = run(["podman", "inspect", "--format", "{{.State.ExitCode}}", container], env)
    logs = run(["podman", "logs", container], env)
    said = (logs.stdout + logs.stderr).splitlines()
    tail = "\n".join(said[-10:])
    assert code.stdout.strip() == "0", f"{container} exited {code.stdout} ({took:.1f} s): {tail}"
    signalled = [line for line in said if "signal 15: shutting down" in line]
    stopped = [line for line in said if line.endswith("INFO bergen.server: stopped")]
    assert len(signalled) == 1 and len(stopped) == 1, tail

    def at(line: str) -> float:
        return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()

    shutdown = at(stopped[0]) - at(signalled[0])
    assert 0 <= shutdown < GRACEFUL_STOP_S, f"{container} took {shutdown:.1f} s to shut down"
    print(f"{container}: shut down in {shutdown:.2f} s, podman stop took {took:.1f} s")


def test_compose_runs_two_replicas_that_are_one_server(
    podman_env: dict[str, str], tmp_path: Path
) -> None:
    project = "bergentest" + uuid.uuid4().hex[:8]
    secrets = make_secrets(tmp_path / "secrets", "postgres")
    p1, p2 = free_ports(2)
    env = {
        **podman_env,
        "BERGEN_SECRETS": str(secrets),
        "BERGEN_IMAGE": BERGEN_IMAGE,
        "POSTGRES_IMAGE": POSTGRES_IMAGE,
        "BERGEN_PORT_1": str(p1),
        "BERGEN_PORT_2": str(p2),
    }
    compose = ["podman-compose", "-p", project, "-f", str(DEPLOY / "compose.yaml")]
    names = [f"{project}_{s}_1" for s in ("postgres", "migrate", "bergen-1", "bergen-2")]
    r1, r2 = f"127.0.0.1:{p1}", f"127.0.0.1:{p2}"
    try:
        run([*compose, "up", "-d"], env)
        ports = published(env, names[2])
        assert ports == f"50051/tcp -> 127.0.0.1:{p1}", ports
        wait_serving([r1, r2], lambda: container_logs(env, names))
        token = (secrets / "organiser-token").read_text().strip()
        played = play_through_one_watch_on_the_other(r1, r2, token)
        bots_verify_and_replay(r1, r2, played)
        health = run(["podman", "healthcheck", "run", names[3]], env, check=False)
        assert health.returncode == 0, health.stdout + health.stderr
        stops_gracefully(env, names[3])
    except BaseException:
        print(container_logs(env, names))
        raise
    finally:
        remove_compose_project(env, project)


def remove_compose_project(env: Mapping[str, str], project: str) -> None:
    label = f"label=io.podman.compose.project={project}"
    ids = run(["podman", "ps", "-a", "-q", "--filter", label], env, check=False).stdout.split()
    if ids:
        run(["podman", "rm", "-f", "-t", "0", *ids], env, check=False)
    volumes = run(["podman", "volume", "ls", "-q", "--filter", label], env, check=False)
    if volumes.stdout.split():
        run(["podman", "volume", "rm", "-f", *volumes.stdout.split()], env, check=False)
    run(["podman", "network", "rm", "-f", f"{project}_default"], env, check=False)


@pytest.fixture
def kube_prefix(podman_env: dict[str, str]) -> Iterator[str]:
    """A prefix of every name a kube test's installation takes; whatever bears it (pods,
    the volumes of its ConfigMaps and claims) and its network are removed at the end."""
    prefix = "bt" + uuid.uuid4().hex[:8] + "-"
    yield prefix
    env = podman_env
    pods = run(["podman", "pod", "ls", "-q", "--filter", f"name=^{prefix}"], env, check=False)
    if pods.stdout.split():
        run(["podman", "pod", "rm", "-f", "-t", "0", *pods.stdout.split()], env, check=False)
    volumes = run(["podman", "volume", "ls", "--format", "{{.Name}}"], env, check=False)
    mine = [v for v in volumes.stdout.split() if v.startswith(prefix)]
    if mine:
        run(["podman", "volume", "rm", "-f", *mine], env, check=False)
    run(["podman", "network", "rm", "-f", prefix + "net"], env, check=False)


def test_kubernetes_manifests_played_by_podman_run_two_replicas_that_are_one_server(
    podman_env: dict[str, str], kube_prefix: str, tmp_path: Path
) -> None:
    env, prefix = podman_env, kube_prefix
    secrets = make_secrets(tmp_path / "secrets", prefix + "postgres")
    p1, p2 = free_ports(2)
    out = tmp_path / "kube"
    run(
        [
            SYSTEM_PYTHON,
            str(DEPLOY / "podman" / "render-kube.py"),
            str(DEPLOY / "k8s"),
            str(out),
            "--secrets",
            str(secrets / "k8s-secrets.yaml"),
            "--image",
            f"localhost/bergen:latest={BERGEN_IMAGE}",
            "--image",
            f"docker.io/library/postgres:15={POSTGRES_IMAGE}",
            "--publish",
            f"bergen={p1},{p2}",
            "--prefix",
            prefix,
        ],
        env,
    )
    names = [
        f"{prefix}postgres-postgres",
        f"{prefix}bergen-migrate-migrate",
        f"{prefix}bergen-0-bergen",
        f"{prefix}bergen-1-bergen",
    ]
    r1, r2 = f"127.0.0.1:{p1}", f"127.0.0.1:{p2}"
    play = ["podman", "kube", "play", "--network", prefix + "net"]
    try:
        run(["podman", "network", "create", prefix + "net"], env)
        run([*play, str(out / "1-database.yaml")], env)
        deadline = time.monotonic() + START_TIMEOUT_S
        ready = ["podman", "exec", names[0], "pg_isready", "-q", "-U", "postgres", "-d", "bergen"]
        while run(ready, env, check=False).returncode != 0:
            assert time.monotonic() < deadline, container_logs(env, names[:1])
            time.sleep(1)
        run([*play, str(out / "2-migrate.yaml")], env)
        migrated = run(["podman", "wait", names[1]], env, timeout=START_TIMEOUT_S)
        assert migrated.stdout.strip() == "0", container_logs(env, names[:2])
        run([*play, str(out / "3-server.yaml")], env)
        wait_serving([r1, r2], lambda: container_logs(env, names))
        token = (secrets / "organiser-token").read_text().strip()
        played = play_through_one_watch_on_the_other(r1, r2, token)
        bots_verify_and_replay(r1, r2, played)
        # The liveness probe, a gRPC one, is podman's health check of the container.
        health = run(["podman", "healthcheck", "run", names[2]], env, check=False)
        assert health.returncode == 0, health.stdout + health.stderr
        stops_gracefully(env, names[3])
    except BaseException:
        print(container_logs(env, names))
        raise
