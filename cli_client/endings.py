"""`bergen resign` and `bergen abandon`: end a match before its end.

`bergen resign MATCH` resigns your seat: your side forfeits and ranks last, and the best of
the other sides wins. It takes the seat's token that `bergen play` saved for this match (or
`--token`, or `$BERGEN_TOKEN`), and asks you to confirm on a terminal unless `--yes`.

`bergen abandon MATCH` stops a match with no winner. The organiser may abandon any match in
play; the creator of a match (the `bergen play --create` that made it here) may abandon it
while it still waits for players.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import grpc

from bergen.api.convert import event_in
from bergen.api.exit_status import ExitStatus
from bergen.api.helptext import HelpFormatter
from bergen.domain.describe import join, result_words
from bergen.domain.events import MatchEnded

from .client import Client, Unreachable
from .connect import add_server_option, fail_call
from .organiser import HOW, add_organiser_option, organiser_token
from .play import load_state
from .render import result_json
from .usage import Failed, examples, report, seat_label, side_label

TOKEN_ENV = "BERGEN_TOKEN"


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    intro, resign_text, abandon_text = (__doc__ or "").split("\n\n")[:3]
    r = sub.add_parser(
        "resign",
        help="resign your seat of a match (your side forfeits)",
        description=resign_text,
        epilog=examples(
            "bergen resign MATCH          # with the seat bergen play saved here",
            "bergen resign MATCH --yes    # without asking",
        ),
        formatter_class=HelpFormatter,
    )
    r.add_argument("match_id", metavar="MATCH")
    add_server_option(r)
    r.add_argument(
        "--token",
        metavar="TOKEN",
        help=f"the seat's token (default: the one saved by bergen play, else ${TOKEN_ENV})",
    )
    r.add_argument("--yes", action="store_true", help="do not ask for a confirmation")
    r.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object: match_id, seat, result (seats and sides from 0)",
    )
    r.set_defaults(func=resign)

    a = sub.add_parser(
        "abandon",
        help="stop a match with no winner (the organiser, or its creator before it starts)",
        description=abandon_text,
        epilog=examples(
            'bergen abandon MATCH --note "the hall closes"',
            "bergen abandon MATCH --organiser-token-file /etc/bergen/organiser-token",
        ),
        formatter_class=HelpFormatter,
    )
    a.add_argument("match_id", metavar="MATCH")
    add_server_option(a)
    a.add_argument("--note", default="", help="why, kept with the result (200 characters)")
    add_organiser_option(a)
    a.add_argument("--json", action="store_true", help="print one JSON object: match_id, result")
    a.set_defaults(func=abandon)
    del intro


def _seat_token(args: argparse.Namespace) -> tuple[str, dict[str, Any] | None]:
    """The seat token to resign with, and the saved seat it came from. Raises Failed."""
    if args.token:
        return args.token, None
    saved = load_state(args.match_id)
    if saved is not None and saved.get("token"):
        return str(saved["token"]), saved
    env = os.environ.get(TOKEN_ENV)
    if env:
        return env, None
    raise Failed(
        f"no seat of match {args.match_id} is saved here: give its token with --token",
        ExitStatus.USAGE,
        "NO_SEAT_TOKEN",
    )


def _connect(client: Client) -> None:
    try:
        client.wait_ready()
    except Unreachable as e:
        raise Failed(str(e), ExitStatus.UNREACHABLE) from None


def resign(args: argparse.Namespace) -> int:
    try:
        token, _ = _seat_token(args)
        with Client(args.endpoint) as client:
            _connect(client)
            view = client.get_match(args.match_id, token)
            seat = view.viewer_seat
            who = f"{seat_label(seat)} ({view.seats[seat].name})"
            if not args.yes and sys.stdin.isatty():
                print(
                    f"resign match {args.match_id} as {who}? your side forfeits [y/N]: ",
                    end="",
                    flush=True,
                )
                if input().strip().lower() not in ("y", "yes"):
                    print("not resigned")
                    return ExitStatus.SUCCESS
            reply = client.resign(args.match_id, token)
    except Failed as e:
        return report("resign", e)
    except grpc.RpcError as e:
        return fail_call("resign", e)
    except (EOFError, KeyboardInterrupt):
        print()
        return ExitStatus.INTERRUPTED
    ended = _ended(reply.events)
    if args.json:
        print(json.dumps({"match_id": args.match_id, "seat": seat, "result": result_json(ended)}))
    else:
        print(f"{who} resigned match {args.match_id}: {_verdict(ended, view)}")
    return ExitStatus.SUCCESS


def _organiser_or_creator(args: argparse.Namespace) -> str:
    """The organiser token (found as the organiser's commands find it), else the creator
    token `bergen play --create` saved for this match. Raises Failed when there is
    neither."""
    token = organiser_token(args, required=False)
    if token is not None:
        return token
    saved = load_state(args.match_id)
    if saved is not None and saved.get("creator_token"):
        return str(saved["creator_token"])
    raise Failed(
        f"abandoning a match needs the organiser token ({HOW}), or the creator's, saved here "
        "by the bergen play --create that made it",
        ExitStatus.USAGE,
        "NO_ORGANISER_TOKEN",
    )


def abandon(args: argparse.Namespace) -> int:
    try:
        token = _organiser_or_creator(args)
        with Client(args.endpoint) as client:
            _connect(client)
            reply = client.abandon(args.match_id, token, args.note)
    except Failed as e:
        return report("abandon", e)
    except grpc.RpcError as e:
        return fail_call("abandon", e)
    ended = _ended(reply.events)
    if args.json:
        print(json.dumps({"match_id": args.match_id, "result": result_json(ended)}))
    else:
        print(f"match {args.match_id} abandoned" + (f": {args.note}" if args.note else ""))
    return ExitStatus.SUCCESS


def _ended(events: Any) -> MatchEnded | None:
    for msg in events:
        _, event = event_in(msg)
        if isinstance(event, MatchEnded):
            return event
    return None


def _verdict(e: MatchEnded | None, view: Any) -> str:
    """`bob wins` (names from the view), or the result in words."""
    if e is None:
        return "the match goes on"
    names = [s.name for s in view.seats]
    sides = [[s.seat for s in view.seats if s.side == side] for side in range(len(e.scores))]

    def seat_name(seat: int) -> str:
        return names[seat] if seat < len(names) and names[seat] else seat_label(seat)

    def side_name(side: int) -> str:
        members = sides[side] if side < len(sides) else []
        if len(members) == 1:
            return seat_name(members[0])
        return f"{side_label(side)} ({' and '.join(seat_name(s) for s in members)})"

    scores = "-".join(str(s) for s in e.scores)
    return f"{join(result_words(e), seat_name, side_name)}; scores {scores}"


__all__ = ["abandon", "add_parsers", "resign"]
