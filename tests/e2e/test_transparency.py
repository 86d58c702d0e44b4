"""The transparency log through real gRPC: checkpoints that verify under the records' key,
inclusion proofs of a match's events, consistency proofs between checkpoints, the same note
from two servers on one database, and refusals with reasons for bad sizes."""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import grpc
import pytest

from bergen.api.checkpoints import Checkpoint, log_origin, verify_checkpoint
from bergen.domain.merkle import verify_consistency, verify_inclusion
from bergen.v1 import bergen_pb2 as pb
from e2e.client import Client, play_to_end, seat_everyone
from e2e.refusals import refusal
from e2e.servers import ServerFarm

DEADLINE_S = 30.0


def checkpoint_of(client: Client) -> tuple[str, Checkpoint]:
    """The server's newest checkpoint, verified under its records' key."""
    key = client.stub.GetServerInfo(pb.GetServerInfoRequest()).public_key
    got = client.stub.GetCheckpoint(pb.GetCheckpointRequest())
    checkpoint = verify_checkpoint(got.checkpoint, log_origin(key), bytes.fromhex(key))
    assert checkpoint.size == got.tree_size
    return got.checkpoint, checkpoint


def until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not check():
        assert time.monotonic() < deadline, f"not within {DEADLINE_S} s: {what}"
        time.sleep(0.05)


def test_checkpoints_and_proofs_verify_through_grpc(farm: ServerFarm, database: str) -> None:
    server = farm.start(database)
    with Client(server.target) as client:
        table = seat_everyone(client, 2)
        _, before = checkpoint_of(client)
        play_to_end([client], random.Random(3), table)
        events = client.stub.GetAuditLog(pb.GetAuditLogRequest(match_id=table.match_id)).events
        last = events[-1]
        # On PostgreSQL an event joins the global order (and the tree) once the cluster's
        # older transactions end: NOT_IN_LOG until then.
        answers: list[pb.GetInclusionProofResponse] = []

        def in_log() -> bool:
            try:
                answers.append(
                    client.stub.GetInclusionProof(
                        pb.GetInclusionProofRequest(position=last.position)
                    )
                )
            except grpc.RpcError as e:
                assert refusal(e).reason == "NOT_IN_LOG"
                return False
            return True

        until(in_log, "the match's last event is in the tree")
        proved = answers[-1]
        key = client.stub.GetServerInfo(pb.GetServerInfoRequest()).public_key
        checkpoint = verify_checkpoint(proved.checkpoint, log_origin(key), bytes.fromhex(key))
        assert checkpoint.size == proved.tree_size > proved.leaf_index
        verify_inclusion(
            proved.leaf_index,
            proved.tree_size,
            proved.leaf_hash,
            list(proved.proof),
            checkpoint.root,
        )
        # A record carries the checkpoint of the tree that ends with its last event: the same
        # record every time (an audit pack's manifest hashes it), its proof verified.
        record = client.record(table.match_id)
        assert record["transparency"]["tree_size"] == proved.leaf_index + 1
        assert record["transparency"]["position"] == last.position
        assert client.record(table.match_id) == record
        consistency = client.stub.GetConsistencyProof(
            pb.GetConsistencyProofRequest(old_size=before.size, new_size=checkpoint.size)
        )
        newest = verify_checkpoint(consistency.checkpoint, log_origin(key), bytes.fromhex(key))
        assert newest.size >= checkpoint.size
        verify_consistency(
            before.size, checkpoint.size, before.root, checkpoint.root, list(consistency.proof)
        )
        # A witness's check in one call: the newest checkpoint with the proof from its last.
        along = client.stub.GetCheckpoint(pb.GetCheckpointRequest(consistency_from=before.size))
        newest = verify_checkpoint(along.checkpoint, log_origin(key), bytes.fromhex(key))
        assert newest.size == along.tree_size >= checkpoint.size
        proof = list(along.consistency_proof)
        assert bool(proof) == (0 < before.size < newest.size)
        verify_consistency(before.size, newest.size, before.root, newest.root, proof)
        # From a tree larger than the log's (a witness shown a rollback): the checkpoint, no
        # proof, no error, so that the witness sees the smaller tree.
        past = client.stub.GetCheckpoint(pb.GetCheckpointRequest(consistency_from=10**12))
        assert past.checkpoint and not past.consistency_proof


@pytest.mark.postgres
def test_two_servers_on_one_database_sign_the_same_note(farm: ServerFarm, pg_database: str) -> None:
    one, two = farm.start(pg_database), farm.start(pg_database)
    with Client(one.target) as a, Client(two.target) as b:
        table = seat_everyone(a, 2)
        play_to_end([a], random.Random(4), table)  # then nothing more is written
        notes: list[tuple[str, str]] = []

        def same_size() -> bool:
            (note_a, at_a), (note_b, at_b) = checkpoint_of(a), checkpoint_of(b)
            notes.append((note_a, note_b))
            return at_a.size == at_b.size

        until(same_size, "both servers' trees reach the same size")
        note_a, note_b = notes[-1]
        assert note_a == note_b  # byte for byte


@pytest.mark.parametrize(
    ("old", "new", "code", "reason"),
    [
        (5, 4, grpc.StatusCode.INVALID_ARGUMENT, "BAD_TREE_SIZE"),
        (1, 10**12, grpc.StatusCode.OUT_OF_RANGE, "TREE_SIZE_UNSIGNED"),
    ],
)
def test_bad_sizes_are_refused_with_reasons(
    farm: ServerFarm, sqlite_url: str, old: int, new: int, code: grpc.StatusCode, reason: str
) -> None:
    server = farm.start(sqlite_url)
    with Client(server.target) as client:
        seat_everyone(client, 2)
        with pytest.raises(grpc.RpcError) as caught:
            client.stub.GetConsistencyProof(
                pb.GetConsistencyProofRequest(old_size=old, new_size=new)
            )
        got = refusal(caught.value, "GetConsistencyProof")
        assert (got.code, got.reason) == (code, reason)
        assert got.metadata["new_size"] == str(new)
        with pytest.raises(grpc.RpcError) as caught:
            client.stub.GetInclusionProof(pb.GetInclusionProofRequest(position=0))
        assert refusal(caught.value).reason == "BAD_POSITION"


def test_a_server_without_the_log_says_so(farm: ServerFarm, sqlite_url: str) -> None:
    server = farm.start(sqlite_url, extra_args=["--no-transparency-log"])
    with Client(server.target) as client, pytest.raises(grpc.RpcError) as caught:
        client.stub.GetCheckpoint(pb.GetCheckpointRequest())
    got = refusal(caught.value)
    assert (got.code, got.reason) == (grpc.StatusCode.UNIMPLEMENTED, "NO_TLOG")
