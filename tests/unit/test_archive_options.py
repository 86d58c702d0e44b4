"""`bergen archive`'s options: an age in a unit, or a time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bergen.cli_client import archive
from bergen.cli_client.main import build_parser


@pytest.mark.parametrize(
    ("text", "age"),
    [
        ("0s", timedelta(0)),
        ("90m", timedelta(minutes=90)),
        ("12h", timedelta(hours=12)),
        ("30d", timedelta(days=30)),
        ("2w", timedelta(weeks=2)),
        ("1.5h", timedelta(minutes=90)),
    ],
)
def test_an_age_is_a_number_and_a_unit(text: str, age: timedelta) -> None:
    assert archive.parse_age(text) == age


@pytest.mark.parametrize("text", ["", "30", "d", "-1d", "30 days", "1y"])
def test_anything_else_is_no_age(text: str) -> None:
    with pytest.raises(ValueError, match="no age"):
        archive.parse_age(text)


def test_the_command_takes_an_age_or_a_time_but_not_both(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = build_parser("archive")
    args = parser.parse_args(["archive", "--older-than", "0s", "--to", "out"])
    assert args.older_than == timedelta(0) and args.ended_before is None
    args = parser.parse_args(["archive", "--ended-before", "2026-01-01", "--to", "out"])
    assert args.ended_before == datetime(2026, 1, 1, tzinfo=UTC)
    for wrong in (["--to", "out"], ["--older-than", "1d", "--ended-before", "2026-01-01"]):
        with pytest.raises(SystemExit):
            parser.parse_args(["archive", *wrong, "--to", "out"])
    capsys.readouterr()
