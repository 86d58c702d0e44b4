"""Rematches held by the game server, through real `bergen serve` processes on SQLite and on
PostgreSQL (two replicas): `CreateMatch` with `rematch_of` creates one rematch however often
and wherever it is asked for, with the old match's seats, rules and name; each of its seats is
taken only with the token that held it before; a rematch is rematched in turn; and every
refusal names its reason and writes nothing."""

from __future__ import annotations

import random
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import pytest

from bergen.api.rematch import rematch_id
from bergen.cli_client.connect import reason_of
from bergen.domain.tournament_fairness import match_id as table_match_id
from bergen.v1 import bergen_pb2 as pb

from .client import Client, Table, bearer, play_to_end, rule_options, seat_everyone
from .conftest import ORGANISER_TOKEN
from .servers import ServerFarm

pytestmark = pytest.mark.timeout(240)

Code = grpc.StatusCode


@dataclass
class Replicas:
    clients: list[Client]
    """One client a replica: one on SQLite, two sharing the database on PostgreSQL."""
    database: str


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def replicas(
    request: pytest.FixtureRequest, module_farm: ServerFarm, module_sqlite_url: str
) -> Iterator[Replicas]:
    if request.param == "sqlite":
        url, names = module_sqlite_url, ["embedded"]
    else:
        url, names = request.getfixturevalue("module_pg_database"), ["replica-a", "replica-b"]
    clients = [
        Client(module_farm.start(url, organiser_token=ORGANISER_TOKEN, name=n).target)
        for n in names
    ]
    yield Replicas(clients, request.param)
    for c in clients:
        c.close()


def new_token() -> str:
    return "bgs_" + secrets.token_urlsafe(32)


def rematch(client: Client, old: str, token: str | None, **more: Any) -> pb.CreateMatchResponse:
    reply: pb.CreateMatchResponse = client.stub.CreateMatch(
        pb.CreateMatchRequest(rematch_of=old, **more), metadata=bearer(token), timeout=20
    )
    return reply


def join(
    client: Client,
    match_id: str,
    previous: str | None,
    *,
    seat: int | None = None,
    token: str | None = None,
    name: str = "again",
) -> pb.JoinMatchResponse:
    request = pb.JoinMatchRequest(match_id=match_id, name=name, seat_token=token or new_token())
    if previous is not None:
        request.previous_seat_token = previous
    if seat is not None:
        request.seat = seat
    reply: pb.JoinMatchResponse = client.stub.JoinMatch(request, timeout=20)
    return reply


def refused(call: Callable[[], object]) -> tuple[grpc.StatusCode, str, str]:
    """The status, reason and message of a call that must fail."""
    with pytest.raises(grpc.RpcError) as info:
        call()
    error: Any = info.value
    return error.code(), reason_of(error), error.details() or ""


def ended_by_resignation(client: Client, seats: int = 2, **options: Any) -> Table:
    """A match with every seat taken, ended by seat 0's resignation (a forfeit)."""
    table = seat_everyone(client, seats, **options)
    client.resign(table.match_id, table.tokens[0])
    assert client.view(table.match_id).phase == pb.PHASE_ENDED
    return table


def test_a_rematch_is_created_once_with_the_old_seats_rules_and_name_and_each_seat_is_kept(
    replicas: Replicas,
) -> None:
    first, last = replicas.clients[0], replicas.clients[-1]
    old = ended_by_resignation(
        first, 3, preset="american", name="Club night", target=7, clock="fischer",
        clock_initial=120, clock_increment=3,
    )  # fmt: skip
    made = rematch(first, old.match_id, old.tokens[1])
    assert made.match_id == rematch_id(old.match_id) and not made.replayed
    # Any other seat, through any replica, is answered the same match, and nothing is written.
    again = rematch(last, old.match_id, old.tokens[2])
    assert (again.match_id, again.commitment, again.replayed) == (
        made.match_id,
        made.commitment,
        True,
    )
    assert again.rules == made.rules == old.created.rules
    new = made.match_id
    view = last.view(new)
    assert view.rematch_of == old.match_id and view.phase == pb.PHASE_SEATING
    assert (view.name, len(view.seats), view.partnerships) == ("Club night", 3, False)
    assert view.version == 1
    # The listing says it is a rematch: its free seats are nobody else's.
    # The listing is folded from the commit-safe global order: it shows the rematch within
    # moments, not always at once.
    deadline = time.monotonic() + 30
    while True:
        request = pb.ListMatchesRequest(phase=pb.PHASE_SEATING, page_size=100)
        listed = first.stub.ListMatches(request)
        found = [m for m in listed.matches if m.match_id == new]
        if found or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    (summary,) = found
    assert summary.rematch_of == old.match_id
    assert all(m.rematch_of == "" for m in listed.matches if m.match_id != new)

    # Strangers are refused each seat: without a previous token, with another match's.
    stranger = ended_by_resignation(first)
    for previous, seat in ((None, None), (None, 0), (stranger.tokens[0], None), (new_token(), 1)):
        code, reason, message = refused(lambda p=previous, s=seat: join(last, new, p, seat=s))
        assert (code, reason) == (Code.PERMISSION_DENIED, "REMATCH_SEAT_RESERVED"), message
        assert old.match_id in message
    # A player is refused another player's seat.
    code, reason, message = refused(lambda: join(first, new, old.tokens[0], seat=2))
    assert (code, reason) == (Code.PERMISSION_DENIED, "REMATCH_SEAT_RESERVED"), message
    assert "seat 0" in message
    assert last.view(new).version == 1, "no refusal wrote anything"

    # Each player takes their own seat (asked for, or not), through either replica; a join
    # sent again with its token is answered alike, and the seats taken are who accepted.
    tokens = [new_token() for _ in range(3)]
    joined = join(first, new, old.tokens[2], token=tokens[2], name="Cy")
    assert joined.seat == 2 and joined.view.rematch_of == old.match_id
    assert join(last, new, old.tokens[2], token=tokens[2], name="Cy").seat == 2
    assert join(last, new, old.tokens[0], seat=0, token=tokens[0], name="Ada").seat == 0
    accepted = [s.taken for s in first.view(new).seats]
    assert accepted == [True, False, True]
    # Once its own seat is taken, a player's old token takes no other.
    code, reason, _ = refused(lambda: join(first, new, old.tokens[0], seat=1))
    assert (code, reason) == (Code.PERMISSION_DENIED, "REMATCH_SEAT_RESERVED")
    last_join = join(first, new, old.tokens[1], token=tokens[1], name="Bo")
    assert last_join.view.phase == pb.PHASE_PLAYING
    rules = last_join.view.rules
    assert (rules.target, rules.clock_initial, rules.blocked) == (7, 120, pb.BLOCKED_AMERICAN)
    # A rematch already asked for answers the match being played.
    assert rematch(last, old.match_id, old.tokens[0]).match_id == new

    # The rematch plays to its end, and is rematched in turn by its own seats' tokens.
    table = Table(new, 3, tokens, made, [last_join])
    for t in (tokens[0], tokens[1]):
        assert first.view(new, t).rematch_of == old.match_id
    play_to_end(replicas.clients, random.Random(5), table)
    chained = rematch(last, new, tokens[0])
    assert chained.match_id == rematch_id(new) != new and not chained.replayed
    assert first.view(chained.match_id).rematch_of == new
    # The first match's tokens hold no seat of the rematch's rematch.
    code, reason, _ = refused(lambda: join(first, chained.match_id, old.tokens[0]))
    assert (code, reason) == (Code.PERMISSION_DENIED, "REMATCH_SEAT_RESERVED")
    assert join(first, chained.match_id, tokens[0]).seat == 0


def test_refusals_name_their_reason_and_write_nothing(replicas: Replicas) -> None:
    client = replicas.clients[0]
    live = seat_everyone(client, 2)
    code, reason, _ = refused(lambda: rematch(client, live.match_id, live.tokens[0]))
    assert (code, reason) == (Code.FAILED_PRECONDITION, "MATCH_NOT_ENDED")
    old = ended_by_resignation(client)
    code, reason, _ = refused(lambda: rematch(client, old.match_id, None))
    assert code == Code.UNAUTHENTICATED
    code, reason, _ = refused(lambda: rematch(client, old.match_id, live.tokens[0]))
    assert (code, reason) == (Code.PERMISSION_DENIED, "NOT_A_SEAT_OF_THIS_MATCH")
    for more in ({"seats": 2}, {"name": "x"}, {"options": rule_options(target=3)}):
        code, reason, message = refused(
            lambda m=more: rematch(client, old.match_id, old.tokens[0], **m)
        )
        assert (code, reason) == (Code.INVALID_ARGUMENT, "REMATCH_WITH_SETTINGS"), message
        assert next(iter(more)) in message
    code, reason, _ = refused(lambda: rematch(client, "not-a-match", old.tokens[0]))
    assert (code, reason) == (Code.INVALID_ARGUMENT, "INVALID_MATCH_ID")
    code, reason, _ = refused(lambda: rematch(client, rematch_id(old.match_id, 7), old.tokens[0]))
    assert (code, reason) == (Code.NOT_FOUND, "MATCH_NOT_FOUND")
    # A previous seat token is for a rematch's seats only.
    seating = client.create(2)
    code, reason, _ = refused(lambda: join(client, seating.match_id, old.tokens[0]))
    assert (code, reason) == (Code.INVALID_ARGUMENT, "NOT_A_REMATCH")
    # An abandoned match is not rematched.
    client.abandon(live.match_id, ORGANISER_TOKEN, "a dispute")
    code, reason, _ = refused(lambda: rematch(client, live.match_id, live.tokens[0]))
    assert (code, reason) == (Code.FAILED_PRECONDITION, "MATCH_ABANDONED")
    # Nothing was created by any refusal.
    for attempt in (1, 2):
        for match in (live.match_id, old.match_id):
            code, _, _ = refused(lambda m=match, a=attempt: client.view(rematch_id(m, a)))
            assert code == Code.NOT_FOUND


def test_a_rematch_abandoned_before_its_start_is_followed_by_the_next(
    replicas: Replicas,
) -> None:
    client = replicas.clients[-1]
    old = ended_by_resignation(client)
    first = rematch(client, old.match_id, old.tokens[0])
    join(client, first.match_id, old.tokens[0])
    # Left seating (the server's seating timeout, here the organiser): proposed again, the
    # next rematch is created, and is the one answered from then on.
    client.abandon(first.match_id, ORGANISER_TOKEN, "nobody came")
    second = rematch(client, old.match_id, old.tokens[1])
    assert second.match_id == rematch_id(old.match_id, 2) and not second.replayed
    assert rematch(client, old.match_id, old.tokens[0]).match_id == second.match_id
    code, reason, _ = refused(lambda: join(client, first.match_id, old.tokens[1]))
    assert code == Code.FAILED_PRECONDITION, reason


def test_proposals_racing_through_every_replica_create_one_rematch(replicas: Replicas) -> None:
    clients = replicas.clients
    old = ended_by_resignation(clients[0], 4)
    barrier = threading.Barrier(8)
    answers: list[pb.CreateMatchResponse | None] = [None] * 8

    def propose(i: int) -> None:
        barrier.wait()
        answers[i] = rematch(clients[i % len(clients)], old.match_id, old.tokens[i % 4])

    threads = [threading.Thread(target=propose, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    got = [a for a in answers if a is not None]
    assert len(got) == 8
    assert {a.match_id for a in got} == {rematch_id(old.match_id)}
    assert sum(not a.replayed for a in got) == 1
    assert clients[-1].view(rematch_id(old.match_id)).version == 1


def test_a_tournament_match_is_not_rematched(replicas: Replicas) -> None:
    stub = replicas.clients[0].stub
    org = bearer(ORGANISER_TOKEN)
    created = stub.CreateTournament(
        pb.CreateTournamentRequest(
            name="cup",
            settings=pb.TournamentSettings(
                format=pb.TOURNAMENT_FORMAT_ROUND_ROBIN, seats=2, preset=pb.PRESET_STANDARD
            ),
        ),
        metadata=org,
    )
    tid = created.tournament_id
    tokens = []
    for name in ("Ada", "Bo"):
        reply = stub.RegisterEntrant(pb.RegisterEntrantRequest(tournament_id=tid, players=[name]))
        tokens.append(reply.player_tokens[0])
    stub.StartTournament(pb.StartTournamentRequest(tournament_id=tid), metadata=org)
    table = table_match_id(tid, 1, 1)
    deadline = time.monotonic() + 60
    while True:
        try:
            if replicas.clients[0].view(table).phase == pb.PHASE_PLAYING:
                break
        except grpc.RpcError as e:
            if e.code() != Code.NOT_FOUND:  # type: ignore[attr-defined]
                raise
        assert time.monotonic() < deadline, "the tournament's table was never seated"
        time.sleep(0.05)
    replicas.clients[0].resign(table, tokens[0])
    code, reason, message = refused(lambda: rematch(replicas.clients[0], table, tokens[1]))
    assert (code, reason) == (Code.PERMISSION_DENIED, "TOURNAMENT_MATCH"), message
