"""A reference gRPC server for `bench.grpc_bench`: `bergen serve`'s gRPC settings, one job.

    python -m bench._ref_server --kind insert|eventsourcing --database URL --port-file FILE
        [--processes N]
    python -m bench._ref_server --kind echo --answer FILE --port-file FILE

It serves `bergen.v1.BergenService/Play` (so the benchmark's client is the same for every server)
with the thread pool, message limits and channel options of `bergen.server.main`, and a
handler that does nothing but:

- `insert`: one INSERT + COMMIT through psycopg 3 of a row like an event (stream id, seq, type,
  ~300 bytes of JSON payload, metadata, chained-hash bytes, salt) into `bench_limit_events`, a
  copy of the `events` table with the same columns, defaults and indexes: the serial limit;
- `eventsourcing`: one event saved through the `eventsourcing` library's PostgreSQL persistence,
  one aggregate per client (the request's match_id names the client): the peer.

The request's `expected_version` is the client's count of earlier calls, so the row's seq is
`expected_version + 1`. The answer is an empty PlayResponse.

- `echo` (for `bench.ratings_bench`): `ListLeaderboard` answered with the bytes of the file
  `--answer` (a real page, as `bergen serve` answered it), whatever the request: gRPC's own
  cost of a call of that size, with no work behind it.

With `--processes N` (to compare with `bergen serve --workers N`), N forked processes serve one
port with SO_REUSEPORT, each with its own pool (and its own aggregates: a client keeps its one
connection, so it keeps its process); the first starts alone, so that only it creates tables.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import queue
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import grpc
import psycopg

from bench.harness import ExitStatus
from bergen.server.bootstrap import CALL_WORKERS, server_options
from bergen.server.config import MAX_WATCHERS
from bergen.server.servicer import SERVICE
from bergen.server.threads import pool_thread_named
from bergen.v1 import bergen_pb2 as pb

LIMIT_TABLE = "bench_limit_events"

PAYLOAD: dict[str, Any] = {
    "hand": 3,
    "seat": 1,
    "tile": {"low": 3, "high": 5},
    "end": "left",
    "line": [[i % 7, (i + 3) % 7] for i in range(24)],
    "scores": [12, 9],
}
PAYLOAD_JSON = json.dumps(PAYLOAD, separators=(",", ":"), sort_keys=True)
METADATA_JSON = json.dumps(
    {
        "actor": "seat:1",
        "command_id": None,
        "rules_version": "bergen-rules/1",
        "extra": {"command": "seat 1 play 3-5 left"},
    },
    separators=(",", ":"),
    sort_keys=True,
)
_INSERT = (
    f"INSERT INTO {LIMIT_TABLE} (stream_id, seq, type, schema_version, payload, metadata,"
    " prev_hash, hash, salt) VALUES (%s, %s::bigint, %s, %s::int, %s::json, %s::json, %b, %b, %b)"
)


class _Pool:
    """Autocommit connections made on demand, LIFO, at most `size` in use (as the store's)."""

    def __init__(self, conninfo: str, size: int = 8) -> None:
        self._conninfo = conninfo
        self._idle: queue.LifoQueue[psycopg.Connection[Any]] = queue.LifoQueue()
        self._slots = threading.BoundedSemaphore(size)

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        with self._slots:
            try:
                conn = self._idle.get_nowait()
            except queue.Empty:
                conn = psycopg.connect(self._conninfo, autocommit=True, prepare_threshold=0)
            yield conn
            self._idle.put(conn)


REF_WORKERS = MAX_WATCHERS + CALL_WORKERS
"""The thread pool of the threaded server Bergen's was before its streams moved to
grpc.aio: the reference's stays as it was measured."""


def insert_handler(url: str) -> Callable[[bytes], bytes]:
    """One INSERT + COMMIT per call."""
    conninfo = "postgresql://" + url.split("://", 1)[1]
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE IF NOT EXISTS {LIMIT_TABLE} (LIKE events INCLUDING ALL)")
    pool = _Pool(conninfo)
    payload_bytes = PAYLOAD_JSON.encode()
    salt = bytes(16)

    def handle(data: bytes) -> bytes:
        req = pb.PlayRequest.FromString(data)
        seq = req.expected_version + 1
        prev = hashlib.sha256(f"{req.match_id}/{seq - 1}".encode()).digest()
        digest = hashlib.sha256(prev + payload_bytes).digest()
        row = (req.match_id, seq, "TilePlayed", 1, PAYLOAD_JSON, METADATA_JSON, prev, digest, salt)
        with pool.connection() as conn:
            conn.execute(_INSERT, row)
        return b""

    return handle


def eventsourcing_handler(url: str) -> Callable[[bytes], bytes]:
    """One eventsourcing save of one event per call, one aggregate per client."""
    from eventsourcing.application import Application
    from eventsourcing.domain import Aggregate, event

    class Match(Aggregate):
        def __init__(self) -> None:
            self.plays = 0

        @event("TilePlayed")
        def play(self, payload: dict[str, Any]) -> None:
            self.plays += 1

    parts = urlsplit(url)
    app: Application[Any] = Application(
        env={
            "PERSISTENCE_MODULE": "eventsourcing.postgres",
            "POSTGRES_DBNAME": parts.path.lstrip("/"),
            "POSTGRES_HOST": parts.hostname or "127.0.0.1",
            "POSTGRES_PORT": str(parts.port or 5432),
            "POSTGRES_USER": parts.username or "postgres",
            "POSTGRES_PASSWORD": parts.password or "",
        }
    )
    aggregates: dict[str, Match] = {}
    lock = threading.Lock()

    def handle(data: bytes) -> bytes:
        req = pb.PlayRequest.FromString(data)
        with lock:
            match = aggregates.get(req.match_id)
        if match is None:  # the client's first call saves the aggregate's creation (one event)
            match = Match()
            with lock:
                aggregates[req.match_id] = match
        else:
            match.play(PAYLOAD)
        app.save(match)
        return b""

    return handle


def serve(kind: str, url: str, port_file: str, port: int = 0, answer: bytes = b"") -> int:
    method = "ListLeaderboard" if kind == "echo" else "Play"
    work: Callable[[bytes], bytes]
    if kind == "echo":
        work = lambda _data: answer  # noqa: E731
    else:
        work = insert_handler(url) if kind == "insert" else eventsourcing_handler(url)

    def play(data: bytes, context: grpc.ServicerContext) -> bytes:
        try:
            return work(data)
        except Exception as e:  # a reference server must say why it failed, then go on
            print(f"_ref_server {kind}: {type(e).__name__}: {e}", file=sys.stderr)
            context.abort(grpc.StatusCode.INTERNAL, f"{type(e).__name__}: {e}")
        raise AssertionError("unreachable")

    server = grpc.server(
        futures.ThreadPoolExecutor(
            max_workers=REF_WORKERS, thread_name_prefix="ref-rpc", initializer=pool_thread_named
        ),
        options=server_options(reuse_port=port != 0),
    )
    handler: grpc.RpcMethodHandler[bytes, bytes] = grpc.unary_unary_rpc_method_handler(
        play, request_deserializer=None, response_serializer=None
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SERVICE, {method: handler}),)
    )
    port = server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    with open(port_file + ".tmp", "w", encoding="utf-8") as f:
        f.write(str(port))
    os.replace(port_file + ".tmp", port_file)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    done.wait()
    server.stop(2).wait()
    return ExitStatus.OK


def serve_processes(kind: str, url: str, port_file: str, processes: int) -> int:
    """`processes` forked servers on one port (see the module); SIGTERM stops them all."""
    from bergen.server.supervisor import hold_port

    port, held = hold_port("127.0.0.1:0")
    children: list[int] = []
    for i in range(processes):
        own = f"{port_file}.{i}"
        pid = os.fork()
        if pid == 0:  # no thread has started yet in this process: forking is safe
            for s in held:
                s.close()
            os._exit(serve(kind, url, own, port))
        children.append(pid)
        while not os.path.exists(own):
            if os.waitpid(pid, os.WNOHANG) != (0, 0):
                print(f"_ref_server {kind}: process {i} exited", file=sys.stderr)
                return ExitStatus.CRASHED
            threading.Event().wait(0.02)
    with open(port_file + ".tmp", "w", encoding="utf-8") as f:
        f.write(str(port))
    os.replace(port_file + ".tmp", port_file)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    while not done.wait(0.5):
        pass
    for pid in children:
        os.kill(pid, signal.SIGTERM)
    for pid in children:
        os.waitpid(pid, 0)
    for s in held:
        s.close()
    return ExitStatus.OK


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench._ref_server", description=__doc__)
    parser.add_argument("--kind", choices=["insert", "eventsourcing", "echo"], required=True)
    parser.add_argument("--database", help="the PostgreSQL URL (insert, eventsourcing)")
    parser.add_argument("--answer", help="the file of the answer's bytes (echo)")
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--processes", type=int, default=1)
    args = parser.parse_args()
    if args.kind == "echo":
        if args.answer is None:
            parser.error("--kind echo needs --answer")
        with open(args.answer, "rb") as f:
            return serve(args.kind, "", args.port_file, answer=f.read())
    if args.database is None:
        parser.error(f"--kind {args.kind} needs --database")
    if args.processes > 1:
        return serve_processes(args.kind, args.database, args.port_file, args.processes)
    return serve(args.kind, args.database, args.port_file)


if __name__ == "__main__":
    sys.exit(main())
