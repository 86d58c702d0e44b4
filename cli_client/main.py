"""`bergen`: the product's command line.

The client's own commands are registered here; other packages contribute theirs through the
`bergen.commands` entry-point group (the server registers `serve` and `migrate` so), so the
client never imports the server. Each entry point names a function that adds its subparser
to the subparsers it is given and sets `func(args) -> int` on it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from importlib import metadata
from typing import TypeAlias

from bergen.api.exit_status import ExitStatus, help_text
from bergen.api.helptext import HelpFormatter

from . import (
    bots,
    endings,
    export,
    health,
    play,
    player,
    ratings,
    simulate,
    tournament,
    verify,
    watch,
    witness,
)
from .connect import BadConnectionOption, endpoint_of
from .usage import examples, fail

COMMANDS_GROUP = "bergen.commands"
DISTRIBUTION = "bergen"

Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def version() -> str:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def _unavailable(name: str, why: str) -> Callable[[Subparsers], None]:
    """A stand-in for a contributed command that failed to load: the other commands still
    work, and this one says why it cannot."""

    def add(sub: Subparsers) -> None:
        p = sub.add_parser(name, help=f"(unavailable: {why})", add_help=False)
        p.add_argument("rest", nargs=argparse.REMAINDER)

        def run(_: argparse.Namespace) -> int:
            return fail(name, f"unavailable here: {why}", ExitStatus.ERROR, "UNAVAILABLE_HERE")

        p.set_defaults(func=run)

    return add


def contributed() -> list[tuple[str, Callable[[Subparsers], None]]]:
    """(name, add-parser function) of each command in the entry-point group, by name."""
    found: list[tuple[str, Callable[[Subparsers], None]]] = []
    for entry in sorted(metadata.entry_points(group=COMMANDS_GROUP), key=lambda e: e.name):
        try:
            add = entry.load()
        except Exception as e:  # a broken plugin must not take the other commands down
            add = _unavailable(entry.name, f"{type(e).__name__}: {e}")
        found.append((entry.name, add))
    return found


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bergen",
        description="Bergen domino server, client and tools: play, watch, replay and verify "
        "matches, run tournaments, and run the server.",
        epilog=help_text()
        + "\n\n"
        + examples(
            "bergen serve                     # the server, events kept in ./bergen.db",
            "bergen play --create --bots 1    # play a bot from this terminal",
            "bergen watch MATCH               # follow a match live",
            "bergen-replay MATCH              # a match, hand by hand",
            "bergen verify MATCH              # check a finished match through the rules",
            "bergen player register NAME      # a player, rated in rated matches",
            "bergen COMMAND --help            # each command's options and examples",
        ),
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"bergen {version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    own = {
        "simulate",
        "play",
        "watch",
        "resign",
        "abandon",
        "bots",
        "verify",
        "export",
        "tournament",
        "health",
        "player",
        "leaderboard",
        "ratings",
        "witness",
    }
    simulate.add_parser(sub)
    play.add_parser(sub)
    watch.add_parser(sub)
    endings.add_parsers(sub)
    bots.add_parser(sub)
    verify.add_parser(sub)
    export.add_parser(sub)
    tournament.add_parser(sub)
    player.add_parsers(sub)
    ratings.add_parser(sub)
    health.add_parser(sub)
    witness.add_parser(sub)
    for name, add in contributed():
        if name in own:
            continue  # a contributed command never shadows one of the client's
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; returns its exit status."""
    args = build_parser().parse_args(argv)
    if hasattr(args, "client_key"):  # a command that talks to a server
        try:
            args.endpoint = endpoint_of(args)
        except BadConnectionOption as e:
            return fail(args.command, str(e), ExitStatus.USAGE)
    status: int = args.func(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
