"""A database that goes silent (its packets dropped: a partition, a host lost with its power)
fails the calls that need it within seconds, as UNAVAILABLE with a retry hint, instead of
holding their threads until the kernel gives the connection up (about 15 minutes); the
server serves again once the database answers, and the command sent again is applied once.
So does a database that answers but holds a statement past its timeout (a lock kept)."""

from __future__ import annotations

import random
import time

import grpc
import psycopg
import pytest

from bergen.v1 import bergen_pb2 as pb

from .client import Client, bearer, new_command_id, play_random_move, seat_everyone
from .refusals import refusal
from .servers import ServerFarm
from .silence import relayed, silenced, silencer_or_skip
from .truth import check_every_match, store_at

pytestmark = [pytest.mark.timeout(240), pytest.mark.postgres]

DETECTED_WITHIN_S = 40.0
"""What the server's connection settings allow for a silent database (keepalive probes after
5 s idle, unacknowledged data given up after 10 s), with room for a loaded machine."""


def assert_written_once(url: str, request: pb.PlayRequest, reply: pb.PlayResponse) -> None:
    """The store holds exactly the events of `reply` under the request's command id: the play
    sent twice was written once."""
    with store_at(url) as store:
        tagged = [
            e for e in store.read_stream(request.match_id)
            if e.metadata.command_id == request.command_id
        ]  # fmt: skip
    assert [e.seq for e in tagged] == [e.seq for e in reply.events], tagged


def test_a_silent_database_fails_calls_within_seconds_and_the_server_serves_once_it_is_back(
    farm: ServerFarm, pg_database: str
) -> None:
    silencer_or_skip()
    rng = random.Random(3)
    with relayed(pg_database) as (url, relay):
        server = farm.start(url)
        with Client(server.target) as client:
            table = seat_everyone(client, 2)
            for _ in range(3):
                play_random_move([client], rng, table)
            public = client.view(table.match_id)
            token = table.tokens[public.turn]
            choice = client.view(table.match_id, token).legal_plays[0]
            request = pb.PlayRequest(
                match_id=table.match_id,
                tile=choice.tile,
                end=choice.end,
                command_id=new_command_id(),
            )
            with silenced(relay.port):
                for call in ("Play", "GetMatch"):
                    began = time.monotonic()
                    with pytest.raises(grpc.RpcError) as raised:
                        if call == "Play":
                            client.stub.Play(request, metadata=bearer(token), timeout=120)
                        else:
                            client.stub.GetMatch(
                                pb.GetMatchRequest(match_id=table.match_id), timeout=120
                            )
                    took = time.monotonic() - began
                    assert raised.value.code() == grpc.StatusCode.UNAVAILABLE, (
                        call, raised.value, server.log_tail()
                    )  # fmt: skip
                    assert refusal(raised.value, call).reason == "STORAGE_UNAVAILABLE"
                    assert took < DETECTED_WITHIN_S, f"{call} took {took:.1f} s to fail"
            # Back: the same server serves again, its broken connections replaced, and the
            # play sent again is applied once.
            deadline = time.monotonic() + 30
            while True:
                try:
                    reply = client.stub.Play(request, metadata=bearer(token), timeout=30)
                    break
                except grpc.RpcError as e:
                    if e.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
            assert reply.view.version > public.version
            play_random_move([client], rng, table)
    assert_written_once(pg_database, request, reply)
    check_every_match(pg_database)


def test_a_play_held_past_the_statement_timeout_fails_unapplied_and_goes_through_once_sent_again(
    farm: ServerFarm, pg_database: str
) -> None:
    # The server's default is 30 s (LIVENESS); the URL's own `options` win, here 2 s.
    server = farm.start(f"{pg_database}?options=-c%20statement_timeout%3D2000")
    with Client(server.target) as client:
        table = seat_everyone(client, 2)
        public = client.view(table.match_id)
        token = table.tokens[public.turn]
        choice = client.view(table.match_id, token).legal_plays[0]
        request = pb.PlayRequest(
            match_id=table.match_id, tile=choice.tile, end=choice.end, command_id=new_command_id()
        )
        with psycopg.connect(pg_database) as holder:
            holder.execute("LOCK TABLE events IN EXCLUSIVE MODE")  # appends wait; reads do not
            began = time.monotonic()
            with pytest.raises(grpc.RpcError) as raised:
                client.stub.Play(request, metadata=bearer(token), timeout=60)
            took = time.monotonic() - began
            assert raised.value.code() == grpc.StatusCode.UNAVAILABLE, raised.value
            said = refusal(raised.value)
            assert said.reason == "STORAGE_UNAVAILABLE"
            assert "in time" in (raised.value.details() or "")
            assert took < 20, f"the play took {took:.1f} s to fail"
            assert client.view(table.match_id).version == public.version  # not applied
            holder.rollback()
        reply = client.stub.Play(request, metadata=bearer(token), timeout=30)
        assert not reply.replayed
        assert reply.view.version > public.version
    assert_written_once(pg_database, request, reply)
