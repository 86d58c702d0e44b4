"""The player aggregate (RATINGS.md section 1): `decide`, `evolve`, `fold`, as for a match.

A player is an identity that outlives a match: a `player_id`, a unique name and a `bot` flag.
Its name is what people see; what makes two names the same is its `name_key`: NFKC, then
casefolded (and NFKC again, which casefolding may undo), so that `Ａnn` (full width), `ann`
and `ANN` are one name, and `Ánn` written with one code point or with a combining accent too.

The id follows from that key (`player_id_of`, a UUIDv5): a player's stream is keyed by its
name, so two registrations of one name race on one stream and only one is written, on any
store and any replica, with no index beside the events. Ids are public (a record names
them); a name is public too, so deriving one from the other gives nothing away.

The player token (the player's secret) is the server's business, not the rules': it is kept
sealed beside the event, as a seat token is.
"""

from __future__ import annotations

import unicodedata
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import AlreadyExists, CorruptRecord, InvalidArgument

MAX_NAME_CHARS = 24
"""A player's name is 1 to 24 characters after NFKC."""
PLAYER_NAMESPACE = uuid.UUID("6c1f3e0a-52b1-5c55-9d3e-bfa5f1a0d0b7")
"""The UUIDv5 namespace of player ids: `uuid5(PLAYER_NAMESPACE, name_key(name))`."""
PLAYER_SCHEMA_VERSION = 1
_PUNCTUATION = frozenset(" -_")


@dataclass(frozen=True, slots=True)
class RegisterPlayer:
    """Register a player named `name` (as given: it is checked and normalised here), a
    program when `bot`."""

    name: str
    bot: bool = False


@dataclass(frozen=True, slots=True)
class PlayerRegistered:
    """A player, its name as shown (NFKC) and whether it is a program."""

    player_id: str
    name: str
    bot: bool


PlayerEvent = PlayerRegistered
PLAYER_EVENT_TYPES: tuple[type[PlayerEvent], ...] = (PlayerRegistered,)


@dataclass(frozen=True, slots=True)
class Player:
    """A player folded up to `version` events."""

    player_id: str
    name: str
    bot: bool
    version: int = 1

    @property
    def name_key(self) -> str:
        return name_key(self.name)


def check_name(name: object) -> str:
    """`name` as a player's name is shown: NFKC. Raises InvalidArgument naming the rule it
    breaks: 1 to 24 characters (PLAYER_NAME_LENGTH); letters, digits, space, `-` and `_`,
    an accent only on a letter (PLAYER_NAME_CHARACTERS); no space first, last or next to
    another (PLAYER_NAME_SPACES)."""
    if not isinstance(name, str):
        raise InvalidArgument("a player's name is text", reason="PLAYER_NAME_CHARACTERS")
    shown = unicodedata.normalize("NFKC", name)
    if not 1 <= len(shown) <= MAX_NAME_CHARS:
        raise InvalidArgument(
            f"a player's name is 1 to {MAX_NAME_CHARS} characters (after NFKC), not {len(shown)}",
            reason="PLAYER_NAME_LENGTH",
            field="name",
        )
    previous = ""
    for i, c in enumerate(shown):
        kind = unicodedata.category(c)
        letter = kind[0] == "L"
        # A combining mark belongs to the letter before it (scripts whose vowels are marks;
        # a Latin accent has been composed by NFKC already).
        mark = kind[0] == "M" and i > 0 and previous in ("L", "M")
        if not (letter or mark or kind == "Nd" or c in _PUNCTUATION):
            raise InvalidArgument(
                f"a player's name holds letters, digits, spaces, '-' and '_' only, not "
                f"{unicodedata.name(c, f'U+{ord(c):04X}')} (character {i + 1})",
                reason="PLAYER_NAME_CHARACTERS",
                field="name",
            )
        previous = kind[0]
    if shown[0] == " " or shown[-1] == " " or "  " in shown:
        raise InvalidArgument(
            "a player's name does not begin or end with a space, nor hold two in a row",
            reason="PLAYER_NAME_SPACES",
            field="name",
        )
    return shown


def name_key(name: str) -> str:
    """What makes two names the same: NFKC, casefolded, NFKC again."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())


def player_id_of(name: str) -> str:
    """The id of the player named `name` (one registered, or one that would be)."""
    return str(uuid.uuid5(PLAYER_NAMESPACE, name_key(name)))


def decide_player(state: Player | None, command: RegisterPlayer) -> tuple[PlayerEvent, ...]:
    """The events `command` gives on `state` (None: no player of that name yet). Raises
    InvalidArgument for a name that breaks a rule of `check_name` or a bot flag that is not
    a bool, AlreadyExists (NAME_TAKEN) when the name (or one the same but for case and
    width) is a player's already."""
    name = check_name(command.name)
    if not isinstance(command.bot, bool):
        raise InvalidArgument("bot is true or false", reason="INVALID_ARGUMENT", field="bot")
    if state is not None:
        raise AlreadyExists(
            f"the name {name!r} is taken (by {state.name!r}; names differing only in case "
            "or width are one name)",
            reason="NAME_TAKEN",
            player_id=state.player_id,
        )
    return (PlayerRegistered(player_id_of(name), name, command.bot),)


def evolve_player(state: Player | None, event: PlayerEvent) -> Player:
    """Apply one event. Raises CorruptRecord for one that cannot follow `state`."""
    if state is not None:
        raise CorruptRecord(f"player {state.player_id}: registered twice")
    return Player(event.player_id, event.name, event.bot, 1)


def fold_player(events: Iterable[PlayerEvent], state: Player | None = None) -> Player:
    """The player after `events`. Raises CorruptRecord for no event, or ones that do not
    fold."""
    for e in events:
        state = evolve_player(state, e)
    if state is None:
        raise CorruptRecord("an empty stream holds no player")
    return state


def encode_player_event(event: PlayerEvent) -> tuple[str, int, dict[str, Any]]:
    """(type name, schema version, JSON-able payload)."""
    payload = {"player_id": event.player_id, "name": event.name, "bot": event.bot}
    return type(event).__name__, PLAYER_SCHEMA_VERSION, payload


def decode_player_event(type_name: str, version: int, payload: Mapping[str, Any]) -> PlayerEvent:
    """The event a stored payload holds. Raises CorruptRecord for an unknown type or version
    or a malformed payload."""
    if type_name != "PlayerRegistered":
        raise CorruptRecord(f"unknown player event type {type_name!r}"[:120])
    if version != PLAYER_SCHEMA_VERSION:
        raise CorruptRecord(f"{type_name}: unknown schema version {version!r}"[:120])
    if not isinstance(payload, Mapping) or set(payload) != {"player_id", "name", "bot"}:
        raise CorruptRecord(f"{type_name}: a payload is {{player_id, name, bot}}")
    pid, name, bot = payload["player_id"], payload["name"], payload["bot"]
    if not isinstance(pid, str) or not isinstance(name, str) or not isinstance(bot, bool):
        raise CorruptRecord(f"{type_name}: player_id and name are text, bot true or false")
    return PlayerRegistered(pid, name, bot)
