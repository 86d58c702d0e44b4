"""`bergen bots`: matches between bots, played against a server.

Each bot is an ordinary gRPC client holding only its seat token, one thread per seat, playing
through `seat` (`SeatLink` and `run_seat`) with its policy's decision function: random,
greedy or Monte Carlo, fitted to its time on a clock. With several policies the seats rotate
every match. Each bot is a registered bot player, kept in the user's configuration folder
(`players.BotPlayers`: `bot-greedy-1`...), so that the same bots keep their ratings from one
run to the next; a seat's bot is the first, second... of its policy in the match, and
`--rated` makes every match rated. `bergen bots --tournament` enters bots in a tournament
instead (`tournament_play.run_bots`).
"""

from __future__ import annotations

import argparse
import json
import queue
import random
import secrets
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

import grpc
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from bergen.api.exit_status import ExitStatus
from bergen.api.helptext import HelpFormatter, at_least_one
from bergen.domain.deciders import POLICY_NAMES
from bergen.domain.errors import InvalidOptions
from bergen.domain.montecarlo import Settings
from bergen.domain.rules import PRESETS, make_rules
from bergen.domain.state import State
from bergen.domain.tiles import side_of

from .client import Client, Unreachable
from .clocks import add_clock_options, clock_options, options_words
from .connect import add_server_option, failure_of
from .players import BotPlayers, KeptPlayer
from .seat import (
    MATCH_TIMEOUT_S,
    BotFailed,
    SeatLink,
    add_policy_options,
    run_seat,
    seat_decider,
    settings_from,
)
from .tournament_play import run_bots
from .usage import Failed, examples, fail, report, seat_label

MAX_PARALLEL = 64
COMMAND = "bots"


# --- `bergen bots` ---------------------------------------------------------------------


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
            "bergen bots --matches 50 --rated --policy greedy random   # rated: the bots' ratings",
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
        "--target",
        type=at_least_one,
        metavar="POINTS",
        help="the score that ends a match (default: the preset's)",
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
        "--rated",
        action="store_true",
        help="create rated matches: they count for the bot players' ratings",
    )
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


def seat_bots(policies: list[str], bots: Mapping[str, list[KeptPlayer]]) -> list[KeptPlayer]:
    """Each seat's bot player: the first seat of a policy takes its first bot, the second
    its second..."""
    seen: Counter[str] = Counter()
    out = []
    for policy in policies:
        out.append(bots[policy][seen[policy]])
        seen[policy] += 1
    return out


def bots_needed(policies: list[str]) -> Counter[str]:
    """How many bot players of each policy one match seats."""
    return Counter(policies)


@dataclass
class MatchOutcome:
    match_id: str
    policies: list[str]
    state: State
    players: list[str]


def play_match(
    client: Client,
    seats: int,
    partnerships: bool,
    preset: str,
    policies: list[str],
    settings: Settings,
    rng: random.Random,
    options: Mapping[str, object] | None = None,
    players: list[KeptPlayer] | None = None,
    rated: bool = False,
) -> MatchOutcome:
    """Create a match (with the rule `options`: a clock's; `rated`) and play it with one bot
    thread per seat, each seat taken by its bot player of `players` (by a name alone when
    None).

    Raises grpc.RpcError (creating or joining) and BotFailed (a bot stopped early).
    """
    # Sent again after a passing error (`Client.again`): a creation whose answer was lost
    # leaves an empty match behind, which the server abandons after its seating timeout.
    created = client.create(
        seats, partnerships, preset, name="bergen bots", options=options, rated=rated
    )
    match_id = created.match_id
    errors: list[BaseException] = []
    finals: dict[int, State] = {}
    deadline = time.monotonic() + MATCH_TIMEOUT_S

    def body(seat: int, seat_rng: random.Random) -> None:
        link: SeatLink | None = None
        try:
            if players is None:
                joined = client.join(match_id, f"{policies[seat]}{seat + 1}", seat=seat)
            else:
                bot = players[seat]
                joined = client.join(match_id, bot.name, seat=seat, player_token=bot.token)
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
    names = [p.name for p in players] if players is not None else list(policies)
    return MatchOutcome(match_id, policies, finals[0], names)


def run(args: argparse.Namespace) -> int:
    err = Console(stderr=True, highlight=False)
    out = Console(highlight=False, soft_wrap=True)
    if args.rated and args.tournament is not None:
        return fail(
            COMMAND,
            "--rated is for the matches bots create: a tournament is rated when it is created",
            ExitStatus.USAGE,
        )
    if args.tournament is not None:
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
        clock = clock_options(args, args.players, args.partnerships, args.preset)
    except ValueError as e:
        return fail(COMMAND, str(e), ExitStatus.USAGE)
    options = dict(clock)
    if args.target is not None:
        options["target"] = args.target
        try:
            make_rules(args.players, args.partnerships, args.preset, options)
        except InvalidOptions as e:
            return fail(COMMAND, f"--target: {e}", ExitStatus.USAGE, e.reason)
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

    def tell(outcome: MatchOutcome) -> None:
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
                "bots": list(outcome.players),
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
        # The bot players, registered now if they are not kept yet: before any thread.
        needed = bots_needed(seat_policies(args.policy, args.players, args.partnerships, 0))
        keeper = BotPlayers(client, args.server)
        try:
            bot_players = {policy: keeper.of(policy, n) for policy, n in needed.items()}
        except (grpc.RpcError, Failed) as e:
            return report(COMMAND, failure_of(e))
        except OSError as e:
            return fail(COMMAND, f"cannot keep a bot player's token: {e}", ExitStatus.ERROR)
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
        failure: Failed | None = None
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
                        seat_bots(policies, bot_players),
                        args.rated,
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
                    tell(got)
                elif isinstance(got, (grpc.RpcError, BotFailed)):
                    failure = failure or failure_of(got)
                else:
                    raise got
                progress.advance(task)
                if failure is None and started < args.matches:
                    start_next()
        if failure is not None:
            return report(COMMAND, failure)
    if args.json:
        summary = {
            "server": args.server,
            "seed": seed,
            "players": args.players,
            "partnerships": args.partnerships,
            "preset": args.preset,
            "clock": options_words(clock) or None,
            "target": args.target,
            "rated": args.rated,
            "matches": reports,
            "policies": {n: {"won": wins[n], "played": played[n]} for n in sorted(played)},
            "hands": hands,
        }
        print(json.dumps(summary))
        return ExitStatus.SUCCESS
    out.print(
        f"{args.matches} match(es), {args.players} seats"
        f"{' in partnerships' if args.partnerships else ''}, preset {args.preset}, "
        f"{f'clock {options_words(clock)}, ' if clock else ''}"
        f"{f'target {args.target}, ' if args.target else ''}"
        f"{'rated, ' if args.rated else ''}"
        f"server {args.server}, seed {seed}",
        markup=False,
    )
    for name in sorted(played):
        out.print(f"  {name:10} won {wins[name]} of {played[name]}", markup=False)
    out.print(f"  hands: {hands}", markup=False)
    return ExitStatus.SUCCESS


__all__ = [
    "MatchOutcome",
    "play_match",
    "run",
    "seat_policies",
]
