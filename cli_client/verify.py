"""`bergen verify`: check a match record offline, a tournament's audit pack offline, or a
match and its stored log on a server.

Offline (a RECORD.md file): the record's shape, the commitment against the revealed server
seed, every deal dealt again, every action replayed through the rules, every point, score and
the result recomputed (`bergen.domain.audit.replay_record`), and the Ed25519 signature.

Through the server (a match id): the same for the record it serves, checked against its public
key, and the stored log: the hash chain walked from seq 1 to the head (on this side, with the
hash formula of the API), every event decoded and compared with what the rules give, the
record rebuilt from the log and compared with the signed one, and the record's `log` (events,
head hash) tied to the chain's head. A fault in the log is named by its seq.

An audit pack (a folder, TOURNAMENT.md section 6): the manifest's signature, every file's
SHA-256 against it (none missing, none extra), the tournament record's signature, its
commitment against the revealed seed, the seeding order, every round's pairing recomputed
from the results before it and the standings (`bergen.domain.tournament_record`), then every
table's match: its id and server seed derived from the tournament seed, its seats holding
the entrants its table names (names and client seeds), the table's rules, the record checked
by the rules as above and signed by the manifest's key, and its result the table's. Every
record's checkpoint of the transparency log and inclusion proof, the tournament record's
included, under the manifest's key, and held against each other as one log's (`PackLog`).

Against a witness (`--witness-checkpoint`, `--witness-key`): the record's checkpoint (each of
a pack's records') held against one a witness cosigned (`witness.relate`).

The verdict is one line: `OK: ...`, `REJECTED: <where>: <why>` or `INCONSISTENT: <why>`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from cryptography.exceptions import UnsupportedAlgorithm

from bergen.api.chain import (
    canonical_json,
    content_bytes,
    event_hash,
    metadata_json,
    parse_metadata,
    verify_events,
)
from bergen.api.checkpoints import (
    COSIGNATURE_V1,
    Checkpoint,
    NoteError,
    parse_checkpoint,
    parse_note,
    parse_verifier_key,
    verify_transparency,
)
from bergen.api.convert import timestamp_in
from bergen.api.exit_status import ExitStatus, help_text
from bergen.api.helptext import HelpFormatter
from bergen.api.signing import SignatureError, load_public_key, verify_signature
from bergen.api.stored import ChainFault, ChainReport, StoredEvent
from bergen.domain import codec
from bergen.domain.audit import replay_record
from bergen.domain.describe import describe
from bergen.domain.errors import BergenError, CorruptRecord, MatchNotInProgress
from bergen.domain.events import (
    Event,
    MatchCreated,
    MatchEnded,
    SeatTaken,
    SeedRevealed,
    as_logged_then,
)
from bergen.domain.record import NO_ONE_SEATED, build_record
from bergen.domain.state import State, evolve
from bergen.domain.tournament_record import (
    TableMatch,
    Tournament,
    check_tournament_record,
    table_matches,
    tournament_stream,
)
from bergen.v1 import bergen_pb2 as pb
from bergen.v1 import bergen_pb2_grpc as rpc

from . import known_keys
from .client import Client, Unreachable
from .connect import Endpoint, add_server_option, code_of, error_info, exit_status_of, open_channel
from .tournament_pack import (
    MANIFEST_FILE,
    MANIFEST_FORMAT,
    MATCHES_DIR,
    PACK_PATH,
    TOURNAMENT_FILE,
    match_path,
    sha256_hex,
    table_rules,
)
from .usage import error_line, examples
from .witness import Inconsistent, ServerSource, check_witnessed, read_note, relate

RPC_TIMEOUT_S = 30.0
SERVER_WAIT_S = 3.0
"""How long a record file's check waits for a server to ask a consistency proof of."""

_HEX64 = re.compile(r"^[0-9a-fA-F]{64}$")

EPILOG = (
    """\
The argument is a record file when such a file exists (a match record, as `bergen export`
or `bergen-replay --record` write it), a folder of records when its manifest.json is one
`bergen export` or `bergen archive` writes (every record it lists checked, each file's
SHA-256 the manifest's, each signed by the manifest's key), a tournament's audit pack when it
is another folder (tournament.json, matches/, manifest.json, as `bergen tournament export` or
`bergen simulate --tournament` write it), else a match id asked of the server.

The signature: a record proves no more than who signed it, so the verdict says which key
vouches for it. With --public-key (a file holding the key as 64 hex digits or a PEM public
key, or the 64 hex digits themselves) the record must be signed by that key. Without it, the
keys known so far are used, as ssh uses known_hosts: the first time a match is verified
through a server, the key that server publishes is trusted and written to the known-keys file
(--known-keys) beside its address; from then on that server's records must be signed by that
key (another key is a rejection: the server's key has changed), and a record file or pack
signed by any known key is trusted. A record file or pack that checks but is unsigned, or
signed by a key neither given nor known, is UNTRUSTED (exit status 8): nothing in it was
changed since that key signed it, but nothing says whose key it is. A key learned from a
trusted place (the server logs it when it starts: "records signed by ...") can be written
into the file by hand as "HOST:PORT KEY".

A rejection (exit status 6) names the first wrong place, as "hand H, action A", a record
field, or "seq N" of the stored log, and why; a record file that is not JSON or not a record
is rejected too. A match that has not ended yet is refused by the server (4).

A pack is checked whole: the manifest's signature (by --public-key when given), every
file's SHA-256, no file missing or extra, the tournament record (signature, commitment,
seeding, every round's pairing and match ids, the standings), and every match (its id and
server seed derived from the tournament seed, its seats the entrants its table names, its
rules, its record by the rules, its signature, its result the table's), and every record's
checkpoint of the transparency log (the tournament record's too): signed by the pack's key,
the record's last event proved in it, and one log's with the others (no two roots for one
size, no two last events at one leaf). A rejection names the file and the place in it, with
the round and table.

--json prints one object: ok, status (the exit status's name, lowercase), exit_status,
verdict (the line), and the facts found: source ("file", "pack" or "server"), match_id,
hands, result, public_key, key_checked, where and why for a rejection, events, head and
chain for a match checked through the server; tournament_id, entrants, rounds, matches,
logged, checkpoints and checkpoint_size for a pack.

"""
    + help_text()
    + "\n\n"
    + examples(
        "bergen verify MATCH                       # a finished match, through the server",
        "bergen verify records/MATCH.json --public-key KEY   # a record file, offline",
        "bergen verify pack/ --public-key KEY      # a tournament's audit pack",
        "bergen verify MATCH --json",
        "bergen verify MATCH --witness-key VKEY --witness-checkpoint http://w.example:8081/checkpoint",
    )
)


@dataclass(frozen=True, slots=True)
class Outcome:
    """A verdict: an exit status, the one line to print, and the facts for --json."""

    status: ExitStatus
    line: str
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == ExitStatus.SUCCESS

    def as_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "status": self.status.name.lower(),
            "exit_status": int(self.status),
            "verdict": self.line,
            **self.facts,
        }


def _rejected(where: str, why: str, **facts: Any) -> Outcome:
    line = f"REJECTED: {where}: {why}" if where else f"REJECTED: {why}"
    return Outcome(ExitStatus.INVALID, line, {"where": where, "why": why, **facts})


def _problem(status: ExitStatus, message: str, **facts: Any) -> Outcome:
    return Outcome(status, message, {"why": message, **facts})


# ----- parser -----------------------------------------------------------------------------


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "verify",
        help="check a match record (a file), a tournament's audit pack (a folder), or a "
        "finished match (an id) on a server",
        description="Check a match record or a tournament's audit pack offline, or a finished\n"
        "match and its stored, hash-chained event log through the server: the commitment,\n"
        "every deal, every action, every score and the result, the signature, (with a\n"
        "match id) the log walked from seq 1 to its head and tied to the signed record,\n"
        "and (with a pack) every pairing, seat, seed and standing of the tournament.\n"
        "Prints one line.",
        epilog=EPILOG,
        formatter_class=HelpFormatter,
    )
    p.add_argument(
        "target",
        metavar="RECORD-FILE|PACK-DIR|MATCH-ID",
        help="a record file, a tournament's audit pack (a folder), or a match id",
    )
    add_server_option(p)
    p.add_argument(
        "--public-key",
        metavar="FILE",
        help="the trusted Ed25519 public key: a file with 64 hex digits or a PEM key, or the "
        "hex digits themselves",
    )
    p.add_argument(
        "--known-keys",
        metavar="FILE",
        help="the servers' keys trusted so far, one ADDRESS KEY a line (default: "
        "known_keys in $BERGEN_CONFIG_DIR, else $XDG_CONFIG_HOME/bergen, else ~/.config/bergen)",
    )
    p.add_argument(
        "--witness-checkpoint",
        metavar="FILE|URL",
        help="a checkpoint a witness cosigned (a file, or the witness's "
        "http://HOST:PORT/checkpoint): the record's own checkpoint must be the same, or be "
        "proved consistent with it by the log's server (--server), or at least not be "
        "another root for its size; needs --witness-key",
    )
    p.add_argument(
        "--witness-key",
        metavar="VKEY",
        help="the witness's verifier key (NAME+ID+KEY, as `bergen witness` prints it)",
    )
    p.add_argument("--json", action="store_true", help="print the verdict as a JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if (args.witness_key is None) != (args.witness_checkpoint is None):
        outcome = _problem(ExitStatus.USAGE, "--witness-key and --witness-checkpoint go together")
    else:
        outcome = verify_target(
            args.target,
            args.endpoint,
            args.public_key,
            Path(args.known_keys) if args.known_keys else None,
        )
    if args.witness_checkpoint is not None and outcome.status in _CHECKED:
        outcome = against_witness(outcome, args.witness_key, args.witness_checkpoint, args.endpoint)
    if args.json:
        print(json.dumps(outcome.as_json(), ensure_ascii=False))
    elif outcome.status in (*_CHECKED, ExitStatus.INVALID, ExitStatus.INCONSISTENT):
        print(outcome.line)
    else:
        print(error_line("verify", outcome.line, outcome.status.name), file=sys.stderr)
    return int(outcome.status)


def verify_target(
    target: str,
    server: Endpoint | str,
    public_key: str | None,
    known_keys_file: Path | None = None,
) -> Outcome:
    """Verify a record file, a pack or a match id, with the key given, else the keys known
    (`known_keys`). Never raises: every failure is an Outcome."""
    trusted: str | None = None
    if public_key is not None:
        try:
            trusted = read_public_key(public_key)
        except ValueError as e:
            return _problem(ExitStatus.USAGE, f"public key {public_key}: {e}")
    try:
        known = known_keys.load(known_keys_file)
    except known_keys.KnownKeysError as e:
        return _problem(ExitStatus.USAGE, str(e))
    path = Path(target)
    if path.is_file():
        return vouched(verify_file(path, trusted), trusted, known)
    if path.is_dir() and not (path / TOURNAMENT_FILE).exists() and _records_folder(path):
        return vouched(verify_records(path, trusted), trusted, known)
    if path.is_dir():
        return vouched(verify_pack(path, trusted), trusted, known)
    if path.exists():
        return _problem(ExitStatus.USAGE, f"{target} is neither a file nor a folder")
    if os.sep in target or target.lower().endswith(".json"):
        return _problem(ExitStatus.USAGE, f"no such file: {target}")
    if trusted is not None:
        return verify_match(server, target, trusted)
    return _through_server(server, target, known)


_UNCHECKED = ", a key not checked against a trusted one (give --public-key)"


def vouched(outcome: Outcome, trusted: str | None, known: known_keys.KnownKeys) -> Outcome:
    """A file's or a pack's outcome judged by who signed it: a key given (`trusted`, which
    the outcome was checked against) is trusted, else one known for a server; anything else
    checks but is UNTRUSTED."""
    if trusted is not None or outcome.status != ExitStatus.SUCCESS:
        return outcome
    key = outcome.facts.get("public_key")
    holder = known.holder_of(key) if isinstance(key, str) else None
    body = outcome.line.removeprefix("OK: ")
    if holder is not None:
        line = outcome.line.replace(_UNCHECKED, f", the key known for {holder}")
        facts = {**outcome.facts, "key_checked": True, "key_from": "known_keys"}
        return Outcome(ExitStatus.SUCCESS, line, facts)
    why = (
        "no key vouches for an unsigned record"
        if key is None
        else "no trusted key says who signed it: give --public-key, or verify one match "
        f"through its server so that its key is known ({known.path})"
    )
    line = f"UNTRUSTED: {body.replace(_UNCHECKED, '')}: {why}"
    return Outcome(ExitStatus.UNTRUSTED, line, {**outcome.facts, "why": why})


def _through_server(server: Endpoint | str, match_id: str, known: known_keys.KnownKeys) -> Outcome:
    """A match checked through its server against the key known for it; on first use, the
    key the server publishes is trusted and written down (as ssh does with host keys)."""
    address = str(server)
    key = known.by_address.get(address)
    if key is not None:
        outcome = verify_match(server, match_id, key)
        facts = {**outcome.facts, "key_from": "known_keys"}
        if outcome.status == ExitStatus.INVALID and outcome.facts.get("where") == "signature":
            why = (
                f"the record is not signed by {key}, the key known for {address} in "
                f"{known.path}: the server's key has changed. If the change is expected, "
                "delete that line and verify again"
            )
            line = f"REJECTED: signature: {why}"
            return Outcome(ExitStatus.INVALID, line, {**facts, "why": why})
        return dataclasses.replace(outcome, facts=facts)
    outcome = verify_match(server, match_id, None)
    served = outcome.facts.get("public_key")
    if outcome.status != ExitStatus.SUCCESS or not isinstance(served, str):
        return outcome
    try:
        known_keys.remember(known, address, served)
    except OSError as e:
        why = f"cannot write {known.path}: {e.strerror or e}"
        return _problem(ExitStatus.ERROR, why, **outcome.facts)
    line = outcome.line.replace(
        f"signed by {served}",
        f"signed by {served}, trusted on first use (written to {known.path})",
    )
    return Outcome(ExitStatus.SUCCESS, line, {**outcome.facts, "key_from": "first_use"})


def read_public_key(text: str) -> str:
    """The key (lowercase hex) in file `text`, or `text` itself when it is 64 hex digits.

    Raises ValueError, saying why."""
    if not os.path.exists(text) and _HEX64.match(text):
        return text.lower()
    try:
        return load_public_key(text)
    except OSError as e:
        raise ValueError(e.strerror or str(e)) from None
    except (ValueError, UnsupportedAlgorithm) as e:
        raise ValueError(f"not an Ed25519 public key (64 hex digits or PEM): {e}") from None


# ----- offline ----------------------------------------------------------------------------


class _NotJson(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _NotJson(f"the key {key!r} appears twice in one object")
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise _NotJson(f"{name} is not a JSON number")


def parse_json(text: str) -> Any:
    """Strict JSON: no duplicate keys, no NaN or Infinity. Raises ValueError, saying why."""
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except _NotJson:
        raise
    except json.JSONDecodeError as e:
        raise ValueError(f"{e.msg} at line {e.lineno}, column {e.colno}") from None
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except ValueError as e:  # e.g. a number of more digits than Python converts
        raise ValueError(str(e)) from None


def verify_file(path: Path, trusted_key: str | None) -> Outcome:
    """Verify the record in `path`. Never raises."""
    record, facts, failed = read_record(path)
    return failed if failed is not None else verify_record(record, trusted_key, facts)


def read_record(path: Path) -> tuple[Any, dict[str, Any], Outcome | None]:
    """The JSON value in record file `path`, the facts of its check so far, and the Outcome
    that stops the check when it cannot be read (USAGE) or is not JSON (rejected). Never
    raises."""
    facts: dict[str, Any] = {"source": "file", "file": str(path)}
    try:
        data = path.read_bytes()
    except OSError as e:
        why = f"cannot read {path}: {e.strerror or e}"
        return None, facts, _problem(ExitStatus.USAGE, why, **facts)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return None, facts, _rejected("", f"{path} is not UTF-8 text (byte {e.start})", **facts)
    try:
        return parse_json(text.removeprefix("\ufeff")), facts, None
    except ValueError as e:
        return None, facts, _rejected("", f"{path} is not JSON: {e}", **facts)


def verify_record(
    record: Any, trusted_key: str | None, facts: dict[str, Any] | None = None
) -> Outcome:
    """Verify a parsed record (any JSON value) and its signature. Never raises."""
    facts = dict(facts or {})
    facts.setdefault("source", "record")
    verdict = replay_record(record)
    if not verdict.ok:
        return _rejected(verdict.where, verdict.why, **facts)
    assert isinstance(record, dict)
    facts.update(_summary(record))
    authentic = _authenticity(record, trusted_key, facts)
    if isinstance(authentic, Outcome):
        return authentic
    key_text, logged = authentic
    return Outcome(
        ExitStatus.SUCCESS,
        f"OK: match {record['match_id']}, {_hands(record)}{logged}, "
        f"{_result(record['result'])}, {key_text}",
        facts,
    )


def verify_signed(record: Any, trusted_key: str | None, signed: bool = False) -> Outcome:
    """Check a parsed record's signature and, when it carries one, its last event's place in
    the checkpoint of the server's transparency log; not its play (`verify_record` replays
    it by the rules as well). `signed`: its signature by `trusted_key` was checked on its
    text (bergen.api.signing.read_signed_text). Never raises."""
    facts: dict[str, Any] = {"source": "record"}
    try:
        if not isinstance(record, dict):
            raise TypeError("the record is not an object")
        facts.update(_summary(record))
        len(record["hands"])
        authentic = _authenticity(record, trusted_key, facts, signed)
    except (KeyError, TypeError) as e:
        return _rejected("", f"the record is not one: {e}", **facts)
    if isinstance(authentic, Outcome):
        return authentic
    key_text, logged = authentic
    return Outcome(
        ExitStatus.SUCCESS,
        f"signed: match {record['match_id']}, {key_text}{logged}",
        facts,
    )


def _authenticity(
    record: dict[str, Any], trusted_key: str | None, facts: dict[str, Any], signed: bool = False
) -> Outcome | tuple[str, str]:
    """A record's signature (unless `signed`: checked on its text by `trusted_key`), then its
    `transparency`: a rejection, or the words on each for the OK line."""
    if signed and trusted_key is not None:
        facts["key_checked"] = True
        facts["public_key"] = trusted_key.lower()
        key_text = f"signed by {trusted_key.lower()}"
    else:
        refused, key_text = _check_signature(record, trusted_key, facts)
        if refused is not None:
            return refused
    # A record whose signature was checked on its text carries a checkpoint that signature
    # covers: the checkpoint's own signature, by the same key, is not checked again.
    vouched = signed and trusted_key is not None
    logged = _check_transparency(record, facts.get("public_key") or "", facts, vouched)
    if isinstance(logged, Outcome):
        return logged
    return key_text, logged


def _check_signature(
    record: dict[str, Any], trusted_key: str | None, facts: dict[str, Any]
) -> tuple[Outcome | None, str]:
    """(a rejection or None, the words on the signature for the OK line)."""
    facts["key_checked"] = trusted_key is not None
    if "signature" not in record:
        facts["public_key"] = None
        if trusted_key is not None:
            return _rejected("signature", "the record is not signed", **facts), ""
        return None, "not signed"
    try:
        key = verify_signature(record, trusted_key)
    except SignatureError as e:
        return _rejected("signature", str(e), **facts), ""
    facts["public_key"] = key
    if trusted_key is not None:
        return None, f"signed by {key}"
    return None, f"signed by {key}{_UNCHECKED}"


def _check_transparency(
    record: dict[str, Any], key: str, facts: dict[str, Any], vouched: bool = False
) -> Outcome | str:
    """A record's `transparency` (when it has one, and is signed): its checkpoint signed by
    the record's key (`vouched`: the record's signature by that key was checked, and covers
    it), and the record's last event in the checkpoint's tree. A rejection, or the words for
    the OK line ("" without one)."""
    if "transparency" not in record or not key:
        return ""
    log = record["log"]
    try:
        head = bytes.fromhex(log["head"])
        checkpoint = verify_transparency(
            record["transparency"], key, record["match_id"], log["events"], head, vouched
        )
    except (NoteError, ValueError) as e:
        return _rejected("transparency", str(e), **facts)
    facts["checkpoint_size"] = checkpoint.size
    facts["checkpoint"] = record["transparency"]["checkpoint"]
    return f", logged in a checkpoint of {checkpoint.size} events"


def _summary(record: dict[str, Any]) -> dict[str, Any]:
    return {
        "match_id": record["match_id"],
        "hands": len(record["hands"]),
        "result": record["result"],
    }


def _hands(record: dict[str, Any]) -> str:
    n = len(record["hands"])
    return f"{n} hand{'' if n == 1 else 's'}"


def _result(result: dict[str, Any]) -> str:
    scores = "-".join(str(s) for s in result["scores"])
    won = (
        f"side {result['winner_side'] + 1} won {scores}"
        if result["winner_side"] is not None
        else f"{result['reason']} at {scores}"
    )
    if result["reason"] == "forfeit":
        return f"side {result['forfeited_side'] + 1} forfeited ({result['cause']}), {won}"
    return won


# ----- a tournament's audit pack ----------------------------------------------------------

_TABLE_PLACE = re.compile(r"^rounds\[(\d+)\](?:\.tables\[(\d+)\])?")


def _read_json(path: Path, name: str) -> Any:
    """A pack file's JSON. Raises _Stop."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise _Stop(_problem(ExitStatus.USAGE, f"cannot read {path}: {e.strerror or e}")) from None
    try:
        return parse_json(data.decode("utf-8").removeprefix("\ufeff"))
    except UnicodeDecodeError as e:
        raise _Stop(_rejected(name, f"not UTF-8 text (byte {e.start})")) from None
    except ValueError as e:
        raise _Stop(_rejected(name, f"not JSON: {e}")) from None


RECORDS_MANIFEST_FORMAT = "bergen-export/1"
"""The manifest of a folder of records, as `bergen export` and `bergen archive` write it."""


def _records_folder(folder: Path) -> bool:
    """Whether `folder`'s manifest is a folder of records' (not an audit pack's)."""
    try:
        manifest = parse_json((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and manifest.get("format") == RECORDS_MANIFEST_FORMAT


def verify_records(folder: Path, trusted_key: str | None) -> Outcome:
    """Verify a folder of records (`bergen export`'s, `bergen archive`'s): every record its
    manifest lists, the file's SHA-256 the manifest's, the record the match the manifest
    names, replayed by the rules, its checkpoint checked, and signed by the manifest's key
    (which must be `trusted_key` when given). Never raises."""
    facts: dict[str, Any] = {"source": "folder", "dir": str(folder)}
    try:
        return _verify_records(folder, trusted_key, facts)
    except _Stop as stop:
        return dataclasses.replace(stop.outcome, facts={**facts, **stop.outcome.facts})


def _verify_records(folder: Path, trusted_key: str | None, facts: dict[str, Any]) -> Outcome:
    manifest = _read_json(folder / MANIFEST_FILE, MANIFEST_FILE)
    listed = manifest.get("matches") if isinstance(manifest, dict) else None
    key = manifest.get("public_key") if isinstance(manifest, dict) else None
    if not isinstance(listed, list) or not isinstance(key, str):
        raise _Stop(_rejected(MANIFEST_FILE, "not a folder of records' manifest"))
    key = key.lower()
    if trusted_key is not None and key != trusted_key.lower():
        raise _Stop(_rejected(MANIFEST_FILE, f"its records are signed by {key}, not the key given"))
    facts["public_key"] = key
    facts["key_checked"] = trusted_key is not None
    logged = 0
    for entry in listed:
        if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
            raise _Stop(_rejected(MANIFEST_FILE, "a match listed without its file"))
        name = str(entry["file"])
        path = folder / name
        if path.parent != folder:
            raise _Stop(_rejected(MANIFEST_FILE, f"{name!r} is not a file of the folder"))
        try:
            data = path.read_bytes()
        except OSError as e:
            raise _Stop(_rejected(name, f"missing or unreadable: {e.strerror or e}")) from None
        if sha256_hex(data) != entry.get("sha256"):
            raise _Stop(_rejected(name, "its SHA-256 is not the one the manifest lists"))
        record, _, failed = read_record(path)
        if failed is not None:
            raise _Stop(failed)
        outcome = verify_record(record, key, {"file": str(path)})
        if not outcome.ok:
            where = outcome.facts.get("where") or ""
            why = outcome.facts.get("why") or outcome.line
            raise _Stop(_rejected(f"{name}, {where}" if where else name, why, file=str(path)))
        if record.get("match_id") != entry.get("match_id"):
            raise _Stop(_rejected(name, "it is the record of another match than listed"))
        logged += "checkpoint_size" in outcome.facts
    facts["records"] = len(listed)
    facts["logged"] = logged
    key_text = f"signed by {key}" + ("" if trusted_key is not None else _UNCHECKED)
    return Outcome(
        ExitStatus.SUCCESS,
        f"OK: {len(listed)} record(s) in {folder}, each replayed by the rules, {logged} logged"
        f" in a checkpoint, {key_text}",
        facts,
    )


def verify_pack(folder: Path, trusted_key: str | None) -> Outcome:
    """Verify the audit pack in `folder` (TOURNAMENT.md section 6). Never raises."""
    facts: dict[str, Any] = {"source": "pack", "dir": str(folder)}
    try:
        return _verify_pack(folder, trusted_key, facts)
    except _Stop as stop:
        return dataclasses.replace(stop.outcome, facts={**facts, **stop.outcome.facts})


def _verify_pack(folder: Path, trusted_key: str | None, facts: dict[str, Any]) -> Outcome:
    key, listed = _check_manifest(folder, trusted_key, facts)
    files = _check_files(folder, listed)
    record = _read_json(folder / TOURNAMENT_FILE, TOURNAMENT_FILE)
    if not isinstance(record, dict):
        raise _Stop(_rejected(TOURNAMENT_FILE, "not a tournament record (not an object)"))
    try:
        tournament = check_tournament_record(record)
    except CorruptRecord as e:
        place = e.metadata.get("place", "")
        why = e.message.removeprefix(f"tournament record, {place}: ")
        raise _Stop(_rejected(f"{TOURNAMENT_FILE}, {place}{_round_table(place)}", why)) from None
    except (BergenError, ValueError) as e:  # e.g. a tournament id that is not a UUID
        raise _Stop(_rejected(TOURNAMENT_FILE, f"cannot be checked: {e}")) from None
    _signed_by(record, key, TOURNAMENT_FILE)
    if tournament.tournament_id != facts["tournament_id"]:
        raise _Stop(
            _rejected(
                f"{TOURNAMENT_FILE}, tournament_id",
                f"is {tournament.tournament_id!r}, the manifest's is {facts['tournament_id']!r}",
            )
        )
    if not tournament.ended:
        raise _Stop(
            _rejected(
                f"{TOURNAMENT_FILE}, ended",
                "the tournament has not ended: its seed is not revealed, so its deals cannot "
                "be checked",
            )
        )
    logged = PackLog(key)
    logged.add(record, tournament_stream(tournament.tournament_id), TOURNAMENT_FILE)
    matches = table_matches(tournament)
    wanted = {match_path(m.match_id): m for m in matches}
    for path in sorted(files):
        if path != TOURNAMENT_FILE and path not in wanted:
            raise _Stop(_rejected(path, "no table of the tournament plays this match"))
    for m in matches:
        path = match_path(m.match_id)
        if path not in files:
            raise _Stop(
                _rejected(
                    f"{path} (round {m.round}, table {m.table})",
                    "missing: the manifest does not list this table's match",
                )
            )
        _check_table_match(folder, tournament, m, key, logged)
    facts.update(
        entrants=len(tournament.entrants), rounds=len(tournament.rounds), matches=len(matches)
    )
    facts.update(logged.facts())
    settings = tournament.settings
    fmt = "double round robin" if settings.double_round_robin else settings.format
    fmt = fmt.replace("_", " ")
    table = f"{settings.seats} seats{' in partnerships' if settings.partnerships else ''}"
    first = record["standings"][0] if record["standings"] else None
    leader = (
        f", first entrant {first['entrant']} with {first['match_points']} match points"
        if first
        else ""
    )
    key_text = f"signed by {key}" if trusted_key is not None else f"signed by {key}{_UNCHECKED}"
    interventions = tournament.interventions or ()
    if interventions:
        facts["interventions"] = len(interventions)
    done = (
        "cancelled before its start"
        if tournament.cancelled
        else f"{len(tournament.rounds)} rounds, {len(matches)} matches{leader}"
    )
    settled = (
        f", {len(interventions)} intervention{'s' if len(interventions) > 1 else ''} "
        "(the organiser's or the server's)"
        if interventions and not tournament.cancelled
        else ""
    )
    return Outcome(
        ExitStatus.SUCCESS,
        f"OK: tournament {tournament.tournament_id}, {fmt} at {table}, "
        f"{len(tournament.entrants)} entrants, {done}{settled}{logged.words()}, {key_text}",
        facts,
    )


def _round_table(place: str) -> str:
    """ " (round R, table T)" for a place inside a round of the record (rounds and tables
    are numbered in order, which the check has confirmed up to that place)."""
    m = _TABLE_PLACE.match(place)
    if m is None:
        return ""
    where = f"round {int(m.group(1)) + 1}"
    if m.group(2) is not None:
        where += f", table {int(m.group(2)) + 1}"
    return f" ({where})"


def _signed_by(record: Any, key: str, name: str) -> None:
    """The record must be signed by the pack's key. Raises _Stop."""
    if not isinstance(record, dict) or "signature" not in record:
        raise _Stop(_rejected(f"{name}, signature", "the record is not signed"))
    try:
        verify_signature(record, key)
    except SignatureError as e:
        why = str(e)
        if why == "signed by another key than the one given":
            why = "signed by another key than the manifest's"
        raise _Stop(_rejected(f"{name}, signature", why)) from None


def _check_manifest(
    folder: Path, trusted_key: str | None, facts: dict[str, Any]
) -> tuple[str, dict[str, str]]:
    """The manifest's shape and signature; returns the pack's public key and the files it
    lists (path -> SHA-256). Raises _Stop."""
    path = folder / MANIFEST_FILE
    if not path.is_file():
        raise _Stop(_rejected(MANIFEST_FILE, f"missing: {folder} is not an audit pack"))
    manifest = _read_json(path, MANIFEST_FILE)
    keys = {"format", "tournament_id", "public_key", "files", "signature"}
    if not isinstance(manifest, dict):
        raise _Stop(_rejected(MANIFEST_FILE, "not an object"))
    if set(manifest) != keys:
        missing, unknown = keys - set(manifest), set(manifest) - keys
        why = f"missing field(s) {', '.join(sorted(missing))}" if missing else ""
        why = why or f"unknown field(s) {', '.join(sorted(unknown))}"
        raise _Stop(_rejected(MANIFEST_FILE, why))
    if manifest["format"] != MANIFEST_FORMAT:
        raise _Stop(
            _rejected(
                f"{MANIFEST_FILE}, format", f"is {manifest['format']!r}, not {MANIFEST_FORMAT}"
            )
        )
    key = manifest["public_key"]
    if not isinstance(key, str) or not _HEX64.match(key):
        raise _Stop(_rejected(f"{MANIFEST_FILE}, public_key", "is not 64 hex digits"))
    if not isinstance(manifest["tournament_id"], str):
        raise _Stop(_rejected(f"{MANIFEST_FILE}, tournament_id", "is not text"))
    files = manifest["files"]
    if not isinstance(files, dict):
        raise _Stop(_rejected(f"{MANIFEST_FILE}, files", "is not an object"))
    for name, digest in files.items():
        if not PACK_PATH.match(name):
            raise _Stop(
                _rejected(f"{MANIFEST_FILE}, files", f"{name[:80]!r} is not a file of a pack")
            )
        if not isinstance(digest, str) or not _HEX64.match(digest):
            raise _Stop(
                _rejected(f"{MANIFEST_FILE}, files[{name!r}]", "is not a SHA-256 (64 hex digits)")
            )
    if TOURNAMENT_FILE not in files:
        raise _Stop(_rejected(f"{MANIFEST_FILE}, files", f"does not list {TOURNAMENT_FILE}"))
    facts["key_checked"] = trusted_key is not None
    try:
        signer = verify_signature(manifest, trusted_key)
    except SignatureError as e:
        raise _Stop(_rejected(f"{MANIFEST_FILE}, signature", str(e))) from None
    if signer != key.lower():
        raise _Stop(
            _rejected(f"{MANIFEST_FILE}, public_key", "is not the key that signed the manifest")
        )
    facts.update(public_key=signer, tournament_id=manifest["tournament_id"])
    return signer, files


def _check_files(folder: Path, files: dict[str, str]) -> dict[str, str]:
    """Every file the manifest lists is there with its SHA-256, and no other is. Returns the
    listing. Raises _Stop."""
    present = set()
    for root, dirs, names in os.walk(folder):
        # A link to a folder is not walked into: it is named as what it is, an extra entry.
        names = [*names, *(d for d in dirs if (Path(root) / d).is_symlink())]
        for name in names:
            rel = (Path(root) / name).relative_to(folder).as_posix()
            if rel != MANIFEST_FILE:
                present.add(rel)
    for name in sorted(files):
        if name not in present:
            raise _Stop(_rejected(name, "missing: the manifest lists it"))
        try:
            data = (folder / name).read_bytes()
        except OSError as e:
            raise _Stop(_problem(ExitStatus.USAGE, f"cannot read {folder / name}: {e}")) from None
        if sha256_hex(data) != files[name].lower():
            raise _Stop(_rejected(name, "its SHA-256 is not the one the manifest gives"))
    for name in sorted(present - set(files)):
        raise _Stop(_rejected(name, "not in the manifest: a pack holds no other file"))
    return files


def _check_table_match(
    folder: Path, t: Tournament, m: TableMatch, key: str, logged: PackLog
) -> None:
    """A table's match record: what the tournament fixes of it, the rules, its signature,
    its checkpoint and proof (held against the pack's others in `logged`), and its result
    the table's. Raises _Stop."""
    name = match_path(m.match_id)
    where = f"{name} (round {m.round}, table {m.table})"
    record = _read_json(folder / name, where)

    def wrong(place: str, why: str) -> _Stop:
        return _Stop(_rejected(f"{where}, {place}" if place else where, why))

    if not isinstance(record, dict):
        raise wrong("", "not a match record (not an object)")
    expected_place = {"tournament_id": t.tournament_id, "round": m.round, "table": m.table}
    if record.get("tournament") != expected_place:
        raise wrong(
            "tournament", f"is {json.dumps(record.get('tournament'))[:120]}, not {expected_place}"
        )
    if record.get("match_id") != m.match_id:
        raise wrong(
            "match_id",
            f"is {str(record.get('match_id'))[:60]!r}, the table's match id is {m.match_id}",
        )
    if record.get("server_seed") != m.server_seed:
        raise wrong(
            "server_seed",
            f"is {str(record.get('server_seed'))[:80]!r}, the tournament seed gives "
            f"{m.server_seed}",
        )
    seats = record.get("seats")
    if not isinstance(seats, list) or len(seats) != len(m.seats):
        raise wrong("seats", f"the table seats {len(m.seats)} players")
    abandoned = result_reason(record) == "abandoned"
    for i, (entrant_number, player) in enumerate(m.seats):
        entrant = t.entrants[entrant_number - 1]
        seat = seats[i]
        if not isinstance(seat, dict):
            raise wrong(f"seats[{i}]", "not an object")
        if abandoned and seat == NO_ONE_SEATED:
            continue  # abandoned before its entrant took the seat: no deal was made
        if seat.get("client_seed") != entrant.client_seed:
            raise wrong(
                f"seats[{i}].client_seed",
                f"is {str(seat.get('client_seed'))[:60]!r}, entrant {entrant_number}'s is "
                f"{entrant.client_seed!r}",
            )
        if entrant.players is not None and (
            player >= len(entrant.players) or seat.get("name") != entrant.players[player]
        ):
            want = entrant.players[player] if player < len(entrant.players) else None
            raise wrong(
                f"seats[{i}].name",
                f"is {str(seat.get('name'))[:60]!r}, the table seats entrant "
                f"{entrant_number}'s player {want!r} here",
            )
        registered = entrant.player_ids[player] if player < len(entrant.player_ids) else ""
        if seat.get("player", "") != registered:
            raise wrong(
                f"seats[{i}].player",
                f"is {str(seat.get('player'))[:40]!r}, entrant {entrant_number}'s player here "
                f"is {'registered player ' + registered if registered else 'not registered'}",
            )
    rated = "rated" in record
    if rated != (t.settings.rated and result_reason(record) != "abandoned"):
        raise wrong(
            "rated",
            "a rated tournament's matches are rated (unless abandoned), no other's"
            if rated
            else "the tournament is rated: its match is rated",
        )
    sides = [[0, 2], [1, 3]] if t.settings.partnerships else [[i] for i in range(len(seats))]
    if record.get("sides") != sides:
        raise wrong("sides", f"are {json.dumps(record.get('sides'))[:60]}, the table's are {sides}")
    try:
        rules = table_rules(t.settings, len(seats)).as_dict()
    except BergenError as e:
        raise _Stop(_rejected(f"{TOURNAMENT_FILE}, settings.table.rules", str(e))) from None
    if record.get("rules") != rules:
        path, got, want = _field_difference(record.get("rules"), rules, "rules")
        raise wrong(
            path, f"is {json.dumps(got)[:60]}, the tournament's table has {json.dumps(want)[:60]}"
        )
    verdict = replay_record(record)
    if not verdict.ok:
        raise wrong(verdict.where, verdict.why)
    _signed_by(record, key, where)
    logged.add(record, m.match_id, where)
    table = t.rounds[m.round - 1].tables[m.table - 1]
    result = record["result"]
    assert table.result is not None  # an ended tournament's every table has its result
    recorded = (table.result.reason, list(table.result.scores), table.result.forfeited_side)
    played = (result["reason"], result["scores"], result.get("forfeited_side"))
    if recorded != played:
        place = f"rounds[{m.round - 1}].tables[{m.table - 1}].result"
        raise _Stop(
            _rejected(
                f"{TOURNAMENT_FILE}, {place}{_round_table(place)}",
                f"is {table.result.reason} {_scores(table.result.scores)}"
                f"{_forfeit(table.result.forfeited_side)}, the match record {name} gives "
                f"{result['reason']} {_scores(result['scores'])}"
                f"{_forfeit(result.get('forfeited_side'))}",
            )
        )


def result_reason(record: dict[str, Any]) -> object:
    """The record's `result.reason`, None when it has none."""
    result = record.get("result")
    return result.get("reason") if isinstance(result, dict) else None


def _scores(scores: Sequence[int]) -> str:
    return "-".join(str(s) for s in scores)


def _forfeit(side: int | None) -> str:
    return "" if side is None else f" (side {side + 1} forfeited)"


@dataclass(frozen=True, slots=True)
class _Logged:
    """Where a record of a pack puts its last event in the log, as its proof showed."""

    place: str
    note: str
    checkpoint: Checkpoint
    leaf_index: int
    position: int


class PackLog:
    """The checkpoints and inclusion proofs the records of a pack carry (the tournament's
    and every match's `transparency`), each checked under the pack's key, and held against
    each other: one log has one root for one size, one event for one leaf and one global
    position. (The leaves are in the global order, which is by committing transaction, then
    position: transactions that commit out of the order of their positions make leaves and
    positions disagree, so nothing is concluded from the positions' order.) A record without
    one (a server that keeps no transparency log) is counted, not refused."""

    def __init__(self, key: str) -> None:
        self._key = key
        self.records = 0
        self.logged: list[_Logged] = []
        self._by_size: dict[int, _Logged] = {}
        self._by_leaf: dict[int, _Logged] = {}
        self._by_position: dict[int, _Logged] = {}

    def add(self, record: dict[str, Any], stream_id: str, place: str) -> None:
        """Check `record`'s checkpoint and proof (its last event: stream `stream_id`, the
        seq and head hash its `log` names) and hold it against those added before. Raises
        _Stop: rejected at `place`."""
        self.records += 1
        if "transparency" not in record:
            return
        field, log = record["transparency"], record.get("log")

        def rejected(why: str) -> _Stop:
            return _Stop(_rejected(f"{place}, transparency", why))

        if not isinstance(log, dict) or not isinstance(field, dict):
            raise rejected("a transparency proof needs the record's log")
        try:
            head = bytes.fromhex(log["head"])
            checkpoint = verify_transparency(field, self._key, stream_id, log["events"], head)
        except (NoteError, ValueError, KeyError, TypeError) as e:
            raise rejected(str(e)) from None
        mine = _Logged(
            place, field["checkpoint"], checkpoint, field["leaf_index"], field["position"]
        )
        other = self._by_size.setdefault(checkpoint.size, mine)
        if other.checkpoint.root != checkpoint.root:
            raise rejected(
                f"its checkpoint of {checkpoint.size} events has another root than the one "
                f"{other.place} carries: two histories of one log"
            )
        other = self._by_leaf.setdefault(mine.leaf_index, mine)
        if other is not mine:
            raise rejected(
                f"its last event is leaf {mine.leaf_index} of the log, which {other.place} "
                "gives to its own last event"
            )
        other = self._by_position.setdefault(mine.position, mine)
        if other is not mine:
            raise rejected(
                f"its last event is at global position {mine.position}, which {other.place} "
                "gives to its own last event"
            )
        self.logged.append(mine)

    def notes(self) -> list[tuple[str, str]]:
        """(where, note) of each distinct checkpoint, where first found."""
        seen: dict[str, str] = {}
        for x in self.logged:
            seen.setdefault(x.note, x.place)
        return [(place, note) for note, place in seen.items()]

    def facts(self) -> dict[str, Any]:
        """For --json: how many records carry a checkpoint, and the largest one's size."""
        if not self.logged:
            return {"logged": 0}
        return {
            "logged": len(self.logged),
            "checkpoints": len(self._by_size),
            "checkpoint_size": max(self._by_size),
        }

    def words(self) -> str:
        """What the OK line says of them ("" when no record carries one)."""
        if not self.logged:
            return ""
        n = len(self.logged)
        which = "every record" if n == self.records else f"{n} of {self.records} records"
        return (
            f", {which} logged in the transparency log (checkpoints of up to "
            f"{max(self._by_size)} events)"
        )


# ----- through the server -----------------------------------------------------------------


class _Stop(Exception):
    """Carries an Outcome out of the middle of a check."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.line)
        self.outcome = outcome


def rpc_problem(e: grpc.RpcError, server: str, what: str) -> Outcome:
    """The Outcome of a failed call: its exit status (`connect.exit_status_of`) and a line
    saying what was asked of which server."""
    status = exit_status_of(e)
    code = code_of(e)
    detail = (e.details() if isinstance(e, grpc.Call) else None) or str(code)
    if status == ExitStatus.REFUSED:
        return _problem(status, f"{server} refused {what}: {detail}")
    if status == ExitStatus.UNREACHABLE:
        return _problem(status, f"cannot reach {server}: {detail}")
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return _problem(status, f"{server} does not offer {what}: {detail}")
    return _problem(status, f"{server}: {what}: {detail}")


def verify_match(server: Endpoint | str, match_id: str, trusted_key: str | None) -> Outcome:
    """Verify a finished match through `server`. Never raises."""
    try:
        with open_channel(server) as channel:
            stub = rpc.BergenServiceStub(channel)  # type: ignore[no-untyped-call]
            return check_match(stub, str(server), match_id, trusted_key)
    except ValueError as e:  # grpc refuses a malformed target
        return _problem(ExitStatus.USAGE, f"--server {server}: {e}")


def tampered_seq(error: grpc.RpcError) -> str | None:
    """The seq a DATA_LOSS refusal with the reason LOG_TAMPERED names (the server found a
    stored event not authentic, or not what the rules give), else None."""
    if code_of(error) != grpc.StatusCode.DATA_LOSS:
        return None
    info = error_info(error)
    if info is None or info.reason != "LOG_TAMPERED":
        return None
    return str(info.metadata.get("seq", "?"))


def _call(
    server: str, what: str, method: Any, request: Any, facts: dict[str, Any] | None = None
) -> Any:
    try:
        return method(request, timeout=RPC_TIMEOUT_S)
    except grpc.RpcError as e:
        raise _Stop(_refused(e, server, what, facts or {})) from None


def _refused(e: grpc.RpcError, server: str, what: str, facts: dict[str, Any]) -> Outcome:
    seq = tampered_seq(e)
    if seq is None:
        return rpc_problem(e, server, what)
    detail = e.details() if isinstance(e, grpc.Call) else None
    return _rejected(
        f"seq {seq}",
        f"the server refuses to fold the stored log: {detail or 'log tampered'}",
        **{**facts, "chain": "tampered"},
    )


def check_match(stub: Any, server: str, match_id: str, trusted_key: str | None) -> Outcome:
    """The whole check of one match through `stub` (a bergen.v1 Bergen stub). Never raises
    for what the server answers: every failure is an Outcome."""
    try:
        return _check_match(stub, server, match_id, trusted_key)
    except _Stop as stop:
        return stop.outcome


def _check_match(stub: Any, server: str, match_id: str, trusted_key: str | None) -> Outcome:
    facts: dict[str, Any] = {"source": "server", "server": server, "match_id": match_id}
    try:
        log = stub.GetAuditLog(pb.GetAuditLogRequest(match_id=match_id), timeout=RPC_TIMEOUT_S)
    except grpc.RpcError as e:
        if code_of(e) == grpc.StatusCode.FAILED_PRECONDITION:
            # A live match: its log is not shown, but a server that found it tampered says so
            # to anyone who asks for the match.
            _call(server, "the match", stub.GetMatch, pb.GetMatchRequest(match_id=match_id), facts)
        return _refused(e, server, "the audit log", facts)
    # The log first: a fault in it is named by seq even when the server can no longer build
    # the record from it.
    stored, events = check_log(match_id, log.events, facts)
    head = stored[-1].hash.hex()
    facts.update(events=len(stored), head=head, chain="intact")
    rebuilt = _rebuild(stored, events, head, facts)
    _check_rules(rebuilt, events, facts)
    info = _call(server, "its public key", stub.GetServerInfo, pb.GetServerInfoRequest())
    reply = _call(
        server, "the record", stub.GetRecord, pb.GetRecordRequest(match_id=match_id), facts
    )
    try:
        served = parse_json(reply.record_json)
    except ValueError as e:
        return _rejected("record", f"the server's record is not JSON: {e}", **facts)
    verdict = replay_record(served)
    if not verdict.ok:
        # The log is sound, so the record the server signed was not built from it.
        seq = _first_difference(events, verdict.events)
        where = f"record, {verdict.where}" + (f" (seq {seq})" if seq else "")
        return _rejected(where, verdict.why, **facts)
    facts.update(_summary(served))
    key = trusted_key if trusted_key is not None else (info.public_key.lower() or None)
    bad, key_text = _check_signature(served, key, facts)
    facts["key_checked"] = key is not None
    facts["key_from"] = "--public-key" if trusted_key is not None else "server"
    if bad is not None:
        return bad
    _tie(served, stored, facts)
    _take_rated_order(rebuilt, served)
    _compare(served, rebuilt, events, verdict.events, facts)
    logged = _check_transparency(served, facts.get("public_key") or "", facts)
    if isinstance(logged, Outcome):
        return logged
    return Outcome(
        ExitStatus.SUCCESS,
        f"OK: match {match_id}, {_hands(served)}, {len(stored)} events{logged}, "
        f"{_result(served['result'])}, {key_text}, chain intact",
        facts,
    )


def stored_event(match_id: str, e: pb.AuditEvent) -> StoredEvent:
    """An audit event as the store held it. Raises ValueError for a malformed one."""
    payload = parse_json(e.payload_json)
    if not isinstance(payload, dict):
        raise ValueError("the payload is not an object")
    try:
        metadata = parse_metadata(e.metadata_json)
    except (KeyError, TypeError) as err:
        raise ValueError(f"malformed metadata: {err}") from None
    return StoredEvent(
        stream_id=match_id,
        seq=e.seq,
        position=0,
        type=e.type,
        schema_version=e.schema_version,
        payload=payload,
        metadata=metadata,
        recorded_at=timestamp_in(e.recorded_at),
        prev_hash=bytes.fromhex(e.prev_hash),
        hash=bytes.fromhex(e.hash),
        salt=bytes.fromhex(e.salt),
    )


def check_log(
    match_id: str, audit: Sequence[pb.AuditEvent], facts: dict[str, Any]
) -> tuple[list[StoredEvent], list[Event]]:
    """The log's stored events, chain-checked, and their decoded events. Raises _Stop."""
    if not audit:
        raise _Stop(_rejected("log", "the server has no event of this match", **facts))
    stored: list[StoredEvent] = []
    for e in audit:
        try:
            stored.append(stored_event(match_id, e))
        except ValueError as err:
            raise _Stop(_rejected(f"seq {e.seq}", f"malformed: {err}", **facts)) from None
    report = verify_events(match_id, stored)
    if not report.ok:
        seq, why = chain_fault(report, stored)
        raise _Stop(_rejected(f"seq {seq}", why, chain="broken", **facts))
    events: list[Event] = []
    for s in stored:
        try:
            events.append(codec.decode(s.type, s.schema_version, s.payload))
        except CorruptRecord as err:
            raise _Stop(_rejected(f"seq {s.seq}", f"does not decode: {err}", **facts)) from None
    return stored, events


def _hash_as(event: StoredEvent, seq: int) -> bytes:
    content = content_bytes(
        event.stream_id,
        seq,
        event.type,
        event.schema_version,
        canonical_json(event.payload, "payload"),
        metadata_json(event.metadata),
    )
    return event_hash(event.prev_hash, event.salt, content)


def _written_as(event: StoredEvent, last: int) -> int | None:
    try:
        for seq in range(1, last + 1):
            if seq != event.seq and _hash_as(event, seq) == event.hash:
                return seq
    except ValueError:
        return None
    return None


def chain_fault(report: ChainReport, stored: Sequence[StoredEvent]) -> tuple[int, str]:
    """(the seq to name, why) for a broken chain: the event that was changed, removed,
    inserted or moved, rather than the one where the walk noticed it."""
    assert report.bad_seq is not None
    bad = report.bad_seq
    at = report.events  # index of the event the walk stopped at
    last = max(len(stored), stored[-1].seq) + 1
    if report.fault == ChainFault.MISSING:
        missing = report.events + 1
        return missing, f"missing: the stored events go from seq {missing - 1} to seq {bad}"
    if report.fault == ChainFault.PREV_LINK:
        return bad - 1, (
            f"its hash is not the one seq {bad} was chained to (seq {bad - 1} was changed)"
        )
    if report.fault == ChainFault.CHANGED:
        following = stored[at + 1] if at + 1 < len(stored) else None
        if following is not None and _written_as(following, last) == bad:
            return bad, f"inserted: seq {bad + 1} holds the event first written as seq {bad}"
        return bad, f"its stored hash does not match its content (seq {bad} was changed)"
    if report.fault in (ChainFault.INSERTED, ChainFault.REORDERED):
        moved_from = _written_as(stored[at], last)
        if moved_from is None:  # cannot happen: the walk found it
            return bad, report.detail
        if moved_from < bad:
            return moved_from, (
                f"{bad - moved_from} event(s) inserted here: seq {bad} holds the event first "
                f"written as seq {moved_from}"
            )
        partner = next((s for s in stored if s.seq == moved_from), None)
        if partner is not None and _written_as(partner, last) == bad:
            return bad, (
                f"holds the event written as seq {moved_from}, and seq {moved_from} the one "
                f"written as seq {bad}: the two were swapped"
            )
        return bad, (
            f"holds the event written as seq {moved_from}: the events written as seq {bad} "
            f"to {moved_from - 1} were removed"
        )
    return bad, report.detail.removeprefix(f"seq {bad}: ")


def _rebuild(
    stored: Sequence[StoredEvent], events: Sequence[Event], head: str, facts: dict[str, Any]
) -> dict[str, Any]:
    """The record rebuilt from the log (with its `log` tied to the head). Raises _Stop."""
    state: State | None = None
    for s, e in zip(stored, events, strict=True):
        try:
            state = evolve(state, e)
        except Exception as err:  # evolve never checks: a forged event may break it anywhere
            raise _Stop(
                _rejected(f"seq {s.seq}", f"does not follow the events before it: {err!r}", **facts)
            ) from None
    try:
        # A rated match's `rated.order` is the store's global position of its end, which the
        # log does not hold: 1 stands for it here, and the signed record's is taken once read
        # (`_take_rated_order`), so that everything else is compared.
        return build_record(events, log={"events": len(stored), "head": head}, rated_order=1)
    except MatchNotInProgress:
        raise _Stop(
            _rejected(
                f"seq {stored[-1].seq}", "the log stops here, before its match has ended", **facts
            )
        ) from None
    except BergenError as err:
        raise _Stop(_rejected("log", f"no record can be built from it: {err}", **facts)) from None


def _check_rules(rebuilt: dict[str, Any], events: Sequence[Event], facts: dict[str, Any]) -> None:
    """The log must be exactly what the rules give from its seeds and plays. Raises _Stop."""
    verdict = replay_record(rebuilt)
    seq = _first_difference(events, verdict.events)
    if verdict.ok and seq is None:
        return
    if verdict.where == "commitment":
        # Checked before any event is replayed: the seed revealed at the end is the culprit.
        seq = next(
            (i + 1 for i in range(len(events) - 1, -1, -1) if isinstance(events[i], SeedRevealed)),
            1,
        )
    if seq is None:
        raise _Stop(_rejected(f"log, {verdict.where}", verdict.why, **facts))
    i = seq - 1
    if verdict.where == "commitment":
        why = "the server seed revealed here is not the one committed to at seq 1"
    elif not verdict.ok:
        why = f"{verdict.where}: {verdict.why}"
    elif i >= len(verdict.events):
        why = f"{_said(events[i])}, after the rules have ended the match"
    elif i >= len(events):
        why = f"missing: the rules give {_said(verdict.events[i])}"
    else:
        why = f"the log has {_said(events[i])}, the rules give {_said(verdict.events[i])}"
    raise _Stop(_rejected(f"seq {seq}", why, **facts))


def _tie(served: dict[str, Any], stored: Sequence[StoredEvent], facts: dict[str, Any]) -> None:
    """The signed record's `log` must name the chain's head. Raises _Stop."""
    log = served.get("log")
    n, head = len(stored), stored[-1].hash.hex()
    if log is None:
        raise _Stop(_rejected("log", "the record is not tied to the stored log", **facts))
    signed_n, signed_head = log["events"], log["head"]
    if signed_n < n:
        raise _Stop(
            _rejected(
                f"seq {signed_n + 1}",
                f"after the head the record was signed at (seq {signed_n}): added later",
                **facts,
            )
        )
    if signed_n > n:
        raise _Stop(
            _rejected(
                f"seq {n + 1}",
                f"missing: the record was signed at seq {signed_n}, the log ends at seq {n}",
                **facts,
            )
        )
    if signed_head != head:
        raise _Stop(
            _rejected(
                f"seq {n}",
                f"its hash is not the head the record was signed with (seq {n} was changed)",
                **facts,
            )
        )


def _take_rated_order(rebuilt: dict[str, Any], served: dict[str, Any]) -> None:
    """Give the record rebuilt from the log the signed record's `rated.order` (the global
    position of the match's end, which no stream holds); whether the match is rated, and
    its pool, stay the log's."""
    mine, theirs = rebuilt.get("rated"), served.get("rated")
    if isinstance(mine, dict) and isinstance(theirs, dict) and type(theirs.get("order")) is int:
        mine["order"] = theirs["order"]


def _compare(
    served: dict[str, Any],
    rebuilt: dict[str, Any],
    events: Sequence[Event],
    served_events: Sequence[Event],
    facts: dict[str, Any],
) -> None:
    """The signed record must be the record rebuilt from the log. Raises _Stop."""
    # The signature and the transparency proof are checked on their own: a record rebuilt
    # from the log has neither.
    body = {k: v for k, v in served.items() if k not in ("signature", "transparency")}
    if body == rebuilt:
        return
    seq = _first_difference(events, served_events)
    if seq is not None:
        i = seq - 1
        has = _said(events[i]) if i < len(events) else "nothing"
        gives = _said(served_events[i]) if i < len(served_events) else "nothing"
        raise _Stop(
            _rejected(
                f"seq {seq}",
                f"the signed record differs from the log here: the log has {has}, the "
                f"record gives {gives}",
                **facts,
            )
        )
    path, got, want = _field_difference(body, rebuilt)
    raise _Stop(
        _rejected(
            f"record {path}",
            f"is {json.dumps(got)[:80]} in the signed record, {json.dumps(want)[:80]} in the log",
            **facts,
        )
    )


def _field_difference(got: Any, want: Any, path: str = "") -> tuple[str, Any, Any]:
    if isinstance(got, dict) and isinstance(want, dict):
        for k in sorted(set(got) | set(want)):
            if got.get(k) != want.get(k):
                return _field_difference(got.get(k), want.get(k), f"{path}.{k}" if path else k)
    if isinstance(got, list) and isinstance(want, list) and len(got) == len(want):
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            if g != w:
                return _field_difference(g, w, f"{path}[{i}]")
    return path or "(whole)", got, want


def _comparable(e: Event) -> Event:
    """What a record fixes of an event: not the match's name, nor an abandonment's words;
    not whether a match was rated when it was abandoned (its record then says nothing of
    it), nor whether a seat's player is a program (a record names only the player)."""
    if isinstance(e, MatchCreated):
        return dataclasses.replace(e, name="", rated=False)
    if isinstance(e, MatchEnded):
        holders = tuple((player, name, False) for player, name, _ in e.holders)
        return dataclasses.replace(e, note="", resigned_seat=None, holders=holders)
    if isinstance(e, SeatTaken) and e.bot:
        return dataclasses.replace(e, bot=False)
    return e


def _first_difference(logged: Sequence[Event], given: Sequence[Event]) -> int | None:
    """The seq (1-based) of the first event where `logged` and `given` differ, or None.

    Seats may be taken in any order, so the seats taken before the first deal are compared
    as a set."""

    def seating(events: Sequence[Event]) -> int:
        n = 1 if events and isinstance(events[0], MatchCreated) else 0
        while n < len(events) and isinstance(events[n], SeatTaken):
            n += 1
        return n

    a, b = seating(logged), seating(given)
    if a == b and set(map(_comparable, logged[1:a])) == set(map(_comparable, given[1:b])):
        start = a
        if logged[:1] and given[:1] and _comparable(logged[0]) != _comparable(given[0]):
            return 1
    else:
        start = 0
    for i in range(start, max(len(logged), len(given))):
        if i >= len(logged) or i >= len(given):
            return i + 1
        if _comparable(logged[i]) != _comparable(as_logged_then(logged[i], given[i])):
            return i + 1
    return None


def _said(e: Event) -> str:
    return describe(e, with_hand=True)


# ----- against a witness ------------------------------------------------------------------

_CHECKED = (ExitStatus.SUCCESS, ExitStatus.UNTRUSTED)


def against_witness(outcome: Outcome, vkey: str, where: str, server: Endpoint | str) -> Outcome:
    """A record's or a pack's outcome (one that checks) held against a witness's cosigned
    checkpoint (a file or URL `where`, cosigned by the witness of verifier key `vkey`): the
    witness's note must be signed by the record's key, and the record's checkpoint (each of
    a pack's match records') the same as the witness's, or proved consistent with it by
    `server` when it serves the record's log, or at least not another root for its size.
    Never raises."""
    facts = outcome.facts
    key = facts.get("public_key")
    notes = _checkpoints_of(facts)
    if isinstance(notes, Outcome):
        return notes
    if not notes or not isinstance(key, str):
        why = "the record carries no checkpoint of the log to hold against the witness's"
        return _rejected("transparency", why, **facts)
    try:
        parse_verifier_key(vkey, COSIGNATURE_V1)
    except NoteError as e:
        return _problem(ExitStatus.USAGE, f"--witness-key {vkey}: {e}", **facts)
    try:
        text = read_note(where)
    except (OSError, ValueError) as e:
        why = f"cannot read the witness's checkpoint {where}: {getattr(e, 'strerror', None) or e}"
        return _problem(ExitStatus.USAGE, why, **facts)
    try:
        witnessed = check_witnessed(text, vkey, key)
    except NoteError as e:
        return _rejected("witness checkpoint", str(e), **facts)
    size = witnessed.checkpoint.size
    facts = {**facts, "witnessed_size": size, "witness": witnessed.witness}
    found: list[tuple[str, str]] = []
    with _LogServer(server, key) as server_source:
        for place, note in notes:
            try:
                source = server_source.source(size, note)
                how, words = relate(note, witnessed, source)
            except Inconsistent as e:
                print(e.evidence(), end="", file=sys.stderr)
                why = f"{place}: {e.why}" if len(notes) > 1 else e.why
                return Outcome(
                    ExitStatus.INCONSISTENT, f"INCONSISTENT: {why}", {**facts, "why": why}
                )
            except grpc.RpcError as e:
                if code_of(e) != grpc.StatusCode.OUT_OF_RANGE:
                    return rpc_problem(e, str(server), "a consistency proof")
                # The server has signed no tree as large: nothing to prove with.
                how, words = relate(note, witnessed, None)
                words += f"; {server} has signed no tree of {size} events"
            found.append((how, words))
    order = ("not_proved", "proved", "same")
    how, words = min(found, key=lambda f: order.index(f[0]))  # the weakest says it
    if len(notes) > 1:
        words = f"the {len(notes)} checkpoints of its matches: {how.replace('_', ' ')}, {words}"
    facts["witnessed"] = how
    return dataclasses.replace(outcome, line=f"{outcome.line}; {words}", facts=facts)


def _checkpoints_of(facts: dict[str, Any]) -> list[tuple[str, str]] | Outcome:
    """(where, note) of each checkpoint a checked record or pack carries: a record's own, or
    each distinct one of a pack's records, the tournament's and its matches' (each checked
    again as the pack's check did). A rejection for one that no longer checks."""
    if facts.get("source") != "pack":
        note = facts.get("checkpoint")
        return [("the record", note)] if isinstance(note, str) else []
    folder = Path(facts["dir"])
    logged = PackLog(str(facts.get("public_key") or ""))
    try:
        if (folder / TOURNAMENT_FILE).is_file():
            record = _read_json(folder / TOURNAMENT_FILE, TOURNAMENT_FILE)
            tid = record.get("tournament_id") if isinstance(record, dict) else None
            if isinstance(record, dict) and isinstance(tid, str):
                logged.add(record, tournament_stream(tid), TOURNAMENT_FILE)
        for path in sorted((folder / MATCHES_DIR).glob("*.json")):
            place = f"{MATCHES_DIR}/{path.name}"
            record = _read_json(path, place)
            if isinstance(record, dict):
                logged.add(record, str(record.get("match_id")), place)
    except _Stop as stop:  # changed since it was checked
        return dataclasses.replace(stop.outcome, facts={**facts, **stop.outcome.facts})
    return logged.notes()


class _LogServer:
    """The server to ask for a consistency proof: `server`, when it answers and publishes the
    log's key `key` (another log's proof proves nothing of this one)."""

    def __init__(self, server: Endpoint | str, key: str) -> None:
        self._server = server
        self._key = key
        self._client: Client | None = None
        self._source: ServerSource | None = None
        self._asked = False

    def source(self, witnessed_size: int, note: str) -> ServerSource | None:
        """The server as a source of proofs, when one is needed for `note` and it serves
        the log; asked once."""
        if parse_checkpoint(parse_note(note)[0]).size == witnessed_size:
            return None  # no proof needed
        if not self._asked:
            self._asked = True
            client = self._client = Client(self._server, retry_s=0.0)
            try:
                client.wait_ready(timeout=SERVER_WAIT_S)
                source = ServerSource(client)
                self._source = source if source.public_key() == self._key else None
            except (Unreachable, grpc.RpcError):
                self._source = None
        return self._source

    def __enter__(self) -> _LogServer:
        return self

    def __exit__(self, *_: object) -> None:
        if self._client is not None:
            self._client.close()
