"""The metrics in process: two servers made by `create_server` on one SQLite file, each with
its own registry, called over real gRPC; a lost race is counted as a version conflict and a
retry on the server that lost it only. The live-match count and the NOTIFY lag are fed what a
feed and a notification may really carry: events twice and late, payloads that are not
times."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from e2e.client import Client
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from bergen.api.stored import EventMetadata
from bergen.server.bootstrap import Secrets, create_server
from bergen.server.config import Config
from bergen.server.feed import lag_of
from bergen.server.keys import LogKeys
from bergen.server.lifecycle import Running
from bergen.server.metrics import Metrics, parse_address
from bergen.server.store import StoredEvent


def samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(metrics.registry).decode("utf-8")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(metrics: Metrics, name: str, **labels: str) -> float:
    return samples(metrics).get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture
def two_servers(tmp_path: Path) -> Iterator[tuple[Running, Running]]:
    url = f"sqlite:///{tmp_path / 'bergen.db'}"
    keys = tmp_path / "log-keys"
    started = []
    try:
        for _ in range(2):
            started.append(
                create_server(
                    Config(listen="127.0.0.1:0", database_url=url),
                    Secrets(LogKeys.load_or_create(keys)),
                    metrics=Metrics(),
                )
            )
        yield started[0], started[1]
    finally:
        for running in started:
            running.stop(0)


def test_a_lost_race_is_a_conflict_and_a_retry_where_it_was_lost(
    two_servers: tuple[Running, Running],
) -> None:
    a, b = two_servers
    assert a.metrics is not None and b.metrics is not None
    with Client(f"127.0.0.1:{a.port}") as on_a, Client(f"127.0.0.1:{b.port}") as on_b:
        match_id = on_a.create(3).match_id  # A holds the match at version 1
        on_b.join(match_id, "first")  # B reads it and writes version 2
        joined = on_a.join(match_id, "second")  # decided on A's version 1: refused, again
    assert joined.seat == 1
    assert value(a.metrics, "bergen_version_conflicts_total") == 1
    assert value(a.metrics, "bergen_appends_total", outcome="conflict") == 1
    assert value(a.metrics, "bergen_command_retries_total", why="conflict") == 1
    assert value(a.metrics, "bergen_appends_total", outcome="written") == 2
    assert value(b.metrics, "bergen_version_conflicts_total") == 0
    assert value(b.metrics, "bergen_appends_total", outcome="written") == 1
    assert value(b.metrics, "bergen_cache_lookups_total", cache="matches", result="miss") >= 1
    for running in (a, b):
        assert running.metrics is not None
        joins = value(
            running.metrics,
            "bergen_rpc_calls_total",
            service="bergen.v1.BergenService",
            method="JoinMatch",
            code="OK",
        )
        assert joins == 1


def stored(match_id: str, seq: int, kind: str) -> StoredEvent:
    return StoredEvent(
        stream_id=match_id,
        seq=seq,
        position=seq,
        type=kind,
        schema_version=1,
        payload={},
        metadata=EventMetadata(None, None, "1"),
        recorded_at=datetime.now(UTC),
        prev_hash=b"",
        hash=b"",
        salt=b"",
    )


def test_live_matches_count_each_match_once_whatever_the_feed_repeats() -> None:
    live = Metrics().live
    live.note([stored("m1", 1, "MatchCreated"), stored("m2", 1, "MatchCreated")])
    assert live.counts() == {"seating": 2, "playing": 0}
    live.note([stored("m1", 2, "SeatTaken"), stored("m1", 3, "Dealt")])
    live.note([stored("m1", 1, "MatchCreated")])  # delivered again: still playing
    assert live.counts() == {"seating": 1, "playing": 1}
    live.note([stored("m1", 9, "MatchEnded")])
    live.note([stored("m1", 1, "MatchCreated"), stored("m1", 3, "Dealt")])  # late copies
    assert live.counts() == {"seating": 1, "playing": 0}


@pytest.mark.parametrize(
    ("payload_time", "counted"),
    [("", False), ("abc", False), ("-5", False), ("1" * 16, False), ("0", True)],
)
def test_a_notification_time_is_read_only_when_it_is_one(payload_time: str, counted: bool) -> None:
    seen: list[float] = []
    lag_of(payload_time, seen.append)
    assert bool(seen) == counted
    assert all(lag >= 0 for lag in seen)


def test_a_time_ahead_of_this_clock_is_no_lag() -> None:
    seen: list[float] = []
    lag_of("99999999999999", seen.append)
    assert seen == [0.0]


@pytest.mark.parametrize(
    ("address", "parsed"),
    [("127.0.0.1:9464", ("127.0.0.1", 9464)), ("[::1]:0", ("::1", 0)), ("host:1", ("host", 1))],
)
def test_metrics_addresses(address: str, parsed: tuple[str, int]) -> None:
    assert parse_address(address) == parsed


@pytest.mark.parametrize("address", ["9464", ":9464", "host:", "host:x", "host:70000"])
def test_metrics_addresses_refused(address: str) -> None:
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_address(address)
