"""`bergen web --server HOST:PORT --listen 127.0.0.1:8080`: the spectators' web gateway.

Needs the `web` extra (Starlette and uvicorn); without it the command says how to install it.
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path
from typing import Any

from bergen.api.exit_status import ExitStatus
from bergen.api.helptext import HelpFormatter
from bergen.cli_client.connect import BadConnectionOption, add_server_option, endpoint_of
from bergen.cli_client.usage import examples, fail

from .computer import MAX_BOTS
from .hubs import COALESCE_S
from .limits import (
    ANALYSES_PER_MINUTE,
    CLIENT_FOLLOWED,
    CLIENT_STREAMS,
    CREATES_PER_MINUTE,
    JOINS_PER_MINUTE,
    REGISTERS_PER_MINUTE,
)

DEFAULT_LISTEN = "127.0.0.1:8080"
NEEDED = ("starlette", "uvicorn")


def listen_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


def missing_extra() -> list[str]:
    return [name for name in NEEDED if importlib.util.find_spec(name) is None]


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "web",
        help="serve the web site: watch, replay and play matches in a browser",
        description="The web gateway: the game server's matches, replays and tournaments as "
        "a site and a JSON + Server-Sent Events API, read as a spectator, and matches created, "
        "joined and played in a browser (each seat's token kept sealed in its cookie).",
        epilog=examples(
            "bergen web                          # http://127.0.0.1:8080/ for the local server",
            "bergen web --server game1:50051 --ca ca.pem --listen 0.0.0.0:8080 --nice 5",
        ),
        formatter_class=HelpFormatter,
    )
    add_server_option(p)
    p.add_argument(
        "--listen",
        type=listen_address,
        default=listen_address(DEFAULT_LISTEN),
        metavar="HOST:PORT",
        help=f"where to serve HTTP (default {DEFAULT_LISTEN}; port 0 picks a free one)",
    )
    p.add_argument(
        "--port-file", metavar="FILE", help="write the bound HTTP port to this file once serving"
    )
    p.add_argument(
        "--max-streams",
        type=int,
        default=1000,
        metavar="N",
        help="event streams open at once (more are answered 503; default 1000)",
    )
    p.add_argument(
        "--max-matches",
        type=int,
        default=12,
        metavar="N",
        help="matches followed at once, one upstream stream each (default 12)",
    )
    p.add_argument(
        "--client-streams",
        type=int,
        default=CLIENT_STREAMS,
        metavar="N",
        help="event streams one client may hold open at once (more are answered 429; "
        "default %(default)s)",
    )
    p.add_argument(
        "--client-follows",
        type=int,
        default=CLIENT_FOLLOWED,
        metavar="N",
        help="matches and tournaments one client may follow at once (more are answered 429; "
        "default %(default)s)",
    )
    p.add_argument(
        "--client-creates",
        type=int,
        default=CREATES_PER_MINUTE,
        metavar="N",
        help="matches and tournaments one client may create a minute (default %(default)s)",
    )
    p.add_argument(
        "--client-joins",
        type=int,
        default=JOINS_PER_MINUTE,
        metavar="N",
        help="seats and registrations one client may take a minute (default %(default)s)",
    )
    p.add_argument(
        "--client-registers",
        type=int,
        default=REGISTERS_PER_MINUTE,
        metavar="N",
        help="players one client may register, or sign in with, a minute (default %(default)s)",
    )
    p.add_argument(
        "--trust-proxy",
        action="store_true",
        help="take each client from the last X-Forwarded-For address, as a reverse proxy in "
        "front of the gateway sets it; only behind such a proxy (else any client names "
        "itself; default: the remote address)",
    )
    p.add_argument(
        "--max-bots",
        type=int,
        default=MAX_BOTS,
        metavar="N",
        help="seats the computer plays at once, as bots in the gateway's process "
        "(default %(default)s; 0: none)",
    )
    p.add_argument(
        "--state-dir",
        metavar="DIR",
        help="where the gateway keeps its computer seats, to play them on after a restart "
        "(default: $BERGEN_STATE_DIR, else ~/.local/state/bergen)",
    )
    p.add_argument(
        "--coalesce-ms",
        type=int,
        default=round(COALESCE_S * 1000),
        metavar="MS",
        help="least time between two writes of one match's events to its streams: events "
        "coming sooner go out together (default %(default)s; 0: each burst at once; at most "
        "1000)",
    )
    p.add_argument(
        "--nice",
        type=int,
        default=0,
        metavar="N",
        help="lower the gateway's CPU priority by N (0-19), for a gateway sharing its "
        "machine with the game server: the server's plays come first (default 0)",
    )
    p.add_argument(
        "--seal-key-file",
        metavar="FILE",
        help="the key that seals each browser player's seat in its cookie: one Fernet key a "
        "line, the first sealing, every one opening (to rotate, put a new one first). Give "
        "every gateway process behind one address the same file. Default: web-seal.key in "
        "the state directory ($BERGEN_STATE_DIR, else $XDG_STATE_HOME/bergen, else "
        "~/.local/state/bergen), created with mode 0600 when missing",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    missing = missing_extra()
    if missing:
        return fail(
            "web",
            f"needs {' and '.join(missing)}, from the `web` extra: pip install 'bergen[web]'",
            ExitStatus.ERROR,
            "WEB_EXTRA_MISSING",
        )
    if args.max_streams < 1 or args.max_matches < 1:
        return fail("web", "--max-streams and --max-matches must be at least 1", ExitStatus.USAGE)
    limits = (
        args.client_streams,
        args.client_follows,
        args.client_creates,
        args.client_joins,
        args.client_registers,
    )
    if min(limits) < 1 or args.max_bots < 0:
        return fail(
            "web",
            "--client-streams, --client-follows, --client-creates, --client-joins and "
            "--client-registers must be at least 1, and --max-bots at least 0",
            ExitStatus.USAGE,
        )
    if not 0 <= args.coalesce_ms <= 1000 or not 0 <= args.nice <= 19:
        return fail("web", "--coalesce-ms must be 0-1000 and --nice 0-19", ExitStatus.USAGE)
    try:
        endpoint = endpoint_of(args)
    except BadConnectionOption as e:
        return fail("web", str(e), ExitStatus.USAGE)
    from .limits import ClientLimits
    from .serve import serve

    host, port = args.listen
    return serve(
        endpoint,
        host,
        port,
        port_file=args.port_file,
        max_streams=args.max_streams,
        max_matches=args.max_matches,
        coalesce_s=args.coalesce_ms / 1000,
        nice=args.nice,
        client_limits=ClientLimits(
            streams=args.client_streams,
            followed=args.client_follows,
            per_minute={
                "create": args.client_creates,
                "join": args.client_joins,
                "register": args.client_registers,
                "analyse": ANALYSES_PER_MINUTE,
            },
            trust_proxy=args.trust_proxy,
        ),
        max_bots=args.max_bots,
        state_dir=Path(args.state_dir) if args.state_dir else None,
        seal_key_file=args.seal_key_file,
    )
