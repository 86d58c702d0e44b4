"""What every benchmark shares: the runner, the table, the exit status.

- The runner: `rounds` runs each contender once a round, in an order that rotates by round
  (`rotated`), so that drift in a shared machine's speed falls on all of them alike; each
  figure is then the median (or the best) of its rounds. `Stopwatch` reads the wall clock
  and the CPU time together; `per_call` times a function with `timeit`; `cpu_seconds` reads
  another process's CPU time from /proc; `percentile` is the one way a figure's p50/p99 is computed.
- The table: `Table` prints rows under aligned columns, a goal's verdict after them
  (`verdict`: PASS, or the table's word for it, else MISSED), a ratio as `ratio_text`
  prints it; `Line` is a figure against its reference, `goals_line` the summary of a table's
  goals. A missed goal is printed, never a failure.
- The exit status: `ExitStatus`, of `python -m bench` and of every benchmark's `main`.
- Short runs: `BERGEN_BENCH_QUICK=1` (or `python -m bench --quick`) makes every benchmark's
  defaults small (`quick_or`), for a smoke test of the code, not for figures.

This module imports only the standard library, so that every benchmark may import it.
"""

from __future__ import annotations

import gc
import os
import statistics
import sys
import time
import timeit
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar

if TYPE_CHECKING:
    import argparse

K = TypeVar("K")
T = TypeVar("T")


class ExitStatus(IntEnum):
    """How a benchmark run ended. A missed goal is OK: it is printed as MISSED."""

    OK = 0
    CRASHED = 1
    USAGE = 2


# --- settings ------------------------------------------------------------------------------

QUICK_ENV = "BERGEN_BENCH_QUICK"
BENCH_URL_ENV = "BERGEN_BENCH_DATABASE_URL"
DEFAULT_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def quick() -> bool:
    """Whether this is a short smoke run (BERGEN_BENCH_QUICK set to anything but 0 or empty)."""
    return os.environ.get(QUICK_ENV, "") not in ("", "0")


def quick_or(full: T, short: T) -> T:
    """`short` in a quick run, else `full`: a benchmark's default for an option."""
    return short if quick() else full


def database_url() -> str:
    """The admin PostgreSQL URL benchmarks make their databases from: BERGEN_BENCH_DATABASE_URL
    or a local default."""
    return os.environ.get(BENCH_URL_ENV) or DEFAULT_ADMIN_URL


def add_database_url(parser: argparse.ArgumentParser, what: str = "the run's database") -> None:
    """The `--database-url` option every PostgreSQL benchmark takes."""
    parser.add_argument(
        "--database-url",
        default=database_url(),
        help=f"an admin URL to create {what} from (${BENCH_URL_ENV})",
    )


def say(text: str) -> None:
    """Print a progress line at once (a benchmark runs for minutes)."""
    print(text, flush=True)


# --- the runner ----------------------------------------------------------------------------


def rotated(items: Sequence[K], r: int) -> list[K]:
    """`items` in the order of round `r`: each round starts one further along."""
    if not items:
        return []
    n = r % len(items)
    return [*items[n:], *items[:n]]


def rounds(
    contenders: Sequence[K],
    count: int,
    measure: Callable[[K, int], T],
    warmup: Callable[[K], object] | None = None,
    after_round: Callable[[int, dict[K, T]], None] | None = None,
) -> dict[K, list[T]]:
    """Each contender's measurements, one a round: `warmup(k)` for each first (discarded),
    then `count` rounds of `measure(k, r)` for every contender in the round's rotated order.
    `after_round(r, figures)` is given the round's figures in the order they were taken."""
    if warmup is not None:
        for k in contenders:
            warmup(k)
    out: dict[K, list[T]] = {k: [] for k in contenders}
    for r in range(count):
        this: dict[K, T] = {}
        for k in rotated(contenders, r):
            this[k] = measure(k, r)
            out[k].append(this[k])
        if after_round is not None:
            after_round(r, this)
    return out


def median(values: Iterable[float]) -> float:
    """The median; raises statistics.StatisticsError when there is none."""
    return statistics.median(values)


def spread(values: Sequence[float], fmt: str = ",.0f") -> str:
    """The range of `values` as min..max."""
    return f"{min(values):{fmt}}..{max(values):{fmt}}"


def percentile(
    values: Sequence[float],
    p: int,
    method: Literal["inclusive", "exclusive"] = "inclusive",
) -> float:
    """The p-th percentile (1 to 99) of at least two values."""
    return statistics.quantiles(values, n=100, method=method)[p - 1]


@dataclass(frozen=True)
class Timing:
    """A stretch of time by the wall clock and by a CPU clock."""

    wall: float
    cpu: float


class Stopwatch:
    """Wall-clock and CPU time since it was made: the process's CPU time by default, or the
    calling thread's (`time.thread_time`). On a shared machine the wall clock also counts the
    time other processes held the core; the CPU time is what the code cost."""

    def __init__(self, cpu_clock: Callable[[], float] = time.process_time) -> None:
        self._cpu_clock = cpu_clock
        self.started = time.perf_counter()
        self._cpu = cpu_clock()

    def read(self, now: float | None = None) -> Timing:
        """The time so far (`now`: a perf_counter reading already taken)."""
        wall = (time.perf_counter() if now is None else now) - self.started
        return Timing(wall, self._cpu_clock() - self._cpu)


def per_call(
    fn: Callable[[], object], repeats: int, clock: Callable[[], float] = time.perf_counter
) -> float:
    """Median seconds per call over `repeats` timings of about 0.2 s each, with the garbage
    collector on, as it is in the server (timeit turns it off by default); by the wall
    clock or by `clock` (process_time: CPU time)."""
    timer = timeit.Timer(fn, setup=gc.enable, timer=clock)
    number, _ = timer.autorange()
    return statistics.median(timer.repeat(repeat=repeats, number=number)) / number


def stat_cpu_seconds(path: str) -> float | None:
    """User + system seconds in the /proc `stat` file at `path` (a process's or a thread's);
    None when it cannot be read."""
    try:
        stat = Path(path).read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces: the fields after it follow its last ')'.
    fields = stat.rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int, default: float | None = None) -> float:
    """The CPU time a process used so far (utime + stime, its children excluded). Raises
    OSError where /proc does not tell it, unless a `default` is given."""
    seconds = stat_cpu_seconds(f"/proc/{pid}/stat")
    if seconds is not None:
        return seconds
    if default is None:
        raise OSError(f"/proc/{pid}/stat cannot be read")
    return default


# --- the table -----------------------------------------------------------------------------

MISSED = "MISSED"


def verdict(passed: bool | None, met: str = "PASS") -> str:
    """A goal's verdict: `met`, MISSED, or "" for a figure reported without a goal."""
    if passed is None:
        return ""
    return met if passed else MISSED


def ratio_text(ratio: float | None) -> str:
    """A ratio against the reference as the tables print it: 2 decimals, "-" for none."""
    return "-" if ratio is None else f"{ratio:.2f}"


def meets(value: float, goal: str) -> bool:
    """Whether `value` meets a goal written as an operator and a number (">= 0.95").
    Raises ValueError for any other goal."""
    op, _, target = goal.partition(" ")
    limit = float(target)
    checks: dict[str, Callable[[float, float], bool]] = {
        ">=": lambda a, b: a >= b,
        "<=": lambda a, b: a <= b,
        ">": lambda a, b: a > b,
        "<": lambda a, b: a < b,
    }
    if op not in checks:
        raise ValueError(f"a goal is an operator and a number, not {goal!r}")
    return checks[op](value, limit)


@dataclass(frozen=True)
class Row:
    """A table's row: its cells, column by column, and its goal's outcome (None: no goal)."""

    cells: tuple[str, ...]
    passed: bool | None = None


@dataclass(frozen=True)
class Line:
    """A figure of ours against its reference, with its ratio and its goal."""

    measure: str
    ours: str
    reference: str = ""
    ratio: float | None = None
    goal: str = ""
    passed: bool | None = None
    """None: a figure reported without a goal."""

    @property
    def verdict(self) -> str:
        return verdict(self.passed)

    def row(self) -> Row:
        """The row of a table with the columns measure, ours, reference, ratio, goal."""
        cells = (self.measure, self.ours, self.reference, ratio_text(self.ratio), self.goal)
        return Row(cells, self.passed)


@dataclass(frozen=True)
class Column:
    title: str
    width: int | None = None
    """The cells' width: cells are padded to it, a longer one overflows its own line; None:
    as wide as the column's widest cell or title."""
    align: Literal["<", ">"] = ">"
    gap: str | None = None
    """What separates it from the column before; None: the table's gap."""


@dataclass(frozen=True)
class Table:
    """Columns, and how their rows are printed: each row's cells padded to their columns with
    `gap` between them, then (when `verdicts`) its goal's verdict after two spaces, under
    `verdict_title`; the header is underlined by a rule `rule` characters long (None: the
    table's full width, its verdict column as wide as MISSED)."""

    columns: tuple[Column, ...]
    gap: str = " "
    verdicts: bool = True
    verdict_title: str = ""
    met: str = "PASS"
    """The verdict of a goal met."""
    indent: str = ""
    rule: int | None = None

    def widths(self, rows: Sequence[Row]) -> list[int]:
        out = []
        for i, c in enumerate(self.columns):
            if c.width is not None:
                out.append(c.width)
            else:
                cells = [r.cells[i] for r in rows if i < len(r.cells)]
                out.append(max(len(x) for x in (c.title, *cells)))
        return out

    def _line(self, cells: Sequence[str], widths: Sequence[int], last: str) -> str:
        text = self.indent
        for i, (cell, c, w) in enumerate(zip(cells, self.columns, widths, strict=False)):
            if i:
                text += self.gap if c.gap is None else c.gap
            text += f"{cell:{c.align}{w}}"
        if self.verdicts and last:
            text += "  " + last
        return text.rstrip()

    def lines(self, rows: Iterable[Row | Line]) -> list[str]:
        """The header, its rule and every row, trailing spaces trimmed."""
        table = [r.row() if isinstance(r, Line) else r for r in rows]
        widths = self.widths(table)
        header = self._line([c.title for c in self.columns], widths, self.verdict_title)
        if self.rule is not None:
            rule = self.rule
        else:
            gaps = [self.gap if c.gap is None else c.gap for c in self.columns[1:]]
            rule = sum(widths) + sum(len(g) for g in gaps)
            if self.verdicts:
                rule += 2 + max(len(MISSED), len(self.met), len(self.verdict_title))
        out = [header, self.indent + "-" * rule]
        out += [self._line(r.cells, widths, verdict(r.passed, self.met)) for r in table]
        return out

    def print(self, rows: Iterable[Row | Line], title: str | None = None) -> None:
        """Print the table, after a line of its `title` when given."""
        if title is not None:
            print(title)
        for line in self.lines(rows):
            print(line)
        sys.stdout.flush()


def goals_line(rows: Iterable[Row | Line]) -> str:
    """How many of the rows' goals were met, and the names (first cells) of those MISSED."""
    table = [r.row() if isinstance(r, Line) else r for r in rows]
    goals = [r for r in table if r.passed is not None]
    missed = [r.cells[0] for r in goals if not r.passed]
    return f"goals: {len(goals) - len(missed)} of {len(goals)} passed" + (
        f"; {MISSED}: {'; '.join(missed)}" if missed else ""
    )


SERVICE_TABLE = Table(
    (
        Column("measure", 60, "<"),
        Column("bergen", 13),
        Column("reference (issue figure)", 30),
        Column("ratio", 6),
        Column("goal", 12),
    )
)
"""The table of the benchmarks of a running server (gRPC, clocks, tournaments)."""
