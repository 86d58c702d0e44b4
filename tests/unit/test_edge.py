"""The gRPC edge without a network: errors to statuses, the checks before any work, the
observers, and the handler table built from the service descriptor."""

from __future__ import annotations

import logging
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.rpc import error_details_pb2, status_pb2

from bergen.domain import errors
from bergen.server import edge
from bergen.v1 import bergen_pb2 as pb

from .test_errors import STATUS_AND_REASON


class Aborted(Exception):
    """What the fake context's abort raises, as gRPC's does."""


class FakeContext:
    def __init__(self, remaining: float | None = None) -> None:
        self.remaining = remaining
        self.status: grpc.Status | None = None
        self._code: grpc.StatusCode | None = None

    def peer(self) -> str:
        return "ipv4:127.0.0.1:4242"

    def time_remaining(self) -> float | None:
        return self.remaining

    def code(self) -> grpc.StatusCode | None:
        return self._code

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        self._code = code
        raise Aborted(details)

    def abort_with_status(self, status: grpc.Status) -> None:
        self.status = status
        self.abort(status.code, status.details)


def rpc_status_of(status: grpc.Status) -> status_pb2.Status:
    (key, value), *_ = status.trailing_metadata
    assert key == "grpc-status-details-bin"
    return status_pb2.Status.FromString(value)


def details_of(status: grpc.Status) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for detail in rpc_status_of(status).details:
        for kind in (error_details_pb2.ErrorInfo, error_details_pb2.RetryInfo):
            if detail.Is(kind.DESCRIPTOR):
                msg = kind()
                detail.Unpack(msg)
                found[kind.DESCRIPTOR.name] = msg
    return found


@pytest.mark.parametrize("kind", sorted(STATUS_AND_REASON, key=lambda k: k.__name__))
def test_each_error_class_is_sent_with_its_code_and_reason(kind):
    status_name, reason = STATUS_AND_REASON[kind]
    status = edge.status_of(kind("why it failed", match_id="m-1"))
    assert status.code is grpc.StatusCode[status_name]
    assert status.details == "why it failed"
    info = details_of(status)["ErrorInfo"]
    assert (info.reason, info.domain, dict(info.metadata)) == (
        reason,
        "bergen.v1",
        {"match_id": "m-1"},
    )
    assert rpc_status_of(status).code == grpc.StatusCode[status_name].value[0]


def test_a_raise_sites_reason_is_the_one_sent():
    status = edge.status_of(errors.IllegalPlay("no", reason="TILE_DOES_NOT_FIT", seat=1))
    info = details_of(status)["ErrorInfo"]
    assert (status.code, info.reason, dict(info.metadata)) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "TILE_DOES_NOT_FIT",
        {"seat": "1"},
    )


def test_storage_unavailable_comes_with_a_retry_hint():
    status = edge.status_of(errors.StorageUnavailable("the database is down"))
    found = details_of(status)
    assert status.code is grpc.StatusCode.UNAVAILABLE
    assert found["RetryInfo"].retry_delay.seconds == edge.RETRY_AFTER_S > 0
    assert "RetryInfo" not in details_of(edge.status_of(errors.NotFound("no")))


def test_an_error_with_no_status_of_its_own_is_internal_and_says_nothing_more():
    status = edge.status_of(errors.BergenError("secret internals"))
    assert (status.code, status.details) == (grpc.StatusCode.INTERNAL, "internal error")


@pytest.mark.parametrize("text", ["x" * 60_000, "é" * 400, "🀱" * 200])
def test_a_long_message_is_cut_to_512_bytes_on_a_character_boundary(text):
    status = edge.status_of(errors.InvalidArgument(text))
    data = status.details.encode("utf-8")
    assert len(data) <= 512 and status.details.endswith("...")
    assert text.startswith(status.details[:-3])


def test_long_metadata_values_are_cut():
    status = edge.status_of(errors.NotFound("no", match_id="m" * 1000))
    assert len(details_of(status)["ErrorInfo"].metadata["match_id"]) == 64


# --- The interceptors, on handlers made as gRPC makes them.


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, edge.Call]] = []

    def call_started(self, call: edge.Call) -> None:
        self.calls.append(("started", call))

    def call_ended(self, call: edge.Call) -> None:
        self.calls.append(("ended", call))


def through_edge(
    behavior: Any,
    request: bytes,
    context: FakeContext,
    observers: list[Any] | None = None,
    streaming: bool = False,
    max_bytes: int = 1000,
) -> Any:
    """Call `behavior` (which takes a parsed GetMatchRequest) through the edge's chain."""
    make = (
        grpc.unary_stream_rpc_method_handler if streaming else grpc.unary_unary_rpc_method_handler
    )
    handler = make(behavior, pb.GetMatchRequest.FromString, lambda m: m.SerializeToString())
    details = type("Details", (), {"method": "/bergen.v1.BergenService/GetMatch"})()
    chain = edge.interceptors(max_bytes, observers or [Recorder()])
    continuation = lambda _details: handler  # noqa: E731
    for interceptor in reversed(chain):
        continuation = (lambda inner, i=interceptor: lambda d: i.intercept_service(inner, d))(
            continuation
        )
    wrapped = continuation(details)
    assert wrapped.request_deserializer is None  # the edge parses
    fn = wrapped.unary_stream if streaming else wrapped.unary_unary
    out = fn(request, context)
    return list(out) if streaming else out


GOOD = pb.GetMatchRequest(match_id="m").SerializeToString()


def test_a_call_is_observed_from_start_to_end_with_its_code():
    seen = Recorder()
    out = through_edge(lambda req, ctx: pb.GetMatchResponse(), GOOD, FakeContext(), [seen])
    assert out == pb.GetMatchResponse()
    assert [what for what, _ in seen.calls] == ["started", "ended"]
    call = seen.calls[-1][1]
    assert (call.method, call.peer, call.code) == (
        "/bergen.v1.BergenService/GetMatch",
        "ipv4:127.0.0.1:4242",
        grpc.StatusCode.OK,
    )
    assert call.ended_ns >= call.started_ns


def test_a_refusal_is_answered_with_its_status_and_observed_with_its_reason():
    def refuse(req: pb.GetMatchRequest, ctx: Any) -> None:
        raise errors.NotFound(f"no match {req.match_id}", reason="MATCH_NOT_FOUND")

    seen, context = Recorder(), FakeContext()
    with pytest.raises(Aborted):
        through_edge(refuse, GOOD, context, [seen])
    assert context.status is not None and context.status.code is grpc.StatusCode.NOT_FOUND
    call = seen.calls[-1][1]
    assert (call.code, call.reason, call.message) == (
        grpc.StatusCode.NOT_FOUND,
        "MATCH_NOT_FOUND",
        "no match m",
    )


@pytest.mark.parametrize("bug", [KeyError("k"), RecursionError("deep"), TypeError("t")])
def test_any_other_exception_is_a_bug_logged_with_its_traceback_and_answered_internal(bug, caplog):
    def broken(req: Any, ctx: Any) -> None:
        raise bug

    context = FakeContext()
    with caplog.at_level(logging.ERROR, "bergen.server.grpc"), pytest.raises(Aborted):
        through_edge(broken, GOOD, context)
    assert context.status is not None
    assert (context.status.code, context.status.details) == (
        grpc.StatusCode.INTERNAL,
        "internal error",
    )
    assert details_of(context.status)["ErrorInfo"].reason == "INTERNAL"
    assert any(r.exc_info and r.exc_info[1] is bug for r in caplog.records)


def test_a_stream_that_fails_midway_is_answered_with_the_errors_status():
    def stream(req: Any, ctx: Any) -> Any:
        yield pb.GetMatchResponse()
        raise errors.ResourceExhausted("full", reason="TOO_MANY_WATCHERS")

    context = FakeContext()
    with pytest.raises(Aborted):
        through_edge(stream, GOOD, context, streaming=True)
    assert context.status is not None
    assert context.status.code is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert details_of(context.status)["ErrorInfo"].reason == "TOO_MANY_WATCHERS"


def test_a_handler_that_aborts_by_itself_keeps_its_status():
    def aborts(req: Any, ctx: FakeContext) -> None:
        ctx.abort(grpc.StatusCode.NOT_FOUND, "its own")

    seen, context = Recorder(), FakeContext()
    with pytest.raises(Aborted, match="its own"):
        through_edge(aborts, GOOD, context, [seen])
    assert context.status is None and seen.calls[-1][1].code is grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize(
    ("request_bytes", "remaining", "code", "reason"),
    [
        (b"\xff\xff\xff", None, grpc.StatusCode.INVALID_ARGUMENT, "MALFORMED_REQUEST"),
        (b"\x0a" + b"\x80" * 20, None, grpc.StatusCode.INVALID_ARGUMENT, "MALFORMED_REQUEST"),
        (b"\x0a\x01" + b"x" * 2000, None, grpc.StatusCode.RESOURCE_EXHAUSTED, "REQUEST_TOO_LARGE"),
        (GOOD, 0.0, grpc.StatusCode.DEADLINE_EXCEEDED, "DEADLINE_EXCEEDED"),
    ],
)
def test_a_call_that_cannot_start_is_refused_before_any_work(
    request_bytes, remaining, code, reason
):
    def work(req: Any, ctx: Any) -> None:
        raise AssertionError("the handler must not run")

    context = FakeContext(remaining)
    with pytest.raises(Aborted):
        through_edge(work, request_bytes, context)
    assert context.status is not None and context.status.code is code
    assert details_of(context.status)["ErrorInfo"].reason == reason


def test_an_observer_that_fails_changes_nothing(caplog):
    class Broken:
        def call_started(self, call: edge.Call) -> None:
            raise RuntimeError("observer")

        def call_ended(self, call: edge.Call) -> None:
            raise RuntimeError("observer")

    with caplog.at_level(logging.ERROR, "bergen.server.grpc"):
        out = through_edge(lambda r, c: pb.GetMatchResponse(), GOOD, FakeContext(), [Broken()])
    assert out == pb.GetMatchResponse()
    assert sum("call observer" in r.getMessage() for r in caplog.records) == 2


def test_the_call_log_writes_one_line_per_call(caplog):
    def gone(req: Any, ctx: Any) -> None:
        raise errors.NotFound("gone")

    with caplog.at_level(logging.INFO, "bergen.server.calls"):
        through_edge(lambda r, c: pb.GetMatchResponse(), GOOD, FakeContext(), [edge.CallLog()])
        with pytest.raises(Aborted):
            through_edge(gone, GOOD, FakeContext(), [edge.CallLog()])
    lines = [r.getMessage() for r in caplog.records if r.name == "bergen.server.calls"]
    assert len(lines) == 2
    assert lines[0].startswith("/bergen.v1.BergenService/GetMatch OK ")
    assert "ipv4:127.0.0.1:4242" in lines[0]
    assert lines[1].startswith("/bergen.v1.BergenService/GetMatch NOT_FOUND NOT_FOUND ")


def test_the_call_log_writes_a_peers_refusals_for_one_limit_once_a_period(caplog):
    now = [0.0]
    log = edge.CallLog(quiet_s=60.0, clock=lambda: now[0])

    def ended(
        code: grpc.StatusCode, peer: str, reason: str = "TOO_MANY_STREAMS_FOR_CLIENT"
    ) -> None:
        call = edge.Call("/bergen.v1.BergenService/WatchMatch", peer, 0, 1_000_000, code, reason)
        log.call_ended(call)

    with caplog.at_level(logging.INFO, "bergen.server.calls"):
        for port in range(1000, 1100):
            ended(grpc.StatusCode.RESOURCE_EXHAUSTED, f"ipv4:10.0.0.1:{port}")
        ended(grpc.StatusCode.RESOURCE_EXHAUSTED, "ipv4:10.0.0.2:1000")
        ended(grpc.StatusCode.RESOURCE_EXHAUSTED, "ipv4:10.0.0.1:1000", "TOO_MANY_WATCHERS")
        ended(grpc.StatusCode.OK, "ipv4:10.0.0.1:1000", "")
        ended(grpc.StatusCode.OK, "ipv4:10.0.0.1:1000", "")
        now[0] += 60.0
        ended(grpc.StatusCode.RESOURCE_EXHAUSTED, "ipv4:10.0.0.1:2000")
    lines = [r.getMessage() for r in caplog.records if r.name == "bergen.server.calls"]
    assert len(lines) == 6, lines
    assert "10.0.0.1:1000" in lines[0] and "not logged" not in lines[0]
    assert "10.0.0.2" in lines[1] and "TOO_MANY_WATCHERS" in lines[2]
    assert all(" OK " in line for line in lines[3:5])
    assert lines[5].endswith("(99 more like it in the last 60 s not logged)"), lines[5]


# --- The handler table.


def _service(methods: dict[str, tuple[bool, bool]]) -> Any:
    """A service of its own pool, with methods named (client_streaming, server_streaming)."""
    f = descriptor_pb2.FileDescriptorProto(name="t.proto", package="t", syntax="proto3")
    f.message_type.add(name="Req").field.add(
        name="x", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING, label=1
    )
    f.message_type.add(name="Resp")
    service = f.service.add(name="S")
    for name, (client, server) in methods.items():
        service.method.add(
            name=name,
            input_type=".t.Req",
            output_type=".t.Resp",
            client_streaming=client,
            server_streaming=server,
        )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return pool.FindServiceByName("t.S")


def test_every_rpc_of_the_descriptor_is_served_by_the_method_of_its_name():
    service = _service({"Get": (False, False), "Watch": (False, True)})
    resp = message_factory.GetMessageClass(service.methods_by_name["Get"].output_type)

    class Servicer:
        def Get(self, req: Any, ctx: Any) -> Any:
            return resp()

        def Watch(self, req: Any, ctx: Any) -> Any:
            yield resp()

    handler = edge.service_handler(service, Servicer())
    details = type("D", (), {"method": "/t.S/Get"})()
    get = handler.service(details)
    assert get is not None and not get.response_streaming
    details.method = "/t.S/Watch"
    watch = handler.service(details)
    assert watch is not None and watch.response_streaming
    details.method = "/t.S/Other"
    assert handler.service(details) is None


def test_a_servicer_missing_a_method_fails_at_start_up():
    service = _service({"Get": (False, False), "Watch": (False, True)})

    class Servicer:
        def Get(self, req: Any, ctx: Any) -> Any:
            raise AssertionError

    with pytest.raises(TypeError, match=r"serves no Watch of t\.S"):
        edge.service_handler(service, Servicer())


def test_a_response_of_another_type_is_a_bug():
    service = _service({"Get": (False, False)})

    class Servicer:
        def Get(self, req: Any, ctx: Any) -> Any:
            return pb.GetMatchResponse()

    handler = edge.service_handler(service, Servicer())
    get = handler.service(type("D", (), {"method": "/t.S/Get"})())
    assert get is not None and get.unary_unary is not None
    with pytest.raises(TypeError, match="answered GetMatchResponse, not Resp"):
        get.unary_unary(get.request_deserializer(b""), FakeContext())


def test_the_bergen_servicer_serves_every_rpc_of_the_service():
    from bergen.server.servicer import SERVICE_DESCRIPTOR, BergenServicer

    missing = [m.name for m in SERVICE_DESCRIPTOR.methods if not hasattr(BergenServicer, m.name)]
    assert missing == []


def chain_for(handlers: dict[str, Any], observers: list[Any]) -> Any:
    """The edge's chain over `handlers` (method -> handler, looked up per call as gRPC's
    generic handler does): a function from a method to the handler the chain gives."""
    chain = edge.interceptors(1000, observers)

    def through(method: str) -> Any:
        details = type("Details", (), {"method": method})()
        continuation = lambda d: handlers.get(d.method)  # noqa: E731
        for interceptor in reversed(chain):
            continuation = (lambda inner, i=interceptor: lambda d: i.intercept_service(inner, d))(
                continuation
            )
        return continuation(details)

    return through


def test_each_methods_wrapped_handler_is_made_once_and_serves_that_method_only():
    seen = Recorder()
    get = grpc.unary_unary_rpc_method_handler(
        lambda req, ctx: pb.GetMatchResponse(view=pb.MatchView(match_id=req.match_id)),
        pb.GetMatchRequest.FromString,
    )
    replay = grpc.unary_unary_rpc_method_handler(
        lambda req, ctx: pb.GetReplayResponse(complete=True), pb.GetReplayRequest.FromString
    )
    handlers = {"/s/GetMatch": get, "/s/GetReplay": replay}
    through = chain_for(handlers, [seen])
    first = through("/s/GetMatch")
    assert through("/s/GetMatch") is first  # not rebuilt for every call
    other = through("/s/GetReplay")
    assert other is not first
    assert through("/s/Nothing") is None
    for n in range(3):
        out = through("/s/GetMatch").unary_unary(
            pb.GetMatchRequest(match_id=f"m{n}").SerializeToString(), FakeContext()
        )
        assert out.view.match_id == f"m{n}"
    assert through("/s/GetReplay").unary_unary(b"", FakeContext()).complete
    ended = [call for what, call in seen.calls if what == "ended"]
    assert [c.method for c in ended] == ["/s/GetMatch"] * 3 + ["/s/GetReplay"]
    assert [c.request.match_id for c in ended[:3]] == ["m0", "m1", "m2"]


def test_a_handler_replaced_under_a_method_is_wrapped_anew():
    def answering(match_id: str) -> Any:
        return grpc.unary_unary_rpc_method_handler(
            lambda req, ctx: pb.GetMatchResponse(view=pb.MatchView(match_id=match_id)),
            pb.GetMatchRequest.FromString,
        )

    handlers = {"/s/GetMatch": answering("old")}
    through = chain_for(handlers, [Recorder()])
    assert through("/s/GetMatch").unary_unary(GOOD, FakeContext()).view.match_id == "old"
    handlers["/s/GetMatch"] = answering("new")
    assert through("/s/GetMatch").unary_unary(GOOD, FakeContext()).view.match_id == "new"


# --- The same chain on grpc.aio's server (`AioEdge`): the watch streams are async generators.


class FakeAioContext(FakeContext):
    """grpc.aio's context, whose abort is a coroutine."""

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return ()

    async def abort_with_status(self, status: grpc.Status) -> None:  # type: ignore[override]
        self.status = status
        self._code = status.code
        raise Aborted(status.details)


def through_aio_edge(behavior: Any, observers: list[Any]) -> Any:
    """The unary-stream handler the aio chain makes of the async generator `behavior`."""
    import asyncio

    handler = grpc.unary_stream_rpc_method_handler(
        behavior, pb.GetMatchRequest.FromString, lambda m: m.SerializeToString()
    )
    details = type("Details", (), {"method": "/bergen.v1.BergenService/WatchMatch"})()
    chain = edge.aio_interceptors(1000, observers)

    async def resolve() -> Any:
        async def last(_details: Any) -> Any:
            return handler

        continuation = last
        for interceptor in reversed(chain):
            continuation = (lambda inner, i=interceptor: lambda d: i.intercept_service(inner, d))(
                continuation
            )
        return await continuation(details)

    return asyncio.run(resolve())


def test_an_async_stream_is_observed_and_its_error_answered_with_its_status() -> None:
    import asyncio

    async def stream(req: pb.GetMatchRequest, ctx: Any) -> Any:
        yield pb.GetMatchResponse(view=pb.MatchView(match_id=req.match_id))
        raise errors.ResourceExhausted("full", reason="TOO_MANY_WATCHERS")

    seen = Recorder()
    wrapped = through_aio_edge(stream, [seen])
    context = FakeAioContext()

    async def read() -> list[Any]:
        return [m async for m in wrapped.unary_stream(GOOD, context)]

    with pytest.raises(Aborted):
        asyncio.run(read())
    assert context.status is not None
    assert details_of(context.status)["ErrorInfo"].reason == "TOO_MANY_WATCHERS"
    call = seen.calls[-1][1]
    assert (call.code, call.reason, call.streaming) == (
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "TOO_MANY_WATCHERS",
        True,
    )
    assert call.request.match_id == "m"


def test_an_async_stream_whose_client_goes_is_observed_cancelled() -> None:
    import asyncio

    async def stream(req: pb.GetMatchRequest, ctx: Any) -> Any:
        yield pb.GetMatchResponse()
        await asyncio.Event().wait()  # waits for events that never come
        yield pb.GetMatchResponse()

    seen = Recorder()
    wrapped = through_aio_edge(stream, [seen])

    async def read_then_go() -> None:
        async def consume() -> None:
            async for _ in wrapped.unary_stream(GOOD, FakeAioContext()):
                pass

        task = asyncio.create_task(consume())
        await asyncio.sleep(0.05)
        task.cancel()  # as gRPC does when the client goes
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(read_then_go())
    assert [what for what, _ in seen.calls] == ["started", "ended"]
    assert seen.calls[-1][1].code is grpc.StatusCode.CANCELLED
