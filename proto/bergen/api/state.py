"""What the server and the clients of one user keep on this machine, in one folder, and how
a client finds the organiser token of a server of this machine.

The folder (`state_dir`): `$BERGEN_STATE_DIR`, else `$XDG_STATE_HOME/bergen`, else
`~/.local/state/bergen`. The clients keep their seat and entrant files there; a server that
made its own organiser token (`bergen serve` with no token given) writes there, owner-only,
a small file naming the token file's absolute path for the address it listens on
(`record_token_file`), so that `bergen tournament create` on this machine finds the token
with no option (`recorded_token_file`). The file holds no secret: only where the token is,
which only its owner can read.

Every listener of this machine on one port is one server to a client: `127.0.0.1:P`,
`localhost:P`, `[::1]:P`, `0.0.0.0:P` and `[::]:P` are one address (`address_key`).
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

STATE_DIR_ENV = "BERGEN_STATE_DIR"
ORGANISER_TOKEN_FILE = "bergen-organiser-token"
"""The name of the token file `bergen serve` makes beside its signing key, and of the one a
client looks for in its current folder."""
POINTER_FORMAT = "bergen-organiser-token-pointer/1"
_THIS_MACHINE = frozenset({"127.0.0.1", "localhost", "::1", "0.0.0.0", "::", ""})


def state_dir() -> Path:
    """$BERGEN_STATE_DIR, else $XDG_STATE_HOME/bergen, else ~/.local/state/bergen."""
    env = os.environ.get(STATE_DIR_ENV)
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".local" / "state"
    return base / "bergen"


def split_address(address: str) -> tuple[str, str]:
    """(host, port) of HOST:PORT, the host without brackets and in lower case."""
    host, _, port = address.rpartition(":")
    return host.removeprefix("[").removesuffix("]").lower(), port


def is_this_machine(address: str) -> bool:
    """Whether HOST:PORT names this machine's loopback or every interface of it."""
    return split_address(address)[0] in _THIS_MACHINE


def address_key(address: str) -> str:
    """The name an address goes by here: `local-P` for any listener of this machine on port
    P, else `HOST-P` (its characters kept to letters, digits, `.` and `-`)."""
    host, port = split_address(address)
    if host in _THIS_MACHINE:
        host = "local"
    safe = "".join(c if c.isalnum() or c in ".-" else "_" for c in host)
    return f"{safe}-{port}"


def pointer_path(address: str) -> Path:
    """Where the token file of the server at `address` is named."""
    return state_dir() / f"organiser-token-for-{address_key(address)}.json"


def record_token_file(address: str, token_file: Path) -> Path:
    """Name `token_file` (made absolute) as the organiser token of the server listening on
    `address`, in an owner-only file written atomically. Returns that file. Raises OSError."""
    path = pointer_path(address)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    data = {"format": POINTER_FORMAT, "server": address, "token_file": str(token_file.absolute())}
    tmp = path.with_name(f"{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def forget_token_file(address: str) -> bool:
    """Remove the name of a token file for `address` (a server there now has another token,
    or none). Returns whether there was one. Raises OSError but for a missing file."""
    try:
        pointer_path(address).unlink()
    except FileNotFoundError:
        return False
    return True


class PointerError(ValueError):
    """A pointer file that cannot be trusted or read: the message says why, `reason` names it
    (NOT_YOURS for another user's file, UNREADABLE otherwise)."""

    def __init__(self, message: str, reason: str = "UNREADABLE") -> None:
        super().__init__(message)
        self.reason = reason


def recorded_token_file(address: str) -> Path | None:
    """The token file a server of this machine named for `address`, None when none did.
    Raises PointerError for a pointer file of another user, or one that cannot be read."""
    path = pointer_path(address)
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise PointerError(f"{path}: {e.strerror or e}") from None
    if info.st_uid != os.getuid():
        raise PointerError(f"{path} belongs to another user: it is not used", "NOT_YOURS")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else "not a pointer file"
        raise PointerError(f"{path}: {why}") from None
    if not isinstance(data, dict) or data.get("format") != POINTER_FORMAT:
        raise PointerError(f"{path}: not a pointer file")
    named = data.get("token_file")
    if not isinstance(named, str) or not os.path.isabs(named):
        raise PointerError(f"{path}: names no token file")
    return Path(named)


__all__ = [
    "ORGANISER_TOKEN_FILE",
    "STATE_DIR_ENV",
    "PointerError",
    "address_key",
    "forget_token_file",
    "is_this_machine",
    "pointer_path",
    "record_token_file",
    "recorded_token_file",
    "split_address",
    "state_dir",
]
