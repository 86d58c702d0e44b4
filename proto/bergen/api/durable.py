"""A small file replaced whole, and kept through a crash: what a process keeps on its own
disk between runs (the newest checkpoint a server signed, a witness's state), or an exported
record."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def replace_whole(path: Path, data: bytes) -> None:
    """Replace `path` with `data` (owner-only), whole or not at all: written to a file of its
    own in the same folder (so processes writing the same path at once never mix their
    bytes), synced, and renamed over `path`. A reader sees the old file or the new one.
    Raises OSError."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_durably(path: Path, text: str) -> None:
    """`replace_whole` with `text`, and on disk before this returns: the folder is synced
    too, so that the rename is kept through a crash. Raises OSError."""
    replace_whole(path, text.encode("utf-8"))
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
