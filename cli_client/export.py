"""`bergen export`: the signed record of every finished match, and a manifest of them.

DIR/<match-id>.json holds a record as the server served it (its JSON text; the signature
covers the canonical form, so the layout does not matter), and DIR/manifest.json lists every
record written with the SHA-256 of its file's bytes, its result, when its match ended (the
time its last event was recorded) and the key that signed it. A record is written only once
it verifies offline against the server's key. Running again into the same DIR adds the
matches that ended since (those not in the manifest yet) and rewrites a listed file that went
missing or changed; every file is written whole and then renamed into place, the manifest last.
Each listed match's stored log is also read again: a head (the last event's hash, and the
number of events) other than the one its exported record pins means the stored log changed
after the export, and is reported (exit status 6) without touching the exported record.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import queue
import sys
import threading
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from multiprocessing import get_all_start_methods, get_context
from multiprocessing.context import BaseContext
from pathlib import Path
from typing import Any

import grpc

from bergen.api.convert import timestamp_in
from bergen.api.durable import Folder, replace_whole
from bergen.api.exit_status import ExitStatus, help_text
from bergen.api.helptext import HelpFormatter
from bergen.api.signing import read_signed_text
from bergen.v1 import bergen_pb2 as pb
from bergen.v1 import bergen_pb2_grpc as rpc

from . import known_keys
from .connect import add_server_option, open_channel
from .usage import error_line, examples
from .verify import (
    RECORDS_MANIFEST_FORMAT,
    RPC_TIMEOUT_S,
    parse_json,
    rpc_problem,
    verify_record,
    verify_signed,
)

MANIFEST = "manifest.json"
MANIFEST_FORMAT = RECORDS_MANIFEST_FORMAT
PAGE_SIZE = 100
WRITERS = 4
"""Threads writing the record files."""

EPILOG = (
    """\
--since takes an ISO 8601 time (UTC when it names no zone), or a match id: then the time
that match ended. A match "ended" when its last event was recorded (its audit log says when).
Matches already in DIR's manifest are not fetched again (unless their file went missing or
changed), so re-running the same command adds only what is new.

A record the server served that does not verify is not written (the others are), and the
exit status is then 6.

--json prints one object: {"out": DIR, "manifest": "DIR/manifest.json", "written": [the
match ids written now], "listed": how many records the manifest lists, "rejected": [why
each record not written was not]}.

"""
    + help_text()
    + "\n\n"
    + examples(
        "bergen export --out records/             # every finished match (again: only what is new)",
        "bergen export --out records/ --since 2026-12-01T00:00",
        "bergen export --out records/ --json",
    )
)


class Stopped(Exception):
    """An export stopped: the exit status and the line that says why."""

    def __init__(self, status: ExitStatus, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True, slots=True)
class Entry:
    """One record in the manifest."""

    match_id: str
    file: str
    sha256: str
    ended_at: str
    result: dict[str, Any]
    hands: int
    log: dict[str, Any] | None

    def as_json(self) -> dict[str, Any]:
        return {
            "match_id": self.match_id,
            "file": self.file,
            "sha256": self.sha256,
            "ended_at": self.ended_at,
            "result": self.result,
            "hands": self.hands,
            "log": self.log,
        }


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "export",
        help="write the signed record of every finished match and a manifest",
        description="Write the signed record of every finished match on the server as\n"
        "DIR/<match-id>.json (each checked against the server's key first), and\n"
        "DIR/manifest.json listing each with the SHA-256 of its file, its result, when it\n"
        "ended and the server's public key.",
        epilog=EPILOG,
        formatter_class=HelpFormatter,
    )
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="where to write")
    p.add_argument(
        "--since",
        metavar="TIMESTAMP|MATCH-ID",
        help="only matches that ended after this time, or after this match ended",
    )
    p.add_argument(
        "--replay",
        action="store_true",
        help="also replay every record by the rules before writing it, as bergen verify does "
        "(some 3 ms a record; without it each record's signature and its place in the "
        "server's transparency log are checked)",
    )
    add_server_option(p)
    p.add_argument("--json", action="store_true", help="print what was done as a JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        with open_channel(args.endpoint) as channel:
            stub = rpc.BergenServiceStub(channel)  # type: ignore[no-untyped-call]
            written, listed, rejected = export(stub, args.server, args.out, args.since, args.replay)
    except Stopped as stop:
        print(error_line("export", stop.message, stop.status.name), file=sys.stderr)
        return int(stop.status)
    except ValueError as e:  # a malformed --server
        print(error_line("export", f"--server {args.server}: {e}", "USAGE"), file=sys.stderr)
        return int(ExitStatus.USAGE)
    for line in rejected:
        print(error_line("export", f"not written: {line}", "INVALID"), file=sys.stderr)
    if args.json:
        report = {
            "out": str(args.out),
            "manifest": str(args.out / MANIFEST),
            "written": written,
            "listed": listed,
            "rejected": rejected,
        }
        print(json.dumps(report, ensure_ascii=False))
    else:
        print(f"exported {len(written)} new record(s) to {args.out}; the manifest lists {listed}")
    return int(ExitStatus.INVALID if rejected else ExitStatus.SUCCESS)


def trust(server: str, key: str) -> None:
    """Check `server`'s key against the one known for it, or learn it on first use (the
    known-keys file `bergen verify` trusts). Raises Stopped when it has changed."""
    try:
        learned = known_keys.vouch(server, key)
    except known_keys.KeyChanged as e:
        raise Stopped(ExitStatus.INVALID, str(e)) from None
    except known_keys.KnownKeysError as e:
        raise Stopped(ExitStatus.USAGE, str(e)) from None
    except OSError as e:
        raise Stopped(ExitStatus.ERROR, f"cannot write the known keys: {e.strerror or e}") from None
    if learned is not None:
        print(f"bergen export: {learned}", file=sys.stderr)


def parse_since(text: str) -> datetime | None:
    """The time `text` gives (UTC when it names no zone), or None when it is no time."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _call(server: str, what: str, method: Any, request: Any) -> Any:
    try:
        return method(request, timeout=RPC_TIMEOUT_S)
    except grpc.RpcError as e:
        outcome = rpc_problem(e, server, what)
        raise Stopped(outcome.status, outcome.line) from None


def _audit_log(stub: Any, server: str, match_id: str) -> Any:
    log = _call(server, f"the audit log of {match_id}", stub.GetAuditLog,
                pb.GetAuditLogRequest(match_id=match_id))  # fmt: skip
    if not log.events:
        raise Stopped(ExitStatus.ERROR, f"{server} sent an empty log for match {match_id}")
    return log


def _ended_at(stub: Any, server: str, match_id: str) -> datetime:
    return timestamp_in(_audit_log(stub, server, match_id).events[-1].recorded_at)


def head_changed(stub: Any, server: str, match_id: str, pinned: Any) -> str | None:
    """Why the stored log of `match_id` is no longer the one an exported record pinned
    (`pinned`: the record's `log`, {events, head}); None when its head is the same."""
    if not isinstance(pinned, dict):
        return None
    events = _audit_log(stub, server, match_id).events
    return _pin_changed(match_id, pinned, {"events": len(events), "head": events[-1].hash})


def read_manifest(out: Path) -> dict[str, Any] | None:
    """DIR's manifest, or None when there is none. Raises Stopped for one that is not."""
    path = out / MANIFEST
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise Stopped(ExitStatus.USAGE, f"cannot read {path}: {e}") from None
    try:
        manifest = parse_json(text)
    except ValueError as e:
        raise Stopped(ExitStatus.USAGE, f"{path} is not JSON: {e}") from None
    if (
        not isinstance(manifest, dict)
        or manifest.get("format") != MANIFEST_FORMAT
        or not isinstance(manifest.get("matches"), list)
        or not all(
            isinstance(m, dict) and isinstance(m.get("match_id"), str) for m in manifest["matches"]
        )
    ):
        raise Stopped(ExitStatus.USAGE, f"{path} is not a {MANIFEST_FORMAT} manifest")
    return manifest


def file_sha256(path: Path) -> str | None:
    """The SHA-256 of the file at `path` in hex; None when it cannot be read."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _safe_file_name(match_id: str) -> bool:
    return (
        bool(match_id)
        and len(match_id) <= 200
        and not match_id.startswith(".")
        and all(c.isalnum() or c in "-_." for c in match_id)
    )


def _finished_matches(stub: Any, server: str) -> list[str]:
    ids: list[str] = []
    seen: set[str] = set()  # a match listed twice (pages read while matches end) is one
    token = ""
    while True:
        page = _call(
            server,
            "the list of finished matches",
            stub.ListMatches,
            pb.ListMatchesRequest(phase=pb.PHASE_ENDED, page_size=PAGE_SIZE, page_token=token),
        )
        for m in page.matches:
            if m.match_id not in seen:
                seen.add(m.match_id)
                ids.append(m.match_id)
        token = page.next_page_token
        if not token:
            return ids


def _pin_changed(match_id: str, pinned: Any, served: Any) -> str | None:
    """Why the log a served record pins (`served`: its `log`, {events, head}) is not the one
    the record exported earlier pinned (`pinned`); None when it is the same."""
    if not isinstance(pinned, dict):
        return None  # exported unsigned by its log: nothing to compare
    now = served if isinstance(served, dict) else {}
    now = {"events": now.get("events"), "head": now.get("head")}
    was = {"events": pinned.get("events"), "head": pinned.get("head")}
    if now == was:
        return None
    return (
        f"{match_id}: the stored log changed since it was exported: its head was "
        f"{was['head']} after {was['events']} events, it is now {now['head']} after "
        f"{now['events']}"
    )


def _ended_at_of(record: dict[str, Any]) -> datetime | None:
    """When the match of a checked record ended: the time its last event was recorded, as
    its `transparency` field (covered by the signature) has it; None without one."""
    field = record.get("transparency")
    micros = field.get("recorded_us") if isinstance(field, dict) else None
    if type(micros) is not int:
        return None
    try:
        return _EPOCH + timedelta(microseconds=micros)
    except OverflowError:
        return None


def _write_unsynced(folder: Folder, name: str, data: bytes) -> Path:
    """`data` written whole as `name` in `folder` (owner-only), renamed into place; synced
    later, all at once. Raises Stopped."""
    path = folder.path / name
    try:
        folder.replace_whole(name, data)
    except OSError as e:
        raise Stopped(ExitStatus.ERROR, f"cannot write {path}: {e.strerror or e}") from None
    return path


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Checked:
    """A served record checked: its match, why it is not written (None: it may be), and what
    the manifest says of it."""

    match_id: str
    problem: str | None
    result: dict[str, Any] | None = None
    hands: int = 0
    log: dict[str, Any] | None = None
    ended: datetime | None = None
    """When its match ended, as its checked `transparency` says (None: it has none)."""


def check_served(text: str, asked: str | None, key: str | None, replay: bool) -> Checked:
    """Check a record the server served (`asked`: the match it was asked for, None for a
    page's): a JSON object naming a match that can be a file name, signed by `key` (when
    given), its last event in the checkpoint it carries; replayed by the rules with
    `replay`. Never raises."""
    what = asked or "a record"
    # The server's text, signed by the key trusted: its signature is checked on the text,
    # which then needs no strict parse nor canonical form made again; any other text is
    # checked the long way (and a bad one refused there, saying why).
    checked = read_signed_text(text, key) if key is not None and not replay else None
    signed = checked is not None
    try:
        record: Any = checked if checked is not None else parse_json(text)
    except ValueError as e:
        return Checked(what, f"{what}: the server's record is not JSON: {e}")
    match_id = record.get("match_id") if isinstance(record, dict) else None
    if not isinstance(match_id, str) or (asked is not None and match_id != asked):
        return Checked(what, f"{what}: the server's record names no match or another")
    if not _safe_file_name(match_id):
        return Checked(match_id, f"match id {match_id!r} cannot be a file name")
    outcome = verify_record(record, key) if replay else verify_signed(record, key, signed)
    if not outcome.ok:
        return Checked(match_id, f"{match_id}: {outcome.line}")
    log = record.get("log")
    return Checked(
        match_id,
        None,
        record["result"],
        len(record["hands"]),
        log if isinstance(log, dict) else None,
        _ended_at_of(record),
    )


def _check_page(texts: list[str], key: str | None, replay: bool) -> list[Checked]:
    return [check_served(t, None, key, replay) for t in texts]


def _workers_context() -> BaseContext:
    """How the workers start: forked from one process that imported this module (the
    import costs more than a page's checks), where that can be; else each imports it."""
    if "forkserver" not in get_all_start_methods():
        return get_context("spawn")
    context = get_context("forkserver")
    context.set_forkserver_preload([__name__])
    return context


CHECKED_IN_CHUNKS = 25
"""Records a worker checks a task."""
CHUNKS_IN_FLIGHT = 8
"""Chunks handed to the workers and not yet taken back: enough that a worker finds the next
one waiting when it is done with its own (the order the records come back in is kept)."""


def _checked(
    served: Iterator[tuple[str | None, str | None]], key: str | None, replay: bool
) -> Iterator[tuple[str | None, str | None, Checked]]:
    """`served` with each page's records checked, in the order served: here while the
    workers start (from the first full page on), then by as many processes as there are
    cores, several chunks in flight at once so that none of them waits on this process
    between pages. An item asked for alone (no text) is passed on, after every record
    before it, with a stand-in, to be fetched and checked by the caller."""
    cores = os.cpu_count() or 1
    pool: ProcessPoolExecutor | None = None
    starter: threading.Thread | None = None
    started = threading.Event()
    chunk: list[str] = []
    flight: deque[tuple[list[str], Future[list[Checked]] | list[Checked]]] = deque()
    blank = Checked("", None)

    def send(full: bool) -> None:
        """The records gathered, handed to a worker; or checked here: before a first full
        page (`full`) has started the workers, and until they have started."""
        nonlocal pool, starter
        texts = chunk[:]
        chunk.clear()
        if not texts:
            return
        if pool is not None and started.is_set():
            flight.append((texts, pool.submit(_check_page, texts, key, replay)))
            return
        if pool is None and full and cores > 1:
            pool = ProcessPoolExecutor(cores, mp_context=_workers_context())
            # Starting a worker waits for it to be made: on a thread of its own.
            starter = threading.Thread(
                target=_start_workers, args=(pool, cores, started), daemon=True
            )
            starter.start()
        flight.append((texts, _check_page(texts, key, replay)))

    def landed(limit: int) -> Iterator[tuple[str | None, str | None, Checked]]:
        """The records checked, in order: those done, and more while over `limit` chunks
        are in flight (waiting for them)."""
        while flight and (
            len(flight) > limit or isinstance(flight[0][1], list) or flight[0][1].done()
        ):
            texts, results = flight.popleft()
            done = results if isinstance(results, list) else results.result()
            for text, checked in zip(texts, done, strict=True):
                yield None, text, checked

    try:
        for asked, text in served:
            if text is not None and asked is None:
                chunk.append(text)
                if len(chunk) >= (CHECKED_IN_CHUNKS if pool is not None else PAGE_SIZE):
                    send(full=True)
                    yield from landed(CHUNKS_IN_FLIGHT)
                continue
            send(full=False)
            yield from landed(0)
            yield asked, text, blank
        send(full=False)
        yield from landed(0)
    finally:
        if starter is not None:
            starter.join()
        if pool is not None:
            pool.shutdown(cancel_futures=True)


def _start_workers(pool: ProcessPoolExecutor, workers: int, started: threading.Event) -> None:
    """Start `pool`'s workers, and set `started` once they have; left unset when they
    cannot start (the records are then all checked by the export's own process)."""
    try:
        for task in [pool.submit(int) for _ in range(workers)]:
            task.result()
    except Exception:  # a pool that cannot start: every record is checked here instead
        return
    started.set()


PAGES_AHEAD = 4
"""Pages read from the server and not yet checked: the server makes the next ones while
this client checks."""


def _served(stub: Any, server: str) -> Iterator[tuple[str | None, str | None]]:
    """(the match id asked for, or None; its record's JSON text, or None when the server
    could not make it) for every finished match: ExportRecords' pages, read one after the
    other by a thread of their own up to PAGES_AHEAD ahead of the one being checked; from a
    server without it, the finished matches listed, then GetRecord of each."""
    pages: queue.Queue[Any] = queue.Queue(PAGES_AHEAD)
    stop = threading.Event()

    def hand(item: Any) -> bool:
        while not stop.is_set():
            try:
                pages.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def read() -> None:
        token = ""
        try:
            while True:
                request = pb.ExportRecordsRequest(page_size=PAGE_SIZE, page_token=token)
                answer = stub.ExportRecords(request, timeout=RPC_TIMEOUT_S)
                if not hand(answer) or not answer.next_page_token:
                    return
                token = answer.next_page_token
        except BaseException as e:  # raised again where the pages are read
            hand(e)

    reader = threading.Thread(target=read, name="bergen-export-pages", daemon=True)
    reader.start()
    first = True
    try:
        while True:
            answer = pages.get()
            if isinstance(answer, grpc.RpcError):
                if first and answer.code() == grpc.StatusCode.UNIMPLEMENTED:
                    break  # an earlier server: one record a call
                outcome = rpc_problem(answer, server, "the records of the finished matches")
                raise Stopped(outcome.status, outcome.line) from None
            if isinstance(answer, BaseException):
                raise answer
            first = False
            for text in answer.records_json:
                yield None, text
            for match_id in answer.refused_match_ids:
                yield match_id, None
            if not answer.next_page_token:
                return
    finally:
        stop.set()
    for match_id in _finished_matches(stub, server):
        yield match_id, None


def export(
    stub: Any, server: str, out: Path, since: str | None, replay: bool = False
) -> tuple[list[str], int, list[str]]:
    """Export into `out`. Returns (the match ids written, records listed, rejections). Each
    record is checked (its signature, and its last event in the checkpoint it carries), and
    with `replay` replayed by the rules as well, before it is written.

    Raises Stopped."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise Stopped(ExitStatus.USAGE, f"cannot make {out}: {e.strerror or e}") from None
    if not out.is_dir():
        raise Stopped(ExitStatus.USAGE, f"{out} is not a folder")
    manifest = read_manifest(out)
    info = _call(server, "its public key", stub.GetServerInfo, pb.GetServerInfoRequest())
    key = info.public_key.lower()
    if key:
        trust(server, key)
    if manifest is not None and manifest.get("public_key") not in (key, None):
        raise Stopped(
            ExitStatus.USAGE,
            f"{out} holds records signed by {manifest.get('public_key')}, but {server} signs "
            f"with {key or 'no key'}: export into another folder",
        )
    entries: dict[str, dict[str, Any]] = {
        m["match_id"]: m for m in (manifest["matches"] if manifest else [])
    }
    cutoff: datetime | None = None
    if since is not None:
        cutoff = parse_since(since)
        if cutoff is None:
            try:
                cutoff = _ended_at(stub, server, since)
            except Stopped as stop:
                if stop.status != ExitStatus.USAGE:
                    raise
                raise Stopped(
                    ExitStatus.USAGE, f"--since {since}: neither an ISO 8601 time nor a match id"
                ) from None
    written: list[str] = []
    rejected: list[str] = []
    # Files are written by threads of their own: making a file waits on the file system's
    # journal, shared with whatever else the machine writes, and that wait need not hold up
    # the next record's check.
    try:
        folder = Folder(out)
    except OSError as e:
        raise Stopped(ExitStatus.USAGE, f"cannot open {out}: {e.strerror or e}") from None
    writers = ThreadPoolExecutor(WRITERS, thread_name_prefix="bergen-export-write")
    files: list[Future[Path]] = []
    try:
        _export_records(stub, server, folder, key, replay, cutoff, entries, written, rejected,
                        writers, files)  # fmt: skip
    finally:
        writers.shutdown(wait=True)
        folder.close()
    for f in files:
        f.result()  # raises the Stopped of a file not written
    if files:
        os.sync()  # every record on disk, once, before the manifest that lists them
    new_manifest = manifest_of(
        server, info.signature_algorithm or None, key or None, info.record_format, entries
    )
    listed = new_manifest["matches"]
    if manifest is None or written or listed != manifest.get("matches"):
        replace_whole(out / MANIFEST, manifest_text(new_manifest).encode("utf-8"))
    return written, len(listed), rejected


def manifest_of(
    server: str | None,
    algorithm: str | None,
    key: str | None,
    record_format: str,
    entries: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """A folder's manifest listing `entries` (by match id), by when each match ended."""
    listed = sorted(entries.values(), key=lambda m: (str(m.get("ended_at")), m["match_id"]))
    return {
        "format": MANIFEST_FORMAT,
        "server": server,
        "signature_algorithm": algorithm,
        "public_key": key,
        "record_format": record_format,
        "updated_at": datetime.now(UTC).isoformat(),
        "matches": listed,
    }


def record_file_bytes(text: str) -> bytes:
    """A record's file: its text as served (the signature covers its JCS), and a newline."""
    return text.encode("utf-8") + b"\n"


def manifest_text(manifest: dict[str, Any]) -> str:
    """A manifest as JSON text: its fields indented, one match a line (so that the manifest
    of a hundred thousand matches is written in a moment and reads line by line)."""
    head = json.dumps({k: v for k, v in manifest.items() if k != "matches"}, indent=2,
                      ensure_ascii=False)  # fmt: skip
    lines = [json.dumps(m, ensure_ascii=False) for m in manifest.get("matches", [])]
    listed = "[\n    " + ",\n    ".join(lines) + "\n  ]" if lines else "[]"
    return f'{head.removesuffix("}").rstrip()},\n  "matches": {listed}\n}}\n'


def _export_records(
    stub: Any,
    server: str,
    folder: Folder,
    key: str,
    replay: bool,
    cutoff: datetime | None,
    entries: dict[str, dict[str, Any]],
    written: list[str],
    rejected: list[str],
    writers: ThreadPoolExecutor,
    files: list[Future[Path]],
) -> None:
    """`export`'s pass over the served records: each checked, and written (by `writers`,
    each file's future added to `files`) when it is new or its file changed; `entries`,
    `written` and `rejected` updated. Raises Stopped."""
    out = folder.path
    for asked, text, checked in _checked(_served(stub, server), key or None, replay):
        if text is None:
            # Asked for alone: GetRecord says why the server cannot make it (a log that
            # changed since a listed record was exported is said first).
            known = entries.get(str(asked))
            if known is not None:
                changed = head_changed(stub, server, str(asked), known.get("log"))
                if changed is not None:
                    rejected.append(changed)
                    continue
            text = _call(server, f"the record of {asked}", stub.GetRecord,
                         pb.GetRecordRequest(match_id=asked)).record_json  # fmt: skip
            checked = check_served(text, asked, key or None, replay)
        if checked.problem is not None:
            rejected.append(checked.problem)
            continue
        match_id = checked.match_id
        known = entries.get(match_id)
        if known is not None:
            changed = _pin_changed(match_id, known.get("log"), checked.log)
            if changed is not None:
                rejected.append(changed)
                continue
            if file_sha256(out / str(known.get("file"))) == known.get("sha256"):
                continue
            print(f"bergen export: {known.get('file')} is missing or changed: fetching it again",
                  file=sys.stderr)  # fmt: skip
        ended = checked.ended or _ended_at(stub, server, match_id)
        if known is None and cutoff is not None and ended <= cutoff:
            continue
        data = record_file_bytes(text or "")
        entry = entry_of(checked, ended, data)
        files.append(writers.submit(_write_unsynced, folder, entry.file, data))
        entries[match_id] = entry.as_json()
        written.append(match_id)


def entry_of(checked: Checked, ended: datetime, data: bytes) -> Entry:
    """The manifest's entry for a checked record whose file holds `data`
    (`record_file_bytes`), as `bergen export` and `bergen archive` list it."""
    return Entry(
        match_id=checked.match_id,
        file=f"{checked.match_id}.json",
        sha256=hashlib.sha256(data).hexdigest(),
        ended_at=ended.isoformat(),
        result=checked.result or {},
        hands=checked.hands,
        log=checked.log,
    )
