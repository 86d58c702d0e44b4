"""Registered players (RATINGS.md section 1): the aggregate as the repository folds it, its
commands, and the player token.

A player is a stream of its own, `player-<player_id>`, in the one event store; its id follows
from its name (`bergen.domain.players.player_id_of`), so two registrations of one name (any
case or width) race on one stream and the second is refused: the name is taken. A player is
loaded, cached and written by the same repository and unit of work as a match.

The player token is the player's secret, made here and shown once: `bgp_`, the player's id
(16 bytes), then 32 random bytes, in base64url. The server keeps it only sealed as a seat
token is (HMAC-SHA256 under a key derived from the log keys for player tokens), in the
registration's metadata. A token names its player, so checking one is one read of that
player (a cached one, at once); a token that names no player, or another secret for one,
gets one and the same answer.
"""

from __future__ import annotations

import base64
import binascii
import logging
import secrets
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bergen.domain.errors import (
    AlreadyExists,
    BergenError,
    ConcurrencyConflict,
    CorruptRecord,
    InvalidArgument,
    NotFound,
    Unauthenticated,
)
from bergen.domain.players import (
    Player,
    PlayerEvent,
    RegisterPlayer,
    check_name,
    decide_player,
    decode_player_event,
    encode_player_event,
    evolve_player,
    fold_player,
    player_id_of,
)

from .auth import KeyedSecrets, SealedToken
from .keys import PLAYER_TOKEN_PURPOSE, LogKeys
from .projections import PLAYER_STREAM_PREFIX
from .store import EventRow, EventStore, NewEvent, StoredEvent
from .unit_of_work import Feed, Intent, Repository, UnitOfWork

log = logging.getLogger("bergen.server.players")

TOKEN_PREFIX = "bgp_"
_ID_CHARS = 22
"""A player id's 16 bytes in base64url, unpadded."""
_SECRET_BYTES = 32
_SECRET_CHARS = 43
TOKEN_CHARS = len(TOKEN_PREFIX) + _ID_CHARS + _SECRET_CHARS
TOKEN_KEY = "player_token_hmac"
"""A registration's metadata: the player token sealed."""
TOKEN_KEY_ID = "player_token_key"
"""The id of the log key whose player-token key sealed it."""
LEGACY_TOKEN_KEY = "player_token_sha256"
"""The player token's plain SHA-256, on a store that authenticates nothing (tests of the
store alone), as for seat tokens."""
PLAYERS_KEPT = 10_000
"""Players kept folded in a process."""


@dataclass(frozen=True, slots=True)
class RegisteredPlayer:
    """A player as the server keeps it: the player, and its token as sealed."""

    player: Player
    token: SealedToken

    @property
    def version(self) -> int:
        return self.player.version


def player_stream(player_id: str) -> str:
    return PLAYER_STREAM_PREFIX + player_id


def new_player_token(player_id: str) -> str:
    """A fresh token for `player_id`: its id, then 256 random bits."""
    named = base64.urlsafe_b64encode(uuid.UUID(player_id).bytes).decode().rstrip("=")
    return TOKEN_PREFIX + named + secrets.token_urlsafe(_SECRET_BYTES)


def player_of_token(token: str) -> str | None:
    """The player id a token names; None for text that is no player token."""
    if len(token) != TOKEN_CHARS or not token.startswith(TOKEN_PREFIX):
        return None
    named = token[len(TOKEN_PREFIX) : len(TOKEN_PREFIX) + _ID_CHARS]
    try:
        raw = base64.urlsafe_b64decode(named + "==")
    except (binascii.Error, ValueError):
        return None
    return str(uuid.UUID(bytes=raw)) if len(raw) == 16 else None


def _sealed(extra: Mapping[str, str], where: str) -> SealedToken:
    digest, key_id = extra.get(TOKEN_KEY), extra.get(TOKEN_KEY_ID)
    if digest is not None and key_id is not None:
        return SealedToken(digest, key_id)
    legacy = extra.get(LEGACY_TOKEN_KEY)
    if legacy is None:
        raise CorruptRecord(f"{where}: the player token is not recorded")
    return SealedToken(legacy)


def token_metadata(sealed: SealedToken) -> dict[str, str]:
    """What a registration records of its sealed token."""
    if sealed.key_id is None:
        return {LEGACY_TOKEN_KEY: sealed.digest}
    return {TOKEN_KEY: sealed.digest, TOKEN_KEY_ID: sealed.key_id}


class PlayerKind:
    """What a player is to the repository and the unit of work (`bergen.server.unit_of_work`):
    its own stream, folded by the domain's `evolve_player`."""

    noun = "player"

    def stream_id(self, aggregate_id: str) -> str:
        return player_stream(aggregate_id)

    def missing(self, aggregate_id: str) -> BergenError:
        return NotFound(
            f"no player {aggregate_id}", reason="PLAYER_NOT_FOUND", player_id=aggregate_id
        )

    def fold(
        self,
        known: RegisteredPlayer | None,
        rows: Sequence[EventRow] | Sequence[StoredEvent],
    ) -> RegisteredPlayer:
        player = known.player if known is not None else None
        token = known.token if known is not None else None
        for row in rows:
            where = f"player stream {row.stream_id} seq {row.seq}"
            version = player.version if player is not None else 0
            if row.seq != version + 1:
                raise CorruptRecord(f"{where} does not follow seq {version}")
            try:
                event = decode_player_event(row.type, row.schema_version, row.payload)
                player = evolve_player(player, event)
            except CorruptRecord as err:
                raise CorruptRecord(f"{where}: {err.message}"[:300]) from err
            if row.stream_id != player_stream(player.player_id):
                raise CorruptRecord(f"{where}: it registers another player")
            token = _sealed(row.metadata.extra, where)
        if player is None or token is None:
            raise NotFound("no such player", reason="PLAYER_NOT_FOUND")
        return RegisteredPlayer(player, token)

    def decide(
        self, known: RegisteredPlayer | None, command: RegisterPlayer
    ) -> tuple[tuple[PlayerEvent, ...], Player]:
        events = decide_player(known.player if known is not None else None, command)
        return events, fold_player(events)

    def encode(self, event: PlayerEvent) -> NewEvent:
        return NewEvent(*encode_player_event(event))

    def saved(
        self,
        known: RegisteredPlayer | None,
        appended: Sequence[StoredEvent],
        decided: tuple[tuple[PlayerEvent, ...], Player],
    ) -> RegisteredPlayer:
        return self.fold(known, appended)

    def fingerprint(self, known: RegisteredPlayer, command_id: str) -> str | None:
        return None  # a registration has no command id: its token is shown once

    def replayed(
        self, known: RegisteredPlayer, command_id: str
    ) -> tuple[tuple[PlayerEvent, ...], int, Player]:
        raise AssertionError("a registration is never answered from the log")


class PlayerRepository(Repository[RegisteredPlayer, RegisterPlayer, PlayerEvent, Player]):
    """Reads players from the store through a bounded per-process cache."""

    def __init__(self, store: EventStore, cache_size: int = PLAYERS_KEPT) -> None:
        super().__init__(store, PlayerKind(), cache_size)


class PlayerWork(UnitOfWork[RegisteredPlayer, RegisterPlayer, PlayerEvent, Player]):
    """The unit of work of players (`bergen.server.unit_of_work.UnitOfWork`)."""


def _unknown_token() -> Unauthenticated:
    return Unauthenticated(
        "the player token is not a registered player's", reason="PLAYER_TOKEN_INVALID"
    )


class Players:
    """Registering players, checking their tokens and finding them by id or name."""

    def __init__(
        self,
        store: EventStore,
        feed: Feed | None,
        log_keys: LogKeys | None,
        repository: PlayerRepository | None = None,
    ) -> None:
        self.repository = repository or PlayerRepository(store)
        self._work = PlayerWork(store, self.repository, feed)
        self._tokens = KeyedSecrets(log_keys, PLAYER_TOKEN_PURPOSE)

    def register(self, name: str, bot: bool) -> tuple[Player, str]:
        """Register a player named `name`. Returns it and its token (shown once). Raises
        InvalidArgument (a name that breaks a rule), AlreadyExists (NAME_TAKEN)."""
        shown = check_name(name)
        player_id = player_id_of(shown)
        try:
            taken = self.repository.load(player_id)
        except NotFound:
            taken = None
        if taken is not None:
            decide_player(taken.player, RegisterPlayer(shown, bot))  # raises NAME_TAKEN
        token = new_player_token(player_id)
        extra = token_metadata(self._tokens.seal(token))
        try:
            written = self._work.run(
                player_id,
                lambda _: Intent(RegisterPlayer(shown, bot), "anonymous", "register", extra),
                new=True,
            )
        except ConcurrencyConflict:
            # Another registration of the same name (any spelling) was written first.
            raise AlreadyExists(
                f"the name {shown!r} is taken (names differing only in case or width are one name)",
                reason="NAME_TAKEN",
                player_id=player_id,
            ) from None
        player = written.aggregate.player
        log.info("player %s registered%s", player.player_id, " (a bot)" if player.bot else "")
        return player, token

    def authenticate(self, token: str) -> Player:
        """The player whose token `token` is. Raises Unauthenticated (PLAYER_TOKEN_INVALID)
        alike for text that is no player token, a token naming no player, and another
        secret for a player that exists."""
        if not isinstance(token, str):
            raise _unknown_token()
        player_id = player_of_token(token)
        if player_id is None:
            raise _unknown_token()
        found = self.repository.cached(player_id)
        if found is None:
            try:
                found = self.repository.load(player_id)
            except NotFound:
                raise _unknown_token() from None
        if not self._tokens.matches(token, found.token):
            raise _unknown_token()
        return found.player

    def get(self, player_id: str = "", name: str = "") -> Player:
        """The player of `player_id`, or else named `name` (any spelling the same but for
        case and width). Raises InvalidArgument for neither or a malformed id, NotFound
        (PLAYER_NOT_FOUND)."""
        by_id = bool(player_id)
        if by_id:
            try:
                player_id = str(uuid.UUID(player_id))
            except ValueError:
                raise InvalidArgument(
                    "player_id is a player's id as RegisterPlayer gives it",
                    reason="INVALID_PLAYER_ID",
                ) from None
        elif name:
            if len(name) > 4 * 24:
                raise NotFound(f"no player named {name[:24]!r}...", reason="PLAYER_NOT_FOUND")
            player_id = player_id_of(name)
        else:
            raise InvalidArgument("name a player by id or by name", reason="PLAYER_REQUIRED")
        found = self.repository.cached(player_id)
        if found is None:
            try:
                found = self.repository.load(player_id)
            except NotFound:
                raise NotFound(
                    f"no player {player_id}" if by_id else f"no player named {name!r}",
                    reason="PLAYER_NOT_FOUND",
                ) from None
        return found.player


__all__ = [
    "PlayerRepository",
    "Players",
    "RegisteredPlayer",
    "new_player_token",
    "player_of_token",
    "player_stream",
]
