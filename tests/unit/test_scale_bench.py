"""The scale benchmark: a quick run at two tiny sizes on a real PostgreSQL loads real matches,
takes every figure at each size and prints each against its first, with the goals' verdicts,
and draws the curve."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

# The benchmarks are not part of the installed package: import them from the checkout.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench import harness
from bench import scale_bench as bench

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

NUMBER = r"([\d,]+(?:\.\d+)?)"


def value(text: str) -> float:
    return float(text.replace(",", ""))


@pytest.mark.timeout(120)
def test_a_run_at_two_tiny_sizes_prints_every_measure_against_its_first(
    pg_admin_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    monkeypatch.setenv(harness.QUICK_ENV, "1")
    picture = tmp_path / "curve.svg"
    args = ["--database-url", pg_admin_url, "--sizes", "50", "200", "--seconds", "1"]
    args += ["--calls", "10", "--restarts", "1", "--export-budget", "30", "--svg", str(picture)]
    assert bench.main(args) == 0
    out = capsys.readouterr().out
    for size, loaded in ((50, 50), (200, 150)):
        found = re.search(
            rf"up to {size} matches: loaded {loaded} matches, {NUMBER} events in {NUMBER} s:"
            rf" {NUMBER} events/s, {NUMBER} matches/s",
            out,
        )
        assert found, out
        assert value(found[1]) > 20 * loaded  # whole matches: deals, draws, plays, ends
    for m in bench.MEASURES:
        line = re.search(
            rf"^{re.escape(f'{m.what} ({m.unit})')} +{NUMBER} +{NUMBER} +{NUMBER}(.*)$", out, re.M
        )
        assert line, f"{m.what}\n{out}"
        first, last, ratio = value(line[1]), value(line[2]), float(line[3])
        # the figures are printed rounded: the ratio lies within what their last digits allow
        half = 0.5 * 10 ** -int(m.fmt.rpartition(".")[2].rstrip("f"))
        assert first > half and last > 0
        assert (
            (last - half) / (first + half) - 0.01 <= ratio <= (last + half) / (first - half) + 0.01
        )
        goal = line[4]
        if m.latency:
            assert goal.split() == ["<=", "1.3x", "PASS" if ratio <= 1.3 else "MISSED"]
        elif m.key == bench.START:
            assert goal.split() == ["<", "2", "s", "PASS" if last < 2 else "MISSED"]
        elif m.key == bench.EXPORT:
            assert goal.split() == [">=", "2,000/s", "PASS" if last >= 2000 else "MISSED"]
        else:
            assert goal.strip() == ""
    assert re.search(r"^goals: \d of 8 passed", out, re.M), out
    drawn = picture.read_text()
    assert drawn.startswith("<svg") and drawn.count("<polyline") == len(bench.MEASURES) - 1


def test_the_curve_puts_each_measure_at_its_ratio_to_the_first_size() -> None:
    steps = []
    for k, n in enumerate((1000, 10_000, 100_000)):
        step = bench.Step(n, n * 100, bench.Loaded(n, n * 100, 1.0))
        step.figures = {m.key: 1.0 + k for m in bench.MEASURES}
        steps.append(step)
    found = bench.rows(steps)
    assert [r.cells[-2] for r in found] == ["3.00"] * len(bench.MEASURES)
    latencies = [r for r, m in zip(found, bench.MEASURES, strict=True) if m.latency]
    assert latencies and all(r.passed is False for r in latencies)
    drawn = bench.svg(steps)
    # every series ends at 3.00, its ratio at the largest size, shown in its legend
    assert drawn.count(" 3.00</text>") == len(bench.MEASURES) - 1
