"""The settings of `bergen serve`, in one frozen `Config`, read and checked here only.

Each setting comes from its flag, else (for some) its `BERGEN_*` environment variable, else
its default. The flags' defaults are taken from the environment given to
`add_serve_arguments` (so that `--help` names them and argparse checks them as it checks the
flags); the settings that have no flag (`BERGEN_ORGANISER_TOKEN`, `BERGEN_LOG_LEVEL`) are
taken by `Config.from_namespace`. Nothing else in the server reads the environment for a
setting: every function takes the config.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bergen.api.helptext import HelpFormatter, at_least_one, examples
from bergen.api.signing import DEFAULT_KEY_FILE
from bergen.api.state import ORGANISER_TOKEN_FILE

from .janitor import SEATING_TIMEOUT_S
from .keys import DEFAULT_LOG_KEY_FILE, LOG_KEY_ENV
from .limits import (
    CREATES_PER_MINUTE,
    FOLLOWS_PER_CLIENT,
    JOINS_PER_MINUTE,
    REGISTRATIONS_PER_MINUTE,
    WATCHERS_PER_CLIENT,
    Limits,
)
from .logs import FORMATS
from .metrics import parse_address
from .store.url import DATABASE_URL_ENV, DEFAULT_DATABASE_URL
from .tlog import CHECKPOINT_EVERY_S
from .tracing import EXPORTER_ENV

DEFAULT_LISTEN = "127.0.0.1:50051"
ORGANISER_TOKEN_ENV = "BERGEN_ORGANISER_TOKEN"
LOG_LEVEL_ENV = "BERGEN_LOG_LEVEL"
MAX_WATCHERS = 200
"""Open watch streams a server keeps at once by default; each holds memory (about 30 KB),
not a thread."""
MAX_FOLLOWS = 5_000
"""Matches a server follows at once for WatchMatches streams by default (each follow holds
a few KB; the stream holding it one of the watch streams)."""
KEEPALIVE_SECONDS = 60.0
"""How long a call may go without a sign of its client before the server pings it (and
how long, at most 20 s, an answer may take before the connection is dropped)."""


class ConfigError(ValueError):
    """A setting that cannot be served with; the message says which and why, in one line."""


@dataclass(frozen=True, slots=True)
class Config:
    """Everything `bergen serve` is told, checked (raises ConfigError). The defaults are
    those of `bergen serve` with an empty environment."""

    listen: str = DEFAULT_LISTEN
    database_url: str = DEFAULT_DATABASE_URL
    read_database_url: str | None = None
    """A hot standby of the PostgreSQL primary: what only reads is served by it, never older
    than what this process has seen (bergen.server.store.routed)."""
    organiser_token: str | None = field(default=None, repr=False)
    """$BERGEN_ORGANISER_TOKEN (never shown)."""
    organiser_token_file: str | None = None
    no_organiser: bool = False
    restrict_create: bool = False
    migrate: bool = True
    """Bring a schema that is behind up to date on start; else refuse to start."""
    max_watchers: int = MAX_WATCHERS
    max_follows: int = MAX_FOLLOWS
    keepalive_s: float = KEEPALIVE_SECONDS
    limits: Limits = field(default_factory=Limits)
    seating_timeout_s: float = SEATING_TIMEOUT_S
    checkpoint_every_s: float = CHECKPOINT_EVERY_S
    """The transparency log's checkpoints are signed at most this often while it grows
    (and at every match end)."""
    checkpoint_dir: str | None = None
    """Where the newest signed checkpoint is kept; None: beside the signing key."""
    transparency_log: bool = True
    """Keep the transparency log (bergen.server.tlog); off only to measure what it costs."""
    port_file: str | None = None
    workers: int = 1
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_client_ca: str | None = None
    insecure: bool = False
    signing_key: str = DEFAULT_KEY_FILE
    log_key: str | None = None
    """The log keys' file; None for DEFAULT_LOG_KEY_FILE beside the signing key."""
    metrics: str | None = None
    """HOST:PORT to serve /metrics on; None for none."""
    log_format: str = "text"
    log_level: str = "INFO"
    trace: bool = False
    """Trace each call with OpenTelemetry: `--trace`, or an $OTEL_TRACES_EXPORTER other than
    none (the SDK reads the rest of its $OTEL_* settings itself)."""
    reuse_port: bool = False
    """Share the port with this user's other processes asking for it (the workers of
    `--workers N`); otherwise a port already taken is refused."""
    worker_index: int = 0
    worker_count: int = 0
    """Which worker of how many this process is; 0 of 0 when it is not one."""

    def __post_init__(self) -> None:
        if self.log_format not in FORMATS:
            raise ConfigError(f"BERGEN_LOG_FORMAT {self.log_format!r}: text or json")
        if self.max_follows < 1:
            raise ConfigError(f"max_follows must be at least 1, not {self.max_follows}")
        if self.max_watchers < 1:
            raise ConfigError(f"max_watchers must be at least 1, not {self.max_watchers}")
        if self.workers < 1:
            raise ConfigError(f"workers must be at least 1, not {self.workers}")
        if self.metrics:
            try:
                parse_address(self.metrics)
            except ValueError as e:
                raise ConfigError(str(e)) from None

    @property
    def log_key_file(self) -> str:
        return self.log_key or str(Path(self.signing_key).with_name(DEFAULT_LOG_KEY_FILE))

    @classmethod
    def from_namespace(cls, args: argparse.Namespace, environ: Mapping[str, str]) -> Config:
        """The config of parsed `bergen serve` arguments (`add_serve_arguments`, whose
        defaults already hold the environment's flags) and the settings only the environment
        gives. Raises ConfigError."""
        return cls(
            listen=args.listen,
            database_url=args.database,
            read_database_url=args.read_database,
            organiser_token=environ.get(ORGANISER_TOKEN_ENV) or None,
            organiser_token_file=args.organiser_token_file,
            no_organiser=args.no_organiser,
            restrict_create=args.restrict_create,
            migrate=not args.no_migrate,
            max_watchers=args.max_watchers,
            max_follows=args.max_follows,
            keepalive_s=args.keepalive,
            limits=Limits(
                creates_per_minute=args.create_rate,
                joins_per_minute=args.join_rate,
                watchers_per_client=args.max_watchers_per_client,
                follows_per_client=args.max_follows_per_client,
                limit_loopback=args.limit_loopback,
                registrations_per_minute=args.register_rate,
            ),
            seating_timeout_s=args.seating_timeout,
            checkpoint_every_s=args.checkpoint_every,
            checkpoint_dir=args.checkpoint_dir,
            transparency_log=not args.no_transparency_log,
            port_file=args.port_file,
            workers=args.workers,
            tls_cert=args.tls_cert,
            tls_key=args.tls_key,
            tls_client_ca=args.tls_client_ca,
            insecure=args.insecure,
            signing_key=args.signing_key,
            log_key=args.log_key,
            metrics=args.metrics,
            log_format=args.log_format,
            log_level=environ.get(LOG_LEVEL_ENV, "INFO"),
            trace=args.trace or environ.get(EXPORTER_ENV, "").strip().lower() not in ("", "none"),
        )

    @classmethod
    def from_args_and_env(cls, argv: Sequence[str], environ: Mapping[str, str]) -> Config:
        """The config of `bergen serve ARGV` under `environ`. A flag argparse refuses exits
        with its usage line and status 2, as `bergen serve` does; raises ConfigError."""
        parser = argparse.ArgumentParser(prog="bergen serve", formatter_class=HelpFormatter)
        add_serve_arguments(parser, environ)
        return cls.from_namespace(parser.parse_args(list(argv)), environ)

    def to_spec(self) -> dict[str, Any]:
        """The config as JSON values, for a worker's command line; without the organiser
        token, which the worker takes from the environment it inherits (`from_spec`)."""
        spec = dataclasses.asdict(self)
        del spec["organiser_token"]
        return spec

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], environ: Mapping[str, str]) -> Config:
        """The config `to_spec` gave, with the organiser token of `environ`. Raises
        ConfigError, TypeError for a spec that is not one."""
        values = dict(spec)
        values["limits"] = Limits(**values["limits"])
        values["organiser_token"] = environ.get(ORGANISER_TOKEN_ENV) or None
        return cls(**values)


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0.1 <= value <= 86_400:
        raise argparse.ArgumentTypeError(f"must be 0.1 to 86400 seconds, not {text}")
    return value


SERVE_DESCRIPTION = (
    "Run the Bergen game server: the gRPC service every client speaks to. "
    "With no options it keeps its events in ./bergen.db (SQLite) and its keys and "
    "organiser token beside it, each made on first start. Several replicas on one "
    "PostgreSQL database serve the same matches."
)
SERVE_EPILOG = examples(
    "bergen serve                       # on 127.0.0.1:50051, events in ./bergen.db",
    "bergen serve --listen 0.0.0.0:50051 --tls-cert server.pem --tls-key server.key",
    "bergen serve --database postgresql://bergen_app@db1/bergen --workers 2 --metrics "
    "127.0.0.1:9090",
)


def add_serve_arguments(p: argparse.ArgumentParser, environ: Mapping[str, str]) -> None:
    """`bergen serve`'s flags, their defaults taken from `environ` where they have one."""
    p.add_argument(
        "--listen",
        default=environ.get("BERGEN_LISTEN", DEFAULT_LISTEN),
        metavar="HOST:PORT",
        help=f"where to listen (default $BERGEN_LISTEN, else {DEFAULT_LISTEN}; port 0 picks a "
        "free one)",
    )
    p.add_argument(
        "--database",
        default=environ.get(DATABASE_URL_ENV, DEFAULT_DATABASE_URL),
        metavar="URL",
        help="postgresql://... or sqlite:///path (default: $BERGEN_DATABASE_URL, "
        f"else {DEFAULT_DATABASE_URL})",
    )
    p.add_argument(
        "--read-database",
        default=environ.get("BERGEN_READ_DATABASE_URL") or None,
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
        default=environ.get("BERGEN_MAX_WATCHERS", str(MAX_WATCHERS)),
        metavar="N",
        help="match streams (players and spectators following a match) open at once; more "
        "are refused as too many, with a retry hint "
        f"(default: $BERGEN_MAX_WATCHERS, else {MAX_WATCHERS})",
    )
    p.add_argument(
        "--max-follows",
        type=at_least_one,
        default=environ.get("BERGEN_MAX_FOLLOWS", str(MAX_FOLLOWS)),
        metavar="N",
        help="matches followed at once on streams that follow many matches (a program holding "
        "many seats; each such stream also one of --max-watchers); more are refused as too many "
        f"(default: $BERGEN_MAX_FOLLOWS, else {MAX_FOLLOWS})",
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
        "--register-rate",
        type=at_least_one,
        default=REGISTRATIONS_PER_MINUTE,
        metavar="N",
        help=f"players one client may register a minute (default {REGISTRATIONS_PER_MINUTE})",
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
        "--max-follows-per-client",
        type=at_least_one,
        default=FOLLOWS_PER_CLIENT,
        metavar="N",
        help="matches one client (its address, or its token) may follow at once on streams "
        f"that follow many matches (default {FOLLOWS_PER_CLIENT})",
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
        "--checkpoint-every",
        type=_positive_seconds,
        default=CHECKPOINT_EVERY_S,
        metavar="SECONDS",
        help="sign a checkpoint of the transparency log at most this often while events are "
        f"appended, and at every match end (default {CHECKPOINT_EVERY_S:g})",
    )
    p.add_argument(
        "--checkpoint-dir",
        default=environ.get("BERGEN_CHECKPOINT_DIR") or None,
        metavar="DIR",
        help="a writable folder, kept across restarts, for the newest checkpoint this server "
        "signed, against which it checks the log on start (default: $BERGEN_CHECKPOINT_DIR, "
        "else beside the signing key)",
    )
    p.add_argument(
        "--no-transparency-log",
        action="store_true",
        help="keep no transparency log: no checkpoints, no proofs, records without them "
        "(to measure what it costs)",
    )
    p.add_argument(
        "--port-file", metavar="FILE", help="write the bound port to this file once serving"
    )
    p.add_argument(
        "--workers",
        type=at_least_one,
        default=environ.get("BERGEN_WORKERS", "1"),
        metavar="N",
        help="serve from N processes sharing the port, each a replica of the "
        "others on one PostgreSQL database, under a supervisor that restarts a worker that "
        "dies and stops them all on SIGTERM; PostgreSQL only when N > 1 (default: "
        "$BERGEN_WORKERS, else 1)",
    )
    p.add_argument(
        "--tls-cert",
        default=environ.get("BERGEN_TLS_CERT") or None,
        metavar="FILE",
        help="speak TLS only, presenting this certificate chain (PEM; else $BERGEN_TLS_CERT)",
    )
    p.add_argument(
        "--tls-key",
        default=environ.get("BERGEN_TLS_KEY") or None,
        metavar="FILE",
        help="the private key of --tls-cert (PEM, unencrypted; else $BERGEN_TLS_KEY)",
    )
    p.add_argument(
        "--tls-client-ca",
        default=environ.get("BERGEN_TLS_CLIENT_CA") or None,
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
        default=environ.get("BERGEN_SIGNING_KEY", DEFAULT_KEY_FILE),
        metavar="FILE",
        help="Ed25519 private key (PEM) that signs match records; made there on first start "
        f"(default: $BERGEN_SIGNING_KEY, else ./{DEFAULT_KEY_FILE}). Give every replica the "
        "same file.",
    )
    p.add_argument(
        "--log-key",
        default=environ.get(LOG_KEY_ENV) or None,
        metavar="FILE",
        help="the keys that authenticate every stored event (one '<id> <hex>' a line; the "
        f"last writes, all verify); made there on first start (default: ${LOG_KEY_ENV}, else "
        f"{DEFAULT_LOG_KEY_FILE} beside the signing key). Give every replica the same file.",
    )
    add_observability_arguments(p, environ)


def add_observability_arguments(p: argparse.ArgumentParser, environ: Mapping[str, str]) -> None:
    """--metrics, --log-format, --trace."""
    p.add_argument(
        "--metrics",
        default=environ.get("BERGEN_METRICS") or None,
        metavar="HOST:PORT",
        help="serve Prometheus metrics over HTTP at http://HOST:PORT/metrics (port 0 picks "
        "one; else $BERGEN_METRICS; off by default). They name RPCs, status codes and counts "
        "only: no match, token or player",
    )
    p.add_argument(
        "--log-format",
        choices=FORMATS,
        default=environ.get("BERGEN_LOG_FORMAT") or "text",
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


def add_migrate_arguments(p: argparse.ArgumentParser, environ: Mapping[str, str]) -> None:
    """`bergen migrate`'s flags."""
    p.add_argument(
        "--database",
        default=environ.get(DATABASE_URL_ENV, DEFAULT_DATABASE_URL),
        metavar="URL",
        help=f"postgresql://... or sqlite:///path (default: $BERGEN_DATABASE_URL, else "
        f"{DEFAULT_DATABASE_URL})",
    )
    p.add_argument(
        "--rebuild-ratings",
        action="store_true",
        help="empty the players' ratings and fold them again from the events: the servers "
        "(running or next started) rate every rated match again, in order",
    )
