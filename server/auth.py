"""Seat and organiser tokens: random secrets, kept only as hashes, sent as bearer metadata."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Sequence

from bergen.domain.errors import Unauthenticated

TOKEN_PREFIX = "bgs_"
TOKEN_BYTES = 32
"""256 bits of randomness per seat token."""

_BEARER = re.compile(r"^Bearer ([A-Za-z0-9_\-]{16,200})$")


def new_seat_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)


def token_hash(token: str) -> str:
    """SHA-256 of the token, hex: all that is stored. The token carries 256 random bits, so
    a plain hash is enough; no one can search that space."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


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


def matches(token: str, stored_hash: str) -> bool:
    """Constant-time comparison of a presented token with a stored hash."""
    return hmac.compare_digest(token_hash(token), stored_hash)
