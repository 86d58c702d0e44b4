"""`bergen`: the product's command line.

The client's own commands are registered here; other packages contribute theirs through the
`bergen.commands` entry-point group (the server registers `serve` and `migrate` so), so the
client never imports the server. Each entry point names a function that adds its subparser
to the subparsers it is given and sets `func(args) -> int` on it.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from importlib import metadata
from typing import TypeAlias

from bergen.api.exit_status import ExitStatus, help_text
from bergen.api.helptext import HelpFormatter

from .connect import BadConnectionOption, endpoint_of
from .usage import examples, fail

COMMANDS_GROUP = "bergen.commands"
DISTRIBUTION = "bergen"

Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

OWN: dict[str, tuple[str, str]] = {
    "simulate": ("simulate", "add_parser"),
    "play": ("play", "add_parser"),
    "watch": ("watch", "add_parser"),
    "resign": ("endings", "add_parsers"),
    "abandon": ("endings", "add_parsers"),
    "bots": ("bots", "add_parser"),
    "verify": ("verify", "add_parser"),
    "export": ("export", "add_parser"),
    "archive": ("archive", "add_parser"),
    "tournament": ("tournament", "add_parser"),
    "player": ("player", "add_parsers"),
    "leaderboard": ("player", "add_parsers"),
    "ratings": ("ratings", "add_parser"),
    "health": ("health", "add_parser"),
    "witness": ("witness", "add_parser"),
}
"""The client's own commands, in the order `bergen --help` lists them: the module of this
package that adds each one's parser, and the function that does (one may add two)."""


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


def contributed(name: str | None = None) -> list[tuple[str, Callable[[Subparsers], None]]]:
    """(name, add-parser function) of each command in the entry-point group, by name (only
    `name`'s, when given)."""
    found: list[tuple[str, Callable[[Subparsers], None]]] = []
    entries = metadata.entry_points(group=COMMANDS_GROUP)
    if name is not None:
        entries = entries.select(name=name)
    for entry in sorted(entries, key=lambda e: e.name):
        try:
            add = entry.load()
        except Exception as e:  # a broken plugin must not take the other commands down
            add = _unavailable(entry.name, f"{type(e).__name__}: {e}")
        found.append((entry.name, add))
    return found


def _own_adders(names: list[str]) -> list[Callable[[Subparsers], None]]:
    """The functions adding the parsers of the client's own commands `names`, each module
    imported (and each function given) once."""
    adders: list[Callable[[Subparsers], None]] = []
    for module, function in dict.fromkeys(OWN[n] for n in names):
        adders.append(getattr(importlib.import_module(f".{module}", __package__), function))
    return adders


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser: every command's, or only `command`'s when it names one (a
    run of one command imports only what that command needs; the usage, the errors and the
    command's own help are the same either way)."""
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
    if command in OWN:
        adders, extra = _own_adders([command]), []
    else:
        known = contributed(command) if command is not None else []
        if known:
            adders, extra = [], known
        else:  # no command, an unknown one, or --help: every command
            adders, extra = _own_adders(list(OWN)), contributed()
    for add in adders:
        add(sub)
    for name, add in extra:
        if name in OWN:
            continue  # a contributed command never shadows one of the client's
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; returns its exit status."""
    if argv is None:
        argv = sys.argv[1:]
    first = argv[0] if argv and not argv[0].startswith("-") else None
    args = build_parser(first).parse_args(argv)
    if hasattr(args, "client_key"):  # a command that talks to a server
        try:
            args.endpoint = endpoint_of(args)
        except BadConnectionOption as e:
            return fail(args.command, str(e), ExitStatus.USAGE)
    status: int = args.func(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
