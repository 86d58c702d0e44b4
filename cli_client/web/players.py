"""The players' API of the gateway: create and join a match, see the seat's view, play and
resign (rematches, built on these, are in rematch.py; carrying a seat to another device in
handoff.py).

The gateway makes each seat's token itself (JoinMatch with `seat_token`) and hands it to the
browser only sealed (Fernet: encrypted and authenticated) in an HttpOnly, SameSite=Strict
cookie scoped to the match's API path. No JSON answer, page, URL or log line holds a token:
the browser cannot read it, another site cannot send it, and a gateway restarted, or another
gateway process holding the same key file, opens it again. Every POST is checked to come from
this site (Sec-Fetch-Site, else Origin) and to carry a JSON body; nothing else a browser sends
is passed upstream but checked values.

A browser signed in with a registered player (accounts.py) holds that player's token sealed the
same way, in a cookie sent to the players' API alone: each seat it takes then is the player's
(JoinMatch's `player_token`), and a rated match is created only for a browser so signed in.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import grpc
from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bergen.api.state import state_dir
from bergen.cli_client.connect import bearer, reason_of
from bergen.domain.rules import CLOCK_RANGES
from bergen.v1 import bergen_pb2 as pb

from .app import (
    HTTP_OF,
    RETRY_MS,
    SECURITY_HEADERS,
    EventStream,
    checked_id,
    error_answer,
    gateway_of,
    handled,
    next_items,
    resume_point,
)
from .computer import ComputerSeats, ComputerSeatsError, SeatingFailed
from .hubs import CALL_TIMEOUT_S, JSON, sse, to_json
from .limits import limiter_of, spend
from .tokens import SeatKeys

SEAL_KEY_NAME = "web-seal.key"
"""The seal key file's name in the state directory (`bergen web --seal-key-file` overrides)."""
COOKIE_PREFIX = "bergen_seat_"
MARK_PREFIX = "bergen_seated_"
"""A cookie the page's script may read (it holds no secret, only "1"): this browser holds a
seat in the match, so the match page asks for the seat's view instead of being refused it."""
PLAYER_COOKIE = "bergen_player"
"""The sealed player token of the registered player this browser is signed in as, sent only to
the players' API (PLAYER_PATH)."""
PLAYER_MARK = "bergen_player_in"
"""A cookie the pages' scripts may read (it holds no secret, only "1"): this browser is signed in
with a player, so a page asks who (`GET /api/play/me`)."""
PLAYER_PATH = "/api/play"
SIGNED_IN_AS = "player:"
"""A sealed player is a Held whose match id is this and the player's id: no match id has this
form, so it never opens as a seat or an entrant."""
COOKIE_MAX_AGE_S = 30 * 86400
MAX_BODY_BYTES = 4096
MAX_NAME = 64
MAX_MATCH_NAME = 100
MAX_CLOCK_S = 24 * 3600
TILE = re.compile(r"([0-6])-([0-6])")
POLICY = re.compile(r"[a-z][a-z0-9_-]{0,31}")
PRESETS = {
    "standard": pb.PRESET_STANDARD,
    "american": pb.PRESET_AMERICAN,
    "pips": pb.PRESET_PIPS,
    "eastern": pb.PRESET_EASTERN,
}
ON_TIMEOUT = {"autoplay": pb.ON_TIMEOUT_AUTOPLAY, "forfeit": pb.ON_TIMEOUT_FORFEIT}
"""What a timeout does, as the creation's clock names it (RULES.md section 11)."""
CLOCK_KEYS = ("initial_s", "increment_s", "on_timeout", "timeouts_to_forfeit")
CLOCK_SHAPE = "{initial_s, increment_s, on_timeout, timeouts_to_forfeit}"
END_OF = {"left": pb.END_LEFT, "right": pb.END_RIGHT, None: pb.END_UNSPECIFIED}
END_WORD = {pb.END_LEFT: "left", pb.END_RIGHT: "right", pb.END_UNSPECIFIED: None}
STATUS_OF_REASON = {
    "STALE_VERSION": 409,
    "CONTENDED": 409,
    "NOT_YOUR_TURN": 409,
    "MATCH_NOT_IN_PROGRESS": 409,
    "MATCH_NOT_SEATING": 409,
    "SEAT_TAKEN": 409,
    "NAME_TAKEN": 409,  # ALREADY_EXISTS for a player's name
    "CLOCK_EXPIRED": 409,
    # A seat or an entrant with all the codes for other devices it may have.
    "TOO_MANY_HAND_OFFS": 429,
    "HAND_OFF_LIMIT": 429,
    "ILLEGAL_PLAY": 422,
    # Every reason the rules give an illegal play (domain.errors.IllegalPlay).
    "TILE_DOES_NOT_FIT": 422,
    "TILE_NOT_HELD": 422,
    "MUST_PLAY_DRAWN_TILE": 422,
    "END_REQUIRED": 422,
    "RULE_VIOLATION": 422,
}
"""The status of a refusal the game server names (its ErrorInfo reason)."""


class Refused(Exception):
    """A player's request refused here, before or after the game server saw it."""

    def __init__(self, status: int, message: str, code: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


@dataclass(frozen=True)
class Held:
    """A seat as the browser's cookie holds it, once opened; for a tournament's entrant,
    also its client seed, which the gateway reveals after the start (`client_seed`)."""

    match_id: str
    seat: int
    token: str
    client_seed: str | None = None


def new_token() -> str:
    """A fresh seat token, as JoinMatchRequest.seat_token asks (43 random URL-safe bytes)."""
    return "bgs_" + secrets.token_urlsafe(32)


def default_seal_key_file() -> Path:
    """Where a gateway keeps its seal key when not told: the state directory's web-seal.key."""
    return state_dir() / SEAL_KEY_NAME


class Sealer:
    """Seals a held seat for a cookie and opens it again. The key file holds one Fernet key a
    line: the first seals, every one opens (put a new key first to rotate)."""

    def __init__(self, keys: list[bytes]) -> None:
        self._fernet = MultiFernet([Fernet(k) for k in keys])
        self.keys = SeatKeys(keys)
        """The seat tokens the same keys derive (`bergen.cli_client.web.tokens`)."""

    @classmethod
    def from_file(cls, path: Path) -> Sealer:
        """The keys of `path`, which is created (mode 0600, with a new key) when missing.
        Raises OSError or ValueError (a line that is no Fernet key)."""
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                pass  # another gateway process made it first
            else:
                with os.fdopen(fd, "wb") as f:
                    f.write(Fernet.generate_key() + b"\n")
        keys = [line.strip() for line in path.read_bytes().splitlines() if line.strip()]
        if not keys:
            raise ValueError(f"{path}: no key in it")
        return cls(keys)

    def seal(self, held: Held) -> str:
        fields: dict[str, object] = {"m": held.match_id, "s": held.seat, "t": held.token}
        if held.client_seed is not None:
            fields["c"] = held.client_seed
        return self._fernet.encrypt(json.dumps(fields).encode()).decode()

    def open(self, sealed: str) -> Held | None:
        """The seat a cookie holds; None for one this gateway's keys did not seal."""
        try:
            data = json.loads(self._fernet.decrypt(sealed.encode()))
            seed = data.get("c")
            if seed is not None and not isinstance(seed, str):
                return None
            return Held(str(data["m"]), int(data["s"]), str(data["t"]), seed)
        except (InvalidToken, ValueError, KeyError, TypeError, AttributeError):
            return None


Done = tuple[JSON, int, "Held"]
"""What creating or joining did: the answer, its status, and the seat the browser now holds."""


class Requests:
    """Creations and joins by the page's own id for each request (`request` in the body), for
    REQUEST_TTL_S: the same request again (a double click, a resend) gets what the first did,
    even while that one is still under way, and takes no second seat or match. Kept by client
    and in this gateway process."""

    def __init__(self) -> None:
        self._done: OrderedDict[tuple[str, str, str], tuple[asyncio.Future[Done], float]] = (
            OrderedDict()
        )

    def get(self, key: tuple[str, str, str]) -> asyncio.Future[Done] | None:
        now = time.monotonic()
        while self._done:
            first = next(iter(self._done.values()))
            if first[1] > now and len(self._done) < REQUESTS_KEPT:
                break
            self._done.popitem(last=False)
        found = self._done.get(key)
        return None if found is None else found[0]

    def start(self, key: tuple[str, str, str]) -> asyncio.Future[Done]:
        future: asyncio.Future[Done] = asyncio.get_running_loop().create_future()
        self._done[key] = (future, time.monotonic() + REQUEST_TTL_S)
        return future

    def forget(self, key: tuple[str, str, str]) -> None:
        self._done.pop(key, None)


REQUEST_ID = re.compile(r"[A-Za-z0-9_-]{16,64}")
REQUEST_TTL_S = 600.0
REQUESTS_KEPT = 10_000


async def once(
    request: Request, body: dict[str, Any], kind: str, act: Callable[[], Awaitable[Done]]
) -> Response:
    """`act` (a creation or a join), answered with the seat's cookie; done once for the page's
    request id (`request`, when the body has one) from this client: a repeat gets the same
    answer and seat, and a refusal is refused alike."""
    rid = body.get("request")
    if rid is None:
        answer, status, held = await act()
    else:
        if not isinstance(rid, str) or not REQUEST_ID.fullmatch(rid):
            raise _bad(
                "request is the page's id for this request: 16 to 64 letters, digits, - or _"
            )
        limiter = limiter_of(request)
        key = (limiter.client(request), kind, rid)
        requests = players_of(request).requests
        future = requests.get(key)
        if future is None:
            future = requests.start(key)
            try:
                future.set_result(await act())
            except BaseException as e:
                requests.forget(key)  # a refused request may be sent again
                future.set_exception(e)
                future.exception()  # the waiters, if any, read it; none is required to
                raise
        answer, status, held = await asyncio.shield(future)
    response = json_answer(answer, status)
    set_seat_cookie(request, response, held)
    return response


@dataclass
class Players:
    """What the players' API keeps: the sealer, and the creations and joins done by the
    pages' request ids."""

    sealer: Sealer
    requests: Requests


def install(app: Any, seal_key_file: Path | str | None) -> list[Route]:
    """Set the players' state on `app` (and `app.state.computer` to None unless set) and
    return their routes. Raises OSError or ValueError for a seal key file that cannot be used."""
    path = Path(seal_key_file) if seal_key_file else default_seal_key_file()
    app.state.players = Players(Sealer.from_file(path), Requests())
    if not hasattr(app.state, "computer"):
        app.state.computer = None
    return [
        Route("/api/play/matches", guarded(spend("create")(create_match)), methods=["POST"]),
        Route("/api/play/matches/{id}", guarded(get_view), methods=["GET"]),
        Route("/api/play/matches/{id}/events", guarded(view_events), methods=["GET"]),
        Route("/api/play/matches/{id}/join", guarded(spend("join")(join_match)), methods=["POST"]),
        Route("/api/play/matches/{id}/play", guarded(play), methods=["POST"]),
        Route("/api/play/matches/{id}/resign", guarded(resign), methods=["POST"]),
    ]


# --- requests ------------------------------------------------------------------------------


def guarded(handler: Callable[[Request], Awaitable[Response]]) -> Callable[..., Any]:
    """`handler` with the gateway's error answers, a Refused as its status, and every POST
    checked to come from this site with a JSON body first."""

    async def checked(request: Request) -> Response:
        try:
            if request.method == "POST":
                _same_site(request)
            return await handler(request)
        except Refused as e:
            return _refusal(e)

    answered: Callable[..., Any] = handled(checked)
    return answered


def _refusal(e: Refused) -> JSONResponse:
    return error_answer(e.status, str(e), code=e.code)


def _same_site(request: Request) -> None:
    """Refuse (403) a POST another site's page made. A browser says where a request comes from
    in Sec-Fetch-Site, or at least in Origin; a client that sends neither is no browser, and a
    browser's cookie cannot be riding on it."""
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None:
        if fetch_site != "same-origin":
            raise Refused(403, "a request from another site is refused", "CROSS_SITE")
        return
    origin = request.headers.get("origin")
    host = request.headers.get("host", "")
    if origin is not None and (origin == "null" or urlsplit(origin).netloc != host):
        raise Refused(403, "a request from another site is refused", "CROSS_SITE")


async def read_body(request: Request) -> dict[str, Any]:
    """The request's JSON object. Raises Refused (400) for anything else."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        raise Refused(400, "the body must be JSON (Content-Type: application/json)", "BAD_REQUEST")
    raw = await request.body()
    if len(raw) > MAX_BODY_BYTES:
        raise Refused(400, f"the body is larger than {MAX_BODY_BYTES} bytes", "BAD_REQUEST")
    try:
        body = json.loads(raw or b"{}")
    except ValueError:
        raise Refused(400, "the body is not JSON", "BAD_REQUEST") from None
    if not isinstance(body, dict):
        raise Refused(400, "the body must be a JSON object", "BAD_REQUEST")
    return body


def _bad(message: str) -> Refused:
    return Refused(400, message, "BAD_REQUEST")


def no_player(what: str) -> Refused:
    """The refusal of `what` ("a rated match") to a browser signed in with no player."""
    return Refused(
        403, f"{what} is played by registered players: sign in with your player first", "NO_PLAYER"
    )


def checked_name(body: dict[str, Any], key: str = "name", limit: int = MAX_NAME) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value.strip():
        raise _bad(f"{key} is required: a text of 1 to {limit} characters")
    value = value.strip()
    if len(value) > limit or any(not c.isprintable() for c in value):
        raise _bad(f"{key} is 1 to {limit} printable characters")
    return value


def _int(body: dict[str, Any], key: str, low: int, high: int, default: int | None = None) -> int:
    value = body.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _bad(f"{key} is a whole number from {low} to {high}")
    return value


def clock_options(body: dict[str, Any]) -> pb.RuleOptions:
    """The rule options of the creation's `clock`: none, or a Fischer clock with what a
    timeout does (RULES.md section 11; each left out keeps the rules' default). Raises
    Refused (400) for anything else, or for a timeout's setting given beside the clock."""
    for key in CLOCK_KEYS[2:]:
        if key in body:
            raise _bad(f"{key} goes inside clock (timeouts are a clock's): {CLOCK_SHAPE}")
    options = pb.RuleOptions()
    clock = body.get("clock")
    if clock is None:
        return options
    if not isinstance(clock, dict):
        raise _bad(f"clock is null or {CLOCK_SHAPE}")
    unknown = sorted(str(k) for k in clock if k not in CLOCK_KEYS)
    if unknown:
        raise _bad(f"clock has no {unknown[0][:40]!r}: it is {CLOCK_SHAPE}")
    options.clock = pb.CLOCK_FISCHER
    options.clock_initial = _int(clock, "initial_s", 10, MAX_CLOCK_S)
    options.clock_increment = _int(clock, "increment_s", 0, 3600, 0)
    on_timeout = clock.get("on_timeout", "autoplay")
    if not isinstance(on_timeout, str) or on_timeout not in ON_TIMEOUT:
        raise _bad(
            'on_timeout is "autoplay" (the server plays for a seat whose clock fell) or '
            '"forfeit" (its side loses)'
        )
    if "on_timeout" in clock:
        options.on_timeout = ON_TIMEOUT[on_timeout]
    if "timeouts_to_forfeit" in clock:
        if on_timeout == "forfeit":
            raise _bad(
                "timeouts_to_forfeit is for on_timeout autoplay: with forfeit the first "
                "timeout forfeits"
            )
        _, low, high = CLOCK_RANGES["timeouts_to_forfeit"]
        options.timeouts_to_forfeit = _int(clock, "timeouts_to_forfeit", low, high)
    return options


def match_id_of(request: Request) -> str:
    return checked_id(request)


def players_of(request: Request) -> Players:
    players: Players = request.app.state.players
    return players


def _cookie_name(match_id: str) -> str:
    return COOKIE_PREFIX + match_id


def open_sealed(request: Request, name: str, owner: str) -> Held | None:
    """What the sealed cookie `name` holds, when this gateway's keys sealed it for `owner`
    (the match id, or a tournament's mark for an entrant); else None."""
    sealed = request.cookies.get(name)
    if not sealed:
        return None
    held = players_of(request).sealer.open(sealed)
    return held if held is not None and held.match_id == owner else None


def _held(request: Request, match_id: str) -> Held | None:
    return open_sealed(request, _cookie_name(match_id), match_id)


def seated_in(request: Request, match_id: str) -> Held:
    held = _held(request, match_id)
    if held is None:
        raise Refused(403, "this browser holds no seat in this match", "NO_SEAT")
    return held


def set_sealed(
    request: Request, response: Response, held: Held, *, name: str, path: str, mark: str,
    page: str,
) -> None:  # fmt: skip
    """Set `held` sealed in the HttpOnly cookie `name`, sent only to the API `path`, and the
    page's readable mark `mark` ("1", no secret) on the pages under `page`."""
    secure = request.url.scheme == "https"
    sealed = players_of(request).sealer.seal(held)
    response.set_cookie(
        name, sealed, max_age=COOKIE_MAX_AGE_S, path=path, secure=secure, httponly=True,
        samesite="strict",
    )  # fmt: skip
    response.set_cookie(
        mark, "1", max_age=COOKIE_MAX_AGE_S, path=page, secure=secure, samesite="strict"
    )


def set_seat_cookie(request: Request, response: Response, held: Held) -> None:
    match_id = held.match_id
    set_sealed(
        request, response, held, name=_cookie_name(match_id),
        path=f"/api/play/matches/{match_id}", mark=MARK_PREFIX + match_id, page="/match",
    )  # fmt: skip


def signed_in(request: Request) -> Held | None:
    """The registered player this browser is signed in as (its id after SIGNED_IN_AS in
    `match_id`, its player token as `token`), when this gateway's keys sealed it; else None."""
    sealed = request.cookies.get(PLAYER_COOKIE)
    if not sealed:
        return None
    held = players_of(request).sealer.open(sealed)
    if held is None or not held.match_id.startswith(SIGNED_IN_AS):
        return None
    return held


def player_id_of(held: Held) -> str:
    """The player id of a signed-in player (`signed_in`)."""
    return held.match_id.removeprefix(SIGNED_IN_AS)


def set_player_cookie(request: Request, response: Response, player_id: str, token: str) -> None:
    """Sign this browser in as the player `player_id` of `token` (checked upstream first)."""
    held = Held(SIGNED_IN_AS + player_id, 0, token)
    set_sealed(
        request, response, held, name=PLAYER_COOKIE, path=PLAYER_PATH, mark=PLAYER_MARK, page="/"
    )


def clear_player_cookie(request: Request, response: Response) -> None:
    """Sign this browser out: both of its player's cookies gone."""
    secure = request.url.scheme == "https"
    response.delete_cookie(
        PLAYER_COOKIE, path=PLAYER_PATH, secure=secure, httponly=True, samesite="strict"
    )
    response.delete_cookie(PLAYER_MARK, path="/", secure=secure, samesite="strict")


def seat_name(body: dict[str, Any], player: Held | None) -> str:
    """The name a seat or an entrant is taken under: none when a player is signed in (the
    server names it by the player's name), else the body's `name`."""
    return "" if player is not None else checked_name(body)


def match_link(request: Request, match_id: str) -> str:
    return f"{str(request.base_url).rstrip('/')}/match?id={match_id}"


async def call_upstream(request: Request, name: str, message: Any, token: str | None = None) -> Any:
    """Call the game server, presenting `token` (a seat's) when given."""
    upstream = gateway_of(request).upstream
    upstream.calls[name] = upstream.calls.get(name, 0) + 1
    method: Callable[..., Coroutine[Any, Any, Any]] = getattr(upstream.stub, name)
    return await method(message, timeout=CALL_TIMEOUT_S, metadata=bearer(token))


def refused_upstream(e: grpc.aio.AioRpcError) -> Refused:
    """A refusal the game server gave a seat's request, with the status the players' API
    gives it (its reason's, else its code's)."""
    reason = reason_of(e)
    code = e.code()
    status = STATUS_OF_REASON.get(reason)
    if status is None:
        status = 409 if code == grpc.StatusCode.ABORTED else HTTP_OF.get(code, 502)
    return Refused(status, (e.details() or reason.lower())[:300], reason)


def player_view(view: pb.MatchView) -> JSON:
    """The seat's view as JSON, with `playable`: each legal tile ("3-5") and the ends it fits
    ("left", "right"; null for the lead, which takes no end)."""
    body = to_json(view)
    ends: dict[str, list[str | None]] = {}
    for p in view.legal_plays:
        ends.setdefault(f"{p.tile.low}-{p.tile.high}", []).append(END_WORD.get(p.end))
    body["playable"] = [{"tile": t, "ends": e} for t, e in ends.items()]
    return body


async def seat_view(request: Request, held: Held) -> pb.MatchView:
    try:
        reply: pb.GetMatchResponse = await call_upstream(
            request, "GetMatch", pb.GetMatchRequest(match_id=held.match_id), held.token
        )
    except grpc.aio.AioRpcError as e:
        raise refused_upstream(e) from None
    return reply.view


def json_answer(body: JSON, status: int = 200) -> JSONResponse:
    headers = dict(SECURITY_HEADERS)
    headers["Cache-Control"] = "no-store"
    return JSONResponse(body, status_code=status, headers=headers)


# --- handlers ------------------------------------------------------------------------------


async def create_match(request: Request) -> Response:
    """Create a match, seat its creator (this browser), and fill the seats asked of the
    computer."""
    body = await read_body(request)
    player = signed_in(request)
    rated = body.get("rated", False)
    if not isinstance(rated, bool):
        raise _bad("rated is true or false")
    if rated and player is None:
        raise no_player("a rated match")
    name = seat_name(body, player)
    match_name = checked_name(body, "match_name", MAX_MATCH_NAME) if body.get("match_name") else ""
    seats = _int(body, "seats", 2, 4)
    partnerships = body.get("partnerships", False)
    if not isinstance(partnerships, bool) or (partnerships and seats != 4):
        raise _bad("partnerships is true or false, and true needs 4 seats")
    preset = body.get("preset", "standard")
    if not isinstance(preset, str) or preset not in PRESETS:
        raise _bad(f"preset is one of {', '.join(PRESETS)}")
    options = clock_options(body)
    bots = _int(body, "bots", 0, seats - 1, 0)
    policy = body.get("bot_policy", "greedy")
    if not isinstance(policy, str) or not POLICY.fullmatch(policy):
        raise _bad("bot_policy is a policy's name (greedy, random, montecarlo, ismcts)")
    computer: ComputerSeats | None = getattr(request.app.state, "computer", None)
    if bots and computer is None:
        raise Refused(501, "computer seats are not available on this gateway", "NO_COMPUTER")

    async def create() -> Done:
        try:
            created: pb.CreateMatchResponse = await call_upstream(
                request,
                "CreateMatch",
                pb.CreateMatchRequest(
                    seats=seats,
                    partnerships=partnerships,
                    preset=PRESETS[preset],
                    options=options,
                    name=match_name,
                    rated=rated,
                ),
            )
            token = new_token()
            join = pb.JoinMatchRequest(
                match_id=created.match_id, seat=0, name=name, seat_token=token
            )
            if player is not None:
                join.player_token = player.token
            joined: pb.JoinMatchResponse = await call_upstream(request, "JoinMatch", join)
        except grpc.aio.AioRpcError as e:
            raise refused_upstream(e) from None
        held = Held(created.match_id, joined.seat, token)
        answer: JSON = {
            "match_id": held.match_id,
            "seat": held.seat,
            "link": match_link(request, held.match_id),
            "rated": rated,
        }
        if bots and computer is not None:
            try:
                # Its gRPC calls may wait (retried while the server is away): off the loop.
                filled = await asyncio.to_thread(
                    computer.fill, held.match_id, bots, policy, rated=rated
                )
            except (ValueError, ComputerSeatsError, SeatingFailed) as e:
                # The match stays open for people to take the seats the computer could not.
                answer["computer_error"] = str(e)[:300]
            else:
                answer["computer_seats"] = list(filled)
        return answer, 201, held

    return await once(request, body, "create", create)


async def join_match(request: Request) -> Response:
    """Take a seat for this browser, or give back the one it holds in this match."""
    match_id = match_id_of(request)
    body = await read_body(request)
    held = _held(request, match_id)
    if held is not None:
        view = await seat_view(request, held)
        if view.HasField("viewer_seat"):
            response = json_answer(
                {
                    "match_id": match_id,
                    "seat": view.viewer_seat,
                    "link": match_link(request, match_id),
                }
            )
            set_seat_cookie(request, response, held)
            return response
    player = signed_in(request)
    join = pb.JoinMatchRequest(
        match_id=match_id, name=seat_name(body, player), seat_token=new_token()
    )
    if player is not None:
        join.player_token = player.token
    if body.get("seat") is not None:
        join.seat = _int(body, "seat", 0, 3)

    async def take() -> Done:
        try:
            joined: pb.JoinMatchResponse = await call_upstream(request, "JoinMatch", join)
        except grpc.aio.AioRpcError as e:
            raise refused_upstream(e) from None
        held = Held(match_id, joined.seat, join.seat_token)
        answer: JSON = {
            "match_id": match_id,
            "seat": joined.seat,
            "link": match_link(request, match_id),
        }
        return answer, 201, held

    return await once(request, body, f"join:{match_id}", take)


async def get_view(request: Request) -> Response:
    """The seat's view: its own tiles, the others' counts, the line, the boneyard, scores,
    turn, clocks, version and its legal plays."""
    match_id = match_id_of(request)
    held = seated_in(request, match_id)
    return json_answer(player_view(await seat_view(request, held)))


async def play(request: Request) -> Response:
    """Play a tile for this browser's seat at the version its view showed."""
    match_id = match_id_of(request)
    held = seated_in(request, match_id)
    body = await read_body(request)
    tile = body.get("tile")
    found = TILE.fullmatch(tile) if isinstance(tile, str) else None
    if found is None:
        raise _bad('tile is its two numbers, "3-5"')
    a, b = int(found[1]), int(found[2])
    end = body.get("end")
    if end not in END_OF:
        raise _bad('end is "left", "right" or null')
    version = _int(body, "version", 0, 2**63 - 1)
    try:
        reply: pb.PlayResponse = await call_upstream(
            request,
            "Play",
            pb.PlayRequest(
                match_id=match_id,
                tile=pb.Tile(low=min(a, b), high=max(a, b)),
                end=END_OF[end],
                expected_version=version,
            ),
            held.token,
        )
    except grpc.aio.AioRpcError as e:
        raise refused_upstream(e) from None
    return json_answer(player_view(reply.view))


async def resign(request: Request) -> Response:
    """Resign for this browser's seat: its side forfeits."""
    match_id = match_id_of(request)
    held = seated_in(request, match_id)
    await read_body(request)
    try:
        reply: pb.ResignResponse = await call_upstream(
            request, "Resign", pb.ResignRequest(match_id=match_id), held.token
        )
    except grpc.aio.AioRpcError as e:
        raise refused_upstream(e) from None
    return json_answer(player_view(reply.view))


async def view_events(request: Request) -> Response:
    """The seat's view as Server-Sent Events: the view now (`id:` its version), then after
    each burst of the match the burst's public events (`id:` each seq) and the seat's view
    again, and `end` once the match has ended. A reconnect with Last-Event-ID gets the events
    it missed, then the view. Once the match has ended the view comes before the events: those
    read since show every hand, and the page knows the match is over before it reads them."""
    match_id = match_id_of(request)
    held = seated_in(request, match_id)
    after = resume_point(request)
    gw = gateway_of(request)
    limiter = limiter_of(request)
    lease = limiter.open_stream(limiter.client(request), f"match:{match_id}")
    # Following first, then the view: a burst after the view is queued, none missed between.
    hub, sub = await gw.matches.subscribe(match_id, lease.release)
    try:
        first = await seat_view(request, held)
    except BaseException:
        gw.matches.unsubscribe(hub, sub)
        raise

    async def fresh() -> bytes:
        return (await fresh_view())[0]

    async def fresh_view() -> tuple[bytes, bool]:
        try:
            view = await seat_view(request, held)
        except Refused:
            return b"", False
        return sse("view", player_view(view), view.version), view.phase == pb.PHASE_ENDED

    async def body() -> AsyncIterator[bytes]:
        try:
            yield f"retry: {RETRY_MS}\n\n".encode()
            sent = after
            ended = first.phase == pb.PHASE_ENDED
            if ended:
                yield sse("view", player_view(first), first.version)
            if after:
                async for item in hub.backlog(after):
                    sent = item.seq
                    yield item.wire
            if not ended:
                yield sse("view", player_view(first), first.version)
            sent = max(sent, first.version)
            while True:
                if sub.queue.empty() and hub.ended:
                    yield await fresh() + sse("end", {"ended": hub.error is None})
                    return
                for got in await next_items(sub.queue):
                    if got.kind == "burst":
                        parts = [p.wire for p in got.parts if p.seq > sent]
                        sent = max([sent, *(p.seq for p in got.parts)])
                        # A burst read after the end shows every hand: the ended view first.
                        view, ended = await fresh_view()
                        yield view + b"".join(parts) if ended else b"".join(parts) + view
                    elif got.kind == "keepalive":
                        yield got.wire
                    elif got.kind == "end":
                        if got.data.get("dropped"):
                            return
                        yield await fresh() + got.wire
                        return
        finally:
            gw.matches.unsubscribe(hub, sub)

    return EventStream(body(), lambda: gw.matches.unsubscribe(hub, sub))
