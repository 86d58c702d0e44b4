"""Prometheus metrics of one server: what `bergen serve --metrics HOST:PORT` exposes.

Every metric lives on the server's own `CollectorRegistry` (several servers in one process
never share one). Labels are small fixed sets only: the RPC's service and method (only the
RPCs the server serves reach the edge), a status code's name, an outcome. Never a match id,
a token, a tile or a name: a label per match would grow without bound.

What the hot path pays is a counter and a histogram per call and per append, taken through
children resolved once per label set (`_Children`). Caches and the clock keeper keep plain
integers of their own, read only when Prometheus scrapes (`_Counts`).

| metric | type | labels |
| --- | --- | --- |
| `bergen_rpc_calls_total` | counter | service, method, code |
| `bergen_rpc_duration_seconds` | histogram | service, method, code |
| `bergen_streams_open` | gauge | method (WatchMatch, WatchTournament, ...) |
| `bergen_appends_total` | counter | outcome: written, replayed, conflict, failed |
| `bergen_append_duration_seconds` | histogram | outcome |
| `bergen_version_conflicts_total` | counter | |
| `bergen_command_retries_total` | counter | why: conflict, stale (see `retries`) |
| `bergen_matches_live` | gauge | phase: seating, playing |
| `bergen_notify_lag_seconds` | histogram | |
| `bergen_clock_timeouts_total` | counter | |
| `bergen_wrong_secrets_total` | counter | outcome: counted, held |
| `bergen_cache_lookups_total` | counter | cache, result: hit, miss |
| `bergen_read_model_repairs_total` | counter | table |
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

import grpc
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from bergen.domain.state import PLAYING, SEATING

from .edge import Call
from .store import StoredEvent
from .threads import Thread

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from .projections import MatchListProjection

log = logging.getLogger("bergen.server.metrics")

CALL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Seconds. A Play takes a few milliseconds; a stream's duration is its whole life, which
falls past the last bucket."""
STORE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
ENDED_REMEMBERED = 100_000
"""Ended matches remembered so that a late copy of their first event (the feed may deliver
an event twice) does not count them live again."""


class Metrics:
    """The server's metrics and the hooks that move them. `call_started` and `call_ended`
    make it a call observer of the edge (`bergen.server.edge.CallObserver`)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.calls = Counter(
            "bergen_rpc_calls",
            "RPCs served, by method and status code (a stream counts when it ends).",
            ["service", "method", "code"],
            registry=r,
        )
        self.call_seconds = Histogram(
            "bergen_rpc_duration_seconds",
            "Time from a call's start to its status, by method and status code.",
            ["service", "method", "code"],
            buckets=CALL_BUCKETS,
            registry=r,
        )
        self.streams = Gauge(
            "bergen_streams_open",
            "Server-streaming calls open now (WatchMatch, WatchTournament), by method.",
            ["method"],
            registry=r,
        )
        self.appends = Counter(
            "bergen_appends",
            "Appends to the event store, by outcome: written, replayed (a command id already "
            "written), conflict (the stream had moved on), failed.",
            ["outcome"],
            registry=r,
        )
        self.append_seconds = Histogram(
            "bergen_append_duration_seconds",
            "Time one append to the event store takes, by outcome.",
            ["outcome"],
            buckets=STORE_BUCKETS,
            registry=r,
        )
        self.conflicts = Counter(
            "bergen_version_conflicts",
            "Appends refused because the stream was not at the version the command was "
            "decided on (another command, here or on another replica, wrote first).",
            registry=r,
        )
        self.retries = Counter(
            "bergen_command_retries",
            "Commands decided again: after a lost race (conflict), or after the rules "
            "refused it on a cached state that a fresh read replaced (stale).",
            ["why"],
            registry=r,
        )
        self.notify_lag = Histogram(
            "bergen_notify_lag_seconds",
            "From another replica's append (its wall clock) to this replica receiving its "
            "PostgreSQL NOTIFY (this one's): what a watcher here waits at least for a move "
            "made there. Clock skew between the machines adds to it.",
            buckets=LAG_BUCKETS,
            registry=r,
        )
        for outcome in ("written", "replayed", "conflict", "failed"):
            self.appends.labels(outcome)
            self.append_seconds.labels(outcome)
        for why in ("conflict", "stale"):
            self.retries.labels(why)
        self._children = _Children(self)
        self.live = LiveMatches()
        self._counts = _Counts(self.live)
        r.register(self._counts)
        self._http: WSGIServer | None = None
        self._http_thread: threading.Thread | None = None

    # the edge --------------------------------------------------------------------------------

    def call_started(self, call: Call) -> None:
        if call.streaming:
            self._children.stream(call.rpc).inc()

    def call_ended(self, call: Call) -> None:
        counter, histogram = self._children.call(call.service, call.rpc, call.code)
        counter.inc()
        histogram.observe((call.ended_ns - call.started_ns) / 1e9)
        if call.streaming:
            self._children.stream(call.rpc).dec()

    # the command side ------------------------------------------------------------------------

    def appended(self, outcome: str, seconds: float) -> None:
        """One append to the store took `seconds` and ended as `outcome`."""
        counter, histogram = self._children.append(outcome)
        counter.inc()
        histogram.observe(seconds)
        if outcome == "conflict":
            self.conflicts.inc()

    def retried(self, why: str) -> None:
        self._children.retry(why).inc()

    def notified(self, lag_s: float) -> None:
        self.notify_lag.observe(lag_s)

    # what is counted elsewhere -----------------------------------------------------------------

    def count(self, name: str, description: str, labels: Sequence[str]) -> CountedBy:
        """Register a counter read from the owners' own integers at each scrape: `add` its
        sources (a function giving the current total for one set of label values)."""
        counted = CountedBy(name, description, tuple(labels))
        self._counts.counted.append(counted)
        return counted

    # serving ---------------------------------------------------------------------------------

    def serve(self, address: str) -> tuple[str, int]:
        """Serve /metrics over HTTP on `address` (HOST:PORT, port 0 picks one) in a thread of
        its own. Returns the host and port bound. Raises ValueError for an address that is
        not HOST:PORT, OSError when it cannot be bound."""
        from prometheus_client import start_http_server

        host, port = parse_address(address)
        server, thread = start_http_server(port, host, registry=self.registry)
        self._http, self._http_thread = server, thread
        return host, int(server.server_port)

    def stop(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None
        if self._http_thread is not None:
            self._http_thread.join(timeout=5)
            self._http_thread = None


def parse_address(address: str) -> tuple[str, int]:
    """(host, port) of `HOST:PORT` or `[V6]:PORT`. Raises ValueError."""
    host, sep, port_text = address.rpartition(":")
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise ValueError(f"--metrics {address!r}: not HOST:PORT")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port_text)


class _Children:
    """The metrics' children by label values, made once: `labels(...)` takes a lock and
    builds a key each time, which the hot path need not pay."""

    def __init__(self, metrics: Metrics) -> None:
        self._m = metrics
        self._calls: dict[tuple[str, str, grpc.StatusCode], tuple[Counter, Histogram]] = {}
        self._streams: dict[str, Gauge] = {}
        self._appends: dict[str, tuple[Counter, Histogram]] = {}
        self._retries: dict[str, Counter] = {}

    def call(self, service: str, rpc: str, code: grpc.StatusCode) -> tuple[Counter, Histogram]:
        key = (service, rpc, code)
        found = self._calls.get(key)
        if found is None:
            labels = (service, rpc, code.name)
            found = (self._m.calls.labels(*labels), self._m.call_seconds.labels(*labels))
            self._calls[key] = found
        return found

    def stream(self, rpc: str) -> Gauge:
        found = self._streams.get(rpc)
        if found is None:
            found = self._streams[rpc] = self._m.streams.labels(rpc)
        return found

    def append(self, outcome: str) -> tuple[Counter, Histogram]:
        found = self._appends.get(outcome)
        if found is None:
            found = (self._m.appends.labels(outcome), self._m.append_seconds.labels(outcome))
            self._appends[outcome] = found
        return found

    def retry(self, why: str) -> Counter:
        found = self._retries.get(why)
        if found is None:
            found = self._retries[why] = self._m.retries.labels(why)
        return found


class CountedBy:
    """A counter whose totals are kept by their owners (a cache's hits, the clock keeper's
    timeouts) and read at each scrape."""

    def __init__(self, name: str, description: str, labels: tuple[str, ...]) -> None:
        self.name = name
        self.description = description
        self.labels = labels
        self._sources: list[tuple[tuple[str, ...], Callable[[], int]]] = []

    def add(self, values: Sequence[str], source: Callable[[], int]) -> None:
        if len(values) != len(self.labels):
            raise ValueError(f"{self.name}: {len(self.labels)} label values, not {len(values)}")
        self._sources.append((tuple(values), source))

    def family(self) -> CounterMetricFamily:
        family = CounterMetricFamily(self.name, self.description, labels=self.labels)
        for values, source in self._sources:
            family.add_metric(values, source())
        return family


class _Counts(Collector):
    """What is read at scrape time: the live matches, and the counters kept elsewhere."""

    def __init__(self, live: LiveMatches) -> None:
        self._live = live
        self.counted: list[CountedBy] = []

    def collect(self) -> Iterable[Metric]:
        gauge = GaugeMetricFamily(
            "bergen_matches_live",
            "Matches not ended (seating or playing) as this replica's feed has seen them: every "
            "replica sees every match, so take the max over replicas, not the sum.",
            labels=["phase"],
        )
        for phase, n in self._live.counts().items():
            gauge.add_metric([phase], n)
        yield gauge
        for counted in self.counted:
            yield counted.family()

    def describe(self) -> Iterable[Metric]:
        # Described without reading any source, so that registering does not call them.
        return []


class LiveMatches:
    """The matches not ended, followed from the event feed (`note`, a feed listener) and
    seeded once from the match listing (`seed`) for those begun before this process.

    A match is seating from its MatchCreated, playing from its first Dealt, and leaves at
    its MatchEnded (an abandonment ends it too). The feed may deliver an event twice or late:
    an ended match is remembered (the last `ENDED_REMEMBERED`) and never counted again.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._phase: dict[str, str] = {}
        self._ended: OrderedDict[str, None] = OrderedDict()

    def note(self, events: Sequence[StoredEvent]) -> None:
        for e in events:
            kind = e.type
            if kind == "MatchCreated":
                self._set(e.stream_id, SEATING.value, only_new=True)
            elif kind == "Dealt":
                self._set(e.stream_id, PLAYING.value)
            elif kind == "MatchEnded":
                self._end(e.stream_id)

    def _set(self, match_id: str, phase: str, only_new: bool = False) -> None:
        with self._lock:
            if match_id in self._ended:
                return
            if only_new and match_id in self._phase:
                return
            self._phase[match_id] = phase

    def _end(self, match_id: str) -> None:
        with self._lock:
            self._phase.pop(match_id, None)
            self._ended[match_id] = None
            self._ended.move_to_end(match_id)
            while len(self._ended) > ENDED_REMEMBERED:
                self._ended.popitem(last=False)

    def counts(self) -> dict[str, int]:
        out = {SEATING.value: 0, PLAYING.value: 0}
        with self._lock:
            for phase in self._phase.values():
                out[phase] = out.get(phase, 0) + 1
        return out

    def seed(self, listing: MatchListProjection, stop: threading.Event) -> None:
        """Count the matches the listing shows seating or playing (those begun before this
        process started), unless the feed has already said more of them."""
        for phase in (SEATING.value, PLAYING.value):
            token = ""
            while not stop.is_set():
                try:
                    rows, token = listing.page(phase, "", 0, token)
                except Exception as e:  # the metrics must never stop the server
                    log.warning("metrics: cannot list the matches %s (%s); retrying", phase, e)
                    stop.wait(5.0)
                    continue
                for row in rows:
                    with self._lock:
                        if row.match_id not in self._ended and row.match_id not in self._phase:
                            self._phase[row.match_id] = phase
                if not token:
                    break


def seed_in_background(
    live: LiveMatches, listing: MatchListProjection, stop: threading.Event
) -> threading.Thread:
    thread = Thread(target=live.seed, args=(listing, stop), name="bergen-metrics-seed", daemon=True)
    thread.start()
    return thread
