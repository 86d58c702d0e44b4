"""Commands over the wire: idempotent command ids, expected versions, concurrent joins, and
the match listing."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import grpc
import pytest

from bergen.domain.events import Dealt, SeatTaken
from bergen.v1 import bergen_pb2 as pb

from .client import Client, Table, bearer, new_command_id, seat_everyone
from .servers import ServerFarm, ServerProcess
from .truth import check_stream, decoded, store_at

pytestmark = pytest.mark.timeout(120)

Code = grpc.StatusCode


@pytest.fixture(scope="module")
def server(module_farm: ServerFarm, module_sqlite_url: str) -> ServerProcess:
    return module_farm.start(module_sqlite_url)


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Iterator[Client]:
    with Client(server.target) as c:
        yield c


def _turn(client: Client, table: Table) -> tuple[int, str, pb.MatchView]:
    seat = client.view(table.match_id).turn
    token = table.tokens[seat]
    return seat, token, client.view(table.match_id, token)


def _code(call: object, *args: object, **kw: object) -> Code:
    with pytest.raises(grpc.RpcError) as info:
        call(*args, **kw)  # type: ignore[operator]
    code: Code = info.value.code()  # type: ignore[attr-defined]
    return code


def test_a_command_id_sent_again_is_answered_alike_and_writes_nothing(client: Client) -> None:
    table = seat_everyone(client, 3)
    _, token, mine = _turn(client, table)
    choice = mine.legal_plays[0]
    command_id = new_command_id()
    first = client.play(table.match_id, choice.tile, choice.end, token, command_id=command_id)
    version = first.view.version
    again = client.play(table.match_id, choice.tile, choice.end, token, command_id=command_id)
    assert again.replayed and not first.replayed
    assert list(again.events) == list(first.events)
    assert again.view == first.view
    assert client.view(table.match_id).version == version, "a replay wrote something"


def test_a_command_id_reused_for_another_command_is_invalid_and_writes_nothing(
    client: Client,
) -> None:
    table = seat_everyone(client, 2)
    seat, token, mine = _turn(client, table)
    choice = mine.legal_plays[0]
    command_id = new_command_id()
    client.play(table.match_id, choice.tile, choice.end, token, command_id=command_id)
    version = client.view(table.match_id).version
    other_seat, other_token, other = _turn(client, table)
    assert other_seat != seat
    second = other.legal_plays[0]
    assert (
        _code(
            client.play, table.match_id, second.tile, second.end, other_token, command_id=command_id
        )
        == Code.INVALID_ARGUMENT
    )
    assert client.view(table.match_id).version == version
    too_long = "c" * 101
    assert (
        _code(
            client.play, table.match_id, second.tile, second.end, other_token, command_id=too_long
        )
        == Code.INVALID_ARGUMENT
    )


def test_a_resignation_sent_twice_with_its_command_id_is_answered_alike(client: Client) -> None:
    table = seat_everyone(client, 2)
    command_id = new_command_id()
    first = client.resign(table.match_id, table.tokens[1], command_id)
    again = client.resign(table.match_id, table.tokens[1], command_id)
    assert first.view.phase == pb.PHASE_ENDED
    assert list(again.events) == list(first.events) and again.view == first.view
    # Without its command id, resigning an ended match is refused.
    assert _code(client.resign, table.match_id, table.tokens[1]) == Code.FAILED_PRECONDITION


def test_a_play_at_a_stale_expected_version_is_aborted_and_at_the_current_one_applied(
    client: Client,
) -> None:
    table = seat_everyone(client, 2)
    _, token, mine = _turn(client, table)
    choice = mine.legal_plays[0]
    for stale in (mine.version - 1, mine.version + 1, 0, 2**64 - 1):
        code = _code(
            client.play, table.match_id, choice.tile, choice.end, token, expected_version=stale
        )
        assert code == Code.ABORTED
    reply = client.play(
        table.match_id, choice.tile, choice.end, token, expected_version=mine.version
    )
    assert reply.events[0].seq == mine.version + 1


def test_many_clients_joining_at_once_take_each_seat_once_and_the_hand_is_dealt_once(
    server: ServerProcess,
) -> None:
    threads_n = 12
    with Client(server.target) as c:
        match_id = c.create(4).match_id
    barrier = threading.Barrier(threads_n)
    answers: list[tuple[Code, int | None]] = []
    lock = threading.Lock()

    def join(i: int) -> None:
        with Client(server.target) as mine:
            barrier.wait()
            try:
                reply = mine.join(match_id, f"eager {i}")
                result: tuple[Code, int | None] = (Code.OK, reply.seat)
            except grpc.RpcError as e:
                result = (e.code(), None)  # type: ignore[attr-defined]
            with lock:
                answers.append(result)

    threads = [threading.Thread(target=join, args=(i,)) for i in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), f"joins unanswered: {answers}"
    seats = sorted(s for code, s in answers if code == Code.OK)
    assert seats == [0, 1, 2, 3], answers
    assert {code for code, _ in answers} <= {Code.OK, Code.FAILED_PRECONDITION, Code.ABORTED}
    with store_at(server.database) as store:
        stored = store.read_stream(match_id)
        check_stream(store, match_id, stored)
    events = decoded(stored)
    assert sum(isinstance(e, SeatTaken) for e in events) == 4
    assert sum(isinstance(e, Dealt) and e.hand == 1 and e.attempt == 1 for e in events) == 1


def test_the_listing_pages_through_every_match_newest_first_and_filters(
    server: ServerProcess,
) -> None:
    with Client(server.target) as c:
        name = f"lister-{new_command_id()[:8]}"
        ids = []
        for _ in range(5):
            created = c.create(2)
            c.join(created.match_id, name)
            ids.append(created.match_id)
        ended = seat_everyone(c, 2)
        c.resign(ended.match_id, ended.tokens[0])

        def listing(**kw: object) -> list[pb.MatchSummary]:
            got: list[pb.MatchSummary] = []
            token = ""
            for _ in range(100):
                page = c.stub.ListMatches(
                    pb.ListMatchesRequest(page_size=2, page_token=token, **kw),
                    timeout=10,  # type: ignore[arg-type]
                )
                assert len(page.matches) <= 2
                got.extend(page.matches)
                token = page.next_page_token
                if not token:
                    return got
            raise AssertionError("the listing never ended")

        mine = listing(player_name=name)
        assert [m.match_id for m in mine] == ids[::-1]
        assert all(m.phase == pb.PHASE_SEATING and m.players[0] == name for m in mine)
        everything = [m.match_id for m in listing()]
        assert len(everything) == len(set(everything))
        assert set(ids) | {ended.match_id} <= set(everything)
        finished = [m.match_id for m in listing(phase=pb.PHASE_ENDED)]
        assert ended.match_id in finished and not set(ids) & set(finished)


@pytest.mark.postgres
def test_a_match_created_on_one_replica_is_listed_and_playable_on_the_other(
    farm: ServerFarm, pg_database: str
) -> None:
    a, b = farm.start(pg_database, name="a"), farm.start(pg_database, name="b")
    with Client(a.target) as on_a, Client(b.target) as on_b:
        table = seat_everyone(on_a, 2, name="cross")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            listed = on_b.stub.ListMatches(pb.ListMatchesRequest(page_size=100), timeout=10)
            if any(m.match_id == table.match_id for m in listed.matches):
                break
            time.sleep(0.05)
        else:
            raise AssertionError("replica b never listed the match made on replica a")
        _, token, mine = _turn(on_b, table)
        choice = mine.legal_plays[0]
        reply = on_b.stub.Play(
            pb.PlayRequest(match_id=table.match_id, tile=choice.tile, end=choice.end),
            metadata=bearer(token),
        )
        assert on_a.view(table.match_id).version >= reply.view.version
