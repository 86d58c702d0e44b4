"""`bergen simulate`: matches between the play policies, entirely in process."""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import secrets
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.progress import Progress

from bergen.api.exit_status import ExitStatus
from bergen.domain import (
    POLICIES,
    HandEnded,
    MatchEndReason,
    PointsScored,
    TimedOut,
    build_record,
    make_rules,
)
from bergen.domain.errors import InvalidOptions
from bergen.domain.simulation import Timing, play_match

from .render import render_record

PROGRESS_FROM = 20
"""Show a progress bar from this many matches on."""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "simulate",
        help="play matches between the random and greedy policies in process",
        description="Play matches between the random and greedy policies and write one "
        "RECORD.md file per match.",
    )
    p.add_argument("--matches", type=int, required=True, help="how many matches")
    p.add_argument("--players", type=int, choices=(2, 3, 4), default=2)
    p.add_argument("--partnerships", action="store_true", help="4 seats as two sides")
    p.add_argument("--preset", default="standard", help="rules preset (default: standard)")
    p.add_argument("--seed", help="seed for the deals and the policies (default: random)")
    p.add_argument("--out", type=Path, required=True, help="folder for the records")
    p.add_argument("--show", action="store_true", help="print each match, hand by hand")
    p.add_argument(
        "--clock",
        help="play on a Fischer clock of INITIAL+INCREMENT seconds (e.g. 60+2), in simulated "
        "time: each seat thinks for a time drawn from the seed",
    )
    p.add_argument(
        "--on-timeout", choices=("autoplay", "forfeit"), help="with --clock (default autoplay)"
    )
    p.add_argument(
        "--timeouts-to-forfeit", type=int, help="with --clock: timeouts in a row that forfeit"
    )
    p.add_argument(
        "--think",
        default="200-5000",
        help="with --clock: a seat's thinking time per play, MIN-MAX milliseconds "
        "(default 200-5000)",
    )
    p.add_argument(
        "--stall",
        type=float,
        default=0.0,
        help="the chance that a seat to play does not answer and is timed out (default 0)",
    )
    p.add_argument(
        "--resign",
        type=float,
        default=0.0,
        help="the chance that a seat to play resigns instead (default 0)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the summary as one JSON object (matches, players, partnerships, preset, "
        "seed, out, policies: {name: {won, played}}, hands, points, timeouts, forfeits, "
        "records)",
    )
    p.set_defaults(func=run)


def _policies_for(match: int, seats: int, partnerships: bool) -> list[str]:
    """Alternate the policies by side, swapping sides every match to cancel seat bias."""
    names = ["greedy", "random"]
    sides = 2 if partnerships else seats
    order = [names[(side + match) % 2] for side in range(sides)]
    return [order[seat % sides] for seat in range(seats)]


def clock_options(text: str | None) -> dict[str, object]:
    """`--clock 60+2` as rule options. Raises ValueError for anything else."""
    if text is None or text == "none":
        return {}
    initial, plus, increment = text.partition("+")
    if not initial.strip().isdigit() or (plus and not increment.strip().isdigit()):
        raise ValueError(f"--clock is INITIAL+INCREMENT seconds, like 60+2, not {text!r:.40}")
    options: dict[str, object] = {"clock": "fischer", "clock_initial": int(initial)}
    if plus:
        options["clock_increment"] = int(increment)
    return options


def _timing(args: argparse.Namespace) -> Timing:
    low, dash, high = str(args.think).partition("-")
    if not (low.isdigit() and dash and high.isdigit()) or int(low) > int(high):
        raise ValueError(f"--think is MIN-MAX milliseconds, like 200-5000, not {args.think!r:.40}")
    for name in ("stall", "resign"):
        if not 0.0 <= getattr(args, name) <= 1.0:
            raise ValueError(f"--{name} is a chance between 0 and 1")
    return Timing(think_ms=(int(low), int(high)), stall=args.stall, resign=args.resign)


def run(args: argparse.Namespace) -> int:
    console = Console(stderr=True)
    if args.matches < 1:
        console.print("bergen simulate: --matches must be at least 1")
        return ExitStatus.USAGE
    try:
        options = clock_options(args.clock)
        if args.on_timeout is not None:
            options["on_timeout"] = args.on_timeout
        if args.timeouts_to_forfeit is not None:
            options["timeouts_to_forfeit"] = args.timeouts_to_forfeit
        rules = make_rules(args.players, args.partnerships, args.preset, options)
        timed = rules.clocked or args.stall > 0 or args.resign > 0
        timing = _timing(args) if timed else None
    except (InvalidOptions, ValueError) as e:
        console.print(f"bergen simulate: {e}")
        return ExitStatus.USAGE
    seed = args.seed if args.seed is not None else secrets.token_hex(8)
    args.out.mkdir(parents=True, exist_ok=True)
    wins: Counter[str] = Counter()
    seats_played: Counter[str] = Counter()
    hands = 0
    points = 0
    timeouts = 0
    forfeits = 0
    records: list[str] = []
    out = Console(markup=False, highlight=False, soft_wrap=True)
    with Progress(console=console, disable=args.matches < PROGRESS_FROM) as progress:
        task = progress.add_task("matches", total=args.matches)
        for i in range(args.matches):
            digest = hashlib.sha256(f"bergen-simulate|{seed}|{i}".encode()).digest()
            match_id = f"sim-{seed}-{i + 1}"
            names = _policies_for(i, args.players, args.partnerships)
            events, state = play_match(
                match_id,
                rules,
                args.players,
                args.partnerships,
                digest,
                [POLICIES[n] for n in names],
                random.Random(digest),
                names=[f"{n}{s}" for s, n in enumerate(names)],
                timing=timing,
            )
            record = build_record(events)
            path = args.out / f"{match_id}.json"
            path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
            records.append(str(path))
            assert state.result is not None
            if state.result.winner_side is not None:  # a forfeit may leave a tie for best
                winner_seat = state.sides[state.result.winner_side][0]
                wins[names[winner_seat]] += 1
            forfeits += state.result.reason == MatchEndReason.FORFEIT
            timeouts += sum(isinstance(e, TimedOut) for e in events)
            seats_played.update(set(names))
            hands += sum(isinstance(e, HandEnded) for e in events)
            points += sum(e.points for e in events if isinstance(e, PointsScored))
            if args.show and not args.json:
                out.print(render_record(record))
                out.print(f"record: {path}")
            progress.advance(task)
    if args.json:
        summary = {
            "matches": args.matches,
            "players": args.players,
            "partnerships": args.partnerships,
            "preset": rules.preset,
            "seed": seed,
            "out": str(args.out),
            "policies": {n: {"won": wins[n], "played": args.matches} for n in sorted(seats_played)},
            "hands": hands,
            "points": points,
            "timeouts": timeouts,
            "forfeits": forfeits,
            "records": records,
        }
        print(json.dumps(summary))
        return ExitStatus.SUCCESS
    out.print(
        f"{args.matches} match(es), {args.players} seats"
        f"{' in partnerships' if args.partnerships else ''}, preset {rules.preset}, seed {seed}"
    )
    for name in sorted(seats_played):
        out.print(f"  {name:7} won {wins[name]} of {args.matches}")
    out.print(f"  hands: {hands}, average points per hand: {points / max(hands, 1):.2f}")
    if timing is not None:
        out.print(f"  timeouts: {timeouts}, matches forfeited: {forfeits}")
    out.print(f"  records in {args.out}")
    return ExitStatus.SUCCESS
