"""Checkpoints as C2SP signed notes, and witnesses' cosignatures: the Go reference
implementation's example note byte for byte, and what must not verify."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bergen.api.checkpoints import (
    Checkpoint,
    NoteError,
    NoteSignature,
    add_signature,
    cosign,
    event_leaf,
    key_id,
    log_origin,
    parse_checkpoint,
    parse_note,
    parse_verifier_key,
    raw_public_key,
    sign_note,
    transparency_field,
    verifier_key,
    verify_checkpoint,
    verify_cosignature,
    verify_note,
    verify_transparency,
)
from bergen.domain.merkle import Frontier, inclusion_proof

# golang.org/x/mod/sumdb/note's documented example (the C2SP signed-note reference).
GO_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
GO_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
GO_TEXT = (
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n"
)
GO_NOTE = (
    GO_TEXT + "\n\u2014 PeterNeumann "
    "x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"
)


def go_key() -> Ed25519PrivateKey:
    seed = base64.b64decode(GO_SKEY.split("+", 4)[4])
    assert seed[0] == 1
    return Ed25519PrivateKey.from_private_bytes(seed[1:])


def test_the_reference_note_is_made_byte_for_byte() -> None:
    key = go_key()
    assert sign_note(GO_TEXT, "PeterNeumann", key) == GO_NOTE
    assert verifier_key("PeterNeumann", raw_public_key(key)) == GO_VKEY
    assert key_id("PeterNeumann", raw_public_key(key)).hex() == "c74f20a3"


def test_the_reference_note_verifies_under_its_verifier_key() -> None:
    name, public = parse_verifier_key(GO_VKEY)
    assert verify_note(GO_NOTE, name, public) == GO_TEXT


def test_a_changed_note_does_not_verify() -> None:
    name, public = parse_verifier_key(GO_VKEY)
    with pytest.raises(NoteError, match="does not verify"):
        verify_note(GO_NOTE.replace("problem,", "problem;"), name, public)
    with pytest.raises(NoteError, match="not signed by"):
        verify_note(GO_NOTE, "PaulNeumann", public)
    other = raw_public_key(Ed25519PrivateKey.generate())
    with pytest.raises(NoteError, match="not signed by"):
        verify_note(GO_NOTE, name, other)


@pytest.mark.parametrize(
    "note",
    [
        GO_TEXT,
        GO_TEXT + "\n",
        GO_TEXT + "\n- PeterNeumann AAAA\n",
        GO_TEXT + "\n\u2014 PeterNeumann !!!!\n",
        GO_TEXT + "\n\u2014 PeterNeumann AAAA",
    ],
)
def test_malformed_notes_are_refused(note: str) -> None:
    with pytest.raises(NoteError):
        parse_note(note)


def test_a_checkpoint_reads_back_and_verifies_against_its_origin() -> None:
    key = Ed25519PrivateKey.generate()
    body = Checkpoint("bergen.example/log", 45, bytes(range(32)))
    assert body.text() == ("bergen.example/log\n45\nAAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n")
    note = sign_note(body.text(), body.origin, key)
    assert sign_note(body.text(), body.origin, key) == note  # Ed25519 is deterministic
    assert verify_checkpoint(note, body.origin, raw_public_key(key)) == body
    assert parse_checkpoint(body.text()) == body


@pytest.mark.parametrize(
    "text",
    [
        "origin\n45\n",
        "origin\n045\nAAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n",
        "origin\n-1\nAAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n",
        "origin\n45\nAAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHg==\n",
        "origin\n45\nAAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
        "\n45\nAAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n",
    ],
)
def test_malformed_checkpoints_are_refused(text: str) -> None:
    with pytest.raises(NoteError):
        parse_checkpoint(text)


def test_a_witness_cosignature_verifies_with_its_time() -> None:
    log_key, witness = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    body = Checkpoint("bergen.example/log", 7, bytes(32)).text()
    note = sign_note(body, "bergen.example/log", log_key)
    line = cosign(body, "witness.example", witness, 1_700_000_000)
    cosigned = add_signature(note, line)
    assert verify_cosignature(cosigned, "witness.example", raw_public_key(witness)) == 1_700_000_000
    # the log's own signature still verifies, and the cosignature is not a note signature
    verify_checkpoint(cosigned, "bergen.example/log", raw_public_key(log_key))
    with pytest.raises(NoteError):
        verify_note(cosigned, "witness.example", raw_public_key(witness))
    # a cosignature whose time is moved on no longer verifies
    name, blob = line[2:-1].split(" ")
    raw = bytearray(base64.b64decode(blob))
    raw[11] ^= 1
    moved = note + f"\u2014 {name} {base64.b64encode(bytes(raw)).decode()}\n"
    with pytest.raises(NoteError, match="does not verify"):
        verify_cosignature(moved, "witness.example", raw_public_key(witness))


def test_a_records_transparency_proves_its_last_event_in_a_signed_checkpoint() -> None:
    key = Ed25519PrivateKey.generate()
    public = raw_public_key(key).hex()
    origin = log_origin(public)
    events = [(f"m{i % 3}", i // 3 + 1, 10 + i, 1_700_000_000_000_000 + i, bytes([i]) * 32)
              for i in range(11)]  # fmt: skip
    frontier, nodes = Frontier(), {}
    for e in events:
        for level, index, h in frontier.append(event_leaf(*e)):
            nodes[(level, index)] = h

    class Store:
        def nodes(self, wanted: list[tuple[int, int]]) -> dict[tuple[int, int], bytes]:
            return {n: nodes[n] for n in wanted}

    note = sign_note(Checkpoint(origin, 11, frontier.root()).text(), origin, key)
    stream, seq, position, recorded_us, head = events[7]
    proof = inclusion_proof(Store(), 7, 11)
    field = transparency_field(note, 7, 11, position, recorded_us, proof)
    assert verify_transparency(field, public, stream, seq, head).size == 11
    with pytest.raises(NoteError, match="not in the checkpoint's tree"):
        verify_transparency(field, public, stream, seq + 1, head)
    with pytest.raises(NoteError, match="not in the checkpoint's tree"):
        verify_transparency({**field, "proof": field["proof"][::-1]}, public, stream, seq, head)
    with pytest.raises(NoteError, match="tree of 12"):
        verify_transparency({**field, "tree_size": 12}, public, stream, seq, head)
    other = raw_public_key(Ed25519PrivateKey.generate()).hex()
    with pytest.raises(NoteError, match="not signed by"):
        verify_transparency(field, other, stream, seq, head)
    with pytest.raises(NoteError, match="malformed"):
        verify_transparency({**field, "leaf_index": "7"}, public, stream, seq, head)
    # Vouched for by the signature of the record that carries it: the checkpoint's own
    # signature is not verified again, but it must be there, by that key, and the proof is
    # checked all the same.
    text, (sig,) = parse_note(note)
    forged = text + "\n" + NoteSignature(sig.name, sig.key_id, bytes(64)).line()
    unsigned = {**field, "checkpoint": forged}
    with pytest.raises(NoteError, match="does not verify"):
        verify_transparency(unsigned, public, stream, seq, head)
    assert verify_transparency(unsigned, public, stream, seq, head, vouched=True).size == 11
    with pytest.raises(NoteError, match="not signed by"):
        verify_transparency(field, other, stream, seq, head, vouched=True)
    with pytest.raises(NoteError, match="not in the checkpoint's tree"):
        reversed_proof = {**field, "proof": field["proof"][::-1]}
        verify_transparency(reversed_proof, public, stream, seq, head, vouched=True)
    with pytest.raises(NoteError, match="tree of 12"):
        verify_transparency({**field, "tree_size": 12}, public, stream, seq, head, vouched=True)
