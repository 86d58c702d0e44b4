"""A small client of bergen.v1.BergenService for the command line: one channel (`connect`), typed
calls with the seat token as bearer metadata."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator, Mapping
from typing import Protocol

import grpc

from bergen.api.convert import PRESET, event_in, options_out
from bergen.domain.events import Event
from bergen.domain.tiles import End, Tile
from bergen.v1 import bergen_pb2 as pb
from bergen.v1 import bergen_pb2_grpc as rpc

from .connect import Endpoint, bearer, open_channel

CALL_TIMEOUT_S = 20.0
CONNECT_TIMEOUT_S = 5.0
JOIN_ATTEMPTS = 3
"""A join whose answer was lost (deadline, server unavailable) is sent again with the same
token, which the server answers with the seat the first one took."""
_LOST = (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE)

_END_OUT = {None: pb.END_UNSPECIFIED, End.LEFT: pb.END_LEFT, End.RIGHT: pb.END_RIGHT}


class WatchCall(Protocol):
    """A server-streaming call of WatchMatch."""

    def __iter__(self) -> Iterator[pb.WatchMatchResponse]: ...

    def cancel(self) -> bool: ...


class Unreachable(Exception):
    """The server did not answer."""


class Client:
    """One channel to one server. Calls raise grpc.RpcError."""

    def __init__(self, target: Endpoint | str) -> None:
        self.target = str(target)
        self.channel = open_channel(target)
        self.stub = rpc.BergenServiceStub(self.channel)  # type: ignore[no-untyped-call]

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def wait_ready(self, timeout: float = CONNECT_TIMEOUT_S) -> None:
        """Raises Unreachable when no connection is made within `timeout` seconds."""
        try:
            grpc.channel_ready_future(self.channel).result(timeout=timeout)
        except grpc.FutureTimeoutError:
            raise Unreachable(f"no answer from {self.target} within {timeout:g} s") from None

    def create(
        self,
        seats: int,
        partnerships: bool = False,
        preset: str = "standard",
        name: str = "",
        options: Mapping[str, object] | None = None,
    ) -> pb.CreateMatchResponse:
        """Create a match with `preset` and the rule `options` (by name, as `make_rules`
        takes them: the clock's among them). Raises grpc.RpcError, InvalidOptions."""
        reply: pb.CreateMatchResponse = self.stub.CreateMatch(
            pb.CreateMatchRequest(
                seats=seats,
                partnerships=partnerships,
                preset=PRESET.out(preset),
                name=name,
                options=options_out(options or {}),
            ),
            timeout=CALL_TIMEOUT_S,
        )
        return reply

    def join(
        self, match_id: str, name: str, seat: int | None = None, client_seed: str = ""
    ) -> pb.JoinMatchResponse:
        """Take a seat with a token made here; a lost answer is asked for again (see
        JOIN_ATTEMPTS). Raises grpc.RpcError."""
        token = "bgs_" + secrets.token_urlsafe(32)
        req = pb.JoinMatchRequest(
            match_id=match_id, name=name, client_seed=client_seed, seat_token=token
        )
        if seat is not None:
            req.seat = seat
        for attempt in range(JOIN_ATTEMPTS):
            try:
                reply: pb.JoinMatchResponse = self.stub.JoinMatch(req, timeout=CALL_TIMEOUT_S)
                return reply
            except grpc.RpcError as e:
                lost = isinstance(e, grpc.Call) and e.code() in _LOST
                if attempt + 1 == JOIN_ATTEMPTS or not lost:
                    raise
        raise AssertionError("unreachable")

    def get_match(self, match_id: str, token: str | None = None) -> pb.MatchView:
        reply: pb.GetMatchResponse = self.stub.GetMatch(
            pb.GetMatchRequest(match_id=match_id),
            metadata=bearer(token),
            timeout=CALL_TIMEOUT_S,
        )
        return reply.view

    def replay(
        self, match_id: str, token: str | None = None, after_seq: int = 0
    ) -> list[tuple[int, Event]]:
        """The match's events after `after_seq` as the token's seat may see them."""
        reply = self.stub.GetReplay(
            pb.GetReplayRequest(match_id=match_id, after_seq=after_seq),
            metadata=bearer(token),
            timeout=CALL_TIMEOUT_S,
        )
        return [event_in(e) for e in reply.events]

    def watch(self, match_id: str, token: str | None = None, after_seq: int = 0) -> WatchCall:
        """The WatchMatch stream, batched: WatchMatchResponse items (read them with
        `watch_events`); cancel() ends it."""
        call: WatchCall = self.stub.WatchMatch(
            pb.WatchMatchRequest(match_id=match_id, after_seq=after_seq, batched=True),
            metadata=bearer(token),
        )
        return call

    def play(
        self,
        match_id: str,
        token: str,
        tile: Tile,
        end: End | None,
        expected_version: int | None = None,
        command_id: str | None = None,
    ) -> pb.PlayResponse:
        req = pb.PlayRequest(
            match_id=match_id,
            tile=pb.Tile(low=tile.low, high=tile.high),
            end=_END_OUT[end],
            command_id=command_id or uuid.uuid4().hex,
        )
        if expected_version is not None:
            req.expected_version = expected_version
        reply: pb.PlayResponse = self.stub.Play(req, metadata=bearer(token), timeout=CALL_TIMEOUT_S)
        return reply


def watch_events(call: WatchCall) -> Iterator[tuple[int, Event] | pb.MatchView]:
    """The items of a WatchMatch stream: its first view, then (seq, event) pairs, one at a
    time whether the server sent them batched (`events`) or one a message (`event`)."""
    for item in call:
        if item.HasField("view"):
            yield item.view
        elif item.events:
            for e in item.events:
                yield event_in(e)
        else:
            yield event_in(item.event)
