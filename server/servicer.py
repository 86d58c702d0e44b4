"""The gRPC edge: parse and check messages, call the application service, translate back.

Every handler receives raw bytes and parses them itself, so a request that is not a valid
message is answered INVALID_ARGUMENT rather than INTERNAL. Errors are mapped to status codes
in one place (`_status_of`).
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import grpc
from google.protobuf.message import DecodeError, Message

from bergen.api import convert
from bergen.api.chain import canonical_json, metadata_json
from bergen.api.signing import ALGORITHM
from bergen.domain.errors import (
    BergenError,
    ConcurrencyConflict,
    CorruptRecord,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    RuleViolation,
    Unauthenticated,
)
from bergen.domain.events import Event
from bergen.domain.record import RECORD_FORMAT
from bergen.domain.rules import RULES_VERSION
from bergen.v1 import bergen_pb2 as pb

from . import auth
from .app import Application
from .identity import Caller

log = logging.getLogger("bergen.server.grpc")

SERVICE = "bergen.v1.BergenService"
_MATCH_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
M = TypeVar("M", bound=Message)


class AtCapacity(BergenError):
    """A limit of this server is reached (open watch streams); nothing was done."""


class DeadlineExceeded(BergenError):
    """The caller's deadline passed before the work was done."""


def _status_of(error: BergenError) -> grpc.StatusCode:
    if isinstance(error, CorruptRecord):
        return grpc.StatusCode.DATA_LOSS
    if isinstance(error, InvalidArgument):
        return grpc.StatusCode.INVALID_ARGUMENT
    if isinstance(error, NotFound):
        return grpc.StatusCode.NOT_FOUND
    if isinstance(error, Unauthenticated):
        return grpc.StatusCode.UNAUTHENTICATED
    if isinstance(error, PermissionDenied):
        return grpc.StatusCode.PERMISSION_DENIED
    if isinstance(error, RuleViolation):
        return grpc.StatusCode.FAILED_PRECONDITION
    if isinstance(error, ConcurrencyConflict):
        return grpc.StatusCode.ABORTED
    if isinstance(error, DeadlineExceeded):
        return grpc.StatusCode.DEADLINE_EXCEEDED
    if isinstance(error, AtCapacity):
        return grpc.StatusCode.RESOURCE_EXHAUSTED
    return grpc.StatusCode.INTERNAL


def _parse(kind: type[M], data: bytes) -> M:
    msg = kind()
    try:
        msg.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as e:
        raise InvalidArgument(f"the request is not a valid {kind.DESCRIPTOR.full_name}") from e
    return msg


def _match_id(value: str) -> str:
    if not value:
        raise InvalidArgument("match_id is required")
    if not _MATCH_ID.match(value):
        raise InvalidArgument("match_id must be a match id as CreateMatch returns it")
    return value


def _caller(context: grpc.ServicerContext) -> Caller:
    return Caller(auth.bearer_token(context.invocation_metadata()))


def _deadline(context: grpc.ServicerContext) -> Callable[[], None]:
    def check() -> None:
        remaining = context.time_remaining()
        if remaining is not None and remaining <= 0:
            raise DeadlineExceeded("the deadline passed before the command was applied")

    return check


def _events(pairs: Any) -> list[pb.Event]:
    return [convert.event_out(seq, e) for seq, e in pairs]


class BergenServicer:
    """One method per RPC: request bytes in, response message out."""

    def __init__(self, app: Application, max_watchers: int) -> None:
        self._commands = app.commands
        self._queries = app.queries
        self._max_watchers = max_watchers
        self._watch_slots = threading.BoundedSemaphore(max_watchers)

    def CreateMatch(self, data: bytes, context: grpc.ServicerContext) -> pb.CreateMatchResponse:
        req = _parse(pb.CreateMatchRequest, data)
        options = convert.options_in(req.options)
        preset = convert.preset_in(req.preset) or (None if options else "standard")
        state = self._commands.create_match(
            _caller(context),
            req.seats,
            req.partnerships,
            preset,
            options,
            req.name,
            _deadline(context),
        )
        return pb.CreateMatchResponse(
            match_id=state.match_id,
            commitment=state.commitment,
            rules=convert.rules_out(state.rules),
        )

    def JoinMatch(self, data: bytes, context: grpc.ServicerContext) -> pb.JoinMatchResponse:
        req = _parse(pb.JoinMatchRequest, data)
        seat, token, view = self._commands.join_match(
            _match_id(req.match_id),
            req.seat if req.HasField("seat") else None,
            req.name,
            req.client_seed,
            _deadline(context),
        )
        return pb.JoinMatchResponse(seat=seat, seat_token=token, view=convert.view_out(view))

    def GetMatch(self, data: bytes, context: grpc.ServicerContext) -> pb.GetMatchResponse:
        req = _parse(pb.GetMatchRequest, data)
        view = self._queries.get_view(_caller(context), _match_id(req.match_id))
        return pb.GetMatchResponse(view=convert.view_out(view))

    def Play(self, data: bytes, context: grpc.ServicerContext) -> pb.PlayResponse:
        req = _parse(pb.PlayRequest, data)
        match_id = _match_id(req.match_id)
        if not req.HasField("tile"):
            raise InvalidArgument("a play needs a tile")
        out = self._commands.play(
            _caller(context),
            match_id,
            convert.tile_in(req.tile),
            convert.end_in(req.end),
            req.expected_version if req.HasField("expected_version") else None,
            req.command_id or None,
            _deadline(context),
        )
        return pb.PlayResponse(
            events=_events(out.events), view=convert.view_out(out.view), replayed=out.replayed
        )

    def Resign(self, data: bytes, context: grpc.ServicerContext) -> pb.ResignResponse:
        req = _parse(pb.ResignRequest, data)
        out = self._commands.resign(
            _caller(context), _match_id(req.match_id), req.command_id or None, _deadline(context)
        )
        return pb.ResignResponse(events=_events(out.events), view=convert.view_out(out.view))

    def WatchMatch(
        self, data: bytes, context: grpc.ServicerContext
    ) -> Iterator[pb.WatchMatchResponse | bytes]:
        req = _parse(pb.WatchMatchRequest, data)
        match_id = _match_id(req.match_id)
        # Each open stream holds a thread: past the limit a stream is refused, so that the
        # threads commands need are never all taken by watchers.
        if not self._watch_slots.acquire(blocking=False):
            raise AtCapacity(
                f"this server already serves {self._max_watchers} watch streams; "
                "try again later, or another replica"
            )
        try:
            for item in self._queries.watch(
                _caller(context), match_id, req.after_seq, context.is_active
            ):
                if isinstance(item, tuple):
                    yield _watched_event(match_id, *item)
                else:
                    yield pb.WatchMatchResponse(view=convert.view_out(item))
        finally:
            self._watch_slots.release()

    def GetReplay(self, data: bytes, context: grpc.ServicerContext) -> pb.GetReplayResponse:
        req = _parse(pb.GetReplayRequest, data)
        events, complete = self._queries.replay(
            _caller(context), _match_id(req.match_id), req.after_seq
        )
        return pb.GetReplayResponse(events=_events(events), complete=complete)

    def GetRecord(self, data: bytes, context: grpc.ServicerContext) -> pb.GetRecordResponse:
        req = _parse(pb.GetRecordRequest, data)
        record = self._queries.record(_caller(context), _match_id(req.match_id))
        return pb.GetRecordResponse(record_json=json.dumps(record, ensure_ascii=False))

    def GetServerInfo(
        self, data: bytes, context: grpc.ServicerContext
    ) -> pb.GetServerInfoResponse:
        _parse(pb.GetServerInfoRequest, data)
        return pb.GetServerInfoResponse(
            signature_algorithm=ALGORITHM if self._queries.public_key else "",
            public_key=self._queries.public_key,
            record_format=RECORD_FORMAT,
            rules_version=RULES_VERSION,
        )

    def GetAuditLog(self, data: bytes, context: grpc.ServicerContext) -> pb.GetAuditLogResponse:
        req = _parse(pb.GetAuditLogRequest, data)
        match_id = _match_id(req.match_id)
        stored = self._queries.audit_log(_caller(context), match_id)
        return pb.GetAuditLogResponse(
            match_id=match_id,
            events=[
                pb.AuditEvent(
                    seq=e.seq,
                    type=e.type,
                    schema_version=e.schema_version,
                    payload_json=canonical_json(e.payload, "payload").decode(),
                    metadata_json=metadata_json(e.metadata).decode(),
                    prev_hash=e.prev_hash.hex(),
                    salt=e.salt.hex(),
                    hash=e.hash.hex(),
                    recorded_at=convert.timestamp_out(e.recorded_at),
                )
                for e in stored
            ],
        )

    def ListMatches(self, data: bytes, context: grpc.ServicerContext) -> pb.ListMatchesResponse:
        req = _parse(pb.ListMatchesRequest, data)
        if req.phase not in (pb.PHASE_UNSPECIFIED, *convert.PHASE_NAMES):
            raise InvalidArgument(f"unknown phase {req.phase}")
        phase = convert.PHASE_NAMES.get(req.phase)
        if len(req.player_name) > 64:
            raise InvalidArgument("player_name is at most 64 characters")
        rows, token = self._queries.list_matches(
            phase, req.player_name, req.page_size, req.page_token
        )
        return pb.ListMatchesResponse(
            matches=[
                pb.MatchSummary(
                    match_id=r.match_id,
                    name=r.name,
                    phase=convert.PHASES[r.phase],
                    seat_count=r.seats,
                    partnerships=r.partnerships,
                    preset=convert.PRESET.out(r.preset),
                    players=r.players,
                    scores=r.scores,
                    version=r.version,
                )
                for r in rows
            ],
            next_page_token=token,
        )

    def AbandonMatch(self, data: bytes, context: grpc.ServicerContext) -> pb.AbandonMatchResponse:
        req = _parse(pb.AbandonMatchRequest, data)
        events = self._commands.abandon(
            _caller(context), _match_id(req.match_id), req.note, _deadline(context)
        )
        return pb.AbandonMatchResponse(events=_events(events))


def _unary(
    name: str, fn: Callable[[bytes, grpc.ServicerContext], Message]
) -> grpc.RpcMethodHandler[Any, Any]:
    def handle(data: bytes, context: grpc.ServicerContext) -> Message:
        try:
            return fn(data, context)
        except BergenError as e:
            _abort(context, name, e)
        except Exception:
            log.exception("%s failed", name)
            context.abort(grpc.StatusCode.INTERNAL, "internal error")
        raise AssertionError("unreachable")

    return grpc.unary_unary_rpc_method_handler(
        handle, request_deserializer=None, response_serializer=_serialize
    )


def _stream(
    name: str, fn: Callable[[bytes, grpc.ServicerContext], Iterator[Message | bytes]]
) -> grpc.RpcMethodHandler[Any, Any]:
    def handle(data: bytes, context: grpc.ServicerContext) -> Iterator[Message | bytes]:
        try:
            yield from fn(data, context)
        except BergenError as e:
            _abort(context, name, e)
        except Exception:
            log.exception("%s failed", name)
            context.abort(grpc.StatusCode.INTERNAL, "internal error")

    return grpc.unary_stream_rpc_method_handler(
        handle, request_deserializer=None, response_serializer=_serialize
    )


def _serialize(msg: Message | bytes) -> bytes:
    return msg if isinstance(msg, bytes) else msg.SerializeToString()


_WATCHED: OrderedDict[tuple[str, int, Event], bytes] = OrderedDict()
_WATCHED_LOCK = threading.Lock()
_WATCHED_SIZE = 4096


def _watched_event(match_id: str, seq: int, event: Event) -> bytes:
    """The serialized stream message of an event as shown to a watcher. Every watcher shown
    the same event (all spectators, say) shares one translation: a move watched by a
    hundred clients is converted once, not a hundred times."""
    key = (match_id, seq, event)
    with _WATCHED_LOCK:
        cached = _WATCHED.get(key)
    if cached is not None:
        return cached
    data = pb.WatchMatchResponse(event=convert.event_out(seq, event)).SerializeToString()
    with _WATCHED_LOCK:
        _WATCHED[key] = data
        if len(_WATCHED) > _WATCHED_SIZE:
            _WATCHED.popitem(last=False)
    return data


def _abort(context: grpc.ServicerContext, name: str, error: BergenError) -> None:
    code = _status_of(error)
    if code in (grpc.StatusCode.INTERNAL, grpc.StatusCode.DATA_LOSS):
        log.error("%s: %s", name, error)
    else:
        log.info("%s refused (%s): %s", name, code.name, error)
    context.abort(code, str(error))


def generic_handler(app: Application, max_watchers: int) -> grpc.GenericRpcHandler:
    s = BergenServicer(app, max_watchers)
    handlers = {
        "CreateMatch": _unary("CreateMatch", s.CreateMatch),
        "JoinMatch": _unary("JoinMatch", s.JoinMatch),
        "GetMatch": _unary("GetMatch", s.GetMatch),
        "Play": _unary("Play", s.Play),
        "Resign": _unary("Resign", s.Resign),
        "WatchMatch": _stream("WatchMatch", s.WatchMatch),
        "GetReplay": _unary("GetReplay", s.GetReplay),
        "GetRecord": _unary("GetRecord", s.GetRecord),
        "ListMatches": _unary("ListMatches", s.ListMatches),
        "AbandonMatch": _unary("AbandonMatch", s.AbandonMatch),
        "GetServerInfo": _unary("GetServerInfo", s.GetServerInfo),
        "GetAuditLog": _unary("GetAuditLog", s.GetAuditLog),
    }
    return grpc.method_handlers_generic_handler(SERVICE, handlers)
