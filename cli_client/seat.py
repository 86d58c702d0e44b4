"""One seat in a match, played to its end: the seat's live knowledge (`SeatLink`), and the
loop that plays it, by a bot (`run_seat`) or by a person at the terminal (`play_loop`).

A seat holds only its token. It learns the match from GetReplay (the stream as its seat may
see it), then follows WatchMatch, resuming with `after_seq` when the stream drops, and folds
every event into its seat's knowledge (`montecarlo.learn`). On its turn it decides (a bot's
decision function: random, greedy, Monte Carlo or ISMCTS, `deciders.decider`; or the player's
choice from a numbered list) and sends the play with the version it decided on, so a play
decided on a stale view is refused (ABORTED) and decided again. A player may resign; a
stream that ends before the match, or cannot be opened again, fails the seat (`BotFailed`).

On a clock (RULES.md section 11) a bot fits its thinking to its time: a searching policy
spends at most a small share of the time its seat has left (`clocks.think_budget_s`), and with
little left plays greedy at once. A person sees every seat's time counting down.

`bergen play`, `bergen bots` and the tournament players (`tournament_play`) all play their
seats through this module.
"""

from __future__ import annotations

import argparse
import getpass
import queue
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Literal

import grpc
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from bergen.api.convert import event_in
from bergen.api.exit_status import ExitStatus
from bergen.domain.deciders import SEARCHING, Decider, decider
from bergen.domain.describe import clock_words
from bergen.domain.events import Dealt, Event
from bergen.domain.ismcts import ismcts_play
from bergen.domain.montecarlo import (
    MAX_BUDGET_S,
    Knowledge,
    Settings,
    learn,
    montecarlo_play,
)
from bergen.domain.state import ENDED, PLAYING, State, evolve, fold
from bergen.domain.tiles import End, Tile

from . import terminal
from .client import RETRY_S, Client, WatchCall, passing, pause_s, watch_events
from .clocks import LOW_TIME_MS, MatchClock, think_budget_s
from .connect import describe_error, exit_status_of
from .narrate import Narrator, clocks_line, low_time_warning, render_turn
from .usage import Failed, seat_label

RECONNECT_S = RETRY_S
"""How long a dropped WatchMatch stream is opened again before the seat gives up."""
SETTLE_S = 0.02
"""After an event, wait this long for the rest of its command's events before deciding."""
WAIT_S = 0.25
"""How long a bot waits for the stream before looking at the match again."""
MATCH_TIMEOUT_S = 600.0
PLAYER_WAIT_S = 0.2
"""How long the terminal player's loop waits for the stream before looking again."""
END_WAIT_S = 5.0
TICK_S = 0.2
"""While a clock runs, the live line is drawn again at least this often."""


class _StreamEnded:
    """The WatchMatch stream finished: the match has ended."""


class BotFailed(Failed):
    """A seat failed for good (its stream lost, or a bot stopped early): reported as any
    `Failed`, with the reason BOT_FAILED and the exit status it carries."""

    def __init__(self, message: str, status: ExitStatus) -> None:
        super().__init__(message, status, "BOT_FAILED")


class SeatLink:
    """One seat's live knowledge of a match: GetReplay, then WatchMatch in a thread. With no
    seat and no token, a spectator's (`bergen watch`): what everyone may see.

    `on_event(seq, event)` is called from the watcher thread for every streamed event, in
    order, before the event is queued (the terminal client prints from it).
    """

    def __init__(
        self,
        client: Client,
        match_id: str,
        seat: int | None,
        token: str | None,
        on_event: Callable[[int, Event], None] | None = None,
    ) -> None:
        self.client = client
        self.match_id = match_id
        self.seat = seat
        self.token = token
        self.k = Knowledge(-1 if seat is None else seat, None)
        """The seat's knowledge; a spectator's holds only the folded state."""
        self.seq = 0
        self.on_event = on_event
        self.stop = threading.Event()
        self._items: queue.Queue[tuple[int, Event] | _StreamEnded | BotFailed] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._call: WatchCall | None = None
        self.stream_ended = False
        self.streamed = 0
        """The last seq the stream delivered (and `on_event` was called for)."""
        self.clock = MatchClock()
        """The match time, from the times the server sent."""

    @property
    def state(self) -> State:
        assert self.k.state is not None
        return self.k.state

    def start(self) -> None:
        """Fold the replay and start following the stream. Raises grpc.RpcError."""
        self.load()
        self.follow()

    def load(self) -> list[Event]:
        """Fold the replay; returns its events. Raises grpc.RpcError."""
        events = self.client.replay(self.match_id, self.token)
        for seq, event in events:
            self.apply(seq, event)
        return [e for _, e in events]

    def follow(self) -> None:
        """Follow WatchMatch from the last event folded, in a daemon thread."""
        # What was folded before is not streamed again: nothing to wait for up to there.
        self.streamed = max(self.streamed, self.seq)
        self._thread = threading.Thread(
            target=self._watch, name=f"watch-{self.match_id}-{self.seat}", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self.stop.set()
        call = self._call
        if call is not None:
            call.cancel()

    def apply(self, seq: int, event: Event) -> bool:
        """Fold one event unless already folded. Returns whether it was new."""
        if seq <= self.seq:
            return False
        if seq != self.seq + 1:
            # A gap should not happen; fill it from the replay rather than fold out of order.
            for s, e in self.client.replay(self.match_id, self.token, after_seq=self.seq):
                if s < seq:
                    self.apply(s, e)
        if self.seat is None:
            self.k = Knowledge(-1, evolve(self.k.state, event))
        else:
            self.k = learn(self.k, event)
        self.seq = seq
        self.clock.saw_event(event)
        return True

    def _watch(self) -> None:
        after = self.seq
        failing_since: float | None = None
        attempt = 0
        while not self.stop.is_set():
            try:
                call = self.client.watch(self.match_id, self.token, after_seq=after)
                self._call = call
                for item in watch_events(call):
                    if failing_since is not None and self.client.notice is not None:
                        self.client.notice("the match's stream is back")
                    failing_since, attempt = None, 0
                    if not isinstance(item, tuple):
                        self.clock.saw_view(item)
                        continue
                    seq, event = item
                    self.clock.saw_event(event)
                    if seq <= after:
                        continue
                    after = seq
                    if self.on_event is not None:
                        self.on_event(seq, event)
                    self.streamed = seq
                    self._items.put(item)
                self._items.put(_StreamEnded())
                return
            except grpc.RpcError as e:
                if self.stop.is_set():
                    return
                now = time.monotonic()
                failing_since = failing_since or now
                attempt += 1
                if not passing(e) or now - failing_since > RECONNECT_S:
                    self._items.put(
                        BotFailed(
                            f"match {self.match_id}: the event stream failed: {describe_error(e)}",
                            exit_status_of(e),
                        )
                    )
                    return
                if attempt == 1 and self.client.notice is not None:
                    self.client.notice(
                        f"the match's stream was cut ({describe_error(e)}); opening it again"
                    )
                self.stop.wait(pause_s(attempt))

    def wait(self, timeout: float) -> bool:
        """Fold what the stream delivered: block up to `timeout` for a first event, then take
        the rest of its batch. Returns whether anything new was folded. Raises BotFailed."""
        got = False
        block = timeout
        while True:
            try:
                item = self._items.get(timeout=block)
            except queue.Empty:
                return got
            if isinstance(item, BotFailed):
                raise item
            if isinstance(item, _StreamEnded):
                self.stream_ended = True
                return got
            got = self.apply(*item) or got
            block = SETTLE_S

    def wait_streamed(self, timeout: float) -> None:
        """Wait until the stream has delivered every event folded so far (those a play's
        answer brought included), or `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while self.streamed < self.seq and not self.stream_ended:
            if time.monotonic() > deadline:
                return
            time.sleep(0.01)

    @property
    def ended(self) -> bool:
        return self.k.state is not None and self.k.state.phase == ENDED

    def my_turn(self) -> bool:
        s = self.k.state
        return (
            self.seat is not None
            and s is not None
            and s.phase == PLAYING
            and s.turn == self.seat
            and bool(s.legal_plays(self.seat))
        )

    def play(self, tile: Tile, end: End | None) -> bool:
        """Send a play decided on the current version and fold its events. Returns False
        when the match moved on meanwhile (decide again). A play whose answer is lost is sent
        again with the same command id (`Client.again`): applied once whatever happened to
        the first. Raises grpc.RpcError."""
        if self.token is None:
            raise ValueError("a spectator cannot play")
        try:
            reply = self.client.play(
                self.match_id,
                self.token,
                tile,
                end,
                expected_version=self.state.version,
                command_id=uuid.uuid4().hex,
            )
        except grpc.RpcError as e:
            code = e.code() if isinstance(e, grpc.Call) else None
            if code in (grpc.StatusCode.ABORTED, grpc.StatusCode.FAILED_PRECONDITION):
                self.resync()
                return False
            raise
        for msg in reply.events:
            self.apply(*event_in(msg))
        return True

    def resync(self) -> None:
        """Fold whatever the server has that this seat has not seen."""
        for seq, event in self.client.replay(self.match_id, self.token, after_seq=self.seq):
            self.apply(seq, event)


# --- a bot --------------------------------------------------------------------------------


def _whose(link: SeatLink) -> str:
    return "a spectator" if link.seat is None else seat_label(link.seat)


def seat_decider(name: str, settings: Settings, clock: MatchClock) -> Decider:
    """The decision function of policy `name` for a seat whose match time `clock` tells.

    In a clocked match a searching policy (Monte Carlo, ISMCTS) thinks for `think_budget_s`
    of the seat's time left (never more than `settings` allow, one world at least), and plays
    greedy at once when that is too little. Raises KeyError for an unknown name."""
    plain = decider(name, settings)
    if name not in SEARCHING:
        return plain
    greedy = decider("greedy", settings)

    def on_the_clock(k: Knowledge, rng: random.Random) -> tuple[Tile, End]:
        state = k.state
        left = None if state is None else clock.left_ms(state, k.seat)
        if state is None or left is None:
            return plain(k, rng)
        budget = think_budget_s(left, settings.budget_s)
        if budget is None:
            return greedy(k, rng)
        thinking = replace(settings, budget_s=budget, min_samples=1)
        if name == "ismcts":
            return ismcts_play(k, rng, thinking)
        return montecarlo_play(k, rng, thinking)

    return on_the_clock


def run_seat(
    link: SeatLink,
    decide: Decider,
    rng: random.Random,
    deadline: float | None = None,
) -> State:
    """Play the seat until the match ends; returns the final state.

    Raises BotFailed (stream lost, or the match did not end by `deadline`), grpc.RpcError.
    """
    while not link.ended:
        if link.stop.is_set():
            raise BotFailed(f"match {link.match_id}, {_whose(link)}: stopped", ExitStatus.ERROR)
        if deadline is not None and time.monotonic() > deadline:
            raise BotFailed(
                f"match {link.match_id}, {_whose(link)}: the match did not end in time",
                ExitStatus.ERROR,
            )
        if link.my_turn():
            tile, end = decide(link.k, rng)
            if link.play(tile, end):
                continue
        if link.stream_ended:
            link.resync()
            if not link.ended:
                raise BotFailed(
                    f"match {link.match_id}: the stream ended before the match", ExitStatus.ERROR
                )
            break
        link.wait(WAIT_S)
    return link.state


@dataclass
class BotSeat:
    """A bot's seat in a match: what it needs to (re)connect."""

    seat: int
    token: str
    policy: str
    name: str


def start_bot(
    client: Client,
    match_id: str,
    bot: BotSeat,
    settings: Settings,
    rng: random.Random,
    on_error: Callable[[BaseException], None] | None = None,
    *,
    link: SeatLink | None = None,
    on_done: Callable[[], None] | None = None,
) -> threading.Thread:
    """Run a bot in a daemon thread; `on_error` gets what made it stop early, `on_done` is
    called once its match has ended. It plays through `link` (default: a new one for its
    seat), which the caller may close to stop it (`on_error` then gets BotFailed)."""
    seat_link = link or SeatLink(client, match_id, bot.seat, bot.token)

    def body() -> None:
        try:
            seat_link.start()
            run_seat(seat_link, seat_decider(bot.policy, settings, seat_link.clock), rng)
        except BaseException as e:  # reported to the caller, who decides
            if on_error is not None:
                on_error(e)
        else:
            if on_done is not None:
                on_done()
        finally:
            seat_link.close()

    thread = threading.Thread(target=body, name=f"bot-{match_id}-{bot.seat}", daemon=True)
    thread.start()
    return thread


def settings_from(args: argparse.Namespace) -> Settings:
    return Settings(samples=args.mc_samples, budget_s=min(args.mc_budget, MAX_BUDGET_S))


def add_policy_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--mc-budget",
        type=float,
        default=Settings().budget_s,
        metavar="SECONDS",
        help="Monte Carlo and ISMCTS time per decision (default %(default)s, at most 0.9)",
    )
    p.add_argument(
        "--mc-samples",
        type=int,
        default=None,
        metavar="N",
        help="Monte Carlo worlds (ISMCTS iterations) per decision (default: as many as the "
        "time allows)",
    )


# --- a person at the terminal ---------------------------------------------------------------


def login_name() -> str:
    """The user's login name, `player` when there is none."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "player"


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


def follow_narrated(link: SeatLink, console: Console, live: terminal.LiveLine) -> Narrator:
    """Fold the seat's replay, tell the hand in play so far, then follow the stream with each
    event told as it comes; returns the narrator. Raises grpc.RpcError."""
    history = link.load()
    start = max((i for i, e in enumerate(history) if isinstance(e, Dealt)), default=0)
    narrator = Narrator(
        console, link.seat, fold(history[:start]) if start else None, out=live.print
    )
    for event in history[start:] if start else ():
        narrator.feed(event)
    if not start:
        narrator.state = link.state
    link.on_event = narrator.on_event
    link.follow()
    return narrator


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
                link.wait(PLAYER_WAIT_S)
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
                    link.wait(PLAYER_WAIT_S)  # fold what moved the match on, then look again
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
        if not link.wait(PLAYER_WAIT_S):
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
    "RESIGN",
    "BotFailed",
    "BotSeat",
    "Choice",
    "Quit",
    "SeatLink",
    "add_policy_options",
    "ask",
    "ask_on_clock",
    "follow_narrated",
    "login_name",
    "play_loop",
    "resign",
    "run_seat",
    "seat_decider",
    "settings_from",
    "start_bot",
]
