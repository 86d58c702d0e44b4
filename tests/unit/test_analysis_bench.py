"""The analysis benchmark at a tiny size: it analyses a match, calibrates the win model
against the score difference and prints every figure with its verdict."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The benchmarks are not part of the installed package: import them from the checkout.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench import analysis_bench


def test_a_quick_run_prints_the_match_the_brier_scores_and_the_reliability(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert analysis_bench.main(["--matches", "1", "--held-out", "12"]) == 0
    out = capsys.readouterr().out
    assert "a two-seat match analysed (default budget), wall, median" in out
    assert "the win model's Brier score" in out and "score difference alone" in out
    assert "the win model's reliability on the held-out positions:" in out
    assert "goals: " in out


def test_the_logistic_fit_recovers_a_curve_that_made_the_data() -> None:
    # Positions whose outcome follows the score difference exactly at the 50 % line.
    rows = [(d, 0, 1) for d in range(1, 8)] * 3 + [(0, d, 0) for d in range(1, 8)] * 3
    rows += [(0, 0, 1), (0, 0, 0)]
    a, b = analysis_bench.logistic_fit(rows)
    assert abs(a) < 1e-6 and b > 1.0
