"""The server as a process: graceful shutdown on SIGTERM, deadlines, the message size limit,
server reflection and the health service."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest
from google.protobuf import descriptor_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from bergen.domain.events import TilePlayed
from bergen.server.bootstrap import CALL_WORKERS
from bergen.server.lifecycle import EXIT_HELD, HARD_LIMIT_S
from bergen.v1 import bergen_pb2 as pb
from bergen.v1 import bergen_pb2_grpc as rpc

from .client import Client, Table, Watcher, bearer, new_command_id, seat_everyone
from .servers import ServerFarm, ServerProcess, bergen_command
from .truth import check_every_match, decoded, store_at

pytestmark = pytest.mark.timeout(120)

Code = grpc.StatusCode


@contextmanager
def writes_held(url: str) -> Iterator[None]:
    """Hold the database's write lock (appends wait) until the block ends."""
    if url.startswith("sqlite"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            yield
            conn.execute("ROLLBACK")
        finally:
            conn.close()
        return
    with psycopg.connect(url) as pg:
        pg.execute("LOCK TABLE events IN EXCLUSIVE MODE")
        yield
        pg.rollback()


def wait_until_an_append_waits(url: str) -> None:
    """Return once an append waits for the lock (PostgreSQL shows it; on SQLite, a while)."""
    if url.startswith("sqlite"):
        time.sleep(1.5)
        return
    deadline = time.monotonic() + 60
    with psycopg.connect(url, autocommit=True) as pg:
        while time.monotonic() < deadline:
            # This database's (the server is shared, its databases cloned from one template).
            row = pg.execute(
                "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'events'::regclass"
                " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            ).fetchone()
            if row is not None and row[0] > 0:
                return
            time.sleep(0.02)
    raise AssertionError("no append ever waited for the lock")


def test_sigterm_lets_the_play_in_flight_finish_and_ends_watch_streams_cleanly(
    farm: ServerFarm, database: str
) -> None:
    server = farm.start(database)
    with Client(server.target) as client:
        table = seat_everyone(client, 2)
        watcher = Watcher(client, table.match_id).started()
        public = client.view(table.match_id)
        token = table.tokens[public.turn]
        choice = client.view(table.match_id, token).legal_plays[0]
        command_id = new_command_id()
        request = pb.PlayRequest(
            match_id=table.match_id, tile=choice.tile, end=choice.end, command_id=command_id
        )
        with writes_held(database):
            in_flight = client.stub.Play.future(request, metadata=bearer(token), timeout=60)
            wait_until_an_append_waits(database)
            assert not in_flight.done(), "the play was not held up by the lock"
            server.proc.send_signal(15)
            assert watcher.finished.wait(10), "the watch stream did not end on SIGTERM"
            assert watcher.error is None, f"the watch stream ended with {watcher.error}"
            assert not in_flight.done(), "the play ended before it could be written"
            assert server.proc.poll() is None, "the server exited with a command in flight"
        reply = in_flight.result(timeout=30)
        assert reply.view.version > public.version
    code = server.wait()  # the one SIGTERM above is all it takes
    assert code == 0, server.log_tail()
    assert "stopped" in server.log()

    with store_at(database) as store:
        stored = store.read_stream(table.match_id)
    tagged = [e for e in stored if e.metadata.command_id == command_id]
    assert [e.seq for e in tagged] == [e.seq for e in reply.events]
    played = decoded(tagged)[0]
    assert isinstance(played, TilePlayed) and played.seat == public.turn
    check_every_match(database)


@pytest.mark.postgres
def test_a_server_whose_database_was_dropped_under_it_stops_in_order_on_sigterm(
    farm: ServerFarm, pg_admin_url: str, pg_database: str
) -> None:
    """Its connections, the follower's, the listener's and the notifier's all broken, and a
    watch stream open: the stop is not held by any of them."""
    server = farm.start(pg_database)
    with Client(server.target) as client:
        table = seat_everyone(client, 2)
        watcher = Watcher(client, table.match_id).started()
        name = psycopg.conninfo.conninfo_to_dict(pg_database)["dbname"]
        with psycopg.connect(pg_admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        # The background threads find it gone, and retry.
        gone = ("reading the global order failed", "LISTEN connection lost")
        deadline = time.monotonic() + 60
        while not all(said in server.log() for said in gone):
            assert time.monotonic() < deadline, f"not logged {gone}:\n{server.log_tail()}"
            time.sleep(0.05)
        assert server.proc.poll() is None, "the server ended when its database did"
        began = time.monotonic()
        code = server.terminate(timeout=HARD_LIMIT_S + 5)
        took = time.monotonic() - began
        assert watcher.finished.wait(60), "the watch stream did not end"
    log = server.log()
    assert code == 0, log[-4000:]
    assert EXIT_HELD not in log, log[-4000:]
    assert "stopped" in log
    # Within its grace (10 s), not the sum of every thread's wait.
    assert took < 12, f"took {took:.1f} s to stop:\n{log[-4000:]}"


@pytest.fixture(scope="module")
def server(module_farm: ServerFarm, module_sqlite_url: str) -> ServerProcess:
    return module_farm.start(module_sqlite_url)


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Iterator[Client]:
    with Client(server.target) as c:
        yield c


TINY_DEADLINES = [0.0001, 0.001, 0.003, 0.01, 0.03]


def test_a_request_with_a_tiny_deadline_completes_or_exceeds_it_and_never_fails_inside(
    server: ServerProcess, client: Client
) -> None:
    table = seat_everyone(client, 2)
    seen: set[Code] = set()
    # Now and then every call of a round beats even the tiniest deadline: more rounds, until
    # one has not.
    rounds = 0
    while Code.DEADLINE_EXCEEDED not in seen and rounds < 6:
        rounds += 1
        table = _exercise(client, table, seen)
    assert seen <= {Code.OK, Code.DEADLINE_EXCEEDED}, seen
    assert Code.DEADLINE_EXCEEDED in seen, "no deadline was short enough to test anything"
    assert server.health() == health_pb2.HealthCheckResponse.SERVING
    check_every_match(server.database)
    assert "Traceback" not in server.log(), server.log_tail()


def _exercise(client: Client, table: Table, seen: set[Code]) -> Table:
    """Every kind of call once per tiny deadline, adding the codes answered to `seen`; a play
    cut short is sent again with its command id, which must apply it exactly once. Returns
    the table to go on with (a new one when the match ended)."""
    stub = client.stub
    calls: list[tuple[Any, Any, tuple[tuple[str, str], ...]]] = [
        (stub.CreateMatch, pb.CreateMatchRequest(seats=2), ()),
        (stub.GetMatch, pb.GetMatchRequest(match_id=table.match_id), ()),
        (stub.GetReplay, pb.GetReplayRequest(match_id=table.match_id), ()),
        (stub.ListMatches, pb.ListMatchesRequest(), ()),
    ]
    for deadline in TINY_DEADLINES:
        for method, request, md in calls:
            seen.add(_code_of(method, request, md, deadline))
        seen.add(_code_of(stub.JoinMatch, _join(client), (), deadline))
        # A play with a tiny deadline either happened or did not; the same command id then
        # tells which, and it is in the log at most once.
        seat = client.view(table.match_id).turn
        token = table.tokens[seat]
        choice = client.view(table.match_id, token).legal_plays[0]
        request = pb.PlayRequest(
            match_id=table.match_id, tile=choice.tile, end=choice.end, command_id=new_command_id()
        )
        seen.add(_code_of(stub.Play, request, bearer(token), deadline))
        again = stub.Play(request, metadata=bearer(token), timeout=10)
        assert again.events
        if client.view(table.match_id).phase == pb.PHASE_ENDED:
            table = seat_everyone(client, 2)
    return table


def _join(client: Client) -> pb.JoinMatchRequest:
    created = client.create(3)
    return pb.JoinMatchRequest(match_id=created.match_id, name="hasty")


def _code_of(method: Any, request: Any, md: tuple[tuple[str, str], ...], timeout: float) -> Code:
    try:
        method(request, metadata=md, timeout=timeout)
    except grpc.RpcError as e:
        code: Code = e.code()  # type: ignore[attr-defined]
        return code
    return Code.OK


def test_a_request_larger_than_the_limit_is_refused_as_resource_exhausted(
    server: ServerProcess, client: Client
) -> None:
    with pytest.raises(grpc.RpcError) as info:
        client.create(2, name="n" * 100_000)
    assert info.value.code() == Code.RESOURCE_EXHAUSTED  # type: ignore[attr-defined]
    created = client.create(2)
    with pytest.raises(grpc.RpcError) as info:
        client.join(created.match_id, "big", client_seed="s" * 100_000)
    assert info.value.code() == Code.RESOURCE_EXHAUSTED  # type: ignore[attr-defined]
    # Just under the limit is read, then refused for what it says.
    with pytest.raises(grpc.RpcError) as info:
        client.create(2, name="n" * 60_000)
    assert info.value.code() == Code.INVALID_ARGUMENT  # type: ignore[attr-defined]
    assert server.health() == health_pb2.HealthCheckResponse.SERVING


def test_reflection_lists_the_bergen_service_and_describes_its_methods(
    server: ServerProcess,
) -> None:
    with grpc.insecure_channel(server.target) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        answers = list(
            stub.ServerReflectionInfo(
                iter(
                    [
                        reflection_pb2.ServerReflectionRequest(list_services=""),
                        reflection_pb2.ServerReflectionRequest(
                            file_containing_symbol="bergen.v1.BergenService"
                        ),
                    ]
                ),
                timeout=10,
            )
        )
    services = {s.name for s in answers[0].list_services_response.service}
    assert {"bergen.v1.BergenService", "grpc.health.v1.Health"} <= services
    files = [
        descriptor_pb2.FileDescriptorProto.FromString(raw)
        for raw in answers[1].file_descriptor_response.file_descriptor_proto
    ]
    methods = {
        m.name for f in files for s in f.service if s.name == "BergenService" for m in s.method
    }
    assert methods == set(pb.DESCRIPTOR.services_by_name["BergenService"].methods_by_name)
    assert {"CreateMatch", "JoinMatch", "Play", "WatchMatch", "AbandonMatch"} <= methods


def test_the_health_service_says_serving_for_the_server_and_the_bergen_service(
    server: ServerProcess,
) -> None:
    assert server.health("") == health_pb2.HealthCheckResponse.SERVING
    assert server.health("bergen.v1.BergenService") == health_pb2.HealthCheckResponse.SERVING
    with grpc.insecure_channel(server.target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        with pytest.raises(grpc.RpcError) as info:
            stub.Check(health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=5)
    assert info.value.code() == Code.NOT_FOUND  # type: ignore[attr-defined]


def test_watch_streams_past_the_limit_are_refused_and_never_starve_commands(
    farm: ServerFarm, sqlite_url: str
) -> None:
    server = farm.start(sqlite_url, extra_args=["--max-watchers", "3"])
    with Client(server.target) as client:
        table = seat_everyone(client, 2)
        clients = [Client(server.target) for _ in range(3)]
        watchers = [Watcher(c, table.match_id).started() for c in clients]
        with Client(server.target) as other:
            refused = Watcher(other, table.match_id)
            refused.start()
            assert refused.finished.wait(60), "the stream past the limit was not refused"
            assert refused.error is not None
            assert refused.error.code() == Code.RESOURCE_EXHAUSTED  # type: ignore[attr-defined]
            assert "3 watch streams" in (refused.error.details() or "")
        # Commands still have threads: a view and a play are answered at once.
        view = client.view(table.match_id, table.tokens[0])
        token = table.tokens[view.turn]
        choice = client.view(table.match_id, token).legal_plays[0]
        reply = client.stub.Play(
            pb.PlayRequest(match_id=table.match_id, tile=choice.tile, end=choice.end),
            metadata=bearer(token),
            timeout=10,
        )
        assert reply.view.version > view.version
        # A stream that ends gives its place back.
        watchers[0].call.cancel()
        assert watchers[0].finished.wait(60)
        deadline = time.monotonic() + 60
        while True:
            again = Watcher(client, table.match_id)
            again.start()
            if again.first.wait(60) and again.error is None:
                break
            assert time.monotonic() < deadline, f"no place freed: {again.error}"
            time.sleep(0.1)
        assert again.items[0].HasField("view")
        for w in [*watchers[1:], again]:
            w.call.cancel()
            assert w.finished.wait(60)
        for c in clients:
            c.close()


def _threads_of(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def test_open_watch_streams_hold_no_thread_each(farm: ServerFarm, sqlite_url: str) -> None:
    """A stream that waits for events is a coroutine on the server's event loop
    (`bergen.server.streams`), not a thread: 300 open streams leave the server's thread
    count within its call pool's size, and a stream nobody reads holds up no other."""
    server = farm.start(sqlite_url, extra_args=["--max-watchers", "400"])
    with Client(server.target) as client:
        table = seat_everyone(client, 2)
        first = Watcher(client, table.match_id).started()
        before = _threads_of(server.proc.pid)
        with grpc.insecure_channel(server.target) as channel:
            stub = rpc.BergenServiceStub(channel)
            streams = [
                stub.WatchMatch(pb.WatchMatchRequest(match_id=table.match_id), timeout=120)
                for _ in range(300)
            ]
            for stream in streams:
                assert next(stream).HasField("view")
            # Every stream is open, and waits: none of them has a thread of its own.
            grown = _threads_of(server.proc.pid) - before
            assert grown < CALL_WORKERS, f"{grown} threads more for 300 open streams"
            # None of the 300 is read from now on; the first watcher still sees every play.
            view = client.view(table.match_id, table.tokens[0])
            for _ in range(6):
                view = client.view(table.match_id, table.tokens[view.turn])
                if view.phase != pb.PHASE_PLAYING or not view.legal_plays:
                    break
                choice = view.legal_plays[0]
                client.stub.Play(
                    pb.PlayRequest(match_id=table.match_id, tile=choice.tile, end=choice.end),
                    metadata=bearer(table.tokens[view.turn]),
                    timeout=10,
                )
            after = client.view(table.match_id, table.tokens[0]).version
            first.wait_for_seq(after, timeout=30)
            for stream in streams:
                stream.cancel()
        first.call.cancel()
        assert first.finished.wait(60)


@pytest.mark.parametrize(
    ("args", "env", "said"),
    [
        (["--max-watchers", "0"], {}, "must be at least 1, not 0"),
        ([], {"BERGEN_MAX_WATCHERS": "many"}, "not a whole number: 'many'"),
    ],
)
def test_a_watch_limit_below_one_is_a_usage_error(
    tmp_path: Path, args: list[str], env: dict[str, str], said: str
) -> None:
    result = subprocess.run(
        [*bergen_command(), "serve", "--listen", "127.0.0.1:0",
         "--database", f"sqlite:///{tmp_path / 'b.db'}", *args],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        env={**os.environ, **env}, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert said in result.stderr


WATCH_AND_HANG = """
import sys
import grpc
from bergen.v1 import bergen_pb2 as pb, bergen_pb2_grpc as rpc
stub = rpc.BergenServiceStub(grpc.insecure_channel(sys.argv[1]))
stream = stub.WatchMatch(pb.WatchMatchRequest(match_id=sys.argv[2]))
next(stream)
print("watching", flush=True)
for _ in stream:
    pass
"""


def test_a_watcher_that_stops_answering_gives_its_place_back(
    farm: ServerFarm, sqlite_url: str
) -> None:
    server = farm.start(sqlite_url, extra_args=["--max-watchers", "1", "--keepalive", "1"])
    with Client(server.target) as client:
        match_id = client.create(2).match_id
        hung = subprocess.Popen(
            [sys.executable, "-c", WATCH_AND_HANG, server.target, match_id],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert hung.stdout is not None and hung.stdout.readline().strip() == "watching"
            # Its only place is taken...
            refused = Watcher(client, match_id)
            refused.start()
            assert refused.finished.wait(60) and refused.error is not None
            assert refused.error.code() == Code.RESOURCE_EXHAUSTED  # type: ignore[attr-defined]
            # ...until the watcher stops answering (its process frozen, its connection open):
            # the unanswered keepalive ping ends its stream.
            os.kill(hung.pid, signal.SIGSTOP)
            deadline = time.monotonic() + 60
            while True:
                again = Watcher(client, match_id)
                again.start()
                assert again.first.wait(60)
                if again.error is None:
                    break
                assert again.error.code() == Code.RESOURCE_EXHAUSTED  # type: ignore[attr-defined]
                assert time.monotonic() < deadline, "the frozen watcher kept its place"
                time.sleep(0.5)
            assert again.items[0].HasField("view")
            again.call.cancel()
            assert again.finished.wait(60)
        finally:
            hung.kill()
            hung.wait(timeout=10)


def test_the_server_settles_its_heap_before_it_says_where_it_listens(
    farm: ServerFarm, sqlite_url: str
) -> None:
    """Once up, `bergen serve` keeps what start-up left alive out of later collections
    (`settle_heap`), before it writes its port file, so no full collection under load walks
    the hundreds of thousands of objects a running server holds."""
    server = farm.start(sqlite_url)
    line = re.compile(r"heap settled: (\d+) objects kept out of later collections")
    deadline = time.monotonic() + 60  # the log is written by a thread of its own
    while (found := line.search(server.log())) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert found is not None, server.log_tail()
    assert int(found.group(1)) > 20_000


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="thread names are read in /proc")
def test_the_server_s_threads_carry_their_names_in_the_operating_system(
    farm: ServerFarm, sqlite_url: str
) -> None:
    """`top -H` and /proc tell the server's parts apart (`bergen.server.threads`)."""
    server = farm.start(sqlite_url)
    assert server.health() == health_pb2.HealthCheckResponse.SERVING
    with Client(server.target) as client:
        client.create()  # a call: a pool thread
    task = Path(f"/proc/{server.proc.pid}/task")
    names = set()
    for tid in task.iterdir():
        with suppress(OSError):
            names.add((tid / "comm").read_text().strip())
    expected = {
        "bergen-feed",
        "bergen-listing",
        "bergen-ratings",
        "bergen-log",
        "bergen-clocks",
        "bergen-janitor",
        "bergen-loop",
    }
    assert expected <= names, sorted(names)
    assert any(n.startswith("bergen-rpc_") for n in names), sorted(names)
