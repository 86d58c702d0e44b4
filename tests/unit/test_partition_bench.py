"""The partitioning benchmark's pure parts: the partitions' bounds, their DDL, and the summary
of a match load's plan."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest

# The benchmarks are not part of the installed package: import them from the checkout.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench import partition_bench as bench


def test_twelve_ranges_of_equal_width_cover_the_stored_positions() -> None:
    cuts = bench.bounds(1, 1200)
    assert cuts == [101 + 100 * i for i in range(11)]
    widths = [b - a for a, b in zip([1, *cuts], [*cuts, 1201], strict=True)]
    assert widths == [100] * 12


def test_uneven_spans_differ_by_at_most_one_position_and_stay_inside() -> None:
    cuts = bench.bounds(7, 7 + 1000, 12)
    edges = [7, *cuts, 7 + 1001]
    widths = [b - a for a, b in itertools.pairwise(edges)]
    assert len(cuts) == 11 and cuts == sorted(set(cuts))
    assert max(widths) - min(widths) <= 1 and sum(widths) == 1001


def test_too_few_positions_for_the_partitions_are_refused() -> None:
    with pytest.raises(ValueError):
        bench.bounds(1, 11, 12)
    with pytest.raises(ValueError):
        bench.bounds(1, 100, 0)
    assert bench.bounds(5, 5, 1) == []


def test_the_partitions_run_from_minvalue_to_maxvalue_through_the_cuts() -> None:
    ddl = bench.partitions_ddl([100, 200])
    assert ddl == [
        "CREATE TABLE part.events_p01 PARTITION OF part.events FOR VALUES FROM (MINVALUE) TO (100)",
        "CREATE TABLE part.events_p02 PARTITION OF part.events FOR VALUES FROM (100) TO (200)",
        "CREATE TABLE part.events_p03 PARTITION OF part.events FOR VALUES FROM (200) TO (MAXVALUE)",
    ]
    with pytest.raises(ValueError):
        bench.partitions_ddl([200, 100])


def test_the_copy_makes_every_index_and_trigger_of_events_the_key_in_its_unique_ones() -> None:
    ddl = " ".join(bench.table_ddl() + bench.triggers_ddl())
    for name in bench.EXPECTED_INDEXES | bench.EXPECTED_TRIGGERS:
        assert f" {name} " in ddl, name
    assert "PRIMARY KEY (stream_id, seq, position)" in ddl
    assert "UNIQUE (position)" in ddl
    assert "PARTITION BY RANGE (position)" in ddl
    assert "CREATE UNIQUE INDEX" not in ddl  # (stream_id, command_id) cannot be unique
    for name in bench.EXPECTED_TRIGGERS:
        assert f"ENABLE ALWAYS TRIGGER {name}" in ddl


def test_a_plan_summary_counts_the_scans_one_a_partition() -> None:
    plan = [
        "Sort  (cost=1.0..2.0 rows=84 width=10) (actual time=0.5..0.6 rows=84 loops=1)",
        "  Buffers: shared hit=30 read=60",
        "  ->  Append  (actual time=0.1..0.4 rows=84 loops=1)",
        "        ->  Index Scan using events_p01_pkey on events_p01 e_1 (actual rows=84)",
        "              Buffers: shared hit=3 read=50",
        "        ->  Index Scan using events_p02_pkey on events_p02 e_2 (actual rows=0)",
        "Planning Time: 0.300 ms",
        "Execution Time: 0.700 ms",
    ]
    summary = bench.plan_summary(plan)
    assert summary[0].startswith("2 scan(s): Index Scan using events_p01_pkey")
    assert summary[1].startswith("... Index Scan using events_p02_pkey")
    assert summary[2] == "Buffers: shared hit=30 read=60"
    assert summary[3:] == ["Planning Time: 0.300 ms", "Execution Time: 0.700 ms"]


def test_the_staleness_probe_is_the_listing_pages_own_test_of_a_row() -> None:
    probe = bench.stale_probe()
    inner = probe.removeprefix("SELECT ").partition(" FROM unnest(")[0]
    assert inner.startswith("EXISTS (") and inner.endswith(")")
    assert inner in bench.SQL.pages[(False, False)]
    assert inner.count("(") == inner.count(")")
    assert probe.count("%s") == 3
