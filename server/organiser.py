"""The organiser token a server starts with (`organiser_token`), and its file named in the
state folder for the organiser's commands on this machine (`name_token_file`)."""

from __future__ import annotations

import logging
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from bergen.api.state import ORGANISER_TOKEN_FILE, forget_token_file, record_token_file

from . import auth
from .config import ORGANISER_TOKEN_ENV, Config

log = logging.getLogger("bergen.server")


@dataclass(frozen=True)
class OwnToken:
    """The organiser token file this server uses because it was given none: where it is, and
    whether this start made it."""

    path: Path
    made: bool


def organiser_token(config: Config) -> tuple[str | None, OwnToken | None]:
    """The organiser token, and the file of it when it is the server's own: from
    --organiser-token-file, else BERGEN_ORGANISER_TOKEN, else ORGANISER_TOKEN_FILE beside the
    signing key (`auth.organiser_token_file`: made on first start); none with --no-organiser.
    Raises ValueError, saying why in one line, for a file that cannot be read or made, or a
    token that `auth.check_organiser_token` refuses."""
    if config.no_organiser:
        if config.organiser_token_file:
            raise ValueError("--no-organiser and --organiser-token-file: give one or the other")
        return None, None
    token = config.organiser_token
    if config.organiser_token_file:
        try:
            with open(config.organiser_token_file, encoding="utf-8") as f:
                token = f.read().strip() or None
        except (OSError, UnicodeDecodeError) as e:
            why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            raise ValueError(f"--organiser-token-file {config.organiser_token_file}: {why}") from e
        if token is None:
            raise ValueError(f"--organiser-token-file {config.organiser_token_file}: it is empty")
    if token is not None:
        auth.check_organiser_token(token)
        return token, None
    path = Path(config.signing_key).absolute().with_name(ORGANISER_TOKEN_FILE)
    try:
        token, made = auth.organiser_token_file(path)
    except auth.WeakToken as e:
        raise ValueError(f"organiser token file {path}: {e}") from e
    except (OSError, UnicodeDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise ValueError(
            f"organiser token file {path}: {why} (give --organiser-token-file FILE, "
            f"{ORGANISER_TOKEN_ENV}, or --no-organiser)"
        ) from e
    return token, OwnToken(path, made)


def name_token_file(listen: str, port: int, token: str | None, own: OwnToken | None) -> None:
    """Say where the organiser token is (never the token), and name the server's own token
    file for the address it listens on in the state folder (`bergen.api.state`), so that the
    organiser's commands on this machine find it; with another token or none, forget any such
    name for the address (an earlier server's, whose token this one does not take). A state
    folder that cannot be written is a warning."""
    host = listen.rpartition(":")[0]
    address = f"{host}:{port}"
    if token is None:
        log.info("no organiser token: nobody can create tournaments on this server")
    elif own is not None:
        log.info(
            "organiser token %s %s (the token itself is never logged)",
            "made now in" if own.made else "read from",
            own.path,
        )
    if own is None:
        with suppress(OSError):
            forget_token_file(address)
        return
    try:
        pointer = record_token_file(address, own.path)
    except OSError as e:
        log.warning(
            "cannot name the organiser token file for %s in the state folder (%s): give the "
            "organiser's commands --organiser-token-file %s",
            address,
            e.strerror or e,
            own.path,
        )
        return
    log.info("organiser token file named for %s in %s", address, pointer)
