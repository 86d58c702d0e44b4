"""Every command's help is written for the person reading it: it ends with examples, and it
names no RPC, no source or specification file and no constant of the code.

Each subcommand of `bergen` (the server's own included, through their entry points), each
`bergen tournament` action and `bergen-replay` is checked, so a new command is checked too.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

import pytest

from bergen.cli_client import replay
from bergen.cli_client.main import build_parser
from bergen.v1 import bergen_pb2 as pb

RPCS = {
    m.name
    for m in pb.DESCRIPTOR.services_by_name["BergenService"].methods
    # `Play` and `Resign` are English words too: a help may say "Play matches...".
    if sum(c.isupper() for c in m.name) > 1
}
CONSTANT = re.compile(r"(?<![$\w])[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b")
"""An UPPER_SNAKE word: a constant, an enum value or argparse's default metavar of a
`--long-option` (give it a metavar of its own). `$BERGEN_...` variables are the user's."""
SOURCE_FILE = re.compile(r"\b[\w./-]+\.(?:py|md|proto)\b")


def _commands() -> Iterator[tuple[str, argparse.ArgumentParser]]:
    parser = build_parser()
    yield "bergen", parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"bergen {name}", sub
                for inner in sub._actions:
                    if isinstance(inner, argparse._SubParsersAction):
                        for name2, sub2 in inner.choices.items():
                            yield f"bergen {name} {name2}", sub2
    yield "bergen-replay", replay.build_parser()


COMMANDS = dict(_commands())


def test_every_command_is_checked() -> None:
    for name in ("bergen play", "bergen watch", "bergen resign", "bergen abandon",
                 "bergen serve", "bergen tournament create", "bergen-replay"):  # fmt: skip
        assert name in COMMANDS


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help_ends_with_examples_of_this_command(name: str) -> None:
    text = COMMANDS[name].format_help().rstrip()
    _head, sep, tail = text.rpartition("\nexamples:\n")
    assert sep, f"{name}'s help has no examples at its end"
    lines = [line.strip() for line in tail.splitlines()]
    assert lines and all(line.startswith(name.split(" ")[0]) for line in lines), tail
    # The examples run the command they document (or, for `bergen`, its commands).
    assert any(line.startswith(name) for line in lines), tail


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help_names_no_rpc_file_or_constant(name: str) -> None:
    text = COMMANDS[name].format_help()
    words = set(re.findall(r"\b[A-Z][a-zA-Z]+\b", text))
    assert not words & RPCS, f"{name} names RPCs: {sorted(words & RPCS)}"
    assert not SOURCE_FILE.findall(text), f"{name} names files: {SOURCE_FILE.findall(text)}"
    assert not CONSTANT.findall(text), f"{name} names constants: {CONSTANT.findall(text)}"
