"""How a match hub writes to its streams: once caught up, each burst is written by the hub to
every stream's connection at once, and with `--coalesce-ms` events that come sooner than that
share one write; still every event exactly once, in order, and a resume by Last-Event-ID is
exact."""

from __future__ import annotations

import random
import threading
import time

import pytest
from e2e.client import Client, play_random_move, seat_everyone
from e2e.servers import ServerFarm, ServerProcess

from .gateway import EventStream, Gateway, Message, start_gateway
from .test_api import event_seqs, wait_for

# A hang fails the test with every thread's stack (the signal method) and the run goes on.
pytestmark = [pytest.mark.postgres, pytest.mark.timeout(240, method="signal")]

COALESCE_MS = 1000
CLOSE_S = 5.0
"""How long closing a stream and ending its reader may take."""


def sse_reader(stream: EventStream, out: list[Message], stop: threading.Event) -> threading.Thread:
    """Every message of `stream` into `out`, until it ends or is closed."""

    def run() -> None:
        try:
            for msg in stream.messages():
                out.append(msg)
                if msg.kind == "end" or stop.is_set():
                    return
        except (OSError, AttributeError, ValueError):  # closed under the reader
            return

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def close_streams(streams: list[tuple[EventStream, threading.Thread]]) -> None:
    """Close every stream and wait for its reader; fails (never hangs) if one is still
    reading `CLOSE_S` later."""
    started = time.monotonic()
    for stream, _ in streams:
        stream.close()
    for i, (_, reader) in enumerate(streams):
        reader.join(max(0.0, started + CLOSE_S - time.monotonic()))
        assert not reader.is_alive(), f"stream {i}: its reader still reads {CLOSE_S} s after close"
    took = time.monotonic() - started
    assert took < CLOSE_S, f"closing {len(streams)} streams took {took:.1f} s"


def chunks(raw: bytes) -> list[bytes]:
    """The HTTP/1.1 chunks of a chunked body, as sent (each one write of the gateway)."""
    out: list[bytes] = []
    at = 0
    while True:
        end = raw.find(b"\r\n", at)
        if end < 0:
            return out
        size = int(raw[at:end], 16)
        if size == 0 or end + 2 + size + 2 > len(raw):
            return out
        out.append(raw[end + 2 : end + 2 + size])
        at = end + 2 + size + 2


def test_a_coalesced_burst_delivers_every_event_once_in_order_and_resumes_exactly(
    server: ServerProcess, module_farm: ServerFarm
) -> None:
    gw = start_gateway(server.target, module_farm.workdir, "--coalesce-ms", str(COALESCE_MS))
    try:
        rng = random.Random(5)
        with Client(server.target) as client:
            table = seat_everyone(client, 2, name="coalesced", target=60)
            match, version = table.match_id, table.version
            first = EventStream(gw, f"/api/matches/{match}/events")
            got: list[Message] = []
            stop = threading.Event()
            reader = sse_reader(first, got, stop)
            wait_for(lambda: event_seqs(got)[-1:] == [version], what="the backlog")
            time.sleep(COALESCE_MS / 1000)  # the stream is caught up and written by the hub
            # Plays faster than the window: they go out in fewer writes than plays.
            plays = 6
            started = time.monotonic()
            for _ in range(plays):
                version = play_random_move([client], rng, table, version).response.view.version
            quick = time.monotonic() - started < COALESCE_MS / 1000
            wait_for(lambda: event_seqs(got)[-1:] == [version], what="the plays' events")
            assert event_seqs(got) == list(range(1, version + 1))  # each once, in order
            body = chunks(bytes(first.raw))
            bursts = [c for c in body[1:] if b"event: event" in c]
            if quick:
                assert 1 <= len(bursts) < plays, [c.count(b"\nid: ") for c in bursts]
            assert any(c.count(b"event: event") > 1 for c in bursts)
            # Each burst is its events, then the view after them.
            assert all(c.rstrip().rsplit(b"\n\n", 1)[-1].startswith(b"event: view") for c in bursts)
            # Resume by Last-Event-ID in the middle of what was sent, while plays go on.
            middle = version - 3
            second = EventStream(gw, f"/api/matches/{match}/events", last_event_id=str(middle))
            resumed: list[Message] = []
            reader2 = sse_reader(second, resumed, stop)
            for _ in range(4):
                version = play_random_move([client], rng, table, version).response.view.version
            wait_for(lambda: event_seqs(resumed)[-1:] == [version], what="the resumed stream")
            wait_for(lambda: event_seqs(got)[-1:] == [version], what="the first stream")
            assert event_seqs(resumed) == list(range(middle + 1, version + 1))
            assert event_seqs(got) == list(range(1, version + 1))
            assert resumed[0].kind == "view"
            stop.set()
            close_streams([(first, reader), (second, reader2)])
            wait_for(lambda: gw.get("/api/health")[1]["streams"] == 0, what="streams released")
    finally:
        assert gw.stop() == 0, gw.log()


def test_every_stream_gets_every_event_once_when_many_follow_one_match(
    server: ServerProcess, module_farm: ServerFarm
) -> None:
    """Streams joining while the match is played (some during a burst, some from the start,
    some resuming) each end with the whole sequence, once, in order."""
    gw = start_gateway(server.target, module_farm.workdir)
    try:
        rng = random.Random(9)
        with Client(server.target) as client:
            table = seat_everyone(client, 2, name="many", target=60)
            match, version = table.match_id, table.version
            stop = threading.Event()
            streams: list[tuple[EventStream, list[Message], int]] = []
            readers: list[tuple[EventStream, threading.Thread]] = []
            for i in range(12):
                after = 0 if i % 3 else max(0, version - 2)
                stream = EventStream(gw, f"/api/matches/{match}/events?after={after}")
                got: list[Message] = []
                readers.append((stream, sse_reader(stream, got, stop)))
                streams.append((stream, got, after))
                version = play_random_move([client], rng, table, version).response.view.version
            for _, got, after in streams:
                wait_for(
                    lambda got=got: event_seqs(got)[-1:] == [version],
                    what=f"every stream: {version} {[(a, event_seqs(g)) for _, g, a in streams]}",
                )
                assert event_seqs(got) == list(range(after + 1, version + 1))
            stop.set()
            close_streams(readers)
            wait_for(lambda: gw.get("/api/health")[1]["streams"] == 0, what="streams released")
    finally:
        assert gw.stop() == 0, gw.log()


def test_streams_closed_while_they_are_read_end_at_once_and_free_their_places(
    server: ServerProcess, gateway: Gateway
) -> None:
    """A stream the hub writes to (caught up, idle between plays) closed by its client: the
    reader blocked on it ends at once, and the gateway lets go of the stream."""
    with Client(server.target) as client:
        table = seat_everyone(client, 2, name="closed", target=60)
        stop = threading.Event()
        got: list[list[Message]] = [[] for _ in range(3)]
        readers: list[tuple[EventStream, threading.Thread]] = []
        for out in got:
            stream = EventStream(gateway, f"/api/matches/{table.match_id}/events")
            readers.append((stream, sse_reader(stream, out, stop)))
        for out in got:
            wait_for(lambda out=out: event_seqs(out)[-1:] == [table.version], what="the backlog")
        wait_for(lambda: gateway.get("/api/health")[1]["streams"] == 3, what="three streams")
        time.sleep(0.5)  # past the coalescing window: nothing more is coming
        close_streams(readers)
        wait_for(lambda: gateway.get("/api/health")[1]["streams"] == 0, what="streams released")
