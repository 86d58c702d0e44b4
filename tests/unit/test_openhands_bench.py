"""The open-hands benchmark: its deals are the server's, and a short run prints its figures
with the goal's verdict."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

# The benchmarks are not part of the installed package: import them from the checkout.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench import harness
from bench import openhands_bench as bench
from bergen.domain.scoring import lead_of
from bergen.domain.tiles import ALL_TILES


def test_the_deals_are_full_and_each_has_a_lead() -> None:
    for seats, partnerships in ((2, False), (4, True)):
        for deal in bench.deals(seats, partnerships, 5, "test"):
            tiles = [t for h in deal.hands for t in h] + list(deal.boneyard)
            assert sorted(tiles) == list(ALL_TILES)
            assert len(deal.hands) == seats
            assert lead_of(deal.rules, deal.hands) is not None


def test_a_short_run_prints_the_p99_and_its_verdict(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(harness.QUICK_ENV, "1")
    assert bench.main(["--hands", "4"]) == 0
    out = capsys.readouterr().out
    found = re.search(r"par p99, 2 seats, CPU\s+([\d,.]+) ms\s+< 1000 ms\s+(PASS|MISSED)", out)
    assert found, out
    assert found[2] == ("PASS" if float(found[1].replace(",", "")) < 1000 else "MISSED")
    assert "4 seats in partnerships" in out
