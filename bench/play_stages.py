"""Where a Play's time goes on the server, stage by stage, on PostgreSQL.

    python -m bench.play_stages [--plays 2000]

The server is built in this process exactly as `bergen serve` builds it (`create_server`, its
default settings, its feed and its listeners, the log written by a background thread as
`bergen serve` writes it (`log_in_background`), here to /dev/null); Play requests are then
handed to its servicer one at a time, as the gRPC edge hands them, with timers wrapped around
each stage of the code path (the code itself unchanged):

- decode: the request's bytes parsed into a PlayRequest;
- auth: the bearer token read from the metadata and checked against the seat's sealed token;
- load: the match taken from this process's cache;
- decide: the rules (`execute`);
- encode: the events encoded for the store;
- append: the store's append (one INSERT + COMMIT, the row's authenticator and chain hash);
- cache+feed: the cached match extended, the feed told (listing, clocks, tournaments, NOTIFY);
- outcome: the events redacted for the caller and its view built;
- log (command): the command's log line;
- response: the PlayResponse built (events and view converted);
- serialize: the response serialized;
- log (call): the call's log line, as the edge writes it.

Each stage is given in wall-clock time (a wait for PostgreSQL included) and in the serving
thread's CPU time (`time.thread_time`): what the Play costs this thread, and so the GIL.
What the servicer does besides (request checks, dispatch) is "other". What is not here is
gRPC itself (HTTP/2, the thread hand-off to the handler, the interceptors): compare the total
with Play's latency at 1 client in `python -m bench grpc`.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench import harness
from bench.harness import Column, ExitStatus, Row, Table
from bench.store_bench import bench_database
from bergen.domain import codec
from bergen.v1 import bergen_pb2 as pb

STAGES = (
    "decode",
    "auth",
    "load",
    "decide",
    "encode",
    "append",
    "cache+feed",
    "outcome",
    "log (command)",
    "response",
    "serialize",
    "log (call)",
    "other",
)


class Timers:
    """Each stage's wall-clock time (`spent`) and the serving thread's CPU time in it
    (`cpu`), one entry per call. A stage's time is its own: a stage timed inside another
    (the outcome and the response, made while the append's commit is awaited) is taken out
    of the outer one."""

    def __init__(self) -> None:
        self.spent: dict[str, list[float]] = defaultdict(list)
        self.cpu: dict[str, list[float]] = defaultdict(list)
        self._open: list[list[float]] = []
        """Per timed call in progress, innermost last: the wall and CPU time of the timed
        calls made inside it."""

    def wrap(self, stage: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        spent, cpu, open_ = self.spent[stage], self.cpu[stage], self._open
        now, used = time.perf_counter, time.thread_time

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0, c0 = now(), used()
            open_.append([0.0, 0.0])
            try:
                return fn(*args, **kwargs)
            finally:
                inner = open_.pop()
                wall, on_cpu = now() - t0, used() - c0
                spent.append(wall - inner[0])
                cpu.append(on_cpu - inner[1])
                if open_:
                    open_[-1][0] += wall
                    open_[-1][1] += on_cpu

        return timed

    def add(self, stage: str, seconds: float, cpu: float) -> None:
        self.spent[stage].append(seconds)
        self.cpu[stage].append(cpu)


class _Context:
    """What the servicer asks of a gRPC context for a Play."""

    def __init__(self, token: str) -> None:
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    def time_remaining(self) -> float | None:
        return None

    def peer(self) -> str:
        return "ipv4:127.0.0.1:50000"


class _Log:
    """A logger whose `info` is timed."""

    def __init__(self, real: logging.Logger, timed: Callable[..., Any]) -> None:
        self._real, self.info = real, timed

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class _Table:
    """Matches of 2 seats played through the servicer: the next Play request, each match
    created and seated as the last one ends, the move a legal one of the seat to play."""

    def __init__(self, servicer: Any, rng: random.Random) -> None:
        self._servicer = servicer
        self._rng = rng
        self._tokens = ["", ""]
        self._match_id = ""
        self.view: Any = None
        """The view the last Play answered with (set it after each Play)."""

    def next_play(self) -> tuple[bytes, str]:
        """The next Play request's bytes, and the seat token to send it with."""
        servicer = self._servicer
        if self.view is None or self.view.phase == pb.PHASE_ENDED:
            created = servicer.CreateMatch(
                pb.CreateMatchRequest(seats=2, preset=pb.PRESET_STANDARD), _Context("")
            )
            self._match_id = created.match_id
            for i in range(2):
                j = servicer.JoinMatch(
                    pb.JoinMatchRequest(match_id=self._match_id, name=f"p{i}"), _Context("")
                )
                self._tokens[j.seat] = j.seat_token
            self.view = servicer.GetMatch(
                pb.GetMatchRequest(match_id=self._match_id), _Context("")
            ).view
        token = self._tokens[self.view.turn]
        mine = servicer.GetMatch(pb.GetMatchRequest(match_id=self._match_id), _Context(token))
        choice = self._rng.choice(list(mine.view.legal_plays))
        request = pb.PlayRequest(match_id=self._match_id, tile=choice.tile, end=choice.end)
        return request.SerializeToString(), token


@contextmanager
def _served(url: str) -> Iterator[tuple[Any, Any]]:
    """The server built as `bergen serve` builds it, its log written to /dev/null by the
    background thread: (its app, a servicer of it)."""
    from bergen.server import logs
    from bergen.server import servicer as servicer_module
    from bergen.server.bootstrap import Secrets, create_server
    from bergen.server.config import Config
    from bergen.server.keys import LogKeys

    root = logging.getLogger()
    devnull = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - closed below
    handler = logs.log_in_background("INFO", "text", devnull)
    with tempfile.TemporaryDirectory(prefix="bergen-stages-") as tmp:
        keys = LogKeys.load_or_create(str(Path(tmp) / "log-key"))
        running = create_server(Config(listen="127.0.0.1:0", database_url=url), Secrets(keys))
        try:
            yield running.app, servicer_module.BergenServicer(running.app, 200)
        finally:
            running.stop(1.0)
            root.removeHandler(handler)
            handler.stop()
            devnull.close()


def run(url: str, plays: int, seed: int) -> Timers:
    from bergen.server import commands as commands_module
    from bergen.server import matches as matches_module
    from bergen.server import servicer as servicer_module

    timers = Timers()
    with _served(url) as (app, servicer):
        rng = random.Random(seed)
        # The stages, wrapped where the Play path looks them up.
        work: Any = app.work
        repo: Any = app.repository
        identity: Any = app.commands._identity
        identity.require_seat = timers.wrap("auth", identity.require_seat)
        servicer_module._caller = timers.wrap("auth", servicer_module._caller)
        repo.cached = timers.wrap("load", repo.cached)
        matches_module.execute = timers.wrap("decide", matches_module.execute)  # type: ignore[attr-defined]
        codec.encode = timers.wrap("encode", codec.encode)
        work._store.append = timers.wrap("append", work._store.append)
        matches_module.extend = timers.wrap("cache+feed", matches_module.extend)
        repo.remember = timers.wrap("cache+feed", repo.remember)
        work._feed.observe = timers.wrap("cache+feed", work._feed.observe)
        commands_module.seen = timers.wrap("outcome", commands_module.seen)
        commands_module.view = timers.wrap("outcome", commands_module.view)  # type: ignore[attr-defined]
        real_log = commands_module.log
        commands_module.log = _Log(real_log, timers.wrap("log (command)", real_log.info))  # type: ignore[assignment]
        servicer_module._events = timers.wrap("response", servicer_module._events)
        servicer._view_out = timers.wrap("response", servicer._view_out)
        call_log = logging.getLogger("bergen.server.calls")
        totals: list[float] = []
        cpu_totals: list[float] = []
        done = 0
        table = _Table(servicer, rng)
        while done < plays:
            data, token = table.next_play()
            before = {s: len(v) for s, v in timers.spent.items()}
            c0, t0 = time.thread_time(), time.perf_counter()
            request = pb.PlayRequest.FromString(data)
            c1, t1 = time.thread_time(), time.perf_counter()
            response = servicer.Play(request, _Context(token))
            c2, t2 = time.thread_time(), time.perf_counter()
            response.SerializeToString()
            c3, t3 = time.thread_time(), time.perf_counter()
            call_log.info(
                "%s OK %.1f ms %s",
                "/bergen.v1.BergenService/Play",
                (t3 - t0) * 1000,
                "ipv4:127.0.0.1:50000",
                extra={"fields": lambda: {"rpc": "Play"}},
            )
            c4, t4 = time.thread_time(), time.perf_counter()
            timers.add("decode", t1 - t0, c1 - c0)
            timers.add("serialize", t3 - t2, c3 - c2)
            timers.add("log (call)", t4 - t3, c4 - c3)
            inside = sum(sum(v[before.get(s, 0) :]) for s, v in timers.spent.items())
            inside -= (t1 - t0) + (t3 - t2) + (t4 - t3)
            used = sum(sum(v[before.get(s, 0) :]) for s, v in timers.cpu.items())
            used -= (c1 - c0) + (c3 - c2) + (c4 - c3)
            timers.add("other", (t2 - t1) - inside, (c2 - c1) - used)
            totals.append(t4 - t0)
            cpu_totals.append(c4 - c0)
            table.view = response.view
            done += 1
        timers.spent["total"] = totals
        timers.cpu["total"] = cpu_totals
    return timers


STAGES_TABLE = Table(
    (Column("stage", 16, "<"), Column("us/Play", 9), Column("share", 7), Column("CPU us", 8)),
    verdicts=False,
)


def report(timers: Timers, plays: int) -> None:
    spent, cpu = timers.spent, timers.cpu
    total = statistics.fmean(spent["total"]) * plays
    rows = []
    for stage in (*STAGES, "total"):
        s = sum(spent.get(stage, []))
        c = sum(cpu.get(stage, []))
        rows.append(Row((stage, f"{s / plays * 1e6:.1f}", f"{s / total:.1%}",
                         f"{c / plays * 1e6:.1f}")))  # fmt: skip
    STAGES_TABLE.print(rows)
    print(f"\ntotal p50/p99 us: {statistics.median(spent['total']) * 1e6:.0f}/"
          f"{harness.percentile(spent['total'], 99, 'exclusive') * 1e6:.0f}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.play_stages",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    harness.add_database_url(parser)
    parser.add_argument("--plays", type=int, default=harness.quick_or(2000, 200))
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    with bench_database(args.database_url) as url:
        timers = run(url, args.plays, args.seed)
    report(timers, args.plays)
    return ExitStatus.OK


if __name__ == "__main__":
    sys.exit(main())
