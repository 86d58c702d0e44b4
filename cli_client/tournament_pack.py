"""Writing a tournament's audit pack (TOURNAMENT.md section 6), and its tables' rules.

The pack's layout, its files' bytes and its manifest are `bergen.api.audit_pack`'s (the
server signs manifests with it too). `write_pack` is shared by `bergen simulate --tournament`
and `bergen tournament export`; `bergen verify DIR` reads a pack back (cli_client/verify.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bergen.api.audit_pack import (
    MANIFEST_FILE,
    MANIFEST_FORMAT,
    MATCHES_DIR,
    PACK_PATH,
    TOURNAMENT_FILE,
    build_manifest,
    file_bytes,
    match_path,
    pack_contents,
    sha256_hex,
)
from bergen.api.signing import RecordSigner, SignatureError, verify_signature
from bergen.domain import make_rules
from bergen.domain.rules import Rules
from bergen.domain.tournament_pairing import Settings


def table_rules(settings: Settings, seats: int) -> Rules:
    """The rules of a tournament table of `seats` seats: the tournament's preset and options,
    the targets of RULES.md section 7 for that many seats (a multi-sided Swiss table may hold
    fewer entrants than the table's seats).

    Raises InvalidOptions for rules the table cannot play.
    """
    options = {k: v for k, v in settings.rules.items() if k != "preset"}
    preset = settings.rules.get("preset")
    return make_rules(
        seats, settings.partnerships, None if preset is None else str(preset), options
    )


def write_pack(
    out: Path,
    tournament: Mapping[str, Any],
    matches: Sequence[Mapping[str, Any]],
    signer: RecordSigner,
    signed: bool = False,
) -> list[Path]:
    """Write the audit pack into folder `out` (made if needed); returns the files written.
    With `signed`, the records are already signed by `signer`'s key (see `pack_contents`).

    Raises ValueError as `pack_contents` does, and as `write_files` does.
    """
    return write_files(out, pack_contents(tournament, matches, signer, signed))


def served_pack(
    tournament: Mapping[str, Any],
    matches: Sequence[Mapping[str, Any]],
    manifest: Mapping[str, Any],
) -> dict[str, bytes]:
    """Every file of the pack (path -> bytes) from records and a manifest a server served:
    the manifest signed by its own key, the tournament record by the same key, and the files
    exactly those it lists with the hashes it gives. Raises ValueError saying which is not."""
    try:
        key = verify_signature(dict(manifest))
        verify_signature(dict(tournament), key)
    except SignatureError as e:
        raise ValueError(f"{MANIFEST_FILE}: {e}") from None
    tid = tournament.get("tournament_id")
    if manifest.get("format") != MANIFEST_FORMAT or manifest.get("tournament_id") != tid:
        raise ValueError(f"{MANIFEST_FILE} is not the manifest of tournament {tid}")
    if manifest.get("public_key") != key:
        raise ValueError(f"{MANIFEST_FILE} names another key than the one that signed it")
    files = {TOURNAMENT_FILE: file_bytes(tournament)}
    for record in matches:
        path = match_path(str(record.get("match_id")))
        if not PACK_PATH.match(path) or path in files:
            raise ValueError(f"match {record.get('match_id')!r} cannot be a file of the pack")
        files[path] = file_bytes(record)
    listed = manifest.get("files")
    if not isinstance(listed, dict):
        raise ValueError(f"{MANIFEST_FILE} lists no files")
    served = build_manifest(str(tid), files, key)["files"]
    if listed != served:
        wrong = sorted(set(served).symmetric_difference(listed)) or [
            path for path in served if served[path] != listed[path]
        ]
        raise ValueError(f"{wrong[0]} is not the file the manifest lists")
    files[MANIFEST_FILE] = file_bytes(manifest)
    return files


def write_files(out: Path, files: Mapping[str, bytes]) -> list[Path]:
    """Write a pack's files (path -> bytes) into folder `out` (made if needed); returns the
    files written. Raises FileExistsError when `out` holds anything already (a file left
    there would be an extra file of the pack), OSError when it cannot be written."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{out} is not an empty folder")
    (out / MATCHES_DIR).mkdir(parents=True, exist_ok=True)
    written = []
    for path, data in files.items():
        target = out / path
        target.write_bytes(data)
        written.append(target)
    return written


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
    "served_pack",
    "sha256_hex",
    "table_rules",
    "write_files",
    "write_pack",
]
