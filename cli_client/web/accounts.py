"""Registered players in the browser: register one, sign in with one's player token, see who
this browser plays as, and sign out.

A browser signed in holds its player's token sealed in an HttpOnly, SameSite=Strict cookie sent
to the players' API alone (players.py `set_player_cookie`), as a seat's token is held: each
match it creates or joins, and each tournament it enters, then seats that player (and a rated
one asks for it). The token is shown once, in the answer that registers the player, for the
person to keep: it is the only way back to the player on another browser, and the server keeps
only a keyed hash of it. No other answer, page, URL or log line holds it.

Signing in checks the token upstream first (GetPlayer by token): a wrong secret and a token of
no player get one and the same answer. Registrations and sign-ins count against the client's
`--client-registers` a minute.
"""

from __future__ import annotations

from typing import Any

import grpc
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bergen.v1 import bergen_pb2 as pb

from .hubs import JSON, to_json
from .limits import spend
from .players import (
    Refused,
    call_upstream,
    clear_player_cookie,
    guarded,
    json_answer,
    player_id_of,
    read_body,
    refused_upstream,
    set_player_cookie,
    signed_in,
)

MAX_PLAYER_NAME = 24
MAX_TOKEN_CHARS = 200
"""Longer than any player token: what a browser sends beyond it is refused here."""
TOKEN_INVALID = "this is not a player's token: check that it was pasted whole"


def routes() -> list[Route]:
    """The routes of registering, signing in and out."""
    return [
        Route("/api/play/players", guarded(spend("register")(register)), methods=["POST"]),
        Route("/api/play/me", guarded(me), methods=["GET"]),
        Route("/api/play/me", guarded(spend("register")(sign_in)), methods=["POST"]),
        Route("/api/play/me/sign-out", guarded(sign_out), methods=["POST"]),
    ]


def _signed_in_answer(reply: pb.GetPlayerResponse) -> JSON:
    body = to_json(reply)
    body["signed_in"] = True
    return body


async def register(request: Request) -> Response:
    """Register a player (a person: `bot` false) and sign this browser in as it. The answer
    holds the player token, this once."""
    body = await read_body(request)
    name = body.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > 4 * MAX_PLAYER_NAME:
        raise Refused(400, f"name is required: 1 to {MAX_PLAYER_NAME} characters", "BAD_REQUEST")
    try:
        got: pb.RegisterPlayerResponse = await call_upstream(
            request, "RegisterPlayer", pb.RegisterPlayerRequest(name=name, bot=False)
        )
    except grpc.aio.AioRpcError as e:
        raise refused_upstream(e) from None
    answer: JSON = {
        "player_id": got.player_id,
        "name": got.name,
        "bot": False,
        "player_token": got.player_token,
    }
    response = json_answer(answer, 201)
    set_player_cookie(request, response, got.player_id, got.player_token)
    return response


async def me(request: Request) -> Response:
    """Who this browser plays as: `{signed_in: false}`, or `{signed_in: true, player, ratings}`
    (GetPlayerResponse) read now."""
    held = signed_in(request)
    if held is None:
        return json_answer({"signed_in": False})
    try:
        reply: pb.GetPlayerResponse = await call_upstream(
            request, "GetPlayer", pb.GetPlayerRequest(player_id=player_id_of(held))
        )
    except grpc.aio.AioRpcError as e:
        raise refused_upstream(e) from None
    return json_answer(_signed_in_answer(reply))


async def sign_in(request: Request) -> Response:
    """Sign this browser in with a player token (`{player_token}`), checked upstream first."""
    body = await read_body(request)
    token: Any = body.get("player_token")
    if not isinstance(token, str) or not token.strip():
        raise Refused(
            400, "player_token is required: the token shown at registration", "BAD_REQUEST"
        )
    token = token.strip()
    if len(token) > MAX_TOKEN_CHARS:
        raise Refused(403, TOKEN_INVALID, "PLAYER_TOKEN_INVALID")
    try:
        reply: pb.GetPlayerResponse = await call_upstream(
            request, "GetPlayer", pb.GetPlayerRequest(player_token=token)
        )
    except grpc.aio.AioRpcError as e:
        refusal = refused_upstream(e)
        if refusal.code in ("PLAYER_TOKEN_INVALID", "INVALID_ARGUMENT", "INVALID_PLAYER_ID"):
            # One answer for every token that is not a player's, whatever the server said.
            raise Refused(403, TOKEN_INVALID, "PLAYER_TOKEN_INVALID") from None
        raise refusal from None
    response = json_answer(_signed_in_answer(reply))
    set_player_cookie(request, response, reply.player.player_id, token)
    return response


async def sign_out(request: Request) -> Response:
    """Forget this browser's player (its seats and entrants already taken stay its own)."""
    await read_body(request)
    response = json_answer({"signed_in": False})
    clear_player_cookie(request, response)
    return response
