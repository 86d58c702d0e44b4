"""The transparency log's benchmark: a quick run on a real PostgreSQL prints its figures with
their verdicts (the proofs it times, from the local copy and from the tables alone, are each
checked against the tree's root, the witness's checks each cosign a new checkpoint of a server
on the benchmark's tree)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

# The benchmarks are not part of the installed package: import them from the checkout.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench import harness
from bench import tlog_bench as bench

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

NUMBER = r"(\d+(?:\.\d+)?)"


@pytest.mark.timeout(300)
def test_a_quick_run_prints_the_proofs_the_witness_and_the_play_ratio(
    pg_admin_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(harness.QUICK_ENV, "1")
    args = ["--database-url", pg_admin_url, "--events", "5000", "--calls", "50"]
    assert bench.main([*args, "--checks", "10", "--seconds", "3", "--clients", "2"]) == 0
    out = capsys.readouterr().out
    for kind in ("inclusion", "consistency"):
        found = re.search(
            rf"{kind} proofs at 5,000 events, 50 calls: p50 {NUMBER} ms, p99 {NUMBER} ms,"
            r" goal p99 < 5 ms: (PASS|MISSED)",
            out,
        )
        assert found, out
        assert 0 < float(found[1]) <= float(found[2])
        assert found[3] == ("PASS" if float(found[2]) < 5 else "MISSED")
        # the same proofs from the tables alone, beside them: the reference
        tables = re.search(
            rf"{kind} proofs at 5,000 events.*\n  from the tables alone: p50 {NUMBER} ms,"
            rf" p99 {NUMBER} ms \(p99 ratio {NUMBER}\)",
            out,
        )
        assert tables, out
        assert 0 < float(tables[1]) <= float(tables[2])
    found = re.search(
        r"a witness's check of a new checkpoint, 10 checks up to ([\d,]+) events:"
        rf" p50 {NUMBER} ms, p99 {NUMBER} ms, goal p99 < 10 ms: (PASS|MISSED)",
        out,
    )
    assert found, out
    assert int(found[1].replace(",", "")) > 5000 + 10  # each check a bigger tree than the last
    assert 0 < float(found[2]) <= float(found[3])
    assert found[4] == ("PASS" if float(found[3]) < 10 else "MISSED")
    # the play table: the round, then the medians, judged on the median ratio
    assert re.search(rf"^round 1 +{NUMBER} +{NUMBER} +{NUMBER}$", out, re.M), out
    median = re.search(
        rf"^median +{NUMBER} +{NUMBER} +{NUMBER} +>= 0.95 +(PASS|MISSED)$", out, re.M
    )
    assert median, out
    found = re.search(rf"ratio \(median of the rounds\) {NUMBER}, goal >= 0.95: (PASS|MISSED)", out)
    assert found, out
    assert found[1] == median[3] and float(found[1]) > 0
    assert found[2] == median[4] == ("PASS" if float(found[1]) >= 0.95 else "MISSED")


def test_the_play_table_is_judged_on_the_median_of_the_rounds_ratios() -> None:
    rates = {bench.WITH: [100.0, 300.0, 200.0], bench.WITHOUT: [100.0, 200.0, 250.0]}
    rows, ratio = bench.play_rows(rates)
    assert ratio == 1.0  # the ratios 1.0, 1.5 and 0.8
    assert [r.cells[3] for r in rows] == ["1.000", "1.500", "0.800", "1.000"]
    assert rows[-1].cells[:3] == ("median", "200", "200")
    assert rows[-1].passed is True
    assert all(r.passed is None for r in rows[:-1])
