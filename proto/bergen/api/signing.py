"""Signed match records: an Ed25519 key held by the server, signatures as RECORD.md says.

The signature covers the UTF-8 bytes of the record without its `signature` field in
RFC 8785 (JCS) canonical JSON.
"""

from __future__ import annotations

import copy
import functools
import json
import os
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from .chain import canonical_json
from .checkpoints import sign_note

ALGORITHM = "ed25519"
DEFAULT_KEY_FILE = "bergen-signing-key.pem"


class SignatureError(Exception):
    """A record's signature is missing, malformed, from another key, or does not verify."""


def signing_bytes(record: dict[str, Any]) -> bytes:
    """What the signature covers. Raises ValueError for a record that is not JSON."""
    body = {k: v for k, v in record.items() if k != "signature"}
    return canonical_json(body, "the record")


def load_or_create_key(path: str | os.PathLike[str]) -> Ed25519PrivateKey:
    """The Ed25519 key in `path` (PEM, PKCS#8), made and stored there (mode 0600) when the
    file does not exist; of two processes making it at once, both get the first. Raises
    ValueError for a file that holds no Ed25519 private key, OSError."""
    p = Path(path)
    if p.exists():
        key = serialization.load_pem_private_key(p.read_bytes(), password=None)
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError(f"{p} does not hold an Ed25519 private key")
        return key
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    try:
        # Another replica may have made it at the same moment: keep the first.
        os.link(tmp, p)
    except FileExistsError:
        tmp.unlink()
        return load_or_create_key(p)
    tmp.unlink()
    return key


class RecordSigner:
    """The server's signing key."""

    def __init__(self, key: Ed25519PrivateKey) -> None:
        self._key = key
        self.public_key = (
            key.public_key()
            .public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
            .hex()
        )

    @classmethod
    def load_or_create(cls, path: str | os.PathLike[str]) -> RecordSigner:
        """The key in `path` (PEM, PKCS#8), made and stored there (mode 0600) when the file
        does not exist. Raises ValueError for a file that holds no Ed25519 private key."""
        return cls(load_or_create_key(path))

    @property
    def raw_public_key(self) -> bytes:
        return bytes.fromhex(self.public_key)

    def sign_note(self, text: str, name: str) -> str:
        """`text` as a C2SP signed note signed under `name` (bergen.api.checkpoints)."""
        return sign_note(text, name, self._key)

    def sign(self, record: dict[str, Any]) -> dict[str, Any]:
        """The record with its `signature` field."""
        return self.sign_served(copy.deepcopy(record))[0]

    def sign_served(self, record: dict[str, Any]) -> tuple[dict[str, Any], str]:
        """`record` signed, and its text as `record_text` gives it, from one canonical form.
        The record returned shares its members with `record` (a new match's record, made
        for this): what `sign` copies first."""
        body = signing_bytes(record)
        signature = {
            "algorithm": ALGORITHM,
            "public_key": self.public_key,
            "value": self._key.sign(body).hex(),
        }
        signed = {k: v for k, v in record.items() if k != "signature"}
        signed["signature"] = signature
        return signed, _with_signature(body.decode("utf-8"), signature)


def verify_signature(record: dict[str, Any], trusted_public_key: str | None = None) -> str:
    """Check a signed record; returns the public key (hex) that signed it.

    With `trusted_public_key`, the record must be signed by that key. Raises SignatureError.
    """
    sig = record.get("signature")
    if not isinstance(sig, dict):
        raise SignatureError("the record is not signed")
    if sig.get("algorithm") != ALGORITHM:
        raise SignatureError(f"unknown signature algorithm {sig.get('algorithm')!r}")
    try:
        public = bytes.fromhex(str(sig.get("public_key")))
        value = bytes.fromhex(str(sig.get("value")))
        key = Ed25519PublicKey.from_public_bytes(public)
    except ValueError as e:
        raise SignatureError(f"malformed signature: {e}") from None
    if trusted_public_key is not None and public.hex() != trusted_public_key.lower():
        raise SignatureError("signed by another key than the one given")
    try:
        key.verify(value, signing_bytes(record))
    except (InvalidSignature, ValueError):
        raise SignatureError("the signature does not match the record") from None
    return public.hex()


_SIGNATURE_MEMBER = ',"signature":'


def record_text(record: dict[str, Any]) -> str:
    """A record as the server serves and keeps it: a signed record as the JCS text its
    signature covers with the `signature` member added last, so that a reader holding the
    server's key can check the signature on the text itself (`read_signed_text`); an unsigned
    one as its JCS text. Raises ValueError for a record that is not JSON."""
    body = signing_bytes(record).decode("utf-8")
    if "signature" not in record:
        return body
    return _with_signature(body, record["signature"])


def _with_signature(body: str, signature: Any) -> str:
    """`body`, a record's JCS text without its signature, with `signature` added last."""
    member = canonical_json(signature, "the signature").decode("utf-8")
    return body[:-1] + ("" if body == "{}" else ",") + '"signature":' + member + "}"


def read_signed_text(text: str, trusted_public_key: str) -> dict[str, Any] | None:
    """The record in `text` when `text` is in the form `record_text` gives and its signature
    by `trusted_public_key` verifies over the text before its `signature` member; else None,
    and the text is to be checked the long way (`verify_signature` on the record parsed
    strictly). What that key signed is the server's own canonical JSON, so the text needs no
    canonical form made again and no check for keys given twice."""
    text = text.removesuffix("\n")  # as a file holds it
    at = text.rfind(_SIGNATURE_MEMBER)
    if at < 0 or not text.endswith("}"):
        return None
    member = text[at + len(_SIGNATURE_MEMBER) : -1]
    try:
        sig = json.loads(member)
        if (
            not isinstance(sig, dict)
            or sig.keys() != {"algorithm", "public_key", "value"}
            or sig["algorithm"] != ALGORITHM
            or sig["public_key"] != trusted_public_key.lower()
            or type(sig["value"]) is not str
            or canonical_json(sig, "the signature").decode("utf-8") != member
        ):
            return None
        _public_key(sig["public_key"]).verify(
            bytes.fromhex(sig["value"]), (text[:at] + "}").encode()
        )
        record = json.loads(text)
    except (ValueError, InvalidSignature, RecursionError):
        return None
    if not isinstance(record, dict) or record.get("signature") != sig:
        return None
    return record


@functools.lru_cache(maxsize=16)
def _public_key(hex_key: str) -> Ed25519PublicKey:
    return Ed25519PublicKey.from_public_bytes(bytes.fromhex(hex_key))


def load_public_key(path: str | os.PathLike[str]) -> str:
    """A public key from a file: 64 hex digits, or a PEM public key. Raises ValueError."""
    data = Path(path).read_bytes().strip()
    if len(data) == 64:
        try:
            bytes.fromhex(data.decode())
            return data.decode().lower()
        except ValueError:
            pass
    key = serialization.load_pem_public_key(data)
    if not isinstance(key, Ed25519PublicKey):
        raise ValueError(f"{path} does not hold an Ed25519 public key")
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex()
