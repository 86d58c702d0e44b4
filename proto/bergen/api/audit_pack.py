"""The audit pack of a tournament (TOURNAMENT.md section 6): its files, their bytes and its
signed manifest, shared by the server (which signs a pack's manifest: GetAuditManifest) and
the clients (which write and verify packs).

A pack is a folder:

    tournament.json          the signed bergen-tournament-record/1
    matches/<match_id>.json  every played table's signed RECORD.md record, with its
                             `tournament` field {tournament_id, round, table}
    manifest.json            every other file's SHA-256 and the public key, signed the same
                             way (Ed25519 over the RFC 8785 canonical form without `signature`)
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from bergen.domain.tournament_record import unplayable_tables

from .signing import RecordSigner, SignatureError, verify_signature

TOURNAMENT_FILE = "tournament.json"
MATCHES_DIR = "matches"
MANIFEST_FILE = "manifest.json"
MANIFEST_FORMAT = "bergen-audit-pack/1"

PACK_PATH = re.compile(r"^(tournament\.json|matches/[0-9A-Za-z][0-9A-Za-z._-]*\.json)$")
"""The paths a manifest may list: nothing outside the pack, nothing but its records."""


def match_path(match_id: str) -> str:
    """The pack path of a match's record."""
    return f"{MATCHES_DIR}/{match_id}.json"


def file_bytes(record: Mapping[str, Any]) -> bytes:
    """A record as the pack stores it: UTF-8 JSON, one key a line, the keys in order (so
    that the server, which hashes the records it made, and a client, which writes the
    records it was served, give the same bytes), a final newline."""
    text = json.dumps(record, indent=1, ensure_ascii=False, sort_keys=True)
    return (text + "\n").encode("utf-8")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def played_matches(record: Mapping[str, Any]) -> list[str]:
    """The match id of every played table of a tournament record, in round and table order
    (a table the server abandoned as unplayable has none: `unplayable_tables`)."""
    unplayable = unplayable_tables(record.get("interventions") or [])
    return [
        str(t["match_id"])
        for r in record.get("rounds", [])
        for t in r.get("tables", [])
        if t.get("match_id") and (r.get("round"), t.get("table")) not in unplayable
    ]


def build_manifest(
    tournament_id: str, files: Mapping[str, bytes], public_key: str
) -> dict[str, Any]:
    """The manifest (without `signature`) of the pack files `files` (path -> bytes)."""
    return {
        "format": MANIFEST_FORMAT,
        "tournament_id": tournament_id,
        "public_key": public_key,
        "files": {path: sha256_hex(files[path]) for path in sorted(files)},
    }


def pack_contents(
    tournament: Mapping[str, Any],
    matches: Sequence[Mapping[str, Any]],
    signer: RecordSigner,
    signed: bool = False,
) -> dict[str, bytes]:
    """Every file of the pack (path -> bytes), each record signed by `signer`.

    `tournament` is the tournament record, `matches` the match record of each played
    table, each with its `tournament` field naming this tournament. With `signed`, the
    records are written as given (as the server served them), each already signed by
    `signer`'s key; only the manifest is signed here.
    Raises ValueError for a match record of another tournament, without its `tournament`
    field, or given twice, and with `signed` for a record not signed by `signer`'s key.
    """

    def seal(record: Mapping[str, Any], name: str) -> dict[str, Any]:
        if not signed:
            return signer.sign(dict(record))
        try:
            verify_signature(dict(record), signer.public_key)
        except SignatureError as e:
            raise ValueError(f"{name}: {e}") from None
        return dict(record)

    tid = tournament.get("tournament_id")
    if not isinstance(tid, str):
        raise ValueError("the tournament record has no tournament_id")
    files: dict[str, bytes] = {TOURNAMENT_FILE: file_bytes(seal(tournament, TOURNAMENT_FILE))}
    for record in matches:
        mid = record.get("match_id")
        place = record.get("tournament")
        if not isinstance(place, Mapping) or place.get("tournament_id") != tid:
            raise ValueError(f"match {mid!r} is not recorded as a match of tournament {tid}")
        path = match_path(str(mid))
        if not PACK_PATH.match(path):
            raise ValueError(f"match id {mid!r} cannot name a file of the pack")
        if path in files:
            raise ValueError(f"match {mid} is given twice")
        files[path] = file_bytes(seal(record, path))
    manifest = signer.sign(build_manifest(tid, files, signer.public_key))
    files[MANIFEST_FILE] = file_bytes(manifest)
    return files


__all__ = [
    "MANIFEST_FILE",
    "MANIFEST_FORMAT",
    "MATCHES_DIR",
    "PACK_PATH",
    "TOURNAMENT_FILE",
    "build_manifest",
    "file_bytes",
    "match_path",
    "pack_contents",
    "played_matches",
    "sha256_hex",
]
