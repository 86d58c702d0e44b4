"""`bergen play`: play a match from the terminal.

Create a match (`--create`) or join one (`--match ID`), optionally fill the free seats with
bots running in this process (`--bots K`), then play: the other seats' plays are printed as
they happen, and on your turn you choose a legal play from a numbered list by typing its
number and Enter; `r` resigns (after you confirm), `q` leaves with your seat kept.

On a clock (`--create --clock 60+2`) every seat's time left is shown counting down on a line
under the match, rewritten in place with your prompt while you choose; under 10 s of your own
time you are warned, and a timeout that played for you, or a forfeit, is said.

You sit as the player you registered (`bergen player register`) when you keep one for the
server: the one named by `--player NAME`, else your only one (unless `--name` names someone
else). A rated match (`--create --rated`, or one created so) seats registered players only;
the bots started here are bot players of their own (`bot-greedy-1`...).

Your seat is saved, so that `bergen play --match ID` after a disconnect or a crash takes it
again (and restarts the bots started with it); a server or replica that goes away is waited
for, and the match resumes where it was.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
from dataclasses import asdict
from pathlib import Path
from typing import Any

import grpc
from rich.console import Console
from rich.markup import escape

from bergen.api.exit_status import ExitStatus
from bergen.api.helptext import HelpFormatter
from bergen.api.state import state_dir
from bergen.domain.deciders import POLICY_NAMES
from bergen.domain.rules import PRESETS
from bergen.domain.state import SEATING, State

from . import terminal
from .client import Client, Unreachable, new_token
from .clocks import add_clock_options, clock_options
from .connect import add_server_option, describe_error, exit_status_of, failure_of
from .narrate import Narrator
from .players import BotPlayers, KeptPlayer, choose, must_choose
from .render import result_json
from .seat import (
    BotSeat,
    Quit,
    SeatLink,
    add_policy_options,
    follow_narrated,
    login_name,
    play_loop,
    settings_from,
    start_bot,
)
from .tournament_play import run_player
from .usage import Failed, examples, fail, report, seat_label

COMMAND = "play"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "play",
        help="play a match from the terminal",
        description=(__doc__ or "").split("\n\n", 1)[1],
        epilog=examples(
            "bergen play --create --players 2 --bots 1 --name ann   # you against the computer",
            "bergen play --create --players 4 --partnerships --clock 300+5   # wait for friends",
            "bergen play --match MATCH --name bob   # take a free seat of a match",
            "bergen play --create --rated --bots 1 --player ann   # a rated match, as ann",
            "bergen play --match MATCH              # take your seat again after a disconnect",
            "bergen play --tournament TOURNAMENT --register --name ann",
        ),
        formatter_class=HelpFormatter,
    )
    add_server_option(p)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--match", metavar="ID", help="join (or take again) a seat of this match")
    which.add_argument("--create", action="store_true", help="create a new match")
    which.add_argument(
        "--tournament",
        metavar="ID",
        help="play your matches in this tournament one after another as they are paired, "
        "as the entrant you registered from here (or --register now)",
    )
    p.add_argument(
        "--register",
        action="store_true",
        help="with --tournament: register now as --name (with --partner at partnership tables)",
    )
    p.add_argument("--partner", metavar="NAME", help="with --tournament --register: your partner")
    p.add_argument(
        "--entrant",
        type=int,
        metavar="N",
        help="with --tournament: your entrant, when several were registered from here",
    )
    p.add_argument(
        "--entrant-player",
        type=int,
        default=1,
        metavar="N",
        help="with --tournament: which of the entrant's players you are, 1 or 2 (default 1)",
    )
    p.add_argument(
        "--player",
        metavar="NAME",
        help="sit as this registered player of yours (default: your only one, if you keep "
        "one for the server and --name names nobody else)",
    )
    p.add_argument(
        "--rated",
        action="store_true",
        help="with --create: a rated match, its seats registered players, its end counting "
        "for their ratings",
    )
    p.add_argument("--players", type=int, choices=(2, 3, 4), default=2, help="with --create")
    p.add_argument("--partnerships", action="store_true", help="with --create: 4 seats, 2 sides")
    p.add_argument("--preset", default="standard", choices=sorted(PRESETS), help="with --create")
    p.add_argument("--name", help="your name (default: your login name)")
    p.add_argument(
        "--seat", type=int, metavar="S", help="the seat to take, from 1 (default: the first free)"
    )
    p.add_argument(
        "--bots",
        type=int,
        default=0,
        metavar="K",
        help="fill K of the other seats with bots that run here",
    )
    p.add_argument("--bot-policy", choices=POLICY_NAMES, default="greedy", help="the bots' play")
    add_policy_options(p)
    add_clock_options(p, "the match created (with --create)")
    p.add_argument(
        "--json",
        action="store_true",
        help="tell the match on standard error and print one JSON object on standard output "
        "at the end: match_id, seat and side (from 0, as the API counts), name, left (you "
        "left before the end), result",
    )
    p.set_defaults(func=run)


# --- the state file ----------------------------------------------------------------------


def state_path(match_id: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in match_id)
    return state_dir() / f"{safe}.json"


def save_state(data: dict[str, Any]) -> Path:
    """Write the seat file (owner-only: it holds secrets) atomically."""
    path = state_path(str(data["match_id"]))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, path)
    return path


def load_state(match_id: str) -> dict[str, Any] | None:
    path = state_path(match_id)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("match_id") == match_id else None


# --- the command -------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    # Ctrl-C must interrupt even when the shell that started us ignored SIGINT (a job
    # started with `&` from a script inherits SIG_IGN, and Python then keeps it).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if args.tournament is not None:
        return run_player(args)
    try:
        _check(args)
    except Failed as e:
        return report(COMMAND, e)
    # With --json the match is told on standard error, and standard output holds the object.
    console = Console(highlight=False, soft_wrap=True, stderr=args.json)
    name = args.name or os.environ.get("BERGEN_NAME") or login_name()
    live = terminal.LiveLine(console, terminal.is_interactive() and not args.json)
    look = terminal.detect_look(console, plain=False)

    def notice(text: str) -> None:
        live.print(f"[dim]{escape(text)}[/]")

    with Client(args.endpoint, notice=notice) as client:
        try:
            client.wait_ready()
        except Unreachable as e:
            return fail(COMMAND, str(e), ExitStatus.UNREACHABLE)
        link: SeatLink | None = None
        seating = Seating()
        try:
            saved = _seat(client, args, name, console, seating)
            match_id, seat, token = saved["match_id"], saved["seat"], saved["token"]
            name = str(saved.get("name", name))
            bot_errors: list[BaseException] = []
            settings = settings_from(args)
            for b in saved.get("bots", []):
                bot = BotSeat(**b)
                start_bot(client, match_id, bot, settings, random.Random(), bot_errors.append)
            link = SeatLink(client, match_id, seat, token)
            narrator = follow_narrated(link, console, live)
            _show_where(console, link.state)
            try:
                play_loop(console, link, narrator, bot_errors, live, look)
            finally:
                live.done()
            _summary(console, link, narrator)
            if args.json:
                print(json.dumps(_outcome(link, name, left=False)))
            return ExitStatus.SUCCESS
        except (grpc.RpcError, Failed) as e:
            seating.abandon(client, link, console)
            live.done()
            return report(COMMAND, failure_of(e))
        except Quit as e:
            live.done()
            console.print(f"{e}; your seat is saved: {_resume_hint(link)}")
            if args.json and link is not None:
                print(json.dumps(_outcome(link, name, left=True)))
            return ExitStatus.SUCCESS
        except KeyboardInterrupt:
            live.done()
            console.print(f"\ninterrupted; your seat is saved: {_resume_hint(link)}")
            return ExitStatus.INTERRUPTED
        finally:
            if link is not None:
                link.close()


def _check(args: argparse.Namespace) -> None:
    """Raises Failed for options that cannot be used together, before anything is sent."""
    if args.bots < 0:
        raise Failed("--bots must be 0 or more", ExitStatus.USAGE)
    if args.partnerships and args.players != 4:
        raise Failed("--partnerships needs --players 4", ExitStatus.USAGE)
    if args.seat is not None and args.seat < 1:
        raise Failed("--seat counts from 1", ExitStatus.USAGE)
    if args.create:
        if args.seat is not None and args.seat > args.players:
            raise Failed(
                f"--seat {args.seat}: a {args.players}-seat match has seats 1 to {args.players}",
                ExitStatus.USAGE,
            )
        if args.bots > args.players - 1:
            raise Failed(
                f"--bots {args.bots}: a {args.players}-seat match has "
                f"{args.players - 1} seat(s) besides yours",
                ExitStatus.USAGE,
                "BOTS_EXCEED_FREE_SEATS",
            )
    try:
        args.options = clock_options(args, args.players, args.partnerships, args.preset)
    except ValueError as e:
        raise Failed(str(e), ExitStatus.USAGE) from None
    if args.options and not args.create:
        raise Failed(
            "--clock is for a match you --create; a joined match has its own", ExitStatus.USAGE
        )
    if args.rated and not args.create:
        raise Failed(
            "--rated is for a match you --create; a joined match is rated or not as created",
            ExitStatus.USAGE,
        )


def _resume_hint(link: SeatLink | None) -> str:
    if link is None:
        return "bergen play --match ID resumes"
    return f"[bold]bergen play --match {escape(link.match_id)}[/] resumes"


class Seating:
    """The match this client created, while it has not started: if the client fails before
    every seat is taken, `abandon` ends it with the creator token, so that nothing is left
    behind waiting for ever."""

    def __init__(self) -> None:
        self.match_id: str | None = None
        self.creator_token: str | None = None

    def abandon(self, client: Client, link: SeatLink | None, console: Console) -> None:
        """Abandon the match created here if it is still seating; says so, or why not."""
        if self.match_id is None or self.creator_token is None:
            return
        if link is not None and link.k.state is not None and link.state.phase != SEATING:
            return
        try:
            client.abandon(self.match_id, self.creator_token, "its creator's client failed")
        except grpc.RpcError as e:
            if exit_status_of(e) != ExitStatus.REFUSED:  # refused: it started meanwhile
                console.print(f"could not abandon match {self.match_id}: {describe_error(e)}")
            return
        console.print(f"abandoned match {escape(self.match_id)}, which had not started")


def _seat(
    client: Client, args: argparse.Namespace, name: str, console: Console, seating: Seating
) -> dict[str, Any]:
    """Create or join the match, or find the saved seat; returns the state file's content.
    Raises grpc.RpcError, Failed (bots that the free seats cannot take)."""
    seat = None if args.seat is None else args.seat - 1
    if args.match:
        saved = load_state(args.match)
        if saved is not None:
            view = client.get_match(args.match, saved["token"])  # checks the token
            console.print(
                f"resuming match [bold]{escape(args.match)}[/] as {seat_label(view.viewer_seat)} "
                f"({escape(str(saved.get('name', '')))})"
            )
            saved["seat"] = view.viewer_seat
            if args.bots:
                _check_free(view, args.bots, mine=0)
                saved = _add_bots(client, saved, args, console)
            return saved
        match_id = args.match
        view = client.get_match(match_id)
        _check_free(view, args.bots, mine=1)
        me = _player(args, view.rated)
    else:
        me = _player(args, args.rated)
        seating.creator_token = new_token()
        created = client.create(
            args.players,
            args.partnerships,
            args.preset,
            name=f"{me.name if me else name}'s",
            options=args.options,
            creator_token=seating.creator_token,
            rated=args.rated,
        )
        match_id = seating.match_id = created.match_id
        console.print(f"created {'rated ' if args.rated else ''}match [bold]{escape(match_id)}[/]")
    if me is not None:
        name = me.name
        joined = client.join(match_id, name, seat=seat, player_token=me.token)
    else:
        joined = client.join(match_id, name, seat=seat)
    data: dict[str, Any] = {
        "server": args.server,
        "match_id": match_id,
        "seat": joined.seat,
        "name": name,
        "token": joined.seat_token,
        "bots": [],
    }
    if me is not None:
        data["player_id"] = me.player_id
    if seating.creator_token is not None:
        data["creator_token"] = seating.creator_token
    path = save_state(data)
    who = f"player {escape(name)}" if me is not None else escape(name)
    console.print(f"you are {seat_label(joined.seat)} ({who}); seat saved in {escape(str(path))}")
    if args.bots:
        data = _add_bots(client, data, args, console)
    return data


def _check_free(view: Any, bots: int, mine: int) -> None:
    """Raises Failed when the match's free seats cannot take `bots` bots besides `mine`
    seats for the player."""
    free = sum(not s.taken for s in view.seats)
    if free < mine:
        raise Failed(f"match {view.match_id} has no free seat", ExitStatus.REFUSED, "NO_FREE_SEAT")
    if bots > free - mine:
        raise Failed(
            f"--bots {bots}: match {view.match_id} has {free - mine} free seat(s) "
            f"{'besides yours' if mine else 'left'}",
            ExitStatus.USAGE,
            "BOTS_EXCEED_FREE_SEATS",
        )


def _player(args: argparse.Namespace, rated: bool) -> KeptPlayer | None:
    """The registered player you sit as (`players.choose`); one is required in a rated
    match. Raises Failed."""
    named = args.name or os.environ.get("BERGEN_NAME") or None
    if rated:
        return must_choose(args.server, args.player, named)
    return choose(args.server, args.player, named)


def _add_bots(
    client: Client, data: dict[str, Any], args: argparse.Namespace, console: Console
) -> dict[str, Any]:
    # The match's own seats hold players already: a bot player seated there is passed over.
    seated = {s.player_id for s in client.get_match(str(data["match_id"])).seats}
    keeper = BotPlayers(client, args.server)
    for _ in range(args.bots):
        try:
            player = keeper.take(args.bot_policy)
            while player.player_id in seated:
                player = keeper.take(args.bot_policy)
        except OSError as e:
            raise Failed(f"cannot keep a bot player's token: {e}", ExitStatus.ERROR) from None
        seated.add(player.player_id)
        bot_name = player.name
        joined = client.join(str(data["match_id"]), bot_name, player_token=player.token)
        bot = BotSeat(joined.seat, joined.seat_token, args.bot_policy, bot_name)
        data["bots"] = [*data.get("bots", []), asdict(bot)]
        save_state(data)
        console.print(f"{seat_label(joined.seat)}: {escape(bot_name)} ({args.bot_policy} bot)")
    return data


def _show_where(console: Console, state: State) -> None:
    if state.phase == SEATING:
        free = [s for s, p in enumerate(state.players) if p is None]
        console.print(
            f"waiting for {len(free)} more player(s) to join: "
            f"bergen play --match {escape(state.match_id)}"
        )


def _summary(console: Console, link: SeatLink, narrator: Narrator) -> None:
    """The match's id and result once more, and how to replay it."""
    result = link.state.result
    verdict = "" if result is None else f": {narrator.result(result).split(': ', 1)[1]}"
    console.print(
        f"match [bold]{escape(link.match_id)}[/] over{verdict}\n"
        f"replay it: [bold]bergen-replay {escape(link.match_id)}[/]"
    )


def _outcome(link: SeatLink, name: str, left: bool) -> dict[str, Any]:
    """What `--json` prints: the seat and side from 0, as the API counts."""
    state = link.state
    result = state.result
    seat = link.seat
    return {
        "match_id": link.match_id,
        "seat": seat,
        "side": None if seat is None else state.side_of(seat),
        "name": name,
        "left": left,
        "phase": str(state.phase),
        "result": result_json(result),
    }


__all__ = [
    "Seating",
    "load_state",
    "run",
    "save_state",
    "state_dir",
    "state_path",
]
