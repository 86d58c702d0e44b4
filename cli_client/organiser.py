"""The organiser token of the organiser's commands (`bergen tournament create|start|round|
withdraw|settle|cancel`, `bergen abandon`), looked for in this order:

1. `--organiser-token-file FILE`;
2. `$BERGEN_ORGANISER_TOKEN`;
3. the token the server on this machine made: `bergen serve` started with neither names the
   file it made (`bergen-organiser-token` beside its signing key) for the address it listens
   on, in the state folder (`bergen.api.state`), and the address of `--server` is looked up
   there (any listener of this machine on the same port is the same server);
4. `./bergen-organiser-token` in the current folder, for a server of this machine only (a
   token is never sent, unasked, to a server elsewhere).

A file found on the way (3 or 4) must belong to the user running the command.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from bergen.api.exit_status import ExitStatus
from bergen.api.state import (
    ORGANISER_TOKEN_FILE,
    PointerError,
    is_this_machine,
    pointer_path,
    recorded_token_file,
)

from .usage import Failed

ORGANISER_ENV = "BERGEN_ORGANISER_TOKEN"
FILE_OPTION = "--organiser-token-file"
HOW = (
    f"give {FILE_OPTION} FILE or set {ORGANISER_ENV} (the server's own token is the file "
    f"{ORGANISER_TOKEN_FILE} beside its signing key)"
)
"""How to give an organiser token, as every refusal for want of one says it."""


def add_organiser_option(parser: argparse.ArgumentParser) -> None:
    """`--organiser-token-file FILE`, which `organiser_token` reads first."""
    parser.add_argument(
        FILE_OPTION,
        metavar="FILE",
        help=f"file holding the organiser token (else ${ORGANISER_ENV}, else the token the "
        "server on this machine made, else ./" + ORGANISER_TOKEN_FILE + ")",
    )


def _read(path: Path, what: str, own: bool) -> str:
    """The token in `path`. With `own`, a file of another user is refused. Raises Failed."""
    try:
        if own and path.stat().st_uid != os.getuid():
            raise Failed(
                f"{what} {path} belongs to another user: it is not used; {HOW}",
                ExitStatus.USAGE,
                "ORGANISER_TOKEN_NOT_YOURS",
            )
        token = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise Failed(
            f"{what} {path} does not exist; {HOW}", ExitStatus.USAGE, "NO_ORGANISER_TOKEN"
        ) from None
    except (OSError, UnicodeDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else "not text"
        raise Failed(
            f"{what} {path} cannot be read: {why}", ExitStatus.USAGE, "ORGANISER_TOKEN_UNREADABLE"
        ) from None
    if not token:
        raise Failed(f"{what} {path} is empty; {HOW}", ExitStatus.USAGE, "NO_ORGANISER_TOKEN")
    return token


def organiser_token(args: argparse.Namespace, required: bool = True) -> str | None:
    """The organiser token for the server of `args.server`, looked for as this module says;
    None when there is none and it is not `required`.

    Raises Failed (USAGE): a file that cannot be read, is empty or belongs to another user;
    with `required`, no token found, saying how to give one."""
    given = getattr(args, "organiser_token_file", None)
    if given:
        return _read(Path(given), FILE_OPTION, own=False)
    token = os.environ.get(ORGANISER_ENV)
    if token:
        return token
    server: str = args.server
    stale = ""
    try:
        recorded = recorded_token_file(server)
    except PointerError as e:
        raise Failed(f"{e}; {HOW}", ExitStatus.USAGE, f"ORGANISER_TOKEN_{e.reason}") from None
    if recorded is not None:
        if recorded.exists():
            return _read(recorded, "the organiser token file", own=True)
        stale = f"; {pointer_path(server)} names {recorded}, which is gone"
    here = Path(ORGANISER_TOKEN_FILE)
    if is_this_machine(server) and here.exists():
        return _read(here.absolute(), "the organiser token file", own=True)
    if not required:
        return None
    raise Failed(
        f"needs the organiser token of {server}: {HOW}{stale}",
        ExitStatus.USAGE,
        "NO_ORGANISER_TOKEN",
    )


__all__ = ["FILE_OPTION", "HOW", "ORGANISER_ENV", "add_organiser_option", "organiser_token"]
