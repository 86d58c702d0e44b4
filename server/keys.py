"""The log key: HMAC-SHA256 keys held only by the servers, authenticating every stored event.

The key file holds one key a line, `<key id> <64 hex digits>` (`#` starts a comment). Every
key in it verifies; the last one writes. Rotation: append a line with a new id to the file of
every replica and restart them; events written before keep verifying under their old key
ids. The file is made with one key on first start (mode 0600), like the signing key; every
replica must be given the same file.

A log key authenticates rows and nothing else: any other use takes a key derived from it for
that purpose alone (`LogKeys.derive`), under the same key id.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Mapping
from pathlib import Path

DEFAULT_LOG_KEY_FILE = "bergen-log-key"
LOG_KEY_ENV = "BERGEN_LOG_KEY"
KEY_BYTES = 32

_LINE = re.compile(r"^([A-Za-z0-9_.-]{1,32})\s+([0-9a-fA-F]{64})$")

SEAT_TOKEN_PURPOSE = b"bergen seat token v1"
"""What the keys that seal seat tokens are derived for (`bergen.server.auth.SeatTokens`)."""
HAND_OFF_CODE_PURPOSE = b"bergen hand-off code v1"
"""What the keys that hash hand-off codes are derived for (`bergen.server.handoffs`)."""
PLAYER_TOKEN_PURPOSE = b"bergen player token v1"
"""What the keys that seal registered players' tokens are derived for
(`bergen.server.players`)."""
READ_MODEL_PURPOSE = b"bergen read model v1"
"""What the keys that authenticate the read models' rows are derived for
(`bergen.server.store.sealed`)."""


def derive_key(key: bytes, purpose: bytes) -> bytes:
    """A key for `purpose` alone: HMAC-SHA256 of `purpose` under `key`. Knowing it tells
    nothing of `key`, nor of a key derived for another purpose."""
    return hmac.new(key, purpose, hashlib.sha256).digest()


class LogKeys:
    """The keys that authenticate stored events: `writing` signs new rows, all verify."""

    def __init__(self, keys: Mapping[str, bytes], writing: str) -> None:
        """Raises ValueError when `writing` is not one of `keys`."""
        if writing not in keys:
            raise ValueError(f"the writing key {writing!r} is not among the keys")
        self._keys = dict(keys)
        self.writing = writing

    @property
    def writing_key(self) -> bytes:
        return self._keys[self.writing]

    def key(self, key_id: str) -> bytes | None:
        """The key of `key_id`, None for an id this server does not hold."""
        return self._keys.get(key_id)

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(self._keys)

    def derive(self, purpose: bytes) -> LogKeys:
        """The keys for `purpose` (`derive_key` of each), under the same ids; the same id
        writes."""
        return LogKeys({i: derive_key(k, purpose) for i, k in self._keys.items()}, self.writing)

    @classmethod
    def generate(cls, key_id: str = "k1") -> LogKeys:
        """One new random key (for tests and a first start)."""
        return cls({key_id: secrets.token_bytes(KEY_BYTES)}, key_id)

    @classmethod
    def parse(cls, text: str, where: str = "the log key file") -> LogKeys:
        """Keys from the file's text. Raises ValueError naming the bad line."""
        keys: dict[str, bytes] = {}
        last = None
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            found = _LINE.match(line)
            if found is None:
                raise ValueError(f"{where}, line {number}: expected '<key id> <64 hex digits>'")
            key_id, hex_key = found.groups()
            if key_id in keys:
                raise ValueError(f"{where}, line {number}: key id {key_id!r} given twice")
            keys[key_id] = bytes.fromhex(hex_key)
            last = key_id
        if last is None:
            raise ValueError(f"{where} holds no key")
        return cls(keys, last)

    @classmethod
    def load_or_create(cls, path: str | os.PathLike[str]) -> LogKeys:
        """The keys in `path`, made there (one key, mode 0600) when the file does not exist.
        Raises ValueError for a file that cannot be used, OSError when it cannot be read or
        made."""
        p = Path(path)
        if p.exists():
            return cls.parse(p.read_text(encoding="ascii", errors="replace"), str(p))
        keys = cls.generate()
        text = f"# bergen log keys: the last one writes, every one verifies\n{keys.line()}\n"
        if not write_once(p, text):
            return cls.load_or_create(p)
        return keys

    def line(self, key_id: str | None = None) -> str:
        """The key file's line for `key_id` (default: the writing key)."""
        key_id = key_id or self.writing
        return f"{key_id} {self._keys[key_id].hex()}"


def write_once(path: Path, text: str) -> bool:
    """Make `path` holding `text` (owner-only, whole or not at all) unless it exists. Returns
    whether this call made it: another replica may have made it at the same moment, and the
    first one made is kept. Raises OSError when it cannot be made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(text)
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)
    return True


def add_key(path: str | os.PathLike[str], key_id: str) -> LogKeys:
    """Append a new random key `key_id` to the file at `path`: it writes from the next start.
    Raises ValueError for a key id that is malformed or already there."""
    keys = LogKeys.load_or_create(path)
    if keys.key(key_id) is not None:
        raise ValueError(f"key id {key_id!r} is already in {path}")
    line = f"{key_id} {secrets.token_bytes(KEY_BYTES).hex()}"
    if _LINE.match(line) is None:
        raise ValueError(f"key id {key_id!r}: use 1 to 32 letters, digits, '_', '.' or '-'")
    with open(path, "a", encoding="ascii") as f:
        f.write(line + "\n")
    return LogKeys.load_or_create(path)
