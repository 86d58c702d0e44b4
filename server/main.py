"""`bergen serve`, `bergen migrate` and `bergen token`: the server's commands, each added
to `bergen` by its entry point (pyproject.toml, `bergen.commands`), and `main`, which runs
`bergen serve` alone (`python -m bergen.server.main [FLAGS]`).

The flags and the environment are read once, into a `Config` (bergen.server.config); the rest
of the server takes that config (bergen.server.startup)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from bergen.api.exit_status import ExitStatus
from bergen.api.helptext import HelpFormatter, error_line, examples

from .admin import migrate_command, token_command
from .config import (
    SERVE_DESCRIPTION,
    SERVE_EPILOG,
    Config,
    ConfigError,
    add_migrate_arguments,
    add_serve_arguments,
)
from .startup import serve


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "serve",
        help="run the game server",
        description=SERVE_DESCRIPTION,
        epilog=SERVE_EPILOG,
        formatter_class=HelpFormatter,
    )
    add_serve_arguments(p, os.environ)
    p.set_defaults(func=serve_command)


def serve_command(args: argparse.Namespace) -> int:
    """`bergen serve` with the arguments `add_parser`'s parser gave."""
    try:
        config = Config.from_namespace(args, os.environ)
    except ConfigError as e:
        print(error_line("serve", f"{e}", "USAGE"), file=sys.stderr)
        return ExitStatus.USAGE
    return serve(config)


def main(argv: Sequence[str] | None = None) -> int:
    """`bergen serve ARGV` (by default this process's arguments); returns the exit status."""
    try:
        config = Config.from_args_and_env(sys.argv[1:] if argv is None else argv, os.environ)
    except ConfigError as e:
        print(error_line("serve", f"{e}", "USAGE"), file=sys.stderr)
        return ExitStatus.USAGE
    return serve(config)


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
    add_migrate_arguments(p, os.environ)
    p.set_defaults(func=migrate_command)


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


if __name__ == "__main__":
    sys.exit(main())
