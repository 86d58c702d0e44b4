"""The exit statuses of every `bergen` command, the server's included: each number means one
thing everywhere. It lives in the package both the server and the clients import, so that
`bergen serve` and the client commands share it without either importing the other.
"""

from __future__ import annotations

from enum import IntEnum


class ExitStatus(IntEnum):
    """What a command's exit status says (the README lists them, "Exit statuses")."""

    SUCCESS = 0
    ERROR = 1
    USAGE = 2
    NOT_FOUND = 3
    REFUSED = 4
    UNREACHABLE = 5
    INVALID = 6
    NOT_READY = 7
    UNTRUSTED = 8
    INCONSISTENT = 9
    INTERRUPTED = 130

    @property
    def meaning(self) -> str:
        return _MEANINGS[self]


_MEANINGS: dict[ExitStatus, str] = {
    ExitStatus.SUCCESS: "done",
    ExitStatus.ERROR: "any other error",
    ExitStatus.USAGE: "bad arguments or input, or a request the server calls malformed",
    ExitStatus.NOT_FOUND: "the server has no such match, tournament or player",
    ExitStatus.REFUSED: (
        "the server refused: the token, a name taken, or the match is not in a state for it"
    ),
    ExitStatus.UNREACHABLE: "the server does not answer, or not in time",
    ExitStatus.INVALID: (
        "a record or an event log is rejected: it does not check, a server's key is not "
        "the one known for it, or a server's ratings are not what its records give"
    ),
    ExitStatus.NOT_READY: (
        "the server cannot start: its database cannot be opened, its schema is behind, "
        "or it cannot listen"
    ),
    ExitStatus.UNTRUSTED: (
        "a record checks, but no trusted key says who signed it: give --public-key, or "
        "verify a match through its server once so that its key is known"
    ),
    ExitStatus.INCONSISTENT: (
        "a log's checkpoints conflict: a consistency proof that does not verify, a tree "
        "smaller than one seen, or two roots for one size (both checkpoints are printed)"
    ),
    ExitStatus.INTERRUPTED: "interrupted (Ctrl-C)",
}


def help_text() -> str:
    """The statuses as an argparse epilog, one line each."""
    return "exit statuses:\n" + "\n".join(f"  {int(s):>3}  {s.meaning}" for s in ExitStatus)
