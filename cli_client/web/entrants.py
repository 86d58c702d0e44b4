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

The entrant's client seed is drawn here too, and only its commitment is sent with the
registration (TOURNAMENT.md section 3): the seed is sealed in the entrant's cookies beside the
token. Once the organiser has started the tournament, "my tournament" asked during the reveal
phase reveals it (the entrant's page asks as soon as its stream shows the phase), then
answers. A browser that has lost its cookies cannot reveal: its entrant is withdrawn before
round 1, as the rules say.

At partnership tables an entrant is two players with a token each (RegisterEntrant's
`players` and `player_tokens`, as `bergen play --tournament --register --partner` sends them),
each seated in its own seat of the entrant's side. The browser that registers holds both, each
in a cookie of its own, and "my tournament" is asked as one of them (`?player=0` or `1`, as
`bergen play --tournament --player` chooses): its table, its seat, and that seat's cookie. A
player's cookie stands alone, so that the partner's own device can hold the partner's alone:
a one-time hand-off of it (as the players' API's /link and /claim carry a seat) is to set the
partner's cookie there with `set_entry`, and nothing else changes.
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

from bergen.cli_client.tournament_play import TOO_LATE, needs_reveal, standings_rows
from bergen.domain.tournament_fairness import commitment
from bergen.v1 import bergen_pb2 as pb

from .app import checked_id
from .hubs import JSON
from .limits import spend
from .players import (
    Held,
    Refused,
    call_upstream,
    checked_name,
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
"""The sealed entrant's cookie (its first player's token), one per tournament, sent only to its
API path."""
PARTNER_PREFIX = "bergen_partner_"
"""At partnership tables, the sealed cookie of the entrant's second player."""
PLAYER_PREFIXES = (ENTRANT_PREFIX, PARTNER_PREFIX)
ENTERED_PREFIX = "bergen_entered_"
"""A cookie the page's script may read (it holds no secret, only "1"): this browser holds an
entrant of the tournament, so the tournament page asks for "my tournament"."""
SEALED_AS = "tournament:"
"""A sealed entrant's player is a Held whose match id is this and the tournament's id (and
`/1` for the second player), and whose seat is the entrant's number: no match id has this form,
so it never opens as a seat, nor one player's as the other's."""
PLAYER_WORD = ("first", "second")
ROUND_ENDS_KEPT = 10_000
PHASE_WORD = {
    pb.TOURNAMENT_PHASE_REGISTRATION: "registration",
    pb.TOURNAMENT_PHASE_REVEAL: "reveal",
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


# --- the entrant's cookies -----------------------------------------------------------------


def _cookie_name(tournament_id: str, player: int) -> str:
    return PLAYER_PREFIXES[player] + tournament_id


def sealed_as(tournament_id: str, player: int) -> str:
    return SEALED_AS + tournament_id + ("" if player == 0 else f"/{player}")


def held_players(request: Request, tournament_id: str) -> dict[int, Held]:
    """The players of an entrant of the tournament this browser holds (its number as each
    Held's `seat`), by player: none, one, or both of a pair."""
    found: dict[int, Held] = {}
    for player in range(len(PLAYER_PREFIXES)):
        name = _cookie_name(tournament_id, player)
        held = open_sealed(request, name, sealed_as(tournament_id, player))
        if held is not None:
            found[player] = held
    return found


def entered_in(request: Request, tournament_id: str) -> dict[int, Held]:
    """The players this browser holds of its entrant in the tournament (`held_players`).
    Raises Refused (403) when it holds none."""
    held = held_players(request, tournament_id)
    if not held:
        raise Refused(403, "this browser holds no entrant in this tournament", "NO_ENTRANT")
    return held


def set_entry(
    request: Request, response: Response, tournament_id: str, player: int, held: Held
) -> None:
    """Hand `player` of the entrant (its number in `held.seat`, its token in `held.token`) to
    this browser: its sealed cookie, and the page's mark that the browser holds an entrant."""
    set_sealed(
        request, response,
        Held(sealed_as(tournament_id, player), held.seat, held.token, held.client_seed),
        name=_cookie_name(tournament_id, player), path=f"/api/play/tournaments/{tournament_id}",
        mark=ENTERED_PREFIX + tournament_id, page="/tournament",
    )  # fmt: skip


def player_asked(request: Request, held: dict[int, Held]) -> int:
    """The player "my tournament" is asked as (`?player=`), else the first this browser holds.
    Raises Refused: 400 for a malformed one, 403 for one this browser does not hold."""
    asked = request.query_params.get("player")
    if asked is None:
        return min(held)
    if asked not in ("0", "1"):
        raise Refused(
            400, "player is 0 or 1: which of the entrant's players, from 0", "BAD_REQUEST"
        )
    player = int(asked)
    if player not in held:
        raise Refused(
            403,
            f"this browser does not hold the entrant's {PLAYER_WORD[player]} player",
            "NO_ENTRANT",
        )
    return player


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


def mine(
    reply: pb.GetTournamentResponse,
    entrant: int,
    ends: RoundEnds,
    player: int = 0,
    held: tuple[int, ...] = (0,),
) -> JSON:
    """ "My tournament" as JSON, for `player` of the entrant (the one the reply was asked
    with; `held`: those this browser holds): the entrant, the player's table now (`playing`
    until its result), its bye in the latest round, the next round's countdown and the
    standings. Holds no token and no tile."""
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
    reveal: JSON | None = None
    if view.phase == pb.TOURNAMENT_PHASE_REVEAL:
        still = [e for e in view.entrants if not e.HasField("withdrawn_after_round")]
        left = max(0.0, view.reveal_deadline_ms / 1000 - time.time())
        reveal = {
            "revealed": me is not None and me.revealed,
            "entrants_revealed": sum(e.revealed for e in still),
            "entrants": len(still),
            "closes_in_s": round(left, 1),
        }
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
        "partnerships": view.settings.partnerships,
        "player": player,
        "held": list(held),
        "withdrawn": withdrawn,
        "table": table,
        "bye": bye,
        "next_round": _next_round(view, ends),
        "reveal": reveal,
        "rank": placed["rank"] if placed is not None else None,
        "standings": standings,
    }


def _ends(request: Request) -> RoundEnds:
    ends: RoundEnds = request.app.state.round_ends
    return ends


# --- handlers ------------------------------------------------------------------------------


def _names(body: dict[str, Any], player: Held | None = None) -> list[str]:
    """The entrant's players' names: `name` (none when a player is signed in: the server
    names it), and `partner` at partnership tables. Raises Refused (400)."""
    name = seat_name(body, player)
    if body.get("partner") is None:
        return [name]
    partner = checked_name(body, "partner")
    if name and partner.casefold() == name.casefold():
        raise Refused(400, "partner is the other player's name, not yours again", "BAD_REQUEST")
    return [name, partner]


async def _held_entrant(request: Request, tid: str, held: dict[int, Held]) -> int | None:
    """The entrant this browser holds, if the tournament knows its players' tokens."""
    player = min(held)
    reply = await _tournament(request, tid, held[player].token)
    where = reply.assignment
    if reply.HasField("assignment") and (where.entrant, where.player) == (
        held[player].seat,
        player,
    ):
        return where.entrant
    return None


async def register(request: Request) -> Response:
    """Register this browser's player (and its partner, at partnership tables) as an entrant,
    or give back the entrant it holds."""
    tid = checked_id(request)
    body = await read_body(request)
    held = held_players(request, tid)
    if held:
        entrant = await _held_entrant(request, tid, held)
        if entrant is not None:
            response = json_answer({"tournament_id": tid, "entrant": entrant})
            for player, one in held.items():
                set_entry(request, response, tid, player, one)
            return response
    me = signed_in(request)
    names = _names(body, me)
    tokens = [new_token() for _ in names]
    # Drawn here, for this entrant alone: the server learns only its commitment until the
    # start, and the seed itself when the page reveals it (`my_tournament`).
    client_seed = secrets.token_hex(16)
    entry = pb.RegisterEntrantRequest(
        tournament_id=tid,
        players=names,
        client_seed_commitment=commitment(client_seed.encode("utf-8")),
        player_tokens=tokens,
    )
    if me is not None:  # the (first) player is the browser's registered player
        entry.registered_player_tokens.extend([me.token] + [""] * (len(names) - 1))
    try:
        got: pb.RegisterEntrantResponse = await call_upstream(request, "RegisterEntrant", entry)
    except grpc.aio.AioRpcError as e:
        refused = refused_upstream(e)
        if refused.code == "WRONG_PLAYER_COUNT":
            # Said in the form's words: which field the tournament asks for, or does not.
            raise Refused(
                400,
                "this tournament's entrants are single players: give no partner"
                if len(names) > 1
                else "this tournament's entrants are pairs: give partner, your partner's name",
                refused.code,
            ) from None
        raise refused from None
    response = json_answer({"tournament_id": tid, "entrant": got.entrant}, 201)
    for player, token in enumerate(tokens):
        set_entry(request, response, tid, player, Held("", got.entrant, token, client_seed))
    return response


async def my_tournament(request: Request) -> Response:
    """ "My tournament" as one of the entrant's players (`?player=`, else the first this
    browser holds); while a round seats that player at a table in play, the answer also sets
    that match's seat cookie, so that the match page opens as the player's seat."""
    tid = checked_id(request)
    held = entered_in(request, tid)
    player = player_asked(request, held)
    me = held[player]
    reply = await _tournament(request, tid, me.token)
    where = reply.assignment
    if not reply.HasField("assignment") or (where.entrant, where.player) != (me.seat, player):
        raise Refused(403, "this browser's entrant is not known to the tournament", "NO_ENTRANT")
    if me.client_seed is not None and needs_reveal(reply.tournament, me.seat):
        await _reveal(request, tid, me)
        reply = await _tournament(request, tid, me.token)
        where = reply.assignment
    body = mine(reply, me.seat, _ends(request), player, tuple(sorted(held)))
    response = json_answer(body)
    table = body["table"]
    if isinstance(table, dict) and table["playing"]:
        set_seat_cookie(request, response, Held(where.match_id, where.seat, me.token))
    return response


async def _reveal(request: Request, tid: str, me: Held) -> None:
    """Reveal the entrant's sealed seed. A window closed meanwhile, or an entrant withdrawn,
    is what the tournament then shows; any other refusal is the answer's."""
    assert me.client_seed is not None
    try:
        await call_upstream(
            request,
            "RevealEntrantSeed",
            pb.RevealEntrantSeedRequest(
                tournament_id=tid, entrant=me.seat, client_seed=me.client_seed
            ),
            me.token,
        )
    except grpc.aio.AioRpcError as e:
        refused = refused_upstream(e)
        if refused.code not in TOO_LATE:
            raise refused from None


async def withdraw(request: Request) -> Response:
    """Withdraw this browser's entrant: it is paired no more (a match of its in play goes on)."""
    tid = checked_id(request)
    held = entered_in(request, tid)
    await read_body(request)
    me = held[min(held)]
    try:
        got: pb.WithdrawEntrantResponse = await call_upstream(
            request,
            "WithdrawEntrant",
            pb.WithdrawEntrantRequest(tournament_id=tid, entrant=me.seat),
            me.token,
        )
    except grpc.aio.AioRpcError as e:
        raise refused_upstream(e) from None
    return json_answer({"tournament_id": tid, "entrant": me.seat, "after_round": got.after_round})
