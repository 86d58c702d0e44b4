"""Races: many clients send the same play, or conflicting plays, to one match at the same
moment, through both replicas on PostgreSQL and through one server on SQLite. Exactly one is
applied; the stream has no gap and no duplicate; the others are refused (or, with the same
command id, given the first answer again)."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import grpc
import pytest

from bergen.domain.events import TilePlayed
from bergen.domain.views import redact_event
from bergen.v1 import bergen_pb2 as pb

from .client import Client, Table, bearer, event_in, new_command_id, seat_everyone
from .servers import ServerFarm
from .truth import check_stream, decoded, store_at

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

THREADS = 16
ROUNDS = 4
Code = grpc.StatusCode
RNG = random.Random("races")


@dataclass
class Racers:
    url: str
    clients: list[Client]
    """One client (channel) per thread, spread over the replicas."""


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def racers(request: pytest.FixtureRequest, farm: ServerFarm, sqlite_url: str) -> Iterator[Racers]:
    if request.param == "sqlite":
        url = sqlite_url
        targets = [farm.start(url).target]
    else:
        url = request.getfixturevalue("pg_database")
        targets = [farm.start(url, name=f"replica-{r}").target for r in "ab"]
    clients = [Client(targets[i % len(targets)]) for i in range(THREADS)]
    yield Racers(url, clients)
    for c in clients:
        c.close()


Outcome = tuple[Code, pb.PlayResponse | None, str]


def race(racers: Racers, requests: Callable[[int], tuple[pb.PlayRequest, str]]) -> list[Outcome]:
    """Every thread sends its request (with its token) at the same moment."""
    barrier = threading.Barrier(THREADS)
    outcomes: list[Outcome | None] = [None] * THREADS

    def run(i: int) -> None:
        request, token = requests(i)
        stub = racers.clients[i].stub
        barrier.wait()
        try:
            reply = stub.Play(request, metadata=bearer(token), timeout=60)
            outcomes[i] = (Code.OK, reply, "")
        except grpc.RpcError as e:
            outcomes[i] = (e.code(), None, e.details() or "")  # type: ignore[attr-defined]

    threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert all(o is not None for o in outcomes), "a racer never got an answer"
    return [o for o in outcomes if o is not None]


def current_turn(client: Client, table: Table) -> tuple[int, pb.MatchView]:
    public = client.view(table.match_id)
    assert public.phase == pb.PHASE_PLAYING
    seat = public.turn
    return seat, client.view(table.match_id, table.tokens[seat])


def fresh_table(racers: Racers, table: Table | None) -> Table:
    """`table` while it is being played, else a new match."""
    client = racers.clients[0]
    if table is not None and client.view(table.match_id).phase == pb.PHASE_PLAYING:
        return table
    return seat_everyone(client, RNG.choice([2, 3, 4]))


def check_the_stream(
    racers: Racers, table: Table, seat: int, version: int, applied: pb.PlayResponse
) -> None:
    """The stream is gap-free and folds, and holds the winner's events once, right after
    `version`, as they were answered."""
    with store_at(racers.url) as store:
        stored = store.read_stream(table.match_id)
        state = check_stream(store, table.match_id, stored)
    n = len(applied.events)
    assert [e.seq for e in applied.events] == list(range(version + 1, version + 1 + n))
    truth = decoded(stored[version : version + n])
    for answered, true in zip(applied.events, truth, strict=True):
        assert event_in(answered) in (true, redact_event(true, seat)), (answered, true)
    assert isinstance(truth[0], TilePlayed) and truth[0].seat == seat
    later = decoded(stored[version + n :])
    first = truth[0]
    assert not any(
        isinstance(e, TilePlayed) and e.tile == first.tile and e.hand == first.hand for e in later
    ), "the raced tile was played again in the same hand"
    assert state.version == len(stored)


def test_the_same_play_with_the_same_command_id_is_applied_once_and_answered_alike(
    racers: Racers,
) -> None:
    table: Table | None = None
    for _ in range(ROUNDS):
        table = fresh_table(racers, table)
        seat, mine = current_turn(racers.clients[0], table)
        choice = RNG.choice(mine.legal_plays)
        command_id = new_command_id()
        request = pb.PlayRequest(
            match_id=table.match_id, tile=choice.tile, end=choice.end, command_id=command_id
        )
        outcomes = race(racers, lambda i: (request, table.tokens[seat]))  # noqa: B023
        fresh = [
            r for code, r, _ in outcomes if code == Code.OK and r is not None and not r.replayed
        ]
        assert len(fresh) == 1, [(c, r and r.replayed, d) for c, r, d in outcomes]
        applied = fresh[0]
        for code, reply, details in outcomes:
            if code == Code.OK:
                assert reply is not None
                assert list(reply.events) == list(applied.events), "a replay differs"
                assert reply.view == applied.view, "a replayed view differs"
            else:
                assert code == Code.ABORTED, (code, details)
        check_the_stream(racers, table, seat, mine.version, applied)
        with store_at(racers.url) as store:
            stored = store.read_stream(table.match_id)
        tagged = [e.seq for e in stored if e.metadata.command_id == command_id]
        assert tagged == [e.seq for e in applied.events], "the command was written twice"


def test_the_same_play_with_different_command_ids_is_applied_once(racers: Racers) -> None:
    table: Table | None = None
    for _ in range(ROUNDS):
        table = fresh_table(racers, table)
        seat, mine = current_turn(racers.clients[0], table)
        choice = RNG.choice(mine.legal_plays)
        outcomes = race(
            racers,
            lambda i: (
                pb.PlayRequest(
                    match_id=table.match_id,  # noqa: B023
                    tile=choice.tile,  # noqa: B023
                    end=choice.end,  # noqa: B023
                    command_id=new_command_id(),
                ),
                table.tokens[seat],  # noqa: B023
            ),
        )
        ok = [r for code, r, _ in outcomes if code == Code.OK and r is not None]
        assert len(ok) == 1, [(c, d) for c, _, d in outcomes]
        assert not ok[0].replayed
        refused = {code for code, _, _ in outcomes if code != Code.OK}
        assert refused <= {Code.FAILED_PRECONDITION, Code.ABORTED}, outcomes
        check_the_stream(racers, table, seat, mine.version, ok[0])


def test_conflicting_plays_at_one_expected_version_apply_exactly_one(racers: Racers) -> None:
    table: Table | None = None
    for _ in range(ROUNDS):
        table = fresh_table(racers, table)
        seat, mine = current_turn(racers.clients[0], table)
        plays = list(mine.legal_plays)
        outcomes = race(
            racers,
            lambda i: (
                pb.PlayRequest(
                    match_id=table.match_id,  # noqa: B023
                    tile=plays[i % len(plays)].tile,  # noqa: B023
                    end=plays[i % len(plays)].end,  # noqa: B023
                    expected_version=mine.version,  # noqa: B023
                    command_id=new_command_id(),
                ),
                table.tokens[seat],  # noqa: B023
            ),
        )
        ok = [r for code, r, _ in outcomes if code == Code.OK and r is not None]
        assert len(ok) == 1, [(c, d) for c, _, d in outcomes]
        refused = {code for code, _, _ in outcomes if code != Code.OK}
        assert refused <= {Code.ABORTED}, outcomes
        check_the_stream(racers, table, seat, mine.version, ok[0])
