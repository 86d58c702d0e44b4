"""`bergen simulate --clock`: clocked matches in simulated time, whose records verify."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bergen.cli_client.main import main
from bergen.domain.audit import replay_record


def test_bergen_simulate_plays_clocked_matches_whose_records_verify(tmp_path, capsys):
    status = main(
        [
            "simulate",
            "--matches",
            "4",
            "--clock",
            "8+1",
            "--think",
            "100-3000",
            "--stall",
            "0.1",
            "--resign",
            "0.02",
            "--seed",
            "clocks",
            "--out",
            str(tmp_path),
            "--json",
        ]
    )
    assert status == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["timeouts"] > 0 and summary["forfeits"] > 0
    for path in summary["records"]:
        record = json.loads(Path(path).read_text(encoding="utf-8"))
        assert (record["rules"]["clock_initial"], record["rules"]["clock_increment"]) == (8, 1)
        verdict = replay_record(record)
        assert verdict.ok, verdict.line()


@pytest.mark.parametrize(
    "args", [["--clock", "fast"], ["--clock", "0+1"], ["--clock", "60", "--think", "9-1"]]
)
def test_bergen_simulate_refuses_a_clock_it_cannot_play(tmp_path, args):
    assert main(["simulate", "--matches", "1", "--out", str(tmp_path), *args]) == 2
