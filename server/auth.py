"""Seat and organiser tokens: random secrets, kept only as hashes, sent as bearer metadata.

A seat token is kept in its match's log, which GetAuditLog publishes, so it is kept keyed
(`SeatTokens`): HMAC-SHA256 under a key derived from a log key, which only the servers hold.
A plain hash would let anyone reading an audit log search for a token offline, and a token a
client made may hold less randomness than the server's own.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
import secrets
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bergen.api.chain import hmac_sha256
from bergen.domain.errors import Unauthenticated

from .keys import SEAT_TOKEN_PURPOSE, LogKeys, write_once

TOKEN_PREFIX = "bgs_"
TOKEN_BYTES = 32
"""256 bits of randomness per seat token."""

_TOKEN_FORM = r"[A-Za-z0-9_\-]{16,200}"
"""What a token sent to the server looks like, in a bearer entry or a request's field."""
_BEARER = re.compile(rf"^Bearer ({_TOKEN_FORM})$")
_TOKEN = re.compile(_TOKEN_FORM)
_SENDABLE = re.compile(r"[A-Za-z0-9_\-]*")
MAX_TOKEN_CHARS = 200
"""The longest token a bearer entry carries."""

ORGANISER_TOKEN_PREFIX = "bgo_"
MIN_ORGANISER_BITS = 128
GENERATED_BODY_CHARS = 43
"""The random part of a token the server makes: 32 bytes in base64url."""
CHECKSUM_CHARS = 6
_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
EXAMPLE_ORGANISER_TOKEN = "change-me-to-a-long-random-string"
"""The placeholder of deploy/bergen.env.example: a server given it refuses to start."""
_PLACEHOLDER = "change-me"
_CLASSES = ("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789", "_-")
_HEX = frozenset("0123456789abcdef")
_HEX_UPPER = frozenset("0123456789ABCDEF")
MIN_SPREAD_BITS = 64
"""Below this many bits by the token's own character frequencies, the token repeats itself
(`aaaa...`, `abab...`): a random one of the shortest length that can carry 128 bits still has
about 90."""


class WeakToken(ValueError):
    """An organiser token that cannot be used or cannot be trusted: the message says why, and
    never repeats the token."""


def new_seat_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)


def new_organiser_token() -> str:
    """A fresh organiser token in the server's own format: `bgo_`, 256 random bits (43
    base64url characters) and a checksum of them (6 base62 characters of their CRC-32), as
    code hosts make theirs: a secret scanner can tell one from any other string, and a
    mistyped one is told apart from a wrong one without a guess being tried."""
    body = secrets.token_urlsafe(TOKEN_BYTES)
    return ORGANISER_TOKEN_PREFIX + body + _checksum(body)


def is_generated_organiser_token(token: str) -> bool:
    """Whether `token` is in `new_organiser_token`'s format with a checksum that holds."""
    if not token.startswith(ORGANISER_TOKEN_PREFIX):
        return False
    rest = token[len(ORGANISER_TOKEN_PREFIX) :]
    body, check = rest[:-CHECKSUM_CHARS], rest[-CHECKSUM_CHARS:]
    return len(body) == GENERATED_BODY_CHARS and hmac.compare_digest(check, _checksum(body))


def _checksum(body: str) -> str:
    n = zlib.crc32(body.encode())
    digits = []
    for _ in range(CHECKSUM_CHARS):
        n, d = divmod(n, 62)
        digits.append(_BASE62[d])
    return "".join(reversed(digits))


def estimated_bits(token: str) -> float:
    """log2 of the guesses zxcvbn estimates an attacker needs for `token` (dictionary words,
    names, dates, keyboard walks, sequences, repeats and l33t spellings all count for little;
    a random string counts about 3.3 bits a character)."""
    from zxcvbn import zxcvbn

    guesses_log10: float = zxcvbn(token, max_length=MAX_TOKEN_CHARS)["guesses_log10"]
    return guesses_log10 * math.log2(10)


def check_organiser_token(token: str) -> None:
    """Refuse an organiser token that a client could never send, that is too short or too
    repetitive to hold 128 random bits, that is deploy/'s example value, or that is neither
    in the server's own format (`new_organiser_token`, its checksum holding) nor estimated at
    128 bits at least by zxcvbn.

    The randomness itself cannot be seen from the text. First what is checked is that the
    text can carry it: its length times the bits per character of the alphabet it draws on
    (hex digits count 4, base64url 6), that no few characters dominate it, and that it is not
    a shorter block repeated. Then a token the server did not make must hold up against an
    attacker's guessing as zxcvbn models it (words, names, keyboard walks, sequences, dates).
    Raises WeakToken.
    """
    if token == EXAMPLE_ORGANISER_TOKEN or _PLACEHOLDER in token.lower():
        raise WeakToken(
            "the organiser token is the example value of deploy/bergen.env.example: "
            "make a fresh one with `bergen token`"
        )
    if _SENDABLE.fullmatch(token) is None:
        bad = next(c for c in token if _SENDABLE.fullmatch(c) is None)
        raise WeakToken(
            f"the organiser token holds {bad!r}: a client can only send A-Z a-z 0-9 _ - "
            "(as 'authorization: Bearer <token>'); make one with `bergen token`"
        )
    if len(token) > MAX_TOKEN_CHARS:
        raise WeakToken(
            f"the organiser token has {len(token)} characters: a client can send at most "
            f"{MAX_TOKEN_CHARS}"
        )
    if _capacity_bits(token) < MIN_ORGANISER_BITS:
        raise WeakToken(
            f"the organiser token ({len(token)} characters) is too short to hold "
            f"{MIN_ORGANISER_BITS} random bits (22 base64url or 32 hex characters at least): "
            "make one with `bergen token`"
        )
    if _spread_bits(token) < MIN_SPREAD_BITS or _is_periodic(token):
        raise WeakToken(
            "the organiser token repeats a few characters too often to be random: "
            "make one with `bergen token`"
        )
    if is_generated_organiser_token(token):
        return
    bits = estimated_bits(token)
    if bits < MIN_ORGANISER_BITS:
        raise WeakToken(
            f"the organiser token is guessable: an estimator of guesses (zxcvbn) puts it at "
            f"about {bits:.0f} bits, below {MIN_ORGANISER_BITS} (words, sequences and keyboard "
            "walks count for little; a random string about 3.3 bits a character): make one "
            "with `bergen token`, or use 40 random characters at least"
        )


def organiser_token_file(path: Path) -> tuple[str, bool]:
    """The organiser token held in `path`, made there first (a fresh one, mode 0600, written
    atomically: a replica starting at the same moment keeps the first) when the file does
    not exist. Returns the token and whether it was made now. Raises WeakToken for a file
    holding a token `check_organiser_token` refuses (or none), OSError when it cannot be
    read or made, UnicodeDecodeError for one that is not text."""
    if not path.exists():
        token = new_organiser_token()
        if write_once(path, token + "\n"):
            return token, True
    token = path.read_text(encoding="utf-8").strip()
    if not token:
        raise WeakToken("it holds no token: remove it to have a fresh one made")
    check_organiser_token(token)
    return token, False


def _capacity_bits(token: str) -> float:
    """How many bits `token` could hold at most: its length times log2 of the alphabet it
    draws on: hex digits; base64url when it mixes cases (a random one may miss digits or
    `_-`); else the classes of characters it uses."""
    chars = set(token)
    if chars <= _HEX or chars <= _HEX_UPPER:
        return 4.0 * len(token)
    used = [c for c in _CLASSES if chars & set(c)]
    pool = 64 if _CLASSES[0] in used and _CLASSES[1] in used else sum(len(c) for c in used)
    return len(token) * math.log2(pool) if pool > 1 else 0.0


def _is_periodic(token: str) -> bool:
    """Whether `token` is a shorter block said at least twice (`Passw0rd-Passw0rd-Pass`)."""
    n = len(token)
    return any(token[p:] == token[: n - p] for p in range(1, n // 2 + 1))


def _spread_bits(token: str) -> float:
    """The token's length times the Shannon entropy of its own character frequencies."""
    n = len(token)
    return -sum(k * math.log2(k / n) for k in Counter(token).values())


def token_hash(token: str) -> str:
    """SHA-256 of the token, hex: what is kept of the organiser token (in memory only), and
    what servers before `SeatTokens` stored of a seat token, which is still read."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


JOIN_PREFIX = "join-"
_JOIN_LABEL = b"bergen join\0"
"""Begins what a join's command id is made from: no token holds a space or NUL, so it is
never the message of a token's own seal."""


@dataclass(frozen=True, slots=True)
class SealedToken:
    """A seat token as its match's log keeps it: `digest` (hex) is HMAC-SHA256 of the token
    under the seat-token key derived from log key `key_id`; with `key_id` None, the plain
    SHA-256 written before seat tokens were keyed (read still, never written)."""

    digest: str
    key_id: str | None = None


class KeyedSecrets:
    """Seals secrets under the writing log key's key for `purpose`, and checks a presented
    secret against a sealed one under the key it names, so a secret sealed before a key
    rotation still matches.

    Without log keys (a store that authenticates nothing, as tests of the store alone use)
    secrets are sealed with plain SHA-256, as before keys.
    """

    def __init__(self, log_keys: LogKeys | None, purpose: bytes) -> None:
        self._keys = log_keys.derive(purpose) if log_keys is not None else None

    def seal(self, token: str) -> SealedToken:
        """What is stored of `token`."""
        if self._keys is None:
            return SealedToken(token_hash(token))
        return SealedToken(_mac(self._keys.writing_key, token.encode()), self._keys.writing)

    def matches(self, token: str, sealed: SealedToken) -> bool:
        """Constant-time comparison of a presented token with a sealed one; False for one
        sealed under a key this server does not hold."""
        if sealed.key_id is None:
            return matches(token, sealed.digest)
        key = self._keys.key(sealed.key_id) if self._keys is not None else None
        if key is None:
            return False
        return hmac.compare_digest(_mac(key, token.encode()), sealed.digest)

    def matcher(self, token: str) -> Callable[[SealedToken], bool]:
        """`matches` for `token` against many sealed tokens (a tournament's entrants): the
        token is sealed once under each key met, not once for each sealed token."""
        sealed_as: dict[str | None, str | None] = {}

        def match(sealed: SealedToken) -> bool:
            key_id = sealed.key_id
            if key_id not in sealed_as:
                if key_id is None:
                    sealed_as[key_id] = token_hash(token)
                else:
                    key = self._keys.key(key_id) if self._keys is not None else None
                    sealed_as[key_id] = None if key is None else _mac(key, token.encode())
            digest = sealed_as[key_id]
            return digest is not None and hmac.compare_digest(digest, sealed.digest)

        return match


class SeatTokens(KeyedSecrets):
    """Seat tokens (and the tokens sealed as they are: a creator's, a tournament player's),
    sealed under the seat-token keys."""

    def __init__(self, log_keys: LogKeys | None) -> None:
        super().__init__(log_keys, SEAT_TOKEN_PURPOSE)

    def join_command_ids(self, token: str) -> tuple[str, ...]:
        """The command id of the join that `token` makes, then every id the same join may
        have been written under before: under each other key held (the join was first sent
        before a key rotation) and the plain SHA-256 of servers before keyed ones."""
        message = _JOIN_LABEL + token.encode()
        ids: list[str] = []
        if self._keys is not None:
            held = [self._keys.writing, *(i for i in self._keys.ids if i != self._keys.writing)]
            for key_id in held:
                key = self._keys.key(key_id)
                assert key is not None
                ids.append(JOIN_PREFIX + _mac(key, message))
        ids.append(JOIN_PREFIX + hashlib.sha256(message).hexdigest())
        return tuple(ids)


def _mac(key: bytes, message: bytes) -> str:
    return hmac_sha256(key, message).hex()


def bearer_token(metadata: Sequence[tuple[str, str | bytes]] | None) -> str | None:
    """The bearer token of a call's metadata, None when there is no authorization entry.

    Raises Unauthenticated for an authorization entry that is not `Bearer <token>`, or for
    more than one.
    """
    values = [v for k, v in (metadata or ()) if k.lower() == "authorization"]
    if not values:
        return None
    if len(values) > 1:
        raise Unauthenticated("send one authorization entry, not several")
    value = values[0]
    if isinstance(value, bytes):
        raise Unauthenticated("authorization must be text: 'Bearer <token>'")
    match = _BEARER.match(value.strip())
    if match is None:
        raise Unauthenticated("authorization must be 'Bearer <token>'")
    return match.group(1)


def token_field(value: str, field: str) -> str:
    """A token sent in a request's `field` (where one request carries several), held to the
    form a bearer entry's token has. Raises Unauthenticated for another."""
    if _TOKEN.fullmatch(value) is None:
        raise Unauthenticated(f"{field} must be a token as the server gave it")
    return value


def matches(token: str, stored_hash: str) -> bool:
    """Constant-time comparison of a presented token with a stored hash."""
    return hmac.compare_digest(token_hash(token), stored_hash)
