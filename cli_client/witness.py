"""`bergen witness`: watch a server's transparency log from outside, and cosign what checks.

The witness polls the server's newest checkpoint (a C2SP signed note, signed with the
server's records key under the log's origin). Each one larger than the last it verified must
be proved to extend it (an RFC 9162 consistency proof the server gives); then the witness
cosigns it (a C2SP `tlog-cosignature` with its own Ed25519 key) and serves the cosigned note
over HTTP (`GET /checkpoint`). A proof that does not verify, a tree smaller than one it
verified, or a second root for a size it verified is a conflict: the witness prints both
checkpoints and stops with exit status 9 (INCONSISTENT), cosigning nothing more.

What it keeps, in its state folder: its key (`witness-key.pem`, made on the first run) and
the last checkpoint it verified, with the log's key and origin it learned (`witness.state`,
on disk before the checkpoint is cosigned; a torn write leaves the state before it), so
that a restart goes on from there. The log's key is given with `--log-key`, or learned from
the server on the first run (trust on first use) and pinned.
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol, TextIO

import grpc
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bergen.api.checkpoints import (
    COSIGNATURE_V1,
    Checkpoint,
    NoteError,
    add_signature,
    cosign,
    log_origin,
    parse_checkpoint,
    parse_note,
    parse_verifier_key,
    raw_public_key,
    verifier_key,
    verify_checkpoint,
    verify_cosignature,
)
from bergen.api.durable import NoValidSlot, SlotFile, write_durably
from bergen.api.exit_status import ExitStatus
from bergen.api.helptext import HelpFormatter
from bergen.api.signing import load_or_create_key, load_public_key
from bergen.domain.merkle import ProofError, verify_consistency
from bergen.v1 import bergen_pb2 as pb

from .client import Client
from .client import passing as client_passing
from .connect import add_server_option, fail_call
from .usage import Failed, examples, report

COMMAND = "witness"
KEY_FILE = "witness-key.pem"
STATE_FILE = "witness.state"
SLOT_TAG = b"bergen-witness-slot/1\n"
OLD_STATE_FILE = "witness.json"
STATE_FORMAT = "bergen-witness/1"
MOVED_FORMAT = "bergen-witness/moved"
DEFAULT_INTERVAL_S = 5.0

log = logging.getLogger("bergen.witness")


class CheckpointSource(Protocol):
    """Where the witness reads a log: its newest checkpoint, and consistency proofs."""

    def checkpoint(self, since: int = 0) -> str:
        """The newest checkpoint note. `since`: the size of the tree verified last, from
        which a consistency proof is asked for next (a source may fetch it along)."""
        ...

    def consistency(self, old: int, new: int) -> list[bytes]:
        """The consistency proof from the tree of `old` leaves to that of `new`."""
        ...


class Inconsistent(Exception):
    """Two checkpoints of one log that cannot both be true: `last` (verified before) and
    `served`. `reason` names the fault: TREE_SHRANK, EQUIVOCATION or PROOF_FAILS."""

    def __init__(
        self,
        why: str,
        reason: str,
        last: str,
        served: str,
        labels: tuple[str, str] = ("the checkpoint verified before", "the checkpoint served now"),
    ) -> None:
        super().__init__(why)
        self.why = why
        self.reason = reason
        self.last = last
        self.served = served
        self.labels = labels

    def evidence(self) -> str:
        """Both checkpoints, as a person (or a log's auditor) reads them."""
        return f"{self.labels[0]}:\n{_indent(self.last)}\n{self.labels[1]}:\n{_indent(self.served)}"


def _indent(note: str) -> str:
    return "".join(f"    {line}\n" for line in note.splitlines())


class StateNotKept(Exception):
    """The witness's state cannot be written: what it verified last is not cosigned."""


@dataclass(frozen=True, slots=True)
class Verified:
    """The last checkpoint a witness verified: the note the log signed, and the same note
    with the witness's cosignature added."""

    note: str
    cosigned: str

    @property
    def checkpoint(self) -> Checkpoint:
        return parse_checkpoint(parse_note(self.note)[0])


@dataclass(frozen=True, slots=True)
class WitnessState:
    """What a witness keeps between runs: the log it follows (its key as hex and its
    origin, None before the first checkpoint), the last checkpoint it verified (None before
    the first), and the witness's own name in its cosignatures."""

    log_key: str
    origin: str | None
    last: Verified | None
    name: str


def _state_of(data: Any) -> WitnessState:
    """The state a decoded `bergen-witness/1` object holds. Raises KeyError, TypeError,
    ValueError."""
    if data["format"] != STATE_FORMAT:
        raise ValueError(f"format {data['format']!r}")
    last = data["last"]
    return WitnessState(
        str(data["log_key"]),
        None if data["origin"] is None else str(data["origin"]),
        None if last is None else Verified(str(last["note"]), str(last["cosigned"])),
        str(data["name"]),
    )


def _bad_state(path: Path, why: object) -> Failed:
    return Failed(f"{path} is not a witness's state ({why})", ExitStatus.USAGE, "BAD_STATE")


class StateFile:
    """A witness's state in its folder, kept through a crash at one sync a checkpoint:
    `witness.state`, a SlotFile (two slots written in turns, each with a sequence number and
    a checksum) of the state as JSON. A state written before it, the single file
    `witness.json` replaced whole at each checkpoint, is read when there is no
    `witness.state`, and moved into one at the first save: `witness.json` is then left
    naming the new file, so that a bergen that knows only it refuses the folder rather than
    start afresh (a witness that forgets what it cosigned could cosign a fork of it)."""

    def __init__(self, folder: Path, sync: Callable[[int], None] | None = None) -> None:
        self.folder = folder
        self._slots = SlotFile(folder / STATE_FILE, SLOT_TAG, sync)
        self._loaded = False
        self._moved = False

    def load(self) -> WitnessState | None:
        """The state kept, None before the first run. Raises Failed (USAGE, BAD_STATE) for a
        file that is not a witness's state or whose two slots are both torn."""
        path = self._slots.path
        self._loaded = True
        try:
            payload = self._slots.read()
        except NoValidSlot as e:
            raise Failed(str(e), ExitStatus.USAGE, "BAD_STATE") from None
        except OSError as e:
            raise Failed(f"cannot read {path}: {e}", ExitStatus.USAGE, "BAD_STATE") from None
        if payload is None:
            return self._load_single()
        try:
            return _state_of(json.loads(payload.decode("utf-8")))
        except (KeyError, TypeError, ValueError) as e:
            raise _bad_state(path, e) from None

    def _load_single(self) -> WitnessState | None:
        """The state of `witness.json`, None when there is none. Raises Failed."""
        path = self.folder / OLD_STATE_FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            raise Failed(f"cannot read {path}: {e}", ExitStatus.USAGE, "BAD_STATE") from None
        if isinstance(data, dict) and data.get("format") == MOVED_FORMAT:
            raise Failed(
                f"{path} says the witness's state was moved to {STATE_FILE}, which is missing",
                ExitStatus.USAGE,
                "BAD_STATE",
            )
        try:
            state = _state_of(data)
        except (KeyError, TypeError, ValueError) as e:
            raise _bad_state(path, e) from None
        self._moved = True
        return state

    def save(self, state: WitnessState) -> None:
        """Keep `state`, on disk before this returns (the state kept loaded first if it was
        not). Raises OSError (EFBIG for a state larger than a slot, EIO for a file whose
        slots are both torn), Failed (what `load` raises)."""
        if not self._loaded:
            self.load()
        last = state.last
        data: dict[str, Any] = {
            "format": STATE_FORMAT,
            "name": state.name,
            "log_key": state.log_key,
            "origin": state.origin,
            "last": None if last is None else {"note": last.note, "cosigned": last.cosigned},
        }
        payload = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        try:
            self._slots.write(payload)
        except NoValidSlot as e:
            raise OSError(errno.EIO, str(e)) from None
        except ValueError as e:
            raise OSError(errno.EFBIG, f"the state is too large: {e}") from None
        if self._moved:
            moved = {"format": MOVED_FORMAT, "moved_to": STATE_FILE}
            write_durably(self.folder / OLD_STATE_FILE, json.dumps(moved) + "\n")
            self._moved = False

    def close(self) -> None:
        self._slots.close()

    def __enter__(self) -> StateFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def load_state(folder: Path) -> WitnessState | None:
    """The state kept in `folder`, None before the first run. Raises Failed (USAGE)."""
    with StateFile(folder) as kept:
        return kept.load()


def save_state(folder: Path, state: WitnessState) -> None:
    """Keep `state` in `folder`, on disk before this returns: a reader, or the next run after
    a crash, finds the old state or the new one. Raises OSError, Failed (a state file there
    that is not a witness's)."""
    with StateFile(folder) as kept:
        kept.save(state)


class Witness:
    """The checks of one witness of one log, and its cosignatures. `save(state)` is called
    with every state to keep, before the cosigned note it holds is served."""

    def __init__(
        self,
        key: Ed25519PrivateKey,
        state: WitnessState,
        save: Callable[[WitnessState], None] = lambda _: None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._key = key
        self.state = state
        self._save = save
        self._clock = clock
        self._log_public = bytes.fromhex(state.log_key)

    @property
    def verifier_key(self) -> str:
        """This witness's verifier key (`name+id+base64(0x04 || key)`), for whoever checks
        its cosignatures."""
        return verifier_key(self.state.name, raw_public_key(self._key), COSIGNATURE_V1)

    @property
    def cosigned(self) -> str | None:
        """The last checkpoint verified, cosigned; None before the first."""
        return None if self.state.last is None else self.state.last.cosigned

    @property
    def verified_size(self) -> int:
        """The size of the last checkpoint verified; 0 before the first."""
        return 0 if self.state.last is None else self.state.last.checkpoint.size

    def observe(self, note: str, source: CheckpointSource) -> bool:
        """Check the served checkpoint `note` against the last one verified and cosign it when
        it extends it. Returns whether a new checkpoint was cosigned.

        Raises NoteError for a note the log's key did not sign under the log's origin,
        Inconsistent for a conflict with the last one verified, StateNotKept when the new
        state cannot be saved, and what `source` raises."""
        checkpoint = self._verify(note)
        last = self.state.last
        if last is not None:
            seen = last.checkpoint
            if checkpoint.size < seen.size:
                raise Inconsistent(
                    f"the log's tree shrank from {seen.size} leaves to {checkpoint.size}",
                    "TREE_SHRANK",
                    last.note,
                    note,
                )
            if checkpoint.size == seen.size:
                if checkpoint.root != seen.root:
                    raise Inconsistent(
                        f"the log signed two different roots for its tree of {seen.size} leaves",
                        "EQUIVOCATION",
                        last.note,
                        note,
                    )
                return False
            proof = source.consistency(seen.size, checkpoint.size)
            try:
                verify_consistency(seen.size, checkpoint.size, seen.root, checkpoint.root, proof)
            except ProofError as e:
                raise Inconsistent(
                    f"the log's tree of {checkpoint.size} leaves is not proved to extend "
                    f"its tree of {seen.size}: {e}",
                    "PROOF_FAILS",
                    last.note,
                    note,
                ) from None
        line = cosign(checkpoint.text(), self.state.name, self._key, int(self._clock()))
        state = WitnessState(
            self.state.log_key,
            checkpoint.origin,
            Verified(note, add_signature(note, line)),
            self.state.name,
        )
        try:
            self._save(state)
        except OSError as e:
            raise StateNotKept(str(e)) from e
        self.state = state
        return True

    def _verify(self, note: str) -> Checkpoint:
        origin = self.state.origin
        if origin is None:  # the first checkpoint names the log's origin, its key vouches
            text, _ = parse_note(note)
            origin = text.split("\n", 1)[0]
        return verify_checkpoint(note, origin, self._log_public)


# --- serving the cosigned checkpoint --------------------------------------------------------


class CheckpointServer:
    """A small HTTP server in a thread: `GET /checkpoint` answers the witness's newest
    cosigned checkpoint (503 before the first)."""

    PATH = "/checkpoint"

    def __init__(self, host: str, port: int, cosigned: Callable[[], str | None]) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?", 1)[0] != outer.PATH:
                    self._answer(404, "not found: GET /checkpoint\n")
                    return
                note = cosigned()
                if note is None:
                    self._answer(503, "no checkpoint verified yet\n")
                else:
                    self._answer(200, note)

            def _answer(self, status: int, body: str) -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("%s " + format, self.address_string(), *args)

        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        server_class = type(
            "WitnessHTTPServer",
            (ThreadingHTTPServer,),
            {"address_family": family, "daemon_threads": True},
        )
        self._server: ThreadingHTTPServer = server_class((host, port), Handler)
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="witness-http", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


# --- the loop -------------------------------------------------------------------------------


def follow(
    witness: Witness,
    source: CheckpointSource,
    stop: threading.Event,
    interval_s: float = DEFAULT_INTERVAL_S,
    once: bool = False,
    passing: Callable[[Exception], bool] = lambda _: False,
    out: TextIO | None = None,
) -> ExitStatus:
    """Poll `source` every `interval_s` until `stop` is set (or once), each checkpoint through
    `witness.observe`. A passing failure of the source (`passing(error)`) is logged and
    tried again at the next poll (not with `once`). Returns SUCCESS when stopped.

    Raises Failed for a conflict (INCONSISTENT, once both checkpoints are printed on `out`,
    default standard error), a checkpoint the log's key did not sign (INVALID) or a state
    that cannot be written (ERROR), and what the source raises that is not passing."""
    while not stop.is_set():
        try:
            note = source.checkpoint(witness.verified_size)
            if witness.observe(note, source):
                seen = witness.state.last
                assert seen is not None
                log.info("cosigned the checkpoint of %d leaves", seen.checkpoint.size)
        except Inconsistent as e:
            print(e.evidence(), end="", file=out or sys.stderr, flush=True)
            raise Failed(e.why, ExitStatus.INCONSISTENT, e.reason) from None
        except NoteError as e:
            raise Failed(
                f"the server's checkpoint is not the log's: {e}",
                ExitStatus.INVALID,
                "BAD_CHECKPOINT",
            ) from None
        except StateNotKept as e:
            raise Failed(
                f"cannot keep the witness's state: {e}", ExitStatus.ERROR, "STATE_NOT_WRITTEN"
            ) from None
        except Exception as e:
            if once or not passing(e):
                raise
            log.warning("the log cannot be read now, trying again: %s", e)
        if once:
            break
        stop.wait(interval_s)
    return ExitStatus.SUCCESS


# --- records against a witnessed checkpoint -------------------------------------------------

MAX_NOTE_BYTES = 1 << 16
WITNESSED_LABELS = ("the checkpoint the witness cosigned", "the record's checkpoint")


@dataclass(frozen=True, slots=True)
class Witnessed:
    """A checkpoint a witness cosigned: the note, its checkpoint, the witness's name and the
    time it cosigned (Unix seconds)."""

    note: str
    checkpoint: Checkpoint
    witness: str
    timestamp: int


def read_note(where: str) -> str:
    """The note in file `where`, or at `where` when it is an http:// or https:// URL (a
    witness's GET /checkpoint). Raises OSError (urllib's errors among them), ValueError."""
    if where.startswith(("http://", "https://")):
        with urllib.request.urlopen(where, timeout=10) as reply:
            data: bytes = reply.read(MAX_NOTE_BYTES + 1)
    else:
        with open(where, "rb") as f:
            data = f.read(MAX_NOTE_BYTES + 1)
    if len(data) > MAX_NOTE_BYTES:
        raise ValueError("longer than a note may be")
    return data.decode("utf-8")


def check_witnessed(note: str, vkey: str, log_key: str) -> Witnessed:
    """The checkpoint of `note` once it verifies twice: cosigned by the witness of verifier
    key `vkey`, and signed by the log's key `log_key` (hex) under the log's origin. Raises
    NoteError."""
    name, public = parse_verifier_key(vkey, COSIGNATURE_V1)
    timestamp = verify_cosignature(note, name, public)
    try:
        log_public = bytes.fromhex(log_key)
    except ValueError:
        raise NoteError("the log's key is not hex") from None
    checkpoint = verify_checkpoint(note, log_origin(log_key), log_public)
    return Witnessed(note, checkpoint, name, timestamp)


def relate(note: str, witnessed: Witnessed, source: CheckpointSource | None) -> tuple[str, str]:
    """How checkpoint `note` (verified already) stands to the witnessed one, as a word and
    words for a verdict: `same`, `proved` consistent by `source` (the log's server), or,
    with no source, `not_proved` (not in conflict as far as can be told offline).

    Raises Inconsistent (labelled with WITNESSED_LABELS) for another root at one size or a
    proof that does not verify, and what `source` raises."""
    mine = parse_checkpoint(parse_note(note)[0])
    seen = witnessed.checkpoint
    when = datetime.fromtimestamp(witnessed.timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    by = f"witness {witnessed.witness} (cosigned {when})"
    if mine.size == seen.size:
        if mine.root != seen.root:
            raise Inconsistent(
                f"the record's checkpoint and the one {by} cosigned are two different roots "
                f"for the log's tree of {seen.size} events",
                "EQUIVOCATION",
                witnessed.note,
                note,
                WITNESSED_LABELS,
            )
        return "same", f"the checkpoint {by} cosigned"
    if source is None:
        return "not_proved", (
            f"not in conflict with the checkpoint of {seen.size} events {by} cosigned "
            "(not proved: no server of this log to ask for a consistency proof)"
        )
    (old, old_root), (new, new_root) = sorted([(mine.size, mine.root), (seen.size, seen.root)])
    proof = source.consistency(old, new)
    try:
        verify_consistency(old, new, old_root, new_root, proof)
    except ProofError as e:
        raise Inconsistent(
            f"the record's checkpoint of {mine.size} events is not proved consistent with "
            f"the one of {seen.size} {by} cosigned: {e}",
            "PROOF_FAILS",
            witnessed.note,
            note,
            WITNESSED_LABELS,
        ) from None
    return "proved", f"proved consistent with the checkpoint of {seen.size} events {by} cosigned"


# --- the server as a source -----------------------------------------------------------------


class ServerSource:
    """A server's transparency log, read through its gRPC service. Each call is tried once:
    the witness polls again anyway. A checkpoint asked for `since` a size comes with the
    consistency proof from that size (one call a check, not two), kept for the `consistency`
    that asks for it; a server that does not give it is asked with GetConsistencyProof.
    `proofs_asked` counts those calls."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._given: tuple[int, int, list[bytes]] | None = None
        self.proofs_asked = 0

    def checkpoint(self, since: int = 0) -> str:
        request = pb.GetCheckpointRequest(consistency_from=since)
        reply = self._client.call("GetCheckpoint", request, retry=False)
        # A proof from a size above 0 to a larger one is never empty: empty, it was not given.
        proof = [bytes(h) for h in reply.consistency_proof]
        self._given = (since, reply.tree_size, proof) if proof else None
        return str(reply.checkpoint)

    def consistency(self, old: int, new: int) -> list[bytes]:
        given, self._given = self._given, None
        if given is not None and given[:2] == (old, new):
            return given[2]
        self.proofs_asked += 1
        request = pb.GetConsistencyProofRequest(old_size=old, new_size=new)
        reply = self._client.call("GetConsistencyProof", request, retry=False)
        return [bytes(h) for h in reply.proof]

    def public_key(self) -> str:
        """The records' key the server publishes (hex), which signs its checkpoints."""
        reply = self._client.call("GetServerInfo", pb.GetServerInfoRequest())
        return str(reply.public_key).lower()


# --- `bergen witness` -----------------------------------------------------------------------


def listen_address(text: str) -> tuple[str, int]:
    """(host, port) of HOST:PORT, port 0 for any free one. Raises argparse.ArgumentTypeError."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host.removeprefix("[").removesuffix("]"), int(port)


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0, got {text!r}")
    return value


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "witness",
        help="check a server's transparency log from outside, cosigning what checks",
        description=(__doc__ or "").split("\n\n", 1)[1],
        epilog=examples(
            "bergen witness --server log.example:50051 --state ~/witness --listen 0.0.0.0:8081",
            "bergen witness --state ~/witness --log-key 3b6a27bc... --once  # from cron",
        ),
        formatter_class=HelpFormatter,
    )
    add_server_option(p)
    p.add_argument(
        "--state",
        required=True,
        type=Path,
        metavar="DIR",
        help="the witness's folder: its key and the last checkpoint it verified",
    )
    p.add_argument(
        "--listen",
        type=listen_address,
        metavar="HOST:PORT",
        help="serve the newest cosigned checkpoint at http://HOST:PORT/checkpoint (port 0: "
        "any free port, printed)",
    )
    p.add_argument(
        "--log-key",
        metavar="KEY",
        help="the server's records key (64 hex digits, or a file holding it) that signs its "
        "checkpoints (default: the one kept in DIR, else the one the server publishes, kept "
        "from then on)",
    )
    p.add_argument(
        "--name",
        metavar="NAME",
        help="the witness's name in its cosignatures (default: the one kept in DIR, else "
        "HOSTNAME/witness)",
    )
    p.add_argument(
        "--interval",
        type=positive_seconds,
        default=DEFAULT_INTERVAL_S,
        metavar="SECONDS",
        help=f"how often to ask for the newest checkpoint (default {DEFAULT_INTERVAL_S:g})",
    )
    p.add_argument(
        "--once",
        action="store_true",
        help="check the newest checkpoint once, print it cosigned and exit",
    )
    p.set_defaults(func=run)


def _given_key(text: str) -> str:
    """The log's key of --log-key: hex, or a file of it. Raises Failed (USAGE)."""
    if len(text) == 64:
        try:
            return bytes.fromhex(text).hex()
        except ValueError:
            pass
    try:
        return load_public_key(text)
    except (OSError, ValueError) as e:
        raise Failed(
            f"--log-key {text}: not a key nor a file of one ({e})", ExitStatus.USAGE
        ) from None


def _name(given: str | None, kept: str | None) -> str:
    """The witness's name. Raises Failed (USAGE) for one a note cannot hold."""
    name = given or kept or f"{socket.gethostname()}/witness"
    if not name or any(c.isspace() or c == "+" for c in name):
        raise Failed(f"--name {name!r}: no spaces or '+' in a witness's name", ExitStatus.USAGE)
    return name


def _keep(kept: StateFile, state: WitnessState) -> None:
    """kept.save, a failure reported. Raises Failed."""
    try:
        kept.save(state)
    except OSError as e:
        raise Failed(
            f"cannot keep the witness's state in {kept.folder}: {e.strerror or e}",
            ExitStatus.ERROR,
            "STATE_NOT_WRITTEN",
        ) from None


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=os.environ.get("BERGEN_LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    with Client(args.endpoint) as client:
        try:
            return run_with(args, ServerSource(client), stop)
        except Failed as e:
            return report(COMMAND, e)
        except grpc.RpcError as e:
            return fail_call(COMMAND, e)


def run_with(args: argparse.Namespace, source: ServerSource, stop: threading.Event) -> int:
    """`bergen witness` with its options `args`, reading `source` until `stop` is set (or
    once). Raises Failed, and grpc.RpcError from the source."""
    folder: Path = args.state
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        key = load_or_create_key(folder / KEY_FILE)
    except (OSError, ValueError) as e:
        raise Failed(f"cannot keep the witness's key in {folder}: {e}", ExitStatus.USAGE) from None
    # Open for the whole run: each check writes one slot of it and syncs it, nothing more.
    with StateFile(folder) as state_file:
        return _witness(args, source, stop, key, state_file)


def _witness(
    args: argparse.Namespace,
    source: ServerSource,
    stop: threading.Event,
    key: Ed25519PrivateKey,
    state_file: StateFile,
) -> int:
    """run_with, its key and state file open. Raises Failed, grpc.RpcError."""
    folder = state_file.folder
    # With --once, standard output is the cosigned note alone.
    say = sys.stderr if args.once else sys.stdout
    kept = state_file.load()
    given = None if args.log_key is None else _given_key(args.log_key)
    if kept is not None and given is not None and given != kept.log_key:
        raise Failed(
            f"--log-key {given} is not the key this witness follows ({kept.log_key}, kept in "
            f"{folder}): give another --state for another log",
            ExitStatus.USAGE,
            "ANOTHER_LOG",
        )
    if kept is None:
        log_key = given or source.public_key()
        if given is None:
            print(
                f"bergen witness: trusting the server's key {log_key} on first use",
                file=say,
                flush=True,
            )
        kept = WitnessState(log_key, None, None, _name(args.name, None))
        _keep(state_file, kept)
    elif args.name is not None and args.name != kept.name:
        kept = WitnessState(kept.log_key, kept.origin, kept.last, _name(args.name, None))
        _keep(state_file, kept)
    witness = Witness(key, kept, save=state_file.save)
    print(f"bergen witness: verifier key {witness.verifier_key}", file=say, flush=True)
    http = None
    if args.listen is not None:
        host, port = args.listen
        try:
            http = CheckpointServer(host, port, lambda: witness.cosigned)
        except OSError as e:
            raise Failed(
                f"cannot listen on {host}:{port}: {e.strerror or e}", ExitStatus.ERROR
            ) from None
        http.start()
        shown = f"[{host}]" if ":" in host else host
        url = f"http://{shown}:{http.port}{CheckpointServer.PATH}"
        print(f"bergen witness: serving {url}", file=say, flush=True)
    try:
        status = follow(
            witness, source, stop, args.interval, once=args.once, passing=client_passing
        )
    finally:
        if http is not None:
            http.close()
    if args.once and witness.cosigned is not None:
        print(witness.cosigned, end="")
    return status
