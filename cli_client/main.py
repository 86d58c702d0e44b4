"""`bergen`: the product's command line."""

from __future__ import annotations

import argparse
import sys

from bergen.server import main as server_main

from . import bots, export, play, simulate, verify


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bergen", description="Bergen domino server, client and tools."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    simulate.add_parser(sub)
    play.add_parser(sub)
    bots.add_parser(sub)
    verify.add_parser(sub)
    export.add_parser(sub)
    server_main.add_parser(sub)
    server_main.add_migrate_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; returns its exit status."""
    args = build_parser().parse_args(argv)
    status: int = args.func(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
