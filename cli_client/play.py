"""`bergen play`: play a match from the terminal.

Create a match (`--create`) or join one (`--match ID`), optionally fill the free seats with
bots running in this process (`--bots K`), then play: the other seats' plays are printed as
they happen, and on your turn you choose a legal play from a numbered list by typing its
number and Enter; `r` resigns (after you confirm), `q` leaves with your seat kept.

On a clock (`--create --clock 60+2`) every seat's time left is shown counting down on a line
under the match, rewritten in place with your prompt while you choose; under 10 s of your own
time you are warned, and a timeout that played for you, or a forfeit, is said.

Your seat is saved, so that `bergen play --match ID` after a disconnect or a crash takes it
again (and restarts the bots started with it); a server or replica that goes away is waited
for, and the match resumes where it was.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import random
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any, Literal

import grpc
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from bergen.api.convert import event_in
from bergen.api.exit_status import ExitStatus
from bergen.api.helptext import HelpFormatter
from bergen.api.state import state_dir
from bergen.domain.describe import (
    Phrase,
    clock_words,
    draws_words,
    join,
    phrase,
    points_words,
    result_words,
)
from bergen.domain.events import (
    Dealt,
    Event,
    HandEnded,
    MatchCreated,
    MatchEnded,
    PointsScored,
    TileDrawn,
    TilePlayed,
    TimedOut,
)
from bergen.domain.montecarlo import POLICY_NAMES
from bergen.domain.rules import PRESETS
from bergen.domain.state import SEATING, State, evolve, fold
from bergen.domain.tiles import Tile
from bergen.domain.vocabulary import MatchEndReason, PointsReason

from . import terminal
from .bots import BotFailed, BotSeat, SeatLink, add_policy_options, settings_from, start_bot
from .client import Client, Unreachable, new_token
from .clocks import LOW_TIME_MS, MatchClock, add_clock_options, clock_options, clocks_markup
from .connect import add_server_option, describe_error, exit_status_of, fail_call
from .render import line_text, result_json
from .usage import Failed, examples, fail, report, seat_label, side_label

WAIT_S = 0.2
END_WAIT_S = 5.0
TICK_S = 0.2
"""While a clock runs, the live line is drawn again at least this often."""
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
        "--player",
        type=int,
        default=1,
        metavar="N",
        help="with --tournament: which of the entrant's players you are, 1 or 2 (default 1)",
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


# --- what is shown -----------------------------------------------------------------------


class Narrator:
    """Prints each event as it happens (in the domain's words, `describe`), one line per
    action: a play and the points it made on one line, a run of draws on one. Thread-safe;
    `flush()` prints a line held back. `seat` is the player's, None for a spectator."""

    def __init__(
        self,
        console: Console,
        seat: int | None,
        state: State | None = None,
        out: Callable[[str], None] | None = None,
    ) -> None:
        self.console = console
        self.out = out or console.print
        """Prints a line of console markup (above the live line, when there is one)."""
        self.seat = seat
        self.state = state
        """The fold of what was narrated: names and sides."""
        self.ended = False
        """Whether the end of the match was printed."""
        self.pending: str | None = None
        self.pending_draws: tuple[int, list[Tile | None]] | None = None
        self.lock = threading.RLock()

    def who(self, seat: int) -> str:
        name = None
        if self.state is not None and seat < len(self.state.players):
            p = self.state.players[seat]
            name = p.name if p is not None else None
        # "seat 1 (ann, you)"; a player who called itself "you" is not told so twice.
        you = ", you" if seat == self.seat and (name or "").casefold() != "you" else ""
        return f"{seat_label(seat)} ({escape(name or '?')}{you})"

    def name(self, seat: int) -> str:
        """The seat's player's name (`you` for the player's own), console markup."""
        if seat == self.seat:
            return "you"
        p = self.state.players[seat] if self.state is not None else None
        return escape(p.name) if p is not None and p.name else seat_label(seat)

    def side_name(self, side: int) -> str:
        if self.state is None:
            return side_label(side)
        seats = self.state.sides[side]
        if len(seats) == 1:
            return self.who(seats[0])
        return f"{side_label(side)} ({' and '.join(self.name(s) for s in seats)})"

    def words(self, words: Phrase) -> str:
        """The domain's words as console markup, each seat and side named."""
        marked = tuple(escape(w) if isinstance(w, str) else w for w in words)
        return join(marked, self.who, self.side_name)

    def flush(self) -> None:
        with self.lock:
            self._flush_draws()
            if self.pending is not None:
                self.out(self.pending)
                self.pending = None

    def _flush_draws(self) -> None:
        if self.pending_draws is None:
            return
        seat, tiles = self.pending_draws
        self.pending_draws = None
        self.out(f"{self.who(seat)} {escape(draws_words(tiles))}")

    def on_event(self, _seq: int, event: Event) -> None:
        """`feed`, as a stream's listener (`SeatLink.on_event`) calls it."""
        self.feed(event)

    def feed(self, event: Event) -> None:
        """Print `event` (events come in order, after those of the starting state)."""
        with self.lock:
            self._say(event)
            self.state = evolve(self.state, event)
            if isinstance(event, MatchEnded):
                self.flush()
                self.ended = True

    def _say(self, event: Event) -> None:
        if isinstance(event, PointsScored) and event.seat is not None and self.pending:
            if event.reason == PointsReason.DOMINO:
                self.out(self.pending)
                self.pending = None
                self.out(f"  {self.words(phrase(event))}")
            else:
                self.pending += f" [bold green]{escape(points_words(event))}[/]"
            return
        if isinstance(event, TileDrawn):
            if self.pending_draws is not None and self.pending_draws[0] != event.seat:
                self._flush_draws()
            if self.pending is not None:
                self.out(self.pending)
                self.pending = None
            if self.pending_draws is None:
                self.pending_draws = (event.seat, [])
            self.pending_draws[1].append(event.tile)
            return
        self.flush()
        line = self.describe(event)
        if isinstance(event, TilePlayed):
            if event.auto and event.seat == self.seat:
                line += " [bold red](your time ran out: the server played this for you)[/]"
            self.pending = line
        elif line:
            self.out(line)

    def describe(self, event: Event) -> str:
        if isinstance(event, MatchCreated):
            return ""  # the match was announced when created or joined
        if isinstance(event, Dealt):
            dealt = f"[bold]{self.words(phrase(event))}[/]"
            if self.seat is None or self.seat >= len(event.hands):
                return dealt
            tiles = " ".join(str(t) for t in event.hands[self.seat] if t is not None)
            return f"{dealt}; your tiles: {tiles}"
        if isinstance(event, PointsScored):
            return f"  {self.words(phrase(event))}"
        if isinstance(event, HandEnded):
            return f"[bold]{self.words(phrase(event))}[/]; scores {self.scores(event.scores)}"
        if isinstance(event, MatchEnded):
            return self.result(event)
        if isinstance(event, TimedOut) and event.seat == self.seat:
            return f"[bold red]{self.words(phrase(event))}[/]"
        return self.words(phrase(event))

    def scores(self, scores: tuple[int, ...]) -> str:
        if self.state is None:
            return "-".join(map(str, scores))
        return ", ".join(f"{self.side_name(i)} {s}" for i, s in enumerate(scores))

    def result(self, event: MatchEnded) -> str:
        scores = self.scores(event.scores)
        won = event.winner_side
        mine = (
            self.state.side_of(self.seat)
            if self.state is not None and self.seat is not None
            else None
        )
        if event.reason == MatchEndReason.FORFEIT:
            # Who forfeited and why (out of time, or resigned), and who won.
            words = self.words(result_words(event))
            if event.forfeited_side == mine:
                verdict = f"[bold red]you forfeit[/]: {words}"
            elif won is not None and won == mine:
                verdict = f"[bold green]you win[/]: {words}"
            else:
                verdict = f"[bold]{words}[/]"
        elif won is not None and mine == won:
            verdict = "[bold green]you win[/]"
        elif won is not None:
            verdict = f"[bold red]{self.words(result_words(event))}[/]"
        else:
            verdict = self.words(result_words(event))
        return f"[bold]match over[/]: {verdict}; final scores {scores}"


def seat_names(state: State, seat: int | None) -> list[str]:
    """Each seat's name for the clocks line, `you` for `seat`."""
    names = []
    for s, p in enumerate(state.players):
        names.append("you" if s == seat else escape(p.name if p is not None else seat_label(s)))
    return names


def clocks_line(state: State, seat: int | None, clock: MatchClock) -> str:
    """Every seat's clock now (console markup); empty without clocks."""
    return clocks_markup(state, clock, seat, seat_names(state, seat))


def line_markup(state: State, look: terminal.Look = terminal.PLAIN) -> str:
    """The line as it lies, left to right, each tile turned as laid (`[3|1][1|1][1|4]`), as
    `bergen-replay` draws it; with its open ends. Console markup; empty before the lead."""
    if state.ends is None:
        return ""
    left, right = state.ends[0], state.ends[1]
    return f"line: {line_text(state.line, look).markup}   ends {left}|{right}"


def render_turn(
    state: State,
    seat: int,
    narrator: Narrator,
    clock: MatchClock | None = None,
    look: terminal.Look = terminal.PLAIN,
) -> list[str]:
    """What the seat sees before choosing: scores, the line, the others, its tiles, and its
    legal plays numbered from 1; on a clock, every seat's time left, and a warning under
    LOW_TIME_MS of the seat's own."""
    lines = [
        f"[bold]hand {state.hand}[/] · scores {narrator.scores(state.scores)} "
        f"(target {state.rules.target}) · boneyard {len(state.boneyard)} "
        f"({state.drawable} drawable)",
    ]
    if clock is not None and state.clocked:
        lines.append(clocks_line(state, seat, clock))
        left = clock.left_ms(state, seat)
        if left is not None and left < LOW_TIME_MS:
            lines.append(low_time_warning(left))
    if state.ends is not None:
        lines.append(line_markup(state, look))
    others = [
        f"{narrator.who(s)} {len(h)} tile{'s' if len(h) != 1 else ''}"
        for s, h in enumerate(state.hands)
        if s != seat
    ]
    lines.append("others: " + ", ".join(others))
    mine = sorted(t for t in state.hands[seat] if t is not None)
    lines.append("your tiles: " + escape(" ".join(f"[{t.low}|{t.high}]" for t in mine)))
    if state.must_play is not None:
        lines.append(f"you drew {state.must_play} and must play it")
    lines.append("your plays:")
    for i, (t, e) in enumerate(state.legal_plays(seat), start=1):
        lines.append(f"  {i}) {t} {e.value}")
    return lines


def low_time_warning(left_ms: int) -> str:
    return (
        f"[bold red]under {LOW_TIME_MS // 1000} s left on your clock "
        f"({clock_words(left_ms)}): choose now[/]"
    )


class Quit(Exception):
    """The player left (q, or the input ended)."""


RESIGN: Literal["resign"] = "resign"
"""What the player chose when it resigned (and confirmed it)."""
Choice = int | Literal["resign"]

_QUIT_WORDS = ("q", "quit", "exit")
_RESIGN_WORDS = ("r", "resign")
_YES = ("y", "yes")
CONFIRM_RESIGN = "resign? your side forfeits the match [y/N]: "


def prompt_words(count: int) -> str:
    return f"choose [1-{count}] (r resigns, q leaves): "


def ask(console: Console, count: int) -> Choice:
    """A number 1..count typed by the player (its 0-based index), or RESIGN once the player
    typed `r` and confirmed it. Raises Quit."""
    while True:
        answer = _line(console, escape(prompt_words(count)))
        if answer in _QUIT_WORDS:
            raise Quit("you left")
        if answer in _RESIGN_WORDS:
            if _line(console, escape(CONFIRM_RESIGN)) in _YES:
                return RESIGN
            console.print("you play on")
            continue
        if answer.isdigit() and 1 <= int(answer) <= count:
            return int(answer) - 1
        console.print(f"type a number from 1 to {count}, r or q")


def _line(console: Console, prompt: str) -> str:
    """A line typed after `prompt`, stripped and in lower case. Raises Quit at the end of the
    input."""
    console.print(prompt, end="")
    try:
        terminal.line_typed()
        return input().strip().lower()
    except EOFError:
        console.print()
        raise Quit("the input ended") from None


@contextmanager
def _cleared(live: terminal.LiveLine) -> Iterator[None]:
    """The live line is emptied on the way out (the prompt is no longer open)."""
    try:
        yield
    finally:
        live.show(None)


def ask_on_clock(live: terminal.LiveLine, link: SeatLink, count: int) -> Choice | None:
    """A number 1..count typed by the player (its 0-based index), or RESIGN confirmed, while
    the clocks count down on the live line with the prompt; None when the match moved on
    before the choice (a timeout played for the seat): when the stream has delivered an
    event not yet folded, even one delivered before the prompt opened. Raises Quit."""
    assert link.seat is not None
    typed = ""
    confirming = False
    left = link.clock.left_ms(link.state, link.seat)
    warned = left is not None and left < LOW_TIME_MS  # render_turn warned already
    with terminal.raw_keys() as fd, _cleared(live):
        while True:
            if link.streamed > link.seq or link.stream_ended:
                return None
            left = link.clock.left_ms(link.state, link.seat)
            if left is None:
                return None
            if not warned and left < LOW_TIME_MS:
                live.print(low_time_warning(left))
                warned = True
            # Only the seat to play has a running clock: the line shows it, the prompt and
            # what is typed (the other clocks were printed with the turn).
            style = "bold red" if left < LOW_TIME_MS else "bold"
            prompt = CONFIRM_RESIGN if confirming else prompt_words(count)
            shown = Text("your clock ▶ ").append(clock_words(left), style)
            live.show(shown.append(" · " + prompt).append(typed))
            key = terminal.read_char(fd, TICK_S)
            if key is None:
                continue
            if key == "" or (key == "\x04" and not typed):
                live.print("")
                raise Quit("the input ended")
            if key in ("\r", "\n"):
                answer, typed = typed.strip().lower(), ""
                live.print(escape(prompt + answer))
                if confirming:
                    if answer in _YES:
                        return RESIGN
                    confirming = False
                    live.print("you play on")
                elif answer in _QUIT_WORDS:
                    raise Quit("you left")
                elif answer in _RESIGN_WORDS:
                    confirming = True
                elif answer.isdigit() and 1 <= int(answer) <= count:
                    return int(answer) - 1
                else:
                    live.print(f"type a number from 1 to {count}, r or q")
            elif key in ("\x7f", "\x08"):
                typed = typed[:-1]
            elif key.isprintable() and len(typed) < 8:
                typed += key


# --- the command -------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    # Ctrl-C must interrupt even when the shell that started us ignored SIGINT (a job
    # started with `&` from a script inherits SIG_IGN, and Python then keeps it).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if args.tournament is not None:
        from .tournament_play import run_player  # it plays each match with this module's loop

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
            bot_errors: list[BaseException] = []
            settings = settings_from(args)
            for b in saved.get("bots", []):
                bot = BotSeat(**b)
                start_bot(client, match_id, bot, settings, random.Random(), bot_errors.append)
            link = SeatLink(client, match_id, seat, token)
            history = link.load()
            # Tell the hand in play so far, then follow the stream from there.
            start = max((i for i, e in enumerate(history) if isinstance(e, Dealt)), default=0)
            narrator = Narrator(
                console, seat, fold(history[:start]) if start else None, out=live.print
            )
            for event in history[start:] if start else ():
                narrator.feed(event)
            if not start:
                narrator.state = link.state
            link.on_event = lambda _seq, event: narrator.feed(event)
            link.follow()
            _show_where(console, link.state)
            try:
                play_loop(console, link, narrator, bot_errors, live, look)
            finally:
                live.done()
            _summary(console, link, narrator)
            if args.json:
                print(json.dumps(_outcome(link, name, left=False)))
            return ExitStatus.SUCCESS
        except grpc.RpcError as e:
            seating.abandon(client, link, console)
            live.done()
            return fail_call(COMMAND, e)
        except BotFailed as e:
            seating.abandon(client, link, console)
            live.done()
            return fail(COMMAND, str(e), e.status, "BOT_FAILED")
        except Failed as e:
            seating.abandon(client, link, console)
            live.done()
            return report(COMMAND, e)
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


def _resume_hint(link: SeatLink | None) -> str:
    if link is None:
        return "bergen play --match ID resumes"
    return f"[bold]bergen play --match {escape(link.match_id)}[/] resumes"


def login_name() -> str:
    """The user's login name, `player` when there is none."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "player"


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
    else:
        seating.creator_token = new_token()
        created = client.create(
            args.players,
            args.partnerships,
            args.preset,
            name=f"{name}'s",
            options=args.options,
            creator_token=seating.creator_token,
        )
        match_id = seating.match_id = created.match_id
        console.print(f"created match [bold]{escape(match_id)}[/]")
    joined = client.join(match_id, name, seat=seat)
    data: dict[str, Any] = {
        "server": args.server,
        "match_id": match_id,
        "seat": joined.seat,
        "name": name,
        "token": joined.seat_token,
        "bots": [],
    }
    if seating.creator_token is not None:
        data["creator_token"] = seating.creator_token
    path = save_state(data)
    console.print(
        f"you are {seat_label(joined.seat)} ({escape(name)}); seat saved in {escape(str(path))}"
    )
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


def _add_bots(
    client: Client, data: dict[str, Any], args: argparse.Namespace, console: Console
) -> dict[str, Any]:
    for i in range(args.bots):
        bot_name = f"{args.bot_policy}-bot{i + 1}"
        joined = client.join(str(data["match_id"]), bot_name)
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


def play_loop(
    console: Console,
    link: SeatLink,
    narrator: Narrator,
    bot_errors: list[BaseException],
    live: terminal.LiveLine | None = None,
    look: terminal.Look = terminal.PLAIN,
) -> None:
    """Play the link's seat until the match ends (whoever won). Raises Quit (the player
    left), BotFailed, grpc.RpcError."""
    live = live or terminal.LiveLine(console, enabled=False)
    assert link.seat is not None
    while True:
        if link.ended:
            live.show(None)
            # The stream ends after the match's last event: let the narrator print it all.
            deadline = time.monotonic() + END_WAIT_S
            while not link.stream_ended and time.monotonic() < deadline:
                link.wait(WAIT_S)
            narrator.flush()
            if not narrator.ended:
                result = link.state.result
                assert result is not None
                live.print(narrator.result(result))
            return
        if bot_errors:
            e = bot_errors[0]
            if isinstance(e, BotFailed):
                raise e
            raise BotFailed(f"a bot failed: {e!r}", ExitStatus.ERROR)
        if link.my_turn():
            # Let the other seats' actions be printed before the choice.
            link.wait_streamed(END_WAIT_S)
            narrator.flush()
            state = link.state
            live.show(None)  # the turn's lines give the clocks; the prompt comes after them
            for line in render_turn(state, link.seat, narrator, link.clock, look):
                live.print(line)
            plays = state.legal_plays(link.seat)
            chosen: Choice | None
            if state.clocked and live.enabled:
                chosen = ask_on_clock(live, link, len(plays))
                if chosen is None:
                    link.wait(WAIT_S)  # fold what moved the match on, then look again
                    continue
            else:
                chosen = ask(console, len(plays))
            if chosen == RESIGN:
                resign(link)
                continue
            assert isinstance(chosen, int)
            tile, end = plays[chosen]
            if not link.play(tile, end):
                live.print("the match moved on meanwhile; choose again")
            continue
        if link.stream_ended:
            link.resync()
            if not link.ended:
                raise BotFailed("the event stream ended before the match", ExitStatus.ERROR)
            continue
        if not link.wait(WAIT_S):
            narrator.flush()
        if link.state.clocked:
            # The clocks count down while another seat chooses.
            live.show(Text.from_markup(clocks_line(link.state, link.seat, link.clock)))


def resign(link: SeatLink) -> None:
    """Resign the link's seat (its side forfeits) and fold what that wrote. Raises
    grpc.RpcError."""
    assert link.token is not None
    reply = link.client.resign(link.match_id, link.token)
    for msg in reply.events:
        link.apply(*event_in(msg))


__all__ = [
    "Narrator",
    "Quit",
    "ask",
    "load_state",
    "login_name",
    "play_loop",
    "render_turn",
    "run",
    "save_state",
    "state_dir",
]
