"""Whole matches against real servers: every seat count, partnerships and every preset, on
SQLite (one server) and on PostgreSQL (two replicas, each command through a random one, a
spectator watching on the other); and WatchMatch resuming after a disconnect."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator

import pytest

from bergen.domain.state import ENDED
from bergen.domain.views import redact_event
from bergen.v1 import bergen_pb2 as pb

from .client import (
    Client,
    Watcher,
    event_in,
    fold_served,
    number_word,
    play_random_move,
    play_to_end,
    seat_everyone,
)
from .servers import ServerFarm
from .truth import check_stream, full_events, store_at

pytestmark = pytest.mark.timeout(120)

SEATINGS = [(2, False), (3, False), (4, False), (4, True)]
PRESETS = ["standard", "american", "pips", "eastern"]
MATRIX = [
    pytest.param(seats, partnerships, preset, id=f"{seats}{'p' if partnerships else ''}-{preset}")
    for seats, partnerships in SEATINGS
    for preset in PRESETS
]


class Cluster:
    """Clients of the servers (replicas) sharing one database."""

    def __init__(self, url: str, targets: list[str]) -> None:
        self.url = url
        self.clients = [Client(t) for t in targets]

    def close(self) -> None:
        for c in self.clients:
            c.close()


@pytest.fixture(scope="module")
def sqlite_cluster(module_farm: ServerFarm, module_sqlite_url: str) -> Iterator[Cluster]:
    server = module_farm.start(module_sqlite_url)
    cluster = Cluster(module_sqlite_url, [server.target])
    yield cluster
    cluster.close()


@pytest.fixture(scope="module")
def pg_cluster(module_farm: ServerFarm, module_pg_database: str) -> Iterator[Cluster]:
    a = module_farm.start(module_pg_database, name="replica-a")
    b = module_farm.start(module_pg_database, name="replica-b")
    cluster = Cluster(module_pg_database, [a.target, b.target])
    yield cluster
    cluster.close()


def play_watched_match(
    cluster: Cluster, rng: random.Random, seats: int, partnerships: bool, preset: str
) -> None:
    """Plays a whole match with commands through random replicas while a spectator watches on
    the last replica, then checks the stream, the replay, the record and the stored events."""
    clients = cluster.clients
    watch_on = clients[-1]
    watchers: list[Watcher] = []

    def watch(match_id: str) -> None:
        watchers.append(Watcher(watch_on, match_id).started())

    table = seat_everyone(
        rng.choice(clients), seats, partnerships=partnerships, preset=preset, before_joining=watch
    )
    assert number_word(pb.Preset.DESCRIPTOR, table.created.rules.preset) == preset
    watcher = watchers[0]
    assert watcher.view().version == 1, "the watcher started right after MatchCreated"

    last = table.version
    moves = []
    for move in play_to_end(clients, rng, table):
        # Each command's events follow on from the version before it, without a gap.
        assert [e.seq for e in move.response.events] == list(
            range(last + 1, move.response.view.version + 1)
        )
        last = move.response.view.version
        moves.append(move)
    final = moves[-1].response.view
    assert final.phase == pb.PHASE_ENDED
    assert final.result.reason == pb.MATCH_END_REASON_TARGET
    n = final.version

    watcher.join(30)
    assert watcher.finished.is_set(), "the watch stream did not end with the match"
    assert watcher.error is None, watcher.error
    watched = watcher.events()
    assert [e.seq for e in watched] == list(range(2, n + 1)), "the watcher missed or repeated"
    assert watched[-1].WhichOneof("body") == "seed_revealed"

    replay = rng.choice(clients).replay(table.match_id)
    assert replay.complete
    assert len(replay.events) == n == watcher.view().version + len(watched)
    truth = [event_in(e) for e in replay.events]
    for seen, true in zip(watched, truth[1:], strict=True):
        assert event_in(seen) in (true, redact_event(true, None)), (seen, true)
    assert truth == full_events(cluster.url, table.match_id), "the replay is not the stored log"

    state = fold_served(replay.events)
    assert state.phase == ENDED
    assert state.scores == tuple(final.scores)
    assert state.result is not None
    assert state.result.scores == tuple(final.result.scores) == state.scores
    assert state.result.winner_side == final.result.winner_side
    assert state.server_seed is not None
    seed = bytes.fromhex(state.server_seed)
    assert hashlib.sha256(seed).hexdigest() == table.created.commitment

    record = rng.choice(clients).record(table.match_id)
    assert record["log"]["events"] == n
    assert record["result"]["scores"] == list(final.scores)
    assert record["match_id"] == table.match_id
    assert record["server_seed"] == state.server_seed

    audit = rng.choice(clients).stub.GetAuditLog(pb.GetAuditLogRequest(match_id=table.match_id))
    assert [e.seq for e in audit.events] == list(range(1, n + 1))
    assert audit.events[-1].hash == record["log"]["head"]

    with store_at(cluster.url) as store:
        stored = store.read_stream(table.match_id)
        assert check_stream(store, table.match_id, stored).scores == state.scores


@pytest.mark.parametrize(("seats", "partnerships", "preset"), MATRIX)
def test_a_whole_match_on_sqlite_is_watched_replayed_and_recorded(
    sqlite_cluster: Cluster, seats: int, partnerships: bool, preset: str
) -> None:
    rng = random.Random(f"sqlite-{seats}-{partnerships}-{preset}")
    play_watched_match(sqlite_cluster, rng, seats, partnerships, preset)


@pytest.mark.postgres
@pytest.mark.parametrize(("seats", "partnerships", "preset"), MATRIX)
def test_a_whole_match_through_two_replicas_on_postgres_is_watched_on_the_other(
    pg_cluster: Cluster, seats: int, partnerships: bool, preset: str
) -> None:
    rng = random.Random(f"pg-{seats}-{partnerships}-{preset}")
    play_watched_match(pg_cluster, rng, seats, partnerships, preset)


def resume_after_disconnect(cluster: Cluster, rng: random.Random, seats: int) -> None:
    clients = cluster.clients
    first_on, second_on = clients[0], clients[-1]
    table = seat_everyone(first_on, seats)
    first = Watcher(first_on, table.match_id).started()
    version = table.version
    for _ in range(3):
        move = play_random_move(clients[:1], rng, table, version)
        version = move.response.view.version
    first.wait_for_seq(version)
    first.cancel()
    first.join(10)
    assert first.finished.is_set()
    seen = first.last_seq
    assert seen == version
    missed_from = seen + 1

    # Moves while nobody watches, then a watcher on the other server resumes from `seen`.
    for _ in range(3):
        move = play_random_move(clients[:1], rng, table, version)
        version = move.response.view.version
        if move.response.view.phase == pb.PHASE_ENDED:
            break
    second = Watcher(second_on, table.match_id, after_seq=seen).started()
    assert second.view().version >= version
    if move.response.view.phase != pb.PHASE_ENDED:
        rest = play_to_end(clients[:1], rng, table)
        version = rest[-1].response.view.version
    second.join(30)
    assert second.finished.is_set() and second.error is None, second.error
    resumed = [e.seq for e in second.events()]
    assert resumed == list(range(missed_from, version + 1)), "resuming lost or repeated events"
    replay = first_on.replay(table.match_id)
    before = [e.seq for e in first.events()]
    assert before + resumed == [e.seq for e in replay.events][first.view().version :]


@pytest.mark.parametrize("seats", [2, 4])
def test_a_watcher_that_reconnects_after_the_seq_it_saw_gets_exactly_the_missed_events(
    sqlite_cluster: Cluster, seats: int
) -> None:
    resume_after_disconnect(sqlite_cluster, random.Random(seats), seats)


@pytest.mark.postgres
@pytest.mark.parametrize("seats", [2, 4])
def test_a_watcher_resuming_on_another_replica_gets_exactly_the_missed_events(
    pg_cluster: Cluster, seats: int
) -> None:
    resume_after_disconnect(pg_cluster, random.Random(seats), seats)
