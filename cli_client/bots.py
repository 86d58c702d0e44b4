"""Bots as ordinary gRPC clients, and `bergen bots`.

A bot holds only its seat token. It learns the match from GetReplay (the stream as its seat
may see it), then follows WatchMatch, resuming with `after_seq` when the stream drops, and
folds every event into its seat's knowledge (`montecarlo.learn`). When the seat is to play
it asks its decision function (random, greedy or Monte Carlo: `montecarlo.decider`) and sends
the play with the version it decided on, so a play decided on a stale view is refused
(ABORTED) and decided again.

On a clock (RULES.md section 11) a bot fits its thinking to its time: the Monte Carlo policy
spends at most a small share of the time its seat has left (`clocks.think_budget_s`), and with
little left plays greedy at once.
"""

from __future__ import annotations

import argparse
import json
import queue
import random
import secrets
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import grpc
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from bergen.api.convert import event_in
from bergen.api.exit_status import ExitStatus
from bergen.api.helptext import HelpFormatter
from bergen.domain.events import Event
from bergen.domain.montecarlo import (
    MAX_BUDGET_S,
    POLICY_NAMES,
    Decider,
    Knowledge,
    Settings,
    decider,
    learn,
    montecarlo_play,
)
from bergen.domain.rules import PRESETS
from bergen.domain.state import ENDED, PLAYING, State, evolve
from bergen.domain.tiles import End, Tile, side_of

from .client import RETRY_S, Client, Unreachable, WatchCall, passing, pause_s, watch_events
from .clocks import MatchClock, add_clock_options, clock_options, options_words, think_budget_s
from .connect import add_server_option, describe_error, details_of, exit_status_of, reason_of
from .usage import examples, fail, seat_label

RECONNECT_S = RETRY_S
"""How long a dropped WatchMatch stream is opened again before the seat gives up."""
SETTLE_S = 0.02
"""After an event, wait this long for the rest of its command's events before deciding."""
WAIT_S = 0.25
MATCH_TIMEOUT_S = 600.0
MAX_PARALLEL = 64
COMMAND = "bots"


class _StreamEnded:
    """The WatchMatch stream finished: the match has ended."""


class BotFailed(Exception):
    """A seat's connection failed for good; carries the exit status to report."""

    def __init__(self, message: str, status: ExitStatus) -> None:
        super().__init__(message)
        self.status = status


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


def _seat(link: SeatLink) -> str:
    return "a spectator" if link.seat is None else seat_label(link.seat)


def seat_decider(name: str, settings: Settings, clock: MatchClock) -> Decider:
    """The decision function of policy `name` for a seat whose match time `clock` tells.

    In a clocked match the Monte Carlo policy thinks for `think_budget_s` of the seat's time
    left (never more than `settings` allow, one world at least), and plays greedy at once
    when that is too little. Raises KeyError for an unknown name."""
    plain = decider(name, settings)
    if name != "montecarlo":
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
        return montecarlo_play(k, rng, replace(settings, budget_s=budget, min_samples=1))

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
            raise BotFailed(f"match {link.match_id}, {_seat(link)}: stopped", ExitStatus.ERROR)
        if deadline is not None and time.monotonic() > deadline:
            raise BotFailed(
                f"match {link.match_id}, {_seat(link)}: the match did not end in time",
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
) -> threading.Thread:
    """Run a bot in a daemon thread; `on_error` gets what made it stop early."""

    def body() -> None:
        link = SeatLink(client, match_id, bot.seat, bot.token)
        try:
            link.start()
            run_seat(link, seat_decider(bot.policy, settings, link.clock), rng)
        except BaseException as e:  # reported to the caller, who decides
            if on_error is not None:
                on_error(e)
        finally:
            link.close()

    thread = threading.Thread(target=body, name=f"bot-{match_id}-{bot.seat}", daemon=True)
    thread.start()
    return thread


# --- `bergen bots` ---------------------------------------------------------------------


def settings_from(args: argparse.Namespace) -> Settings:
    return Settings(samples=args.mc_samples, budget_s=min(args.mc_budget, MAX_BUDGET_S))


def add_policy_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--mc-budget",
        type=float,
        default=Settings().budget_s,
        metavar="SECONDS",
        help="Monte Carlo time per decision (default %(default)s, at most 0.9)",
    )
    p.add_argument(
        "--mc-samples",
        type=int,
        default=None,
        metavar="N",
        help="Monte Carlo worlds per decision (default: as many as the time allows)",
    )


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "bots",
        help="play matches between bots against a server",
        description="Create matches on a server and play them with bot clients, one thread "
        "per seat, each holding only its seat token. With several policies the seats rotate "
        "every match. Prints each match as it ends and a summary; exit status 0 when every "
        "match ended. With --tournament, bots enter a tournament instead and play every "
        "match they are paired in until it ends.",
        epilog=examples(
            "bergen bots --matches 20 --policy montecarlo greedy --parallel 4",
            "bergen bots --matches 5 --players 3 --clock 60+2 --json",
            "bergen bots --tournament TOURNAMENT --entrants 6 --policy greedy random",
        ),
        formatter_class=HelpFormatter,
    )
    add_server_option(p)
    p.add_argument(
        "--matches", type=int, default=1, metavar="N", help="how many matches (default 1)"
    )
    p.add_argument(
        "--players", type=int, choices=(2, 3, 4), default=2, help="seats a match (default 2)"
    )
    p.add_argument("--partnerships", action="store_true", help="4 seats as two sides")
    p.add_argument(
        "--preset", default="standard", choices=sorted(PRESETS), help="the rules (default standard)"
    )
    p.add_argument(
        "--policy",
        nargs="+",
        choices=POLICY_NAMES,
        default=["greedy"],
        help="one policy for every seat, or one per seat (or per side), rotated each match",
    )
    p.add_argument(
        "--parallel",
        type=int,
        default=1,
        metavar="N",
        help=f"matches played at once, 1 to {MAX_PARALLEL} (default 1)",
    )
    p.add_argument("--seed", metavar="TEXT", help="seed of the bots' choices (default: random)")
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object at the end instead of lines: the settings (clock: "
        "INITIAL+INCREMENT or null), each match (match_id, policies, winner_side, winner_seats, "
        "scores, hands, reason, forfeited_side, cause) and wins per policy",
    )
    p.add_argument(
        "--tournament",
        metavar="ID",
        help="instead of creating matches: register --entrants bot entrants in this "
        "tournament (open for registration), play every match each is seated in until it "
        "ends, and print the final standings",
    )
    p.add_argument(
        "--entrants",
        type=int,
        metavar="N",
        help="with --tournament: how many bot entrants, their policies taken in turn",
    )
    add_policy_options(p)
    add_clock_options(p, "every match")
    p.set_defaults(func=run)


def seat_policies(policies: list[str], seats: int, partnerships: bool, match: int) -> list[str]:
    """Each seat's policy in match number `match` (0-based): one for all, one per seat or one
    per side, rotated by one place every match so no policy keeps a seat."""
    sides = 2 if partnerships else seats
    if len(policies) == 1:
        return policies * seats
    if len(policies) == sides:
        return [policies[(side_of(s, partnerships) + match) % sides] for s in range(seats)]
    return [policies[(s + match) % seats] for s in range(seats)]


@dataclass
class MatchOutcome:
    match_id: str
    policies: list[str]
    state: State


def play_match(
    client: Client,
    seats: int,
    partnerships: bool,
    preset: str,
    policies: list[str],
    settings: Settings,
    rng: random.Random,
    options: Mapping[str, object] | None = None,
) -> MatchOutcome:
    """Create a match (with the rule `options`: a clock's) and play it with one bot thread
    per seat.

    Raises grpc.RpcError (creating or joining) and BotFailed (a bot stopped early).
    """
    # Sent again after a passing error (`Client.again`): a creation whose answer was lost
    # leaves an empty match behind, which the server abandons after its seating timeout.
    created = client.create(seats, partnerships, preset, name="bergen bots", options=options)
    match_id = created.match_id
    errors: list[BaseException] = []
    finals: dict[int, State] = {}
    deadline = time.monotonic() + MATCH_TIMEOUT_S

    def body(seat: int, seat_rng: random.Random) -> None:
        link: SeatLink | None = None
        try:
            joined = client.join(match_id, f"{policies[seat]}{seat + 1}", seat=seat)
            link = SeatLink(client, match_id, seat, joined.seat_token)
            link.start()
            decide = seat_decider(policies[seat], settings, link.clock)
            finals[seat] = run_seat(link, decide, seat_rng, deadline)
        except BaseException as e:  # collected and raised by the caller
            errors.append(e)
        finally:
            if link is not None:
                link.close()

    threads = [
        threading.Thread(
            target=body, args=(s, random.Random(rng.random())), name=f"bot-{s}", daemon=True
        )
        for s in range(seats)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        e = errors[0]
        if isinstance(e, grpc.RpcError):
            raise e
        if isinstance(e, BotFailed):
            raise e
        raise BotFailed(f"match {match_id}: a bot failed: {e!r}", ExitStatus.ERROR) from e
    return MatchOutcome(match_id, policies, finals[0])


def run(args: argparse.Namespace) -> int:
    err = Console(stderr=True, highlight=False)
    out = Console(highlight=False, soft_wrap=True)
    if args.tournament is not None:
        from .tournament_play import run_bots  # it plays its matches with this module's bots

        return run_bots(args)
    if args.entrants is not None:
        return fail(COMMAND, "--entrants is for --tournament", ExitStatus.USAGE)
    if args.matches < 1:
        return fail(COMMAND, "--matches must be at least 1", ExitStatus.USAGE)
    if not 1 <= args.parallel <= MAX_PARALLEL:
        return fail(COMMAND, f"--parallel must be 1 to {MAX_PARALLEL}", ExitStatus.USAGE)
    if args.partnerships and args.players != 4:
        return fail(COMMAND, "--partnerships needs --players 4", ExitStatus.USAGE)
    sides = 2 if args.partnerships else args.players
    if len(args.policy) not in (1, args.players, sides):
        return fail(
            COMMAND,
            f"give one --policy for all seats, or {args.players} (one per seat)"
            + (f" or {sides} (one per side)" if sides != args.players else ""),
            ExitStatus.USAGE,
        )
    try:
        options = clock_options(args, args.players, args.partnerships, args.preset)
    except ValueError as e:
        return fail(COMMAND, str(e), ExitStatus.USAGE)
    seed = args.seed if args.seed is not None else secrets.token_hex(8)
    rng = random.Random(seed)
    # One generator per match, drawn in match order, whatever order the matches end in.
    match_rngs = [random.Random(rng.random()) for _ in range(args.matches)]
    settings = settings_from(args)
    wins: Counter[str] = Counter()
    played: Counter[str] = Counter()
    hands = 0
    reports: list[dict[str, object]] = []

    printing = out
    """Where a match's line goes: the progress bar's console while the bar is drawn."""

    def say(text: str) -> None:
        printing.print(text, markup=False, soft_wrap=True)

    def report(outcome: MatchOutcome) -> None:
        nonlocal hands
        state, policies = outcome.state, outcome.policies
        result = state.result
        assert result is not None
        hands += state.hand
        for name in set(policies):
            played[name] += 1
        winner = "nobody"
        if result.winner_side is not None:
            seats_won = state.sides[result.winner_side]
            names = sorted({policies[s] for s in seats_won})
            for name in names:
                wins[name] += 1
            who = "+".join(seat_label(s) for s in seats_won)
            winner = f"{'+'.join(names)} ({who})"
        reports.append(
            {
                "match_id": outcome.match_id,
                "policies": list(policies),
                "winner_side": result.winner_side,
                "winner_seats": []
                if result.winner_side is None
                else list(state.sides[result.winner_side]),
                "scores": list(result.scores),
                "hands": state.hand,
                "reason": str(result.reason),
                "forfeited_side": result.forfeited_side,
                "cause": None if result.cause is None else str(result.cause),
            }
        )
        if args.json:
            return
        scores = "-".join(map(str, result.scores))
        forfeit = ""
        if result.forfeited_side is not None:
            who = "+".join(seat_label(s) for s in state.sides[result.forfeited_side])
            forfeit = f" forfeit {who} ({result.cause})"
        say(
            f"{outcome.match_id} winner {winner} scores {scores} hands {state.hand} "
            f"seats {','.join(policies)}{forfeit}"
        )

    with Client(args.endpoint) as client:
        try:
            client.wait_ready()
        except Unreachable as e:
            return fail(COMMAND, str(e), ExitStatus.UNREACHABLE)
        # The bar only on a terminal, drawn below the lines printed: on a terminal the lines
        # go through the bar's own console (which draws them above it), else to stdout.
        progress = Progress(
            TextColumn("[bold]matches"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
            disable=not (err.is_terminal and out.is_terminal) or args.json,
            transient=True,
        )
        if not progress.disable:
            printing = progress.console
        failure: tuple[str, ExitStatus, str] | None = None
        # Each match plays in a daemon thread of its own (its seats in theirs), so Ctrl-C ends
        # the command at once whatever is running.
        ended: queue.Queue[MatchOutcome | BaseException] = queue.Queue()

        def play(policies: list[str], match_rng: random.Random) -> None:
            try:
                ended.put(
                    play_match(
                        client,
                        args.players,
                        args.partnerships,
                        args.preset,
                        policies,
                        settings,
                        match_rng,
                        options,
                    )
                )
            except BaseException as e:  # reported by the main thread
                ended.put(e)

        started = running = 0

        def start_next() -> None:
            nonlocal started, running
            policies = seat_policies(args.policy, args.players, args.partnerships, started)
            threading.Thread(
                target=play,
                args=(policies, match_rngs[started]),
                name=f"bots-match-{started}",
                daemon=True,
            ).start()
            started += 1
            running += 1

        with progress:
            task = progress.add_task("matches", total=args.matches)
            while started < min(args.parallel, args.matches):
                start_next()
            # Matches are reported as they end. After a failure no match is started; those
            # already running are played out and reported, then the failure is.
            while running:
                got = ended.get()
                running -= 1
                if isinstance(got, MatchOutcome):
                    report(got)
                elif isinstance(got, grpc.RpcError):
                    failure = failure or (details_of(got), exit_status_of(got), reason_of(got))
                elif isinstance(got, BotFailed):
                    failure = failure or (str(got), got.status, "BOT_FAILED")
                else:
                    raise got
                progress.advance(task)
                if failure is None and started < args.matches:
                    start_next()
        if failure is not None:
            return fail(COMMAND, *failure)
    if args.json:
        summary = {
            "server": args.server,
            "seed": seed,
            "players": args.players,
            "partnerships": args.partnerships,
            "preset": args.preset,
            "clock": options_words(options) or None,
            "matches": reports,
            "policies": {n: {"won": wins[n], "played": played[n]} for n in sorted(played)},
            "hands": hands,
        }
        print(json.dumps(summary))
        return ExitStatus.SUCCESS
    out.print(
        f"{args.matches} match(es), {args.players} seats"
        f"{' in partnerships' if args.partnerships else ''}, preset {args.preset}, "
        f"{f'clock {options_words(options)}, ' if options else ''}"
        f"server {args.server}, seed {seed}",
        markup=False,
    )
    for name in sorted(played):
        out.print(f"  {name:10} won {wins[name]} of {played[name]}", markup=False)
    out.print(f"  hands: {hands}", markup=False)
    return ExitStatus.SUCCESS


__all__ = [
    "BotFailed",
    "BotSeat",
    "SeatLink",
    "play_match",
    "run",
    "run_seat",
    "seat_policies",
    "start_bot",
]
