"""A run of one `bergen` command builds only that command's parser, importing only what it
needs; its usage and help are the ones the whole command line gives it."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from bergen.cli_client.main import OWN, build_parser, contributed


def _choices(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


WHOLE = _choices(build_parser())
NAMES = sorted(WHOLE)


def test_the_whole_command_line_has_every_own_and_contributed_command() -> None:
    assert set(WHOLE) == set(OWN) | {name for name, _ in contributed()}
    assert list(WHOLE)[: len(OWN)] == list(OWN)  # --help lists the client's own first


@pytest.mark.parametrize("name", NAMES)
def test_one_commands_parser_is_the_one_the_whole_command_line_gives_it(name: str) -> None:
    alone = _choices(build_parser(name))
    assert name in alone
    assert set(alone) <= set(WHOLE)
    assert alone[name].format_help() == WHOLE[name].format_help()


@pytest.mark.parametrize(
    ("name", "absent"),
    [
        ("health", ("bergen.cli_client.bots", "bergen.server.main", "bergen.domain.fastplay")),
        ("play", ("bergen.cli_client.tournament", "bergen.server.main")),
        ("serve", ("bergen.cli_client.play", "bergen.cli_client.bots")),
    ],
)
def test_one_command_imports_none_of_the_others(name: str, absent: tuple[str, ...]) -> None:
    code = (
        "import sys\n"
        "from bergen.cli_client.main import build_parser\n"
        f"build_parser({name!r})\n"
        f"print(sorted(m for m in {absent!r} if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout


def test_an_unknown_command_is_refused_with_every_command_named(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser("nope").parse_args(["nope"])
    assert exited.value.code == 2
    said = capsys.readouterr().err
    assert "invalid choice: 'nope'" in said
    for name in NAMES:
        assert repr(name) in said


@pytest.mark.parametrize("policy", ["random", "greedy", "montecarlo", "ismcts"])
def test_every_policy_is_named_by_bots_and_by_play(policy: str) -> None:
    bots = build_parser("bots").parse_args(["bots", "--policy", policy, "greedy"])
    assert bots.policy == [policy, "greedy"]
    play = build_parser("play").parse_args(
        ["play", "--create", "--bots", "1", "--bot-policy", policy]
    )
    assert play.bot_policy == policy
