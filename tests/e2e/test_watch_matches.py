"""WatchMatches: one stream following many matches, as a program holding many seats (a bot
runner, a gateway) watches them. Each follow gets its view, then every event after it exactly
once and in order, as its own viewer may see it (a seat never another seat's tile, a
spectator no hidden tile), then `ended`; the stream ends when every follow has. Any follow's
error ends the stream, naming the follow and its match; the server's follows are bounded, and
a stream's are given back when it ends; a wrong seat token in a follow is a wrong secret.

As in test_watch_fanout, the driver moves in lockstep with the stream: after each move every
follow of its match has received it before the next, so only a match's last move's events (it
ended with them) are shown whole.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import pytest

from bergen.domain.events import Event
from bergen.domain.views import redact_event
from bergen.server.limits import FREE_WRONG_SECRETS
from bergen.v1 import bergen_pb2 as pb

from .client import Client, Table, bearer, event_in, play_random_move, seat_everyone
from .refusals import Refusal, refusal
from .servers import ServerFarm
from .truth import full_events

pytestmark = pytest.mark.timeout(180)

TARGET = 5
"""The matches' target: a hand or two, so that a match is a few dozen events."""
MAX_FOLLOWS_IN_STREAM = 500
Code = grpc.StatusCode


@dataclass(frozen=True)
class Follow:
    """One follow of a request, and the viewer it stands for (None: a spectator)."""

    match_id: str
    viewer: int | None
    token: str | None = None
    after_seq: int = 0

    @property
    def request(self) -> pb.WatchMatchesRequest.Follow:
        return pb.WatchMatchesRequest.Follow(
            match_id=self.match_id, after_seq=self.after_seq, seat_token=self.token or ""
        )


def request_of(follows: list[Follow]) -> pb.WatchMatchesRequest:
    return pb.WatchMatchesRequest(follows=[f.request for f in follows])


class FollowStream(threading.Thread):
    """Reads one WatchMatches stream to its end, each follow's messages kept apart and the
    shape of each checked: the view alone first, then `events`, then `ended` alone, last."""

    def __init__(
        self, client: Client, follows: list[Follow], token: str | None = None, timeout: float = 120
    ) -> None:
        super().__init__(daemon=True)
        self.follows = follows
        self.call = client.stub.WatchMatches(
            request_of(follows), metadata=bearer(token), timeout=timeout
        )
        n = len(follows)
        self.views: list[pb.MatchView | None] = [None] * n
        self.events: list[list[pb.Event]] = [[] for _ in range(n)]
        self.ended = [False] * n
        self.sizes: list[int] = []
        """The number of events in each `events` message, of every follow."""
        self.problems: list[str] = []
        self.error: grpc.RpcError | None = None
        self.finished = False
        """The stream ended without an error."""
        self._changed = threading.Condition()

    def run(self) -> None:
        try:
            for item in self.call:
                with self._changed:
                    self._take(item)
                    self._changed.notify_all()
            self.finished = True
        except grpc.RpcError as e:
            self.error = e
        finally:
            with self._changed:
                self._changed.notify_all()

    def _take(self, item: pb.WatchMatchesResponse) -> None:
        i = item.follow
        if i >= len(self.follows):
            self.problems.append(f"a message for follow {i} of {len(self.follows)}")
            return
        if item.match_id != self.follows[i].match_id:
            self.problems.append(f"follow {i}: match {item.match_id}, not its own")
        parts = [item.HasField("view"), bool(item.events), item.ended]
        if sum(parts) != 1:
            self.problems.append(f"follow {i}: not one of view, events, ended: {item}")
        if self.ended[i]:
            self.problems.append(f"follow {i}: a message after `ended`: {item}")
        if self.views[i] is None:
            if not item.HasField("view"):
                self.problems.append(f"follow {i}: the first message is not the view: {item}")
            self.views[i] = item.view
            return
        if item.HasField("view"):
            self.problems.append(f"follow {i}: a view after its first message")
        if item.events:
            self.events[i].extend(item.events)
            self.sizes.append(len(item.events))
        if item.ended:
            self.ended[i] = True

    def _seen_locked(self, i: int) -> int:
        if self.events[i]:
            return int(self.events[i][-1].seq)
        view = self.views[i]
        if view is None:
            return 0
        after = self.follows[i].after_seq
        # As the server counts: the events after `after_seq` are to come, not those before.
        return min(after, int(view.version)) if after else int(view.version)

    def started(self, timeout: float = 30.0) -> FollowStream:
        """Start, and wait until every follow has its view. Raises AssertionError."""
        self.start()
        with self._changed:
            ok = self._changed.wait_for(
                lambda: all(v is not None for v in self.views) or not self.is_alive(), timeout
            )
        assert ok and all(v is not None for v in self.views), (
            f"views of follows {[i for i, v in enumerate(self.views) if v is None]} missing: "
            f"{self.error}"
        )
        return self

    def wait_for(self, i: int, version: int, timeout: float = 30.0) -> None:
        with self._changed:
            ok = self._changed.wait_for(
                lambda: self._seen_locked(i) >= version or not self.is_alive(), timeout
            )
            seen = self._seen_locked(i)
        assert ok and seen >= version, f"follow {i} saw up to {seen}, not {version}: {self.error}"

    def wait_ended(self, i: int, timeout: float = 30.0) -> None:
        with self._changed:
            ok = self._changed.wait_for(lambda: self.ended[i] or not self.is_alive(), timeout)
        assert ok and self.ended[i], f"follow {i} did not end: {self.error}"

    def ends(self, timeout: float = 30.0) -> None:
        """Wait for the stream's end. Raises AssertionError unless it ended without error."""
        self.join(timeout)
        assert not self.is_alive(), f"the stream did not end; ended: {self.ended}"
        assert self.error is None, self.error
        assert self.finished
        assert not self.problems, self.problems


def check_follow(s: FollowStream, i: int, truth: list[Event], live_until: int) -> None:
    """Every event after the follow's view (or its after_seq) exactly once, in order, each
    as its viewer may see it (whole only after `live_until`, the last move's), then `ended`."""
    f = s.follows[i]
    view = s.views[i]
    assert view is not None
    assert view.match_id == f.match_id
    if f.viewer is None:
        assert not view.HasField("viewer_seat"), f"follow {i}: a spectator's view has a seat"
        assert not view.my_tiles
    else:
        assert view.HasField("viewer_seat") and view.viewer_seat == f.viewer, (i, view)
    first = (f.after_seq or view.version) + 1
    assert [e.seq for e in s.events[i]] == list(range(first, len(truth) + 1)), (
        f"follow {i} (viewer {f.viewer}): events missed, repeated or out of order"
    )
    for served in s.events[i]:
        true = truth[served.seq - 1]
        expected = true if served.seq > live_until else redact_event(true, f.viewer)
        assert event_in(served) == expected, (i, f.viewer, served.seq, served, expected)
    assert s.ended[i], f"follow {i}: no `ended`"


def hid_something(s: FollowStream, i: int, truth: list[Event]) -> bool:
    """Whether the follow was shown an event with something of the truth hidden."""
    return any(event_in(e) != truth[e.seq - 1] for e in s.events[i])


def rejected(call: object) -> tuple[Refusal, list[pb.WatchMatchesResponse]]:
    """The refusal a WatchMatches call ended with, and the messages it sent before.
    Raises AssertionError when it ended without one."""
    got: list[pb.WatchMatchesResponse] = []
    try:
        for item in call:  # type: ignore[attr-defined]
            got.append(item)
    except grpc.RpcError as e:
        return refusal(e, "WatchMatches"), got
    raise AssertionError(f"the stream ended without an error after {len(got)} messages")


def follow(client: Client, follows: list[Follow], token: str | None = None) -> Refusal:
    """The refusal of a stream of `follows`. Raises AssertionError for none (a stream served
    instead ends at its deadline, which is no refusal of the server's)."""
    call = client.stub.WatchMatches(request_of(follows), metadata=bearer(token), timeout=10)
    try:
        return rejected(call)[0]
    finally:
        call.cancel()


# many matches on one stream -----------------------------------------------------------------


def follow_matches(watch_on: Client, play_on: list[Client], url: str, seed: int) -> None:
    rng = random.Random(seed)
    tables = [seat_everyone(play_on[0], 2, target=TARGET) for _ in range(3)]
    # Each seat of each match by its own token (so both seats of each match on one stream),
    # and spectators of two of them. The first match's follows start after seq 1, so that
    # they are shown its first deal, each seat with the other's hand hidden.
    follows = [
        Follow(t.match_id, seat, t.tokens[seat], after_seq=1 if t is tables[0] else 0)
        for t in tables
        for seat in (0, 1)
    ]
    follows += [Follow(tables[0].match_id, None, after_seq=1), Follow(tables[2].match_id, None)]
    s = FollowStream(watch_on, follows).started()
    of = {
        t.match_id: [i for i, f in enumerate(follows) if f.match_id == t.match_id] for t in tables
    }
    versions = {t.match_id: t.version for t in tables}
    live_until = dict(versions)
    live = list(tables)
    while live:
        table = rng.choice(live)
        assert s.is_alive(), f"the stream ended while a match was live: {s.error}"
        move = play_random_move(play_on, rng, table, versions[table.match_id])
        view = move.response.view
        versions[table.match_id] = view.version
        if view.phase == pb.PHASE_ENDED:
            live.remove(table)
        else:
            live_until[table.match_id] = view.version
        for i in of[table.match_id]:
            s.wait_for(i, view.version)
    s.ends()
    for t in tables:
        truth = full_events(url, t.match_id)
        assert len(truth) == versions[t.match_id]
        for i in of[t.match_id]:
            check_follow(s, i, truth, live_until[t.match_id])
    for i in of[tables[0].match_id]:
        # The check can fail: the deal hides something from every viewer.
        assert hid_something(s, i, full_events(url, tables[0].match_id)), f"follow {i}"
    # A play writes two events or more now and then: they came together.
    assert any(n > 1 for n in s.sizes), s.sizes


def test_every_follow_gets_its_view_then_each_event_once_as_its_viewer_may_see_it(
    farm: ServerFarm, database: str
) -> None:
    """On PostgreSQL the stream is on a replica no command is sent to."""
    replicas = 2 if database.startswith("postgresql") else 1
    servers = [Client(farm.start(database, name=f"replica-{i}").target) for i in range(replicas)]
    try:
        follow_matches(servers[-1], servers[:1], database, seed=replicas)
    finally:
        for c in servers:
            c.close()


@pytest.fixture(scope="module")
def server(module_farm: ServerFarm, module_sqlite_url: str) -> Iterator[Client]:
    client = Client(module_farm.start(module_sqlite_url).target)
    yield client
    client.close()


def play(client: Client, table: Table, moves: int, seed: int) -> int:
    """Play `moves` random moves (fewer if the match ends first). Returns the version."""
    rng = random.Random(seed)
    version = table.version
    for _ in range(moves):
        view = play_random_move([client], rng, table, version).response.view
        version = view.version
        if view.phase == pb.PHASE_ENDED:
            break
    return version


def test_resumed_follows_get_the_events_after_their_seq_and_the_streams_token_serves_too(
    server: Client, module_sqlite_url: str
) -> None:
    ended = seat_everyone(server, 2, target=1000)
    play(server, ended, 4, seed=1)
    server.resign(ended.match_id, ended.tokens[1])
    ended_at = server.view(ended.match_id).version
    live = seat_everyone(server, 2, target=1000)
    live_at = play(server, live, 6, seed=2)
    assert live_at > 3
    follows = [
        # An ended match: everything after seq 2, whole, and its end at once.
        Follow(ended.match_id, 0, ended.tokens[0], after_seq=2),
        # A seat by the stream's own token (no seat_token): after seq 3.
        Follow(live.match_id, 1, None, after_seq=3),
        # Nothing missed.
        Follow(live.match_id, 0, live.tokens[0], after_seq=live_at),
    ]
    s = FollowStream(server, follows, token=live.tokens[1]).started()
    s.wait_for(1, live_at)
    s.wait_ended(0)
    with s._changed:
        assert [e.seq for e in s.events[0]] == list(range(3, ended_at + 1))
        assert [e.seq for e in s.events[1]] == list(range(4, live_at + 1))
        assert s.events[2] == []
        assert s.views[1].version == s.views[2].version == live_at  # type: ignore[union-attr]
    server.resign(live.match_id, live.tokens[0])
    s.ends()
    end_at = server.view(live.match_id).version
    check_follow(s, 0, full_events(module_sqlite_url, ended.match_id), live_until=0)
    truth = full_events(module_sqlite_url, live.match_id)
    assert len(truth) == end_at
    check_follow(s, 1, truth, live_until=live_at)
    check_follow(s, 2, truth, live_until=live_at)
    assert hid_something(s, 1, truth)


# errors end the stream ------------------------------------------------------------------


def test_an_unknown_match_ends_the_stream_naming_the_follow_and_the_match(
    server: Client,
) -> None:
    table = seat_everyone(server, 2)
    unknown = str(uuid.uuid4())
    got = follow(server, [Follow(table.match_id, 0, table.tokens[0]), Follow(unknown, None)])
    assert (got.code, got.reason) == (Code.NOT_FOUND, "MATCH_NOT_FOUND"), got
    assert unknown in got.message, got
    assert got.metadata.get("match_id") == unknown, got
    assert got.metadata.get("follow") == "1", got


def test_a_seat_token_of_another_match_is_permission_denied_naming_the_match(
    server: Client,
) -> None:
    a = seat_everyone(server, 2)
    b = seat_everyone(server, 2)
    follows = [Follow(a.match_id, 0, a.tokens[0]), Follow(b.match_id, 1, a.tokens[1])]
    got = follow(server, follows)
    assert (got.code, got.reason) == (Code.PERMISSION_DENIED, "NOT_A_SEAT_OF_THIS_MATCH"), got
    assert b.match_id in got.message, got
    assert got.metadata.get("match_id") == b.match_id, got
    assert got.metadata.get("follow") == "1", got
    # The stream's own token, for a follow without one, alike.
    got = follow(server, [Follow(b.match_id, None)], token=a.tokens[0])
    assert (got.code, got.reason) == (Code.PERMISSION_DENIED, "NOT_A_SEAT_OF_THIS_MATCH"), got
    assert b.match_id in got.message, got


@pytest.mark.parametrize(
    ("token", "why"),
    [("short", "too short"), ("x" * 201, "too long"), ("bgs_ok_but a space inside", "a space")],
)
def test_a_malformed_seat_token_is_unauthenticated_naming_the_follow(
    server: Client, token: str, why: str
) -> None:
    table = seat_everyone(server, 2)
    follows = [Follow(table.match_id, 0, table.tokens[0]), Follow(table.match_id, 1, token)]
    got = follow(server, follows)
    assert got.code is Code.UNAUTHENTICATED, (why, got)
    assert "follows[1].seat_token" in got.message, got
    assert got.metadata.get("follow") == "1", got
    assert token not in got.message, "a malformed secret is not repeated"


def test_a_bad_match_id_is_invalid_argument_naming_the_follow(server: Client) -> None:
    table = seat_everyone(server, 2)
    for bad, reason in [
        ("not-a-match", "INVALID_MATCH_ID"),
        ("", "MATCH_ID_REQUIRED"),
        (table.match_id + "\n", "INVALID_MATCH_ID"),
        (table.match_id.upper(), "INVALID_MATCH_ID"),
    ]:
        follows = [Follow(table.match_id, None), Follow(table.match_id, None), Follow(bad, None)]
        got = follow(server, follows)
        assert (got.code, got.reason) == (Code.INVALID_ARGUMENT, reason), (bad, got)
        assert "follows[2].match_id" in got.message, got
        assert got.metadata.get("follow") == "2", got


def test_no_follows_or_more_than_500_are_invalid_argument(server: Client) -> None:
    got = follow(server, [])
    assert (got.code, got.reason) == (Code.INVALID_ARGUMENT, "NO_FOLLOWS"), got
    table = seat_everyone(server, 2)
    many = [Follow(table.match_id, None)] * (MAX_FOLLOWS_IN_STREAM + 1)
    got = follow(server, many)
    assert (got.code, got.reason) == (Code.INVALID_ARGUMENT, "TOO_MANY_FOLLOWS_IN_STREAM"), got
    assert got.metadata.get("limit") == str(MAX_FOLLOWS_IN_STREAM), got
    # 500 are served, each with its view.
    s = FollowStream(server, many[:MAX_FOLLOWS_IN_STREAM]).started()
    s.call.cancel()
    s.join(10)
    assert not s.problems, s.problems[:3]


# the server's limit of follows ------------------------------------------------------------


def test_follows_past_the_servers_limit_are_refused_and_given_back_when_a_stream_ends(
    farm: ServerFarm, sqlite_url: str
) -> None:
    limit = 4
    with Client(farm.start(sqlite_url, extra_args=["--max-follows", str(limit)]).target) as c:
        table = seat_everyone(c, 2)
        spectator = Follow(table.match_id, None)
        first = FollowStream(c, [spectator] * 3).started()
        got = follow(c, [spectator] * 2)
        assert (got.code, got.reason) == (Code.RESOURCE_EXHAUSTED, "TOO_MANY_FOLLOWS"), got
        assert got.metadata.get("limit") == str(limit), got
        # One more fits, and then none.
        last = FollowStream(c, [spectator]).started()
        got = follow(c, [spectator])
        assert (got.code, got.reason) == (Code.RESOURCE_EXHAUSTED, "TOO_MANY_FOLLOWS"), got
        # Once its client cancels a stream, its follows are free again.
        last.call.cancel()
        wait_until_free(c, spectator, 1)
        first.call.cancel()
        wait_until_free(c, spectator, limit)
        # That stream (ended by a follow's error) gave them back before it was answered.
        FollowStream(c, [spectator] * limit).started().call.cancel()
        wait_until_free(c, spectator, limit)
        # And so does a stream whose matches have all ended, once it has sent everything.
        c.resign(table.match_id, table.tokens[0])
        for _ in range(2):
            FollowStream(c, [spectator] * limit).started().ends()
        for s in (first, last):
            s.join(10)
            assert s.error is not None and s.error.code() is Code.CANCELLED, s.error  # type: ignore[attr-defined]


def test_a_client_may_follow_only_its_share_of_the_servers_follows(
    farm: ServerFarm, sqlite_url: str
) -> None:
    share = 3
    args = ["--limit-loopback", "--max-follows", "100", "--max-follows-per-client", str(share)]
    with Client(farm.start(sqlite_url, extra_args=args).target) as c:
        table = seat_everyone(c, 2)
        spectator = Follow(table.match_id, None)
        first = FollowStream(c, [spectator] * 2).started()
        got = follow(c, [spectator] * 2)
        assert (got.code, got.reason) == (
            Code.RESOURCE_EXHAUSTED,
            "TOO_MANY_FOLLOWS_FOR_CLIENT",
        ), got
        assert got.metadata.get("limit") == str(share), got
        # The server had room: what was refused was this client's share, and what it has
        # left it may still use.
        second = FollowStream(c, [spectator]).started()
        second.call.cancel()
        first.call.cancel()
        deadline = time.monotonic() + 10
        while True:
            got = follow(c, [spectator] * (share - 1) + [Follow(str(uuid.uuid4()), None)])
            if got.reason == "MATCH_NOT_FOUND":
                break
            assert got.reason == "TOO_MANY_FOLLOWS_FOR_CLIENT", got
            assert time.monotonic() < deadline, "a closed stream's follows stayed the client's"
            time.sleep(0.05)
        for s in (first, second):
            s.join(10)


def wait_until_free(client: Client, spectator: Follow, n: int, timeout: float = 10.0) -> None:
    """Wait until the server takes a stream of `n` follows: one that ends at once, its last
    follow's match unknown (so that it holds none after). Raises AssertionError when it is
    still refused as too many after `timeout`."""
    follows = [spectator] * (n - 1) + [Follow(str(uuid.uuid4()), None)]
    deadline = time.monotonic() + timeout
    while True:
        got = follow(client, follows)
        if got.reason == "MATCH_NOT_FOUND":
            return
        assert got.reason == "TOO_MANY_FOLLOWS", got
        assert time.monotonic() < deadline, "the follows of a closed stream were not freed"
        time.sleep(0.05)


# wrong tokens are wrong secrets ------------------------------------------------------------


def test_wrong_seat_tokens_in_follows_hold_the_client_back(
    farm: ServerFarm, sqlite_url: str
) -> None:
    server = farm.start(sqlite_url, extra_args=["--limit-loopback"])
    with Client(server.target) as c:
        a = seat_everyone(c, 2)
        b = seat_everyone(c, 2)
        wrong = [Follow(a.match_id, None), Follow(b.match_id, 0, a.tokens[0])]
        for _ in range(FREE_WRONG_SECRETS + 1):
            got = follow(c, wrong)
            assert got.reason == "NOT_A_SEAT_OF_THIS_MATCH", got
        # Now held back, the right token included, before any work.
        right = [Follow(b.match_id, 0, b.tokens[0])]
        got = follow(c, right)
        assert (got.code, got.reason) == (Code.RESOURCE_EXHAUSTED, "WRONG_SECRET_BACKOFF"), got
        assert got.retry_after_s is not None and got.retry_after_s > 0, got
        # A stream with no token is served.
        s = FollowStream(c, [Follow(b.match_id, None)]).started()
        s.call.cancel()
        # And once the wait is over, the right token is too.
        deadline = time.monotonic() + 10 * got.retry_after_s
        while True:
            call = c.stub.WatchMatches(request_of(right), timeout=30)
            try:
                assert next(call).view.viewer_seat == 0
                break
            except grpc.RpcError as e:
                assert refusal(e).reason == "WRONG_SECRET_BACKOFF", refusal(e)
                assert time.monotonic() < deadline, "still held back"
                time.sleep(0.1)
            finally:
                call.cancel()
