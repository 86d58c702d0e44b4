"""`bergen player register | show | history` and `bergen leaderboard`: players and their
ratings at the terminal.

`register` keeps the new player's token in the user's configuration folder (`players`), and
prints it only when asked (`--show-token`); `show` and `history` name a player by its name or
its id, or take the one player kept for the server. Every rating is shown as the server
answers it (RATINGS.md section 4): a whole number, with a `?` while it is provisional.
"""

from __future__ import annotations

import argparse
import json
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

import grpc

from bergen.api.convert import RATING_POOL, timestamp_in
from bergen.api.exit_status import ExitStatus
from bergen.api.helptext import HelpFormatter, at_least_one
from bergen.domain.errors import InvalidArgument
from bergen.domain.ratings import POOLS
from bergen.v1 import bergen_pb2 as pb

from . import players
from .client import Client
from .connect import Endpoint, add_server_option, failure_of
from .usage import Failed, examples, report

MAX_PAGE = 100
DEFAULT_PAGE = 20
P = "6f1c2a9e-4b7d-5c55-9a1e-6d2f8b0c4e17"
"""The player id the examples show."""


# ----- the parsers ------------------------------------------------------------------------


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`bergen player` (register, show, history) and `bergen leaderboard`."""
    p = sub.add_parser(
        "player",
        help="register a player, and show a player's ratings and rated matches",
        description="Register a player (an identity that outlives a match, with a rating in "
        "each pool), keeping its secret token in your configuration folder, and show any "
        "player's ratings and rated matches.",
        epilog=examples(
            "bergen player register ann",
            "bergen player show ann",
            "bergen player history ann --pool 2",
        ),
        formatter_class=HelpFormatter,
    )
    own = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    r = own.add_parser(
        "register",
        help="register a player; keeps its token in your configuration folder",
        description="Register a player under NAME (1 to 24 letters, digits, spaces, '-' or "
        "'_'; unique whatever its case) and keep its secret token in your configuration "
        "folder ($BERGEN_CONFIG_DIR, else $XDG_CONFIG_HOME/bergen, else ~/.config/bergen), "
        "readable by you alone: `bergen play` then seats you as that player. The token is "
        "shown by the server once and cannot be given again. Prints the player's id.",
        epilog=examples(
            "bergen player register ann",
            "bergen player register 'club bot' --bot",
            "bergen player register ann --json",
        ),
        formatter_class=HelpFormatter,
    )
    r.add_argument("name", metavar="NAME")
    r.add_argument("--bot", action="store_true", help="the player is a program")
    r.add_argument(
        "--show-token",
        action="store_true",
        help="print the player's secret token too (it is kept in its file either way)",
    )
    r.set_defaults(player_func=register)

    s = own.add_parser(
        "show",
        help="a player's rating in every pool",
        description="A player's rating in every pool (a '?' while provisional), mu, sigma "
        "and the rated matches it was made of. Without NAME|ID, the player kept for the "
        "server.",
        epilog=examples("bergen player show ann", f"bergen player show {P} --json"),
        formatter_class=HelpFormatter,
    )
    s.add_argument("player", nargs="?", metavar="NAME|ID")
    s.set_defaults(player_func=show)

    h = own.add_parser(
        "history",
        help="a player's rated matches, newest first, with the rating before and after",
        description="A player's rated matches, newest first, each with its pool, seat, "
        "place and the rating before and after it, a page at a time. Without NAME|ID, the "
        "player kept for the server.",
        epilog=examples(
            "bergen player history ann",
            "bergen player history ann --pool pairs --all",
            "bergen player history ann --page-token TOKEN   # the next page",
        ),
        formatter_class=HelpFormatter,
    )
    h.add_argument("player", nargs="?", metavar="NAME|ID")
    h.add_argument("--pool", choices=POOLS, help="only this pool's matches (default: all)")
    _page_options(h)
    h.set_defaults(player_func=history)

    for q in (r, s, h):
        add_server_option(q)
        q.add_argument("--json", action="store_true", help="print the result as a JSON object")
    p.set_defaults(func=run)

    b = sub.add_parser(
        "leaderboard",
        help="a pool's leaderboard: the players past provisional, by rating",
        description="A pool's leaderboard: the players who are not provisional, by rating, "
        "then mu - 3 sigma, then fewer rated matches, then player id, a page at a time. The "
        "pools: 2, 3 and 4 seats, and pairs (four seats in two partnerships).",
        epilog=examples(
            "bergen leaderboard 2",
            "bergen leaderboard pairs --all --json",
            "bergen leaderboard 2 --page-token TOKEN   # the next page",
        ),
        formatter_class=HelpFormatter,
    )
    b.add_argument("pool", choices=POOLS, metavar="POOL", help="2, 3, 4 or pairs")
    _page_options(b)
    add_server_option(b)
    b.add_argument("--json", action="store_true", help="print the result as a JSON object")
    b.set_defaults(func=run, action="leaderboard", player_func=leaderboard)


def _page_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--page-size",
        type=at_least_one,
        default=DEFAULT_PAGE,
        metavar="N",
        help=f"entries a page, 1 to {MAX_PAGE} (default {DEFAULT_PAGE})",
    )
    p.add_argument(
        "--page-token", default="", metavar="TOKEN", help="the page after a previous one"
    )
    p.add_argument("--all", action="store_true", help="every page, not only the first")


def run(args: argparse.Namespace) -> int:
    command = "leaderboard" if args.action == "leaderboard" else f"player {args.action}"
    endpoint: Endpoint = args.endpoint
    with Client(endpoint) as client:
        try:
            status: int = args.player_func(client, args)
            return status
        except (Failed, grpc.RpcError) as e:
            return report(command, failure_of(e))
        except KeyboardInterrupt:
            return ExitStatus.INTERRUPTED


def _emit(args: argparse.Namespace, lines: list[str], data: dict[str, Any]) -> int:
    if args.json:
        print(json.dumps(data, ensure_ascii=False))
    else:
        print("\n".join(lines))
    return ExitStatus.SUCCESS


# ----- what is shown ----------------------------------------------------------------------


def rating_text(r: pb.PoolRating) -> str:
    """The rating as people read it: `1623`, `1500?` while provisional."""
    return f"{r.rating}{'?' if r.provisional else ''}"


def rating_json(r: pb.PoolRating) -> dict[str, Any]:
    return {
        "pool": pool_word(r.pool),
        "rating": r.rating,
        "mu": r.mu,
        "sigma": r.sigma,
        "provisional": r.provisional,
        "rated_matches": r.rated_matches,
    }


def player_json(p: pb.Player) -> dict[str, Any]:
    return {"player_id": p.player_id, "name": p.name, "bot": p.bot}


def player_text(p: pb.Player) -> str:
    return f"{p.name}{' (bot)' if p.bot else ''}"


def pool_word(number: int) -> str:
    """A pool's word (`2`, `pairs`); `?` for one this client does not know."""
    try:
        return RATING_POOL.into(number)
    except InvalidArgument:
        return "?"


def _when(at: datetime) -> str:
    return at.astimezone().strftime("%Y-%m-%d %H:%M")


def table(rows: list[list[str]]) -> list[str]:
    """Rows as lines of left-aligned columns (the first row the heading)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


# ----- the actions ------------------------------------------------------------------------


def register(client: Client, args: argparse.Namespace) -> int:
    server: str = args.server
    reply = players.register(client, args.name, args.bot)
    try:
        kept = players.keep(server, reply.player_id, reply.name, args.bot, reply.player_token)
    except OSError as e:
        # The server has taken the name; the token exists only here, now: show it rather
        # than lose it.
        raise Failed(
            f"player {reply.name} registered ({reply.player_id}), but its token could not be "
            f"kept ({e.strerror or e}); keep it yourself, it cannot be shown again: "
            f"{reply.player_token}",
            ExitStatus.ERROR,
            "TOKEN_NOT_KEPT",
        ) from None
    data: dict[str, Any] = {
        "server": server,
        "player_id": reply.player_id,
        "name": reply.name,
        "bot": args.bot,
        "token_file": str(kept.path),
    }
    lines = [
        f"player {reply.name}{' (bot)' if args.bot else ''}: {reply.player_id}",
        f"token kept in {kept.path}",
    ]
    if args.show_token:
        data["player_token"] = reply.player_token
        lines.append(f"token {reply.player_token}")
    return _emit(args, lines, data)


def player_request(server: str, text: str | None) -> dict[str, str]:
    """The player NAME|ID names, as the request's `player_id` or `name`; without one, the
    player kept for `server`. Raises Failed: WHICH_PLAYER (several kept), NO_PLAYER (none)."""
    if text is None:
        every = players.kept(server)
        people = [p for p in every if not p.bot]
        only = people if len(people) == 1 else every if len(every) == 1 else []
        if only:
            return {"player_id": only[0].player_id}
        if every:
            raise Failed(
                f"several players are kept for {server} ({players.names(every)}): name one",
                ExitStatus.USAGE,
                "WHICH_PLAYER",
            )
        raise Failed(
            f"no player is kept for {server}: name one, or `bergen player register NAME`",
            ExitStatus.USAGE,
            "NO_PLAYER",
        )
    if _is_id(text):
        return {"player_id": text.lower()}
    return {"name": text}


def _is_id(text: str) -> bool:
    try:
        return len(text) == 36 and str(uuid.UUID(text)) == text.lower()
    except ValueError:
        return False


def show(client: Client, args: argparse.Namespace) -> int:
    which = player_request(args.server, args.player)
    reply: pb.GetPlayerResponse = client.call("GetPlayer", pb.GetPlayerRequest(**which))
    rows = [["pool", "rating", "mu", "sigma", "rated matches"]]
    for r in reply.ratings:
        rows.append(
            [
                pool_word(r.pool),
                rating_text(r),
                f"{r.mu:.3f}",
                f"{r.sigma:.3f}",
                str(r.rated_matches),
            ]
        )
    lines = [f"{player_text(reply.player)}: player {reply.player.player_id}", *table(rows)]
    if any(r.provisional for r in reply.ratings):
        lines.append("? provisional: off the leaderboard while sigma is above 6")
    data = {
        "player": player_json(reply.player),
        "ratings": [rating_json(r) for r in reply.ratings],
    }
    return _emit(args, lines, data)


Page = tuple[list[Any], str]


def pages(fetch: Callable[[str], Page], first: str, every: bool) -> Page:
    """The items of the page at `first` (and of every page after it when `every`), and the
    token of the page after the last one fetched ("" at the end)."""
    items, token = fetch(first)
    while every and token:
        more, token = fetch(token)
        items += more
    return items, token


def _page_size(args: argparse.Namespace) -> int:
    size: int = args.page_size
    if size > MAX_PAGE:
        raise Failed(f"--page-size is 1 to {MAX_PAGE}, not {size}", ExitStatus.USAGE)
    return MAX_PAGE if args.all else size


def history(client: Client, args: argparse.Namespace) -> int:
    which = player_request(args.server, args.player)
    pool = RATING_POOL.out(args.pool) if args.pool else pb.RATING_POOL_UNSPECIFIED
    size = _page_size(args)
    player: list[pb.Player] = []

    def fetch(token: str) -> Page:
        request = pb.ListPlayerMatchesRequest(pool=pool, page_size=size, page_token=token, **which)
        reply: pb.ListPlayerMatchesResponse = client.call("ListPlayerMatches", request)
        player[:] = [reply.player]
        return list(reply.matches), reply.next_page_token

    matches, after = pages(fetch, args.page_token, args.all)
    who = player[0]
    data = {
        "player": player_json(who),
        "pool": args.pool,
        "matches": [
            {
                "match_id": m.match_id,
                "pool": pool_word(m.pool),
                "order": m.order,
                "seat": m.seat,
                "place": m.place,
                "before": rating_json(m.before),
                "after": rating_json(m.after),
                "ended_at": timestamp_in(m.ended_at).isoformat(),
            }
            for m in matches
        ],
        "next_page_token": after,
    }
    where = f" in pool {args.pool}" if args.pool else ""
    lines = [f"{player_text(who)}: rated matches{where}, newest first"]
    if not matches:
        lines.append("none")
    else:
        rows = [["ended", "pool", "match", "seat", "place", "rating"]]
        for m in matches:
            rows.append(
                [
                    _when(timestamp_in(m.ended_at)),
                    pool_word(m.pool),
                    m.match_id,
                    str(m.seat + 1),
                    str(m.place),
                    f"{rating_text(m.before)} -> {rating_text(m.after)}",
                ]
            )
        lines += table(rows)
    if after:
        named = args.player or who.name
        lines.append(
            f"more: bergen player history {_quoted(named)}"
            f"{f' --pool {args.pool}' if args.pool else ''} --page-token {after}"
        )
    return _emit(args, lines, data)


def _quoted(text: str) -> str:
    return f"'{text}'" if " " in text else text


def leaderboard(client: Client, args: argparse.Namespace) -> int:
    size = _page_size(args)
    pool = RATING_POOL.out(args.pool)

    def fetch(token: str) -> Page:
        request = pb.ListLeaderboardRequest(pool=pool, page_size=size, page_token=token)
        reply: pb.ListLeaderboardResponse = client.call("ListLeaderboard", request)
        return list(reply.entries), reply.next_page_token

    entries, after = pages(fetch, args.page_token, args.all)
    data = {
        "pool": args.pool,
        "entries": [
            {"rank": e.rank, "player": player_json(e.player), "rating": rating_json(e.rating)}
            for e in entries
        ],
        "next_page_token": after,
    }
    lines = [f"leaderboard of pool {args.pool}"]
    if not entries:
        lines.append("nobody yet: a player joins it once past provisional")
    else:
        rows = [["rank", "rating", "mu", "sigma", "matches", "player"]]
        for e in entries:
            r = e.rating
            rows.append(
                [
                    str(e.rank),
                    rating_text(r),
                    f"{r.mu:.3f}",
                    f"{r.sigma:.3f}",
                    str(r.rated_matches),
                    player_text(e.player),
                ]
            )
        lines += table(rows)
    if after:
        lines.append(f"more: bergen leaderboard {args.pool} --page-token {after}")
    return _emit(args, lines, data)


__all__ = [
    "add_parsers",
    "pages",
    "player_request",
    "rating_json",
    "rating_text",
    "run",
    "table",
]
