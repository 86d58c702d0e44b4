"""`bergen play`: play a match from the terminal.

Create a match (`--create`) or join one (`--match ID`), optionally fill the free seats with
bots running in this process (`--bots K`), then play: the other seats' plays are printed
as they happen (WatchMatch, followed in a thread), and on your turn you choose a legal play
from a numbered list by typing its number and Enter.

On a clock (`--create --clock 60+2`; RULES.md section 11) every seat's time left is shown
counting down on a line under the match, rewritten in place with your prompt while you
choose; under 10 s of your own time you are warned, and a timeout that played for you, or a
forfeit, is said.

Your seat token, and those of the bots started here, are saved in a state file
(`$BERGEN_STATE_DIR/<match-id>.json`, default `~/.local/state/bergen/`), so that
`bergen play --match ID` after a disconnect or a crash rejoins as the same seat (and
restarts the bots); a dropped stream is resumed with `after_seq`.

Exit status: 0 when the match ended (whoever won), or when you leave with `q` or the input
ends (your seat stays saved); 130 on Ctrl-C (the seat stays saved); else the statuses the
README lists (unreachable server, unknown match, refused token...).
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
from typing import Any

import grpc
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from bergen.api.exit_status import ExitStatus
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
from .client import Client, Unreachable
from .clocks import LOW_TIME_MS, MatchClock, add_clock_options, clock_options, clocks_markup
from .connect import add_server_option, describe_error, exit_status_of

WAIT_S = 0.2
END_WAIT_S = 5.0
TICK_S = 0.2
"""While a clock runs, the live line is drawn again at least this often."""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "play",
        help="play a match from the terminal",
        description=(__doc__ or "").split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_server_option(p)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--match", metavar="ID", help="join (or resume) this match")
    which.add_argument("--create", action="store_true", help="create a new match")
    which.add_argument(
        "--tournament",
        metavar="ID",
        help="play your matches in this tournament one after another as they are paired, "
        "with the token saved when you registered (or --register now)",
    )
    p.add_argument(
        "--register",
        action="store_true",
        help="with --tournament: register now as --name (with --partner at partnership "
        "tables) and save the tokens",
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
    p.add_argument("--seat", type=int, help="the seat to take (default: the lowest free)")
    p.add_argument("--bots", type=int, default=0, metavar="K", help="fill K seats with bots")
    p.add_argument("--bot-policy", choices=POLICY_NAMES, default="greedy")
    add_policy_options(p)
    add_clock_options(p, "the match created (with --create)")
    p.set_defaults(func=run)


# --- the state file ----------------------------------------------------------------------


def state_dir() -> Path:
    """$BERGEN_STATE_DIR, else $XDG_STATE_HOME/bergen, else ~/.local/state/bergen."""
    env = os.environ.get("BERGEN_STATE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".local" / "state"
    return base / "bergen"


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
    `flush()` prints a line held back."""

    def __init__(
        self,
        console: Console,
        seat: int,
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
        you = ", you" if seat == self.seat else ""
        return f"seat {seat} ({escape(name or '?')}{you})"

    def side_name(self, side: int) -> str:
        if self.state is None:
            return f"side {side}"
        seats = self.state.sides[side]
        if len(seats) == 1:
            return self.who(seats[0])
        return "side " + "+".join(self.who(s) for s in seats)

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
            mine = event.hands[self.seat] if self.seat < len(event.hands) else ()
            tiles = " ".join(str(t) for t in mine if t is not None)
            return f"[bold]{self.words(phrase(event))}[/]; your tiles: {tiles}"
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
        mine = self.state.side_of(self.seat) if self.state is not None else None
        if event.reason == MatchEndReason.FORFEIT:
            # Who forfeited and why (out of time, or resigned), and who won.
            words = self.words(result_words(event))
            if event.forfeited_side == mine:
                verdict = f"[bold red]you forfeit[/]: {words}"
            elif won is not None and won == mine:
                verdict = f"[bold green]you win[/]: {words}"
            else:
                verdict = f"[bold]{words}[/]"
        elif won is not None and self.state is not None and self.seat in self.state.sides[won]:
            verdict = "[bold green]you win[/]"
        elif won is not None:
            verdict = f"[bold red]{self.words(result_words(event))}[/]"
        else:
            verdict = self.words(result_words(event))
        return f"[bold]match over[/]: {verdict}; final scores {scores}"


def _tile(t: Tile) -> str:
    return f"[{t.low}|{t.high}]"


def seat_names(state: State, seat: int) -> list[str]:
    """Each seat's name for the clocks line, `you` for `seat`."""
    names = []
    for s, p in enumerate(state.players):
        names.append("you" if s == seat else escape(p.name if p is not None else f"seat {s}"))
    return names


def clocks_line(state: State, seat: int, clock: MatchClock) -> str:
    """Every seat's clock now (console markup); empty without clocks."""
    return clocks_markup(state, clock, seat, seat_names(state, seat))


def render_turn(
    state: State, seat: int, narrator: Narrator, clock: MatchClock | None = None
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
    line = "".join(_tile(Tile.of(a, b)) for a, b in state.line)
    if state.ends is not None:
        left, right = state.ends[0], state.ends[1]
        lines.append(f"line: {escape(line)}   ends {left}|{right}")
    others = [
        f"{narrator.who(s)} {len(h)} tile{'s' if len(h) != 1 else ''}"
        for s, h in enumerate(state.hands)
        if s != seat
    ]
    lines.append("others: " + ", ".join(others))
    mine = sorted(t for t in state.hands[seat] if t is not None)
    lines.append("your tiles: " + escape(" ".join(_tile(t) for t in mine)))
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


def ask(console: Console, count: int) -> int:
    """A number 1..count typed by the player (0-based index). Raises Quit."""
    while True:
        console.print(f"choose \\[1-{count}] (q to leave): ", end="")
        try:
            terminal.line_typed()
            answer = input()
        except EOFError:
            console.print()
            raise Quit("the input ended") from None
        text = answer.strip().lower()
        if text in ("q", "quit", "exit"):
            raise Quit("you left")
        if text.isdigit() and 1 <= int(text) <= count:
            return int(text) - 1
        console.print(f"type a number from 1 to {count}, or q")


@contextmanager
def _cleared(live: terminal.LiveLine) -> Iterator[None]:
    """The live line is emptied on the way out (the prompt is no longer open)."""
    try:
        yield
    finally:
        live.show(None)


def ask_on_clock(live: terminal.LiveLine, link: SeatLink, count: int) -> int | None:
    """A number 1..count typed by the player (0-based index) while the clocks count down on
    the live line with the prompt; None when the match moved on before the choice (a
    timeout played for the seat): when the stream has delivered an event not yet folded,
    even one delivered before the prompt opened. Raises Quit."""
    typed = ""
    prompt = f" · choose [1-{count}] (q to leave): "
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
            shown = Text("your clock ▶ ").append(clock_words(left), style)
            live.show(shown.append(prompt).append(typed))
            key = terminal.read_char(fd, TICK_S)
            if key is None:
                continue
            if key == "" or (key == "\x04" and not typed):
                live.print("")
                raise Quit("the input ended")
            if key in ("\r", "\n"):
                answer, typed = typed.strip().lower(), ""
                live.print(escape(f"choose [1-{count}]: {answer}"))
                if answer in ("q", "quit", "exit"):
                    raise Quit("you left")
                if answer.isdigit() and 1 <= int(answer) <= count:
                    return int(answer) - 1
                live.print(f"type a number from 1 to {count}, or q")
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
    # Soft wrap: long lines (commands to copy) are left to the terminal to wrap.
    console = Console(highlight=False, soft_wrap=True)
    err = Console(stderr=True, highlight=False)
    name = args.name or os.environ.get("BERGEN_NAME") or _login_name()
    if args.bots < 0:
        err.print("bergen play: --bots must be 0 or more")
        return ExitStatus.USAGE
    if args.partnerships and args.players != 4:
        err.print("bergen play: --partnerships needs --players 4")
        return ExitStatus.USAGE
    try:
        args.options = clock_options(args, args.players, args.partnerships, args.preset)
    except ValueError as e:
        err.print(f"bergen play: {e}", markup=False)
        return ExitStatus.USAGE
    if args.options and not args.create:
        err.print("bergen play: --clock is for a match you --create; a joined match has its own")
        return ExitStatus.USAGE
    live = terminal.LiveLine(console, terminal.is_interactive())
    with Client(args.endpoint) as client:
        try:
            client.wait_ready()
        except Unreachable as e:
            err.print(f"bergen play: the server is unreachable: {e}")
            return ExitStatus.UNREACHABLE
        link: SeatLink | None = None
        try:
            saved = _seat(client, args, name, console)
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
                return _play_loop(console, link, narrator, bot_errors, live)
            finally:
                live.done()
        except grpc.RpcError as e:
            err.print(f"bergen play: {describe_error(e)}")
            return exit_status_of(e)
        except BotFailed as e:
            err.print(f"bergen play: {e}")
            return e.status
        except Quit as e:
            console.print(f"{e}; your seat is saved: {_resume_hint(link)}")
            return ExitStatus.SUCCESS
        except KeyboardInterrupt:
            console.print(f"\ninterrupted; your seat is saved: {_resume_hint(link)}")
            return ExitStatus.INTERRUPTED
        finally:
            if link is not None:
                link.close()


def _resume_hint(link: SeatLink | None) -> str:
    if link is None:
        return "bergen play --match ID resumes"
    return f"[bold]bergen play --match {escape(link.match_id)}[/] resumes"


def _login_name() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "player"


def _seat(client: Client, args: argparse.Namespace, name: str, console: Console) -> dict[str, Any]:
    """Create or join the match, or find the saved seat; returns the state file's content.
    Raises grpc.RpcError."""
    if args.match:
        saved = load_state(args.match)
        if saved is not None:
            view = client.get_match(args.match, saved["token"])  # checks the token
            console.print(
                f"resuming match [bold]{escape(args.match)}[/] as seat {view.viewer_seat} "
                f"({escape(str(saved.get('name', '')))})"
            )
            saved["seat"] = view.viewer_seat
            if args.bots:
                saved = _add_bots(client, saved, args, console)
            return saved
        match_id = args.match
    else:
        created = client.create(
            args.players, args.partnerships, args.preset, name=f"{name}'s", options=args.options
        )
        match_id = created.match_id
        console.print(f"created match [bold]{escape(match_id)}[/]")
    joined = client.join(match_id, name, seat=args.seat)
    data: dict[str, Any] = {
        "server": args.server,
        "match_id": match_id,
        "seat": joined.seat,
        "name": name,
        "token": joined.seat_token,
        "bots": [],
    }
    path = save_state(data)
    console.print(f"you are seat {joined.seat} ({escape(name)}); seat saved in {path}")
    if args.bots:
        data = _add_bots(client, data, args, console)
    return data


def _add_bots(
    client: Client, data: dict[str, Any], args: argparse.Namespace, console: Console
) -> dict[str, Any]:
    for i in range(args.bots):
        bot_name = f"{args.bot_policy}-bot{i + 1}"
        joined = client.join(str(data["match_id"]), bot_name)
        bot = BotSeat(joined.seat, joined.seat_token, args.bot_policy, bot_name)
        data["bots"] = [*data.get("bots", []), asdict(bot)]
        save_state(data)
        console.print(f"seat {joined.seat}: {escape(bot_name)} ({args.bot_policy} bot)")
    return data


def _show_where(console: Console, state: State) -> None:
    if state.phase == SEATING:
        free = [s for s, p in enumerate(state.players) if p is None]
        console.print(
            f"waiting for {len(free)} more player(s) to join: "
            f"bergen play --match {escape(state.match_id)}"
        )


def _play_loop(
    console: Console,
    link: SeatLink,
    narrator: Narrator,
    bot_errors: list[BaseException],
    live: terminal.LiveLine | None = None,
) -> int:
    live = live or terminal.LiveLine(console, enabled=False)
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
            return ExitStatus.SUCCESS
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
            for line in render_turn(state, link.seat, narrator, link.clock):
                live.print(line)
            plays = state.legal_plays(link.seat)
            if state.clocked and live.enabled:
                chosen = ask_on_clock(live, link, len(plays))
                if chosen is None:
                    link.wait(WAIT_S)  # fold what moved the match on, then look again
                    continue
            else:
                chosen = ask(console, len(plays))
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


__all__ = ["Narrator", "load_state", "render_turn", "run", "save_state", "state_dir"]
