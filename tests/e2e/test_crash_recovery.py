"""A server killed with SIGKILL under load and restarted on the same database: every command
it acknowledged is in the log, every match folds and its chain verifies, and play goes on."""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass

import grpc
import pytest

from bergen.domain.state import ENDED, PLAYING
from bergen.v1 import bergen_pb2 as pb

from .client import Client, Table, play_random_move, play_to_end, seat_everyone
from .servers import ServerFarm
from .truth import check_every_match, store_at

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

PLAYERS = 4
ACKS_BEFORE_KILL = 120


@dataclass(frozen=True)
class Ack:
    """A Play the server answered OK: its command id and the seqs of its events."""

    match_id: str
    command_id: str
    seqs: tuple[int, ...]


def test_a_server_killed_under_load_loses_no_acknowledged_command(
    farm: ServerFarm, database: str
) -> None:
    server = farm.start(database, name="doomed")
    acks: list[Ack] = []
    tables: list[Table] = []
    failures: list[BaseException] = []
    lock = threading.Lock()
    stop = threading.Event()

    def player(i: int) -> None:
        rng = random.Random(i)
        with Client(server.target) as client:
            try:
                while not stop.is_set():
                    table = seat_everyone(client, rng.choice([2, 3, 4]))
                    with lock:
                        tables.append(table)
                    version = table.version
                    while not stop.is_set():
                        move = play_random_move([client], rng, table, version)
                        reply = move.response
                        with lock:
                            acks.append(
                                Ack(
                                    table.match_id,
                                    move.command_id,
                                    tuple(e.seq for e in reply.events),
                                )
                            )
                        version = reply.view.version
                        if reply.view.phase == pb.PHASE_ENDED:
                            break
            except grpc.RpcError as e:
                if not stop.is_set() and e.code() != grpc.StatusCode.UNAVAILABLE:  # type: ignore[attr-defined]
                    failures.append(e)
            except BaseException as e:
                failures.append(e)

    threads = [threading.Thread(target=player, args=(i,)) for i in range(PLAYERS)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 120
    while len(acks) < ACKS_BEFORE_KILL and time.monotonic() < deadline and not failures:
        time.sleep(0.01)
    server.kill()
    stop.set()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a player did not stop with the server"
    assert not failures, failures
    assert len(acks) >= ACKS_BEFORE_KILL, "the load never got going"
    assert server.exit_code == -9

    restarted = farm.start(database, name="restarted")

    states = check_every_match(database)
    with store_at(database) as store:
        streams = {m: store.read_stream(m) for m in {a.match_id for a in acks}}
    for ack in acks:
        stored = streams[ack.match_id]
        tagged = tuple(e.seq for e in stored if e.metadata.command_id == ack.command_id)
        assert tagged == ack.seqs, f"acknowledged {ack} but the log has seqs {tagged}"
    for table in tables:
        assert states[table.match_id].phase in (PLAYING, ENDED)

    # Play goes on on the restarted server, with the tokens issued before the crash.
    live = [t for t in tables if states[t.match_id].phase == PLAYING]
    assert live, "no match was left in play"
    with Client(restarted.target) as client:
        for table in live[:3]:
            table.joins = [pb.JoinMatchResponse(view=client.view(table.match_id, table.tokens[0]))]
            moves = play_to_end([client], random.Random(table.match_id), table)
            assert moves[-1].response.view.phase == pb.PHASE_ENDED
    check_every_match(database)
