"""The players' benchmark of the web gateway: its figures, and a quick run on real servers."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

# The benchmarks are not part of the installed package: import them from the checkout.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench import harness
from bench import web_play_bench as bench
from bench.harness import ExitStatus


def test_a_play_is_shown_when_the_stream_first_shows_its_version_or_a_later_one() -> None:
    seen = bench.Seen()
    seen.update(3, 0, False, [], 1.0)
    seen.update(5, 1, False, [], 2.0)
    seen.update(4, 0, False, [], 3.0)  # late: kept as an arrival, not as the view
    assert (seen.version, seen.turn) == (5, 1)
    assert seen.shown_at(3) == 1.0
    assert seen.shown_at(4) == 2.0
    assert seen.shown_at(6) is None


def test_only_plays_inside_the_window_count() -> None:
    window = bench.Window(10.0, 20.0, stop=None)  # type: ignore[arg-type]
    seen = bench.Seen()
    seen.update(2, None, False, [], 10.05)
    seen.update(4, None, False, [], 20.5)
    tally = bench.Tally()
    sent = [(9.9, 10.01, 2), (10.0, 10.04, 2), (19.9, 20.1, 4)]
    bench.record(tally, window, sent, seen)
    assert tally.plays == 2  # answered at 10.01 and 10.04; 20.1 is after the window
    assert [round(x, 3) for x in tally.latencies] == [0.05, 0.6]
    assert [round(x, 3) for x in tally.answered] == [0.04, 0.2]


def test_the_table_gives_each_goal_its_verdict() -> None:
    def run(plays: int, paced: list[float]) -> bench.Round:
        return bench.Round(bench.Tally(latencies=paced), bench.Tally(plays=plays, latencies=[1, 2]))

    fast = [0.01, 0.02, 0.03, 0.04]
    slow = [0.1, 0.2, 0.3, 0.4]
    lines = bench.rows(4, 2.0, {bench.WEB: [run(80, slow)], bench.GRPC: [run(100, fast)]}, 2.0)
    assert [line.passed for line in lines] == [None, False, None, True, None, None]
    assert lines[3].ours == "40" and lines[3].reference == "50" and lines[3].ratio == 0.8
    assert lines[0].ours == "250.0" and lines[0].reference == "25.0"
    lines = bench.rows(4, 2.0, {bench.WEB: [run(70, fast)], bench.GRPC: [run(100, slow)]}, 1.0)
    assert [line.passed for line in lines] == [None, True, None, False, None, None]
    # Each figure is the median of the rounds' own: one slow round of three changes nothing.
    three = {bench.WEB: [run(80, fast), run(70, slow), run(90, fast)], bench.GRPC: [run(100, fast)]}
    lines = bench.rows(4, 2.0, three, 1.0)
    assert [line.passed for line in lines] == [None, True, None, True, None, None]
    assert lines[3].ours == "80"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_quick_run_plays_through_the_gateway_and_prints_both_figures(
    pg_admin_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(harness.QUICK_ENV, "1")
    # Windows long enough that a machine busy with other work still lands Plays in each: the
    # quick defaults (1.5 s after 0.5 s) can pass without one when the processes start slowly.
    args = ["--database-url", pg_admin_url, "--players", "8", "--warmup", "2", "--seconds", "4"]
    assert bench.main(args) == ExitStatus.OK
    out = capsys.readouterr().out
    number = r"(\d+(?:\.\d+)?)"
    for p in ("p50", "p99"):
        found = re.search(
            rf"Play to own view, {p} \(ms\), 0.5 s thinking\s+{number}\s+{number}", out
        )
        assert found, out
        assert float(found[1]) > 0 and float(found[2]) > 0
    assert re.search(r"p99 \(ms\), 0.5 s thinking .*< 150\s+(PASS|MISSED)", out), out
    found = re.search(
        rf"Play/s, 8 players flat out \(median\)\s+(\d+)\s+(\d+)\s+{number}\s+>= 0.75\s+(\w+)", out
    )
    assert found, out
    web, grpc, ratio = int(found[1]), int(found[2]), float(found[3])
    assert web > 0 and grpc > 0
    # The rates are printed rounded to whole Plays a second and the ratio to 0.01, so the
    # ratio of the printed rates is only near it when the rates are small (a busy machine).
    assert (web - 0.5) / (grpc + 0.5) - 0.005 <= ratio <= (web + 0.5) / (grpc - 0.5) + 0.005
    assert found[4] == ("PASS" if ratio >= 0.75 else "MISSED")
