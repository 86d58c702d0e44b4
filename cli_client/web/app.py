"""The gateway's site and its JSON + Server-Sent Events API (a Starlette application).

Every answer is built from the public read RPCs, called as a spectator (no token is ever
sent upstream, and nothing a browser sends is passed on but a checked id, a phase word, a
page token and a seq). See the README's "The web gateway" for each endpoint and its shape.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import os
import re
import time
import zipfile
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import grpc
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from bergen.api.audit_pack import played_matches
from bergen.cli_client.connect import MAX_RECEIVE_BYTES, Endpoint
from bergen.cli_client.tournament_pack import served_pack
from bergen.v1 import bergen_pb2 as pb
from bergen.v1 import bergen_pb2_grpc as rpc

from .analyses import Analyses, NotEnded, TooBusy
from .hubs import (
    COALESCE_S,
    JSON,
    LIVE_SCORES_S,
    Busy,
    Gone,
    Item,
    MatchHub,
    Registry,
    Subscriber,
    SubscriberCounter,
    TournamentHub,
    Upstream,
    sse,
    to_json,
)
from .limits import ClientLimits, Limited, Limiter, limiter_of

log = logging.getLogger("bergen.web")

MAX_STREAMS = 1000
"""Server-Sent Events streams open at once through one gateway (more get 503)."""
MAX_MATCHES = 12
"""Matches followed at once (one upstream WatchMatch each; under the server's per-client 16)."""
MAX_TOURNAMENTS = 4
"""Tournaments followed at once (one upstream WatchTournament each)."""
BATCH_ITEMS = 256
"""Items written to one stream at once, at most."""
RETRY_MS = 1000
"""How long a browser waits before reconnecting a closed stream."""
RESULTS_KEPT = 4096
"""Ended matches whose result the gateway keeps for its listing (it never changes)."""
RESULT_CALLS = 4
"""GetMatch calls at once for the results of a listing's ended matches."""
RESULTS_WAIT_S = 2.0
"""How long a listing waits for the results it lacks: those read later are kept for the next
page (the listing is answered meanwhile, its ended matches without a result)."""
MAX_SEQ = 2**63 - 1

ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,99}")
PAGE_TOKEN = re.compile(r"[A-Za-z0-9_=+/.-]{0,512}")
MATCH_PHASES = {
    "": pb.PHASE_UNSPECIFIED,
    "seating": pb.PHASE_SEATING,
    "playing": pb.PHASE_PLAYING,
    "ended": pb.PHASE_ENDED,
}
TOURNAMENT_PHASES = {
    "": pb.TOURNAMENT_PHASE_UNSPECIFIED,
    "registration": pb.TOURNAMENT_PHASE_REGISTRATION,
    "reveal": pb.TOURNAMENT_PHASE_REVEAL,
    "running": pb.TOURNAMENT_PHASE_RUNNING,
    "ended": pb.TOURNAMENT_PHASE_ENDED,
}
HTTP_OF: dict[grpc.StatusCode, int] = {
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.FAILED_PRECONDITION: 409,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 503,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.UNAUTHENTICATED: 403,
    grpc.StatusCode.DATA_LOSS: 502,
}
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


class BadRequest(Exception):
    pass


class Results:
    """How each ended match of a listing ended: the listing (MatchSummary) says a match has
    ended but not how, so the gateway reads each one's result once (GetMatch, as a spectator)
    and keeps it, an ended match's result never changing. At most RESULT_CALLS calls at
    once, one per match however many pages ask for it, RESULTS_KEPT results kept."""

    def __init__(self, upstream: Upstream) -> None:
        self._upstream = upstream
        self._kept: OrderedDict[str, JSON] = OrderedDict()
        self._reading: dict[str, asyncio.Task[None]] = {}
        self._calls = asyncio.Semaphore(RESULT_CALLS)

    async def _read(self, match_id: str) -> None:
        try:
            async with self._calls:
                reply: pb.GetMatchResponse = await self._upstream.call(
                    "GetMatch", pb.GetMatchRequest(match_id=match_id)
                )
        except grpc.aio.AioRpcError as e:
            log.info("%s: no result read for the listing: %s", match_id, e.code().name)
            return
        finally:
            self._reading.pop(match_id, None)
        view = reply.view
        if view.phase == pb.PHASE_ENDED and view.HasField("result"):
            self._kept[match_id] = to_json(view.result)
            while len(self._kept) > RESULTS_KEPT:
                self._kept.popitem(last=False)

    async def close(self) -> None:
        """Stop the reads under way."""
        tasks = list(self._reading.values())
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(BaseException):
                await t

    async def of(self, match_ids: list[str]) -> dict[str, JSON]:
        """The results known of `match_ids` (ended matches), reading those not known yet for
        at most RESULTS_WAIT_S."""
        waits = []
        for m in match_ids:
            if m in self._kept:
                continue
            task = self._reading.get(m)
            if task is None:
                task = self._reading[m] = asyncio.create_task(self._read(m))
            waits.append(task)
        if waits:
            await asyncio.wait(waits, timeout=RESULTS_WAIT_S)
        found = {}
        for m in match_ids:
            result = self._kept.get(m)
            if result is not None:
                self._kept.move_to_end(m)
                found[m] = result
        return found


@dataclass
class Gateway:
    upstream: Upstream
    matches: Registry[MatchHub]
    tournaments: Registry[TournamentHub]
    streams: SubscriberCounter
    packing: asyncio.Semaphore
    """Tournament zips built at once (each reads every match record): one."""
    results: Results
    analyses: Analyses = field(default_factory=Analyses)
    """Finished matches' analyses (kept in memory only unless given a folder)."""


def checked_id(request: Request, name: str = "id") -> str:
    value = str(request.path_params.get(name, ""))
    if not ID.fullmatch(value):
        raise BadRequest(f"not an id: {name}")
    return value


def _seq(text: str | None) -> int | None:
    if text is None or text == "":
        return None
    text = text.strip()
    if not text.isdigit() or len(text) > 19 or int(text) > MAX_SEQ:
        raise BadRequest("a seq is a decimal number")
    return int(text)


def error_answer(status: int, message: str, **extra: str) -> JSONResponse:
    """An error's JSON: `error`, the words; `code`, the gRPC status upstream, or BAD_REQUEST
    (refused here), GATEWAY_BUSY (this gateway at one of its limits) or CLIENT_LIMIT (this
    client at one of its own)."""
    return JSONResponse({"error": message, **extra}, status_code=status, headers=SECURITY_HEADERS)


def _ok(body: Any, max_age: int = 0) -> JSONResponse:
    headers = dict(SECURITY_HEADERS)
    headers["Cache-Control"] = f"public, max-age={max_age}" if max_age else "no-store"
    return JSONResponse(body, headers=headers)


def _rpc_error(e: grpc.aio.AioRpcError | Gone) -> JSONResponse:
    code = e.code if isinstance(e, Gone) else e.code()
    details = e.details if isinstance(e, Gone) else (e.details() or "")
    status = HTTP_OF.get(code, 502)
    return error_answer(status, details[:300] or code.name.lower(), code=code.name)


def gateway_of(request: Request) -> Gateway:
    gw: Gateway = request.app.state.gateway
    return gw


async def _json_call(request: Request, name: str, message: Any) -> Any:
    return await gateway_of(request).upstream.call(name, message)


def handled(
    handler: Any,
) -> Any:
    async def wrapped(request: Request) -> Response:
        try:
            response: Response = await handler(request)
            return response
        except BadRequest as e:
            return error_answer(400, str(e), code="BAD_REQUEST")
        except grpc.aio.AioRpcError as e:
            return _rpc_error(e)
        except Gone as e:
            return _rpc_error(e)
        except Busy as e:
            response = error_answer(503, str(e), code="GATEWAY_BUSY")
            response.headers["Retry-After"] = "2"
            return response
        except Limited as e:
            response = error_answer(429, str(e), code="CLIENT_LIMIT")
            response.headers["Retry-After"] = str(e.retry_after)
            return response

    return wrapped


# --- JSON ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Listing:
    """A listing the gateway serves: the RPC that lists, its request, the phase words a
    browser may filter by, and its page sizes (the default, and the most asked upstream)."""

    rpc: str
    request: Callable[..., Any]
    phases: Mapping[str, int]
    page_size: int
    max_page_size: int
    complete: Callable[[Gateway, JSON], Awaitable[None]] | None = None
    """Adds to the listing's JSON what the RPC does not say."""


def listing(what: Listing) -> Callable[[Request], Awaitable[Response]]:
    """The handler of a listing: `?phase=`, `?page_token=` and `?page_size=` checked, the
    RPC called, its answer as JSON."""

    async def handler(request: Request) -> Response:
        phase = request.query_params.get("phase", "")
        if phase not in what.phases:
            raise BadRequest(f"phase is one of {', '.join(p for p in what.phases if p)}")
        token = request.query_params.get("page_token", "")
        if not PAGE_TOKEN.fullmatch(token):
            raise BadRequest("not a page token")
        size = _seq(request.query_params.get("page_size")) or what.page_size
        reply = await _json_call(
            request,
            what.rpc,
            what.request(
                phase=what.phases[phase],
                page_size=min(size, what.max_page_size),
                page_token=token,
            ),
        )
        body = to_json(reply)
        if what.complete is not None:
            await what.complete(gateway_of(request), body)
        return _ok(body)

    return handler


async def _with_results(gw: Gateway, body: JSON) -> None:
    """Each ended match of a listing with its `result` (as a view's), once the gateway has
    read it."""
    ended = [m["match_id"] for m in body["matches"] if m["phase"] == "PHASE_ENDED"]
    if ended:
        results = await gw.results.of(ended)
        for m in body["matches"]:
            if m["match_id"] in results:
                m["result"] = results[m["match_id"]]


MATCHES = Listing("ListMatches", pb.ListMatchesRequest, MATCH_PHASES, 20, 100, _with_results)
TOURNAMENTS = Listing("ListTournaments", pb.ListTournamentsRequest, TOURNAMENT_PHASES, 50, 200)


async def get_match(request: Request) -> Response:
    reply: pb.GetMatchResponse = await _json_call(
        request, "GetMatch", pb.GetMatchRequest(match_id=checked_id(request))
    )
    return _ok(to_json(reply.view))


async def get_replay(request: Request) -> Response:
    after = _seq(request.query_params.get("after")) or 0
    events, complete = await gateway_of(request).upstream.replay(checked_id(request), after)
    body = {"events": [to_json(e) for e in events], "complete": complete}
    return _ok(body, max_age=3600 if complete else 0)


async def get_analysis(request: Request) -> Response:
    """A finished match's analysis: 200 with it once worked out, 202 while it is (come back:
    Retry-After), 404 when none was asked for (POST asks), 500 with why when it failed."""
    state, body = gateway_of(request).analyses.state(checked_id(request))
    if state == "done":
        return _ok({"state": state, "analysis": body}, max_age=3600)
    if state == "pending":
        response = _ok({"state": state}, 0)
        response.status_code = 202
        response.headers["Retry-After"] = "2"
        return response
    if state == "failed":
        return error_answer(500, (body or {}).get("error", "failed"), code="ANALYSIS_FAILED")
    return error_answer(404, "this match has not been analysed: ask for it", code="NOT_ANALYSED")


async def start_analysis(request: Request) -> Response:
    """Ask for a finished match's analysis (at most ANALYSES_PER_MINUTE new ones a client):
    202 while it is worked out, 200 when it already was; 409 for a match not ended, 503
    when the gateway is analysing as many matches as it may."""
    gw = gateway_of(request)
    match_id = checked_id(request)
    state, body = gw.analyses.state(match_id)
    if state == "done":
        return _ok({"state": state, "analysis": body})
    if state != "pending":
        limiter = limiter_of(request)
        limiter.spend(limiter.client(request), "analyse")
        events, complete = await gw.upstream.replay(match_id, 0)
        try:
            gw.analyses.start(match_id, list(events), complete)
        except NotEnded as e:
            return error_answer(409, str(e), code="MATCH_NOT_ENDED")
        except TooBusy as e:
            raise Busy(str(e)) from None
    response = _ok({"state": "pending"})
    response.status_code = 202
    response.headers["Retry-After"] = "2"
    return response


async def get_record(request: Request) -> Response:
    match_id = checked_id(request)
    reply: pb.GetRecordResponse = await _json_call(
        request, "GetRecord", pb.GetRecordRequest(match_id=match_id)
    )
    headers = dict(SECURITY_HEADERS)
    headers["Content-Disposition"] = f'attachment; filename="match-{match_id}.json"'
    return Response(reply.record_json, media_type="application/json", headers=headers)


async def server_info(request: Request) -> Response:
    reply: pb.GetServerInfoResponse = await _json_call(
        request, "GetServerInfo", pb.GetServerInfoRequest()
    )
    return _ok(to_json(reply), max_age=60)


async def get_tournament(request: Request) -> Response:
    reply: pb.GetTournamentResponse = await _json_call(
        request, "GetTournament", pb.GetTournamentRequest(tournament_id=checked_id(request))
    )
    return _ok(to_json(reply.tournament))


async def get_tournament_record(request: Request) -> Response:
    tid = checked_id(request)
    reply: pb.GetTournamentRecordResponse = await _json_call(
        request, "GetTournamentRecord", pb.GetTournamentRecordRequest(tournament_id=tid)
    )
    headers = dict(SECURITY_HEADERS)
    headers["Content-Disposition"] = f'attachment; filename="tournament-{tid}.json"'
    return Response(reply.record_json, media_type="application/json", headers=headers)


async def get_tournament_pack(request: Request) -> Response:
    """The audit pack of an ended tournament (TOURNAMENT.md section 6) as a zip, as
    `bergen tournament export` writes it: the manifest the server signed
    (GetAuditManifest), the tournament's signed record and every table's signed match
    record, each checked against the manifest before anything is sent."""
    tid = checked_id(request)
    gw = gateway_of(request)
    if gw.packing.locked():
        raise Busy("the gateway is already packing the records of tournaments")
    async with gw.packing:
        return await _pack(gw, tid)


async def _pack(gw: Gateway, tid: str) -> Response:
    manifest: pb.GetAuditManifestResponse = await gw.upstream.call(
        "GetAuditManifest", pb.GetAuditManifestRequest(tournament_id=tid)
    )
    record: pb.GetTournamentRecordResponse = await gw.upstream.call(
        "GetTournamentRecord", pb.GetTournamentRecordRequest(tournament_id=tid)
    )
    tournament = json.loads(record.record_json)
    matches = []
    for match_id in played_matches(tournament):
        if not ID.fullmatch(match_id):
            return error_answer(502, f"the server's record names a match id {match_id[:40]!r}")
        rec: pb.GetRecordResponse = await gw.upstream.call(
            "GetRecord", pb.GetRecordRequest(match_id=match_id)
        )
        matches.append(json.loads(rec.record_json))
    try:
        files = served_pack(tournament, matches, json.loads(manifest.manifest_json))
    except ValueError as e:
        return error_answer(502, f"the served records make no pack: {e}")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as pack:
        for path, data in files.items():
            pack.writestr(f"tournament-{tid}/{path}", data)
    headers = dict(SECURITY_HEADERS)
    headers["Content-Disposition"] = f'attachment; filename="tournament-{tid}-audit-pack.zip"'
    return Response(buffer.getvalue(), media_type="application/zip", headers=headers)


# --- Server-Sent Events --------------------------------------------------------------------


class EventStream(StreamingResponse):
    """An event stream that calls `done` once it is over, whether or not its body ever ran
    (a client gone before its first byte leaves its finally unrun)."""

    def __init__(self, body: AsyncIterator[bytes], done: Callable[[], None]) -> None:
        headers = dict(SECURITY_HEADERS)
        headers["Cache-Control"] = "no-store"
        headers["X-Accel-Buffering"] = "no"
        self._done = done
        super().__init__(body, media_type="text/event-stream", headers=headers)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._done()


def resume_point(request: Request) -> int:
    """The seq to resume after: the browser's Last-Event-ID (sent on its own reconnects) wins
    over `?after=` (a reloaded page's last seq), else 0: from the first event."""
    last = _seq(request.headers.get("last-event-id"))
    if last is not None:
        return last
    return _seq(request.query_params.get("after")) or 0


async def next_items(queue: asyncio.Queue[Item]) -> list[Item]:
    """The items queued now (waiting for one), so that a burst goes out in one write. The
    hubs queue a keepalive for every subscriber every KEEPALIVE_S."""
    items = [await queue.get()]
    while len(items) < BATCH_ITEMS:
        try:
            items.append(queue.get_nowait())
        except asyncio.QueueEmpty:
            break
    return items


TRANSPORT_EXTENSION = "bergen.transport"
"""The scope extension under which `bergen web`'s HTTP protocol hands a stream its transport."""


async def _catch_up(
    gw: Gateway, match_id: str, batch: list[Item], sent: int
) -> tuple[list[bytes], int, bool]:
    """What to write for `batch` after seq `sent`: (chunks, the last seq, whether the stream
    is over). A burst queued while the backlog was written may overlap it: what was sent is
    skipped, and a gap is filled from the replay, so that no event is sent twice or missed."""
    out: list[bytes] = []
    for got in batch:
        if got.kind == "burst":
            if not got.parts or got.parts[0].seq == sent + 1:
                out.append(got.wire)  # the usual case: as encoded for all
                sent = got.seq or sent
                continue
            for part in got.parts:  # after a backlog: skip what it sent
                if part.seq <= sent:
                    continue
                if part.seq != sent + 1:  # never a gap: fill it from the replay
                    events, _ = await gw.upstream.replay(match_id, sent)
                    for e in events:
                        if e.seq == sent + 1 and e.seq < part.seq:
                            sent = e.seq
                            out.append(sse("event", to_json(e), e.seq))
                sent = part.seq
                out.append(part.wire)
            out.append(got.tail)
        elif got.kind in ("view", "keepalive"):
            out.append(got.wire)
        else:
            if not got.data.get("dropped"):  # dropped: the browser resumes
                out.append(got.wire)
            return out, sent, True
    return out, sent, False


def _drain(queue: asyncio.Queue[Item]) -> list[Item]:
    items: list[Item] = []
    while len(items) < BATCH_ITEMS:
        try:
            items.append(queue.get_nowait())
        except asyncio.QueueEmpty:
            break
    return items


async def _until_disconnect(receive: Any) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


class MatchStream(StreamingResponse):
    """A match's Server-Sent Events. Under `bergen web`'s own HTTP protocol (which hands the
    stream its transport) the first view and the backlog are written here, and then the match
    hub writes every burst to the transport itself; this task only waits for the end or the
    client's going away. Elsewhere, a task per stream writes what its queue receives."""

    def __init__(
        self, gw: Gateway, hub: MatchHub, sub: Subscriber, after: int, match_id: str
    ) -> None:
        headers = dict(SECURITY_HEADERS)
        headers["Cache-Control"] = "no-store"
        headers["X-Accel-Buffering"] = "no"
        self.gw, self.hub, self.sub, self.after, self.match_id = gw, hub, sub, after, match_id
        super().__init__(self._queued(), media_type="text/event-stream", headers=headers)

    def _opening(self) -> bytes:
        return f"retry: {RETRY_MS}\n\n".encode() + sse("view", self.hub.view)

    async def _queued(self) -> AsyncIterator[bytes]:
        """The stream served from the subscriber's queue by its own task."""
        hub, sub, gw = self.hub, self.sub, self.gw
        try:
            yield self._opening()
            sent = self.after
            async for item in hub.backlog(self.after):
                sent = item.seq
                yield item.wire
            while True:
                if sub.queue.empty() and hub.ended:
                    yield sse("end", {"ended": hub.error is None})
                    return
                batch = await next_items(sub.queue)
                out, sent, done = await _catch_up(gw, self.match_id, batch, sent)
                if out:
                    yield b"".join(out)
                if done:
                    return
        finally:
            gw.matches.unsubscribe(hub, sub)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        extensions = scope.get("extensions") or {}
        transport = extensions.get(TRANSPORT_EXTENSION)
        if transport is None or scope.get("method") != "GET":
            try:
                await super().__call__(scope, receive, send)
            finally:
                # Also when the body never started (the client went first): its places back.
                self.gw.matches.unsubscribe(self.hub, self.sub)
            return
        hub, sub, gw = self.hub, self.sub, self.gw

        async def write(data: bytes) -> None:
            await send({"type": "http.response.body", "body": data, "more_body": True})

        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            opening = [self._opening()]
            sent = self.after
            async for item in hub.backlog(self.after):
                sent = item.seq
                opening.append(item.wire)
            await write(b"".join(opening))
            while not transport.is_closing():
                batch = _drain(sub.queue)
                if batch:
                    out, sent, done = await _catch_up(gw, self.match_id, batch, sent)
                    if out:
                        await write(b"".join(out))
                    if done:
                        break
                    continue
                if hub.ended:
                    await write(sse("end", {"ended": hub.error is None}))
                    break
                # Caught up, with nothing queued: the hub writes from here on.
                sub.go_direct(transport, sent)
                waits = [
                    asyncio.ensure_future(sub.done.wait()),
                    asyncio.ensure_future(_until_disconnect(receive)),
                ]
                try:
                    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for w in waits:
                        w.cancel()
                break
        finally:
            gw.matches.unsubscribe(hub, sub)
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def match_events(request: Request) -> Response:
    """The spectator's view, then every event after the resume point (each with `id:` its
    seq), a fresh view after each burst, and `end` once the match has ended."""
    match_id = checked_id(request)
    after = resume_point(request)
    gw = gateway_of(request)
    limiter = limiter_of(request)
    lease = limiter.open_stream(limiter.client(request), f"match:{match_id}")
    hub, sub = await gw.matches.subscribe(match_id, lease.release)
    return MatchStream(gw, hub, sub, after, match_id)


async def tournament_events(request: Request) -> Response:
    """The tournament's view now (`id:` its version), then again on each change (its tables'
    live scores included, which change within a version), and `end` once it has ended."""
    tid = checked_id(request)
    gw = gateway_of(request)
    limiter = limiter_of(request)
    lease = limiter.open_stream(limiter.client(request), f"tournament:{tid}")
    hub, sub = await gw.tournaments.subscribe(tid, lease.release)

    async def body() -> AsyncIterator[bytes]:
        try:
            yield f"retry: {RETRY_MS}\n\n".encode()
            # Each message is the whole view: a reconnect gets the current one (its live
            # scores may have changed under the version it had).
            sent = hub.view
            yield sse("tournament", hub.view, hub.version)
            while True:
                if sub.queue.empty() and hub.ended:
                    yield sse("end", {"ended": hub.error is None})
                    return
                batch = await next_items(sub.queue)
                for got in batch:
                    if got.kind == "tournament":
                        if got.data is not sent:  # the view sent first may be queued too
                            sent = got.data
                            yield got.wire
                    elif got.kind == "keepalive":
                        yield got.wire
                    else:
                        if not got.data.get("dropped"):
                            yield got.wire
                        return
        finally:
            gw.tournaments.unsubscribe(hub, sub)

    return EventStream(body(), lambda: gw.tournaments.unsubscribe(hub, sub))


async def health(request: Request) -> Response:
    """The gateway's figures, and whether the game server serves: 200 when its health
    service says SERVING, else 503 with the same body (a server that refuses its log, one
    shutting down, one that does not answer), so that a load balancer stops sending here."""
    gw = gateway_of(request)
    upstream = await gw.upstream.serving()
    body = {
        "upstream": upstream,
        "streams": gw.streams.open,
        "max_streams": gw.streams.limit,
        "matches_followed": len(gw.matches.hubs),
        "tournaments_followed": len(gw.tournaments.hubs),
        "upstream_calls": dict(gw.upstream.calls),
    }
    if upstream == "SERVING":
        return _ok(body)
    headers = {**SECURITY_HEADERS, "Cache-Control": "no-store"}
    return JSONResponse(body, status_code=503, headers=headers)


# --- pages ---------------------------------------------------------------------------------

PAGES = {
    "/": "index.html",
    "/match": "match.html",
    "/replay": "replay.html",
    "/tournament": "tournament.html",
    "/leaderboard": "leaderboard.html",
    "/player": "player.html",
    "/sign-in": "sign-in.html",
}
FAVICON_MAX_AGE_S = 86400


def _favicon() -> Any:
    """/favicon.ico, which browsers ask for whatever the pages link (they link the SVG)."""
    data = resources.files("bergen.cli_client.web").joinpath("static", "favicon.ico").read_bytes()

    async def favicon(request: Request) -> Response:
        headers = dict(SECURITY_HEADERS)
        headers["Cache-Control"] = f"public, max-age={FAVICON_MAX_AGE_S}"
        return Response(data, media_type="image/x-icon", headers=headers)

    return favicon


def _page(name: str) -> Any:
    text = resources.files("bergen.cli_client.web").joinpath("static", name).read_bytes()

    async def page(request: Request) -> Response:
        headers = dict(SECURITY_HEADERS)
        headers["Cache-Control"] = "no-cache"
        return Response(text, media_type="text/html; charset=utf-8", headers=headers)

    return page


class _StaticWithHeaders(StaticFiles):
    async def get_response(self, path: str, scope: Any) -> Response:
        response = await super().get_response(path, scope)
        for k, v in SECURITY_HEADERS.items():
            response.headers.setdefault(k, v)
        response.headers.setdefault("Cache-Control", "no-cache")
        return response


def create_app(
    endpoint: Endpoint | str,
    *,
    max_streams: int = MAX_STREAMS,
    max_matches: int = MAX_MATCHES,
    coalesce_s: float = COALESCE_S,
    max_tournaments: int = MAX_TOURNAMENTS,
    live_scores_s: float = LIVE_SCORES_S,
    client_limits: ClientLimits | None = None,
    analysis_dir: Path | None = None,
) -> Starlette:
    """The spectators' gateway to the game server at `endpoint`, each client held to
    `client_limits` (`app.state.limits`), keeping finished matches' analyses in
    `analysis_dir` (None: in memory only). `players.create_site` adds the players' API."""
    target = endpoint if isinstance(endpoint, Endpoint) else Endpoint(endpoint)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        options = [("grpc.max_receive_message_length", MAX_RECEIVE_BYTES)]
        credentials = target.credentials()
        channel = (
            grpc.aio.insecure_channel(target.address, options=options)
            if credentials is None
            else grpc.aio.secure_channel(target.address, credentials, options=options)
        )
        stub = rpc.BergenServiceStub(channel)  # type: ignore[no-untyped-call]
        upstream = Upstream(stub, channel=channel)
        streams = SubscriberCounter(max_streams)
        matches: Registry[MatchHub] = Registry(
            lambda key: MatchHub(key, matches, upstream, coalesce_s), max_matches, streams
        )
        tournaments: Registry[TournamentHub] = Registry(
            lambda key: TournamentHub(key, tournaments, upstream, live_scores_s),
            max_tournaments,
            streams,
        )
        results = Results(upstream)
        analyses = Analyses(analysis_dir, max(2, os.cpu_count() or 1))
        app.state.gateway = Gateway(
            upstream, matches, tournaments, streams, asyncio.Semaphore(1), results, analyses
        )
        app.state.started = time.time()
        try:
            yield
        finally:
            await analyses.close()
            await results.close()
            await matches.close()
            await tournaments.close()
            await channel.close()

    static = resources.files("bergen.cli_client.web").joinpath("static")
    routes = [
        Route("/api/server", handled(server_info)),
        Route("/api/health", handled(health)),
        Route("/api/matches", handled(listing(MATCHES))),
        Route("/api/matches/{id}", handled(get_match)),
        Route("/api/matches/{id}/events", handled(match_events)),
        Route("/api/matches/{id}/replay", handled(get_replay)),
        Route("/api/matches/{id}/record", handled(get_record)),
        Route("/api/matches/{id}/analysis", handled(get_analysis), methods=["GET"]),
        Route("/api/matches/{id}/analysis", handled(start_analysis), methods=["POST"]),
        Route("/api/tournaments", handled(listing(TOURNAMENTS))),
        Route("/api/tournaments/{id}", handled(get_tournament)),
        Route("/api/tournaments/{id}/events", handled(tournament_events)),
        Route("/api/tournaments/{id}/record", handled(get_tournament_record)),
        Route("/api/tournaments/{id}/audit-pack.zip", handled(get_tournament_pack)),
        *(Route(path, _page(name)) for path, name in PAGES.items()),
        Route("/favicon.ico", _favicon()),
        Mount("/static", _StaticWithHeaders(directory=str(static))),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.limits = Limiter(client_limits or ClientLimits())
    return app
