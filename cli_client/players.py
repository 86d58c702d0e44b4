"""The players this user registered, kept for each server in the user's configuration folder.

A player's token is its only secret, and the server shows it once: `bergen player register`
writes it to `players/<server>/<player-id>.json` in the user's configuration folder
(`userdir.config_dir`), the server named as `address_key` names it (any listener of this
machine on port P is `local-P`), the file of mode 0600 in folders of mode 0700:
`{"format", "server", "player_id", "name", "bot", "player_token"}`. `bergen play`,
`bergen bots` and the tournament commands find their players there (`choose`,
`bot_players`); nothing prints a token unless asked (`bergen player register
--show-token`).

`bergen bots` keeps its bots as bot players the same way, named by policy and number
(`bot-greedy-1`), so that the same bots keep their ratings from one run to the next.
"""

from __future__ import annotations

import json
import os
import secrets
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from bergen.api.exit_status import ExitStatus
from bergen.api.state import address_key
from bergen.domain.players import name_key
from bergen.v1 import bergen_pb2 as pb

from .client import Client
from .connect import error_info, reason_of
from .usage import Failed
from .userdir import config_dir

FORMAT = "bergen-player/1"
FOLDER = "players"
BOT_NAME_ATTEMPTS = 1000
"""Bot numbers tried before a policy's bots give up finding names nobody else registered."""


class KeptPlayerError(Failed):
    """A kept player's file that cannot be read or is not one (exit status 2, the file
    named)."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path}: {why}", ExitStatus.USAGE, "BAD_PLAYER_FILE")


@dataclass(frozen=True, slots=True)
class KeptPlayer:
    """A registered player whose token this user holds, on one server."""

    server: str
    player_id: str
    name: str
    bot: bool
    token: str
    path: Path

    def __repr__(self) -> str:  # never the token
        return f"KeptPlayer({self.server!r}, {self.player_id!r}, {self.name!r}, bot={self.bot})"

    def is_named(self, text: str) -> bool:
        """Whether `text` is this player's id, or its name whatever the case or width."""
        return text == self.player_id or name_key(text) == name_key(self.name)


def players_dir(server: str) -> Path:
    """The folder of the players kept for `server` (HOST:PORT)."""
    return config_dir() / FOLDER / address_key(server)


def _private_folder(folder: Path) -> None:
    """`folder` and the players' folders above it, made with mode 0700 (and set to it)."""
    for level in (folder.parent.parent, folder.parent, folder):
        level.mkdir(mode=0o700, parents=True, exist_ok=True)
    for level in (folder.parent, folder):
        os.chmod(level, 0o700)


def keep(server: str, player_id: str, name: str, bot: bool, token: str) -> KeptPlayer:
    """Write a registered player's file (mode 0600, written whole then renamed into place).
    Returns it. Raises OSError."""
    folder = players_dir(server)
    _private_folder(folder)
    path = folder / f"{uuid.UUID(player_id)}.json"
    data = {
        "format": FORMAT,
        "server": server,
        "player_id": player_id,
        "name": name,
        "bot": bot,
        "player_token": token,
    }
    tmp = folder / f".{path.name}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False, indent=1)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return KeptPlayer(server, player_id, name, bot, token, path)


def _read(path: Path, server: str) -> KeptPlayer:
    """Raises KeptPlayerError."""
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise KeptPlayerError(path, f"cannot be read: {e.strerror or e}") from None
    except (UnicodeDecodeError, ValueError):
        raise KeptPlayerError(path, "not a player's file (not JSON)") from None
    fields = {"player_id": str, "name": str, "bot": bool, "player_token": str}
    if (
        not isinstance(data, dict)
        or data.get("format") != FORMAT
        or any(not isinstance(data.get(k), t) for k, t in fields.items())
    ):
        raise KeptPlayerError(path, f"not a player's file ({FORMAT})")
    return KeptPlayer(
        server, data["player_id"], data["name"], data["bot"], data["player_token"], path
    )


def kept(server: str) -> list[KeptPlayer]:
    """The players kept for `server`, by name. Raises KeptPlayerError for a file of the
    folder that is not a player's."""
    folder = players_dir(server)
    try:
        paths = sorted(p for p in folder.glob("*.json") if not p.name.startswith("."))
    except OSError:
        return []
    return sorted((_read(p, server) for p in paths), key=lambda p: name_key(p.name))


def find(server: str, text: str) -> KeptPlayer | None:
    """The kept player of `server` named `text` (its name in any case or width, or its id).
    Raises KeptPlayerError."""
    return next((p for p in kept(server) if p.is_named(text)), None)


def names(players: Iterable[KeptPlayer]) -> str:
    return ", ".join(p.name for p in players) or "none"


def named(server: str, text: str) -> KeptPlayer:
    """The kept player `text` names. Raises Failed (PLAYER_NOT_KEPT, exit 2) when none is."""
    players = kept(server)
    found = next((p for p in players if p.is_named(text)), None)
    if found is None:
        raise Failed(
            f"no player {text!r} is kept for {server} (kept: {names(players)}); "
            "`bergen player register NAME` registers one",
            ExitStatus.USAGE,
            "PLAYER_NOT_KEPT",
        )
    return found


def choose(server: str, wanted: str | None, name: str | None = None) -> KeptPlayer | None:
    """The player a person plays as on `server`: `wanted` (--player NAME) when given, else
    the only person (not bot) kept for it, unless `name` (--name) names someone else;
    None to play by a name alone. Raises Failed: PLAYER_NOT_KEPT for a `wanted` not kept."""
    if wanted is not None:
        return named(server, wanted)
    people = [p for p in kept(server) if not p.bot]
    if name is not None:
        return next((p for p in people if p.is_named(name)), None)
    return people[0] if len(people) == 1 else None


def must_choose(server: str, wanted: str | None, name: str | None = None) -> KeptPlayer:
    """`choose`, for a rated match or tournament, where a player is required. Raises Failed
    (exit 2): PLAYER_REQUIRED when none is kept, or several and none is named."""
    chosen = choose(server, wanted, name)
    if chosen is not None:
        return chosen
    people = [p for p in kept(server) if not p.bot]
    if not people:
        why = (
            f"a rated match seats registered players, and none is kept for {server}: "
            "`bergen player register NAME` registers one"
        )
    elif name is not None:
        why = f"a rated match seats registered players, and {name!r} is none of yours " + (
            f"(kept: {names(people)}); say --player NAME"
        )
    else:
        why = f"several players are kept for {server} ({names(people)}): say which with --player"
    raise Failed(why, ExitStatus.USAGE, "PLAYER_REQUIRED")


def register(client: Client, name: str, bot: bool) -> pb.RegisterPlayerResponse:
    """RegisterPlayer, sent once: a registration sent again after its answer was lost would
    find the name taken by the first, whose token nobody holds. Sent again only when the
    server said its store wrote nothing (STORAGE_UNAVAILABLE: a database failing over, say),
    for up to REGISTER_PATIENCE_S. Raises grpc.RpcError."""
    deadline = time.monotonic() + REGISTER_PATIENCE_S
    while True:
        try:
            reply: pb.RegisterPlayerResponse = client.call(
                "RegisterPlayer", pb.RegisterPlayerRequest(name=name, bot=bot), retry=False
            )
            return reply
        except grpc.RpcError as e:
            if reason_of(e) != "STORAGE_UNAVAILABLE" or time.monotonic() >= deadline:
                raise
            time.sleep(0.5)


REGISTER_PATIENCE_S = 60.0
"""How long a registration waits for a store that wrote nothing to come back."""


def register_and_keep(client: Client, server: str, name: str, bot: bool) -> KeptPlayer:
    """Register a player and keep its token. Raises grpc.RpcError, OSError (the token
    could not be written: it is then lost)."""
    reply = register(client, name, bot)
    return keep(server, reply.player_id, reply.name, bot, reply.player_token)


def bot_name(policy: str, number: int) -> str:
    return f"bot-{policy}-{number}"


def refused_for(error: grpc.RpcError) -> str | None:
    """The reason of a refusal (`NAME_TAKEN`), None for a call that failed otherwise."""
    info = error_info(error)
    return info.reason if info is not None and info.reason else None


class BotPlayers:
    """The bot players of each policy kept for a server, registered as they are first
    needed: `bot-greedy-1`, `bot-greedy-2`... A number whose name someone else registered
    is passed over. Not thread-safe: take the bots before the threads start."""

    def __init__(self, client: Client, server: str) -> None:
        self.client = client
        self.server = server
        self._by_policy: dict[str, list[KeptPlayer]] = {}
        self._tried: dict[str, int] = {}
        self._taken: dict[str, int] = {}

    def of(self, policy: str, count: int) -> list[KeptPlayer]:
        """The first `count` bot players of `policy`. Raises grpc.RpcError, OSError,
        KeptPlayerError; Failed when no free name is found."""
        mine = self._by_policy.setdefault(policy, [])
        while len(mine) < count:
            mine.append(self._next(policy))
        return mine[:count]

    def take(self, policy: str) -> KeptPlayer:
        """The next bot player of `policy` not taken yet (each entrant of a tournament its
        own). Raises as `of`."""
        mine = self._by_policy.setdefault(policy, [])
        taken = self._taken.get(policy, 0)
        self._taken[policy] = taken + 1
        while len(mine) <= taken:
            mine.append(self._next(policy))
        return mine[taken]

    def _next(self, policy: str) -> KeptPlayer:
        while True:
            number = self._tried.get(policy, 0) + 1
            self._tried[policy] = number
            if number > BOT_NAME_ATTEMPTS:
                raise Failed(
                    f"no free name for a {policy} bot: {bot_name(policy, 1)} to "
                    f"{bot_name(policy, BOT_NAME_ATTEMPTS)} are all taken",
                    ExitStatus.ERROR,
                    "NAME_TAKEN",
                )
            name = bot_name(policy, number)
            found = find(self.server, name)
            if found is not None and found.bot:
                return found
            if found is not None:
                continue  # a person of that name kept here: not a bot to play
            try:
                return register_and_keep(self.client, self.server, name, bot=True)
            except grpc.RpcError as e:
                if refused_for(e) != "NAME_TAKEN":
                    raise
            # Another process sharing this folder may have just registered it.
            found = find(self.server, name)
            if found is not None and found.bot:
                return found


__all__ = [
    "BotPlayers",
    "KeptPlayer",
    "KeptPlayerError",
    "bot_name",
    "choose",
    "find",
    "keep",
    "kept",
    "must_choose",
    "named",
    "players_dir",
    "refused_for",
    "register",
    "register_and_keep",
]
