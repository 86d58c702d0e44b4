"""The transparency log on both backends: the tree folded from the global order, signed
checkpoints that verify and agree byte for byte between two servers on one database, proofs
that verify, and a log rolled back under a signed checkpoint refused."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import Backend
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bergen.api.checkpoints import verify_checkpoint
from bergen.api.signing import RecordSigner
from bergen.domain.errors import (
    InvalidArgument,
    LogRolledBack,
    LogTampered,
    NotFound,
    OutOfRange,
)
from bergen.domain.merkle import Frontier, verify_consistency, verify_inclusion
from bergen.server.keys import LogKeys
from bergen.server.store import Append, EventStore, NewEvent, open_store
from bergen.server.tlog import CHECKPOINT_FILE, Signed, TransparencyLog, checkpoint_file, leaf_of

SIGNER = RecordSigner(Ed25519PrivateKey.generate())
KEYS = LogKeys.generate()


def append(store: EventStore, stream: str, n: int, version: int = 0) -> None:
    events = [NewEvent("Noted", 1, {"i": version + i}) for i in range(n)]
    store.append(Append(stream, version, events))


def signed_of(log: TransparencyLog, size: int) -> Signed:
    """The newest checkpoint once it is of `size` events: on PostgreSQL rows join the
    commit-safe order only once older transactions of the cluster end."""
    deadline = time.monotonic() + 30
    while True:
        signed = log.latest()
        if signed.size >= size or time.monotonic() > deadline:
            assert signed.size == size
            return signed
        time.sleep(0.05)


def tlog(store: EventStore, keys_dir: Path) -> TransparencyLog:
    keys_dir.mkdir(exist_ok=True)
    t = TransparencyLog(store, SIGNER, keys_dir / CHECKPOINT_FILE, every_s=0.0)
    t.open()
    return t


@pytest.fixture
def keyed_store(backend: Backend) -> EventStore:
    s = open_store(backend.url, log_keys=KEYS)
    yield s  # type: ignore[misc]
    s.close()


def test_checkpoints_verify_and_two_servers_sign_the_same_note(
    backend: Backend, keyed_store: EventStore, tmp_path: Path
) -> None:
    append(keyed_store, "s-a", 5)
    append(keyed_store, "s-b", 3)
    first = tlog(keyed_store, tmp_path / "one")
    signed = signed_of(first, 8)
    checkpoint = verify_checkpoint(signed.note, first.origin, SIGNER.raw_public_key)
    assert checkpoint.size == 8
    other_store = open_store(backend.url, log_keys=KEYS)
    try:
        second = tlog(other_store, tmp_path / "two")
        assert signed_of(second, 8).note == signed.note  # folded by the first, byte for byte
        append(keyed_store, "s-a", 4, version=5)
        grown = signed_of(second, 12)  # folded by the second this time
        assert signed_of(first, 12).note == grown.note
    finally:
        other_store.close()


def test_proofs_verify_against_the_checkpoints(keyed_store: EventStore, tmp_path: Path) -> None:
    append(keyed_store, "s-a", 6)
    log = tlog(keyed_store, tmp_path)
    old = signed_of(log, 6)
    append(keyed_store, "s-b", 7)
    signed_of(log, 13)
    events = keyed_store.read_all(0, 100)
    inclusion = log.inclusion(events[3].position)
    signed = inclusion.signed
    assert signed.size == 13
    assert inclusion.leaf.index == 3
    assert inclusion.leaf.hash == leaf_of(events[3], 3).hash
    verify_inclusion(3, signed.size, inclusion.leaf.hash, inclusion.proof, signed.checkpoint.root)
    proof, newest = log.consistency(old.size, signed.size)
    assert newest == signed
    verify_consistency(old.size, signed.size, old.checkpoint.root, signed.checkpoint.root, proof)


def test_a_proof_the_newest_checkpoint_covers_reads_no_log(
    keyed_store: EventStore, tmp_path: Path
) -> None:
    append(keyed_store, "s-a", 8)
    log = tlog(keyed_store, tmp_path)
    eight = signed_of(log, 8)
    append(keyed_store, "s-b", 4)
    read = log.events_read
    proof, signed = log.consistency(3, 8)
    assert signed == eight
    first = keyed_store.read_all(0, 1)[0].position
    assert log.inclusion(first).signed == eight
    assert log.events_read == read  # the 4 new events not read for either
    twelve = signed_of(log, 12)
    proof, signed = log.consistency(8, 12)
    assert signed == twelve
    verify_consistency(8, 12, eight.checkpoint.root, twelve.checkpoint.root, proof)


def test_bad_sizes_and_positions_are_refused_with_reasons(
    keyed_store: EventStore, tmp_path: Path
) -> None:
    append(keyed_store, "s-a", 3)
    log = tlog(keyed_store, tmp_path)
    signed_of(log, 3)
    with pytest.raises(InvalidArgument) as bad:
        log.consistency(3, 2)
    assert bad.value.reason == "BAD_TREE_SIZE"
    with pytest.raises(OutOfRange) as ahead:
        log.consistency(1, 4)
    assert ahead.value.reason == "TREE_SIZE_UNSIGNED"
    assert ahead.value.metadata == {"new_size": "4", "signed_size": "3"}
    with pytest.raises(InvalidArgument) as position:
        log.inclusion(0)
    assert position.value.reason == "BAD_POSITION"
    with pytest.raises(NotFound):
        log.inclusion(10**12)


def test_a_log_rolled_back_under_a_signed_checkpoint_is_refused(
    backend: Backend, keyed_store: EventStore, tmp_path: Path
) -> None:
    append(keyed_store, "s-a", 4)
    append(keyed_store, "s-b", 2)
    log = tlog(keyed_store, tmp_path)
    assert signed_of(log, 6)
    # a superuser deletes the last events, the tree's rows with them
    backend.tamper("DELETE FROM events WHERE stream_id = %s AND seq = %s", ("s-b", 2))
    backend.tamper("DELETE FROM tlog_leaves WHERE idx = %s", (5,))
    restarted = tlog(keyed_store, tmp_path)
    with pytest.raises(LogRolledBack) as refused:
        restarted.check()
    assert refused.value.reason == "LOG_ROLLED_BACK"
    assert refused.value.metadata == {"signed_size": "6", "log_size": "5"}


def test_an_event_deleted_but_left_in_the_tree_is_refused_on_restart(
    backend: Backend, keyed_store: EventStore, tmp_path: Path
) -> None:
    append(keyed_store, "s-a", 4)
    log = tlog(keyed_store, tmp_path)
    assert signed_of(log, 4)
    backend.tamper("DELETE FROM events WHERE stream_id = %s AND seq = %s", ("s-a", 4))
    restarted = tlog(keyed_store, tmp_path)
    with pytest.raises(LogRolledBack, match="seq 4"):
        restarted.check()


def test_an_event_written_again_after_a_rollback_stops_the_tree(
    backend: Backend, keyed_store: EventStore, tmp_path: Path
) -> None:
    append(keyed_store, "s-a", 3)
    append(keyed_store, "s-b", 1)
    log = tlog(keyed_store, tmp_path)
    assert signed_of(log, 4)
    told: list[LogRolledBack] = []
    log.on_refusal(told.append)  # as the health service is told
    backend.tamper("DELETE FROM events WHERE stream_id = %s AND seq = %s", ("s-a", 3))
    append(keyed_store, "s-a", 1, version=2)  # seq 3 again: a second end of the same match
    deadline = time.monotonic() + 30
    with pytest.raises(LogRolledBack):
        while time.monotonic() < deadline:
            log.catch_up()
            time.sleep(0.05)
    with pytest.raises(LogRolledBack) as refused:
        log.check()
    assert told == [refused.value]  # once, when found
    later: list[LogRolledBack] = []
    log.on_refusal(later.append)  # after it was found: at once
    assert later == [refused.value]


def test_what_a_fold_wrote_is_kept_in_memory_once_committed(
    keyed_store: EventStore, tmp_path: Path
) -> None:
    append(keyed_store, "s-a", 8)
    log = tlog(keyed_store, tmp_path)
    signed_of(log, 8)
    tree = keyed_store.tlog()
    # 8 leaves, 4 + 2 + 1 nodes above them
    assert len(tree.cache) == 15
    kept, missing = tree.cache.get([(0, 7), (1, 3), (3, 0)])
    assert not missing
    assert kept[(3, 0)] == signed_of(log, 8).checkpoint.root


def test_a_node_edited_in_the_table_is_refused_and_read_again_once_repaired(
    backend: Backend, keyed_store: EventStore, tmp_path: Path
) -> None:
    """What a proof verified is kept; a node read that makes a proof fail is not, and
    everything kept is dropped then."""
    append(keyed_store, "s-a", 8)
    signed_of(tlog(keyed_store, tmp_path), 8)
    fresh = open_store(backend.url, log_keys=KEYS)  # a replica that folded nothing yet
    try:
        log = tlog(fresh, tmp_path)
        tree = fresh.tlog()
        assert len(tree.cache) == 0
        first = fresh.read_all(0, 1)[0].position
        right = tree.nodes([(1, 1)])[(1, 1)]
        backend.tamper("UPDATE tlog_nodes SET hash = %s WHERE level = 1 AND idx = 1", (b"x" * 32,))
        with pytest.raises(LogTampered):
            log.inclusion(first)
        assert len(tree.cache) == 0
        backend.tamper("UPDATE tlog_nodes SET hash = %s WHERE level = 1 AND idx = 1", (right,))
        inclusion = log.inclusion(first)
        assert inclusion.proof[1] == right
        assert tree.cache.get([(1, 1)])[0] == {(1, 1): right}  # proved, so kept
        # the consistency proof from 3 to 8 and the root of 3: read with it, and checked
        proof, signed = log.consistency(3, 8)
        root3 = Frontier.read(tree, 3).root()
        verify_consistency(3, 8, root3, signed.checkpoint.root, proof)
    finally:
        fresh.close()


def test_the_checkpoint_is_kept_beside_the_key_or_in_the_folder_given(tmp_path: Path) -> None:
    """Each database's log has a file of its own; `--checkpoint-dir` moves them all out of a
    read-only key folder (a mounted secret)."""
    key = str(tmp_path / "keys" / "signing-key")
    a = checkpoint_file(key, "postgresql://u@db1.example/bergen")
    assert a.parent == tmp_path / "keys" and a.name.startswith(CHECKPOINT_FILE + "-")
    # The same database through another host or user: the same log, the same file.
    assert checkpoint_file(key, "postgresql://v@db2.example:5433/bergen") == a
    assert checkpoint_file(key, "postgresql://u@db1.example/other") != a
    moved = checkpoint_file(key, "postgresql://u@db1.example/bergen", str(tmp_path / "state"))
    assert moved == tmp_path / "state" / a.name
