"""The benchmarks' shared harness: rounds in rotation, medians, tables, verdicts, exit status."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The benchmarks are not part of the installed package: import them from the checkout.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench import harness
from bench.harness import Column, ExitStatus, Line, Row, Table


def test_each_round_starts_one_contender_further_along() -> None:
    assert [harness.rotated("abc", r) for r in range(4)] == [
        ["a", "b", "c"],
        ["b", "c", "a"],
        ["c", "a", "b"],
        ["a", "b", "c"],
    ]
    assert harness.rotated([], 3) == []


def test_rounds_warm_up_every_contender_then_measure_each_once_a_round_in_rotation() -> None:
    calls: list[tuple[str, str, int]] = []
    seen: list[tuple[int, list[str]]] = []

    def measure(k: str, r: int) -> int:
        calls.append(("measure", k, r))
        return 10 * r + len(calls)

    got = harness.rounds(
        ("x", "y"),
        2,
        measure,
        warmup=lambda k: calls.append(("warmup", k, -1)),
        after_round=lambda r, figures: seen.append((r, list(figures))),
    )
    assert calls == [
        ("warmup", "x", -1),
        ("warmup", "y", -1),
        ("measure", "x", 0),
        ("measure", "y", 0),
        ("measure", "y", 1),
        ("measure", "x", 1),
    ]
    assert got == {"x": [3, 16], "y": [4, 15]}
    assert seen == [(0, ["x", "y"]), (1, ["y", "x"])]


def test_median_spread_and_percentiles() -> None:
    assert harness.median([5.0, 1.0, 3.0, 100.0]) == 4.0
    assert harness.spread([1200.4, 980.0, 1500.6]) == "980..1,501"
    values = [float(v) for v in range(1, 102)]
    assert harness.percentile(values, 50) == 51.0
    assert harness.percentile(values, 99) == 100.0
    assert harness.percentile([1.0, 2.0], 99) == pytest.approx(1.99)
    assert harness.percentile([1.0, 2.0], 99, "exclusive") == pytest.approx(2.97)


def test_a_stopwatch_reads_wall_and_cpu_time() -> None:
    watch = harness.Stopwatch()
    sum(range(200_000))
    took = watch.read()
    assert took.wall > 0
    assert took.cpu >= 0
    assert watch.read(watch.started + 2.5).wall == 2.5


@pytest.mark.parametrize(
    ("value", "goal", "met"),
    [
        (0.95, ">= 0.95", True),
        (0.94, ">= 0.95", False),
        (1.25, "<= 1.25", True),
        (1.3, "<= 1.25", False),
        (2.0, "< 2", False),
        (3.0, "> 2", True),
    ],
)
def test_a_goal_is_an_operator_and_a_number(value: float, goal: str, met: bool) -> None:
    assert harness.meets(value, goal) is met


def test_a_goal_without_an_operator_is_refused() -> None:
    with pytest.raises(ValueError, match="operator"):
        harness.meets(1.0, "about 1")


def test_verdicts_and_ratios() -> None:
    assert harness.verdict(None) == ""
    assert harness.verdict(True) == "PASS"
    assert harness.verdict(True, "met") == "met"
    assert harness.verdict(False, "met") == "MISSED"
    assert harness.ratio_text(None) == "-"
    assert harness.ratio_text(1.005) == "1.00"
    assert harness.ratio_text(2.346) == "2.35"


def test_a_table_aligns_its_columns_and_prints_each_goals_verdict() -> None:
    table = Table(
        (Column("measure", 12, "<"), Column("bergen", 8), Column("ratio", 6), Column("goal", 8))
    )
    lines = table.lines(
        [
            Row(("appends/s", "1,200/s", "1.03", ">= 0.95"), True),
            Row(("p99", "9.5 ms", "2.10", "<= 1.5"), False),
            Row(("reported", "7", "-", "")),
        ]
    )
    assert lines == [
        "measure        bergen  ratio     goal",
        "-" * 45,
        "appends/s     1,200/s   1.03  >= 0.95  PASS",
        "p99            9.5 ms   2.10   <= 1.5  MISSED",
        "reported            7      -",
    ]


def test_a_line_is_a_row_of_figure_reference_ratio_and_goal() -> None:
    line = Line("Play/s", "900/s", "1,000/s", 0.9, ">= 0.85", True)
    assert line.row() == Row(("Play/s", "900/s", "1,000/s", "0.90", ">= 0.85"), True)
    assert line.verdict == "PASS"
    assert Line("reported", "1").row() == Row(("reported", "1", "", "-", ""), None)
    assert harness.SERVICE_TABLE.lines([line])[2].endswith("0.90      >= 0.85  PASS")


def test_a_table_with_columns_as_wide_as_their_cells() -> None:
    table = Table(
        (Column("figure", align="<"), Column("measured")),
        gap="  ",
        verdict_title="result",
        met="met",
    )
    lines = table.lines([Row(("a long figure", "1"), True), Row(("b", "12,345"))])
    assert lines == [
        "figure         measured  result",
        "-" * (13 + 2 + 8 + 2 + 6),
        "a long figure         1  met",
        "b                12,345",
    ]


def test_a_table_without_verdicts_with_an_indent_and_a_column_of_its_own_gap() -> None:
    table = Table(
        (Column("n", 3), Column("note", 0, "<", gap="  ")), verdicts=False, indent="  ", rule=9
    )
    assert table.lines([Row(("1", "first")), Row(("22", ""), False)]) == [
        "    n  note",
        "  ---------",
        "    1  first",
        "   22",
    ]


def test_the_goals_line_names_the_goals_missed() -> None:
    rows = [
        Row(("fold", "0.1 ms"), True),
        Line("load", "2 ms", "6 ms", 3.0, ">= 8.0", False),
        Row(("Monte Carlo", "600"), False),
        Row(("reported", "1")),
    ]
    assert harness.goals_line(rows) == "goals: 1 of 3 passed; MISSED: load; Monte Carlo"
    assert harness.goals_line(rows[:1]) == "goals: 1 of 1 passed"


def test_quick_runs_take_the_short_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(harness.QUICK_ENV, raising=False)
    assert harness.quick_or(2000, 200) == 2000
    monkeypatch.setenv(harness.QUICK_ENV, "0")
    assert harness.quick_or(2000, 200) == 2000
    monkeypatch.setenv(harness.QUICK_ENV, "1")
    assert harness.quick_or(2000, 200) == 200


def test_the_cpu_time_of_a_process_that_is_not_there() -> None:
    with pytest.raises(OSError):
        harness.cpu_seconds(-1)
    assert harness.cpu_seconds(-1, default=0.0) == 0.0


def test_one_exit_status_for_the_runner_and_every_benchmark() -> None:
    from bench import __main__ as runner

    assert runner.ExitStatus is ExitStatus
    assert (ExitStatus.OK, ExitStatus.CRASHED, ExitStatus.USAGE) == (0, 1, 2)
    assert runner.main(["--list"]) == ExitStatus.OK
    assert runner.main(["no-such-benchmark"]) == ExitStatus.USAGE
