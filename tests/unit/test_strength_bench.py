"""The strength benchmark at a tiny size: its round robin, its table and its verdict."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The benchmarks are not part of the installed package: import them from the checkout.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench import strength_bench


def test_a_tiny_run_prints_each_pairing_the_three_seats_and_the_verdict(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["--matches", "2", "--three", "1", "--time", "0.005", "--workers", "1"]
    argv += ["--pairing", "ismcts-montecarlo", "--pairing", "greedy-random"]
    assert strength_bench.main(argv) == 0
    out = capsys.readouterr().out
    assert "ismcts vs montecarlo: ismcts won" in out and "95% Wilson" in out
    assert "greedy vs random: greedy won" in out
    assert "three seats, 1 matches" in out
    assert "goal: ismcts beats montecarlo at two seats" in out


def test_seats_alternate_and_three_seat_orders_rotate() -> None:
    two = strength_bench.two_seat_jobs("ismcts", "greedy", 4, 0.1, "s")
    assert [names for names, *_ in two] == [("ismcts", "greedy"), ("greedy", "ismcts")] * 2
    three = strength_bench.three_seat_jobs(strength_bench.THREE, 6, 0.1, "s")
    assert len({names for names, *_ in three}) == 6
