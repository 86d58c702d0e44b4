"""`bergen serve` from its `Config`: open what the config names (keys, token, TLS), then run
one server until it is told to stop (bergen.server.bootstrap, bergen.server.lifecycle), or,
with `--workers N`, the supervisor of N (bergen.server.supervisor). Each refusal to start is
one line on stderr and a named exit status: USAGE for a setting, NOT_READY for a database or
port that cannot serve."""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from bergen.api.exit_status import ExitStatus
from bergen.api.helptext import error_line
from bergen.api.signing import RecordSigner
from bergen.domain.errors import StorageUnavailable

from .bootstrap import SchemaBehind, Secrets, bring_schema_up, check_writable, create_server
from .config import Config
from .keys import LogKeys
from .lifecycle import serve_until_signalled, settle_heap
from .logs import log_in_background
from .organiser import name_token_file, organiser_token
from .store import backend_of
from .store.url import redact
from .supervisor import PortTaken, hold_port, supervise, write_port_file
from .tls import TlsSettingsError, is_local, load_server_tls

log = logging.getLogger("bergen.server")


def refuse(why: str, status: ExitStatus) -> int:
    """Say why `bergen serve` does not start, in one line on stderr; returns `status`."""
    print(error_line("serve", why, status.name), file=sys.stderr)
    return status


def serve(config: Config) -> int:
    """Run `bergen serve` with `config` until SIGTERM or SIGINT; returns the exit status."""
    log_listener = log_in_background(config.log_level, config.log_format)
    try:
        return _serve(config)
    finally:
        log_listener.stop()


def _serve(config: Config) -> int:
    try:
        tracer_provider = _tracing(config)
    except (RuntimeError, ValueError) as e:
        return refuse(f"{e}", ExitStatus.USAGE)
    try:
        tls = load_server_tls(config.tls_cert, config.tls_key, config.tls_client_ca)
    except (ValueError, TlsSettingsError) as e:
        return refuse(f"{e}", ExitStatus.USAGE)
    if tls is None and not config.insecure and not is_local(config.listen):
        return refuse(
            f"refusing to listen on {config.listen} without TLS: seat and organiser tokens "
            "would cross the network in clear (give --tls-cert and --tls-key, or "
            "--insecure to accept that)",
            ExitStatus.USAGE,
        )
    # After the checks of the settings alone: a refused start makes no token file.
    try:
        token, token_file = organiser_token(config)
    except ValueError as e:
        return refuse(f"{e}", ExitStatus.USAGE)
    if config.restrict_create and token is None:
        return refuse("--restrict-create needs an organiser token", ExitStatus.USAGE)
    try:
        signer = RecordSigner.load_or_create(config.signing_key)
    except (OSError, ValueError) as e:
        return refuse(f"signing key {config.signing_key}: {e}", ExitStatus.USAGE)
    log_key = config.log_key_file
    try:
        log_keys = LogKeys.load_or_create(log_key)
    except (OSError, ValueError) as e:
        return refuse(f"log key {log_key}: {e}", ExitStatus.USAGE)
    if config.workers > 1:
        if tracer_provider is not None:
            tracer_provider.shutdown()  # each worker traces its own calls
        return _supervise(config)
    try:
        running = create_server(
            config,
            Secrets(log_keys, signer, token, tls),
            tracer=tracer_provider.get_tracer("bergen.server") if tracer_provider else None,
        )
    except ValueError as e:
        return refuse(f"{e}", ExitStatus.USAGE)
    except (SchemaBehind, StorageUnavailable, RuntimeError) as e:
        return refuse(f"{e}", ExitStatus.NOT_READY)
    host = config.listen.rsplit(":", 1)[0]
    log.info(
        "serving bergen.v1.BergenService on %s:%d (%s), store %s, records signed by %s",
        host,
        running.port,
        "plaintext"
        if tls is None
        else "TLS, client certificates required"
        if tls.client_ca
        else "TLS",
        redact(config.database_url),
        signer.public_key,
    )
    if config.worker_count:
        log.info(
            "worker %d of %d (pid %d), replica %s",
            config.worker_index,
            config.worker_count,
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
    name_token_file(config.listen, running.port, token, token_file)
    if config.port_file:
        write_port_file(config.port_file, running.port)
    serve_until_signalled(running)
    log.info("stopped")
    return ExitStatus.SUCCESS


def _supervise(config: Config) -> int:
    """`bergen serve --workers N` with N > 1: check the database once (migrating it here, so
    that the workers never race to), hold the port, and run the workers
    (bergen.server.supervisor)."""
    if backend_of(config.database_url) != "postgresql":
        return refuse(
            f"--workers {config.workers} needs PostgreSQL: SQLite takes one writer at a "
            "time (serve SQLite with one worker)",
            ExitStatus.USAGE,
        )
    try:
        bring_schema_up(config.database_url, config.migrate)
        check_writable(config.database_url)
        port, held = hold_port(config.listen)
    except ValueError as e:
        return refuse(f"{e}", ExitStatus.USAGE)
    except (SchemaBehind, StorageUnavailable, PortTaken) as e:
        return refuse(f"{e}", ExitStatus.NOT_READY)
    status = supervise(config, held, port)
    log.info("stopped")
    return status


def _tracing(config: Config) -> Any:
    """The OpenTelemetry tracer provider when tracing is asked for (`config.trace`), else
    None. Raises TracingUnavailable (a RuntimeError) without the extra, ValueError for an
    exporter it does not know."""
    if not config.trace:
        return None
    from . import tracing

    return tracing.set_up()
