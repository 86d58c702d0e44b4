"""Building a server from its `Config`: the store (its schema brought up to date), the feed,
the application, the gRPC server with its edge, and the background workers, started.
`create_server` returns them as `Running` (bergen.server.lifecycle), with the bound port."""

from __future__ import annotations

import functools
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from bergen.api.signing import RecordSigner
from bergen.domain.errors import StorageUnavailable

from .app import Application, Settings, build_application
from .clocks import ClockKeeper
from .config import KEEPALIVE_SECONDS, Config
from .edge import CallLog, CallObserver, aio_interceptors
from .feed import EventFeed, PostgresNotifier, postgres_listener
from .identity import Caller, Identity
from .janitor import Janitor
from .keys import LogKeys
from .lifecycle import Running, stop_background
from .limits import ClientLimits, WrongSecrets
from .loop import LoopHealth, LoopServer
from .metrics import Metrics, seed_in_background
from .observed import ObservedStore
from .recorder import Recorder
from .servicer import SERVICE, SERVICE_DESCRIPTOR, generic_handler
from .store import EventStore, backend_of, open_store, schema_is_behind, upgrade_to_head
from .store.url import live_conninfo, redact, sqlite_path
from .threads import pool_thread_named
from .tlog import TransparencyLog, checkpoint_file
from .tls import ServerTls
from .tournament_manager import TournamentManager

MAX_REQUEST_BYTES = 64 * 1024
"""Past this a request is refused (RESOURCE_EXHAUSTED, reason REQUEST_TOO_LARGE) by the edge;
gRPC itself reads at most twice this, and refuses more without a reason."""
MAX_RESPONSE_BYTES = 16 * 1024 * 1024
CALL_WORKERS = 56
"""Threads that serve the calls (each unary call holds one while it runs) and the watch
streams' steps (reading a stream's first view or a gap in its events); an open stream that
waits for events holds none."""


@dataclass(frozen=True, slots=True)
class Secrets:
    """What the files and environment the config names hold, opened: the keys every event is
    written and checked under, the key that signs finished matches' records (unsigned records
    when None), the organiser token (none when None) and the TLS credentials (plaintext when
    None)."""

    log_keys: LogKeys = field(repr=False)
    signer: RecordSigner | None = None
    organiser_token: str | None = field(default=None, repr=False)
    tls: ServerTls | None = None


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


def bring_schema_up(database_url: str, migrate: bool) -> None:
    """Run the migrations when the schema is behind, or raise SchemaBehind when it is and
    `migrate` is false; StorageUnavailable for a database that cannot be opened."""
    with _opening(database_url):
        if schema_is_behind(database_url):
            if not migrate:
                raise SchemaBehind(
                    f"the schema of {redact(database_url)} is behind this server: run "
                    "`bergen migrate --database URL`, or start without --no-migrate"
                )
            upgrade_to_head(database_url)


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
    config: Config,
    secrets: Secrets,
    *,
    metrics: Metrics | None = None,
    tracer: Any = None,
) -> Running:
    """Open the store (running migrations, or refusing when the schema is behind and
    `config.migrate` is false), start the feed and the server. Returns it with the bound
    port, so `config.listen` may end in `:0`. Raises SchemaBehind, StorageUnavailable, or
    RuntimeError when the port is taken.

    The gRPC server is grpc.aio's, on an event loop in a thread of its own
    (`bergen.server.loop`): unary calls run in a pool of CALL_WORKERS threads, the watch
    streams are coroutines (`bergen.server.streams`). At most `config.max_watchers` watch
    streams are open at once (more are refused with RESOURCE_EXHAUSTED); a stream
    whose client vanished without closing its connection ends once a keepalive ping goes
    unanswered, `config.keepalive_s` after the client was last heard from. With
    `secrets.tls` it speaks only TLS (and with its client CA, only to clients holding a
    certificate that CA signed). Every event is written authenticated under
    `secrets.log_keys`, and checked with them when read.

    With `metrics` (made here when `config.metrics` names an address), the server moves them
    (`bergen.server.metrics`), and serves them over HTTP on `config.metrics` when given
    (raises RuntimeError when that cannot be bound). With `tracer` (an OpenTelemetry tracer),
    each call is a span and the store's work in it its children (`bergen.server.tracing`).
    With `config.read_database_url` (a hot standby of the PostgreSQL primary), what only
    reads is served by the standby, never older than what this process has seen
    (bergen.server.store.routed). With `config.reuse_port`, the port may be shared with other
    processes of this user that ask for the same (`bergen serve --workers N`, whose supervisor
    refuses a port another program holds); without it a port already taken is refused.
    """
    database_url = config.database_url
    metrics_listen = config.metrics
    if metrics is None and metrics_listen:
        metrics = Metrics()
    bring_schema_up(database_url, config.migrate)
    with _opening(database_url):
        store = open_store(
            database_url, log_keys=secrets.log_keys, read_url=config.read_database_url
        )
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
    tlog = None
    if secrets.signer is not None and config.transparency_log:
        tlog = TransparencyLog(
            store,
            secrets.signer,
            checkpoint_file(config.signing_key, database_url, config.checkpoint_dir),
            config.checkpoint_every_s,
        )
        try:
            tlog.open()  # a log rolled back is refused: every call answers DATA_LOSS
        except BaseException:
            store.close()
            raise
    feed = EventFeed(store, poll_interval=poll, listen=listen_fn, notifier=notifier, tlog=tlog)
    settings = Settings(secrets.organiser_token, config.restrict_create, secrets.signer, tlog)
    app = build_application(store, feed, settings, secrets.log_keys)
    organiser = Identity(secrets.organiser_token)
    client_limits = ClientLimits(
        config.limits, trusted=lambda token: organiser.is_organiser(Caller(token))
    )
    pool = futures.ThreadPoolExecutor(
        max_workers=CALL_WORKERS, thread_name_prefix="bergen-rpc", initializer=pool_thread_named
    )
    edge = aio_interceptors(
        MAX_REQUEST_BYTES,
        observers,
        guard=client_limits.secrets,
        gate=None if tlog is None else tlog.check,
    )
    handler = generic_handler(
        app, config.max_watchers, client_limits, pool, max_follows=config.max_follows
    )
    health_servicer = health.aio.HealthServicer()

    def build() -> grpc.aio.Server:
        aio_server = grpc.aio.server(
            migration_thread_pool=pool,
            interceptors=edge,
            options=server_options(config.keepalive_s, config.reuse_port),
        )
        aio_server.add_generic_rpc_handlers((handler,))
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, aio_server)
        reflection.enable_server_reflection(
            (
                SERVICE,
                health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
                reflection.SERVICE_NAME,
            ),
            aio_server,
        )
        return aio_server

    server = LoopServer(build)
    health_of = LoopHealth(server, health_servicer)
    listen = config.listen
    try:
        if secrets.tls is None:
            port = server.add_insecure_port(listen)
        else:
            port = server.add_secure_port(listen, secrets.tls.credentials())
    except RuntimeError:
        port = 0  # grpc.aio raises where the threaded server answered 0
    if port == 0:
        server.stop(0).wait()
        store.close()
        raise RuntimeError(f"cannot listen on {listen}")
    clocks = ClockKeeper(store, app.repository, feed.listing, app.commands)
    feed.listen(clocks.note)
    tournaments = TournamentManager(app.tournaments, app.work, app.repository)
    feed.listen(tournaments.note)
    recorder = None
    if secrets.signer is not None:
        recorder = Recorder(store, app.queries, secrets.signer.public_key)
        feed.listen(recorder.note)
    feed.start()
    clocks.start()
    tournaments.start()
    janitor = Janitor(store, feed.listing, app.commands, config.seating_timeout_s)
    janitor.start()
    if recorder is not None:
        recorder.start()
    background = threading.Event()
    metrics_address = None
    if metrics is not None:
        _measure(metrics, app, clocks, feed, store, background, client_limits.secrets)
        if metrics_listen:
            try:
                metrics_address = metrics.serve(metrics_listen)
            except BaseException as e:
                background.set()
                server.stop(0)
                stop_background(
                    [w for w in (janitor, clocks, tournaments, recorder) if w is not None],
                    feed,
                    0,
                )
                store.close()
                if isinstance(e, OSError):
                    why = e.strerror or str(e)
                    raise RuntimeError(f"cannot serve metrics on {metrics_listen}: {why}") from e
                raise
    server.start()
    if tlog is None or tlog.refusal is None:
        for name in ("", SERVICE):
            health_of.set(name, health_pb2.HealthCheckResponse.SERVING)
    if tlog is not None:
        # A log found rolled back, at start or later, is served no more: nor said to be.
        tlog.on_refusal(lambda _: _not_serving(health_of))
    return Running(
        server,
        port,
        feed,
        app,
        health_of,
        store,
        janitor,
        clocks,
        tournaments,
        metrics,
        metrics_address,
        replica=replica,
        recorder=recorder,
        _background=background,
    )


def _not_serving(health_servicer: LoopHealth) -> None:
    """Health NOT_SERVING, for the server as a whole and for its service."""
    for name in ("", SERVICE):
        health_servicer.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)


def _measure(
    metrics: Metrics,
    app: Application,
    clocks: ClockKeeper,
    feed: EventFeed,
    store: EventStore,
    stop: threading.Event,
    wrong_secrets: WrongSecrets,
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
    wrong = metrics.count(
        "bergen_wrong_secrets",
        "Calls refused for a wrong token or code (counted), and calls held back because their "
        "client had sent too many (held).",
        ("outcome",),
    )
    wrong.add(("counted",), lambda: wrong_secrets.wrong)
    wrong.add(("held",), lambda: wrong_secrets.held)
    caches = metrics.count(
        "bergen_cache_lookups",
        "Lookups of the server's caches of folded state: hit (found here; a match's newer "
        "events may still be read) or miss (read and folded from the store).",
        ("cache", "result"),
    )
    repairs = metrics.count(
        "bergen_read_model_repairs",
        "Read-model rows found tampered with (not what the events give, or not authentic) "
        "and rebuilt from the events, by table.",
        ("table",),
    )
    for kept in (feed.listing.repairs, feed.ratings.repairs, store.records().repairs):
        for table in tuple(kept):
            repairs.add((table,), functools.partial(kept.__getitem__, table))
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
    gives its place back."""
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
