"""The entrants' API of the gateway: register for a tournament from the browser, follow "my
tournament" (my entrant, my table now, a bye, the countdown to the next round, the
standings), and withdraw.

A browser signed in with a registered player enters as that player (RegisterEntrant's
`registered_player_tokens`), which a rated tournament requires.

The gateway makes the entrant's token itself (RegisterEntrant's `player_tokens`) and hands it
to the browser only sealed, as the players' API holds a seat: an HttpOnly, SameSite=Strict
cookie scoped to the tournament's API path, opened only by this gateway's keys. The token is
the entrant's seat token in every match of the tournament, so when a round seats the entrant
the gateway also sets that match's seat cookie (the players' API's own), and the match page
opens as that seat's. No answer, page, URL or log line holds the token.

Partnership tournaments, whose entrants are pairs with a token each, are registered with
`bergen play --tournament`: one browser registers one player.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from typing import Any

import grpc
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bergen.cli_client.tournament_play import standings_rows
from bergen.v1 import bergen_pb2 as pb

from .app import checked_id
from .hubs import JSON
from .limits import spend
from .players import (
    Held,
    Refused,
    call_upstream,
    guarded,
    json_answer,
    new_token,
    open_sealed,
    read_body,
    refused_upstream,
    seat_name,
    set_sealed,
    set_seat_cookie,
    signed_in,
)

ENTRANT_PREFIX = "bergen_entrant_"
"""The sealed entrant's cookie, one per tournament, sent only to its API path."""
ENTERED_PREFIX = "bergen_entered_"
"""A cookie the page's script may read (it holds no secret, only "1"): this browser holds an
entrant of the tournament, so the tournament page asks for "my tournament"."""
SEALED_AS = "tournament:"
"""A sealed entrant is a Held whose match id is this and the tournament's id, and whose seat is
the entrant's number: no match id has this form, so it never opens as a seat."""
ROUND_ENDS_KEPT = 10_000
PHASE_WORD = {
    pb.TOURNAMENT_PHASE_REGISTRATION: "registration",
    pb.TOURNAMENT_PHASE_RUNNING: "running",
    pb.TOURNAMENT_PHASE_ENDED: "ended",
}


class RoundEnds:
    """When this gateway first saw each round of a tournament over (every table with its
    result), the start of the countdown to the next round. The server keeps the exact moment
    to itself; the page's stream makes the gateway look within moments of the last result."""

    def __init__(self) -> None:
        self._seen: OrderedDict[tuple[str, int], float] = OrderedDict()

    def seen(self, tournament_id: str, round_number: int) -> float:
        """The wall-clock time the round was first seen over (now, the first time asked)."""
        key = (tournament_id, round_number)
        first = self._seen.get(key)
        if first is None:
            first = self._seen[key] = time.time()
            while len(self._seen) > ROUND_ENDS_KEPT:
                self._seen.popitem(last=False)
        return first


def routes(app: Any) -> list[Route]:
    """Keep the rounds' ends on `app` and return the entrants' routes."""
    app.state.round_ends = RoundEnds()
    base = "/api/play/tournaments/{id}"
    return [
        Route(f"{base}/register", guarded(spend("join")(register)), methods=["POST"]),
        Route(base, guarded(my_tournament), methods=["GET"]),
        Route(f"{base}/withdraw", guarded(withdraw), methods=["POST"]),
    ]


# --- the entrant's cookie ------------------------------------------------------------------


def _cookie_name(tournament_id: str) -> str:
    return ENTRANT_PREFIX + tournament_id


def _entry(request: Request, tournament_id: str) -> Held | None:
    """The entrant this browser holds in the tournament (its number as `seat`), if any."""
    return open_sealed(request, _cookie_name(tournament_id), SEALED_AS + tournament_id)


def _entered(request: Request, tournament_id: str) -> Held:
    held = _entry(request, tournament_id)
    if held is None:
        raise Refused(403, "this browser holds no entrant in this tournament", "NO_ENTRANT")
    return held


def _set_entry(request: Request, response: Response, tournament_id: str, held: Held) -> None:
    set_sealed(
        request, response, held, name=_cookie_name(tournament_id),
        path=f"/api/play/tournaments/{tournament_id}", mark=ENTERED_PREFIX + tournament_id,
        page="/tournament",
    )  # fmt: skip


async def _tournament(
    request: Request, tournament_id: str, token: str | None
) -> pb.GetTournamentResponse:
    try:
        reply: pb.GetTournamentResponse = await call_upstream(
            request, "GetTournament", pb.GetTournamentRequest(tournament_id=tournament_id), token
        )
    except grpc.aio.AioRpcError as e:
        raise refused_upstream(e) from None
    return reply


# --- "my tournament" -----------------------------------------------------------------------


def _table_of(view: pb.TournamentView, where: pb.TournamentAssignment) -> pb.TournamentTable | None:
    for r in view.rounds:
        if r.round == where.round:
            for t in r.tables:
                if t.table == where.table:
                    return t
    return None


def _next_round(view: pb.TournamentView, ends: RoundEnds) -> JSON | None:
    """The next round while none is in play: its number, whether the organiser starts it by
    hand, and else the seconds left of the round delay (as this gateway counts them)."""
    if view.phase != pb.TOURNAMENT_PHASE_RUNNING or not view.rounds:
        return None
    if view.round >= view.total_rounds:
        return None
    latest = view.rounds[-1]
    if any(t.match_id and not t.HasField("result") for t in latest.tables):
        return None
    by_hand = view.settings.rounds_by_hand
    delay = view.settings.round_delay
    left = 0.0
    if not by_hand:
        left = max(0.0, delay - (time.time() - ends.seen(view.tournament_id, latest.round)))
    return {"round": view.round + 1, "by_hand": by_hand, "starts_in_s": round(left, 1)}


def mine(reply: pb.GetTournamentResponse, entrant: int, ends: RoundEnds) -> JSON:
    """ "My tournament" as JSON: the entrant, its table now (`playing` until its result), its
    bye in the latest round, the next round's countdown and the standings. Holds no token and
    no tile."""
    view, where = reply.tournament, reply.assignment
    me = next((e for e in view.entrants if e.entrant == entrant), None)
    table: JSON | None = None
    if where.match_id:
        found = _table_of(view, where)
        table = {
            "match_id": where.match_id,
            "seat": where.seat,
            "round": where.round,
            "table": where.table,
            "sides": list(found.sides) if found is not None else [],
            "playing": found is not None and not found.HasField("result"),
        }
    latest = view.rounds[-1] if view.rounds else None
    bye = latest.round if latest is not None and entrant in latest.byes else None
    standings = standings_rows(view)
    placed = next((row for row in standings if row["entrant"] == entrant), None)
    withdrawn = me is not None and me.HasField("withdrawn_after_round")
    return {
        "tournament_id": view.tournament_id,
        "name": view.name,
        "phase": PHASE_WORD.get(view.phase, "unknown"),
        "cancelled": view.cancelled,
        "round": view.round,
        "total_rounds": view.total_rounds,
        "version": view.version,
        "entrant": entrant,
        "players": list(me.players) if me is not None else [],
        "withdrawn": withdrawn,
        "table": table,
        "bye": bye,
        "next_round": _next_round(view, ends),
        "rank": placed["rank"] if placed is not None else None,
        "standings": standings,
    }


def _ends(request: Request) -> RoundEnds:
    ends: RoundEnds = request.app.state.round_ends
    return ends


# --- handlers ------------------------------------------------------------------------------


async def register(request: Request) -> Response:
    """Register this browser's player as an entrant, or give back the entrant it holds."""
    tid = checked_id(request)
    body = await read_body(request)
    held = _entry(request, tid)
    if held is not None:
        reply = await _tournament(request, tid, held.token)
        if reply.HasField("assignment") and reply.assignment.entrant == held.seat:
            response = json_answer({"tournament_id": tid, "entrant": held.seat})
            _set_entry(request, response, tid, held)
            return response
    player = signed_in(request)
    token = new_token()
    entry = pb.RegisterEntrantRequest(
        tournament_id=tid,
        players=[seat_name(body, player)],
        # Drawn here, for this entrant alone: the server learns it at once, as
        # RegisterEntrant asks, and keeps only its commitment until the start.
        client_seed=secrets.token_hex(16),
        player_tokens=[token],
    )
    if player is not None:  # the entrant is the browser's registered player
        entry.registered_player_tokens.append(player.token)
    try:
        got: pb.RegisterEntrantResponse = await call_upstream(request, "RegisterEntrant", entry)
    except grpc.aio.AioRpcError as e:
        raise refused_upstream(e) from None
    held = Held(SEALED_AS + tid, got.entrant, token)
    response = json_answer({"tournament_id": tid, "entrant": got.entrant}, 201)
    _set_entry(request, response, tid, held)
    return response


async def my_tournament(request: Request) -> Response:
    """ "My tournament"; while a round seats this browser's entrant at a table in play, the
    answer also sets that match's seat cookie, so that the match page opens as its seat."""
    tid = checked_id(request)
    held = _entered(request, tid)
    reply = await _tournament(request, tid, held.token)
    if not reply.HasField("assignment") or reply.assignment.entrant != held.seat:
        raise Refused(403, "this browser's entrant is not known to the tournament", "NO_ENTRANT")
    body = mine(reply, held.seat, _ends(request))
    response = json_answer(body)
    table = body["table"]
    if isinstance(table, dict) and table["playing"]:
        where = reply.assignment
        set_seat_cookie(request, response, Held(where.match_id, where.seat, held.token))
    return response


async def withdraw(request: Request) -> Response:
    """Withdraw this browser's entrant: it is paired no more (a match of its in play goes on)."""
    tid = checked_id(request)
    held = _entered(request, tid)
    await read_body(request)
    try:
        got: pb.WithdrawEntrantResponse = await call_upstream(
            request,
            "WithdrawEntrant",
            pb.WithdrawEntrantRequest(tournament_id=tid, entrant=held.seat),
            held.token,
        )
    except grpc.aio.AioRpcError as e:
        raise refused_upstream(e) from None
    return json_answer({"tournament_id": tid, "entrant": held.seat, "after_round": got.after_round})
