"""`bergen tournament create | register | withdraw | start | round | show | watch | export`.

The organiser's commands (create, start, round, and withdraw for any entrant) present the
organiser token of `$BERGEN_ORGANISER_TOKEN` or `--organiser-token-file`. `register` makes its
players' tokens here and sends them, so that a registration whose answer was lost is sent
again and answered with the same entrant; it saves them (owner-only) in
`$BERGEN_STATE_DIR/tournament-<id>-<entrant>.json`, where `withdraw` finds an entrant's token
and `bergen play --tournament ID` its player's (cli_client/tournament_play.py writes the same
file).

`show` draws what GetTournament answers: the standings with every tie-break figure, a
crosstable round by round, at two-sided tables of at most `GRID_MAX_ENTRANTS` entrants a
crosstable entrant by entrant (as a round robin's table is drawn), and the current round's
tables. `export --out DIR` writes the audit
pack of TOURNAMENT.md section 6 from the records as the server signed them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.json_format import MessageToDict

from bergen.api.audit_pack import played_matches
from bergen.api.convert import PRESET, options_out
from bergen.api.exit_status import ExitStatus
from bergen.domain.errors import InvalidOptions
from bergen.domain.rules import PRESETS
from bergen.v1 import bergen_pb2 as pb

from .client import Client
from .clocks import add_clock_options, clock_options
from .connect import (
    Endpoint,
    add_server_option,
    bearer,
    describe_error,
    exit_status_of,
)
from .tournament_pack import served_pack, write_files
from .tournament_play import load_registrations, save_registration
from .tournament_play import register as register_entrant

ORGANISER_ENV = "BERGEN_ORGANISER_TOKEN"
CALL_TIMEOUT_S = 30.0

FORMATS = {
    "swiss": (pb.TOURNAMENT_FORMAT_SWISS, False),
    "round_robin": (pb.TOURNAMENT_FORMAT_ROUND_ROBIN, False),
    "double_round_robin": (pb.TOURNAMENT_FORMAT_ROUND_ROBIN, True),
}
PHASES = {
    pb.TOURNAMENT_PHASE_REGISTRATION: "registration",
    pb.TOURNAMENT_PHASE_RUNNING: "running",
    pb.TOURNAMENT_PHASE_ENDED: "ended",
}
REASONS = {
    pb.MATCH_END_REASON_TARGET: "target",
    pb.MATCH_END_REASON_ABANDONED: "abandoned",
    pb.MATCH_END_REASON_FORFEIT: "forfeit",
}


class Refused(Exception):
    """A command that cannot be sent as given; its message says why."""

    def __init__(self, message: str, status: ExitStatus = ExitStatus.USAGE) -> None:
        super().__init__(message)
        self.status = status


# ----- the parser ------------------------------------------------------------------------


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "tournament",
        help="create, fill, run, show, watch and export a tournament",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    own = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    c = own.add_parser("create", help="create a tournament (organiser); prints its id")
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
    c.add_argument("--max-entrants", type=int, default=0, help="0: no cap")
    c.add_argument(
        "--rounds-by-hand", action="store_true", help="rounds after the first start by `round`"
    )
    _organiser_option(c)
    c.set_defaults(tournament_func=create)

    r = own.add_parser("register", help="register an entrant; saves its players' tokens")
    r.add_argument("tournament_id", metavar="TOURNAMENT")
    r.add_argument(
        "--name", action="append", required=True, help="a player's name (twice for a pair)"
    )
    r.add_argument("--client-seed", default="")
    r.set_defaults(tournament_func=register)

    w = own.add_parser(
        "withdraw", help="withdraw an entrant (its saved token, else the organiser's)"
    )
    w.add_argument("tournament_id", metavar="TOURNAMENT")
    w.add_argument("entrant", type=int)
    _organiser_option(w)
    w.set_defaults(tournament_func=withdraw)

    s = own.add_parser("start", help="close registration and pair the first round (organiser)")
    s.add_argument("tournament_id", metavar="TOURNAMENT")
    _organiser_option(s)
    s.set_defaults(tournament_func=start)

    n = own.add_parser("round", help="pair the next round now (organiser)")
    n.add_argument("tournament_id", metavar="TOURNAMENT")
    _organiser_option(n)
    n.set_defaults(tournament_func=next_round)

    g = own.add_parser("show", help="standings, crosstable and the current round's tables")
    g.add_argument("tournament_id", metavar="TOURNAMENT")
    g.add_argument("--json", action="store_true", help="GetTournament's answer as JSON")
    g.set_defaults(tournament_func=show)

    v = own.add_parser("watch", help="follow a tournament until it ends")
    v.add_argument("tournament_id", metavar="TOURNAMENT")
    v.set_defaults(tournament_func=watch)

    e = own.add_parser("export", help="write the tournament's audit pack")
    e.add_argument("tournament_id", metavar="TOURNAMENT")
    e.add_argument("--out", type=Path, required=True, metavar="DIR")
    e.set_defaults(tournament_func=export)

    for q in (c, r, w, s, n, g, v, e):
        add_server_option(q)
    p.set_defaults(func=run)


def _organiser_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--organiser-token-file",
        metavar="FILE",
        help=f"file holding the organiser token (else ${ORGANISER_ENV})",
    )


def organiser_token(args: argparse.Namespace) -> str | None:
    """The organiser token of --organiser-token-file, else $BERGEN_ORGANISER_TOKEN; None when
    neither is given. Raises Refused for a file that cannot be read or is empty."""
    path = getattr(args, "organiser_token_file", None)
    if path is None:
        return os.environ.get(ORGANISER_ENV) or None
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except OSError as e:
        raise Refused(f"--organiser-token-file {path}: {e.strerror or e}") from None
    if not token:
        raise Refused(f"--organiser-token-file {path}: empty")
    return token


def needs_organiser(args: argparse.Namespace) -> str:
    """Raises Refused when no organiser token is given."""
    token = organiser_token(args)
    if token is None:
        raise Refused(f"needs the organiser token: --organiser-token-file or ${ORGANISER_ENV}")
    return token


def run(args: argparse.Namespace) -> int:
    endpoint: Endpoint = args.endpoint
    with Client(endpoint) as client:
        try:
            status: int = args.tournament_func(client, args)
            return status
        except Refused as e:
            print(f"bergen tournament {args.action}: {e}", file=sys.stderr)
            return e.status
        except grpc.RpcError as e:
            print(f"bergen tournament {args.action}: {describe_error(e)}", file=sys.stderr)
            return exit_status_of(e)
        except KeyboardInterrupt:
            return ExitStatus.INTERRUPTED


# ----- create, register, withdraw, start, round ------------------------------------------


def rule_options(args: argparse.Namespace) -> dict[str, object]:
    """The tables' rule options from --target, --option and the clock flags. Raises Refused."""
    options: dict[str, object] = {}
    for text in args.option:
        name, sep, value = text.partition("=")
        if not sep or not name:
            raise Refused(f"--option is NAME=VALUE, not {text!r:.40}")
        options[name] = int(value) if value.isdigit() else value
    if args.target is not None:
        options["target"] = args.target
    seats = args.seats
    try:
        options.update(clock_options(args, seats, args.partnerships, args.preset))
    except ValueError as e:
        raise Refused(str(e)) from None
    return options


def create(client: Client, args: argparse.Namespace) -> int:
    stub = client.stub
    token = needs_organiser(args)
    fmt, double = FORMATS[args.format]
    try:
        options = options_out(rule_options(args))
    except InvalidOptions as e:
        raise Refused(f"--option: {e}") from None
    settings = pb.TournamentSettings(
        format=fmt,
        seats=args.seats,
        partnerships=args.partnerships,
        preset=PRESET.out(args.preset),
        options=options,
        rounds=args.rounds,
        double_round_robin=double,
        round_delay=args.round_delay,
        max_entrants=args.max_entrants,
        rounds_by_hand=args.rounds_by_hand,
    )
    reply = stub.CreateTournament(
        pb.CreateTournamentRequest(name=args.name, settings=settings),
        metadata=bearer(token),
        timeout=CALL_TIMEOUT_S,
    )
    print(f"tournament {reply.tournament_id}")
    print(f"commitment {reply.commitment}")
    return ExitStatus.SUCCESS


def saved_token(tournament_id: str, entrant: int) -> str | None:
    """The first player's token of an entrant registered from here, if its file is here."""
    for data in load_registrations(tournament_id):
        if int(data["entrant"]) == entrant:
            return str(data["players"][0]["token"])
    return None


def register(client: Client, args: argparse.Namespace) -> int:
    names: list[str] = args.name
    entrant, tokens = register_entrant(client, args.tournament_id, names, args.client_seed)
    path = save_registration(
        {
            "tournament_id": args.tournament_id,
            "entrant": entrant,
            "server": str(args.endpoint),
            "client_seed": args.client_seed,
            "players": [
                {"player": i, "name": n, "token": t}
                for i, (n, t) in enumerate(zip(names, tokens, strict=True))
            ],
        }
    )
    print(f"entrant {entrant}")
    print(f"tokens saved in {path}")
    return ExitStatus.SUCCESS


def withdraw(client: Client, args: argparse.Namespace) -> int:
    stub = client.stub
    token = saved_token(args.tournament_id, args.entrant) or organiser_token(args)
    if token is None:
        raise Refused(
            f"no token of entrant {args.entrant} saved here, and no organiser token "
            f"(--organiser-token-file or ${ORGANISER_ENV})"
        )
    reply = stub.WithdrawEntrant(
        pb.WithdrawEntrantRequest(tournament_id=args.tournament_id, entrant=args.entrant),
        metadata=bearer(token),
        timeout=CALL_TIMEOUT_S,
    )
    print(f"entrant {args.entrant} withdrawn after round {reply.after_round}")
    return ExitStatus.SUCCESS


def start(client: Client, args: argparse.Namespace) -> int:
    stub = client.stub
    reply = stub.StartTournament(
        pb.StartTournamentRequest(tournament_id=args.tournament_id),
        metadata=bearer(needs_organiser(args)),
        timeout=CALL_TIMEOUT_S,
    )
    print("started; seeding " + " ".join(str(e) for e in reply.seeding))
    return ExitStatus.SUCCESS


def next_round(client: Client, args: argparse.Namespace) -> int:
    stub = client.stub
    reply = stub.StartNextRound(
        pb.StartNextRoundRequest(tournament_id=args.tournament_id),
        metadata=bearer(needs_organiser(args)),
        timeout=CALL_TIMEOUT_S,
    )
    print(f"round {reply.round} paired")
    return ExitStatus.SUCCESS


# ----- show ------------------------------------------------------------------------------


def show(client: Client, args: argparse.Namespace) -> int:
    stub = client.stub
    reply = stub.GetTournament(
        pb.GetTournamentRequest(tournament_id=args.tournament_id), timeout=CALL_TIMEOUT_S
    )
    if args.json:
        print(json.dumps(as_json(reply.tournament), indent=1, ensure_ascii=False))
    else:
        print(render(reply.tournament))
    return ExitStatus.SUCCESS


def as_json(view: pb.TournamentView) -> dict[str, Any]:
    found: dict[str, Any] = MessageToDict(
        view, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    return found


def names_of(view: pb.TournamentView) -> dict[int, str]:
    """Each entrant's players, as `Ann & Bob`."""
    return {e.entrant: " & ".join(e.players) for e in view.entrants}


def table_text(rows: Sequence[Sequence[str]], right: Sequence[bool]) -> list[str]:
    """Rows (the first the heading) in aligned columns; `right` aligns a column right."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [
            cell.rjust(w) if r else cell.ljust(w)
            for cell, w, r in zip(row, widths, right, strict=True)
        ]
        lines.append("  ".join(cells).rstrip())
    return lines


def standings_lines(view: pb.TournamentView) -> list[str]:
    names = names_of(view)
    rows: list[list[str]] = [["Rank", "Entrant", "Players", "MP", "Margin", "Buchholz", "Wins"]]
    for s in view.standings:
        rows.append(
            [
                str(s.rank),
                str(s.entrant),
                names.get(s.entrant, "?"),
                s.match_points,
                f"{s.margin:+d}",
                s.buchholz,
                str(s.wins),
            ]
        )
    return table_text(rows, [True, True, False, True, True, True, True])


def crosstable_cell(entrant: int, rnd: pb.TournamentRound) -> str:
    """What `entrant` did in round `rnd`: `bye`, `-` (not paired), or its opponents and its
    match points (`v3 1`, `v2,4 1/2`), `*` while its match is in play, `ff` for a forfeit."""
    if entrant in rnd.byes:
        return "bye"
    for t in rnd.tables:
        if entrant not in t.sides:
            continue
        side = list(t.sides).index(entrant)
        opponents = ",".join(str(e) for e in t.sides if e != entrant)
        if not t.HasField("result"):
            return f"v{opponents} *"
        r = t.result
        ff = " ff" if r.HasField("forfeited_side") and r.forfeited_side == side else ""
        return f"v{opponents} {r.match_points[side]}{ff}"
    return "-"


def crosstable_lines(view: pb.TournamentView) -> list[str]:
    """Round by round: a row per entrant in standings order, a column per round."""
    order = [s.entrant for s in view.standings] or [e.entrant for e in view.entrants]
    heading = ["Entrant", *(f"R{r.round}" for r in view.rounds), "MP"]
    points = {s.entrant: s.match_points for s in view.standings}
    rows: list[list[str]] = [heading]
    for e in order:
        cells = [crosstable_cell(e, r) for r in view.rounds]
        rows.append([str(e), *cells, points.get(e, "")])
    return table_text(rows, [True, *(False for _ in view.rounds), True])


GRID_MAX_ENTRANTS = 24
"""Past this many entrants the entrant-by-entrant crosstable is left out: too wide to read."""


def grid_lines(view: pb.TournamentView) -> list[str]:
    """Entrant by entrant, at two-sided tables: a row and a column per entrant in standings
    order, numbered by that order; a cell holds the row's match points against the column's
    entrant in each of their meetings, in round order (`1`, `1/2 0`), `*` for a meeting in
    play, `.` before they meet, `x` on the diagonal. Empty at tables of more than two sides
    or past GRID_MAX_ENTRANTS entrants."""
    two_sided = view.settings.seats == 2 or (
        view.settings.partnerships and view.settings.seats == 4
    )
    order = [s.entrant for s in view.standings] or [e.entrant for e in view.entrants]
    if not two_sided or not order or len(order) > GRID_MAX_ENTRANTS:
        return []
    met: dict[tuple[int, int], list[str]] = {}
    for rnd in view.rounds:
        for t in rnd.tables:
            if len(t.sides) != 2:
                continue
            for side, (e, other) in enumerate((tuple(t.sides), tuple(reversed(t.sides)))):
                cell = t.result.match_points[side] if t.HasField("result") else "*"
                met.setdefault((e, other), []).append(cell)
    number = {e: i + 1 for i, e in enumerate(order)}
    points = {s.entrant: s.match_points for s in view.standings}
    rows: list[list[str]] = [["#", "Entrant", *(str(number[e]) for e in order), "MP"]]
    for e in order:
        cells = ["x" if e == other else " ".join(met.get((e, other), [])) or "." for other in order]
        rows.append([str(number[e]), str(e), *cells, points.get(e, "")])
    return table_text(rows, [True, True, *(True for _ in order), True])


def tables_lines(view: pb.TournamentView, rnd: pb.TournamentRound) -> list[str]:
    names = names_of(view)
    lines = []
    for e in rnd.byes:
        lines.append(f"  bye: {e} {names.get(e, '?')}")
    for t in rnd.tables:
        sides = " v ".join(f"{e} {names.get(e, '?')}" for e in t.sides)
        if t.HasField("result"):
            r = t.result
            scores = "-".join(str(s) for s in r.scores)
            points = " ".join(r.match_points)
            state = f"ended {scores} ({REASONS.get(r.reason, 'ended')}), match points {points}"
        elif not t.match_id:
            state = "not played"
        else:
            scores = "-".join(str(s) for s in t.live_scores) or "0-0"
            state = f"in play {scores}"
        where = f" [{t.match_id}]" if t.match_id else ""
        lines.append(f"  table {t.table}: {sides}: {state}{where}")
    return lines


def format_name(settings: pb.TournamentSettings) -> str:
    if settings.format == pb.TOURNAMENT_FORMAT_SWISS:
        return f"Swiss, {settings.rounds} rounds"
    return "double round robin" if settings.double_round_robin else "round robin"


def render(view: pb.TournamentView) -> str:
    """The tournament as `show` prints it."""
    s = view.settings
    table = f"{s.seats}-seat tables" + (" in partnerships" if s.partnerships else "")
    out = [
        f"Tournament {view.tournament_id}" + (f" {view.name!r}" if view.name else ""),
        f"  {format_name(s)}, {table}; {PHASES.get(view.phase, '?')}, "
        f"round {view.round} of {view.total_rounds}; {len(view.entrants)} entrants",
        f"  commitment {view.commitment}",
    ]
    if view.tournament_seed:
        out.append(f"  seed {view.tournament_seed}")
    if view.standings:
        out += ["", "Standings", *standings_lines(view)]
    elif view.entrants:
        names = names_of(view)
        out += ["", "Entrants", *(f"  {e} {names[e]}" for e in sorted(names))]
    if view.rounds:
        out += ["", "Crosstable", *crosstable_lines(view)]
        grid = grid_lines(view)
        if grid:
            out += ["", "Crosstable, entrant by entrant", *grid]
        current = view.rounds[-1]
        out += ["", f"Round {current.round}", *tables_lines(view, current)]
    return "\n".join(out)


# ----- watch -----------------------------------------------------------------------------


def changes(before: pb.TournamentView | None, after: pb.TournamentView) -> Iterator[str]:
    """The lines `watch` prints for the step from `before` to `after`."""
    if before is None:
        yield (
            f"tournament {after.tournament_id}: {PHASES.get(after.phase, '?')}, "
            f"round {after.round} of {after.total_rounds}, {len(after.entrants)} entrants"
        )
    old_rounds = {} if before is None else {r.round: r for r in before.rounds}
    names = names_of(after)
    for rnd in after.rounds:
        old = old_rounds.get(rnd.round)
        if old is None:
            yield f"round {rnd.round} started: {len(rnd.tables)} tables"
        done = set() if old is None else {t.table for t in old.tables if t.HasField("result")}
        for t in rnd.tables:
            if t.HasField("result") and t.table not in done:
                sides = " v ".join(f"{e} {names.get(e, '?')}" for e in t.sides)
                scores = "-".join(str(s) for s in t.result.scores)
                points = " ".join(t.result.match_points)
                yield (
                    f"round {rnd.round} table {t.table} ended: {sides} {scores}, "
                    f"match points {points}"
                )
    if after.standings and (before is None or list(before.standings) != list(after.standings)):
        top = ", ".join(f"{s.rank}. {s.entrant} ({s.match_points})" for s in after.standings)
        yield f"standings: {top}"
    if after.phase == pb.TOURNAMENT_PHASE_ENDED and (
        before is None or before.phase != pb.TOURNAMENT_PHASE_ENDED
    ):
        yield "tournament ended"


def watch(client: Client, args: argparse.Namespace) -> int:
    stub = client.stub
    stream = stub.WatchTournament(pb.WatchTournamentRequest(tournament_id=args.tournament_id))
    before: pb.TournamentView | None = None
    for reply in stream:
        for line in changes(before, reply.tournament):
            print(line, flush=True)
        before = reply.tournament
    return ExitStatus.SUCCESS


# ----- export ----------------------------------------------------------------------------


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
        raise Refused(str(e)) from None
    except ValueError as e:
        raise Refused(f"the served records make no pack: {e}", ExitStatus.INVALID) from None
    except OSError as e:
        raise Refused(f"{args.out}: {e.strerror or e}", ExitStatus.ERROR) from None
    print(f"audit pack of tournament {tid}: {len(written)} files in {args.out}")
    return ExitStatus.SUCCESS


__all__: list[str] = [
    "add_parser",
    "changes",
    "crosstable_lines",
    "grid_lines",
    "render",
    "standings_lines",
]
