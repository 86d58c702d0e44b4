"""`bergen serve`: the gRPC server on the embedded SQLite store or on PostgreSQL."""

from __future__ import annotations

import argparse
import faulthandler
import gc
import logging
import os
import signal
import sqlite3
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from bergen.api.exit_status import ExitStatus
from bergen.api.helptext import HelpFormatter, at_least_one, error_line, examples
from bergen.api.signing import DEFAULT_KEY_FILE, RecordSigner
from bergen.api.state import ORGANISER_TOKEN_FILE, forget_token_file, record_token_file
from bergen.domain.errors import StorageUnavailable

from . import auth
from .app import Application, Settings, build_application
from .clocks import ClockKeeper
from .edge import CallLog, CallObserver, interceptors
from .feed import EventFeed, PostgresNotifier, postgres_listener
from .identity import Caller, Identity
from .janitor import SEATING_TIMEOUT_S, Janitor
from .keys import DEFAULT_LOG_KEY_FILE, LOG_KEY_ENV, LogKeys
from .limits import (
    CREATES_PER_MINUTE,
    JOINS_PER_MINUTE,
    WATCHERS_PER_CLIENT,
    ClientLimits,
    Limits,
)
from .logs import FORMATS, log_in_background
from .metrics import Metrics, parse_address, seed_in_background
from .observed import ObservedStore
from .servicer import SERVICE, SERVICE_DESCRIPTOR, generic_handler
from .store import EventStore, backend_of, open_store, schema_is_behind, upgrade_to_head
from .store.url import DEFAULT_DATABASE_URL, live_conninfo, redact, sqlite_path
from .threads import STOP_WAIT_S, Thread, pool_thread_named
from .tls import ServerTls, TlsSettingsError, is_local, load_server_tls
from .tournament_manager import TournamentManager
from .worker import Worker

log = logging.getLogger("bergen.server")

DEFAULT_LISTEN = "127.0.0.1:50051"
ORGANISER_TOKEN_ENV = "BERGEN_ORGANISER_TOKEN"
MAX_REQUEST_BYTES = 64 * 1024
"""Past this a request is refused (RESOURCE_EXHAUSTED, reason REQUEST_TOO_LARGE) by the edge;
gRPC itself reads at most twice this, and refuses more without a reason."""
MAX_RESPONSE_BYTES = 16 * 1024 * 1024
MAX_WATCHERS = 200
"""Open WatchMatch streams a server keeps at once by default; each holds a thread."""
CALL_WORKERS = 56
"""Threads kept for every other call, however many streams are open."""
WORKERS = MAX_WATCHERS + CALL_WORKERS
GRACE_SECONDS = 10.0
SHUTDOWN_LIMIT_S = 20.0
"""From the signal to stop to the process's end, at most (the stop itself takes the grace and
a little): past it `bergen serve` writes the threads still running and their stacks to stderr
and ends the process (`exit_anyway_after`), so that nothing keeps a stopped server alive (a
call's thread that never returns, which the interpreter waits for at exit, or a step blocked
on a database that is gone)."""
HARD_LIMIT_S = SHUTDOWN_LIMIT_S + 5.0
"""The last resort, for a process whose Python code cannot run at all any more (a lock that
is never released, a C call that never returns holding the interpreter's lock): the
interpreter's own fault handler (`faulthandler.dump_traceback_later`, a C thread) writes
every thread's stack to stderr under a line `Timeout (0:00:25)!` and exits with status 1."""
EXIT_HELD = "bergen serve: the process did not end"
"""How the line `exit_anyway_after` writes begins."""
HARD_EXIT = "Timeout (0:"
"""How the fault handler's line begins when `HARD_LIMIT_S` ends the process."""
KEEPALIVE_SECONDS = 60.0
"""How long a call may go without a sign of its client before the server pings it (and
how long, at most 20 s, an answer may take before the connection is dropped)."""


@dataclass
class Running:
    server: grpc.Server
    port: int
    feed: EventFeed
    app: Application
    health: health.HealthServicer
    store: EventStore
    janitor: Janitor | None = None
    clocks: ClockKeeper | None = None
    tournaments: TournamentManager | None = None
    metrics: Metrics | None = None
    metrics_address: tuple[str, int] | None = None
    """Where /metrics is served (host, port); None when it is not."""
    tracer_provider: Any = None
    """The OpenTelemetry SDK's provider `bergen serve --trace` set up, flushed at stop."""
    replica: str = ""
    """This process's replica id (in the NOTIFY payloads it sends on PostgreSQL)."""
    _background: threading.Event | None = None

    def stop(self, grace: float = GRACE_SECONDS) -> None:
        """Refuse new calls, end watch streams, let in-flight commands finish (for `grace`
        seconds; then they are cancelled), and stop the background threads
        (`stop_background`)."""
        self.health.enter_graceful_shutdown()
        if self._background is not None:
            self._background.set()
        stopped = self.server.stop(grace)  # refuses new calls; returns at once
        workers = [w for w in (self.janitor, self.clocks, self.tournaments) if w is not None]
        stop_background(workers, self.feed, grace)
        stopped.wait()
        self.store.close()
        if self.metrics is not None:
            self.metrics.stop()
        if self.tracer_provider is not None:
            self.tracer_provider.shutdown()


def stop_background(workers: Sequence[Worker], feed: EventFeed, grace: float) -> None:
    """Ask the background threads to stop (the feed ends its watch streams), then wait for
    them together, at most `grace` or STOP_WAIT_S, whichever is longer: a step blocked on a
    database that is gone holds the stop that long once, not once a thread. Those still busy
    are named in a warning and left to end with the process (daemon threads)."""
    for w in workers:
        w.ask_to_stop()
    feed.ask_to_stop()
    wait_s = max(grace, STOP_WAIT_S)
    deadline = time.monotonic() + wait_s
    late = [type(w).__name__ for w in workers if not w.wait_stopped(deadline)]
    if not feed.wait_stopped(deadline):
        late.append("EventFeed")
    if late:
        log.warning(
            "stopping: %s still busy after %.0f s; left to end with the process",
            ", ".join(late), wait_s,
        )  # fmt: skip


class SchemaBehind(RuntimeError):
    """The database schema is older than this server's; it was told not to migrate."""


_DRIVERS = ("sqlalchemy", "alembic", "psycopg", "sqlite3")


@contextmanager
def _opening(database_url: str) -> Iterator[None]:
    """Raises StorageUnavailable, naming the database (password hidden), for a database
    that cannot be reached or opened at start; the drivers' own errors say why."""
    try:
        yield
    except StorageUnavailable:
        raise
    except Exception as e:
        if not isinstance(e, OSError) and type(e).__module__.split(".")[0] not in _DRIVERS:
            raise
        why = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise StorageUnavailable(f"cannot open {redact(database_url)}: {why[:300]}") from e


def check_writable(database_url: str) -> None:
    """Raises StorageUnavailable, saying why in one line, when the database takes no writes:
    a read-only SQLite file, directory or filesystem; a read-only PostgreSQL server or
    transaction, or a role that may not insert events. Nothing is written."""
    where = redact(database_url)
    if backend_of(database_url) == "sqlite":
        conn = sqlite3.connect(sqlite_path(database_url), timeout=5.0, isolation_level=None)
        try:
            # A write that is rolled back: SQLite refuses it on a file, directory or
            # filesystem it cannot write, before anything reaches the disk.
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("UPDATE alembic_version SET version_num = version_num")
            conn.execute("ROLLBACK")
        except sqlite3.Error as e:
            raise StorageUnavailable(f"{where} cannot be written: {e}") from e
        finally:
            conn.close()
        return
    import psycopg

    try:
        with psycopg.connect(live_conninfo(database_url)) as pg:
            row = pg.execute(
                "SELECT current_setting('transaction_read_only'),"
                " has_table_privilege('events', 'INSERT')"
            ).fetchone()
    except psycopg.Error as e:
        why = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise StorageUnavailable(f"cannot open {where}: {why[:300]}") from e
    assert row is not None
    if row[0] == "on":
        raise StorageUnavailable(f"{where} cannot be written: the database is read-only")
    if not row[1]:
        raise StorageUnavailable(f"{where} cannot be written: the role may not insert events")


def create_server(
    listen: str = DEFAULT_LISTEN,
    database_url: str = DEFAULT_DATABASE_URL,
    settings: Settings | None = None,
    migrate: bool = True,
    max_watchers: int = MAX_WATCHERS,
    keepalive_s: float = KEEPALIVE_SECONDS,
    limits: Limits | None = None,
    seating_timeout_s: float = SEATING_TIMEOUT_S,
    tls: ServerTls | None = None,
    *,
    log_keys: LogKeys,
    metrics: Metrics | None = None,
    metrics_listen: str | None = None,
    tracer: Any = None,
    read_database_url: str | None = None,
    reuse_port: bool = False,
) -> Running:
    """Open the store (running migrations, or refusing when the schema is behind and
    `migrate` is false), start the feed and the server. Returns it with the bound port, so
    `listen` may end in `:0`. Raises SchemaBehind, or RuntimeError when the port is taken.

    At most `max_watchers` WatchMatch streams are open at once (more are refused with
    RESOURCE_EXHAUSTED), so streams can never take the threads that commands need; a stream
    whose client vanished without closing its connection ends once a keepalive ping goes
    unanswered, `keepalive_s` after the client was last heard from. With `tls` it speaks
    only TLS (and with its client CA, only to clients holding a certificate that CA signed).
    Every event is written authenticated under `log_keys`, and checked with them when read.

    With `metrics`, the server moves them (`bergen.server.metrics`), and serves them over HTTP
    on `metrics_listen` (HOST:PORT) when given (raises OSError when that cannot be bound).
    With `tracer` (an OpenTelemetry tracer), each call is a span and the store's work in it
    its children (`bergen.server.tracing`).
    With `read_database_url` (a hot standby of the PostgreSQL primary), what only reads is
    served by the standby, never older than what this process has seen
    (bergen.server.store.routed).
    With `reuse_port`, the port may be shared with other processes of this user that ask for
    the same (`bergen serve --workers N`, whose supervisor refuses a port another program
    holds); without it a port already taken is refused.
    """
    if max_watchers < 1:
        raise ValueError(f"max_watchers must be at least 1, not {max_watchers}")
    with _opening(database_url):
        if schema_is_behind(database_url):
            if not migrate:
                raise SchemaBehind(
                    f"the schema of {redact(database_url)} is behind this server: run "
                    "`bergen migrate --database URL`, or start without --no-migrate"
                )
            upgrade_to_head(database_url)
        store = open_store(database_url, log_keys=log_keys, read_url=read_database_url)
    try:
        check_writable(database_url)
    except BaseException:
        store.close()
        raise
    observers: list[CallObserver] = [CallLog()]
    call_tracer = None
    if tracer is not None:
        from .tracing import CallTracer

        call_tracer = CallTracer(tracer)
        observers.append(call_tracer)
    if metrics is not None:
        observers.append(metrics)
    if metrics is not None or call_tracer is not None:
        store = ObservedStore(
            store,
            metrics,
            call_tracer.span if call_tracer is not None else None,
            backend_of(database_url),
        )
    listen_fn = None
    notifier = None
    poll = 0.05
    replica = uuid.uuid4().hex
    if backend_of(database_url) == "postgresql":
        listen_fn = postgres_listener(
            live_conninfo(database_url),
            replica,
            metrics.notified if metrics is not None else None,
        )
        notifier = PostgresNotifier(live_conninfo(database_url), replica)
        poll = 0.1
    feed = EventFeed(store, poll_interval=poll, listen=listen_fn, notifier=notifier)
    app = build_application(store, feed, settings or Settings(), log_keys)
    server = grpc.server(
        futures.ThreadPoolExecutor(
            max_workers=max_watchers + CALL_WORKERS,
            thread_name_prefix="bergen-rpc",
            initializer=pool_thread_named,
        ),
        options=server_options(keepalive_s, reuse_port),
        interceptors=interceptors(MAX_REQUEST_BYTES, observers),
    )
    organiser = Identity((settings or Settings()).organiser_token)
    client_limits = ClientLimits(
        limits or Limits(), trusted=lambda token: organiser.is_organiser(Caller(token))
    )
    server.add_generic_rpc_handlers((generic_handler(app, max_watchers, client_limits),))
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (
            SERVICE,
            health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
            reflection.SERVICE_NAME,
        ),
        server,
    )
    if tls is None:
        port = server.add_insecure_port(listen)
    else:
        port = server.add_secure_port(listen, tls.credentials())
    if port == 0:
        raise RuntimeError(f"cannot listen on {listen}")
    clocks = ClockKeeper(store, app.repository, feed.listing, app.commands)
    feed.listen(clocks.note)
    tournaments = TournamentManager(app.tournaments, app.work, app.repository)
    feed.listen(tournaments.note)
    feed.start()
    clocks.start()
    tournaments.start()
    janitor = Janitor(store, feed.listing, app.commands, seating_timeout_s)
    janitor.start()
    background = threading.Event()
    metrics_address = None
    if metrics is not None:
        _measure(metrics, app, clocks, feed, background)
        if metrics_listen is not None:
            try:
                metrics_address = metrics.serve(metrics_listen)
            except BaseException as e:
                background.set()
                server.stop(0)
                stop_background([janitor, clocks, tournaments], feed, 0)
                store.close()
                if isinstance(e, OSError):
                    why = e.strerror or str(e)
                    raise RuntimeError(f"cannot serve metrics on {metrics_listen}: {why}") from e
                raise
    server.start()
    for name in ("", SERVICE):
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return Running(
        server,
        port,
        feed,
        app,
        health_servicer,
        store,
        janitor,
        clocks,
        tournaments,
        metrics,
        metrics_address,
        replica=replica,
        _background=background,
    )


def _measure(
    metrics: Metrics,
    app: Application,
    clocks: ClockKeeper,
    feed: EventFeed,
    stop: threading.Event,
) -> None:
    """Hook `metrics` to what moves them beyond the edge and the store."""
    app.work.on_retry = metrics.retried
    for method in SERVICE_DESCRIPTOR.methods:
        if method.server_streaming:
            metrics.streams.labels(method.name)  # shown at 0 before the first stream
    feed.listen(metrics.live.note)
    seed_in_background(metrics.live, feed.listing, stop)
    timeouts = metrics.count(
        "bergen_clock_timeouts",
        "Timeouts the clock keeper applied (a seat's clock fell; RULES.md section 11).",
        (),
    )
    timeouts.add((), lambda: clocks.applied)
    caches = metrics.count(
        "bergen_cache_lookups",
        "Lookups of the server's caches of folded state: hit (found here; a match's newer "
        "events may still be read) or miss (read and folded from the store).",
        ("cache", "result"),
    )
    repo, tournaments = app.repository, app.tournaments
    caches.add(("matches", "hit"), lambda: repo.hits)
    caches.add(("matches", "miss"), lambda: repo.misses)
    caches.add(("tournaments", "hit"), lambda: tournaments.repository.hits)
    caches.add(("tournaments", "miss"), lambda: tournaments.repository.misses)
    caches.add(("tournament_records", "hit"), lambda: tournaments.record_hits)
    caches.add(("tournament_records", "miss"), lambda: tournaments.record_misses)


def server_options(
    keepalive_s: float = KEEPALIVE_SECONDS, reuse_port: bool = False
) -> list[tuple[str, Any]]:
    """The gRPC server's options: message size limits, no port sharing (unless `reuse_port`:
    the workers of `bergen serve --workers N`), and HTTP/2 keepalive pings while calls are
    open (however long a watched match stays quiet), so that a dead client's stream ends and
    gives its thread back."""
    every_ms = max(1, round(keepalive_s * 1000))
    return [
        ("grpc.max_receive_message_length", 2 * MAX_REQUEST_BYTES),
        ("grpc.max_send_message_length", MAX_RESPONSE_BYTES),
        ("grpc.so_reuseport", 1 if reuse_port else 0),
        ("grpc.keepalive_time_ms", every_ms),
        ("grpc.keepalive_timeout_ms", min(every_ms, 20_000)),
        ("grpc.keepalive_permit_without_calls", 0),
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.http2.ping_timeout_ms", min(every_ms, 20_000)),
    ]


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0.1 <= value <= 86_400:
        raise argparse.ArgumentTypeError(f"must be 0.1 to 86400 seconds, not {text}")
    return value


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "serve",
        help="run the game server",
        description="Run the Bergen game server: the gRPC service every client speaks to. "
        "With no options it keeps its events in ./bergen.db (SQLite) and its keys and "
        "organiser token beside it, each made on first start. Several replicas on one "
        "PostgreSQL database serve the same matches.",
        epilog=examples(
            "bergen serve                       # on 127.0.0.1:50051, events in ./bergen.db",
            "bergen serve --listen 0.0.0.0:50051 --tls-cert server.pem --tls-key server.key",
            "bergen serve --database postgresql://bergen_app@db1/bergen --workers 2 --metrics "
            "127.0.0.1:9090",
        ),
        formatter_class=HelpFormatter,
    )
    p.add_argument(
        "--listen",
        default=os.environ.get("BERGEN_LISTEN", DEFAULT_LISTEN),
        metavar="HOST:PORT",
        help=f"where to listen (default $BERGEN_LISTEN, else {DEFAULT_LISTEN}; port 0 picks a "
        "free one)",
    )
    p.add_argument(
        "--database",
        default=os.environ.get("BERGEN_DATABASE_URL", DEFAULT_DATABASE_URL),
        metavar="URL",
        help="postgresql://... or sqlite:///path (default: $BERGEN_DATABASE_URL, "
        f"else {DEFAULT_DATABASE_URL})",
    )
    p.add_argument(
        "--read-database",
        default=os.environ.get("BERGEN_READ_DATABASE_URL") or None,
        metavar="URL",
        help="postgresql://... of a hot standby of --database: views, replays, records, "
        "audit logs, listings and watching read it, never older than what this server has "
        "shown (default: $BERGEN_READ_DATABASE_URL, else every read on --database)",
    )
    p.add_argument(
        "--organiser-token-file",
        metavar="FILE",
        help="file holding the organiser token (else $BERGEN_ORGANISER_TOKEN, else "
        f"{ORGANISER_TOKEN_FILE} beside the signing key, made there owner-only on first start "
        "and named in the state folder for the organiser's commands on this machine)",
    )
    p.add_argument(
        "--no-organiser",
        action="store_true",
        help="serve with no organiser token at all: nobody can create tournaments, start "
        "them or abandon matches",
    )
    p.add_argument(
        "--restrict-create", action="store_true", help="only the organiser token may create matches"
    )
    p.add_argument(
        "--no-migrate",
        action="store_true",
        help="refuse to start when the schema is behind instead of migrating",
    )
    p.add_argument(
        "--max-watchers",
        type=at_least_one,
        default=os.environ.get("BERGEN_MAX_WATCHERS", str(MAX_WATCHERS)),
        metavar="N",
        help="match streams (players and spectators following a match) open at once; more "
        "are refused as too many, with a retry hint "
        f"(default: $BERGEN_MAX_WATCHERS, else {MAX_WATCHERS})",
    )
    p.add_argument(
        "--keepalive",
        type=_positive_seconds,
        default=KEEPALIVE_SECONDS,
        metavar="SECONDS",
        help="ping a client heard nothing from for this long while it has calls open, and "
        "drop its connection when the ping goes unanswered (at most 20 s), so that a vanished "
        f"watcher's stream ends (default {KEEPALIVE_SECONDS:g})",
    )
    p.add_argument(
        "--create-rate",
        type=at_least_one,
        default=CREATES_PER_MINUTE,
        metavar="N",
        help="matches one client (its address, or the organiser token) may create a minute; "
        f"more are refused as too many, with a retry hint (default {CREATES_PER_MINUTE})",
    )
    p.add_argument(
        "--join-rate",
        type=at_least_one,
        default=JOINS_PER_MINUTE,
        metavar="N",
        help=f"seats one client may take a minute (default {JOINS_PER_MINUTE})",
    )
    p.add_argument(
        "--max-watchers-per-client",
        type=at_least_one,
        default=WATCHERS_PER_CLIENT,
        metavar="N",
        help="match streams one client (its address, or its token) may hold open at once "
        f"(default {WATCHERS_PER_CLIENT})",
    )
    p.add_argument(
        "--limit-loopback",
        action="store_true",
        help="hold clients on a loopback address to the per-client limits too (by default they "
        "are not: behind a reverse proxy on this machine every client has its address)",
    )
    p.add_argument(
        "--seating-timeout",
        type=_positive_seconds,
        default=SEATING_TIMEOUT_S,
        metavar="SECONDS",
        help="abandon a match still seating this long after it was created, so that nobody "
        f"can hold seats for ever (default {SEATING_TIMEOUT_S:g})",
    )
    p.add_argument(
        "--port-file", metavar="FILE", help="write the bound port to this file once serving"
    )
    p.add_argument(
        "--workers",
        type=at_least_one,
        default=os.environ.get("BERGEN_WORKERS", "1"),
        metavar="N",
        help="serve from N processes sharing the port, each a replica of the "
        "others on one PostgreSQL database, under a supervisor that restarts a worker that "
        "dies and stops them all on SIGTERM; PostgreSQL only when N > 1 (default: "
        "$BERGEN_WORKERS, else 1)",
    )
    p.add_argument(
        "--tls-cert",
        default=os.environ.get("BERGEN_TLS_CERT") or None,
        metavar="FILE",
        help="speak TLS only, presenting this certificate chain (PEM; else $BERGEN_TLS_CERT)",
    )
    p.add_argument(
        "--tls-key",
        default=os.environ.get("BERGEN_TLS_KEY") or None,
        metavar="FILE",
        help="the private key of --tls-cert (PEM, unencrypted; else $BERGEN_TLS_KEY)",
    )
    p.add_argument(
        "--tls-client-ca",
        default=os.environ.get("BERGEN_TLS_CLIENT_CA") or None,
        metavar="FILE",
        help="mutual TLS: accept only clients whose certificate this CA signed (PEM; else "
        "$BERGEN_TLS_CLIENT_CA)",
    )
    p.add_argument(
        "--insecure",
        action="store_true",
        help="allow a listen address off this machine without TLS (seat and organiser tokens "
        "then cross the network in clear)",
    )
    p.add_argument(
        "--signing-key",
        default=os.environ.get("BERGEN_SIGNING_KEY", DEFAULT_KEY_FILE),
        metavar="FILE",
        help="Ed25519 private key (PEM) that signs match records; made there on first start "
        f"(default: $BERGEN_SIGNING_KEY, else ./{DEFAULT_KEY_FILE}). Give every replica the "
        "same file.",
    )
    p.add_argument(
        "--log-key",
        default=os.environ.get(LOG_KEY_ENV) or None,
        metavar="FILE",
        help="the keys that authenticate every stored event (one '<id> <hex>' a line; the "
        f"last writes, all verify); made there on first start (default: ${LOG_KEY_ENV}, else "
        f"{DEFAULT_LOG_KEY_FILE} beside the signing key). Give every replica the same file.",
    )
    add_observability_arguments(p)
    p.set_defaults(func=serve)


def add_observability_arguments(p: argparse.ArgumentParser) -> None:
    """--metrics, --log-format, --trace."""
    p.add_argument(
        "--metrics",
        default=os.environ.get("BERGEN_METRICS") or None,
        metavar="HOST:PORT",
        help="serve Prometheus metrics over HTTP at http://HOST:PORT/metrics (port 0 picks "
        "one; else $BERGEN_METRICS; off by default). They name RPCs, status codes and counts "
        "only: no match, token or player",
    )
    p.add_argument(
        "--log-format",
        choices=FORMATS,
        default=os.environ.get("BERGEN_LOG_FORMAT") or "text",
        help="text (the default; else $BERGEN_LOG_FORMAT) or json: one object a line with time, "
        "level, logger, message, and for a call rpc, status, duration_ms, peer, match_id, seat",
    )
    p.add_argument(
        "--trace",
        action="store_true",
        help="trace each call down to the store with OpenTelemetry (needs `pip install "
        "'bergen[tracing]'`), exported as the $OTEL_* environment says (OTLP by default); an "
        "$OTEL_TRACES_EXPORTER other than none turns it on too",
    )


def add_migrate_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "migrate",
        help="bring the database schema up to date",
        description="Bring a database's schema up to date (the event store's migrations), "
        "as the owner of the schema. `bergen serve` does it on start unless --no-migrate; "
        "with several replicas, run it once before starting them.",
        epilog=examples(
            "bergen migrate --database postgresql://bergen_owner@db1/bergen",
            "bergen migrate                     # ./bergen.db",
        ),
        formatter_class=HelpFormatter,
    )
    p.add_argument(
        "--database",
        default=os.environ.get("BERGEN_DATABASE_URL", DEFAULT_DATABASE_URL),
        metavar="URL",
        help=f"postgresql://... or sqlite:///path (default: $BERGEN_DATABASE_URL, else "
        f"{DEFAULT_DATABASE_URL})",
    )
    p.set_defaults(func=migrate_command)


def migrate_command(args: argparse.Namespace) -> int:
    if schema_is_behind(args.database):
        upgrade_to_head(args.database)
        print(f"migrated {redact(args.database)} to the current schema")
    else:
        print(f"{redact(args.database)} is up to date")
    return ExitStatus.SUCCESS


def add_token_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "token",
        help="make an organiser token",
        description="Print a fresh organiser token (256 random bits) for `bergen serve`. With "
        "--file, write one there (mode 0600) when the file has none, else check the one it "
        "holds as `bergen serve` would. (`bergen serve` makes one itself on first start when "
        "it is given none.)",
        epilog=examples(
            "bergen token --file /etc/bergen/organiser-token",
            "bergen token                        # print one, for $BERGEN_ORGANISER_TOKEN",
        ),
        formatter_class=HelpFormatter,
    )
    p.add_argument("--file", metavar="FILE", help="the organiser token file of `bergen serve`")
    p.set_defaults(func=token_command)


def token_command(args: argparse.Namespace) -> int:
    if args.file is None:
        print(auth.new_organiser_token())
        return ExitStatus.SUCCESS
    try:
        with open(args.file, encoding="utf-8") as f:
            held = f.read().strip()
    except FileNotFoundError:
        held = ""
    except OSError as e:
        print(error_line("token", f"{args.file}: {e.strerror or e}", "USAGE"), file=sys.stderr)
        return ExitStatus.USAGE
    if held:
        try:
            auth.check_organiser_token(held)
        except auth.WeakToken as e:
            print(error_line("token", f"{args.file}: {e}", "USAGE"), file=sys.stderr)
            return ExitStatus.USAGE
        print(f"{args.file} holds a good organiser token; left as it is")
        return ExitStatus.SUCCESS
    try:
        fd = os.open(args.file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(auth.new_organiser_token() + "\n")
    except OSError as e:
        print(error_line("token", f"{args.file}: {e.strerror or e}", "USAGE"), file=sys.stderr)
        return ExitStatus.USAGE
    print(f"wrote a fresh organiser token to {args.file}")
    return ExitStatus.SUCCESS


@dataclass(frozen=True)
class OwnToken:
    """The organiser token file this server uses because it was given none: where it is, and
    whether this start made it."""

    path: Path
    made: bool


def _organiser_token(args: argparse.Namespace) -> tuple[str | None, OwnToken | None]:
    """The organiser token, and the file of it when it is the server's own: from
    --organiser-token-file, else BERGEN_ORGANISER_TOKEN, else ORGANISER_TOKEN_FILE beside the
    signing key (`auth.organiser_token_file`: made on first start); none with --no-organiser.
    Raises ValueError, saying why in one line, for a file that cannot be read or made, or a
    token that `auth.check_organiser_token` refuses."""
    if getattr(args, "no_organiser", False):
        if args.organiser_token_file:
            raise ValueError("--no-organiser and --organiser-token-file: give one or the other")
        return None, None
    token = os.environ.get(ORGANISER_TOKEN_ENV) or None
    if args.organiser_token_file:
        try:
            with open(args.organiser_token_file, encoding="utf-8") as f:
                token = f.read().strip() or None
        except (OSError, UnicodeDecodeError) as e:
            why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            raise ValueError(f"--organiser-token-file {args.organiser_token_file}: {why}") from e
        if token is None:
            raise ValueError(f"--organiser-token-file {args.organiser_token_file}: it is empty")
    if token is not None:
        auth.check_organiser_token(token)
        return token, None
    path = Path(args.signing_key).absolute().with_name(ORGANISER_TOKEN_FILE)
    try:
        token, made = auth.organiser_token_file(path)
    except auth.WeakToken as e:
        raise ValueError(f"organiser token file {path}: {e}") from e
    except (OSError, UnicodeDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise ValueError(
            f"organiser token file {path}: {why} (give --organiser-token-file FILE, "
            f"{ORGANISER_TOKEN_ENV}, or --no-organiser)"
        ) from e
    return token, OwnToken(path, made)


def name_token_file(listen: str, port: int, token: str | None, own: OwnToken | None) -> None:
    """Say where the organiser token is (never the token), and name the server's own token
    file for the address it listens on in the state folder (`bergen.api.state`), so that the
    organiser's commands on this machine find it; with another token or none, forget any such
    name for the address (an earlier server's, whose token this one does not take). A state
    folder that cannot be written is a warning."""
    host = listen.rpartition(":")[0]
    address = f"{host}:{port}"
    if token is None:
        log.info("no organiser token: nobody can create tournaments on this server")
    elif own is not None:
        log.info(
            "organiser token %s %s (the token itself is never logged)",
            "made now in" if own.made else "read from",
            own.path,
        )
    if own is None:
        with suppress(OSError):
            forget_token_file(address)
        return
    try:
        pointer = record_token_file(address, own.path)
    except OSError as e:
        log.warning(
            "cannot name the organiser token file for %s in the state folder (%s): give the "
            "organiser's commands --organiser-token-file %s",
            address,
            e.strerror or e,
            own.path,
        )
        return
    log.info("organiser token file named for %s in %s", address, pointer)


def settle_heap() -> int:
    """Once the server is up: collect what start-up left, and keep every object alive then (the
    modules, the server, its threads and stores) out of later collections.

    CPython's full collection walks every tracked object while holding the interpreter lock.
    A started server holds about a hundred thousand that never become garbage, so a full
    collection under load stopped every call for tens of milliseconds (58 ms at 8 Play clients
    in `bench.grpc_bench`, 5 ms after this); now it walks only what calls have made since (see
    `gc.freeze`). Returns how many objects are kept out.
    """
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def exit_anyway_after(
    limit_s: float,
    stopped: threading.Event,
    out: Any = None,
    end: Callable[[int], object] = os._exit,
) -> threading.Thread:
    """Start a daemon thread that, if the process is still alive `limit_s` seconds on, writes
    to `out` (stderr) which threads are still running, with their stacks, then ends it with
    `end`: status SUCCESS when `stopped` is set (the server stopped in order; only its exit is
    held), else ERROR. The thread is returned (a test joins it)."""

    def watch() -> None:
        time.sleep(limit_s)
        stream = sys.stderr if out is None else out
        done = stopped.is_set()
        names = ", ".join(
            f"{t.name} (0x{t.ident or 0:x})" for t in threading.enumerate()
            if t is not threading.current_thread()
        )  # fmt: skip
        with suppress(Exception):  # a closed stderr must not keep the process alive either
            stream.write(
                f"{EXIT_HELD} {limit_s:.0f} s after the signal to stop "
                f"({'it stopped in order; its exit is held' if done else 'its stop is held'});"
                f" threads still running: {names}\n"
            )
            stream.flush()
            faulthandler.dump_traceback(file=stream, all_threads=True)
            stream.flush()
        end(ExitStatus.SUCCESS if done else ExitStatus.ERROR)

    thread = Thread(target=watch, name="bergen-exit", daemon=True)
    thread.start()
    return thread


def arm_exit_limits(
    stopped: threading.Event, limit_s: float = SHUTDOWN_LIMIT_S, hard_s: float = HARD_LIMIT_S
) -> None:
    """From now, the process ends within `limit_s` (`exit_anyway_after`), and, should its
    Python code no longer run at all, within `hard_s` (the fault handler's timer); `stopped`
    is set once the server has stopped in order."""
    faulthandler.dump_traceback_later(hard_s, exit=True)
    exit_anyway_after(limit_s, stopped)


def serve(args: argparse.Namespace) -> int:
    if args.log_format not in FORMATS:
        print(
            error_line("serve", f"BERGEN_LOG_FORMAT {args.log_format!r}: text or json", "USAGE"),
            file=sys.stderr,
        )
        return ExitStatus.USAGE
    log_listener = log_in_background(os.environ.get("BERGEN_LOG_LEVEL", "INFO"), args.log_format)
    try:
        tracer_provider = _tracing(args.trace)
        if args.metrics:
            parse_address(args.metrics)
    except (RuntimeError, ValueError) as e:
        print(error_line("serve", f"{e}", "USAGE"), file=sys.stderr)
        log_listener.stop()
        return ExitStatus.USAGE
    try:
        tls = load_server_tls(args.tls_cert, args.tls_key, args.tls_client_ca)
    except (ValueError, TlsSettingsError) as e:
        print(error_line("serve", f"{e}", "USAGE"), file=sys.stderr)
        return ExitStatus.USAGE
    if tls is None and not args.insecure and not is_local(args.listen):
        print(
            error_line(
                "serve",
                f"refusing to listen on {args.listen} without TLS: seat and organiser tokens "
                "would cross the network in clear (give --tls-cert and --tls-key, or "
                "--insecure to accept that)",
                "USAGE",
            ),
            file=sys.stderr,
        )
        return ExitStatus.USAGE
    # After the checks of the arguments alone: a refused start makes no token file.
    try:
        token, token_file = _organiser_token(args)
    except ValueError as e:
        print(error_line("serve", f"{e}", "USAGE"), file=sys.stderr)
        return ExitStatus.USAGE
    if args.restrict_create and token is None:
        print(
            error_line("serve", "--restrict-create needs an organiser token", "USAGE"),
            file=sys.stderr,
        )
        return ExitStatus.USAGE
    try:
        signer = RecordSigner.load_or_create(args.signing_key)
    except (OSError, ValueError) as e:
        print(error_line("serve", f"signing key {args.signing_key}: {e}", "USAGE"), file=sys.stderr)
        return ExitStatus.USAGE
    log_key = args.log_key or str(Path(args.signing_key).with_name(DEFAULT_LOG_KEY_FILE))
    try:
        log_keys = LogKeys.load_or_create(log_key)
    except (OSError, ValueError) as e:
        print(error_line("serve", f"log key {log_key}: {e}", "USAGE"), file=sys.stderr)
        return ExitStatus.USAGE
    if args.workers > 1:
        return _supervise(args, log_listener, tracer_provider)
    try:
        running = create_server(
            args.listen,
            args.database,
            Settings(token, args.restrict_create, signer),
            migrate=not args.no_migrate,
            max_watchers=args.max_watchers,
            keepalive_s=args.keepalive,
            limits=Limits(
                creates_per_minute=args.create_rate,
                joins_per_minute=args.join_rate,
                watchers_per_client=args.max_watchers_per_client,
                limit_loopback=args.limit_loopback,
            ),
            seating_timeout_s=args.seating_timeout,
            tls=tls,
            log_keys=log_keys,
            metrics=Metrics() if args.metrics else None,
            metrics_listen=args.metrics,
            tracer=tracer_provider.get_tracer("bergen.server") if tracer_provider else None,
            read_database_url=args.read_database,
            reuse_port=bool(getattr(args, "reuse_port", False)),
        )
    except ValueError as e:
        print(error_line("serve", f"{e}", "USAGE"), file=sys.stderr)
        return ExitStatus.USAGE
    except (SchemaBehind, StorageUnavailable) as e:
        print(error_line("serve", f"{e}", "NOT_READY"), file=sys.stderr)
        return ExitStatus.NOT_READY
    except RuntimeError as e:
        print(error_line("serve", f"{e}", "NOT_READY"), file=sys.stderr)
        return ExitStatus.NOT_READY
    host = args.listen.rsplit(":", 1)[0]
    log.info(
        "serving bergen.v1.BergenService on %s:%d (%s), store %s, records signed by %s",
        host,
        running.port,
        "plaintext"
        if tls is None
        else "TLS, client certificates required"
        if tls.client_ca
        else "TLS",
        redact(args.database),
        signer.public_key,
    )
    if getattr(args, "worker_count", None):
        log.info(
            "worker %d of %d (pid %d), replica %s",
            args.worker_index,
            args.worker_count,
            os.getpid(),
            running.replica,
        )
    running.tracer_provider = tracer_provider
    if running.metrics_address is not None:
        host, port = running.metrics_address
        log.info("metrics on http://%s:%d/metrics", f"[{host}]" if ":" in host else host, port)
    if tracer_provider is not None:
        log.info("tracing each call with OpenTelemetry")
    # Before the port file: a caller waiting for it finds the server settled.
    log.info("heap settled: %d objects kept out of later collections", settle_heap())
    name_token_file(args.listen, running.port, token, token_file)
    if args.port_file:
        with open(args.port_file + ".tmp", "w", encoding="utf-8") as f:
            f.write(str(running.port))
        os.replace(args.port_file + ".tmp", args.port_file)
    done = threading.Event()
    stopped = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        if not done.is_set():  # first, so that nothing after can hold the process for ever
            arm_exit_limits(stopped)
        log.info("signal %d: shutting down (in-flight commands finish)", signum)
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    # A timed wait: Python runs signal handlers in the main thread, and a signal the kernel
    # hands to another thread does not wake an untimed wait.
    while not done.wait(0.5):
        pass
    # Shutting down already: a second SIGTERM must not kill the process with the default
    # action while streams close and the interpreter exits. SIGKILL still ends it.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    running.stop()
    stopped.set()
    log.info("stopped")
    log_listener.stop()
    return ExitStatus.SUCCESS


def _supervise(args: argparse.Namespace, log_listener: Any, tracer_provider: Any) -> int:
    """`bergen serve --workers N` with N > 1: check the database once (migrating it here, so
    that the workers never race to), hold the port, and run the workers
    (bergen.server.workers)."""
    from .workers import PortTaken, hold_port, supervise

    try:
        if tracer_provider is not None:
            tracer_provider.shutdown()  # each worker traces its own calls
        if backend_of(args.database) != "postgresql":
            print(
                error_line(
                    "serve",
                    f"--workers {args.workers} needs PostgreSQL: SQLite takes one writer at a "
                    "time (serve SQLite with one worker)",
                    "USAGE",
                ),
                file=sys.stderr,
            )
            return ExitStatus.USAGE
        try:
            with _opening(args.database):
                if schema_is_behind(args.database):
                    if args.no_migrate:
                        raise SchemaBehind(
                            f"the schema of {redact(args.database)} is behind this server: run "
                            "`bergen migrate --database URL`, or start without --no-migrate"
                        )
                    upgrade_to_head(args.database)
            check_writable(args.database)
            port, held = hold_port(args.listen)
        except ValueError as e:
            print(error_line("serve", f"{e}", "USAGE"), file=sys.stderr)
            return ExitStatus.USAGE
        except (SchemaBehind, StorageUnavailable, PortTaken) as e:
            print(error_line("serve", f"{e}", "NOT_READY"), file=sys.stderr)
            return ExitStatus.NOT_READY
        status = supervise(args, held, port)
        log.info("stopped")
        return status
    finally:
        log_listener.stop()


def _tracing(flag: bool) -> Any:
    """The OpenTelemetry tracer provider when tracing is asked for (`--trace`, or the OTEL_*
    environment), else None. Raises TracingUnavailable (a RuntimeError) without the extra,
    ValueError for an exporter it does not know."""
    from . import tracing

    if not tracing.wanted(flag):
        return None
    return tracing.set_up()
