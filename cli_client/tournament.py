"""`bergen tournament create | register | reveal | withdraw | start | round | settle | cancel
| show | watch | export`.

The organiser's commands (create, start, round, settle, cancel, and withdraw for any
entrant) find the organiser token as `organiser.organiser_token` says. `register` makes its
players' tokens here and sends them, so that a registration whose answer was lost is sent
again and answered with the same entrant; it makes the entrant's client seed too (unless
given) and sends only its commitment. It saves them (owner-only) in the state folder
(`tournament_play.save_registration`), where `withdraw` finds an entrant's token, `reveal`
its seed, and `bergen play --tournament ID` both (and reveals the seed on its own).

`show` and `watch` draw what the server answers (`tournament_view`); `export --out DIR`
writes the audit pack of TOURNAMENT.md section 6 from the records as the server signed
them. Every command that prints a result prints it as one JSON object with `--json`
(`watch`: one a line).
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message

from bergen.api.audit_pack import played_matches
from bergen.api.convert import PRESET, options_out
from bergen.api.exit_status import ExitStatus
from bergen.api.helptext import HelpFormatter, at_least_one
from bergen.domain.errors import InvalidOptions
from bergen.domain.rules import PRESETS
from bergen.v1 import bergen_pb2 as pb

from . import known_keys, players, usage
from .client import Client
from .clocks import add_clock_options, clock_options
from .connect import Endpoint, add_server_option, bearer, failure_of
from .organiser import ORGANISER_ENV, add_organiser_option, organiser_token
from .tournament_pack import served_pack, write_files
from .tournament_play import load_registrations, new_client_seed, save_registration
from .tournament_play import register as register_entrant
from .tournament_play import reveal as reveal_seed
from .tournament_view import changes, label, names_of, render, result_text
from .usage import Failed, side_label

CALL_TIMEOUT_S = 30.0
MAX_NOTE_CHARS = 200

FORMATS = {
    "swiss": (pb.TOURNAMENT_FORMAT_SWISS, False),
    "round_robin": (pb.TOURNAMENT_FORMAT_ROUND_ROBIN, False),
    "double_round_robin": (pb.TOURNAMENT_FORMAT_ROUND_ROBIN, True),
}

DESCRIPTION = f"""\
Create a tournament, fill it, run it, follow it and export its audit pack.

The organiser's commands (create, start, round, settle, cancel, and withdraw for any
entrant) need the organiser token, looked for in this order: --organiser-token-file FILE,
${ORGANISER_ENV}, the token the server on this machine made on its first start (found
from any folder), ./bergen-organiser-token. `register` keeps its players' tokens in the
state folder ($BERGEN_STATE_DIR, else ~/.local/state/bergen) with the entrant's client
seed, where `reveal`, `withdraw` and `bergen play --tournament` find them. After the start
each entrant reveals its seed (`bergen play --tournament` and `bergen bots --tournament` do
it on their own); one that has not when the reveal window closes is withdrawn before round
1. Sides are numbered from 1."""

T = "3f2a9c1e-0b7d-4c55-9a1e-6d2f8b0c4e17"
"""The tournament id the examples show."""


# ----- the parser ------------------------------------------------------------------------


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "tournament",
        help="create, fill, run, show, watch and export a tournament",
        description=DESCRIPTION,
        epilog=usage.examples(
            "bergen tournament create --name 'club night' --rounds 3",
            f"bergen tournament show {T}",
        ),
        formatter_class=HelpFormatter,
    )
    own = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    def command(
        name: str, summary: str, func: Callable[[Client, argparse.Namespace], int], *ex: str
    ) -> argparse.ArgumentParser:
        q = own.add_parser(
            name,
            help=summary,
            description=textwrap.fill(summary[0].upper() + summary[1:] + ".", 88),
            epilog=usage.examples(*ex),
            formatter_class=HelpFormatter,
        )
        q.set_defaults(tournament_func=func)
        return q

    c = command(
        "create",
        "create a tournament (organiser); prints its id and its seed's commitment",
        create,
        "bergen tournament create --name 'club night' --rounds 3",
        "bergen tournament create --format round_robin --seats 4 --partnerships",
        "bergen tournament create --rounds 5 --clock fischer --rounds-by-hand",
    )
    c.add_argument("--name", default="")
    c.add_argument("--format", choices=sorted(FORMATS), default="swiss")
    c.add_argument("--rounds", type=int, default=0, help="Swiss: the number of rounds")
    c.add_argument("--seats", type=int, choices=(2, 3, 4), default=2)
    c.add_argument("--partnerships", action="store_true", help="entrants are pairs (4 seats)")
    c.add_argument("--preset", default="standard", choices=sorted(PRESETS))
    c.add_argument("--target", type=int, help="the tables' match target")
    c.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a rule option of the tables (repeatable), e.g. lead=highest_double",
    )
    add_clock_options(c, "the tables' matches")
    c.add_argument("--round-delay", type=int, default=0, metavar="SECONDS")
    c.add_argument(
        "--reveal-window",
        type=at_least_one,
        default=60,
        metavar="SECONDS",
        help="from the start to round 1, for the entrants to reveal their seeds",
    )
    c.add_argument("--max-entrants", type=int, default=0, metavar="N", help="0: no cap")
    c.add_argument(
        "--rounds-by-hand", action="store_true", help="rounds after the first start by `round`"
    )
    c.add_argument(
        "--rated",
        action="store_true",
        help="its matches are rated: every entrant's players are registered players",
    )

    r = command(
        "register",
        "register an entrant; keeps its players' tokens in the state folder; a name that is "
        "a registered player you keep for the server enters as that player",
        register,
        f"bergen tournament register {T} --name ann",
        f"bergen tournament register {T} --name ann --name bob   # a pair",
    )
    r.add_argument("tournament_id", metavar="TOURNAMENT")
    r.add_argument(
        "--name", action="append", required=True, help="a player's name (twice for a pair)"
    )
    r.add_argument(
        "--client-seed",
        default=None,
        metavar="SEED",
        help="the entrant's own part of every deal of its matches (see fair dealing in the "
        "rules); default: a random one. Only its SHA-256 is sent now: the seed is revealed "
        "after the start",
    )

    v_ = command(
        "reveal",
        "reveal an entrant's client seed, kept here at registration, once the tournament has "
        "started",
        reveal,
        f"bergen tournament reveal {T} 3",
    )
    v_.add_argument("tournament_id", metavar="TOURNAMENT")
    v_.add_argument("entrant", type=at_least_one)
    v_.add_argument(
        "--client-seed",
        default=None,
        metavar="SEED",
        help="the seed given at registration, when it is not kept here",
    )

    w = command(
        "withdraw",
        "withdraw an entrant (with its kept token, else as the organiser)",
        withdraw,
        f"bergen tournament withdraw {T} 3",
        f"bergen tournament withdraw {T} 3 --note 'left the hall'",
    )
    w.add_argument("tournament_id", metavar="TOURNAMENT")
    w.add_argument("entrant", type=int)
    _note_option(w, "why, kept with the withdrawal when the organiser withdraws it")

    s = command(
        "start",
        "close registration (organiser): the entrants reveal their seeds, then round 1 is paired",
        start,
        f"bergen tournament start {T}",
    )
    s.add_argument("tournament_id", metavar="TOURNAMENT")

    n = command(
        "round",
        "pair the next round now (organiser)",
        next_round,
        f"bergen tournament round {T}",
    )
    n.add_argument("tournament_id", metavar="TOURNAMENT")

    t = command(
        "settle",
        "settle a table whose match cannot end by play (organiser): abandon it, or forfeit "
        "a side that never played",
        settle,
        f"bergen tournament settle {T} --round 2 --table 1 --forfeit 2 --note 'no-show'",
        f"bergen tournament settle {T} --round 2 --table 3 --abandon --note 'power cut'",
    )
    t.add_argument("tournament_id", metavar="TOURNAMENT")
    t.add_argument("--round", type=at_least_one, required=True, metavar="R")
    t.add_argument("--table", type=at_least_one, required=True, metavar="T")
    how = t.add_mutually_exclusive_group(required=True)
    how.add_argument(
        "--abandon",
        action="store_true",
        help="end the match as it stands: every side placed first, its match points shared",
    )
    how.add_argument(
        "--forfeit",
        type=at_least_one,
        metavar="SIDE",
        help="the side (from 1) that forfeits; none of its players may have made a play",
    )
    _note_option(t, "why, kept with the settlement in the tournament's record")

    x = command(
        "cancel",
        "end a tournament whose round 1 is not paired yet (organiser)",
        cancel,
        f"bergen tournament cancel {T} --note 'too few entrants'",
    )
    x.add_argument("tournament_id", metavar="TOURNAMENT")
    _note_option(x, "why, kept in the tournament's record")

    g = command(
        "show",
        "standings, interventions, crosstable and the current round's tables",
        show,
        f"bergen tournament show {T}",
        f"bergen tournament show {T} --json",
    )
    g.add_argument("tournament_id", metavar="TOURNAMENT")

    v = command(
        "watch",
        "follow a tournament until it ends",
        watch,
        f"bergen tournament watch {T}",
        f"bergen tournament watch {T} --json   # the tournament after each change, a line each",
    )
    v.add_argument("tournament_id", metavar="TOURNAMENT")

    e = command(
        "export",
        "write an ended tournament's audit pack, which `bergen verify DIR` checks",
        export,
        f"bergen tournament export {T} --out pack && bergen verify pack",
    )
    e.add_argument("tournament_id", metavar="TOURNAMENT")
    e.add_argument("--out", type=Path, required=True, metavar="DIR")

    for q in (c, w, s, n, t, x):
        add_organiser_option(q)
    for q in (c, r, v_, w, s, n, t, x, g, v, e):
        q.add_argument(
            "--json",
            action="store_true",
            help="the tournament as JSON, one object a line"
            if q is v
            else "print the result as one JSON object",
        )
        add_server_option(q)
    p.set_defaults(func=run)


def _note_option(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--note", default="", metavar="TEXT", help=f"{what} (up to 200 characters)")


def run(args: argparse.Namespace) -> int:
    command = f"tournament {args.action}"
    endpoint: Endpoint = args.endpoint
    with Client(endpoint) as client:
        try:
            status: int = args.tournament_func(client, args)
            return status
        except (Failed, grpc.RpcError) as e:
            return usage.report(command, failure_of(e))
        except KeyboardInterrupt:
            return ExitStatus.INTERRUPTED


def emit(args: argparse.Namespace, text: str, data: dict[str, Any]) -> int:
    """Print the result: `text` for people, `data` as one JSON object with --json."""
    if args.json:
        print(json.dumps(data, ensure_ascii=False))
    else:
        print(text)
    return ExitStatus.SUCCESS


def as_json(message: Message) -> dict[str, Any]:
    found: dict[str, Any] = MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    return found


def _note(args: argparse.Namespace) -> str:
    note: str = args.note
    if len(note) > MAX_NOTE_CHARS:
        raise Failed(
            f"--note is {len(note)} characters: at most {MAX_NOTE_CHARS}",
            ExitStatus.USAGE,
            "TEXT_TOO_LONG",
        )
    return note


def _organiser(args: argparse.Namespace) -> tuple[tuple[str, str], ...]:
    return bearer(organiser_token(args))


# ----- create, register, withdraw, start, round, settle, cancel --------------------------


def rule_options(args: argparse.Namespace) -> dict[str, object]:
    """The tables' rule options from --target, --option and the clock flags. Raises Failed."""
    options: dict[str, object] = {}
    for text in args.option:
        name, sep, value = text.partition("=")
        if not sep or not name:
            raise Failed(f"--option is NAME=VALUE, not {text!r:.40}", ExitStatus.USAGE)
        options[name] = int(value) if value.isdigit() else value
    if args.target is not None:
        options["target"] = args.target
    seats = args.seats
    try:
        options.update(clock_options(args, seats, args.partnerships, args.preset))
    except ValueError as e:
        raise Failed(str(e), ExitStatus.USAGE) from None
    return options


def create(client: Client, args: argparse.Namespace) -> int:
    metadata = _organiser(args)
    fmt, double = FORMATS[args.format]
    try:
        options = options_out(rule_options(args))
    except InvalidOptions as e:
        raise Failed(f"--option: {e}", ExitStatus.USAGE, e.reason) from None
    settings = pb.TournamentSettings(
        format=fmt,
        seats=args.seats,
        partnerships=args.partnerships,
        preset=PRESET.out(args.preset),
        options=options,
        rounds=args.rounds,
        double_round_robin=double,
        round_delay=args.round_delay,
        reveal_window=args.reveal_window,
        max_entrants=args.max_entrants,
        rounds_by_hand=args.rounds_by_hand,
        rated=args.rated,
    )
    reply = client.stub.CreateTournament(
        pb.CreateTournamentRequest(name=args.name, settings=settings),
        metadata=metadata,
        timeout=CALL_TIMEOUT_S,
    )
    return emit(
        args,
        f"tournament {reply.tournament_id}\ncommitment {reply.commitment}",
        {"tournament_id": reply.tournament_id, "commitment": reply.commitment},
    )


def saved_token(tournament_id: str, entrant: int) -> str | None:
    """The first player's token of an entrant registered from here, if its file is here."""
    for data in load_registrations(tournament_id):
        if int(data["entrant"]) == entrant:
            return str(data["players"][0]["token"])
    return None


def register(client: Client, args: argparse.Namespace) -> int:
    server: str = args.server
    kept = [players.find(server, n) for n in args.name]
    # A name that is a player kept here enters as that player, under its registered name.
    names = [p.name if p is not None else n for p, n in zip(kept, args.name, strict=True)]
    registered = [p.token if p is not None else "" for p in kept]
    client_seed: str = new_client_seed() if args.client_seed is None else args.client_seed
    entrant, tokens = register_entrant(
        client,
        args.tournament_id,
        names,
        client_seed,
        registered if any(registered) else None,
    )
    path = save_registration(
        {
            "tournament_id": args.tournament_id,
            "entrant": entrant,
            "server": str(args.endpoint),
            "client_seed": client_seed,
            "players": [
                {"player": i, "name": n, "token": t}
                for i, (n, t) in enumerate(zip(names, tokens, strict=True))
            ],
        }
    )
    return emit(
        args,
        f"entrant {entrant}\ntokens saved in {path}",
        {"tournament_id": args.tournament_id, "entrant": entrant, "tokens_saved_in": str(path)},
    )


def reveal(client: Client, args: argparse.Namespace) -> int:
    kept = next(
        (d for d in load_registrations(args.tournament_id) if int(d["entrant"]) == args.entrant),
        None,
    )
    if kept is None:
        raise Failed(
            f"entrant {args.entrant} of tournament {args.tournament_id} was not registered "
            "here: its token is not kept here",
            ExitStatus.USAGE,
            "NOT_REGISTERED_HERE",
        )
    client_seed = args.client_seed if args.client_seed is not None else kept.get("client_seed")
    if not isinstance(client_seed, str):
        raise Failed(
            f"entrant {args.entrant}'s client seed is not kept here: give --client-seed SEED",
            ExitStatus.USAGE,
            "NO_CLIENT_SEED",
        )
    token = str(kept["players"][0]["token"])
    reply = reveal_seed(client, args.tournament_id, args.entrant, client_seed, token)
    return emit(
        args,
        f"entrant {args.entrant}: seed revealed; {reply.unrevealed} entrant(s) still to reveal",
        {"entrant": args.entrant, "unrevealed": reply.unrevealed},
    )


def withdraw(client: Client, args: argparse.Namespace) -> int:
    note = _note(args)
    token = saved_token(args.tournament_id, args.entrant)
    if token is None:
        try:
            token = organiser_token(args, required=False)
        except Failed as e:
            raise Failed(
                f"no token of entrant {args.entrant} is kept here, and {e.sentence}",
                e.status,
                e.reason,
            ) from None
    if token is None:
        raise Failed(
            f"no token of entrant {args.entrant} is kept here, and no organiser token was "
            f"found: give --organiser-token-file FILE or set {ORGANISER_ENV}",
            ExitStatus.USAGE,
            "NO_ORGANISER_TOKEN",
        )
    reply = client.stub.WithdrawEntrant(
        pb.WithdrawEntrantRequest(
            tournament_id=args.tournament_id, entrant=args.entrant, note=note
        ),
        metadata=bearer(token),
        timeout=CALL_TIMEOUT_S,
    )
    return emit(
        args,
        f"entrant {args.entrant} withdrawn after round {reply.after_round}",
        {"entrant": args.entrant, "after_round": reply.after_round},
    )


def start(client: Client, args: argparse.Namespace) -> int:
    reply = client.stub.StartTournament(
        pb.StartTournamentRequest(tournament_id=args.tournament_id),
        metadata=_organiser(args),
        timeout=CALL_TIMEOUT_S,
    )
    if reply.reveal_deadline_ms:
        left = max(0, (reply.reveal_deadline_ms - int(time.time() * 1000) + 999) // 1000)
        text = (
            f"registration closed; the entrants reveal their seeds: round 1 when all have, "
            f"or in {left} s at the latest"
        )
    else:
        text = "started; seeding " + " ".join(str(e) for e in reply.seeding)
    return emit(
        args,
        text,
        {"seeding": list(reply.seeding), "reveal_deadline_ms": reply.reveal_deadline_ms},
    )


def next_round(client: Client, args: argparse.Namespace) -> int:
    reply = client.stub.StartNextRound(
        pb.StartNextRoundRequest(tournament_id=args.tournament_id),
        metadata=_organiser(args),
        timeout=CALL_TIMEOUT_S,
    )
    return emit(args, f"round {reply.round} paired", {"round": reply.round})


def _table(view: pb.TournamentView, rnd: int, table: int) -> pb.TournamentTable | None:
    for r in view.rounds:
        if r.round == rnd:
            return next((t for t in r.tables if t.table == table), None)
    return None


def settle(client: Client, args: argparse.Namespace) -> int:
    note = _note(args)
    metadata = _organiser(args)
    tid = args.tournament_id
    view = client.stub.GetTournament(
        pb.GetTournamentRequest(tournament_id=tid), timeout=CALL_TIMEOUT_S
    ).tournament
    table = _table(view, args.round, args.table)
    side = None if args.forfeit is None else args.forfeit - 1
    if table is not None and side is not None and side >= len(table.sides):
        raise Failed(
            f"round {args.round} table {args.table} has {len(table.sides)} sides: --forfeit "
            f"is 1 to {len(table.sides)}, not {args.forfeit}",
            ExitStatus.USAGE,
            "NO_SUCH_SIDE",
        )
    request = pb.SettleTableRequest(
        tournament_id=tid,
        round=args.round,
        table=args.table,
        action=pb.SETTLE_ACTION_ABANDON if side is None else pb.SETTLE_ACTION_FORFEIT,
        note=note,
    )
    if side is not None:
        request.forfeited_side = side
    reply = client.stub.SettleTable(request, metadata=metadata, timeout=CALL_TIMEOUT_S)
    where = f"round {args.round} table {args.table}"
    if table is not None:
        names = names_of(view)
        where += ": " + " v ".join(label(view, e, names) for e in table.sides)
        if side is not None:
            what = f"{side_label(side)}, {label(view, table.sides[side], names)}, forfeited"
        else:
            what = "abandoned"
    else:
        what = "abandoned" if side is None else f"{side_label(side)} forfeited"
    return emit(
        args,
        f"{where}\n  {what}: {result_text(reply.result)}",
        {"round": args.round, "table": args.table, "result": as_json(reply.result)},
    )


def cancel(client: Client, args: argparse.Namespace) -> int:
    note = _note(args)
    client.stub.CancelTournament(
        pb.CancelTournamentRequest(tournament_id=args.tournament_id, note=note),
        metadata=_organiser(args),
        timeout=CALL_TIMEOUT_S,
    )
    return emit(
        args,
        f"tournament {args.tournament_id} cancelled before its start",
        {"tournament_id": args.tournament_id, "cancelled": True},
    )


# ----- show, watch -----------------------------------------------------------------------


def show(client: Client, args: argparse.Namespace) -> int:
    reply = client.stub.GetTournament(
        pb.GetTournamentRequest(tournament_id=args.tournament_id), timeout=CALL_TIMEOUT_S
    )
    if args.json:
        print(json.dumps(as_json(reply.tournament), indent=1, ensure_ascii=False))
    else:
        print(render(reply.tournament))
    return ExitStatus.SUCCESS


def watch(client: Client, args: argparse.Namespace) -> int:
    stream = client.stub.WatchTournament(
        pb.WatchTournamentRequest(tournament_id=args.tournament_id)
    )
    before: pb.TournamentView | None = None
    for reply in stream:
        if args.json:
            print(json.dumps(as_json(reply.tournament), ensure_ascii=False), flush=True)
        else:
            for line in changes(before, reply.tournament):
                print(line, flush=True)
        before = reply.tournament
    return ExitStatus.SUCCESS


# ----- export ----------------------------------------------------------------------------


def trust_served_key(args: argparse.Namespace, key: Any) -> None:
    """The key that signed the served pack, checked against the one known for the server or
    learned on first use (the known-keys file `bergen verify` trusts). Raises Failed."""
    if not isinstance(key, str) or not key:
        return
    try:
        learned = known_keys.vouch(str(args.endpoint), key.lower())
    except known_keys.KeyChanged as e:
        raise Failed(str(e), ExitStatus.INVALID, "KEY_CHANGED") from None
    except known_keys.KnownKeysError as e:
        raise Failed(str(e), ExitStatus.USAGE, "KNOWN_KEYS") from None
    except OSError as e:
        raise Failed(
            f"cannot write the known keys: {e.strerror or e}", ExitStatus.ERROR, "CANNOT_WRITE"
        ) from None
    if learned is not None:
        print(f"bergen tournament export: {learned}", file=sys.stderr)


def export(client: Client, args: argparse.Namespace) -> int:
    """The audit pack of an ended tournament, as the server serves and signs it: the manifest
    of GetAuditManifest, the tournament record and every played table's match record, each
    checked against the manifest before anything is written."""
    stub = client.stub
    tid = args.tournament_id
    manifest = json.loads(
        stub.GetAuditManifest(
            pb.GetAuditManifestRequest(tournament_id=tid), timeout=CALL_TIMEOUT_S
        ).manifest_json
    )
    record = json.loads(
        stub.GetTournamentRecord(
            pb.GetTournamentRecordRequest(tournament_id=tid), timeout=CALL_TIMEOUT_S
        ).record_json
    )
    trust_served_key(args, manifest.get("public_key"))
    matches = [
        json.loads(
            stub.GetRecord(pb.GetRecordRequest(match_id=mid), timeout=CALL_TIMEOUT_S).record_json
        )
        for mid in played_matches(record)
    ]
    try:
        files = served_pack(record, matches, manifest)
        written = write_files(args.out, files)
    except FileExistsError as e:
        raise Failed(str(e), ExitStatus.USAGE, "FOLDER_NOT_EMPTY") from None
    except ValueError as e:
        raise Failed(
            f"the served records make no pack: {e}", ExitStatus.INVALID, "NOT_A_PACK"
        ) from None
    except OSError as e:
        raise Failed(f"{args.out}: {e.strerror or e}", ExitStatus.ERROR, "CANNOT_WRITE") from None
    return emit(
        args,
        f"audit pack of tournament {tid}: {len(written)} files in {args.out}",
        {"tournament_id": tid, "out": str(args.out), "files": len(written)},
    )


__all__: list[str] = ["add_parser", "as_json", "run"]
