"""The transparency log: a Merkle tree over the global order, and signed checkpoints of it.

Every event the store's commit-safe global order delivers is a leaf (`event_leaf`: its
stream, seq, position, time and chain hash), in that order: every replica folds the same
tree, and two replicas' checkpoints of one size are the same note byte for byte (the note
holds nothing of the replica; Ed25519 is deterministic). The tree's leaves and complete
subtrees are kept in the database (bergen.server.store.tlog), folded like the listing under
a position row that replicas take turns on; each replica keeps the tree's right edge in
memory to compute roots, and a copy of the tree (in a file beside its checkpoint file,
`leaves_file`, every leaf's hash and the nodes above them up to level 7, a block of 256
leaves at a time; the nodes above in memory) from which it answers proofs without a query.
A proof made from what a replica keeps that does not verify is read again from the tables,
and the copy read again from them.

Checkpoints (C2SP tlog-checkpoint, signed with the records' key under the log's origin) are
signed at most every `every_s` seconds while the tree grows, at once when a batch holds a
match's end (unless one was signed in the last `ENDS_GAP_S`: a busy server ends many
matches a second, and each checkpoint kept costs a synced write), and whenever a proof is
asked for a leaf the newest one does not cover. The
newest one signed is kept in a file beside the keys (written atomically), with its last
leaf. On start, and whenever another replica has folded, the stored tree must extend it:
its root of the checkpoint's size computed from the stored nodes, the consistency of the
stored tree with it, and the checkpoint's last leaf read back from the events. Otherwise
the log was rolled back or edited, and the server answers every call DATA_LOSS
(LOG_ROLLED_BACK), naming the sizes, rather than let a match that ended go on again. A
(stream, seq) is a leaf once only: a rolled-back event written again stops the tree too.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bergen.api.chain import micros
from bergen.api.checkpoints import (
    Checkpoint,
    NoteError,
    event_leaf,
    log_origin,
    parse_checkpoint,
    parse_note,
    transparency_field,
)
from bergen.api.durable import write_durably
from bergen.api.signing import RecordSigner
from bergen.domain.errors import (
    CorruptRecord,
    InvalidArgument,
    LogRolledBack,
    LogTampered,
    NotFound,
    OutOfRange,
    StorageUnavailable,
)
from bergen.domain.merkle import (
    Frontier,
    Plan,
    ProofError,
    consistency_plan,
    consistency_proof,
    inclusion_plan,
    root,
    verify_consistency,
    verify_inclusion,
)

from .projections import FoldLoop
from .store import EventStore, Leaf, SqlTlog, StoredEvent, TlogFold, backend_of
from .store.tlog import LocalTree

log = logging.getLogger("bergen.server.tlog")

CHECKPOINT_FILE = "bergen-checkpoint"
"""Begins the name of the file of the newest checkpoint this server signed of a database's
log, beside its signing key (`checkpoint_file`)."""
CHECKPOINT_EVERY_S = 2.0
ENDS_GAP_S = 0.5
"""A match's end has a checkpoint signed at once unless one was signed this recently (the
next one, at most `every_s` later, or the first proof asked for, covers it)."""
BATCH = 1000
"""Events read and folded per transaction."""
MATCH_END = "MatchEnded"
IN_TREE_WAIT_S = 10.0
"""How long a record waits for its last event to be in the transparency log."""
MAX_POSITION = 2**63 - 1
"""No global position is larger (a 64-bit signed column)."""


def checkpoint_file(signing_key: str, database_url: str, folder: str | None = None) -> Path:
    """Where the newest checkpoint of the log in `database_url` is kept: beside the signing
    key, named after the database (its name on PostgreSQL, whatever hosts serve it; its
    file's absolute path on SQLite), so that one key directory may serve several databases
    (each its own log) and a database's log is checked against its own checkpoint. In
    `folder` instead when given (the signing key's may be read-only, a mounted secret)."""
    if backend_of(database_url) == "sqlite":
        name = "sqlite:" + str(Path(database_url.removeprefix("sqlite:///")).absolute())
    else:
        authority = database_url.split("://", 1)[1].split("?", 1)[0].rpartition("@")[2]
        name = "postgresql:" + (authority.split("/", 1)[1] if "/" in authority else "")
    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    name = f"{CHECKPOINT_FILE}-{digest}"
    return Path(folder) / name if folder else Path(signing_key).with_name(name)


def leaves_file(state_file: Path) -> Path:
    """Where a server keeps its copy of the tree's lower levels: beside its checkpoint file
    (a cache of the tables, rebuilt from them: nothing to back up)."""
    return state_file.with_name(state_file.name + ".leaves")


@dataclass(frozen=True, slots=True)
class Signed:
    """A checkpoint as signed: the note, its body, the leaf it ends with (None: empty)."""

    note: str
    checkpoint: Checkpoint
    last: Leaf | None

    @property
    def size(self) -> int:
        return self.checkpoint.size


@dataclass(frozen=True, slots=True)
class Inclusion:
    """A leaf, the tree size its proof is of, the proof, and the checkpoint of that size."""

    leaf: Leaf
    proof: list[bytes]
    signed: Signed


def load_signed(path: Path) -> Signed | None:
    """The checkpoint kept in `path` (None: no file). Raises ValueError for one malformed."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    try:
        note = data["note"]
        checkpoint = parse_checkpoint(parse_note(note)[0])
        raw = data.get("last")
        last = None
        if raw is not None:
            last = Leaf(
                int(raw["index"]),
                int(raw["position"]),
                str(raw["stream_id"]),
                int(raw["seq"]),
                bytes.fromhex(raw["hash"]),
            )
    except (KeyError, TypeError, ValueError, NoteError) as e:
        raise ValueError(f"{path} does not hold a checkpoint: {e}") from None
    return Signed(note, checkpoint, last)


def save_signed(path: Path, signed: Signed) -> None:
    """Write `signed` to `path`, whole or not at all (replicas sharing a folder included)."""
    last = signed.last
    data = {
        "note": signed.note,
        "last": None
        if last is None
        else {
            "index": last.index,
            "position": last.position,
            "stream_id": last.stream_id,
            "seq": last.seq,
            "hash": last.hash.hex(),
        },
    }
    write_durably(path, json.dumps(data, indent=1) + "\n")


def leaf_of(e: StoredEvent, index: int) -> Leaf:
    """The leaf `index` of stored event `e`."""
    return Leaf(
        index,
        e.position,
        e.stream_id,
        e.seq,
        event_leaf(e.stream_id, e.seq, e.position, micros(e.recorded_at), e.hash),
    )


class TransparencyLog(FoldLoop[StoredEvent]):
    """The tree folded from the global order, its checkpoints and proofs."""

    reader = "transparency log"

    def __init__(
        self,
        store: EventStore,
        signer: RecordSigner,
        state_file: Path,
        every_s: float = CHECKPOINT_EVERY_S,
        batch: int = BATCH,
        local: bool = True,
    ) -> None:
        """`local`: keep a copy of the tree in `leaves_file(state_file)` and in memory, and
        answer proofs from it."""
        super().__init__(store, batch)
        self._tree: SqlTlog = store.tlog()
        self.local: LocalTree | None = None
        if local:
            self.local = self._tree.local = LocalTree(leaves_file(state_file), self._tree)
        self._signer = signer
        self.origin = log_origin(signer.public_key)
        self._file = state_file
        self._every = every_s
        self._frontier = Frontier()
        self._last: Leaf | None = None
        self._signed: Signed | None = None
        self._signed_at = 0.0
        self._ended = False
        """Whether the catch-up under way folded a match's end (a checkpoint is due then)."""
        self.refusal: LogRolledBack | None = None
        """Set once the log is found rolled back: every call is answered with it."""
        self._refusal_lock = threading.Lock()
        self._on_refusal: list[Callable[[LogRolledBack], None]] = []

    # --- start and checks ---------------------------------------------------------------------

    def open(self) -> None:
        """Read the newest checkpoint signed here and the stored tree, and check that the
        tree extends it (else `refusal` is set, and logged at CRITICAL). Raises
        StorageUnavailable, ValueError for a checkpoint file that is not one."""
        with self._lock:
            self._signed = load_signed(self._file)
            if self._signed is not None and self._signed.checkpoint.origin != self.origin:
                raise ValueError(
                    f"{self._file} holds a checkpoint of {self._signed.checkpoint.origin},"
                    f" not of this key's log {self.origin}"
                )
            try:
                with self._tree.folding() as tx:
                    self._reload(tx.size(), tx.position, tx)
            except LogRolledBack:
                return  # logged, and kept in `refusal`
            if self.local is not None:
                self.local.start(self._frontier.size)

    def close(self) -> None:
        """Stop following the tables with the local copy, and close its file."""
        if self.local is not None:
            self.local.close()

    def check(self) -> None:
        """Raises LogRolledBack when the log was found rolled back."""
        if self.refusal is not None:
            raise self.refusal

    def on_refusal(self, listener: Callable[[LogRolledBack], None]) -> None:
        """Call `listener` once the log is found rolled back: at once if it already was (at
        start), else from the thread that finds it (a fold, later). The health service
        follows it, so that a server that serves nothing does not say it serves."""
        with self._refusal_lock:
            refusal = self.refusal
            if refusal is None:
                self._on_refusal.append(listener)
        if refusal is not None:
            listener(refusal)

    def _refuse(self, why: str, signed: int, stored: int) -> LogRolledBack:
        with self._refusal_lock:
            refusal = self.refusal
            listeners: list[Callable[[LogRolledBack], None]] = []
            if refusal is None:
                log.critical(
                    "LOG ROLLED BACK: %s (checkpoint signed of %d leaves, %d in the log);"
                    " serving nothing", why, signed, stored,
                )  # fmt: skip
                refusal = self.refusal = LogRolledBack(
                    f"the log is not an extension of the checkpoint signed of {signed} events:"
                    f" {why}",
                    signed_size=signed,
                    log_size=stored,
                )
                listeners, self._on_refusal = self._on_refusal, []
        for listener in listeners:
            try:
                listener(refusal)
            except Exception:  # one listener's failure must not keep the refusal from the rest
                log.exception("a listener of the log's refusal failed")
        return refusal

    def _reload(self, size: int, position: int, tx: TlogFold) -> None:
        """Take the stored tree of `size` (folded up to `position`) as this process's, once
        it extends the newest checkpoint signed here."""
        signed = self._signed
        try:
            frontier = Frontier.read(tx, size)
            if signed is not None:
                self._extends(signed, tx, size, frontier.root())
        except KeyError:
            raise self._refuse(
                "nodes of the stored tree are missing", _size(signed), size
            ) from None
        self._frontier = frontier
        self._position = position
        self._last = None
        if self.local is not None:
            self.local.follow(size)

    def _extends(self, signed: Signed, tx: TlogFold, size: int, new_root: bytes) -> None:
        old = signed.size
        if size < old:
            raise self._refuse("events it holds are gone", old, size)
        if root(tx, old) != signed.checkpoint.root:
            raise self._refuse("the stored tree is not the one signed", old, size)
        try:
            verify_consistency(
                old, size, signed.checkpoint.root, new_root, consistency_proof(tx, old, size)
            )
        except ProofError as e:
            raise self._refuse(f"the stored tree does not extend it: {e}", old, size) from None
        last = signed.last
        if last is None:
            return
        found = self._store.read_stream(last.stream_id, last.seq, 1)
        if found and found[0].seq != last.seq and self._archived_before(last.stream_id, last.seq):
            return  # removed by `bergen archive` (the tree, unchanged, was checked above)
        if not found or leaf_of(found[0], last.index).hash != last.hash:
            raise self._refuse(
                f"its last event (stream {last.stream_id} seq {last.seq}) is gone or changed",
                old,
                size,
            )

    def _archived_before(self, stream_id: str, seq: int) -> bool:
        """Whether `seq` of `stream_id` is a row `bergen archive` removed: the match is
        listed as archived (which only the owner can write) and the row came before its
        end."""
        found = self._store.records().archived(stream_id)
        return found is not None and seq < found.end_seq

    # --- folding ------------------------------------------------------------------------------

    def catch_up(self, max_batches: int | None = None) -> int:
        """Fold what the global order holds past the tree (up to `max_batches` batches),
        then sign a checkpoint when one is due. Returns the events folded here. Raises
        StorageUnavailable, LogRolledBack."""
        self.check()
        with self._lock:
            self._ended = False
            return super().catch_up(max_batches)

    def _stored_position(self) -> int:
        self.open()
        self.check()
        assert self._position is not None
        return self._position

    def _finish(self) -> int:
        recent = time.monotonic() - self._signed_at < ENDS_GAP_S
        self._sign_if_due(force=self._ended and not recent)
        return 0

    def _fold(self, batch: Sequence[StoredEvent], upto: int) -> int:
        with self._tree.folding() as tx:
            if tx.position != self._position:
                self._reload(tx.size(), tx.position, tx)  # another replica folded
                return 0
            frontier = self._frontier.copy()
            leaves = []
            nodes: list[tuple[int, int, bytes]] = []
            for e in batch:
                leaf = leaf_of(e, frontier.size)
                leaves.append(leaf)
                nodes += frontier.append(leaf.hash)
            try:
                tx.save(leaves, nodes, upto)
            except StorageUnavailable:
                raise
            except Exception as e:  # the driver's integrity error: a seq already a leaf
                if not _duplicate(e):
                    raise
                raise self._refuse(
                    "an event of a stream's seq already in the tree was written again",
                    _size(self._signed),
                    frontier.size,
                ) from e
        self._frontier = frontier
        self._position = upto
        if leaves:
            self._last = leaves[-1]
            if self.local is not None:
                self.local.append(leaves[0].index, [x.hash for x in leaves], nodes)
        self._ended = self._ended or any(e.type == MATCH_END for e in batch)
        return len(batch)

    # --- checkpoints --------------------------------------------------------------------------

    def _sign_if_due(self, force: bool = False) -> None:
        signed = self._signed
        size = self._frontier.size
        if signed is not None and size <= signed.size:
            return
        if not force and time.monotonic() - self._signed_at < self._every:
            return
        self._sign()

    def _sign(self) -> Signed:
        size = self._frontier.size
        last = self._last
        if last is None or last.index != size - 1:
            last = None if size == 0 else self._tree.leaf(size - 1)
        body = Checkpoint(self.origin, size, self._frontier.root())
        signed = Signed(self._signer.sign_note(body.text(), self.origin), body, last)
        current = load_signed(self._file)  # another process may share the directory
        if current is None or current.size < size:
            save_signed(self._file, signed)
        self._signed = signed
        self._signed_at = time.monotonic()
        return signed

    def latest(self) -> Signed:
        """The newest checkpoint, signed now if the tree has grown since. Raises
        LogRolledBack, StorageUnavailable."""
        self.catch_up()
        with self._lock:
            self.check()
            signed = self._signed
            if signed is None or signed.size < self._frontier.size:
                signed = self._sign()
            return signed

    # --- proofs -------------------------------------------------------------------------------

    def consistency(self, old: int, new: int) -> tuple[list[bytes], Signed]:
        """The consistency proof from the tree of `old` leaves to that of `new`, and the
        newest checkpoint signed here (the log is read for a newer one only when it is not of
        `new` leaves or more). Raises InvalidArgument (BAD_TREE_SIZE) for sizes not 0 <= old <=
        new, OutOfRange (TREE_SIZE_UNSIGNED) for `new` past the newest checkpoint,
        LogRolledBack, CorruptRecord (LOG_TAMPERED) for stored nodes that do not prove."""
        if old < 0 or new < 0 or old > new:
            raise InvalidArgument(
                f"no consistency proof from a tree of {old} to one of {new}",
                reason="BAD_TREE_SIZE",
                old_size=old,
                new_size=new,
            )
        signed = self._covering_size(new)
        if new > signed.size:
            raise OutOfRange(
                f"no checkpoint of {new} events yet: the newest is of {signed.size}",
                reason="TREE_SIZE_UNSIGNED",
                new_size=new,
                signed_size=signed.size,
            )
        if new == signed.size and old > 0:
            # The old root is not known here: the proof must lead from the stored tree's
            # root of `old` to the signed root (both read at once).
            return proved_consistency(self._tree, old, new, signed.checkpoint.root), signed
        plan = consistency_plan(old, new)
        try:
            return plan.read(self._tree), signed
        except KeyError:
            raise _tampered() from None

    def inclusion(self, position: int, wait_s: float = 0.0) -> Inclusion:
        """The leaf of the event at global `position`, its inclusion proof in the tree of
        the newest checkpoint signed here (the log read for a newer one, signed now, only
        when it does not cover the leaf yet), and that checkpoint.
        Raises InvalidArgument (BAD_POSITION) for a position below 1, NotFound for one not
        in the tree (after waiting up to `wait_s` for it to be folded: on PostgreSQL an event
        joins the order only once older transactions end), LogRolledBack,
        StorageUnavailable."""
        leaf, signed = self._covering(position, wait_s)
        proof = proved_inclusion(
            self._tree, leaf.index, signed.size, leaf.hash, signed.checkpoint.root
        )
        return Inclusion(leaf, proof, signed)

    def _covering(self, position: int, wait_s: float) -> tuple[Leaf, Signed]:
        """The leaf of the event at `position`, and the newest checkpoint, which covers it.
        Raises as `inclusion`."""
        if position < 1:
            raise InvalidArgument(
                f"no event at global position {position}", reason="BAD_POSITION", position=position
            )
        if position > MAX_POSITION:
            raise NotFound(
                f"no event at global position {position}", reason="NOT_IN_LOG", position=position
            )
        deadline = time.monotonic() + wait_s
        leaf = self._tree.leaf_at(position)
        while leaf is None:
            self.catch_up()
            leaf = self._tree.leaf_at(position)
            if leaf is not None or time.monotonic() >= deadline:
                break
            time.sleep(0.005)
        if leaf is None:
            raise NotFound(
                f"no event at global position {position} in the log yet",
                reason="NOT_IN_LOG",
                position=position,
            )
        signed = self._covering_size(leaf.index + 1)
        if signed.size <= leaf.index:
            with self._lock:
                signed = self._sign()
        return leaf, signed

    def _covering_size(self, size: int) -> Signed:
        """The newest checkpoint signed here when it is of `size` leaves or more (the log
        is not read again for it), else `latest`. Raises as `latest`."""
        self.check()
        signed = self._signed
        if signed is not None and signed.size >= size:
            return signed
        return self.latest()

    def inclusion_at(self, position: int, wait_s: float = 0.0) -> Inclusion:
        """`inclusion`, against the checkpoint of the tree that ends with the event at
        `position` (signed now: one key signs one note for one size, so the answer is the
        same on every replica and every time, and a record that carries it stays the same).
        Its root, computed from the stored nodes, is checked to be one the newest checkpoint
        extends. Raises as `inclusion`."""
        leaf, latest = self._covering(position, wait_s)
        size = leaf.index + 1
        # One read: the root of `size`, the proof that the newest checkpoint extends it, and
        # the leaf's inclusion proof under that root.
        extends = consistency_plan(size, latest.size)
        path = inclusion_plan(leaf.index, size)
        plan = Plan(((0, size), *extends.ranges, *path.ranges))
        cut = 1 + len(extends.ranges)

        def check(hashes: list[bytes]) -> None:
            at = hashes[0]
            verify_consistency(size, latest.size, at, latest.checkpoint.root, hashes[1:cut])
            verify_inclusion(leaf.index, size, leaf.hash, hashes[cut:], at)

        hashes = proved(self._tree, plan, check)
        body = Checkpoint(self.origin, size, hashes[0])
        signed = Signed(self._signer.sign_note(body.text(), self.origin), body, leaf)
        return Inclusion(leaf, hashes[cut:], signed)

    def record_field(
        self, last: StoredEvent, what: str, wait_s: float = IN_TREE_WAIT_S, **names: str
    ) -> dict[str, object]:
        """The `transparency` field of a record (`what`, as "match ID", named by `names` in
        a refusal's metadata) whose stream ends with `last`: the checkpoint of the tree that
        ends with that event (the same every time it is asked: a pack's manifest hashes the
        record), and its inclusion proof. Raises LogRolledBack, LogTampered for a leaf that
        is not the event's, StorageUnavailable (LOG_LAGGING: to be asked again) when the event
        is not in the tree within `wait_s` (on PostgreSQL it joins the global order once the
        cluster's older transactions end): a record is never served without it, so that it
        is the same record every time."""
        try:
            proved = self.inclusion_at(last.position, wait_s)
        except NotFound:
            log.warning(
                "stream %s seq %d is not in the transparency log yet: its record is refused"
                " for now", last.stream_id, last.seq,
            )  # fmt: skip
            raise StorageUnavailable(
                f"{what}: its last event is not in the transparency log yet; ask again",
                reason="LOG_LAGGING",
                **names,
            ) from None
        if proved.leaf.hash != leaf_of(last, proved.leaf.index).hash:
            raise LogTampered(
                f"the tree's leaf of stream {last.stream_id} seq {last.seq} is not its event's",
                seq=last.seq,
                **names,
            )
        return transparency_field(
            proved.signed.note,
            proved.leaf.index,
            proved.signed.size,
            last.position,
            micros(last.recorded_at),
            proved.proof,
        )


def proved(tree: SqlTlog, plan: Plan, check: Callable[[list[bytes]], None]) -> list[bytes]:
    """The hashes `plan` lists, read from `tree` (its local copy, what it keeps in memory,
    then one read of the rest), once `check` accepts them (it raises ProofError otherwise):
    every node read is then kept, proved. When they fail, what `tree` keeps is dropped (some
    of it may be what failed) and the nodes are read again from the tables alone: if those
    prove, the local copy was wrong (it is read again from the tables, and that is logged).
    Raises CorruptRecord (LOG_TAMPERED) for a node missing from the tables or a check they
    fail, StorageUnavailable."""
    wanted = plan.nodes
    known = tree.nodes(wanted)
    try:
        hashes = plan.hashes(known)
        check(hashes)
    except (KeyError, ProofError):
        tree.forget()
        used, known = known, tree.stored_nodes(wanted)
        try:
            hashes = plan.hashes(known)
            check(hashes)
        except (KeyError, ProofError):
            raise _tampered() from None
        log.error("a proof made from the nodes this server keeps did not verify; the tables' did")
        if tree.local is not None:
            tree.local.disproved(used, known)
    tree.remember(known)
    return hashes


def proved_inclusion(tree: SqlTlog, index: int, size: int, leaf: bytes, root: bytes) -> list[bytes]:
    """The inclusion proof of leaf `index` (hash `leaf`) in the tree of `size` whose root is
    `root` (a signed one), checked. Raises as `proved`."""
    return proved(
        tree,
        inclusion_plan(index, size),
        lambda proof: verify_inclusion(index, size, leaf, proof, root),
    )


def proved_consistency(tree: SqlTlog, old: int, new: int, new_root: bytes) -> list[bytes]:
    """The consistency proof from the tree of `old` leaves to that of `new`, whose root is
    `new_root` (a signed one), checked against the root of `old` computed from the stored
    nodes (read with the proof, at once). Raises as `proved`."""
    plan = Plan(((0, old), *consistency_plan(old, new).ranges))
    hashes = proved(tree, plan, lambda h: verify_consistency(old, new, h[0], new_root, h[1:]))
    return hashes[1:]


def _tampered() -> CorruptRecord:
    return LogTampered("the stored tree does not prove what was signed")


def _size(signed: Signed | None) -> int:
    return 0 if signed is None else signed.size


def _duplicate(e: Exception) -> bool:
    name = type(e).__name__
    return name in ("UniqueViolation", "IntegrityError")
