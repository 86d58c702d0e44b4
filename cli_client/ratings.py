"""`bergen ratings verify DIR`: every rating recomputed from a folder of signed match
records, and held to what the server shows.

Every record in DIR (what `bergen export` writes: one JSON file a match, and its manifest)
is checked as `bergen verify` checks a record file: replayed through the rules and its
signature checked against the key trusted (`--public-key`; else the server's, learned on
first use and checked every time after as `known_keys` keeps it; else, offline, any key
known). The rated ones are applied in their `rated.order` (`bergen.domain.ratings`), and
the ratings they give are compared with the server's: each player of the records in every
pool (GetPlayer), and each pool's leaderboard, its order and its ratings (ListLeaderboard).
A player whose rating differs is named with the pool and, from the player's history on the
server (ListPlayerMatches), the first match after which the two disagree, with both values.

Ratings agree when mu and sigma are within 1e-9 (RATINGS.md section 3) and the rating
shown, the provisional flag and the count of rated matches are the same.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from bergen.api.convert import RATING_POOL
from bergen.api.exit_status import ExitStatus, help_text
from bergen.api.helptext import HelpFormatter
from bergen.api.signing import SignatureError, verify_signature
from bergen.domain.errors import BergenError
from bergen.domain.ratings import (
    NEWCOMER,
    POOLS,
    RatedMatch,
    Rating,
    leaderboard,
    rated_match_of_record,
    rating_steps,
)
from bergen.v1 import bergen_pb2 as pb
from bergen.v1 import bergen_pb2_grpc as rpc

from . import known_keys
from .connect import add_server_option, code_of, open_channel
from .export import MANIFEST, MANIFEST_FORMAT
from .usage import error_line, examples
from .verify import (
    RPC_TIMEOUT_S,
    Outcome,
    parse_json,
    read_public_key,
    read_record,
    rpc_problem,
    verify_record,
    vouched,
)

EPSILON = 1e-9
"""How far apart two implementations' mu or sigma may be (RATINGS.md section 3)."""
PAGE = 100

EPILOG = (
    """\
DIR is a folder of match records, as `bergen export --out DIR` writes it. Every record is
checked as `bergen verify FILE` checks one: replayed through the rules, and its signature
checked against the trusted key: --public-key when given; else the server's own, trusted
on first use and checked every time after (as `bergen verify` keeps the servers' keys);
else, with --offline, a key known for any server. A record that does not check, or is
signed by another key, is named and left out of the ratings.

The rated records are applied one at a time in the order their ends were recorded, and
every player's rating in every pool is compared with the server's, and each pool's
leaderboard with the one the records give, its order and its ratings. Each difference is a
line naming the player and the pool and, when the player's history on the server tells it,
the first match after which the two disagree, with both values. Ratings agree when mu and
sigma are within 1e-9 and the rating shown, the provisional mark and the count of rated
matches are the same. Run it right after an export: a match that ends in between is a
difference (export again).

With --offline no server is asked: the ratings the records give are printed, each pool's
leaderboard first, then its provisional players.

The last line is the verdict: `OK: ...`, or `REJECTED: ...` (exit status 6) when a record
does not check or a rating differs, or `UNTRUSTED: ...` (8) when every record checks but no
trusted key says who signed some of them.

--json prints one object: ok, status, exit_status, verdict, dir, server, public_key,
records, rated (by pool), players, problems (each with its kind: record, player or
leaderboard, its line and its facts), untrusted (the files), and with --offline the
ratings of every pool.

"""
    + help_text()
    + "\n\n"
    + examples(
        "bergen export --out records/ && bergen ratings verify records/",
        "bergen ratings verify records/ --server ratings.example.org:50051 --json",
        "bergen ratings verify records/ --offline --public-key KEY",
    )
)


# ----- the parser -------------------------------------------------------------------------


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "ratings",
        help="recompute every rating from a folder of match records, and check the server's",
        description="Players' ratings, proved from the signed match records.",
        epilog=examples("bergen ratings verify records/"),
        formatter_class=HelpFormatter,
    )
    own = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    v = own.add_parser(
        "verify",
        help="recompute every rating from a folder of records and compare with the server's",
        description="Check every record in DIR, recompute every player's rating in every "
        "pool from the rated ones, and compare them, and each pool's leaderboard, with what "
        "the server shows. Any difference is named.",
        epilog=EPILOG,
        formatter_class=HelpFormatter,
    )
    v.add_argument("dir", type=Path, metavar="DIR", help="the records, as an export writes them")
    add_server_option(v)
    v.add_argument(
        "--public-key",
        metavar="KEY",
        help="the trusted Ed25519 public key: a file with 64 hex digits or a PEM key, or the "
        "hex digits themselves",
    )
    v.add_argument(
        "--known-keys",
        metavar="FILE",
        help="the servers' keys trusted so far (default: known_keys in the configuration "
        "folder, as `bergen verify` keeps it)",
    )
    v.add_argument(
        "--offline",
        action="store_true",
        help="ask no server: print the ratings the records give",
    )
    v.add_argument("--json", action="store_true", help="print the verdict as a JSON object")
    v.set_defaults(func=run)


# ----- what the folder proves -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing that does not agree or does not check: its line, and its facts for --json."""

    kind: str
    """`record`, `player` or `leaderboard`."""
    line: str
    facts: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "line": self.line, **self.facts}


@dataclass(frozen=True, slots=True)
class Proven:
    """A record that checks: its file, and its rated match (None when not rated)."""

    file: str
    match_id: str
    record: dict[str, Any]
    order: int | None
    rated: RatedMatch | None


@dataclass
class Folder:
    """What a folder of records proves."""

    path: Path
    files: int = 0
    proven: list[Proven] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    untrusted: list[str] = field(default_factory=list)
    signers: set[str] = field(default_factory=set)
    names: dict[str, str] = field(default_factory=dict)
    """Each player's name, as the records' seats give it."""

    @property
    def rated(self) -> list[Proven]:
        """The rated records, in their `rated.order`."""
        return sorted((p for p in self.proven if p.rated is not None), key=lambda p: p.order or 0)

    def players(self) -> list[str]:
        """Every player the records name, by name."""
        return sorted(self.names, key=lambda p: (self.names[p].casefold(), p))

    def name(self, player_id: str) -> str:
        return self.names.get(player_id, "?")


def _record_files(folder: Path) -> list[Path]:
    return sorted(
        p
        for p in folder.iterdir()
        if p.suffix == ".json" and p.name != MANIFEST and not p.name.startswith(".")
    )


def _listed(folder: Path) -> list[str]:
    """The files the folder's manifest lists (none without one, or one not an export's)."""
    try:
        manifest = parse_json((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        return []
    matches = manifest.get("matches")
    if not isinstance(matches, list):
        return []
    return [str(m["file"]) for m in matches if isinstance(m, dict) and "file" in m]


def read_folder(folder: Path, trusted: str | None, known: known_keys.KnownKeys) -> Folder:
    """Check every record of `folder` against `trusted` (None: the keys `known`). Never
    raises for what the files hold: each record that does not check is a Problem."""
    found = Folder(folder)
    files = _record_files(folder)
    found.files = len(files)
    present = {p.name for p in files}
    for name in _listed(folder):
        if name not in present:
            found.problems.append(
                Problem(
                    "record",
                    f"REJECTED: {folder / name}: missing: the manifest lists it",
                    {"file": str(folder / name), "where": "manifest", "why": "missing"},
                )
            )
    by_id: dict[str, Proven] = {}
    by_order: dict[int, Proven] = {}
    for path in files:
        record, facts, failed = read_record(path)
        outcome = failed or vouched(verify_record(record, trusted, facts), trusted, known)
        if outcome.status == ExitStatus.UNTRUSTED:
            found.untrusted.append(str(path))
        elif not outcome.ok:
            found.problems.append(_rejected(path, outcome, _signature_note(record, trusted)))
            continue
        assert isinstance(record, dict)
        key = record.get("signature", {}).get("public_key")
        if isinstance(key, str):
            found.signers.add(key.lower())
        proven = _proven(path, record, found)
        if proven is None:
            continue
        twin = by_id.get(proven.match_id)
        if twin is not None:
            if twin.record != record:
                found.problems.append(
                    Problem(
                        "record",
                        f"REJECTED: {path}: another record of match {proven.match_id} "
                        f"({twin.file}) says otherwise",
                        {"file": str(path), "match_id": proven.match_id, "other": twin.file},
                    )
                )
            continue  # the same record twice counts once
        if proven.order is not None:
            same_order = by_order.get(proven.order)
            if same_order is not None:
                found.problems.append(
                    Problem(
                        "record",
                        f"REJECTED: {path}: its rated.order {proven.order} is also match "
                        f"{same_order.match_id}'s ({same_order.file})",
                        {"file": str(path), "order": proven.order, "other": same_order.file},
                    )
                )
                continue
            by_order[proven.order] = proven
        by_id[proven.match_id] = proven
        found.proven.append(proven)
    return found


def _signature_note(record: Any, trusted: str | None) -> str | None:
    """For a record the rules reject: whether its signature still holds (then the server
    signed what the rules reject) or not (it was changed after it was signed)."""
    if not isinstance(record, dict) or "signature" not in record:
        return None
    try:
        verify_signature(record, trusted)
    except SignatureError as e:
        return f"its signature fails too: {e}"
    except Exception:  # a record of any shape: the rules' rejection says enough
        return None
    return "yet its signature holds: the server signed it so"


def _rejected(path: Path, outcome: Outcome, note: str | None = None) -> Problem:
    where, why = outcome.facts.get("where", ""), outcome.facts.get("why", outcome.line)
    line = outcome.line.removeprefix("REJECTED: ")
    facts = {"file": str(path), "where": where, "why": why, "exit_status": int(outcome.status)}
    if note is not None and where != "signature":
        line += f"; {note}"
        facts["signature"] = note
    return Problem("record", f"REJECTED: {path}: {line}", facts)


def _proven(path: Path, record: dict[str, Any], found: Folder) -> Proven | None:
    try:
        rated = rated_match_of_record(record)
    except (BergenError, KeyError, TypeError, ValueError) as e:
        found.problems.append(
            Problem("record", f"REJECTED: {path}: rated: {e}", {"file": str(path), "why": str(e)})
        )
        return None
    for seat in record["seats"]:
        if "player" in seat:
            found.names[seat["player"]] = seat["name"]
    order, match = (None, None) if rated is None else rated
    return Proven(str(path), record["match_id"], record, order, match)


# ----- the ratings the records give ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Step:
    """A player's rated match in a pool: its rating before and after it."""

    match_id: str
    order: int
    before: Rating
    after: Rating


@dataclass
class Recomputed:
    """Every rating the records give, and every player's steps to it in each pool."""

    ratings: dict[str, dict[str, Rating]]
    steps: dict[tuple[str, str], list[Step]]

    def of(self, player: str, pool: str) -> Rating:
        return self.ratings[pool].get(player, NEWCOMER)


def recomputed(rated: Sequence[Proven]) -> Recomputed:
    """The ratings of `rated` (in their order), by `bergen.domain.ratings`."""
    ratings: dict[str, dict[str, Rating]] = {pool: {} for pool in POOLS}
    steps: dict[tuple[str, str], list[Step]] = {}
    matches = [p.rated for p in rated if p.rated is not None]
    for proven, (m, step) in zip(rated, rating_steps(matches), strict=True):
        assert proven.order is not None
        for player, (before, after) in step.items():
            ratings[m.pool][player] = after
            steps.setdefault((player, m.pool), []).append(
                Step(proven.match_id, proven.order, before, after)
            )
    return Recomputed(ratings, steps)


# ----- compared with the server -----------------------------------------------------------


class CallFailed(Exception):
    """A call to the server failed: the command stops with its Outcome."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.line)
        self.outcome = outcome


def _call(server: str, what: str, method: Any, request: Any) -> Any:
    try:
        return method(request, timeout=RPC_TIMEOUT_S)
    except grpc.RpcError as e:
        raise CallFailed(rpc_problem(e, server, what)) from None


def agrees(shown: pb.PoolRating, want: Rating) -> bool:
    """Whether the server's rating is the one recomputed (within EPSILON on mu and sigma)."""
    return (
        abs(shown.mu - want.mu) <= EPSILON
        and abs(shown.sigma - want.sigma) <= EPSILON
        and shown.rating == want.display
        and shown.provisional == want.provisional
        and shown.rated_matches == want.matches
    )


def words(r: pb.PoolRating | Rating) -> str:
    """`1623 (mu 27.0501234567, sigma 5.93120000001, 14 rated matches)`; `1500?` while
    provisional."""
    if isinstance(r, Rating):
        shown, provisional, matches = r.display, r.provisional, r.matches
    else:
        shown, provisional, matches = r.rating, r.provisional, r.rated_matches
    return (
        f"{shown}{'?' if provisional else ''} (mu {r.mu!r}, sigma {r.sigma!r}, "
        f"{matches} rated match{'' if matches == 1 else 'es'})"
    )


def as_json(r: pb.PoolRating | Rating) -> dict[str, Any]:
    if isinstance(r, Rating):
        return {
            "rating": r.display,
            "mu": r.mu,
            "sigma": r.sigma,
            "provisional": r.provisional,
            "rated_matches": r.matches,
        }
    return {
        "rating": r.rating,
        "mu": r.mu,
        "sigma": r.sigma,
        "provisional": r.provisional,
        "rated_matches": r.rated_matches,
    }


def _history(stub: Any, server: str, player: str, pool: str) -> list[pb.PlayerMatch]:
    """The player's rated matches in `pool` on the server, oldest first."""
    found: list[pb.PlayerMatch] = []
    token = ""
    while True:
        reply = _call(
            server,
            f"the history of player {player}",
            stub.ListPlayerMatches,
            pb.ListPlayerMatchesRequest(
                player_id=player, pool=RATING_POOL.out(pool), page_size=PAGE, page_token=token
            ),
        )
        found += reply.matches
        token = reply.next_page_token
        if not token:
            return list(reversed(found))


def first_disagreement(
    history: Sequence[pb.PlayerMatch], steps: Sequence[Step]
) -> tuple[str, dict[str, Any]] | None:
    """Where a player's history on the server and the steps the records give first part:
    (words, facts), with both values at that match; None when every match agrees."""
    for i in range(max(len(history), len(steps))):
        served = history[i] if i < len(history) else None
        mine = steps[i] if i < len(steps) else None
        if served is not None and (mine is None or served.order < mine.order):
            return (
                f"match {served.match_id} (order {served.order}) is rated by the server, and "
                f"in no record here: after it the server has {words(served.after)}",
                {"match_id": served.match_id, "order": served.order, "in": "server"},
            )
        assert mine is not None
        if served is None or mine.order < served.order or served.match_id != mine.match_id:
            return (
                f"match {mine.match_id} (order {mine.order}) is rated by its record, not by "
                f"the server: after it the records give {words(mine.after)}",
                {"match_id": mine.match_id, "order": mine.order, "in": "records"},
            )
        for when, theirs, ours in (
            ("before", served.before, mine.before),
            ("after", served.after, mine.after),
        ):
            if not agrees(theirs, ours):
                return (
                    f"{when} match {mine.match_id} (order {mine.order}) the server has "
                    f"{words(theirs)}, the records give {words(ours)}",
                    {
                        "match_id": mine.match_id,
                        "order": mine.order,
                        "when": when,
                        "server": as_json(theirs),
                        "records": as_json(ours),
                    },
                )
    return None


def player_differences(stub: Any, server: str, folder: Folder, rec: Recomputed) -> list[Problem]:
    """Each player of the records whose rating in a pool is not the one recomputed."""
    problems: list[Problem] = []
    for player in folder.players():
        who = f"player {folder.name(player)} ({player})"
        try:
            reply = stub.GetPlayer(pb.GetPlayerRequest(player_id=player), timeout=RPC_TIMEOUT_S)
        except grpc.RpcError as e:
            if code_of(e) != grpc.StatusCode.NOT_FOUND:
                raise CallFailed(rpc_problem(e, server, f"player {player}")) from None
            problems.append(
                Problem(
                    "player",
                    f"DIFFERS: {who}: the records name this player, the server has no such player",
                    {"player_id": player, "name": folder.name(player)},
                )
            )
            continue
        shown = {}
        for r in reply.ratings:
            try:
                shown[RATING_POOL.into(r.pool)] = r
            except BergenError:
                continue  # a pool this client does not know
        for pool in POOLS:
            want = rec.of(player, pool)
            got = shown.get(pool)
            if got is not None and agrees(got, want):
                continue
            facts: dict[str, Any] = {
                "player_id": player,
                "name": folder.name(player),
                "pool": pool,
                "server": None if got is None else as_json(got),
                "records": as_json(want),
            }
            now = (
                "the server shows no rating"
                if got is None
                else f"the server shows {words(got)}, the records give {words(want)}"
            )
            steps = rec.steps.get((player, pool), [])
            part = first_disagreement(_history(stub, server, player, pool), steps)
            if part is None:
                last = f"its last, match {steps[-1].match_id}" if steps else "none"
                line = (
                    f"DIFFERS: {who}, pool {pool}: {now}; every rated match of its history "
                    f"agrees ({last})"
                )
            else:
                text, where = part
                facts["first"] = where
                line = f"DIFFERS: {who}, pool {pool}: {text}; now {now}"
            problems.append(Problem("player", line, facts))
    return problems


def _board(stub: Any, server: str, pool: str) -> list[pb.LeaderboardEntry]:
    entries: list[pb.LeaderboardEntry] = []
    token = ""
    while True:
        reply = _call(
            server,
            f"the leaderboard of pool {pool}",
            stub.ListLeaderboard,
            pb.ListLeaderboardRequest(pool=RATING_POOL.out(pool), page_size=PAGE, page_token=token),
        )
        entries += reply.entries
        token = reply.next_page_token
        if not token:
            return entries


def leaderboard_differences(
    pool: str, entries: Sequence[pb.LeaderboardEntry], folder: Folder, rec: Recomputed
) -> list[Problem]:
    """Where the server's leaderboard of `pool` is not the one the records give: the first
    rank where another player stands (the ranks after it follow from it), and each rank
    held by the same player with another rating."""
    want = leaderboard(rec.ratings[pool])
    problems: list[Problem] = []

    def theirs(e: pb.LeaderboardEntry) -> str:
        known = "" if e.player.player_id in folder.names else ", in no record here"
        return f"{e.player.name} ({e.player.player_id}{known}) at {words(e.rating)}"

    def ours(player: str) -> str:
        return f"{folder.name(player)} ({player}) at {words(rec.of(player, pool))}"

    for i in range(max(len(entries), len(want))):
        rank = i + 1
        e = entries[i] if i < len(entries) else None
        mine = want[i] if i < len(want) else None
        facts: dict[str, Any] = {"pool": pool, "rank": rank}
        if e is not None and e.rank != rank:
            problems.append(
                Problem(
                    "leaderboard",
                    f"DIFFERS: leaderboard of pool {pool}: its entry {rank} is ranked {e.rank}",
                    {**facts, "server_rank": e.rank},
                )
            )
        if e is None or mine is None or e.player.player_id != mine:
            server_has = "nobody" if e is None else theirs(e)
            records_give = "nobody" if mine is None else ours(mine)
            facts.update(server=None if e is None else e.player.player_id, records=mine)
            problems.append(
                Problem(
                    "leaderboard",
                    f"DIFFERS: leaderboard of pool {pool}, rank {rank}: the server has "
                    f"{server_has}, the records give {records_give}",
                    facts,
                )
            )
            break
        if not agrees(e.rating, rec.of(mine, pool)):
            problems.append(
                Problem(
                    "leaderboard",
                    f"DIFFERS: leaderboard of pool {pool}, rank {rank}: {folder.name(mine)} "
                    f"({mine}) is at {words(e.rating)} on the server, "
                    f"{words(rec.of(mine, pool))} by the records",
                    {
                        **facts,
                        "player_id": mine,
                        "server": as_json(e.rating),
                        "records": as_json(rec.of(mine, pool)),
                    },
                )
            )
    return problems


def compare(stub: Any, server: str, folder: Folder, rec: Recomputed) -> list[Problem]:
    """Every difference between the server's ratings and leaderboards and the records'.
    Raises CallFailed."""
    problems = player_differences(stub, server, folder, rec)
    for pool in POOLS:
        problems += leaderboard_differences(pool, _board(stub, server, pool), folder, rec)
    return problems


# ----- the command ------------------------------------------------------------------------


def _by_pool(rated: Iterable[Proven]) -> dict[str, int]:
    counts = dict.fromkeys(POOLS, 0)
    for p in rated:
        assert p.rated is not None
        counts[p.rated.pool] += 1
    return counts


def offline_lines(folder: Folder, rec: Recomputed) -> list[str]:
    """Each pool's ratings: its leaderboard, then its provisional players by rating."""
    lines: list[str] = []
    for pool in POOLS:
        ratings = rec.ratings[pool]
        if not ratings:
            continue
        board = leaderboard(ratings)
        rest = sorted(
            (p for p in ratings if p not in board),
            key=lambda p: (-ratings[p].display, -ratings[p].conservative, p),
        )
        lines.append(f"pool {pool}: {len(ratings)} player(s), {len(board)} on the leaderboard")
        rows = [["rank", "rating", "mu", "sigma", "matches", "player"]]
        for i, p in enumerate([*board, *rest]):
            r = ratings[p]
            rows.append(
                [
                    str(i + 1) if i < len(board) else "-",
                    f"{r.display}{'?' if r.provisional else ''}",
                    f"{r.mu:.3f}",
                    f"{r.sigma:.3f}",
                    str(r.matches),
                    f"{folder.name(p)} ({p})",
                ]
            )
        widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
        lines += [
            "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            for row in rows
        ]
    return lines


def offline_json(folder: Folder, rec: Recomputed) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for pool in POOLS:
        ratings = rec.ratings[pool]
        board = leaderboard(ratings)
        rank = {p: i + 1 for i, p in enumerate(board)}
        out[pool] = [
            {
                "player_id": p,
                "name": folder.name(p),
                "rank": rank.get(p),
                **as_json(ratings[p]),
            }
            for p in sorted(ratings, key=lambda p: (rank.get(p, len(board) + 1), p))
        ]
    return out


def _trust(
    args: argparse.Namespace, stub: Any | None, known: known_keys.KnownKeys
) -> tuple[str | None, str]:
    """The key the records must be signed by (None: any known one), and words on it.
    Raises CallFailed."""
    if args.public_key is not None:
        try:
            key = read_public_key(args.public_key)
        except ValueError as e:
            raise CallFailed(_usage(f"--public-key {args.public_key}: {e}")) from None
        return key, f"signed by {key}, the key given"
    if stub is None:
        return None, f"signed by keys known in {known.path}"
    server = str(args.endpoint)
    info = _call(server, "its public key", stub.GetServerInfo, pb.GetServerInfoRequest())
    key = info.public_key.lower()
    if not key:
        return None, f"{server} signs no record"
    try:
        learned = known_keys.vouch(server, key, known.path)
    except known_keys.KeyChanged as e:
        raise CallFailed(Outcome(ExitStatus.INVALID, str(e), {"why": str(e)})) from None
    except known_keys.KnownKeysError as e:
        raise CallFailed(_usage(str(e))) from None
    except OSError as e:
        why = f"cannot write {known.path}: {e.strerror or e}"
        raise CallFailed(Outcome(ExitStatus.ERROR, why, {"why": why})) from None
    if learned is not None:
        print(f"bergen ratings verify: {learned}", file=sys.stderr)
    return key, f"signed by {key}, {server}'s key"


def _usage(why: str) -> Outcome:
    return Outcome(ExitStatus.USAGE, why, {"why": why})


def run(args: argparse.Namespace) -> int:
    try:
        outcome, lines = verify_ratings(args)
    except CallFailed as e:
        # Nothing was compared: the folder, a key or the server stopped the command.
        if args.json:
            print(json.dumps(e.outcome.as_json(), ensure_ascii=False))
        else:
            status = e.outcome.status
            print(error_line("ratings verify", e.outcome.line, status.name), file=sys.stderr)
        return int(e.outcome.status)
    if args.json:
        print(json.dumps(outcome.as_json(), ensure_ascii=False))
    else:
        for line in [*lines, outcome.line]:
            print(line)
    return int(outcome.status)


def verify_ratings(args: argparse.Namespace) -> tuple[Outcome, list[str]]:
    """The verdict and the lines before it. Raises CallFailed."""
    folder_path: Path = args.dir
    if not folder_path.is_dir():
        raise CallFailed(_usage(f"{folder_path} is not a folder"))
    try:
        known = known_keys.load(Path(args.known_keys) if args.known_keys else None)
    except known_keys.KnownKeysError as e:
        raise CallFailed(_usage(str(e))) from None
    server = None if args.offline else str(args.endpoint)
    if args.offline:
        return _verify(args, folder_path, known, None, None)
    try:
        with open_channel(args.endpoint) as channel:
            stub = rpc.BergenServiceStub(channel)  # type: ignore[no-untyped-call]
            return _verify(args, folder_path, known, stub, server)
    except ValueError as e:  # grpc refuses a malformed target
        raise CallFailed(_usage(f"--server {server}: {e}")) from None


def _verify(
    args: argparse.Namespace,
    folder_path: Path,
    known: known_keys.KnownKeys,
    stub: Any | None,
    server: str | None,
) -> tuple[Outcome, list[str]]:
    trusted, signed = _trust(args, stub, known)
    folder = read_folder(folder_path, trusted, known)
    if folder.files == 0:
        raise CallFailed(_usage(f"{folder_path} holds no record (no .json file)"))
    rated = folder.rated
    rec = recomputed(rated)
    problems = list(folder.problems)
    if stub is not None:
        assert server is not None
        problems += compare(stub, server, folder, rec)
    pools = _by_pool(rated)
    facts: dict[str, Any] = {
        "dir": str(folder_path),
        "server": server,
        "public_key": trusted,
        "signers": sorted(folder.signers),
        "records": len(folder.proven),
        "rated": pools,
        "players": len(folder.names),
        "problems": [p.as_json() for p in problems],
        "untrusted": folder.untrusted,
    }
    lines = [p.line for p in problems]
    if args.offline:
        facts["ratings"] = offline_json(folder, rec)
        lines += offline_lines(folder, rec)
    counted = (
        f"{len(folder.proven)} record(s) of {folder.files} in {folder_path} check, "
        f"{len(rated)} rated ({', '.join(f'{pool}: {n}' for pool, n in pools.items())}), "
        f"{len(folder.names)} player(s)"
    )
    if problems:
        records = sum(p.kind == "record" for p in problems)
        differences = len(problems) - records
        why = ", ".join(
            part
            for part in (
                f"{records} record(s) rejected" if records else "",
                f"{differences} difference(s) with {server}" if differences else "",
            )
            if part
        )
        return Outcome(ExitStatus.INVALID, f"REJECTED: {why}; {counted}", facts), lines
    if folder.untrusted:
        why = (
            f"{len(folder.untrusted)} record(s) check, but no trusted key says who signed them"
            f" (give --public-key, or verify one match through its server so that its key is "
            f"known: {known.path})"
        )
        return Outcome(ExitStatus.UNTRUSTED, f"UNTRUSTED: {why}; {counted}", facts), lines
    if stub is None:
        verdict = f"OK: {counted}, {signed}: the ratings they give are above"
    else:
        verdict = (
            f"OK: {counted}, {signed}: every rating and every leaderboard agrees with {server}"
        )
    return Outcome(ExitStatus.SUCCESS, verdict, facts), lines


__all__ = [
    "EPSILON",
    "Folder",
    "Problem",
    "Proven",
    "Recomputed",
    "Step",
    "add_parser",
    "agrees",
    "compare",
    "first_disagreement",
    "leaderboard_differences",
    "player_differences",
    "read_folder",
    "recomputed",
    "run",
    "verify_ratings",
]
