"""The witness's checks on a fake log: a tree that grows consistently is cosigned, and the
cosignature verifies; a proof that does not verify, a tree that shrinks and a second root for
one size each stop it with both checkpoints printed and exit status INCONSISTENT; its state
survives a restart and is written whole; its HTTP endpoint serves what it cosigned."""

from __future__ import annotations

import argparse
import io
import json
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, cast

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bergen.api.checkpoints import (
    COSIGNATURE_V1,
    Checkpoint,
    NoteError,
    event_leaf,
    log_origin,
    parse_verifier_key,
    raw_public_key,
    sign_note,
    transparency_field,
    verify_checkpoint,
    verify_cosignature,
)
from bergen.api.exit_status import ExitStatus
from bergen.cli_client import witness as w
from bergen.cli_client.client import Client
from bergen.cli_client.usage import Failed
from bergen.cli_client.verify import Outcome, against_witness
from bergen.domain.merkle import (
    Frontier,
    Node,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    root,
)
from bergen.v1 import bergen_pb2 as pb

NOW = 1_780_000_000


class FakeLog:
    """A log's tree, grown a leaf at a time, and its checkpoints signed by `key`."""

    def __init__(self, key: Ed25519PrivateKey, salt: str = "") -> None:
        self.key = key
        self.origin = log_origin(raw_public_key(key).hex())
        self.salt = salt
        self.frontier = Frontier()
        self.known: dict[Node, bytes] = {}

    def nodes(self, wanted: list[Node]) -> dict[Node, bytes]:
        return {n: self.known[n] for n in wanted}

    def grow(self, n: int) -> FakeLog:
        for _ in range(n):
            data = f"{self.salt}event {self.frontier.size}".encode()
            for level, index, h in self.frontier.append(leaf_hash(data)):
                self.known[(level, index)] = h
        return self

    def note(self, size: int | None = None) -> str:
        size = self.frontier.size if size is None else size
        body = Checkpoint(self.origin, size, root(self, size)).text()
        return sign_note(body, self.origin, self.key)


class FakeSource:
    """Serves one log's checkpoint (`served`, default its newest) and its proofs; `bad_proof`
    serves a proof with one hash changed."""

    def __init__(self, log: FakeLog) -> None:
        self.log = log
        self.served: str | None = None
        self.bad_proof = False
        self.asked: list[tuple[int, int]] = []
        self.since: list[int] = []

    def checkpoint(self, since: int = 0) -> str:
        self.since.append(since)
        return self.served or self.log.note()

    def consistency(self, old: int, new: int) -> list[bytes]:
        self.asked.append((old, new))
        proof = consistency_proof(self.log, old, new)
        if self.bad_proof:
            proof[0] = bytes(32)
        return proof


LOG_KEY = Ed25519PrivateKey.generate()
WITNESS_KEY = Ed25519PrivateKey.generate()


def new_witness(saved: list[w.WitnessState] | None = None) -> w.Witness:
    state = w.WitnessState(raw_public_key(LOG_KEY).hex(), None, None, "example.org/witness")
    return w.Witness(
        WITNESS_KEY,
        state,
        save=(saved.append if saved is not None else lambda _: None),
        clock=lambda: NOW,
    )


def cosigned_size(witness: w.Witness) -> int:
    assert witness.state.last is not None
    return witness.state.last.checkpoint.size


def test_a_tree_growing_consistently_is_cosigned_and_the_cosignature_verifies() -> None:
    log = FakeLog(LOG_KEY).grow(5)
    source = FakeSource(log)
    saved: list[w.WitnessState] = []
    witness = new_witness(saved)
    assert witness.cosigned is None
    assert witness.observe(source.checkpoint(), source)
    for n in (1, 3, 8, 0, 17):
        log.grow(n)
        assert witness.observe(source.checkpoint(), source) == (n > 0)
    assert cosigned_size(witness) == 34
    assert source.asked == [(5, 6), (6, 9), (9, 17), (17, 34)]
    assert [s.last.checkpoint.size for s in saved if s.last] == [5, 6, 9, 17, 34]

    note = witness.cosigned
    assert note is not None and note.startswith(log.note())
    name, public = parse_verifier_key(witness.verifier_key, COSIGNATURE_V1)
    assert (name, public) == ("example.org/witness", raw_public_key(WITNESS_KEY))
    assert verify_cosignature(note, name, public) == NOW
    # The log's own signature still verifies on the cosigned note.
    assert verify_checkpoint(note, log.origin, raw_public_key(LOG_KEY)).size == 34


def test_the_empty_tree_is_witnessed_and_then_extended() -> None:
    log = FakeLog(LOG_KEY)
    source = FakeSource(log)
    witness = new_witness()
    assert witness.observe(source.checkpoint(), source)
    log.grow(3)
    assert witness.observe(source.checkpoint(), source)
    assert cosigned_size(witness) == 3


def test_a_witness_verifier_key_is_not_a_note_signers() -> None:
    witness = new_witness()
    with pytest.raises(NoteError):
        parse_verifier_key(witness.verifier_key)


def stopped(witness: w.Witness, source: FakeSource) -> tuple[Failed, str]:
    out = io.StringIO()
    with pytest.raises(Failed) as caught:
        w.follow(witness, source, threading.Event(), once=True, out=out)
    return caught.value, out.getvalue()


def test_a_proof_that_does_not_verify_stops_the_witness_with_both_checkpoints() -> None:
    log = FakeLog(LOG_KEY).grow(6)
    source = FakeSource(log)
    saved: list[w.WitnessState] = []
    witness = new_witness(saved)
    witness.observe(source.checkpoint(), source)
    before = log.note()
    log.grow(5)
    source.bad_proof = True
    failure, printed = stopped(witness, source)
    assert failure.status == ExitStatus.INCONSISTENT == 9
    assert failure.reason == "PROOF_FAILS"
    assert "11 leaves is not proved to extend its tree of 6" in failure.sentence
    assert all(f"    {line}" in printed for line in before.splitlines())
    assert all(f"    {line}" in printed for line in log.note().splitlines())
    assert printed.index("verified before") < printed.index("served now")
    assert cosigned_size(witness) == 6 and len(saved) == 1  # nothing more cosigned


def test_a_tree_smaller_than_one_verified_stops_the_witness() -> None:
    log = FakeLog(LOG_KEY).grow(9)
    source = FakeSource(log)
    witness = new_witness()
    witness.observe(source.checkpoint(), source)
    source.served = log.note(4)  # a checkpoint the log did sign, once
    failure, printed = stopped(witness, source)
    assert (failure.status, failure.reason) == (ExitStatus.INCONSISTENT, "TREE_SHRANK")
    assert "from 9 leaves to 4" in failure.sentence
    assert log.note(9).splitlines()[2] in printed and log.note(4).splitlines()[2] in printed


def test_a_second_root_for_one_size_stops_the_witness() -> None:
    log = FakeLog(LOG_KEY).grow(7)
    fork = FakeLog(LOG_KEY, salt="forked ").grow(7)
    source = FakeSource(log)
    witness = new_witness()
    witness.observe(source.checkpoint(), source)
    source.served = fork.note()
    failure, printed = stopped(witness, source)
    assert (failure.status, failure.reason) == (ExitStatus.INCONSISTENT, "EQUIVOCATION")
    assert "two different roots for its tree of 7 leaves" in failure.sentence
    assert log.note() in printed.replace("    ", "") and fork.note() in printed.replace("    ", "")


def test_a_fork_that_grew_past_the_verified_tree_fails_its_proof() -> None:
    log = FakeLog(LOG_KEY).grow(7)
    witness = new_witness()
    witness.observe(log.note(), FakeSource(log))
    fork = FakeLog(LOG_KEY, salt="forked ").grow(12)
    failure, _ = stopped(witness, FakeSource(fork))
    assert (failure.status, failure.reason) == (ExitStatus.INCONSISTENT, "PROOF_FAILS")


def test_a_checkpoint_signed_by_another_key_is_not_cosigned() -> None:
    log = FakeLog(LOG_KEY).grow(3)
    witness = new_witness()
    witness.observe(log.note(), FakeSource(log))
    impostor = FakeLog(Ed25519PrivateKey.generate()).grow(5)
    failure, printed = stopped(witness, FakeSource(impostor))
    assert (failure.status, failure.reason) == (ExitStatus.INVALID, "BAD_CHECKPOINT")
    assert printed == "" and cosigned_size(witness) == 3


def test_a_passing_failure_of_the_source_is_tried_again() -> None:
    log = FakeLog(LOG_KEY).grow(2)
    stop = threading.Event()
    failures = [ConnectionError("down")]

    class Flaky(FakeSource):
        def checkpoint(self, since: int = 0) -> str:
            if failures:
                raise failures.pop()
            stop.set()
            return super().checkpoint(since)

    witness = new_witness()
    status = w.follow(
        witness, Flaky(log), stop, 0.01, passing=lambda e: isinstance(e, ConnectionError)
    )
    assert status == ExitStatus.SUCCESS and not failures and cosigned_size(witness) == 2
    failures.append(ConnectionError("down"))
    with pytest.raises(ConnectionError):  # not passing: it stops the witness
        w.follow(new_witness(), Flaky(log), threading.Event(), 0.01)


def test_a_restart_resumes_from_the_state_kept(tmp_path: Path) -> None:
    log = FakeLog(LOG_KEY).grow(10)
    source = FakeSource(log)
    state = w.WitnessState(raw_public_key(LOG_KEY).hex(), None, None, "example.org/witness")
    first = w.Witness(WITNESS_KEY, state, save=lambda s: w.save_state(tmp_path, s))
    first.observe(source.checkpoint(), source)
    kept = w.load_state(tmp_path)
    assert kept == first.state and kept.origin == log.origin
    assert sorted(p.name for p in tmp_path.iterdir()) == [w.STATE_FILE]  # no temporary left

    # A new process: the next checkpoint is proved against the one kept...
    again = w.Witness(WITNESS_KEY, kept, save=lambda s: w.save_state(tmp_path, s))
    log.grow(6)
    assert again.observe(source.checkpoint(), source)
    assert source.asked == [(10, 16)]
    # ...and an equivocation about the size kept is caught after a restart too.
    third = w.Witness(WITNESS_KEY, w.load_state(tmp_path) or kept)
    source.served = FakeLog(LOG_KEY, salt="x").grow(16).note()
    failure, _ = stopped(third, source)
    assert failure.reason == "EQUIVOCATION"


def witnessed_state(size: int) -> w.WitnessState:
    log = FakeLog(LOG_KEY).grow(size)
    witness = new_witness()
    witness.observe(log.note(), FakeSource(log))
    return witness.state


def test_the_state_file_holds_the_newest_state_and_the_one_before(tmp_path: Path) -> None:
    states = [witnessed_state(n) for n in (3, 5, 8)]
    for state in states:
        w.save_state(tmp_path, state)
        assert w.load_state(tmp_path) == state
    path = tmp_path / w.STATE_FILE
    assert path.stat().st_mode & 0o777 == 0o600
    # Each state went to the slot not holding the one before it, which it left as it was.
    data = path.read_bytes()
    slots = (data[: len(data) // 2], data[len(data) // 2 :])

    def holders(state: w.WitnessState) -> list[int]:
        assert state.last is not None
        root = state.last.note.splitlines()[2].encode()
        return [i for i, slot in enumerate(slots) if root in slot]

    assert [holders(state) for state in states] == [[], [1], [0]]


def test_a_torn_write_of_the_state_leaves_the_state_before_it(tmp_path: Path) -> None:
    older, newer = witnessed_state(3), witnessed_state(5)
    w.save_state(tmp_path, older)
    w.save_state(tmp_path, newer)
    path = tmp_path / w.STATE_FILE
    half = path.stat().st_size // 2
    with open(path, "r+b") as f:  # the newer state's slot, cut short by a crash
        f.seek(half + 300)
        f.write(bytes(100))
    assert w.load_state(tmp_path) == older
    with open(path, "r+b") as f:  # and a bit of the older one's slot flipped
        f.seek(40)
        byte = f.read(1)[0]
        f.seek(40)
        f.write(bytes([byte ^ 0x01]))
    with pytest.raises(Failed) as caught:
        w.load_state(tmp_path)
    assert (caught.value.status, caught.value.reason) == (ExitStatus.USAGE, "BAD_STATE")
    assert "neither of its two slots" in caught.value.sentence


def test_a_witness_whose_state_is_torn_refuses_to_start_afresh(tmp_path: Path) -> None:
    log = FakeLog(LOG_KEY).grow(3)
    w.save_state(tmp_path, witnessed_state(3))
    with open(tmp_path / w.STATE_FILE, "r+b") as f:
        f.truncate(10)  # both slots gone: no record of what it cosigned
    with pytest.raises(Failed) as caught:
        w.run_with(options(tmp_path), KeyedSource(log), threading.Event())
    assert caught.value.reason == "BAD_STATE"
    assert (tmp_path / w.STATE_FILE).stat().st_size == 10  # nothing written over it


def old_format(state: w.WitnessState) -> str:
    """`witness.json` as witnesses wrote it before the slot file."""
    last = state.last
    data = {
        "format": "bergen-witness/1",
        "name": state.name,
        "log_key": state.log_key,
        "origin": state.origin,
        "last": None if last is None else {"note": last.note, "cosigned": last.cosigned},
    }
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


def test_the_single_file_state_is_read_and_moved_into_the_slot_file(tmp_path: Path) -> None:
    log = FakeLog(LOG_KEY).grow(6)
    source = FakeSource(log)
    witness = new_witness()
    witness.observe(source.checkpoint(), source)
    old = tmp_path / w.OLD_STATE_FILE
    old.write_text(old_format(witness.state), encoding="utf-8")
    assert w.load_state(tmp_path) == witness.state
    assert not (tmp_path / w.STATE_FILE).exists()  # read only: nothing moved yet

    with w.StateFile(tmp_path) as kept:
        again = w.Witness(WITNESS_KEY, kept.load() or witness.state, save=kept.save)
        log.grow(4)
        assert again.observe(source.checkpoint(), source)
    assert source.asked == [(6, 10)]  # proved against the state the old file kept
    assert w.load_state(tmp_path) == again.state
    # The old file now names the new one: a bergen that reads only it refuses the folder.
    moved = json.loads(old.read_text(encoding="utf-8"))
    assert moved["format"] != "bergen-witness/1" and moved["moved_to"] == w.STATE_FILE
    (tmp_path / w.STATE_FILE).unlink()
    with pytest.raises(Failed) as caught:  # and without the new one, not a fresh start
        w.load_state(tmp_path)
    assert caught.value.reason == "BAD_STATE" and "missing" in caught.value.sentence


def test_the_state_is_on_disk_before_its_cosignature_is_given(tmp_path: Path) -> None:
    log = FakeLog(LOG_KEY).grow(4)
    source = FakeSource(log)
    w.save_state(tmp_path, witnessed_state(4))
    seen: list[tuple[int | None, int | None]] = []  # (size on disk, size served) at each sync

    def sync(fd: int) -> None:
        on_disk = w.load_state(tmp_path)
        served = witness.cosigned
        seen.append(
            (
                None if on_disk is None or on_disk.last is None else on_disk.last.checkpoint.size,
                None if served is None else w.Verified(served, served).checkpoint.size,
            )
        )

    with w.StateFile(tmp_path, sync=sync) as kept:
        witness = w.Witness(WITNESS_KEY, kept.load() or witness_state(), save=kept.save)
        for grown in (3, 5):
            log.grow(grown)
            assert witness.observe(source.checkpoint(), source)
    # At each sync the new state was written and the HTTP endpoint still served the one
    # before; once observe returned, the new one.
    assert seen == [(7, 4), (12, 7)]
    assert witness.cosigned is not None and cosigned_size(witness) == 12


def witness_state() -> w.WitnessState:
    return w.WitnessState(raw_public_key(LOG_KEY).hex(), None, None, "example.org/witness")


def test_a_state_whose_sync_fails_is_not_cosigned(tmp_path: Path) -> None:
    log = FakeLog(LOG_KEY).grow(4)
    source = FakeSource(log)

    def broken(fd: int) -> None:
        raise OSError(5, "Input/output error")

    w.save_state(tmp_path, witnessed_state(4))
    with w.StateFile(tmp_path, sync=broken) as kept:
        witness = w.Witness(WITNESS_KEY, kept.load() or witness_state(), save=kept.save)
        before = witness.cosigned
        log.grow(2)
        failure, _ = stopped(witness, source)
    assert (failure.status, failure.reason) == (ExitStatus.ERROR, "STATE_NOT_WRITTEN")
    assert witness.cosigned == before and cosigned_size(witness) == 4


def test_a_state_that_cannot_be_saved_stops_the_witness_and_cosigns_nothing() -> None:
    log = FakeLog(LOG_KEY).grow(4)

    def full(_: w.WitnessState) -> None:
        raise OSError(28, "No space left on device")

    state = w.WitnessState(raw_public_key(LOG_KEY).hex(), None, None, "example.org/witness")
    witness = w.Witness(WITNESS_KEY, state, save=full)
    failure, _ = stopped(witness, FakeSource(log))
    assert (failure.status, failure.reason) == (ExitStatus.ERROR, "STATE_NOT_WRITTEN")
    assert witness.cosigned is None


def test_a_file_that_is_no_witness_state_is_refused(tmp_path: Path) -> None:
    (tmp_path / w.STATE_FILE).write_text(json.dumps({"format": "something else"}))
    with pytest.raises(Failed) as caught:
        w.load_state(tmp_path)
    assert caught.value.status == ExitStatus.USAGE
    assert w.load_state(tmp_path / "nothing-yet") is None


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_the_http_endpoint_serves_the_newest_cosigned_checkpoint() -> None:
    log = FakeLog(LOG_KEY).grow(3)
    witness = new_witness()
    http = w.CheckpointServer("127.0.0.1", 0, lambda: witness.cosigned)
    http.start()
    try:
        base = f"http://127.0.0.1:{http.port}"
        assert get(base + "/checkpoint")[0] == 503
        witness.observe(log.note(), FakeSource(log))
        status, body = get(base + "/checkpoint")
        assert (status, body) == (200, witness.cosigned)
        assert get(base + "/other")[0] == 404
    finally:
        http.close()


class FakeServer:
    """A server's gRPC calls over one log, each call recorded; `gives_proof`: whether
    GetCheckpoint gives the consistency proof asked for (a server from before it did not),
    `bad_proof`: that proof with one hash changed."""

    def __init__(self, log: FakeLog, gives_proof: bool = True) -> None:
        self.log = log
        self.gives_proof = gives_proof
        self.bad_proof = False
        self.calls: list[str] = []

    def call(self, method: str, request: Any, retry: bool = True) -> Any:
        self.calls.append(method)
        size = self.log.frontier.size
        if method == "GetCheckpoint":
            old = request.consistency_from
            proof = []
            if self.gives_proof and 0 < old < size:
                proof = consistency_proof(self.log, old, size)
                if self.bad_proof:
                    proof[-1] = bytes(32)
            note = self.log.note()
            reply = pb.GetCheckpointResponse(checkpoint=note, tree_size=size)
            reply.consistency_proof.extend(proof)
            return reply
        assert method == "GetConsistencyProof"
        proof = consistency_proof(self.log, request.old_size, request.new_size)
        return pb.GetConsistencyProofResponse(proof=proof, checkpoint=self.log.note())


def checked_once(witness: w.Witness, server: FakeServer) -> list[str]:
    """The calls one check of the witness made."""
    server.calls.clear()
    source = w.ServerSource(cast(Client, server))
    w.follow(witness, source, threading.Event(), once=True)
    return server.calls


def test_a_check_is_one_call_the_proof_coming_with_the_checkpoint() -> None:
    log = FakeLog(LOG_KEY).grow(5)
    server = FakeServer(log)
    witness = new_witness()
    assert checked_once(witness, server) == ["GetCheckpoint"]
    for n in (1, 6, 13):
        log.grow(n)
        assert checked_once(witness, server) == ["GetCheckpoint"]
    assert cosigned_size(witness) == 25


def test_a_server_that_gives_no_proof_with_its_checkpoint_is_asked_for_it() -> None:
    log = FakeLog(LOG_KEY).grow(5)
    server = FakeServer(log, gives_proof=False)
    witness = new_witness()
    checked_once(witness, server)
    log.grow(4)
    assert checked_once(witness, server) == ["GetCheckpoint", "GetConsistencyProof"]
    assert cosigned_size(witness) == 9


def test_a_proof_given_with_the_checkpoint_is_checked_as_any_other() -> None:
    log = FakeLog(LOG_KEY).grow(5)
    server = FakeServer(log)
    witness = new_witness()
    checked_once(witness, server)
    log.grow(4)
    server.bad_proof = True
    with pytest.raises(Failed) as caught:
        checked_once(witness, server)
    assert (caught.value.status, caught.value.reason) == (ExitStatus.INCONSISTENT, "PROOF_FAILS")
    assert server.calls == ["GetCheckpoint"] and cosigned_size(witness) == 5


# --- a record's checkpoint against a witnessed one ------------------------------------------


def witnessed_of(log: FakeLog, size: int) -> w.Witnessed:
    witness = new_witness()
    note = log.note(size)
    witness.observe(note, FakeSource(log))
    assert witness.cosigned is not None
    return w.check_witnessed(witness.cosigned, witness.verifier_key, raw_public_key(LOG_KEY).hex())


def test_a_witnessed_checkpoint_must_be_cosigned_by_that_witness_and_signed_by_the_log() -> None:
    log = FakeLog(LOG_KEY).grow(5)
    witness = new_witness()
    witness.observe(log.note(), FakeSource(log))
    assert witness.cosigned is not None
    got = w.check_witnessed(witness.cosigned, witness.verifier_key, raw_public_key(LOG_KEY).hex())
    assert (got.checkpoint.size, got.witness, got.timestamp) == (5, "example.org/witness", NOW)
    other = w.Witness(Ed25519PrivateKey.generate(), witness.state)
    with pytest.raises(NoteError, match="not cosigned"):
        w.check_witnessed(witness.cosigned, other.verifier_key, raw_public_key(LOG_KEY).hex())
    another_log = raw_public_key(Ed25519PrivateKey.generate()).hex()
    with pytest.raises(NoteError):
        w.check_witnessed(witness.cosigned, witness.verifier_key, another_log)


def test_a_records_checkpoint_is_the_witnessed_one_or_proved_consistent_with_it() -> None:
    log = FakeLog(LOG_KEY).grow(20)
    witnessed = witnessed_of(log, 12)
    source = FakeSource(log)
    assert w.relate(log.note(12), witnessed, None)[0] == "same"
    assert w.relate(log.note(7), witnessed, source)[0] == "proved"  # older than the witness's
    assert w.relate(log.note(20), witnessed, source)[0] == "proved"  # newer
    assert source.asked == [(7, 12), (12, 20)]
    how, words = w.relate(log.note(20), witnessed, None)
    assert how == "not_proved" and "not proved" in words


def test_a_records_checkpoint_in_conflict_with_the_witnessed_one_is_inconsistent() -> None:
    log = FakeLog(LOG_KEY).grow(12)
    fork = FakeLog(LOG_KEY, salt="forked ").grow(15)
    witnessed = witnessed_of(log, 12)
    with pytest.raises(w.Inconsistent) as caught:
        w.relate(fork.note(12), witnessed, None)  # offline too: one size, two roots
    assert caught.value.reason == "EQUIVOCATION"
    assert caught.value.evidence().startswith("the checkpoint the witness cosigned:\n")
    with pytest.raises(w.Inconsistent) as caught:
        w.relate(fork.note(15), witnessed, FakeSource(fork))  # the fork's own server
    assert caught.value.reason == "PROOF_FAILS"


def pack_of(folder: Path, log_key: Ed25519PrivateKey, salt: str, sizes: dict[str, int]) -> FakeLog:
    """A pack's `matches/` folder of records (only what the witness check reads: match id,
    log and transparency) whose last events are leaves of one log, each proved in a
    checkpoint of the size `sizes` gives it."""
    log = FakeLog(log_key)
    made: list[tuple[str, bytes, int]] = []
    for i, match_id in enumerate(sizes):
        head = leaf_hash(f"{salt}{match_id}".encode())
        leaf = event_leaf(match_id, 9, 100 + i, NOW * 10**6, head)
        for level, index, h in log.frontier.append(leaf):
            log.known[(level, index)] = h
        made.append((match_id, head, i))
    log.grow(max(sizes.values()) - log.frontier.size)
    (folder / "matches").mkdir(parents=True)
    for match_id, head, index in made:
        size = sizes[match_id]
        proof = inclusion_proof(log, index, size)
        field = transparency_field(log.note(size), index, size, 100 + index, NOW * 10**6, proof)
        record = {"match_id": match_id, "log": {"events": 9, "head": head.hex()}}
        record["transparency"] = field
        (folder / "matches" / f"{match_id}.json").write_text(json.dumps(record))
    return log


def test_a_packs_match_records_are_each_held_against_the_witnessed_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = raw_public_key(LOG_KEY).hex()
    log = pack_of(tmp_path / "pack", LOG_KEY, "", {"m-1": 6, "m-2": 6})
    witness = new_witness()
    witness.observe(log.note(6), FakeSource(log))
    assert witness.cosigned is not None
    (tmp_path / "w.txt").write_text(witness.cosigned)
    facts = {"source": "pack", "dir": str(tmp_path / "pack"), "public_key": key}
    ok = Outcome(ExitStatus.SUCCESS, "OK: tournament t", facts)
    got = against_witness(ok, witness.verifier_key, str(tmp_path / "w.txt"), "127.0.0.1:9")
    assert got.status == ExitStatus.SUCCESS, got.line
    assert got.facts["witnessed"] == "same" and got.line.startswith("OK: tournament t; ")

    forked = pack_of(tmp_path / "forked", LOG_KEY, "forked ", {"m-1": 6, "m-3": 6})
    facts = {**facts, "dir": str(tmp_path / "forked")}
    bad = Outcome(ExitStatus.SUCCESS, "OK: tournament t", facts)
    got = against_witness(bad, witness.verifier_key, str(tmp_path / "w.txt"), "127.0.0.1:9")
    assert got.status == ExitStatus.INCONSISTENT, got.line
    assert "two different roots" in got.line
    assert forked.note(6).split("\n\n")[0].splitlines()[2] in capsys.readouterr().err


class KeyedSource(FakeSource):
    def public_key(self) -> str:
        return raw_public_key(self.log.key).hex()


def options(state: Path, **given: object) -> argparse.Namespace:
    values: dict[str, object] = {"state": state, "log_key": None, "name": None, "listen": None}
    return argparse.Namespace(**{**values, "interval": 0.01, "once": True, **given})


def test_the_command_learns_the_logs_key_once_and_keeps_to_that_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = FakeLog(LOG_KEY).grow(3)
    state = tmp_path / "witness"
    status = w.run_with(options(state, name="a.example/w"), KeyedSource(log), threading.Event())
    out, err = capsys.readouterr()
    assert status == ExitStatus.SUCCESS
    assert out.startswith(log.note()) and "trusting the server's key" in err
    assert (state / w.KEY_FILE).stat().st_mode & 0o777 == 0o600
    log.grow(2)
    assert w.run_with(options(state), KeyedSource(log), threading.Event()) == ExitStatus.SUCCESS
    out, err = capsys.readouterr()
    assert "trusting" not in err and "a.example/w+" in err  # the name kept too
    assert out.splitlines()[1] == "5"
    other = raw_public_key(Ed25519PrivateKey.generate()).hex()
    with pytest.raises(Failed) as caught:
        w.run_with(options(state, log_key=other), KeyedSource(log), threading.Event())
    assert (caught.value.status, caught.value.reason) == (ExitStatus.USAGE, "ANOTHER_LOG")
