"""What the operator sees: `bergen serve --metrics` scraped before and after a played match
moves exactly as the match says (calls by status, appends, live matches, watch streams), the
NOTIFY lag between two PostgreSQL replicas is measured, the Grafana dashboard asks only for
metrics a scrape has, and `--log-format json` writes one object a line with each call's fields
and never a token."""

from __future__ import annotations

import json
import random
import re
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bergen.api.exit_status import ExitStatus
from bergen.v1 import bergen_pb2 as pb

from .client import (
    Client,
    Table,
    Watcher,
    bearer,
    play_random_move,
    play_to_end,
    seat_everyone,
)
from .servers import ServerFarm, ServerProcess, bergen_command

pytestmark = pytest.mark.timeout(180)

SERVICE = "bergen.v1.BergenService"
DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "bergen-dashboard.json"
Sample = tuple[str, tuple[tuple[str, str], ...]]


def metrics_url(server: ServerProcess, timeout: float = 60.0) -> str:
    """The /metrics address the server logged. Raises AssertionError when it logged none."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(r"metrics on (http://[0-9.:\[\]]+/metrics)", server.log())
        if found:
            return found.group(1)
        time.sleep(0.05)
    raise AssertionError(f"no metrics address logged:\n{server.log_tail()}")


def scrape(url: str) -> dict[Sample, float]:
    """Every sample of a scrape by name and labels."""
    with urllib.request.urlopen(url, timeout=10) as reply:
        assert reply.status == 200
        text = reply.read().decode("utf-8")
    out: dict[Sample, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(samples: dict[Sample, float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def calls(samples: dict[Sample, float], method: str, code: str = "OK") -> float:
    return value(samples, "bergen_rpc_calls_total", service=SERVICE, method=method, code=code)


def eventually(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not in {timeout:g} s: {what}"
        time.sleep(0.05)


def illegal_play(client: Client, table: Table) -> grpc.StatusCode:
    """A play by the seat whose turn it is not; returns the status it was refused with."""
    public = client.view(table.match_id)
    other = (public.turn + 1) % table.seats
    hand = client.view(table.match_id, table.tokens[other]).my_tiles
    request = pb.PlayRequest(match_id=table.match_id, tile=hand[0], end=pb.END_LEFT)
    with pytest.raises(grpc.RpcError) as refused:
        client.stub.Play(request, metadata=bearer(table.tokens[other]), timeout=20)
    code: grpc.StatusCode = refused.value.code()
    assert code is not grpc.StatusCode.OK
    return code


def test_a_played_match_moves_the_metrics_as_it_says(farm: ServerFarm, sqlite_url: str) -> None:
    server = farm.start(sqlite_url, extra_args=["--metrics", "127.0.0.1:0"])
    url = metrics_url(server)
    before = scrape(url)
    with Client(server.target) as client:
        table = seat_everyone(client, 2)
        seated = scrape(url)
        assert value(seated, "bergen_matches_live", phase="playing") == 1 + value(
            before, "bergen_matches_live", phase="playing"
        )
        watcher = Watcher(client, table.match_id).started()
        eventually(
            lambda: value(scrape(url), "bergen_streams_open", method="WatchMatch") == 1,
            "one WatchMatch stream open",
        )
        refused = illegal_play(client, table)
        moves = play_to_end([client], random.Random("metrics"), table)
        watcher.wait_for_seq(moves[-1].response.view.version)
        watcher.cancel()
        eventually(
            lambda: value(scrape(url), "bergen_streams_open", method="WatchMatch") == 0,
            "the WatchMatch stream closed",
        )
    after = scrape(url)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    def moved_calls(method: str, code: str = "OK") -> float:
        return calls(after, method, code) - calls(before, method, code)

    plays = len(moves)
    assert moved_calls("CreateMatch") == 1
    assert moved_calls("JoinMatch") == 2
    assert moved_calls("Play") == plays
    assert moved_calls("Play", refused.name) == 1
    # The stream ended when its client cancelled it, with whatever status that gave.
    watched = {
        dict(labels)["code"]: after[(name, labels)] - before.get((name, labels), 0.0)
        for name, labels in after
        if name == "bergen_rpc_calls_total" and dict(labels)["method"] == "WatchMatch"
    }
    assert sum(watched.values()) == 1, watched
    assert (
        moved(
            "bergen_rpc_duration_seconds_count",
            service=SERVICE,
            method="Play",
            code="OK",
        )
        == plays
    )
    # One append for the creation, one per seat taken, one per play; the refused play none.
    assert moved("bergen_appends_total", outcome="written") == 1 + 2 + plays
    assert moved("bergen_append_duration_seconds_count", outcome="written") == 1 + 2 + plays
    assert moved("bergen_appends_total", outcome="conflict") == 0
    assert moved("bergen_version_conflicts_total") == 0
    # Refused on the cached state, the play was decided once more on a fresh read.
    assert moved("bergen_command_retries_total", why="stale") == 1
    assert value(after, "bergen_matches_live", phase="playing") == value(
        before, "bergen_matches_live", phase="playing"
    )
    assert value(after, "bergen_matches_live", phase="seating") == value(
        before, "bergen_matches_live", phase="seating"
    )
    # Every play was decided on the cached match; the refused one read it afresh.
    assert moved("bergen_cache_lookups_total", cache="matches", result="hit") >= plays
    assert moved("bergen_clock_timeouts_total") == 0


def test_live_matches_counted_on_a_restart(farm: ServerFarm, sqlite_url: str) -> None:
    first = farm.start(sqlite_url)
    with Client(first.target) as client:
        seat_everyone(client, 2)
        client.create(3)
    assert first.terminate() == 0
    again = farm.start(sqlite_url, extra_args=["--metrics", "127.0.0.1:0"])
    url = metrics_url(again)
    eventually(
        lambda: (
            value(scrape(url), "bergen_matches_live", phase="playing") == 1
            and value(scrape(url), "bergen_matches_live", phase="seating") == 1
        ),
        "the match in play and the one seating begun before the restart counted",
    )


@pytest.mark.postgres
def test_notify_lag_between_replicas(farm: ServerFarm, pg_database: str) -> None:
    a = farm.start(pg_database, name="replica-a", extra_args=["--metrics", "127.0.0.1:0"])
    b = farm.start(pg_database, name="replica-b", extra_args=["--metrics", "127.0.0.1:0"])
    url_a, url_b = metrics_url(a), metrics_url(b)
    before_b = scrape(url_b)
    with Client(a.target) as on_a, Client(b.target) as on_b:
        table = seat_everyone(on_a, 2)
        watcher = Watcher(on_b, table.match_id).started()
        moves = play_to_end([on_a], random.Random("lag"), table)
        watcher.wait_for_seq(moves[-1].response.view.version)
        watcher.cancel()
    lag = "bergen_notify_lag_seconds"

    def notified() -> float:
        return value(scrape(url_b), f"{lag}_count") - value(before_b, f"{lag}_count")

    eventually(lambda: notified() >= 1, "B measured a NOTIFY from A")
    after_b = scrape(url_b)
    count = value(after_b, f"{lag}_count") - value(before_b, f"{lag}_count")
    total = value(after_b, f"{lag}_sum") - value(before_b, f"{lag}_sum")
    # Both replicas run on this machine's clock: a lag is milliseconds, never minutes.
    assert 0 <= total / count < 5.0, (total, count)
    # A's plays reached B's feed: the match was live there and is not any more.
    eventually(
        lambda: value(scrape(url_b), "bergen_matches_live", phase="playing") == 0,
        "B saw the match end",
    )
    assert calls(scrape(url_a), "Play") == len(moves)
    assert calls(scrape(url_b), "Play") == 0


def test_the_dashboard_asks_only_for_metrics_a_scrape_has(
    farm: ServerFarm, sqlite_url: str
) -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    exprs = [
        target["expr"]
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
        if "expr" in target
    ]
    assert len(exprs) >= 8, "the dashboard has a panel for each part of the service"
    used = {name for expr in exprs for name in re.findall(r"\bbergen_[a-z_]+", expr)}
    server = farm.start(sqlite_url, extra_args=["--metrics", "127.0.0.1:0"])
    with Client(server.target) as client:
        seat_everyone(client, 2)  # so that the call metrics have samples too
    scraped = {name for name, _ in scrape(metrics_url(server))}
    missing = sorted(used - scraped)
    assert not missing, f"the dashboard asks for metrics no scrape has: {missing}"


def test_json_log_lines_carry_each_calls_fields(farm: ServerFarm, sqlite_url: str) -> None:
    server = farm.start(sqlite_url, extra_args=["--log-format", "json"])
    with Client(server.target) as client:
        table = seat_everyone(client, 2)
        refused = illegal_play(client, table)
        move = play_random_move([client], random.Random("json"), table, table.version)
        # A match id made to break a line: every line must still be one object.
        forged = 'x\u2028"}\n{"level": "CRITICAL'
        with pytest.raises(grpc.RpcError):
            client.view(forged)
    assert server.terminate() == 0
    lines = [json.loads(line) for line in server.log().splitlines() if line.strip()]
    for line in lines:
        assert isinstance(line, dict)
        assert {"time", "level", "logger", "message"} <= line.keys(), line
    text = server.log()
    for token in table.tokens:
        assert token not in text, "a seat token was logged"
    by_rpc = [line for line in lines if "rpc" in line]
    joins = [line for line in by_rpc if line["rpc"] == f"/{SERVICE}/JoinMatch"]
    assert sorted(line["seat"] for line in joins) == [0, 1]
    assert all(line["match_id"] == table.match_id for line in joins)
    plays = [line for line in by_rpc if line["rpc"] == f"/{SERVICE}/Play"]
    ok = [line for line in plays if line["status"] == "OK"]
    assert len(ok) == 1
    assert ok[0]["match_id"] == table.match_id
    assert ok[0]["seat"] == move.seat
    assert isinstance(ok[0]["duration_ms"], float) and ok[0]["duration_ms"] > 0
    assert ok[0]["peer"].startswith(("ipv4:127.0.0.1:", "ipv6:"))
    looked = [line for line in by_rpc if line["rpc"] == f"/{SERVICE}/GetMatch"]
    assert forged in [line.get("match_id") for line in looked]
    assert not any(line["level"] == "CRITICAL" for line in lines)
    bad = [line for line in plays if line["status"] == refused.name]
    assert len(bad) == 1 and bad[0]["reason"] and bad[0]["match_id"] == table.match_id


def test_timeouts_applied_by_the_clock_keeper_are_counted(
    farm: ServerFarm, sqlite_url: str
) -> None:
    server = farm.start(sqlite_url, extra_args=["--metrics", "127.0.0.1:0"])
    url = metrics_url(server)
    before = scrape(url)
    with Client(server.target) as client:
        # Two seats that never play: A times out, then B, then A again, which forfeits.
        table = seat_everyone(
            client, 2, clock="fischer", clock_initial=1, clock_increment=0, timeouts_to_forfeit=2
        )
        eventually(
            lambda: client.view(table.match_id).phase == pb.PHASE_ENDED,
            "the match forfeited on time",
            timeout=30,
        )
        watched = [e for e in client.replay(table.match_id).events if e.HasField("timed_out")]
    assert len(watched) == 3
    after = scrape(url)
    timeouts = "bergen_clock_timeouts_total"
    assert value(after, timeouts) - value(before, timeouts) == len(watched)
    assert value(after, "bergen_matches_live", phase="playing") == 0


def test_a_metrics_address_already_taken_stops_the_started_server_and_says_so(
    tmp_path: Path,
) -> None:
    """The server is built and its background threads started before /metrics is bound: a
    taken address stops them all (together) and the process exits NOT_READY, promptly."""
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        began = time.monotonic()
        done = subprocess.run(
            [*bergen_command(), "serve", "--listen", "127.0.0.1:0",
             "--database", f"sqlite:///{tmp_path / 'bergen.db'}",
             "--metrics", f"127.0.0.1:{port}"],
            capture_output=True, text=True, timeout=60, cwd=tmp_path,
        )  # fmt: skip
        took = time.monotonic() - began
    assert done.returncode == ExitStatus.NOT_READY, done.stderr
    assert f"cannot serve metrics on 127.0.0.1:{port}" in done.stderr
    assert "Traceback" not in done.stderr
    assert took < 30, f"took {took:.1f} s"
