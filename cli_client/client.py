"""A small client of bergen.v1.BergenService for the command line: one channel (`connect`),
typed calls with the seat token as bearer metadata.

Every call is sent again while it fails with a passing error (the server restarting, the
replica it reached gone, its database failing over), with a growing pause, for up to
`RETRY_S`: each call that changes something carries what makes it safe to send twice (a
play's and a resignation's command id, a join's or a registration's own tokens), so a call
whose answer was lost is answered from the log and applied once. Only `create` has no such
id: a creation sent again after a lost answer may leave an empty match behind, which its
creator token abandons, or the server after its seating timeout.
"""

from __future__ import annotations

import random
import secrets
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol, TypeVar

import grpc

from bergen.api.convert import PRESET, event_in, options_out
from bergen.domain.events import Event
from bergen.domain.tiles import End, Tile
from bergen.v1 import bergen_pb2 as pb
from bergen.v1 import bergen_pb2_grpc as rpc

from .connect import Endpoint, bearer, describe_error, open_channel, reason_of

CALL_TIMEOUT_S = 20.0
CONNECT_TIMEOUT_S = 5.0
RETRY_S = 60.0
"""How long a call failing with a passing error is sent again before the command gives up."""
FIRST_PAUSE_S = 0.1
MAX_PAUSE_S = 2.0
PASSING = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        # "Stream removed" and the like, when the replica a call reached went away.
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.INTERNAL,
    }
)
"""The statuses a call is sent again on: the server, its replica or its database passing
away for a while, not a refusal."""

_T = TypeVar("_T")

_END_OUT = {None: pb.END_UNSPECIFIED, End.LEFT: pb.END_LEFT, End.RIGHT: pb.END_RIGHT}


def passing(error: BaseException) -> bool:
    """Whether `error` is a failed call worth sending again: one of PASSING, or a call the
    server gave up on because others kept changing what it changes (ABORTED, CONTENDED),
    which wrote nothing."""
    if not (isinstance(error, grpc.RpcError) and isinstance(error, grpc.Call)):
        return False
    code = error.code()
    if code in PASSING:
        return True
    return code == grpc.StatusCode.ABORTED and reason_of(error) == "CONTENDED"


def pause_s(attempt: int, rng: random.Random | None = None) -> float:
    """The pause before sending a call again after `attempt` failures: doubling from
    FIRST_PAUSE_S up to MAX_PAUSE_S, each jittered by up to a half (so that the clients of a
    replica that went away do not all come back at once)."""
    base = min(MAX_PAUSE_S, FIRST_PAUSE_S * 2.0 ** max(0, attempt - 1))
    jitter: float = (rng or random).random()
    return base * (0.5 + jitter / 2)


class WatchCall(Protocol):
    """A server-streaming call of WatchMatch."""

    def __iter__(self) -> Iterator[pb.WatchMatchResponse]: ...

    def cancel(self) -> bool: ...


class Unreachable(Exception):
    """The server did not answer."""


class Client:
    """One channel to one server. Calls raise grpc.RpcError once sending them again (see the
    module's docstring) did not help.

    `notice(text)` is told, once per outage, that calls are being sent again, and once they
    are answered again (a person's command prints it; None: nothing is said)."""

    def __init__(
        self,
        target: Endpoint | str,
        retry_s: float = RETRY_S,
        notice: Callable[[str], None] | None = None,
    ) -> None:
        self.target = str(target)
        self.channel = open_channel(target)
        self.stub = rpc.BergenServiceStub(self.channel)  # type: ignore[no-untyped-call]
        self.retry_s = retry_s
        self.notice = notice
        self._outage = threading.Lock()
        self._failing = 0
        """Calls failing now (under `_outage`): the notice is given when the first starts
        and the recovery when the last is answered."""

    def again(self, call: Callable[[], _T], retry_s: float | None = None) -> _T:
        """`call()`, sent again while it fails with a passing error, for up to `retry_s`
        (default: the client's). Raises grpc.RpcError: a refusal at once, a passing error
        once the time is up."""
        limit = self.retry_s if retry_s is None else retry_s
        started: float | None = None
        attempt = 0
        try:
            while True:
                try:
                    return call()
                except grpc.RpcError as e:
                    if not passing(e):
                        raise
                    now = time.monotonic()
                    if started is None:
                        started = now
                        self._failing_now(e, limit)
                    attempt += 1
                    if now - started >= limit:
                        raise
                    time.sleep(min(pause_s(attempt), max(0.0, started + limit - now)))
        finally:
            if started is not None:
                self._answered_again()

    def _failing_now(self, error: grpc.RpcError, limit: float) -> None:
        with self._outage:
            self._failing += 1
            first = self._failing == 1
        if first and self.notice is not None:
            self.notice(
                f"the server at {self.target} does not answer ({describe_error(error)}); "
                f"trying again for up to {limit:g} s"
            )

    def _answered_again(self) -> None:
        with self._outage:
            self._failing -= 1
            last = self._failing == 0
        if last and self.notice is not None:
            self.notice(f"the server at {self.target} answers again")

    def call(
        self,
        method: str,
        request: Any,
        token: str | None = None,
        timeout: float = CALL_TIMEOUT_S,
        retry: bool = True,
    ) -> Any:
        """The unary RPC `method` with `request`, presenting `token`, sent again on a passing
        error unless `retry` is False. Raises grpc.RpcError."""
        fn = getattr(self.stub, method)

        def once() -> Any:
            return fn(request, metadata=bearer(token), timeout=timeout)

        return self.again(once) if retry else once()

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
            raise Unreachable(
                f"the server at {self.target} does not answer within {timeout:g} s"
            ) from None

    def create(
        self,
        seats: int,
        partnerships: bool = False,
        preset: str = "standard",
        name: str = "",
        options: Mapping[str, object] | None = None,
        creator_token: str | None = None,
        rated: bool = False,
    ) -> pb.CreateMatchResponse:
        """Create a match with `preset` and the rule `options` (by name, as `make_rules`
        takes them: the clock's among them); `creator_token` may abandon it while it seats;
        `rated`: its seats are registered players', and its end counts for their ratings.
        Raises grpc.RpcError, InvalidOptions."""
        request = pb.CreateMatchRequest(
            seats=seats,
            partnerships=partnerships,
            preset=PRESET.out(preset),
            name=name,
            options=options_out(options or {}),
            rated=rated,
        )
        if creator_token is not None:
            request.creator_token = creator_token
        reply: pb.CreateMatchResponse = self.call("CreateMatch", request)
        return reply

    def join(
        self,
        match_id: str,
        name: str,
        seat: int | None = None,
        client_seed: str = "",
        player_token: str | None = None,
    ) -> pb.JoinMatchResponse:
        """Take a seat with a token made here, as the registered player of `player_token`
        when given (`name` then empty or the player's); a join whose answer was lost is sent
        again with the same token, which the server answers with the seat the first one
        took. Raises grpc.RpcError."""
        req = pb.JoinMatchRequest(
            match_id=match_id, name=name, client_seed=client_seed, seat_token=new_token()
        )
        if seat is not None:
            req.seat = seat
        if player_token is not None:
            req.player_token = player_token
        reply: pb.JoinMatchResponse = self.call("JoinMatch", req)
        return reply

    def abandon(self, match_id: str, token: str, note: str = "") -> pb.AbandonMatchResponse:
        """Abandon a match with the organiser's token, or its creator's while it seats.
        Raises grpc.RpcError."""
        reply: pb.AbandonMatchResponse = self.call(
            "AbandonMatch", pb.AbandonMatchRequest(match_id=match_id, note=note), token
        )
        return reply

    def resign(self, match_id: str, token: str) -> pb.ResignResponse:
        """Resign the token's seat (a forfeit of its side); sent again with the same command
        id, it is applied once. Raises grpc.RpcError."""
        request = pb.ResignRequest(match_id=match_id, command_id=uuid.uuid4().hex)
        reply: pb.ResignResponse = self.call("Resign", request, token)
        return reply

    def get_match(self, match_id: str, token: str | None = None) -> pb.MatchView:
        reply: pb.GetMatchResponse = self.call(
            "GetMatch", pb.GetMatchRequest(match_id=match_id), token
        )
        return reply.view

    def replay(
        self, match_id: str, token: str | None = None, after_seq: int = 0
    ) -> list[tuple[int, Event]]:
        """The match's events after `after_seq` as the token's seat may see them."""
        reply = self.call(
            "GetReplay", pb.GetReplayRequest(match_id=match_id, after_seq=after_seq), token
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
        reply: pb.PlayResponse = self.call("Play", req, token)
        return reply


def new_token() -> str:
    """A secret made here for the server to seal (a seat's, a player's or a creator's): 256
    random bits."""
    return "bgs_" + secrets.token_urlsafe(32)


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
