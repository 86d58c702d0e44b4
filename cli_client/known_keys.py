"""The servers' signing keys this user has come to trust, as ssh keeps `known_hosts`.

A record or an audit pack proves no more than who signed it, so `bergen verify` needs a key it
trusts. One given with `--public-key` is trusted for that run. Otherwise the first time a match
is verified through a server, that server's published key is written here beside its address
(trust on first use); from then on the server must keep publishing that key (a different one
is a rejection naming both), and a record file or a pack signed by any key written here is
trusted offline.

The file is `known_keys` in the user's configuration folder (`config_dir`), one line per
server: `ADDRESS KEY` (the key as 64 lowercase hex digits); blank lines and lines starting
with `#` are skipped, so a key learned from a trusted place can be written in by hand. It is
written with mode 0600 in a folder of mode 0700.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from .userdir import config_dir

FILE_NAME = "known_keys"
_KEY = re.compile(r"[0-9a-f]{64}")


def default_path() -> Path:
    return config_dir() / FILE_NAME


class KnownKeysError(ValueError):
    """The file cannot be read or a line of it is not ADDRESS KEY."""


@dataclass(frozen=True, slots=True)
class KnownKeys:
    """The keys in one file, by server address."""

    path: Path
    by_address: dict[str, str]

    def holder_of(self, key: str) -> str | None:
        """The address the key is known for, or None when no server's key is `key`."""
        for address, known in self.by_address.items():
            if known == key:
                return address
        return None


def load(path: Path | None = None) -> KnownKeys:
    """The keys in `path` (default_path() when None); none when the file does not exist.

    Raises KnownKeysError for a file that cannot be read or a line that is not ADDRESS KEY."""
    path = path or default_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return KnownKeys(path, {})
    except (OSError, UnicodeDecodeError) as e:
        raise KnownKeysError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}") from None
    keys: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 2 or not _KEY.fullmatch(parts[1].lower()):
            raise KnownKeysError(f"{path}, line {n}: expected ADDRESS KEY (64 hex digits)")
        keys[parts[0]] = parts[1].lower()
    return KnownKeys(path, keys)


def remember(known: KnownKeys, address: str, key: str) -> KnownKeys:
    """`known` with `address`'s key written to its file (mode 0600, in a folder of mode 0700).

    Raises OSError when the file cannot be written."""
    known.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    line = f"{address} {key}\n"
    fd = os.open(known.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as f:
        f.write(line)
    return KnownKeys(known.path, {**known.by_address, address: key})


class KeyChanged(Exception):
    """A server publishes another key than the one known for it."""

    def __init__(self, known: KnownKeys, address: str, served: str) -> None:
        self.address = address
        self.known_key = known.by_address[address]
        self.served = served
        super().__init__(
            f"{address} signs with {served}, not {self.known_key}, the key known for it in "
            f"{known.path}: the server's key has changed. If the change is expected, delete "
            "that line and try again"
        )


def vouch(address: str, served: str, path: Path | None = None) -> str | None:
    """Check the key `address` publishes against the one known for it; a server not known yet
    has its key written down (trust on first use). Returns the note to show when the key was
    just learned, else None.

    Raises KeyChanged, KnownKeysError, or OSError when the file cannot be written."""
    known = load(path)
    was = known.by_address.get(address)
    if was == served:
        return None
    if was is not None:
        raise KeyChanged(known, address, served)
    remember(known, address, served)
    return f"trusted {address}'s key {served} on first use (written to {known.path})"
