"""Carrying a seat, or a tournament entrant, to another device of the same player: a one-time
link (`/claim?code=...`) that sets the place's cookie on the device that opens it.

The code is the game server's (OfferHandOff), and so is its one use (ClaimHandOff): every
gateway process in front of that server, restarted or not, opens a link any of them made,
once among them all. What the server keeps for the code is a parcel this gateway sealed:
the place as its cookie holds it, sealed under the seal key every gateway process behind one
address shares. The server never sees the token, and a gateway with another key cannot open
the parcel. The code itself carries no token and nothing else secret.
"""

from __future__ import annotations

import time

import grpc
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from bergen.v1 import bergen_pb2 as pb

from .app import SECURITY_HEADERS, checked_id, handled
from .entrants import entered_in, player_asked, sealed_as, set_entry
from .limits import spend
from .players import (
    Held,
    call_upstream,
    guarded,
    json_answer,
    match_id_of,
    players_of,
    refused_upstream,
    seated_in,
    set_seat_cookie,
)

CODE_CHARS = 40
"""A code's length, as the game server makes them (OfferHandOff)."""
GONE = (
    "This link has been used, has expired or was never given. Ask for a new one on the device "
    "you made it on."
)
FOREIGN = (
    "This link was made by a site with another key: it cannot be opened here. Ask for a new "
    "one on the device you made it on."
)
UNREACHABLE = "The game server cannot be reached now: open the link again in a moment."


def routes() -> list[Route]:
    """The links for another device, a seat's and an entrant's, and their claim."""
    return [
        Route("/api/play/matches/{id}/link", guarded(link_seat), methods=["POST"]),
        Route("/api/play/tournaments/{id}/link", guarded(link_entrant), methods=["POST"]),
        Route("/claim", handled(spend("join")(claim)), methods=["GET"]),
    ]


async def _offer(request: Request, place: dict[str, str], held: Held) -> Response:
    """A link for `held`, the place `place` names for OfferHandOff, sealed as its cookie is."""
    parcel = players_of(request).sealer.seal(held).encode()
    try:
        made: pb.OfferHandOffResponse = await call_upstream(
            request, "OfferHandOff", pb.OfferHandOffRequest(parcel=parcel, **place), held.token
        )
    except grpc.aio.AioRpcError as e:
        raise refused_upstream(e) from None
    url = f"{str(request.base_url).rstrip('/')}/claim?code={made.code}"
    left = max(0, round(made.expires_at.seconds + made.expires_at.nanos / 1e9 - time.time()))
    return json_answer({"url": url, "expires_in_s": left}, 201)


async def link_seat(request: Request) -> Response:
    """A one-time link that seats another device of the same player (good for 10 minutes)."""
    match_id = match_id_of(request)
    return await _offer(request, {"match_id": match_id}, seated_in(request, match_id))


async def link_entrant(request: Request) -> Response:
    """A one-time link that carries one of this browser's entrant's players (`?player=`, else
    the first it holds) to another device of that player (good for 10 minutes)."""
    tid = checked_id(request)
    held = entered_in(request, tid)
    return await _offer(request, {"tournament_id": tid}, held[player_asked(request, held)])


def _page(text: str, status: int) -> Response:
    return PlainTextResponse(
        text, status_code=status, headers={**SECURITY_HEADERS, "Cache-Control": "no-store"}
    )


def _go(location: str) -> RedirectResponse:
    return RedirectResponse(
        location, status_code=303, headers={**SECURITY_HEADERS, "Cache-Control": "no-store"}
    )


async def claim(request: Request) -> Response:
    """Trade a one-time code for its place's cookie, and go to the match (or the
    tournament)."""
    code = request.query_params.get("code", "")
    if len(code) != CODE_CHARS:
        return _page(GONE, 410)
    try:
        got: pb.ClaimHandOffResponse = await call_upstream(
            request, "ClaimHandOff", pb.ClaimHandOffRequest(code=code)
        )
    except grpc.aio.AioRpcError as e:
        if e.code() in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT):
            return _page(GONE, 410)
        refused = refused_upstream(e)
        return _page(UNREACHABLE if refused.status >= 500 else str(refused), refused.status)
    held = players_of(request).sealer.open(got.parcel.decode("ascii", "replace"))
    place = got.WhichOneof("place")
    if held is not None and place == "seat":
        seat = got.seat
        if (held.match_id, held.seat) == (seat.match_id, seat.seat):
            response = _go(f"/match?id={seat.match_id}")
            set_seat_cookie(request, response, held)
            return response
    elif held is not None and place == "entrant":
        entrant = got.entrant
        tid = entrant.tournament_id
        if (held.match_id, held.seat) == (sealed_as(tid, entrant.player), entrant.entrant):
            also = f"&player={entrant.player}" if entrant.player else ""
            response = _go(f"/tournament?id={tid}{also}")
            set_entry(request, response, tid, entrant.player, held)
            return response
    # Spent now, but of no use here: a parcel another key sealed, or not this place's.
    return _page(FOREIGN, 410)
