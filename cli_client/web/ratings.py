"""The ratings as the gateway serves them, read as a spectator like the rest of the site: a
pool's leaderboard, a player with a rating in each pool, a player's rated matches (the
player page's graph and history), and the ratings of a rated tournament's entrants.

Nothing here carries a token upstream: every call is a public read RPC (RATINGS.md section 4).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bergen.v1 import bergen_pb2 as pb

from .app import PAGE_TOKEN, BadRequest, checked_id, gateway_of, handled
from .hubs import JSON, to_json
from .players import json_answer

POOLS: dict[str, pb.RatingPool] = {
    "2": pb.RATING_POOL_TWO,
    "3": pb.RATING_POOL_THREE,
    "4": pb.RATING_POOL_FOUR,
    "pairs": pb.RATING_POOL_PAIRS,
}
"""A pool as the pages name it (RATINGS.md section 1)."""
MAX_PAGE = 100
"""The most rows asked upstream for one page (the server's own bound)."""
ENTRANT_CALLS = 8
"""GetPlayer calls at once for one tournament's ratings."""
ENTRANTS_TTL_S = 3.0
"""How long a tournament's ratings are answered from memory: ratings change only as its
tables end, and every browser on its page asks once a table does."""
ENTRANTS_KEPT = 256


def routes(app: Any) -> list[Route]:
    """Keep the tournaments' ratings on `app` and return the ratings' routes."""
    app.state.entrant_ratings = EntrantRatings()
    return [
        Route("/api/leaderboard", handled(leaderboard)),
        Route("/api/players/{id}", handled(get_player)),
        Route("/api/players/{id}/matches", handled(player_matches)),
        Route("/api/tournaments/{id}/ratings", handled(tournament_ratings)),
    ]


def pool_of(request: Request, default: str | None = None) -> pb.RatingPool:
    """The `?pool=` asked (2, 3, 4 or pairs); `default` when absent, or 0 (every pool) when
    that is None too. Raises BadRequest."""
    word = request.query_params.get("pool", "")
    if not word:
        if default is None:
            return pb.RATING_POOL_UNSPECIFIED
        word = default
    if word not in POOLS:
        raise BadRequest(f"pool is one of {', '.join(POOLS)}")
    return POOLS[word]


def paging(request: Request) -> tuple[int, str]:
    """The `?page_size=` (0: the server's default) and `?page_token=` asked. Raises
    BadRequest."""
    token = request.query_params.get("page_token", "")
    if not PAGE_TOKEN.fullmatch(token):
        raise BadRequest("not a page token")
    size = request.query_params.get("page_size", "")
    if size and (not size.isdigit() or len(size) > 4):
        raise BadRequest("page_size is a whole number")
    return min(int(size or 0), MAX_PAGE), token


def pool_word(pool: int) -> str:
    return next((w for w, n in POOLS.items() if n == pool), "")


async def leaderboard(request: Request) -> Response:
    """ListLeaderboardResponse of `?pool=` (default 2): `{entries: [{rank, player, rating}],
    next_page_token}`, and `pool` as asked."""
    pool = pool_of(request, "2")
    size, token = paging(request)
    reply: pb.ListLeaderboardResponse = await gateway_of(request).upstream.call(
        "ListLeaderboard",
        pb.ListLeaderboardRequest(pool=pool, page_size=size, page_token=token),
    )
    body = to_json(reply)
    body["pool"] = pool_word(pool)
    return json_answer(body)


async def get_player(request: Request) -> Response:
    """GetPlayerResponse: `{player: {player_id, name, bot}, ratings: [PoolRating...]}`."""
    reply: pb.GetPlayerResponse = await gateway_of(request).upstream.call(
        "GetPlayer", pb.GetPlayerRequest(player_id=checked_id(request))
    )
    return json_answer(to_json(reply))


async def player_matches(request: Request) -> Response:
    """ListPlayerMatchesResponse: the player's rated matches of `?pool=` (default: every
    pool), newest first, a page at a time."""
    pool = pool_of(request)
    size, token = paging(request)
    reply: pb.ListPlayerMatchesResponse = await gateway_of(request).upstream.call(
        "ListPlayerMatches",
        pb.ListPlayerMatchesRequest(
            player_id=checked_id(request), pool=pool, page_size=size, page_token=token
        ),
    )
    return json_answer(to_json(reply))


def tournament_pool(settings: pb.TournamentSettings) -> int:
    """The pool a tournament's matches are rated in."""
    if settings.partnerships:
        return pb.RATING_POOL_PAIRS
    return {2: pb.RATING_POOL_TWO, 3: pb.RATING_POOL_THREE}.get(settings.seats, pb.RATING_POOL_FOUR)


class EntrantRatings:
    """Each tournament's entrants' ratings as lately read, for ENTRANTS_TTL_S."""

    def __init__(self) -> None:
        self._kept: OrderedDict[str, tuple[float, JSON]] = OrderedDict()
        self._calls = asyncio.Semaphore(ENTRANT_CALLS)

    def fresh(self, tournament_id: str) -> JSON | None:
        found = self._kept.get(tournament_id)
        if found is None or found[0] < time.monotonic():
            return None
        return found[1]

    def keep(self, tournament_id: str, body: JSON) -> None:
        self._kept[tournament_id] = (time.monotonic() + ENTRANTS_TTL_S, body)
        self._kept.move_to_end(tournament_id)
        while len(self._kept) > ENTRANTS_KEPT:
            self._kept.popitem(last=False)

    async def read(self, request: Request, view: pb.TournamentView) -> JSON:
        """`{tournament_id, rated, pool, entrants: [{entrant, players: [{player_id, name,
        bot, rating}]}]}`: each registered player's rating in the tournament's pool now (a
        player entered by name alone has none)."""
        pool = tournament_pool(view.settings)
        ids = sorted({p for e in view.entrants for p in e.player_ids if p})
        upstream = gateway_of(request).upstream

        async def one(player_id: str) -> tuple[str, pb.GetPlayerResponse]:
            async with self._calls:
                reply: pb.GetPlayerResponse = await upstream.call(
                    "GetPlayer", pb.GetPlayerRequest(player_id=player_id)
                )
            return player_id, reply

        found = dict(await asyncio.gather(*(one(p) for p in ids)))
        entrants = []
        for e in view.entrants:
            players = []
            for player_id in e.player_ids:
                reply = found.get(player_id)
                if reply is None:
                    continue
                rating = next((r for r in reply.ratings if r.pool == pool), None)
                players.append(
                    {
                        **to_json(reply.player),
                        "rating": to_json(rating) if rating is not None else None,
                    }
                )
            entrants.append({"entrant": e.entrant, "players": players})
        return {
            "tournament_id": view.tournament_id,
            "rated": view.settings.rated,
            "pool": pool_word(pool),
            "entrants": entrants,
        }


async def tournament_ratings(request: Request) -> Response:
    """The ratings of a tournament's registered entrants, in its pool (EntrantRatings.read)."""
    tid = checked_id(request)
    ratings: EntrantRatings = request.app.state.entrant_ratings
    body = ratings.fresh(tid)
    if body is None:
        reply: pb.GetTournamentResponse = await gateway_of(request).upstream.call(
            "GetTournament", pb.GetTournamentRequest(tournament_id=tid)
        )
        body = await ratings.read(request, reply.tournament)
        ratings.keep(tid, body)
    return json_answer(body)
