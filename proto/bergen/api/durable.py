"""A small file replaced whole, and kept through a crash: what a process keeps on its own
disk between runs (the newest checkpoint a server signed, a witness's state)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_durably(path: Path, text: str) -> None:
    """Replace `path` with `text` (owner-only), whole or not at all, and on disk before this
    returns: written to a file of its own in the same folder (so processes writing the same
    path at once never mix their bytes), synced, renamed over `path`, and the folder synced so
    that the rename is kept too. Raises OSError."""
    folder = path.parent
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
