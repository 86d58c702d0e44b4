"""The gRPC edge: what every call shares, as one chain of server interceptors.

`interceptors(...)` gives the chain `create_server` installs, outermost first:

1. `StatusInterceptor`: times the call, tells the observers (`CallObserver`) when it starts
   and ends, and turns an exception into a status. A `BergenError` carries its own status
   name, reason and metadata: the status has that code, the error's message (cut to
   `MAX_STATUS_MESSAGE_BYTES`) and a `google.rpc.ErrorInfo` detail (reason, `DOMAIN`,
   metadata), with a `google.rpc.RetryInfo` hint when the code is UNAVAILABLE or the error
   gives its own (`RETRY_AFTER_KEY`, as a client past a limit is told). Any other
   exception is a bug: logged with its traceback, answered INTERNAL "internal error".
2. `RequestInterceptor`: before any work, refuses a call whose deadline has passed
   (DEADLINE_EXCEEDED) or whose request is larger than the server takes
   (RESOURCE_EXHAUSTED), and parses the request itself, so that bytes that are not the
   message are INVALID_ARGUMENT (gRPC would answer a failed parse with INTERNAL).

On the server's `grpc.aio` server the same two run as `AioEdge`s (`aio_interceptors`): they
wrap plain functions (run in the server's thread pool), coroutines and async generators (on
its event loop: the watch streams) alike.

`service_handler(descriptor, servicer)` builds the handler table of a service from its
descriptor: every RPC the .proto declares is served by the servicer's method of the same
name, unary or server-streaming as declared, so a new RPC needs no second registration.

Observers are the hook for metrics and tracing: an object with `call_started(call)` and
`call_ended(call)` (see `CallObserver`), given to `interceptors(observers=...)`. The log line
of each call (`CallLog`) is one.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

import grpc
from google.protobuf import any_pb2, duration_pb2, message_factory
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import DecodeError, Message
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from bergen.domain.errors import BergenError, DeadlineExceeded, InvalidArgument, ResourceExhausted

log = logging.getLogger("bergen.server.grpc")

DOMAIN = "bergen.v1"
"""The `domain` of every ErrorInfo this server sends: its reasons are unique within it."""
MAX_STATUS_MESSAGE_BYTES = 512
"""A status message is cut to this many bytes (UTF-8), whatever raised it."""
MAX_METADATA_VALUE_CHARS = 64
RETRY_AFTER_S = 1
"""The retry hint sent with UNAVAILABLE."""
RETRY_AFTER_KEY = "retry_after_ms"
"""An error's metadata key for its own retry hint, in milliseconds (a client past one of its
limits is told when it may try again): sent as a RetryInfo, whatever the status."""
INTERNAL_MESSAGE = "internal error"
REFUSAL_LOG_QUIET_S = 60.0
"""A peer's refusals for one limit are logged once this often (see `CallLog`)."""

Behavior = Callable[..., Any]
if TYPE_CHECKING:
    # Generic in the type stubs only.
    Handler = grpc.RpcMethodHandler[Any, Any]
    AioContext = grpc.aio.ServicerContext[Any, Any]
AnyContext = Any
"""A call's context: grpc's threaded server's, or grpc.aio's (its own, or the one it gives a
plain function)."""


@dataclass
class Call:
    """One call as the observers see it. `code` (and `reason`, `message` on an error) are set
    before `call_ended`; `notes` is for observers to keep their own state (a span, say).
    `request` is the parsed request once the edge has parsed it (None before, or when it did
    not parse); `response` the unary answer, when there was one. Both are what a client
    sent or is sent: an observer copies from them only the fields it names."""

    method: str
    peer: str
    started_ns: int
    ended_ns: int = 0
    code: grpc.StatusCode = grpc.StatusCode.OK
    reason: str = ""
    message: str = ""
    notes: dict[str, Any] = field(default_factory=dict)
    streaming: bool = False
    request: Any = None
    response: Any = None

    @property
    def duration_ms(self) -> float:
        return (self.ended_ns - self.started_ns) / 1e6

    @property
    def service(self) -> str:
        """The service part of `method` (`bergen.v1.BergenService`)."""
        return self.method.rpartition("/")[0].lstrip("/")

    @property
    def rpc(self) -> str:
        """The RPC's own name (`Play`)."""
        return self.method.rpartition("/")[2]

    def named(self) -> dict[str, str | int]:
        """What the call names that a log line or a span may carry: the match or tournament
        id its request gives (cut to `MAX_NAMED_CHARS`) and the seat its request or answer
        gives. Never a token, a tile or a name."""
        out: dict[str, str | int] = {}
        request = self.request
        if isinstance(request, Message):
            fields = request.DESCRIPTOR.fields_by_name
            for key in ("match_id", "tournament_id"):
                if key in fields:
                    value = getattr(request, key)
                    if value:
                        out[key] = value[:MAX_NAMED_CHARS]
            if "seat" in fields and request.HasField("seat"):
                out["seat"] = getattr(request, "seat")  # noqa: B009 (no static type)
        response = self.response
        if "seat" not in out and isinstance(response, Message):
            fields = response.DESCRIPTOR.fields_by_name
            if "seat" in fields and not fields["seat"].message_type:
                out["seat"] = getattr(response, "seat")  # noqa: B009 (no static type)
            elif "view" in fields and response.HasField("view"):
                view = getattr(response, "view")  # noqa: B009 (no static type)
                if "viewer_seat" in view.DESCRIPTOR.fields_by_name and view.HasField("viewer_seat"):
                    out["seat"] = view.viewer_seat
        return out


MAX_NAMED_CHARS = 64
"""A match or tournament id is logged cut to this many characters: a client may send any."""

_current = threading.local()
"""The call the serving thread is in, for the edge's parser to note its request on."""


class CallObserver(Protocol):
    """Told of every call, in the thread serving it: `call_started` before any work,
    `call_ended` once its status is known (for a stream, when the stream ends). An observer
    that raises is logged and never changes the call's outcome."""

    def call_started(self, call: Call) -> None: ...

    def call_ended(self, call: Call) -> None: ...


class CallLog:
    """One log line per call: method, status (and reason), duration, peer. Bugs and lost
    data are logged at ERROR, the rest at INFO.

    A refusal for a limit (RESOURCE_EXHAUSTED) said again and again by one peer is logged
    once a `quiet_s` period, with how many like it were not: a client hammering a limit
    cannot make the server spend its time writing about it, nor flood the log. At most
    `max_quiet` peers and reasons are remembered (the oldest forgotten first)."""

    def __init__(
        self,
        logger: logging.Logger | None = None,
        quiet_s: float = REFUSAL_LOG_QUIET_S,
        max_quiet: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = logger or logging.getLogger("bergen.server.calls")
        self._quiet_s = quiet_s
        self._max_quiet = max_quiet
        self._clock = clock
        # (method, reason, peer address) -> (when last logged, refusals not logged since)
        self._quiet: OrderedDict[tuple[str, str, str], tuple[float, int]] = OrderedDict()
        self._lock = threading.Lock()

    def call_started(self, call: Call) -> None:
        pass

    def call_ended(self, call: Call) -> None:
        level = logging.ERROR if call.code in _SERIOUS else logging.INFO
        if not self._log.isEnabledFor(level):
            return
        if call.code is grpc.StatusCode.OK:
            self._log.log(
                level,
                "%s OK %.1f ms %s",
                call.method,
                call.duration_ms,
                call.peer,
                extra={"fields": lambda: _fields(call)},
            )
            return
        suffix = ""
        if call.code is grpc.StatusCode.RESOURCE_EXHAUSTED:
            held = self._held_back(call)
            if held is None:
                return
            if held:
                suffix = f" ({held:,} more like it in the last {self._quiet_s:.0f} s not logged)"
        self._log.log(
            level,
            "%s %s %s %.1f ms %s: %s%s",
            call.method,
            call.code.name,
            call.reason or "-",
            call.duration_ms,
            call.peer,
            call.message,
            suffix,
            extra={"fields": lambda: _fields(call, held=suffix)},
        )

    def _held_back(self, call: Call) -> int | None:
        """None when this refusal is not to be logged; else how many like it were not."""
        key = (call.method, call.reason, _address(call.peer))
        now = self._clock()
        with self._lock:
            logged, held = self._quiet.pop(key, (now - self._quiet_s, 0))
            if now - logged < self._quiet_s:
                self._quiet[key] = (logged, held + 1)
                return None
            self._quiet[key] = (now, 0)
            while len(self._quiet) > self._max_quiet:
                self._quiet.popitem(last=False)
            return held


def _fields(call: Call, held: str = "") -> dict[str, object]:
    """A call's log line as fields, for a structured log (`bergen.server.logs`); given to
    the log as a function, so that a text log never builds them."""
    out: dict[str, object] = {
        "rpc": call.method,
        "status": call.code.name,
        "duration_ms": round(call.duration_ms, 3),
        "peer": call.peer,
    }
    if call.code is not grpc.StatusCode.OK:
        out["reason"] = call.reason or "-"
        out["error"] = call.message
    if held:
        out["held_back"] = held.strip(" ()")
    out.update(call.named())
    return out


def _address(peer: str) -> str:
    """A gRPC peer string without its port (`ipv4:1.2.3.4:5` -> `ipv4:1.2.3.4`)."""
    return peer.rpartition(":")[0] if peer.startswith(("ipv4:", "ipv6:")) else peer


_SERIOUS = frozenset({grpc.StatusCode.INTERNAL, grpc.StatusCode.DATA_LOSS})


GATED = "/bergen."
"""The calls a gate holds: the product's own, not health checks or reflection (a server that
refuses every call stays up, saying why to each)."""


def interceptors(
    max_request_bytes: int,
    observers: Sequence[CallObserver] = (),
    domain: str = DOMAIN,
    guard: SecretGuard | None = None,
    gate: Callable[[], None] | None = None,
) -> list[grpc.ServerInterceptor]:
    """The edge's chain, outermost first, for `grpc.server(interceptors=...)`. A call's
    log line is written unless `observers` is given without a `CallLog`. With `gate`, every
    call is first let through by it (it raises the error every call is answered with: a
    log rolled back, say)."""
    return [
        StatusInterceptor(observers or (CallLog(),), domain, guard, gate),
        RequestInterceptor(max_request_bytes),
    ]


def short_message(text: str, limit: int = MAX_STATUS_MESSAGE_BYTES) -> str:
    """`text` cut to at most `limit` bytes of UTF-8, on a character boundary."""
    data = text.encode("utf-8", errors="replace")
    if len(data) <= limit:
        return text
    return data[: limit - 3].decode("utf-8", errors="ignore") + "..."


def status_of(error: BergenError, domain: str = DOMAIN) -> grpc.Status:
    """The status a client is sent for `error`: its own code, its message cut short, and an
    ErrorInfo (plus a RetryInfo when UNAVAILABLE). An error whose status names no code
    is answered INTERNAL."""
    code = _CODES.get(error.status, grpc.StatusCode.INTERNAL)
    message = INTERNAL_MESSAGE if code is grpc.StatusCode.INTERNAL else short_message(str(error))
    info = error_details_pb2.ErrorInfo(
        reason=error.reason,
        domain=domain,
        metadata={k: v[:MAX_METADATA_VALUE_CHARS] for k, v in error.metadata.items()},
    )
    details = [_packed(info)]
    retry_ms = _retry_after_ms(error, code)
    if retry_ms is not None:
        retry = duration_pb2.Duration()
        retry.FromMilliseconds(retry_ms)
        details.append(_packed(error_details_pb2.RetryInfo(retry_delay=retry)))
    status = status_pb2.Status(code=code.value[0], message=message, details=details)
    return rpc_status.to_status(status)


def _retry_after_ms(error: BergenError, code: grpc.StatusCode) -> int | None:
    """The retry hint for `error`: its own `retry_after_ms` metadata (a client past a limit),
    else RETRY_AFTER_S when UNAVAILABLE; None for none."""
    given = error.metadata.get(RETRY_AFTER_KEY)
    if given is not None and given.isdigit():
        return int(given)
    if code is grpc.StatusCode.UNAVAILABLE:
        return RETRY_AFTER_S * 1000
    return None


def _packed(detail: Message) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(detail)
    return packed


_CODES = {code.name: code for code in grpc.StatusCode if code is not grpc.StatusCode.OK}


def _internal_status(domain: str) -> grpc.Status:
    info = error_details_pb2.ErrorInfo(reason="INTERNAL", domain=domain)
    status = status_pb2.Status(
        code=grpc.StatusCode.INTERNAL.value[0], message=INTERNAL_MESSAGE, details=[_packed(info)]
    )
    return rpc_status.to_status(status)


class SecretGuard(Protocol):
    """Slows down a client that sends wrong secrets (`limits.WrongSecrets`)."""

    def check(self, peer: str, metadata: Sequence[tuple[str, str | bytes]]) -> None:
        """Raises ResourceExhausted when a call from `peer` carrying a secret in `metadata`
        must wait."""

    def refused(self, peer: str, reason: str) -> None:
        """Count a refusal of `peer` for `reason` (a wrong secret's, or another)."""


class StatusInterceptor(grpc.ServerInterceptor):
    """Observes each call and answers every exception with a status (see the module); with
    a `guard`, a client that has sent too many wrong secrets waits before its next call with
    one."""

    def __init__(
        self,
        observers: Sequence[CallObserver],
        domain: str = DOMAIN,
        guard: SecretGuard | None = None,
        gate: Callable[[], None] | None = None,
    ) -> None:
        self._observers = tuple(observers)
        self._domain = domain
        self._guard = guard
        self._gate = gate
        self._wrapped = _Wrapped()

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Handler | None],
        details: grpc.HandlerCallDetails,
    ) -> Handler | None:
        return self.wrap(details, continuation(details))

    def wrap(self, details: grpc.HandlerCallDetails, handler: Handler | None) -> Handler | None:
        """`handler` as this interceptor serves it (None for None)."""
        if handler is None:
            return None
        method: str = details.method
        if handler.response_streaming:
            return self._wrapped.get(
                method, handler, lambda: _rewrap(handler, lambda fn: self._streaming(method, fn))
            )
        return self._wrapped.get(
            method, handler, lambda: _rewrap(handler, lambda fn: self._unary(method, fn))
        )

    def _unary(self, method: str, fn: Behavior) -> Behavior:
        if inspect.iscoroutinefunction(fn):
            return self._unary_async(method, fn)

        def behavior(request: Any, context: grpc.ServicerContext) -> Any:
            call = self._start(method, context)
            try:
                self._let_in(call, method, context)
                response = fn(request, context)
                call.response = response
            except BaseException as e:
                _abort(context, self._refusal(call, context, e))
            self._end(call, context)
            return response

        return behavior

    def _unary_async(self, method: str, fn: Behavior) -> Behavior:
        # A handler of grpc.aio's own (the health service's), run on the event loop.
        async def behavior(request: Any, context: AioContext) -> Any:
            call = self._start(method, context)
            try:
                self._let_in(call, method, context)
                response = await fn(request, context)
                call.response = response
            except BaseException as e:
                await context.abort_with_status(self._refusal(call, context, e))
            self._end(call, context)
            return response

        return behavior

    def _streaming(self, method: str, fn: Behavior) -> Behavior:
        if inspect.isasyncgenfunction(fn):
            return self._streaming_async(method, fn)

        def behavior(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            call = self._start(method, context, streaming=True)
            try:
                self._let_in(call, method, context)
                yield from fn(request, context)
            except GeneratorExit:
                # The client went away or the server is stopping: nothing to answer.
                call.code = grpc.StatusCode.CANCELLED
                self._end(call, context)
                raise
            except BaseException as e:
                _abort(context, self._refusal(call, context, e))
            self._end(call, context)

        return behavior

    def _streaming_async(self, method: str, fn: Behavior) -> Behavior:
        # A stream served on grpc.aio's event loop: the watch streams.
        async def behavior(request: Any, context: AioContext) -> AsyncIterator[Any]:
            call = self._start(method, context, streaming=True)
            try:
                self._let_in(call, method, context)
                async for out in fn(request, context):
                    yield out
            except (GeneratorExit, asyncio.CancelledError):
                # The client went away or the server is stopping: nothing to answer.
                call.code = grpc.StatusCode.CANCELLED
                self._end(call, context)
                raise
            except BaseException as e:
                await context.abort_with_status(self._refusal(call, context, e))
            self._end(call, context)

        return behavior

    def _let_in(self, call: Call, method: str, context: AnyContext) -> None:
        """Raises what the gate or the guard refuses the call with."""
        if self._gate is not None and method.startswith(GATED):
            self._gate()
        if self._guard is not None:
            self._guard.check(call.peer, context.invocation_metadata())

    def _start(self, method: str, context: AnyContext, streaming: bool = False) -> Call:
        call = Call(
            method=method,
            peer=context.peer(),
            started_ns=time.perf_counter_ns(),
            streaming=streaming,
        )
        _current.call = call
        for observer in self._observers:
            try:
                observer.call_started(call)
            except Exception:
                log.exception("call observer %r failed", observer)
        return call

    def _end(self, call: Call, context: AnyContext) -> None:
        call.ended_ns = time.perf_counter_ns()
        _current.call = None
        if call.code is grpc.StatusCode.OK:
            # A handler may set a code without raising (the health service does).
            call.code = _code_of(context) or grpc.StatusCode.OK
        for observer in self._observers:
            try:
                observer.call_ended(call)
            except Exception:
                log.exception("call observer %r failed", observer)

    def _refusal(self, call: Call, context: AnyContext, error: BaseException) -> grpc.Status:
        """As `_answer`, the call ended (its observers told) before it is answered: a
        client that has its answer finds the call logged and measured."""
        try:
            return self._answer(call, context, error)
        finally:
            self._end(call, context)

    def _answer(self, call: Call, context: AnyContext, error: BaseException) -> grpc.Status:
        """Record the outcome on `call` and return the status to abort the call with; or
        re-raise what must not be answered."""
        if isinstance(error, BergenError):
            status = status_of(error, self._domain)
            call.code, call.reason, call.message = status.code, error.reason, status.details
            if self._guard is not None:
                self._guard.refused(call.peer, error.reason)
            if status.code is grpc.StatusCode.INTERNAL:
                log.error("%s: an error with no status", call.method, exc_info=error)
            return status
        if (
            not isinstance(error, Exception)
            or isinstance(error, grpc.aio.AbortError)
            or _code_of(context) not in (None, grpc.StatusCode.OK)
        ):
            # Already answered (a handler called context.abort, which raises), or not an
            # error of the call (KeyboardInterrupt, SystemExit): let it through.
            call.code = _code_of(context) or grpc.StatusCode.UNKNOWN
            raise error
        log.error("%s failed: a bug", call.method, exc_info=error)
        call.code, call.reason, call.message = grpc.StatusCode.INTERNAL, "INTERNAL", "bug"
        return _internal_status(self._domain)


def _abort(context: grpc.ServicerContext, status: grpc.Status) -> NoReturn:
    """Abort the call with `status` (raises): on grpc's threaded server, or a plain function's
    call on grpc.aio's (whose context has no `abort_with_status`)."""
    with_status = getattr(context, "abort_with_status", None)
    if with_status is not None:
        with_status(status)
    else:
        context.abort(status.code, status.details, status.trailing_metadata)  # type: ignore[call-arg]
    raise AssertionError("abort returned")  # pragma: no cover (gRPC's abort raises)


class RequestInterceptor(grpc.ServerInterceptor):
    """The checks made before any work (see the module). A handler with a request stream
    is left as it is: gRPC's own size limit covers it."""

    def __init__(self, max_request_bytes: int) -> None:
        self._max = max_request_bytes
        self._wrapped = _Wrapped()

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Handler | None],
        details: grpc.HandlerCallDetails,
    ) -> Handler | None:
        return self.wrap(details, continuation(details))

    def wrap(self, details: grpc.HandlerCallDetails, handler: Handler | None) -> Handler | None:
        """`handler` as this interceptor serves it (None for None)."""
        if handler is None or handler.request_streaming:
            return handler
        parse: Callable[[bytes], Any] | None = handler.request_deserializer
        if handler.response_streaming:
            return self._wrapped.get(
                details.method,
                handler,
                lambda: _rewrap(handler, lambda fn: self._streaming(parse, fn), parsed_here=True),
            )
        return self._wrapped.get(
            details.method,
            handler,
            lambda: _rewrap(handler, lambda fn: self._unary(parse, fn), parsed_here=True),
        )

    def _unary(self, parse: Callable[[bytes], Any] | None, fn: Behavior) -> Behavior:
        if inspect.iscoroutinefunction(fn):

            async def on_loop(data: bytes, context: AioContext) -> Any:
                return await fn(self._checked(parse, data, context), context)

            return on_loop

        def behavior(data: bytes, context: grpc.ServicerContext) -> Any:
            return fn(self._checked(parse, data, context), context)

        return behavior

    def _streaming(self, parse: Callable[[bytes], Any] | None, fn: Behavior) -> Behavior:
        if inspect.isasyncgenfunction(fn):

            async def streamed(data: bytes, context: AioContext) -> AsyncIterator[Any]:
                async for out in fn(self._checked(parse, data, context), context):
                    yield out

            return streamed

        def behavior(data: bytes, context: grpc.ServicerContext) -> Iterator[Any]:
            yield from fn(self._checked(parse, data, context), context)

        return behavior

    def _checked(
        self, parse: Callable[[bytes], Any] | None, data: bytes, context: AnyContext
    ) -> Any:
        """The request `data` parses to. Raises DeadlineExceeded when the call's deadline
        has passed, ResourceExhausted when `data` is too large, InvalidArgument when it
        does not parse."""
        remaining = context.time_remaining()
        if remaining is not None and remaining <= 0:
            raise DeadlineExceeded("the deadline passed before the call was started")
        if len(data) > self._max:
            raise ResourceExhausted(
                f"the request is {len(data)} bytes; this server takes at most {self._max}",
                reason="REQUEST_TOO_LARGE",
                limit=self._max,
            )
        if parse is None:
            return data
        try:
            request = parse(data)
        # upb raises DecodeError; the pure-Python backend may raise the others.
        except (DecodeError, RuntimeError, ValueError) as e:
            name = getattr(parse, "__self__", None)
            what = getattr(getattr(name, "DESCRIPTOR", None), "full_name", "message")
            raise InvalidArgument(
                f"the request is not a valid {what}", reason="MALFORMED_REQUEST"
            ) from e
        call: Call | None = getattr(_current, "call", None)
        if call is not None:
            call.request = request
        return request


class _Wrapped:
    """An interceptor's wrapped handlers, one per method, made on the method's first call
    and remade only if the handler under it changes: gRPC asks the interceptors for every
    call, and the wrapping is the same each time. Bounded: a client may name any method,
    but only a served one has a handler (an unknown method never gets here)."""

    MAX = 1024

    def __init__(self) -> None:
        self._made: dict[str, tuple[Handler, Handler]] = {}

    def get(self, method: str, under: Handler, make: Callable[[], Handler]) -> Handler:
        made = self._made.get(method)
        if made is not None and made[0] is under:
            return made[1]
        wrapped = make()
        if len(self._made) >= self.MAX:
            self._made.clear()
        self._made[method] = (under, wrapped)
        return wrapped


class AioEdge(grpc.aio.ServerInterceptor):
    """One of the edge's interceptors (`StatusInterceptor`, `RequestInterceptor`) on a
    `grpc.aio` server: the same wrapping, of plain functions (run in the server's thread
    pool, as on the threaded server) and of coroutines and async generators (run on its
    event loop: the watch streams)."""

    def __init__(self, inner: StatusInterceptor | RequestInterceptor) -> None:
        self._inner = inner

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler | None]],
        details: grpc.HandlerCallDetails,
    ) -> Handler | None:
        return self._inner.wrap(details, await continuation(details))


def aio_interceptors(
    max_request_bytes: int,
    observers: Sequence[CallObserver] = (),
    domain: str = DOMAIN,
    guard: SecretGuard | None = None,
    gate: Callable[[], None] | None = None,
) -> list[grpc.aio.ServerInterceptor]:
    """The edge's chain (`interceptors`) for `grpc.aio.server(interceptors=...)`."""
    chain = interceptors(max_request_bytes, observers, domain, guard, gate)
    return [AioEdge(i) for i in chain]  # type: ignore[arg-type]


def _code_of(context: AnyContext) -> grpc.StatusCode | None:
    """The code a handler set or aborted with, if any (gRPC's context has `code()`; its
    type stubs do not say so)."""
    code = getattr(context, "code", None)
    return code() if callable(code) else None


def _rewrap(
    handler: Handler, wrap: Callable[[Behavior], Behavior], *, parsed_here: bool = False
) -> Handler:
    """`handler` with its behaviour wrapped; with `parsed_here`, the wrapped behaviour gets
    the request's bytes (gRPC does not parse them)."""
    deserializer = None if parsed_here else handler.request_deserializer
    serializer = handler.response_serializer
    if handler.request_streaming and handler.response_streaming:
        assert handler.stream_stream is not None
        return grpc.stream_stream_rpc_method_handler(
            wrap(handler.stream_stream), deserializer, serializer
        )
    if handler.request_streaming:
        assert handler.stream_unary is not None
        return grpc.stream_unary_rpc_method_handler(
            wrap(handler.stream_unary), deserializer, serializer
        )
    if handler.response_streaming:
        assert handler.unary_stream is not None
        return grpc.unary_stream_rpc_method_handler(
            wrap(handler.unary_stream), deserializer, serializer
        )
    assert handler.unary_unary is not None
    return grpc.unary_unary_rpc_method_handler(wrap(handler.unary_unary), deserializer, serializer)


def service_handler(service: ServiceDescriptor, servicer: object) -> grpc.GenericRpcHandler:
    """The handlers of every RPC of `service`: for each, the servicer's method of the same
    name, taking the parsed request and the context and returning (or, for a
    server-streaming RPC, yielding) the response message (or its serialized bytes).

    Raises TypeError when the servicer lacks a method for an RPC, or when an RPC streams
    requests (none does; the edge would need to parse a stream).
    """
    missing = [m.name for m in service.methods if not callable(getattr(servicer, m.name, None))]
    if missing:
        raise TypeError(
            f"{type(servicer).__name__} serves no {', '.join(missing)} of {service.full_name}"
        )
    handlers: dict[str, Handler] = {}
    for m in service.methods:
        if m.client_streaming:
            raise TypeError(f"{service.full_name}.{m.name} streams requests; none may")
        request = message_factory.GetMessageClass(m.input_type)
        response = message_factory.GetMessageClass(m.output_type)
        name, fn = f"{service.full_name}.{m.name}", getattr(servicer, m.name)
        if m.server_streaming:
            handlers[m.name] = grpc.unary_stream_rpc_method_handler(
                _typed_stream(name, fn, response), request.FromString, _serialize
            )
        else:
            handlers[m.name] = grpc.unary_unary_rpc_method_handler(
                _typed(name, fn, response), request.FromString, _serialize
            )
    return grpc.method_handlers_generic_handler(service.full_name, handlers)


def _typed(name: str, fn: Behavior, response: type[Message]) -> Behavior:
    def behavior(request: Message, context: grpc.ServicerContext) -> Message | bytes:
        out = fn(request, context)
        _check_response(name, out, response)
        return out  # type: ignore[no-any-return]

    return behavior


def _typed_stream(name: str, fn: Behavior, response: type[Message]) -> Behavior:
    if inspect.isasyncgenfunction(fn):

        async def streamed(request: Message, context: AioContext) -> AsyncIterator[Any]:
            async for out in fn(request, context):
                _check_response(name, out, response)
                yield out

        return streamed

    def behavior(request: Message, context: grpc.ServicerContext) -> Iterator[Message | bytes]:
        for out in fn(request, context):
            _check_response(name, out, response)
            yield out

    return behavior


def _check_response(name: str, out: object, response: type[Message]) -> None:
    # A servicer answering with another message would be read by the client as garbage.
    if not isinstance(out, bytes | response):
        raise TypeError(f"{name} answered {type(out).__name__}, not {response.__name__}")


def _serialize(msg: Message | bytes) -> bytes:
    return msg if isinstance(msg, bytes) else msg.SerializeToString()
