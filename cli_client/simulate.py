"""`bergen simulate`: matches between the play policies, entirely in process; with
`--tournament`, a whole tournament played offline and written as its audit pack."""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import random
import secrets
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from rich.console import Console
from rich.progress import Progress

from bergen.api.exit_status import ExitStatus
from bergen.api.helptext import HelpFormatter
from bergen.api.signing import RecordSigner
from bergen.domain import (
    POLICIES,
    HandEnded,
    MatchEndReason,
    PointsScored,
    TimedOut,
    build_record,
    make_rules,
)
from bergen.domain.errors import InvalidArgument, InvalidOptions
from bergen.domain.simulation import Timing, play_match
from bergen.domain.tournament_fairness import commitment, seeding_order, table_server_seed
from bergen.domain.tournament_pairing import ROUND_ROBIN, SWISS, Settings, seats_of
from bergen.domain.tournament_record import (
    Entrant,
    PlayedRound,
    PlayedTable,
    Tournament,
    build_tournament_record,
    next_round,
)
from bergen.domain.tournament_standings import TableResult, score_result

from .render import render_record
from .tournament_pack import table_rules, write_pack
from .usage import examples, fail

PROGRESS_FROM = 20
"""Show a progress bar from this many matches on."""

DOUBLE_ROUND_ROBIN = "double_round_robin"
TOURNAMENT_POLICIES = ("greedy", "random")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "simulate",
        help="play matches between the random and greedy policies in process",
        description="Play matches between the random and greedy policies here, with no "
        "server, and write each one's match record (a JSON file `bergen verify` and "
        "`bergen-replay --file` read) into --out.",
        epilog=examples(
            "bergen simulate --matches 10 --players 3 --out out/ --show",
            "bergen simulate --matches 100 --clock 60+2 --stall 0.05 --out out/ --json",
            "bergen simulate --tournament swiss --entrants 16 --rounds 5 --out pack/",
        ),
        formatter_class=HelpFormatter,
    )
    p.add_argument(
        "--matches",
        type=int,
        metavar="N",
        help="how many matches (required without --tournament)",
    )
    p.add_argument(
        "--players", type=int, choices=(2, 3, 4), default=2, help="seats a match (default 2)"
    )
    p.add_argument("--partnerships", action="store_true", help="4 seats as two sides")
    t = p.add_argument_group(
        "tournament",
        "play a whole tournament instead: entrants alternate the greedy and "
        "random policies, every match id, deal and pairing follows from the seed, and --out "
        "receives its audit pack (tournament.json, matches/, manifest.json), which "
        "`bergen verify DIR` checks",
    )
    t.add_argument(
        "--tournament",
        choices=(SWISS, ROUND_ROBIN, DOUBLE_ROUND_ROBIN),
        help="the tournament's format",
    )
    t.add_argument(
        "--entrants", type=int, metavar="N", help="how many entrants (pairs with --partnerships)"
    )
    t.add_argument("--rounds", type=int, metavar="N", help="a Swiss tournament's rounds")
    t.add_argument(
        "--seats", type=int, choices=(2, 3, 4), default=2, help="seats at a table (default 2)"
    )
    t.add_argument(
        "--signing-key",
        type=Path,
        metavar="FILE",
        help="sign the pack with this Ed25519 private key (PEM, as bergen serve keeps it); "
        "default: a key made for the run",
    )
    p.add_argument(
        "--preset", default="standard", metavar="NAME", help="rules preset (default: standard)"
    )
    p.add_argument(
        "--seed", metavar="TEXT", help="seed for the deals and the policies (default: random)"
    )
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="folder for the records")
    p.add_argument("--show", action="store_true", help="print each match, hand by hand")
    p.add_argument(
        "--clock",
        metavar="INITIAL+INCREMENT",
        help="play on a Fischer clock of INITIAL+INCREMENT seconds (e.g. 60+2), in simulated "
        "time: each seat thinks for a time drawn from the seed",
    )
    p.add_argument(
        "--on-timeout", choices=("autoplay", "forfeit"), help="with --clock (default autoplay)"
    )
    p.add_argument(
        "--timeouts-to-forfeit",
        type=int,
        metavar="N",
        help="with --clock: timeouts in a row that forfeit",
    )
    p.add_argument(
        "--think",
        default="200-5000",
        metavar="MIN-MAX",
        help="with --clock: a seat's thinking time per play, MIN-MAX milliseconds "
        "(default 200-5000)",
    )
    p.add_argument(
        "--stall",
        type=float,
        default=0.0,
        metavar="P",
        help="the chance that a seat to play does not answer and is timed out (default 0)",
    )
    p.add_argument(
        "--resign",
        type=float,
        default=0.0,
        metavar="P",
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
    if args.tournament is not None:
        return run_tournament(args, console)
    if args.matches is None:
        return fail("simulate", "give --matches, or --tournament", ExitStatus.USAGE)
    if args.matches < 1:
        return fail("simulate", "--matches must be at least 1", ExitStatus.USAGE)
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
        return fail("simulate", f"{e}", ExitStatus.USAGE)
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


# ----- a tournament -------------------------------------------------------------------------


def _derived(seed: str, what: str) -> bytes:
    return hashlib.sha256(f"bergen-simulate-tournament|{seed}|{what}".encode()).digest()


def tournament_settings(
    fmt: str, seats: int, partnerships: bool, rounds: int | None, preset: str
) -> Settings:
    """The settings of a simulated tournament. Raises InvalidArgument for settings
    TOURNAMENT.md forbids."""
    settings = Settings(
        format=SWISS if fmt == SWISS else ROUND_ROBIN,
        seats=seats,
        partnerships=partnerships,
        rules={"preset": preset},
        rounds=rounds,
        double_round_robin=fmt == DOUBLE_ROUND_ROBIN,
    )
    settings.check()
    return settings


def simulate_tournament(
    settings: Settings, entrants: int, seed: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Play a whole tournament in process from `seed`: the tournament id, its seed and the
    entrants' client seeds derived from it; each round paired from the results before it;
    each table's match id and server seed derived from the tournament seed, each seat's
    client seed its entrant's; entrants alternating the greedy and random policies.

    Returns the ended tournament's record and the record of every match played (each with
    its `tournament` field), all unsigned. Raises InvalidArgument for too few entrants, and
    InvalidOptions for rules a table cannot play.
    """
    settings.check_entrants(entrants)
    tournament_seed = _derived(seed, "seed")
    tid = str(uuid.UUID(bytes=_derived(seed, "id")[:16], version=4))
    people = []
    for n in range(1, entrants + 1):
        policy = TOURNAMENT_POLICIES[(n - 1) % len(TOURNAMENT_POLICIES)]
        players = (f"{policy}{n}a", f"{policy}{n}b") if settings.partnerships else (f"{policy}{n}",)
        people.append(Entrant(n, _derived(seed, f"entrant {n}").hex()[:16], players))
    client_seeds = [e.seed for e in people]
    t = Tournament(
        tournament_id=tid,
        settings=settings,
        commitment=commitment(tournament_seed),
        entrants=tuple(people),
        seeding=seeding_order(tournament_seed, tid, client_seeds),
        name=f"simulated {settings.format} {seed}",
    )
    records: list[dict[str, Any]] = []
    for _ in range(settings.total_rounds(entrants)):
        paired = next_round(t)
        tables = []
        for table in paired.tables:
            if table.match_id is None:  # a withdrawal: no match, its result is given
                tables.append(table)
                continue
            record = _play_table(
                t, paired, table, table_server_seed(tournament_seed, table.match_id)
            )
            records.append(record)
            result = record["result"]
            scored = score_result(
                TableResult(result["reason"], tuple(result["scores"]), result.get("forfeited_side"))
            )
            tables.append(dataclasses.replace(table, result=scored))
        played = PlayedRound(paired.round, paired.byes, tuple(tables))
        t = dataclasses.replace(t, rounds=(*t.rounds, played))
    t = dataclasses.replace(t, tournament_seed=tournament_seed.hex(), ended=True)
    return build_tournament_record(t), records


def _play_table(
    t: Tournament, paired: PlayedRound, table: PlayedTable, server_seed: bytes
) -> dict[str, Any]:
    assert table.match_id is not None
    seats = seats_of(t.settings, table.sides)
    entrants = [t.entrants[e - 1] for e, _ in seats]
    names = [
        (e.players or (f"entrant{e.entrant}",) * 2)[i]
        for e, (_, i) in zip(entrants, seats, strict=True)
    ]
    policies = [
        POLICIES[TOURNAMENT_POLICIES[(e.entrant - 1) % len(TOURNAMENT_POLICIES)]] for e in entrants
    ]
    events, _ = play_match(
        table.match_id,
        table_rules(t.settings, len(seats)),
        len(seats),
        t.settings.partnerships,
        server_seed,
        policies,
        random.Random(server_seed),
        names=names,
        client_seeds=[e.seed for e in entrants],
    )
    record = build_record(events)
    record["tournament"] = {
        "tournament_id": t.tournament_id,
        "round": paired.round,
        "table": table.table,
    }
    return record


def _tournament_usage(args: argparse.Namespace) -> str | None:
    """What is wrong with the tournament options, if anything."""
    if args.matches is not None:
        return "--matches is not for a tournament"
    if args.entrants is None:
        return "--tournament needs --entrants"
    if args.tournament == SWISS and args.rounds is None:
        return "a Swiss tournament needs --rounds"
    if args.tournament != SWISS and args.rounds is not None:
        return "a round robin's rounds follow from its entrants: no --rounds"
    if args.partnerships and args.seats != 4:
        return "--partnerships needs --seats 4"
    if args.clock is not None or args.stall or args.resign:
        return "a simulated tournament is played without a clock"
    return None


def _existing(path: Path) -> Path:
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    return path


def run_tournament(args: argparse.Namespace, console: Console) -> int:
    """`bergen simulate --tournament ...`."""
    problem = _tournament_usage(args)
    if problem is not None:
        return fail("simulate", f"{problem}", ExitStatus.USAGE)
    try:
        settings = tournament_settings(
            args.tournament, args.seats, args.partnerships, args.rounds, args.preset
        )
        table_rules(settings, args.seats)
        settings.check_entrants(args.entrants)
    except (InvalidArgument, InvalidOptions) as e:
        return fail("simulate", f"{e.message}", ExitStatus.USAGE)
    try:
        signer = (
            RecordSigner.load_or_create(_existing(args.signing_key))
            if args.signing_key is not None
            else RecordSigner(Ed25519PrivateKey.generate())
        )
    except (OSError, ValueError, TypeError, UnsupportedAlgorithm) as e:
        return fail("simulate", f"--signing-key {args.signing_key}: {e}", ExitStatus.USAGE)
    if args.out.exists() and (not args.out.is_dir() or any(args.out.iterdir())):
        return fail("simulate", f"--out {args.out} is not an empty folder", ExitStatus.USAGE)
    seed = args.seed if args.seed is not None else secrets.token_hex(8)
    with console.status("playing the tournament"):
        record, matches = simulate_tournament(settings, args.entrants, seed)
    try:
        write_pack(args.out, record, matches, signer)
    except OSError as e:
        return fail("simulate", f"cannot write {args.out}: {e}", ExitStatus.ERROR)
    top = record["standings"][0]
    if args.json:
        summary = {
            "tournament": args.tournament,
            "tournament_id": record["tournament_id"],
            "entrants": args.entrants,
            "seats": args.seats,
            "partnerships": args.partnerships,
            "rounds": len(record["rounds"]),
            "matches": len(matches),
            "preset": args.preset,
            "seed": seed,
            "out": str(args.out),
            "public_key": signer.public_key,
            "standings": record["standings"],
        }
        print(json.dumps(summary))
        return ExitStatus.SUCCESS
    out = Console(markup=False, highlight=False, soft_wrap=True)
    table = f"{args.seats} seats{' in partnerships' if args.partnerships else ''}"
    out.print(
        f"{args.tournament} tournament {record['tournament_id']}: {args.entrants} entrants, "
        f"{len(record['rounds'])} rounds, {len(matches)} matches at {table}, preset "
        f"{args.preset}, seed {seed}"
    )
    names = record["entrants"][top["entrant"] - 1].get("players", [])
    out.print(
        f"  first: entrant {top['entrant']} ({' & '.join(names)}), {top['match_points']} "
        f"match points, margin {top['margin']}, Buchholz {top['buchholz']}"
    )
    out.print(f"  audit pack in {args.out}, signed by {signer.public_key}")
    return ExitStatus.SUCCESS
