"""Rematches: the people of an ended match play again, in the same seats, with the same rules.

The game server holds the rematch (CreateMatch with `rematch_of`; its id is derived from the
ended match's, `bergen.api.rematch`), so every gateway process holding the same seal key
serves it alike, and a restarted one has forgotten nothing. A seat holder proposes it once
the match has ended (`POST .../rematch`): the gateway asks the server for the rematch (the
first proposal creates it, every later one, from any seat through any gateway, is answered
the same match) and takes that browser's seat in it. Every other person accepts through the
same request, which takes their seat. A seat taken is a seat accepted, and the rematch starts,
as any match, when its last seat is taken.

The server keeps each seat of a rematch for whoever held it: the gateway joins with the old
seat's token as `previous_seat_token`, and with a new token derived from its seal key, the
rematch, the seat and the old token (`tokens.SeatKeys`), so the same person accepting twice,
from two devices or through two gateways, takes the seat once. The computer's seats: the
gateway whose proposal created the rematch (the server's answer is not `replayed`) finds
which seats of the ended match the computer played (their tokens derive from the key, and the
server says whether each one holds its seat) and has its own computer take them again, at the
strength their names give.

`GET .../rematch` tells a seat of the ended match where its rematch stands: none; proposed
(who has accepted, who is awaited); started; or failed (abandoned before its start by the
server's seating timeout: proposing again creates the next one). It hands a browser whose
seat has accepted that seat's cookie in the rematch.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import grpc
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bergen.api.rematch import MAX_ATTEMPTS, rematch_id
from bergen.domain.deciders import POLICY_NAMES
from bergen.v1 import bergen_pb2 as pb

from .computer import ComputerSeats, ComputerSeatsError, SeatingFailed
from .hubs import JSON
from .limits import spend
from .players import (
    Held,
    call_upstream,
    guarded,
    json_answer,
    match_id_of,
    match_link,
    players_of,
    read_body,
    refused_upstream,
    seat_view,
    seated_in,
    set_seat_cookie,
)

COMPUTER_NAME = re.compile(r"computer (\d) \(([a-z]+)\)")
COMPUTER_PLAYER_NAME = re.compile(r"([a-z]+) bot \d+(?: [0-9a-f]{4})?")
"""The name of one of the computer's registered players (`computer.computer_player_name`)."""
"""The name the gateway gives a computer seat (`computer.computer_name`): its strength."""
REFUSED_TOKEN = (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED)


def install(app: Any) -> list[Route]:
    """The rematch routes (they keep nothing: the game server holds the rematches)."""
    return [
        Route("/api/play/matches/{id}/rematch", guarded(rematch_state), methods=["GET"]),
        Route(
            "/api/play/matches/{id}/rematch",
            guarded(spend("join")(propose_or_accept)),
            methods=["POST"],
        ),
    ]


def _abandoned_unstarted(view: pb.MatchView) -> bool:
    """Whether a rematch ended before its first deal: abandoned while it waited for seats."""
    return view.phase == pb.PHASE_ENDED and view.hand_number == 0


async def _view(request: Request, match_id: str, token: str | None = None) -> pb.MatchView | None:
    """The match's view (a spectator's without `token`), None when there is no such match.
    Raises Refused for any other refusal; grpc.aio.AioRpcError for a refused `token`."""
    try:
        reply: pb.GetMatchResponse = await call_upstream(
            request, "GetMatch", pb.GetMatchRequest(match_id=match_id), token
        )
    except grpc.aio.AioRpcError as e:
        if e.code() == grpc.StatusCode.NOT_FOUND:
            return None
        if token is not None and e.code() in REFUSED_TOKEN:
            raise
        raise refused_upstream(e) from None
    return reply.view


async def _latest(request: Request, old_id: str) -> pb.MatchView | None:
    """The rematch of `old_id` as a spectator sees it: the latest one asked for (one abandoned
    before its start is followed by the next), None when none was."""
    latest = None
    for attempt in range(1, MAX_ATTEMPTS + 1):
        found = await _view(request, rematch_id(old_id, attempt))
        if found is None:
            break
        latest = found
        if not _abandoned_unstarted(found):
            break
    return latest


async def _holds(request: Request, mine: Held) -> bool:
    """Whether `mine`'s token holds its seat of its match."""
    try:
        view = await _view(request, mine.match_id, mine.token)
    except grpc.aio.AioRpcError:  # the token holds no seat there
        return False
    return view is not None and view.HasField("viewer_seat") and view.viewer_seat == mine.seat


def _state(request: Request, rematch: pb.MatchView | None, mine: bool) -> JSON:
    """Where the rematch stands for a seat of the ended match; `mine`: that seat has accepted
    it, with the token this gateway derives for it."""
    if rematch is None:
        return {"state": "none", "accepted": [], "waiting_for": [], "you_accepted": False}
    accepted = [s.seat for s in rematch.seats if s.taken]
    body: JSON = {
        "accepted": accepted,
        "waiting_for": [s.seat for s in rematch.seats if not s.taken],
        "you_accepted": mine,
        "match_id": rematch.match_id,
        "link": match_link(request, rematch.match_id),
    }
    if _abandoned_unstarted(rematch):
        body["state"] = "failed"
        body["you_accepted"] = False
        note = rematch.result.note or "abandoned"
        body["error"] = f"the rematch did not start before every seat accepted ({note[:200]})"
    else:
        body["state"] = "proposed" if rematch.phase == pb.PHASE_SEATING else "started"
    return body


def _mine(request: Request, new_id: str, held: Held) -> Held:
    """The seat `held` (of the ended match) has in its rematch `new_id`, with its token."""
    keys = players_of(request).sealer.keys
    return Held(new_id, held.seat, keys.rematch(new_id, held.seat, held.token))


async def rematch_state(request: Request) -> Response:
    """The rematch of this match: none, proposed (who has accepted, who is awaited), started
    or failed; with this seat's cookie in it once this seat has accepted."""
    match_id = match_id_of(request)
    held = seated_in(request, match_id)
    rematch = await _latest(request, match_id)
    mine: Held | None = None
    if rematch is not None and not _abandoned_unstarted(rematch):
        seats = rematch.seats
        if held.seat < len(seats) and seats[held.seat].taken:
            candidate = _mine(request, rematch.match_id, held)
            mine = candidate if await _holds(request, candidate) else None
    response = json_answer(_state(request, rematch, mine is not None))
    if mine is not None:
        set_seat_cookie(request, response, mine)
    return response


async def propose_or_accept(request: Request) -> Response:
    """Propose a rematch of this ended match, or accept the one proposed: this seat taken in
    it. The proposal that creates it also has the computer take its seats again."""
    match_id = match_id_of(request)
    held = seated_in(request, match_id)
    await read_body(request)
    try:
        made: pb.CreateMatchResponse = await call_upstream(
            request, "CreateMatch", pb.CreateMatchRequest(rematch_of=match_id), held.token
        )
    except grpc.aio.AioRpcError as e:
        raise refused_upstream(e) from None
    old = await seat_view(request, held)
    error = "" if made.replayed else await _computer_again(request, made.match_id, old, held)
    mine = _mine(request, made.match_id, held)
    name = old.seats[held.seat].name if held.seat < len(old.seats) else ""
    join = pb.JoinMatchRequest(
        match_id=made.match_id,
        seat=held.seat,
        name=name or f"seat {held.seat + 1}",
        seat_token=mine.token,
        previous_seat_token=held.token,
    )
    try:
        await call_upstream(request, "JoinMatch", join)
    except grpc.aio.AioRpcError as e:
        raise refused_upstream(e) from None
    body = _state(request, await _view(request, made.match_id), True)
    if error:
        body["error"] = error
    response = json_answer(body)
    set_seat_cookie(request, response, mine)
    return response


def _computer_policy(s: pb.SeatInfo) -> str | None:
    """The policy the computer played seat `s` with, by its name: `computer 2 (greedy)`, or,
    in a rated match, one of the computer's own bot players (`greedy bot 1`); None for a seat
    no such name says the computer held."""
    named = COMPUTER_NAME.fullmatch(s.name)
    if named is not None and int(named[1]) == s.seat + 1 and named[2] in POLICY_NAMES:
        return named[2]
    player = COMPUTER_PLAYER_NAME.fullmatch(s.name)
    if player is not None and s.bot and player[1] in POLICY_NAMES:
        return player[1]
    return None


async def _computer_again(request: Request, new_id: str, old: pb.MatchView, held: Held) -> str:
    """Have this gateway's computer take, in the rematch `new_id`, the seats it played in the
    ended match `old`. Returns why it took none (empty: it took them, or there were none)."""
    keys = players_of(request).sealer.keys
    played: dict[int, tuple[str, str]] = {}
    unknown: list[int] = []
    for s in old.seats:
        policy = _computer_policy(s)
        if s.seat == held.seat or policy is None:
            continue
        for token in keys.computer_candidates(old.match_id, s.seat):
            try:
                seen = await _view(request, old.match_id, token)
            except grpc.aio.AioRpcError:
                continue  # not the token the computer held this seat with
            if seen is not None and seen.HasField("viewer_seat") and seen.viewer_seat == s.seat:
                played[s.seat] = (token, policy)
                break
        else:
            unknown.append(s.seat)
    if unknown:
        # A computer seat whose token this gateway's key did not make (another key, or a
        # gateway of an earlier version): nobody can take it again, so the rematch waits.
        seats = ", ".join(str(seat + 1) for seat in unknown)
        return f"the computer cannot take seat {seats} again: its token is not this gateway's"
    if not played:
        return ""
    computer: ComputerSeats | None = getattr(request.app.state, "computer", None)
    if computer is None:
        return "this gateway has no computer to take its seats again"
    try:
        await asyncio.to_thread(computer.rematch, new_id, played)
    except (ValueError, ComputerSeatsError, SeatingFailed) as e:
        return f"the computer took no seat: {str(e)[:200]}"
    return ""
