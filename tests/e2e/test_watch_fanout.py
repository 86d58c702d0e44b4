"""Many watchers of one match, of every audience: each seat's streams, spectators, streams
asking for batched messages and streams that do not, some joining mid-match. Each gets every
event after its view exactly once and in order, as its own viewer may see it (a seat never
another seat's tile, a spectator no hidden tile) until the match ends; on SQLite (one server)
and on PostgreSQL (the watchers on the replica the commands are not sent to).

The driver moves in lockstep with the streams: after each move every stream has received it
before the next, so only the last move's events (the match ended with them) are shown whole.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator

import grpc
import pytest

from bergen.domain.events import Event
from bergen.domain.views import redact_event
from bergen.v1 import bergen_pb2 as pb

from .client import Client, bearer, event_in, play_random_move, seat_everyone
from .servers import ServerFarm
from .truth import full_events

pytestmark = pytest.mark.timeout(180)

Viewer = int | None


class Stream(threading.Thread):
    """Reads one WatchMatch stream to its end, checking the shape of each message."""

    def __init__(self, client: Client, match_id: str, viewer: Viewer, token: str | None, *,
                 batched: bool) -> None:  # fmt: skip
        super().__init__(daemon=True)
        self.viewer = viewer
        self.batched = batched
        self.call = client.stub.WatchMatch(
            pb.WatchMatchRequest(match_id=match_id, batched=batched),
            metadata=bearer(token),
            timeout=120,
        )
        self.view: pb.MatchView | None = None
        self.events: list[pb.Event] = []
        self.messages: list[int] = []
        """The number of events in each message after the view."""
        self.problems: list[str] = []
        self.error: grpc.RpcError | None = None
        self._changed = threading.Condition()

    def run(self) -> None:
        try:
            for item in self.call:
                with self._changed:
                    self._take(item)
                    self._changed.notify_all()
        except grpc.RpcError as e:
            self.error = e
        finally:
            with self._changed:
                self._changed.notify_all()

    def _take(self, item: pb.WatchMatchResponse) -> None:
        if self.view is None:
            if not item.HasField("view") or item.events:
                self.problems.append(f"the first message is not the view alone: {item}")
            self.view = item.view
            return
        if item.HasField("view"):
            self.problems.append("a view after the first message")
        elif self.batched:
            if item.HasField("event") or not item.events:
                self.problems.append(f"a batched stream's message is not `events`: {item}")
            self.events.extend(item.events)
            self.messages.append(len(item.events))
        else:
            if not item.HasField("event") or item.events:
                self.problems.append(f"a stream not batched was sent `events`: {item}")
            self.events.append(item.event)
            self.messages.append(1)

    @property
    def seen(self) -> int:
        with self._changed:
            return self._seen_locked()

    def _seen_locked(self) -> int:
        if self.events:
            return int(self.events[-1].seq)
        return int(self.view.version) if self.view is not None else 0

    def wait_for(self, version: int, timeout: float = 30.0) -> None:
        with self._changed:
            ok = self._changed.wait_for(
                lambda: self._seen_locked() >= version or not self.is_alive(), timeout
            )
        assert ok and self.seen >= version, (
            f"a stream of viewer {self.viewer} saw up to {self.seen}, not {version}: {self.error}"
        )


def open_streams(
    client: Client, match_id: str, tokens: list[str], per_seat: int, spectators: int
) -> list[Stream]:
    """`per_seat` streams of every seat and `spectators` spectators' streams, alternately
    batched and not, each started and holding its view."""
    wanted: list[tuple[Viewer, str | None]] = [
        (seat, token) for seat, token in enumerate(tokens) for _ in range(per_seat)
    ]
    wanted += [(None, None)] * spectators
    streams = [
        Stream(client, match_id, viewer, token, batched=i % 2 == 0)
        for i, (viewer, token) in enumerate(wanted)
    ]
    for s in streams:
        s.start()
    for s in streams:
        s.wait_for(1)
    return streams


def check_stream(s: Stream, truth: list[Event], live_until: int) -> None:
    """Every event after the stream's view exactly once, in order, each as the stream's
    viewer may see it (whole only for the events after `live_until`, the last move's)."""
    assert not s.problems, s.problems
    assert s.error is None, s.error
    assert s.view is not None
    if s.viewer is None:
        assert not s.view.HasField("viewer_seat")
    else:
        assert s.view.viewer_seat == s.viewer
    first = s.view.version + 1
    assert [e.seq for e in s.events] == list(range(first, len(truth) + 1)), (
        f"viewer {s.viewer}: events missed, repeated or out of order"
    )
    for served in s.events:
        true = truth[served.seq - 1]
        expected = true if served.seq > live_until else redact_event(true, s.viewer)
        assert event_in(served) == expected, (s.viewer, served.seq, served, expected)
    assert sum(s.messages) == len(s.events)


def watch_a_match(watch_on: Client, play_on: list[Client], url: str, seats: int, seed: int) -> None:
    rng = random.Random(seed)
    table = seat_everyone(play_on[0], seats)
    streams = open_streams(watch_on, table.match_id, table.tokens, per_seat=3, spectators=6)
    version = table.version
    live_until = version
    moves = 0
    while True:
        move = play_random_move(play_on, rng, table, version)
        moves += 1
        ended = move.response.view.phase == pb.PHASE_ENDED
        if not ended:
            live_until = move.response.view.version
        version = move.response.view.version
        for s in streams:
            s.wait_for(version)
        if moves == 5:  # watchers joining mid-match
            streams += open_streams(watch_on, table.match_id, table.tokens, 1, 2)
        if ended:
            break
    for s in streams:
        s.join(30)
        assert not s.is_alive(), "a stream did not end with the match"
    truth = full_events(url, table.match_id)
    assert len(truth) == version
    for s in streams:
        check_stream(s, truth, live_until)
    # A play writes two events or more now and then: a batched stream sent them together.
    assert any(n > 1 for s in streams if s.batched for n in s.messages)
    assert all(n == 1 for s in streams if not s.batched for n in s.messages)


@pytest.fixture(scope="module")
def sqlite_server(module_farm: ServerFarm, module_sqlite_url: str) -> Iterator[Client]:
    server = module_farm.start(module_sqlite_url)
    client = Client(server.target)
    yield client
    client.close()


@pytest.fixture(scope="module")
def pg_replicas(
    module_farm: ServerFarm, module_pg_database: str
) -> Iterator[tuple[Client, Client]]:
    a = Client(module_farm.start(module_pg_database, name="replica-a").target)
    b = Client(module_farm.start(module_pg_database, name="replica-b").target)
    yield a, b
    a.close()
    b.close()


@pytest.mark.parametrize("seats", [2, 4])
def test_every_watcher_of_every_audience_gets_each_event_once_as_its_viewer_may_see_it(
    sqlite_server: Client, module_sqlite_url: str, seats: int
) -> None:
    watch_a_match(sqlite_server, [sqlite_server], module_sqlite_url, seats, seed=seats)


@pytest.mark.postgres
@pytest.mark.parametrize("seats", [2, 3])
def test_watchers_on_another_replica_get_each_event_once_as_their_viewer_may_see_it(
    pg_replicas: tuple[Client, Client], module_pg_database: str, seats: int
) -> None:
    a, b = pg_replicas
    watch_a_match(b, [a], module_pg_database, seats, seed=10 + seats)


def test_a_batched_stream_resumed_after_a_seq_gets_exactly_the_events_after_it(
    sqlite_server: Client,
) -> None:
    rng = random.Random(3)
    table = seat_everyone(sqlite_server, 2)
    version = table.version
    for _ in range(6):
        version = play_random_move([sqlite_server], rng, table, version).response.view.version
    call = sqlite_server.stub.WatchMatch(
        pb.WatchMatchRequest(match_id=table.match_id, after_seq=2, batched=True), timeout=30
    )
    got: list[int] = []
    messages = 0
    first = True
    for item in call:
        if first:
            assert item.HasField("view") and item.view.version == version
            first = False
            continue
        assert item.events and not item.HasField("event")
        got += [e.seq for e in item.events]
        messages += 1
        if got[-1] >= version:
            call.cancel()
            break
    # Everything missed since seq 2, at once: one message.
    assert got == list(range(3, version + 1))
    assert messages == 1
