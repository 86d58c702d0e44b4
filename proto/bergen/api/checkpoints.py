"""Checkpoints of the transparency log: C2SP `tlog-checkpoint` bodies in C2SP `signed-note`
notes, signed with the server's Ed25519 key (the records' key), and C2SP `tlog-cosignature`
cosignatures by witnesses.

A checkpoint body is three lines, `<origin>\\n<tree size>\\n<base64 root hash>\\n`, then
any extension lines. A note is the body, a blank line, and one line a signature:
`— <name> <base64(key id || signature)>\\n`. The key id of an Ed25519 note key is the first
4 bytes of SHA-256(name || 0x0A || 0x01 || public key); of a witness's cosignature key,
SHA-256(name || 0x0A || 0x04 || public key), whose signature is key id || timestamp (8
bytes, big-endian, Unix seconds) || Ed25519 signature of
`cosignature/v1\\ntime <timestamp>\\n` followed by the checkpoint body.

Ed25519 is deterministic: one key signing one body gives one note, byte for byte, on every
replica.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from bergen.domain.merkle import leaf_hash

NOTE_ED25519 = 0x01
COSIGNATURE_V1 = 0x04
COSIGNATURE_PREFIX = "cosignature/v1\n"
_DASH = "\u2014 "
_MAX_NOTE = 1 << 16
_MAX_SIGNATURES = 100


class NoteError(ValueError):
    """A note, checkpoint or cosignature that is malformed or does not verify."""


def key_id(name: str, public_key: bytes, kind: int = NOTE_ED25519) -> bytes:
    """The 4-byte id of a key of `kind` (NOTE_ED25519 or COSIGNATURE_V1) named `name`."""
    return hashlib.sha256(name.encode() + b"\n" + bytes([kind]) + public_key).digest()[:4]


def verifier_key(name: str, public_key: bytes, kind: int = NOTE_ED25519) -> str:
    """The verifier key string `<name>+<hex key id>+<base64(kind || key)>`: of a note
    signer (NOTE_ED25519), or of a witness's cosignatures (COSIGNATURE_V1)."""
    blob = base64.b64encode(bytes([kind]) + public_key).decode()
    return f"{name}+{key_id(name, public_key, kind).hex()}+{blob}"


def parse_verifier_key(vkey: str, kind: int = NOTE_ED25519) -> tuple[str, bytes]:
    """(name, Ed25519 public key) of a verifier key string of `kind`. Raises NoteError."""
    name, _, rest = vkey.strip().partition("+")
    hex_id, _, blob = rest.partition("+")
    try:
        raw = base64.b64decode(blob, validate=True)
    except binascii.Error:
        raise NoteError("the verifier key's key is not base64") from None
    what = "an Ed25519 verifier key" if kind == NOTE_ED25519 else "a witness's verifier key"
    if not _good_name(name) or len(raw) != 33 or raw[0] != kind:
        raise NoteError(f"not {what}")
    if key_id(name, raw[1:], kind).hex() != hex_id:
        raise NoteError("the verifier key's id does not match its key")
    return name, raw[1:]


def _good_name(name: str) -> bool:
    return bool(name) and not any(c.isspace() or c == "+" for c in name)


def raw_public_key(key: Ed25519PrivateKey | Ed25519PublicKey) -> bytes:
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def log_origin(public_key_hex: str) -> str:
    """The name of the log whose checkpoints the records' key `public_key_hex` signs: the
    same on every replica holding the key (a checkpoint's origin line, and its signer's)."""
    return f"bergen/{public_key_hex[:16].lower()}"


# --- the log's leaves -----------------------------------------------------------------------

LEAF_PREFIX = "bergen/event/v1"


def event_leaf_data(
    stream_id: str, seq: int, position: int, recorded_us: int, digest: bytes
) -> bytes:
    """What the leaf of a stored event hashes: its stream, seq and global position, when it
    was recorded (Unix microseconds) and its chain hash (which covers its content, salt and
    predecessor), one a line."""
    return (
        f"{LEAF_PREFIX}\n{stream_id}\n{seq}\n{position}\n{recorded_us}\n{digest.hex()}\n".encode()
    )


def event_leaf(stream_id: str, seq: int, position: int, recorded_us: int, digest: bytes) -> bytes:
    """The leaf hash of a stored event (RFC 9162: SHA-256(0x00 || data))."""
    return leaf_hash(event_leaf_data(stream_id, seq, position, recorded_us, digest))


# --- checkpoints ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A checkpoint body: the log's origin, its tree size and root hash, any extensions."""

    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def text(self) -> str:
        """The body as the note signs it."""
        lines = [self.origin, str(self.size), base64.b64encode(self.root).decode()]
        return "".join(f"{line}\n" for line in [*lines, *self.extensions])


def parse_checkpoint(text: str) -> Checkpoint:
    """The checkpoint a note's text holds. Raises NoteError."""
    if not text.endswith("\n"):
        raise NoteError("a checkpoint ends with a newline")
    lines = text[:-1].split("\n")
    if len(lines) < 3 or any(not line for line in lines):
        raise NoteError("a checkpoint has an origin, a size and a root hash, on lines")
    origin, size, root = lines[:3]
    if not size.isdigit() or (size != "0" and size.startswith("0")) or len(size) > 20:
        raise NoteError(f"the checkpoint's tree size {size!r} is not a decimal number")
    try:
        digest = base64.b64decode(root, validate=True)
    except binascii.Error:
        raise NoteError("the checkpoint's root hash is not base64") from None
    if len(digest) != 32:
        raise NoteError("the checkpoint's root hash is not 32 bytes")
    return Checkpoint(origin, int(size), digest, tuple(lines[3:]))


# --- signed notes ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NoteSignature:
    """One signature line of a note: the signer's name, the key id, the signature bytes
    (after the key id)."""

    name: str
    key_id: bytes
    signature: bytes

    def line(self) -> str:
        blob = base64.b64encode(self.key_id + self.signature).decode()
        return f"{_DASH}{self.name} {blob}\n"


def sign_note(text: str, name: str, key: Ed25519PrivateKey) -> str:
    """`text` (ending with a newline) signed by `key` under `name`, as a note."""
    if not text.endswith("\n"):
        raise ValueError("a note's text ends with a newline")
    sig = NoteSignature(name, key_id(name, raw_public_key(key)), key.sign(text.encode()))
    return text + "\n" + sig.line()


def parse_note(note: str) -> tuple[str, list[NoteSignature]]:
    """The text of a note and its signatures. Raises NoteError."""
    if len(note) > _MAX_NOTE:
        raise NoteError("the note is too long")
    text, sep, sigs = note.rpartition("\n\n")
    if not sep or not sigs.endswith("\n"):
        raise NoteError("a note is its text, a blank line and its signature lines")
    out: list[NoteSignature] = []
    for line in sigs[:-1].split("\n"):
        if not line.startswith(_DASH):
            raise NoteError("a signature line begins with an em dash")
        name, _, blob = line[len(_DASH) :].partition(" ")
        try:
            raw = base64.b64decode(blob, validate=True)
        except binascii.Error:
            raise NoteError("a signature is not base64") from None
        if not _good_name(name) or len(raw) < 5:
            raise NoteError("a malformed signature line")
        out.append(NoteSignature(name, raw[:4], raw[4:]))
    if len(out) > _MAX_SIGNATURES:
        raise NoteError("too many signatures")
    return text + "\n", out


def verify_note(note: str, name: str, public_key: bytes, vouched: bool = False) -> str:
    """The text of `note` once a signature by `public_key` under `name` verifies. With
    `vouched`, that signature must be there but is not verified again: the note was read
    from a text whose own signature by the same key was verified, and covers it. Raises
    NoteError."""
    text, sigs = parse_note(note)
    kid = key_id(name, public_key)
    key = _public(public_key)
    for s in sigs:
        if s.name == name and s.key_id == kid:
            if vouched:
                return text
            try:
                key.verify(s.signature, text.encode())
            except InvalidSignature:
                raise NoteError(f"the signature by {name} does not verify") from None
            return text
    raise NoteError(f"the note is not signed by {name} with that key")


def verify_checkpoint(
    note: str, origin: str, public_key: bytes, vouched: bool = False
) -> Checkpoint:
    """The checkpoint of a note signed by `public_key` under the log's name `origin`, whose
    origin line must be that name (`vouched`: as `verify_note`). Raises NoteError."""
    checkpoint = parse_checkpoint(verify_note(note, origin, public_key, vouched))
    if checkpoint.origin != origin:
        raise NoteError(f"the checkpoint is of {checkpoint.origin!r}, not {origin!r}")
    return checkpoint


def _public(raw: bytes) -> Ed25519PublicKey:
    try:
        return Ed25519PublicKey.from_public_bytes(raw)
    except ValueError:
        raise NoteError("not an Ed25519 public key") from None


# --- cosignatures ---------------------------------------------------------------------------


def cosigned_message(checkpoint_text: str, timestamp: int) -> bytes:
    """What a witness signs for a checkpoint at `timestamp` (Unix seconds)."""
    return f"{COSIGNATURE_PREFIX}time {timestamp}\n{checkpoint_text}".encode()


def cosign(checkpoint_text: str, name: str, key: Ed25519PrivateKey, timestamp: int) -> str:
    """The cosignature line of witness `name` for a checkpoint body, at `timestamp`."""
    if not 0 <= timestamp < 1 << 64:
        raise ValueError("the timestamp is out of range")
    kid = key_id(name, raw_public_key(key), COSIGNATURE_V1)
    sig = key.sign(cosigned_message(checkpoint_text, timestamp))
    return NoteSignature(name, kid, struct.pack(">Q", timestamp) + sig).line()


def add_signature(note: str, line: str) -> str:
    """`note` with the signature line `line` added (a cosignature, say)."""
    return note + line


def verify_cosignature(note: str, name: str, public_key: bytes) -> int:
    """The timestamp of the cosignature of `note` by witness `name` with `public_key`.
    Raises NoteError."""
    text, sigs = parse_note(note)
    kid = key_id(name, public_key, COSIGNATURE_V1)
    key = _public(public_key)
    for s in sigs:
        if s.name == name and s.key_id == kid:
            if len(s.signature) != 8 + 64:
                raise NoteError(f"the cosignature by {name} is malformed")
            (timestamp,) = struct.unpack(">Q", s.signature[:8])
            try:
                key.verify(s.signature[8:], cosigned_message(text, timestamp))
            except InvalidSignature:
                raise NoteError(f"the cosignature by {name} does not verify") from None
            return int(timestamp)
    raise NoteError(f"the note is not cosigned by {name} with that key")


# --- the transparency field of records and packs ---------------------------------------------


def transparency_field(
    note: str, leaf_index: int, tree_size: int, position: int, recorded_us: int, proof: list[bytes]
) -> dict[str, object]:
    """A record's (or a pack's) `transparency`: the checkpoint note, where the last event of
    the record's log is in the tree of that checkpoint, and its inclusion proof."""
    return {
        "checkpoint": note,
        "leaf_index": leaf_index,
        "tree_size": tree_size,
        "position": position,
        "recorded_us": recorded_us,
        "proof": [base64.b64encode(h).decode() for h in proof],
    }


def verify_transparency(
    field: object,
    public_key_hex: str,
    stream_id: str,
    seq: int,
    head: bytes,
    vouched: bool = False,
) -> Checkpoint:
    """Check a `transparency` field: its checkpoint signed by the records' key under the
    log's origin, and the inclusion of the event (`stream_id`, `seq`, chain hash `head`) as
    its leaf in the tree of that checkpoint. `vouched`: the field is a record's whose
    signature by that key was verified, which covers the checkpoint, so the checkpoint's
    own signature is not verified again (`verify_note`). Returns the checkpoint. Raises
    NoteError."""
    from bergen.domain.merkle import ProofError, verify_inclusion

    if not isinstance(field, dict):
        raise NoteError("transparency is not an object")
    try:
        note = field["checkpoint"]
        index, size = field["leaf_index"], field["tree_size"]
        position, recorded_us = field["position"], field["recorded_us"]
        proof = [base64.b64decode(h, validate=True) for h in field["proof"]]
    except (KeyError, TypeError, binascii.Error):
        raise NoteError("transparency is malformed") from None
    if not isinstance(note, str) or not all(
        type(v) is int for v in (index, size, position, recorded_us)
    ):
        raise NoteError("transparency is malformed")
    try:
        public = bytes.fromhex(public_key_hex)
    except ValueError:
        raise NoteError("the public key is not hex") from None
    checkpoint = verify_checkpoint(note, log_origin(public_key_hex), public, vouched)
    if checkpoint.size != size:
        raise NoteError(f"the proof is of a tree of {size}, the checkpoint of {checkpoint.size}")
    leaf = event_leaf(stream_id, seq, position, recorded_us, head)
    try:
        verify_inclusion(index, size, leaf, proof, checkpoint.root)
    except ProofError as e:
        raise NoteError(f"the last event is not in the checkpoint's tree: {e}") from None
    return checkpoint
