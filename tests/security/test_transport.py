"""Transport: TLS and mutual TLS from Python (the stubs and the `bergen` command line) and from
Node.js, against real `bergen serve` processes; a server refuses to listen off this machine in
clear unless told `--insecure`, and refuses TLS files it cannot use.

Every certificate is made at test time (`certificates.py`): nothing private is committed.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from e2e.conftest import on_backend
from e2e.servers import bergen_command
from e2e.test_node_client import SCRIPT, SCRIPT_TIMEOUT
from e2e.test_node_client import node as node  # the fixture: `node` with its packages
from grpc_health.v1 import health_pb2

from bergen.api.exit_status import ExitStatus
from bergen.v1 import bergen_pb2 as pb
from bergen.v1 import bergen_pb2_grpc as pb_grpc

from .certificates import Authority, Pem
from .conftest import Database
from .serving import Servers, channel, clean_env, health, serve_refused

COMMAND_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Pki:
    """The servers' CA with a server and a client certificate, and a CA nobody trusts with a
    client certificate of its own."""

    ca: Path
    server: Pem
    client: Pem
    rogue_ca: Path
    rogue_client: Pem


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    where = tmp_path_factory.mktemp("pki")
    good = Authority(where, "bergen")
    rogue = Authority(where, "rogue")
    return Pki(
        good.cert,
        good.issue("server", server=True),
        good.issue("client", server=False),
        rogue.cert,
        rogue.issue("rogue-client", server=False),
    )


def _credentials(pki: Pki, client: Pem | None = None) -> grpc.ChannelCredentials:
    return grpc.ssl_channel_credentials(
        root_certificates=pki.ca.read_bytes(),
        private_key=None if client is None else client.key.read_bytes(),
        certificate_chain=None if client is None else client.cert.read_bytes(),
    )


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Servers]:
    started = Servers(tmp_path)
    yield started
    problems = started.stop_all()
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)


def _bots(
    target: str, options: Sequence[str], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`bergen bots` playing one two-seat match on `target`."""
    cmd = [*bergen_command(), "bots", "--server", target, "--matches", "1", "--json", *options]
    return subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        env=clean_env() | (env or {}),
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )


def _tls_args(pki: Pki, mutual: bool = False) -> list[str]:
    args = ["--tls-cert", str(pki.server.cert), "--tls-key", str(pki.server.key)]
    return args + (["--tls-client-ca", str(pki.ca)] if mutual else [])


def _one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


@on_backend("postgresql")
def test_a_client_trusting_the_servers_ca_plays_whole_matches_over_tls(
    servers: Servers, database: Database, pki: Pki
) -> None:
    server = servers.start(database.server_url, _tls_args(pki), _credentials(pki))
    done = _bots(server.target, ["--ca", str(pki.ca)])
    assert done.returncode == ExitStatus.SUCCESS, done.stderr
    [match] = json.loads(done.stdout)["matches"]
    # BERGEN_CA does the same as --ca.
    again = _bots(server.target, [], env={"BERGEN_CA": str(pki.ca)})
    assert again.returncode == ExitStatus.SUCCESS, again.stderr
    with channel(server.target, _credentials(pki)) as open_:
        stub = pb_grpc.BergenServiceStub(open_)  # type: ignore[no-untyped-call]
        view = stub.GetMatch(pb.GetMatchRequest(match_id=match["match_id"]), timeout=10).view
    assert view.phase == pb.PHASE_ENDED
    assert list(view.scores) == match["scores"]


def test_a_client_that_does_not_trust_the_servers_ca_cannot_reach_it(
    servers: Servers, sqlite_url: str, pki: Pki
) -> None:
    server = servers.start(sqlite_url, _tls_args(pki), _credentials(pki))
    rogue = grpc.ssl_channel_credentials(root_certificates=pki.rogue_ca.read_bytes())
    for credentials in (None, rogue, grpc.ssl_channel_credentials()):
        with pytest.raises(grpc.RpcError) as refused:
            health(server.target, credentials)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]
    for options in ([], ["--tls"], ["--ca", str(pki.rogue_ca)]):
        done = _bots(server.target, options)
        assert done.returncode == ExitStatus.UNREACHABLE, (options, done.stderr)
        assert done.stdout == ""


def test_mutual_tls_refuses_a_client_without_a_certificate_its_ca_signed(
    servers: Servers, sqlite_url: str, pki: Pki
) -> None:
    server = servers.start(sqlite_url, _tls_args(pki, mutual=True), _credentials(pki, pki.client))
    for client in (None, pki.rogue_client):
        with pytest.raises(grpc.RpcError) as refused:
            health(server.target, _credentials(pki, client))
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]
    refused_cli = _bots(server.target, ["--ca", str(pki.ca)])
    assert refused_cli.returncode == ExitStatus.UNREACHABLE, refused_cli.stderr
    rogue = ["--client-cert", str(pki.rogue_client.cert), "--client-key", str(pki.rogue_client.key)]
    refused_rogue = _bots(server.target, ["--ca", str(pki.ca), *rogue])
    assert refused_rogue.returncode == ExitStatus.UNREACHABLE, refused_rogue.stderr
    # The right client plays, its files given by options or by the environment.
    mine = ["--client-cert", str(pki.client.cert), "--client-key", str(pki.client.key)]
    played = _bots(server.target, ["--ca", str(pki.ca), *mine])
    assert played.returncode == ExitStatus.SUCCESS, played.stderr
    assert len(json.loads(played.stdout)["matches"]) == 1
    env = {
        "BERGEN_CA": str(pki.ca),
        "BERGEN_CLIENT_CERT": str(pki.client.cert),
        "BERGEN_CLIENT_KEY": str(pki.client.key),
    }
    by_env = _bots(server.target, [], env=env)
    assert by_env.returncode == ExitStatus.SUCCESS, by_env.stderr


def test_tls_options_a_client_cannot_use_are_usage_errors(tmp_path: Path, pki: Pki) -> None:
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("hello\n")
    cases = [
        (["--ca", str(tmp_path / "missing.pem")], "missing.pem"),
        (["--ca", str(not_pem)], "not.pem"),
        (["--ca", str(pki.ca), "--client-cert", str(pki.client.cert)], "--client-key"),
        (["--ca", str(pki.ca), "--client-key", str(pki.client.key)], "--client-cert"),
        (["--client-cert", str(pki.client.cert), "--client-key", str(not_pem)], "not.pem"),
    ]
    for options, named in cases:
        done = _bots("127.0.0.1:1", options)
        assert done.returncode == ExitStatus.USAGE, (options, done.stderr)
        assert named in _one_line(done.stderr), done.stderr


@pytest.mark.parametrize("listen", ["0.0.0.0:0", "[::]:0", ":0", "192.0.2.7:50051"])
def test_a_server_refuses_to_listen_off_this_machine_in_clear(tmp_path: Path, listen: str) -> None:
    done = serve_refused(["--listen", listen], tmp_path)
    assert done.returncode == ExitStatus.USAGE, done.stderr
    line = _one_line(done.stderr)
    assert listen in line
    assert "without TLS" in line and "in clear" in line and "--insecure" in line


def test_insecure_lets_a_server_listen_off_this_machine_in_clear(
    servers: Servers, sqlite_url: str
) -> None:
    server = servers.start(sqlite_url, ["--insecure"], None, listen="0.0.0.0:0")
    assert health(server.target, None) == health_pb2.HealthCheckResponse.SERVING


def test_a_tls_server_listens_off_this_machine_without_insecure(
    servers: Servers, sqlite_url: str, pki: Pki
) -> None:
    server = servers.start(sqlite_url, _tls_args(pki), _credentials(pki), listen="0.0.0.0:0")
    with pytest.raises(grpc.RpcError):
        health(server.target, None)


def test_a_server_refuses_tls_files_it_cannot_use(tmp_path: Path, pki: Pki) -> None:
    cert, key = str(pki.server.cert), str(pki.server.key)
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("hello\n")
    cases = [
        (["--tls-cert", cert], "--tls-key"),
        (["--tls-key", key], "--tls-cert"),
        (["--tls-client-ca", str(pki.ca)], "--tls-client-ca"),
        (["--tls-cert", cert, "--tls-key", str(pki.client.key)], "is not the key of"),
        (["--tls-cert", str(tmp_path / "missing.pem"), "--tls-key", key], "missing.pem"),
        (["--tls-cert", str(not_pem), "--tls-key", key], "not a PEM certificate"),
        (["--tls-cert", cert, "--tls-key", str(not_pem)], "not a PEM private key"),
        (["--tls-cert", cert, "--tls-key", key, "--tls-client-ca", str(not_pem)], "not.pem"),
    ]
    for args, named in cases:
        done = serve_refused(["--listen", "127.0.0.1:0", *args], tmp_path)
        assert done.returncode == ExitStatus.USAGE, (args, done.stderr)
        assert named in _one_line(done.stderr), done.stderr


def _node_play(node: str, target: str, options: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [node, str(SCRIPT), target, "2", "--seed", "7", *options],
        capture_output=True,
        text=True,
        timeout=SCRIPT_TIMEOUT,
        check=False,
    )


@pytest.mark.parametrize("mutual", [False, True], ids=["tls", "mutual-tls"])
def test_the_nodejs_client_plays_over_tls_and_is_refused_without_the_ca(
    node: str, servers: Servers, sqlite_url: str, pki: Pki, mutual: bool
) -> None:
    client = pki.client if mutual else None
    server = servers.start(sqlite_url, _tls_args(pki, mutual), _credentials(pki, client))
    mine = ["--client-cert", str(pki.client.cert), "--client-key", str(pki.client.key)]
    played = _node_play(node, server.target, ["--ca", str(pki.ca), *(mine if mutual else [])])
    assert played.returncode == 0, played.stderr
    summary = json.loads(played.stdout)
    with channel(server.target, _credentials(pki, client)) as open_:
        stub = pb_grpc.BergenServiceStub(open_)  # type: ignore[no-untyped-call]
        view = stub.GetMatch(pb.GetMatchRequest(match_id=summary["match_id"]), timeout=10).view
    assert view.phase == pb.PHASE_ENDED
    assert list(view.scores) == summary["scores"]
    refusals = [[], ["--ca", str(pki.rogue_ca)]]
    if mutual:
        rogue = ["--client-cert", str(pki.rogue_client.cert)]
        refusals += [["--ca", str(pki.ca)], ["--ca", str(pki.ca), *rogue]]
        refusals[-1] += ["--client-key", str(pki.rogue_client.key)]
    for options in refusals:
        refused = _node_play(node, server.target, options)
        assert refused.returncode == 1, (options, refused.stdout)
        assert "gRPC status 14" in refused.stderr, (options, refused.stderr)
