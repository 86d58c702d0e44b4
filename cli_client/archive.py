"""`bergen archive`: old ended matches exported to signed records, then removed from the store.

Run as the database's owner (the role `bergen migrate` runs as; the server's role can delete
nothing). On PostgreSQL only. In three steps, each finished before the next begins:

1. `plan`: the ended matches whose end was recorded longer ago than the age given, each with
   the record a server made and kept of it (`match_records`), checked as `bergen export`
   checks a served one (signed by the archive's key, its last event in the checkpoint it
   carries) and pinning the log stored now (its number of events and last hash). A match
   is left where it is, and said why, when it has no kept record yet, belongs to a
   tournament, is rated by an end that does not name its holders (the ratings would read
   its seats from the rows removed), or is not yet folded by the listing, the ratings and
   the transparency log.
2. `write`: each record written into the folder as `bergen export` writes it (DIR/<id>.json,
   the server's text; DIR/manifest.json, the same format), every file synced to disk, then
   read back and checked again, replayed by the rules this time.
3. `remove`: one transaction a match: the match listed in `archived_matches` (with the log
   its record pins and the record file's SHA-256), its events before its `MatchEnded`
   deleted (migration 0016's guard allows no other DELETE), its kept record and its listing
   rows deleted. The end and what follows it stay: the ratings fold from the ends, and the
   projections' positions and the transparency log's last leaf name rows that still exist.

A run stopped anywhere leaves a consistent store and a folder that verifies: files are
written whole and renamed into place, the manifest last, and a match's rows go in one
transaction only after its file verified. Running it again picks up where it stopped.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from bergen.api.durable import replace_whole
from bergen.api.exit_status import ExitStatus, help_text
from bergen.api.helptext import HelpFormatter

from .export import (
    MANIFEST,
    Entry,
    Stopped,
    check_served,
    entry_of,
    file_sha256,
    manifest_of,
    manifest_text,
    parse_since,
    read_manifest,
    record_file_bytes,
)
from .usage import error_line, examples
from .verify import read_public_key

DATABASE_URL_ENV = "BERGEN_DATABASE_URL"
RECORD_FORMAT = "bergen-match-record/1"
FOLDED_BY = ("match_list", "ratings", "tlog")
"""The projections that must have folded a match's last event before it is archived."""
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}

EPILOG = (
    """\
AGE is a number and a unit: s, m, h, d or w (90m, 12h, 30d, 2w). A match's age is counted
from its MatchEnded, as the database recorded it. --ended-before TIME instead takes the
matches that ended before a time (ISO 8601, UTC when it names no zone).

Run it as the database's owner: the server's role of deploy/grants.sql can delete nothing,
and the events' guard (migration 0016) deletes only the rows before the end of a match
listed in archived_matches, which only the owner can write. The end, and the rows after it,
stay: the ratings are folded from them.

Tournament matches are left alone. So is a match without a kept record yet (a server makes
it soon after the end), and a rated match whose end does not name its seat holders.

--json prints one object: {"to": DIR, "dry_run": bool, "archived": [match ids], "skipped":
[{"match_id", "why"}], "listed": how many records the manifest lists}.

"""
    + help_text()
    + "\n\n"
    + examples(
        "bergen archive --database $OWNER_URL --older-than 90d --to /archive/bergen/",
        "bergen archive --older-than 30d --to /archive/bergen/ --dry-run",
        "bergen verify /archive/bergen/         # every archived record, replayed",
        "bergen-replay --file /archive/bergen/MATCH.json",
    )
)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A match to archive: its kept record's text, checked, and the log it pins."""

    match_id: str
    end_seq: int
    events: int
    head: bytes
    text: str
    entry: Entry


@dataclass(slots=True)
class Plan:
    """What a run archives, and what it leaves and why."""

    key: str
    chosen: list[Candidate] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)


def parse_age(text: str) -> timedelta:
    """`text` (a number and a unit: 90m, 12h, 30d) as a duration. Raises ValueError."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text)
    if found is None:
        raise ValueError(f"{text!r} is no age: a number and s, m, h, d or w (30d, say)")
    return timedelta(seconds=float(found.group(1)) * _UNITS[found.group(2)])


def _age(text: str) -> timedelta:
    try:
        return parse_age(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _time(text: str) -> datetime:
    when = parse_since(text)
    if when is None:
        raise argparse.ArgumentTypeError(f"{text!r} is no ISO 8601 time")
    return when


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "archive",
        help="export old ended matches to signed records, then remove them from the store",
        description="Write the signed record of every match that ended longer ago than AGE\n"
        "into DIR (as bergen export writes them, each verified), then remove the match's\n"
        "events before its end from the database. Run as the database's owner.",
        epilog=EPILOG,
        formatter_class=HelpFormatter,
    )
    p.add_argument(
        "--database",
        "--database-url",
        dest="database",
        default=os.environ.get(DATABASE_URL_ENV),
        metavar="URL",
        help="postgresql://OWNER@HOST/DB (default: $BERGEN_DATABASE_URL)",
    )
    when = p.add_mutually_exclusive_group(required=True)
    when.add_argument("--older-than", type=_age, metavar="AGE",
                      help="archive the matches that ended longer ago than this")  # fmt: skip
    when.add_argument("--ended-before", type=_time, metavar="TIME",
                      help="archive the matches that ended before this time (ISO 8601, UTC"
                      " when it names no zone)")  # fmt: skip
    p.add_argument("--to", type=Path, required=True, metavar="DIR", help="the archive folder")
    p.add_argument(
        "--dry-run", action="store_true", help="say what would be archived; change nothing"
    )
    p.add_argument(
        "--public-key",
        metavar="KEY",
        help="the server's public key the records must be signed by (default: the one of "
        "DIR's manifest, else the one the first record names)",
    )
    p.add_argument("--json", action="store_true", help="print the outcome as one JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        if not args.database or not args.database.startswith(
            ("postgresql:", "postgres:", "postgresql+psycopg:")
        ):
            raise Stopped(ExitStatus.USAGE, "--database: a postgresql:// URL of the owner role")
        key = _key_given(args.public_key)
        with _connect(args.database) as conn:
            _check_role(conn)
            ended = args.older_than if args.older_than is not None else args.ended_before
            plan = make_plan(conn, ended, args.to, key)
            archived: list[str] = []
            listed = 0
            if not args.dry_run and plan.chosen:
                listed = write(plan, args.to)
                archived = remove(conn, plan)
            else:
                manifest = read_manifest(args.to)
                listed = len(manifest["matches"]) if manifest is not None else 0
    except Stopped as stop:
        print(error_line("archive", stop.message, stop.status.name), file=sys.stderr)
        return int(stop.status)
    except psycopg.OperationalError as e:  # lost during the run: what is done stays done
        print(error_line("archive", f"the database: {e}", "UNREACHABLE"), file=sys.stderr)
        return int(ExitStatus.UNREACHABLE)
    except psycopg.Error as e:
        print(error_line("archive", f"the database refused: {e}", "ERROR"), file=sys.stderr)
        return int(ExitStatus.ERROR)
    for match_id, why in plan.skipped:
        print(f"bergen archive: left {match_id}: {why}", file=sys.stderr)
    chosen = [c.match_id for c in plan.chosen]
    if args.json:
        print(json.dumps({
            "to": str(args.to),
            "dry_run": bool(args.dry_run),
            "archived": chosen if args.dry_run else archived,
            "skipped": [{"match_id": m, "why": w} for m, w in plan.skipped],
            "listed": listed,
        }, ensure_ascii=False))  # fmt: skip
    elif args.dry_run:
        print(f"would archive {len(chosen)} match(es) to {args.to}; {len(plan.skipped)} left")
        for match_id in chosen:
            print(f"  {match_id}")
    else:
        print(
            f"archived {len(archived)} match(es) to {args.to} (their records written and"
            f" verified, their events before the end removed); {len(plan.skipped)} left"
        )
    return int(ExitStatus.SUCCESS)


def _key_given(text: str | None) -> str | None:
    if text is None:
        return None
    try:
        return read_public_key(text).lower()
    except ValueError as e:
        raise Stopped(ExitStatus.USAGE, f"--public-key {text}: {e}") from None


def _connect(url: str) -> psycopg.Connection[tuple[Any, ...]]:
    try:
        return psycopg.connect(
            url.replace("postgresql+psycopg:", "postgresql:", 1), autocommit=True
        )
    except psycopg.OperationalError as e:
        raise Stopped(ExitStatus.UNREACHABLE, f"cannot reach the database: {e}") from None


def _check_role(conn: psycopg.Connection[tuple[Any, ...]]) -> None:
    """Raises Stopped unless the schema has migration 0016 and the role can archive."""
    row = conn.execute("SELECT to_regclass('archived_matches') IS NOT NULL").fetchone()
    if row is None or not row[0]:
        raise Stopped(ExitStatus.USAGE, "the database has no archived_matches: run bergen migrate")
    row = conn.execute(
        "SELECT current_user, has_table_privilege('events', 'DELETE')"
        " AND has_table_privilege('archived_matches', 'INSERT')"
    ).fetchone()
    if row is None or not row[1]:
        who = row[0] if row is not None else "this role"
        raise Stopped(
            ExitStatus.REFUSED,
            f"the role {who} cannot delete events nor list archived matches: run bergen archive"
            " as the database's owner (the role bergen migrate runs as)",
        )


def make_plan(
    conn: psycopg.Connection[tuple[Any, ...]],
    ended: timedelta | datetime,
    out: Path,
    key: str | None,
) -> Plan:
    """The matches to archive (see the module's doc, step 1): those that ended longer ago
    than `ended` (an age), or before it (a time). Writes nothing. Raises Stopped."""
    manifest = read_manifest(out)
    listed_key = manifest.get("public_key") if manifest is not None else None
    if key is not None and listed_key not in (None, key):
        raise Stopped(
            ExitStatus.USAGE,
            f"{out} holds records signed by {listed_key}, not by {key}: archive into another"
            " folder",
        )
    key = key or (str(listed_key) if listed_key else None)
    ends = conn.execute(
        "SELECT e.stream_id, e.seq, e.payload::text FROM events e"
        " WHERE e.type = 'MatchEnded' AND e.recorded_at < "
        + ("now() - %s::interval" if isinstance(ended, timedelta) else "%s::timestamptz")
        + " AND NOT EXISTS (SELECT 1 FROM archived_matches a WHERE a.match_id = e.stream_id)"
        " ORDER BY e.recorded_at, e.stream_id",
        (ended,),
    ).fetchall()
    folded = _folded(conn)
    plan = Plan(key or "")
    for match_id, end_seq, payload in ends:
        why = _candidate(conn, plan, str(match_id), int(end_seq), str(payload), folded)
        if why is not None:
            plan.skipped.append((str(match_id), why))
    return plan


def _folded(conn: psycopg.Connection[tuple[Any, ...]]) -> dict[str, tuple[int, int] | None]:
    """Where each projection of FOLDED_BY is, as (tx_id, position) of its last event."""
    rows = conn.execute(
        "SELECT p.name, e.tx_id, e.position FROM projection_positions p"
        " LEFT JOIN events e ON e.position = p.position WHERE p.name = ANY(%s)",
        (list(FOLDED_BY),),
    ).fetchall()
    found: dict[str, tuple[int, int] | None] = dict.fromkeys(FOLDED_BY)
    for name, tx_id, position in rows:
        if position is not None:
            found[str(name)] = (int(tx_id or 0), int(position))
    return found


def _candidate(
    conn: psycopg.Connection[tuple[Any, ...]],
    plan: Plan,
    match_id: str,
    end_seq: int,
    payload: str,
    folded: dict[str, tuple[int, int] | None],
) -> str | None:
    """Add `match_id` to `plan` when it may be archived; else why not."""
    last = conn.execute(
        "SELECT seq, hash, tx_id, position FROM events WHERE stream_id = %s"
        " ORDER BY seq DESC LIMIT 1",
        (match_id,),
    ).fetchone()
    if last is None:
        return "no events"
    events, head, at = int(last[0]), bytes(last[1]), (int(last[2] or 0), int(last[3]))
    behind = [name for name, where in folded.items() if where is None or where < at]
    if behind:
        return f"not folded yet by the server's {', '.join(behind)}: run again later"
    row = conn.execute(
        "SELECT record FROM match_records WHERE match_id = %s", (match_id,)
    ).fetchone()
    if row is None:
        return "no kept record yet (a server makes it soon after the end): run again later"
    text = str(row[0])
    try:
        record = json.loads(text)
        signer = str(record["signature"]["public_key"]).lower()
    except (ValueError, KeyError, TypeError):
        return "its kept record is not signed"
    if not plan.key:
        plan.key = signer
    if signer != plan.key:
        return f"its record is signed by {signer}, not by {plan.key}"
    if "tournament" in record:
        return "a tournament's match: left to its tournament"
    end = json.loads(payload)
    if "rated" in record and not (isinstance(end, dict) and end.get("holders")):
        return "a rated match whose end does not name its holders"
    checked = check_served(text, match_id, plan.key, replay=False)
    if checked.problem is not None:
        return f"its kept record does not verify: {checked.problem}"
    if checked.log != {"events": events, "head": head.hex()}:
        return f"its kept record pins another log than the stored one ({checked.log})"
    ended = checked.ended or datetime.now(UTC)
    entry = entry_of(checked, ended, record_file_bytes(text))
    plan.chosen.append(Candidate(match_id, end_seq, events, head, text, entry))
    return None


def write(plan: Plan, out: Path) -> int:
    """Write the chosen records into `out` with the manifest, sync them, read them back and
    check each, replayed by the rules. Returns how many records the manifest lists. Raises
    Stopped (nothing is removed then)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise Stopped(ExitStatus.USAGE, f"cannot make {out}: {e.strerror or e}") from None
    manifest = read_manifest(out)
    entries = {m["match_id"]: m for m in (manifest["matches"] if manifest else [])}
    try:
        for c in plan.chosen:
            path = out / c.entry.file
            if file_sha256(path) != c.entry.sha256:
                replace_whole(path, record_file_bytes(c.text), sync=False)
            entries[c.match_id] = c.entry.as_json()
        os.sync()  # every record on disk before the manifest that lists them
        server = manifest.get("server") if manifest else None
        made = manifest_of(server, "ed25519", plan.key, RECORD_FORMAT, entries)
        listed = made["matches"]
        replace_whole(out / MANIFEST, manifest_text(made).encode("utf-8"))
    except OSError as e:
        raise Stopped(ExitStatus.ERROR, f"cannot write into {out}: {e.strerror or e}") from None
    for c in plan.chosen:
        _check_written(out / c.entry.file, c)
    return len(listed)


def _check_written(path: Path, c: Candidate) -> None:
    """Raises Stopped unless `path` holds `c`'s record, verified again (replayed)."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise Stopped(ExitStatus.ERROR, f"cannot read {path} back: {e.strerror or e}") from None
    if hashlib.sha256(data).hexdigest() != c.entry.sha256:
        raise Stopped(ExitStatus.ERROR, f"{path} does not hold what was written: nothing removed")
    checked = check_served(data.decode("utf-8"), c.match_id, None, replay=True)
    if checked.problem is not None:
        raise Stopped(ExitStatus.INVALID, f"{path} does not verify: {checked.problem}")


def remove(conn: psycopg.Connection[tuple[Any, ...]], plan: Plan) -> list[str]:
    """Remove the chosen matches' events before their ends (one transaction a match, each
    checked to pin the log still stored). Returns the matches removed. Raises Stopped."""
    removed: list[str] = []
    for c in plan.chosen:
        with conn.transaction():
            last = conn.execute(
                "SELECT seq, hash FROM events WHERE stream_id = %s ORDER BY seq DESC LIMIT 1",
                (c.match_id,),
            ).fetchone()
            if last is None or (int(last[0]), bytes(last[1])) != (c.events, c.head):
                raise Stopped(
                    ExitStatus.INVALID,
                    f"{c.match_id}: its stored log changed since its record was checked:"
                    " left, and nothing after it removed",
                )
            _remove_one(conn, c)
        removed.append(c.match_id)
    return removed


def _remove_one(conn: psycopg.Connection[tuple[Any, ...]], c: Candidate) -> None:
    conn.execute(
        "INSERT INTO archived_matches (match_id, end_seq, events, head, record_sha256)"
        " VALUES (%s, %s, %s, %s, %s)",
        (c.match_id, c.end_seq, c.events, c.head, c.entry.sha256),
    )
    conn.execute("DELETE FROM events WHERE stream_id = %s AND seq < %s", (c.match_id, c.end_seq))
    for table in ("match_records", "match_list_players", "match_list"):
        conn.execute(f"DELETE FROM {table} WHERE match_id = %s", (c.match_id,))


def archive(
    database_url: str, ended: timedelta | datetime, out: Path, key: str | None = None
) -> tuple[Plan, list[str]]:
    """The whole run, for tools and tests: plan, write, remove. Raises Stopped."""
    with _connect(database_url) as conn:
        _check_role(conn)
        plan = make_plan(conn, ended, out, key)
        if not plan.chosen:
            return plan, []
        write(plan, out)
        return plan, remove(conn, plan)
