"""The transparency log on both backends: the tree folded from the global order, signed
checkpoints that verify and agree byte for byte between two servers on one database, proofs
that verify, a log rolled back under a signed checkpoint refused, and the copy of the tree a
server keeps (a file and memory) that follows the tables, and is read again from them when it
is cut, behind, or wrong."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
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
from bergen.server.store.tlog import RECORD, TILE, TILE_LEVEL, LocalTree
from bergen.server.tlog import (
    CHECKPOINT_FILE,
    Signed,
    TransparencyLog,
    checkpoint_file,
    leaf_of,
    leaves_file,
)

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


OPENED: list[TransparencyLog] = []
SETTLE_S = 30.0


@pytest.fixture(autouse=True)
def _close_logs() -> Iterator[None]:
    yield
    while OPENED:
        OPENED.pop().close()


def tlog(store: EventStore, keys_dir: Path, local: bool = True) -> TransparencyLog:
    keys_dir.mkdir(exist_ok=True)
    t = TransparencyLog(store, SIGNER, keys_dir / CHECKPOINT_FILE, every_s=0.0, local=local)
    OPENED.append(t)
    t.open()
    return t


def copy_of(log: TransparencyLog) -> LocalTree:
    """The log's local copy, once it has read all the tables hold."""
    local = log.local
    assert local is not None
    assert local.settled(SETTLE_S)
    return local


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
        log = tlog(fresh, tmp_path / "fresh", local=False)  # its proofs read the tables
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


# --- the local copy -----------------------------------------------------------------------------


def every_node(size: int) -> list[tuple[int, int]]:
    """Every complete node of the tree of `size`, the leaves included."""
    return [(level, idx) for level in range(size.bit_length()) for idx in range(size >> level)]


def assert_copy_is_the_tables(local: LocalTree, store: EventStore, size: int) -> None:
    assert local.size == size
    wanted = every_node(size)
    found, missing = local.nodes(wanted)
    assert not missing
    assert found == store.tlog().stored_nodes(wanted)


def test_the_copy_holds_the_tables_tree_and_proofs_are_read_from_it(
    keyed_store: EventStore, tmp_path: Path
) -> None:
    append(keyed_store, "s-a", TILE + 44)  # a whole tile, and part of the next
    log = tlog(keyed_store, tmp_path)
    signed = signed_of(log, TILE + 44)
    local = copy_of(log)
    assert local.path == leaves_file(tmp_path / CHECKPOINT_FILE)
    assert_copy_is_the_tables(local, keyed_store, TILE + 44)
    append(keyed_store, "s-b", 30)  # folded here: the fold writes the copy
    signed = signed_of(log, TILE + 74)
    assert_copy_is_the_tables(copy_of(log), keyed_store, TILE + 74)
    events = keyed_store.read_all(0, 1000)
    for k in (0, 200, TILE, TILE + 73):
        inclusion = log.inclusion(events[k].position)
        verify_inclusion(
            k, signed.size, inclusion.leaf.hash, inclusion.proof, signed.checkpoint.root
        )
    proof, _ = log.consistency(100, signed.size)
    root100 = Frontier.read(keyed_store.tlog(), 100).root()
    verify_consistency(100, signed.size, root100, signed.checkpoint.root, proof)
    assert local.resets == local.repairs == 0


def test_a_copy_cut_short_or_behind_the_tables_is_read_from_them_on_restart(
    backend: Backend, keyed_store: EventStore, tmp_path: Path
) -> None:
    append(keyed_store, "s-a", 2 * TILE + 10)
    log = tlog(keyed_store, tmp_path)
    signed_of(log, 2 * TILE + 10)
    path = copy_of(log).path
    log.close()
    OPENED.remove(log)
    whole = path.read_bytes()
    with open(path, "r+b") as f:
        f.truncate(RECORD + 1000)  # cut inside a tile's record, as a crash may leave it
    append(keyed_store, "s-b", 20)  # and the tables go on without it: it is behind them too
    other = open_store(backend.url, log_keys=KEYS)
    try:
        restarted = tlog(other, tmp_path)
        signed = signed_of(restarted, 2 * TILE + 30)
        local = copy_of(restarted)
        assert local.path == path and local.resets == 0  # what it held was kept
        assert_copy_is_the_tables(local, other, 2 * TILE + 30)
        assert path.read_bytes()[: len(whole) - RECORD] == whole[: len(whole) - RECORD]
        first = other.read_all(0, 1)[0].position
        inclusion = restarted.inclusion(first)
        verify_inclusion(
            0, signed.size, inclusion.leaf.hash, inclusion.proof, signed.checkpoint.root
        )
    finally:
        other.close()


def test_a_copy_that_does_not_match_the_tables_at_start_is_made_again(
    keyed_store: EventStore, tmp_path: Path
) -> None:
    append(keyed_store, "s-a", 2 * TILE)
    log = tlog(keyed_store, tmp_path)
    signed_of(log, 2 * TILE)
    path = copy_of(log).path
    log.close()
    OPENED.remove(log)
    whole = path.read_bytes()
    with open(path, "r+b") as f:  # a leaf of the last whole tile overwritten
        f.seek(RECORD + 5 * 32)
        f.write(b"\xff" * 32)
    restarted = tlog(keyed_store, tmp_path)
    local = copy_of(restarted)
    assert local.resets == 1
    assert_copy_is_the_tables(local, keyed_store, 2 * TILE)
    assert path.read_bytes() == whole


def test_a_wrong_tile_found_by_a_proof_is_answered_from_the_tables_and_read_again(
    keyed_store: EventStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    append(keyed_store, "s-a", 3 * TILE)
    log = tlog(keyed_store, tmp_path)
    signed = signed_of(log, 3 * TILE)
    local = copy_of(log)
    fd = os.open(local.path, os.O_RDWR)
    try:  # leaf 1's hash in tile 1, as a disk might spoil it while the server runs
        os.pwrite(fd, b"\xff" * 32, RECORD + 32)
    finally:
        os.close(fd)
    events = keyed_store.read_all(0, 1000)
    inclusion = log.inclusion(events[TILE].position)  # its sibling is the leaf spoiled
    verify_inclusion(
        TILE, signed.size, inclusion.leaf.hash, inclusion.proof, signed.checkpoint.root
    )
    assert "tile 1 of the local copy" in caplog.text
    assert copy_of(log).repairs == 1 and local.resets == 0
    assert_copy_is_the_tables(local, keyed_store, 3 * TILE)


def test_a_wrong_node_in_memory_has_the_copy_made_again(
    keyed_store: EventStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    append(keyed_store, "s-a", 2 * TILE + 3)
    log = tlog(keyed_store, tmp_path)
    signed = signed_of(log, 2 * TILE + 3)
    local = copy_of(log)
    local._upper[0][:32] = b"\xff" * 32  # node (TILE_LEVEL, 0), spoiled in memory
    events = keyed_store.read_all(0, 1000)
    inclusion = log.inclusion(events[TILE + 1].position)  # its path holds that node
    verify_inclusion(
        TILE + 1, signed.size, inclusion.leaf.hash, inclusion.proof, signed.checkpoint.root
    )
    assert f"node ({TILE_LEVEL}, 0) of the local copy" in caplog.text
    assert copy_of(log).resets == 1
    assert_copy_is_the_tables(local, keyed_store, 2 * TILE + 3)


def test_two_servers_beside_each_other_keep_a_copy_each(
    keyed_store: EventStore, tmp_path: Path
) -> None:
    """A second server given the same folder takes a file of its own."""
    append(keyed_store, "s-a", 5)
    first = tlog(keyed_store, tmp_path)
    signed_of(first, 5)
    second = TransparencyLog(keyed_store, SIGNER, tmp_path / CHECKPOINT_FILE, every_s=0.0)
    OPENED.append(second)
    second.open()
    assert copy_of(first).path != copy_of(second).path
    assert copy_of(second).path.name == copy_of(first).path.name + ".1"
    assert copy_of(second).size == 5
