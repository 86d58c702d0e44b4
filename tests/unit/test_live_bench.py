"""The live benchmark: a run of a few matches on a real PostgreSQL in each way of watching the
seats holds every seat with its view to the end and prints the table, naming its mode."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

# The benchmarks are not part of the installed package: import them from the checkout.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench import harness
from bench import live_bench as bench

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("watch", "streams"),
    [
        # 21 matches in 2 processes (11 and 10), 8 follows (4 matches) a stream: 3 + 3 streams
        (bench.FOLLOWS, 6),
        (bench.STREAMS, 42),
    ],
)
def test_a_tiny_run_holds_every_seat_to_the_end_and_names_its_mode(
    watch: str,
    streams: int,
    pg_admin_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(harness.QUICK_ENV, "1")
    args = ["--database-url", pg_admin_url, "--watch", watch, "--matches", "21"]
    args += ["--follows-per-stream", "8", "--seconds", "0.5", "--idle", "0.5"]
    assert bench.main([*args, "--idle-empty", "0.5"]) == 0
    out = capsys.readouterr().out
    assert re.search(rf"^--watch {watch}: every seat a .*, {streams} streams$", out, re.M), out
    assert re.search(r"^Server memory per live match \(RSS\), KB, 21 matches ", out, re.M), out
    assert f"seats watching: 42 on {streams} streams, opened in" in out, out
    assert f"(0 matches failed); at the end 42 seats watching on {streams} streams still" in out
    assert "timeouts written: 0;" in out, out
    assert re.search(r"^goals: \d of 3 passed", out, re.M), out


def test_the_follows_per_stream_are_held_to_what_a_request_may_give() -> None:
    with pytest.raises(SystemExit):
        bench.main(["--follows-per-stream", str(bench.FOLLOWS_PER_STREAM + 1)])
