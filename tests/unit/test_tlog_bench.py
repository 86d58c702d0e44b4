"""The transparency log's benchmark: a quick run on a real PostgreSQL prints its figures with
their verdicts (the proofs it times are each checked against the tree's root)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

# The benchmarks are not part of the installed package: import them from the checkout.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench import harness
from bench import tlog_bench as bench

pytestmark = pytest.mark.postgres


@pytest.mark.timeout(300)
def test_a_quick_run_prints_both_proofs_and_the_play_ratio(
    pg_admin_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(harness.QUICK_ENV, "1")
    args = ["--database-url", pg_admin_url, "--events", "5000", "--calls", "50"]
    assert bench.main([*args, "--seconds", "3", "--clients", "2"]) == 0
    out = capsys.readouterr().out
    number = r"(\d+(?:\.\d+)?)"
    for kind in ("inclusion", "consistency"):
        found = re.search(
            rf"{kind} proofs at 5,000 events, 50 calls: p50 {number} ms, p99 {number} ms,"
            r" goal p99 < 5 ms: (PASS|MISSED)",
            out,
        )
        assert found, out
        assert 0 < float(found[1]) <= float(found[2])
        assert found[3] == ("PASS" if float(found[2]) < 5 else "MISSED")
    found = re.search(rf"ratio {number}, goal >= 0.95: (PASS|MISSED)", out)
    assert found, out
    assert float(found[1]) > 0
    assert found[2] == ("PASS" if float(found[1]) >= 0.95 else "MISSED")
