"""Seat tokens the gateway derives from its seal key, so that every gateway process holding the
same key file makes the same ones, and none needs to remember them:

- the computer's seat `seat` of a match: HMAC(key, "computer", match, seat). Any gateway can
  so show the game server that the computer held a seat of an ended match, and take the same
  seat of its rematch (JoinMatch's previous_seat_token);
- a person's seat in a rematch: HMAC(key, "rematch", rematch, seat, the token that held the
  seat in the match before). Whichever gateway or device accepts the rematch for that seat
  joins with the same token (a join sent again is answered with the same seat), and any
  gateway hands the seat's cookie to a browser holding the old seat.

Each key of the seal key file derives (the file's first key makes new tokens, as it seals;
every key is tried to recognise the computer's old tokens, so that a rotated key still finds
them). The key derived from is not the Fernet key itself but an HMAC of it under a label of
its own, so a token never tells anything of the key that seals the cookies.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Sequence

LABEL = b"bergen-web seat tokens/1"
COMPUTER_PREFIX = "bgc_"
REMATCH_PREFIX = "bgr_"


def _mac(key: bytes, *parts: str) -> str:
    message = "\0".join(parts).encode()
    digest = hmac.new(key, message, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


class SeatKeys:
    """The seat tokens one seal key file derives."""

    def __init__(self, fernet_keys: Sequence[bytes]) -> None:
        """`fernet_keys`: the key file's keys, as written (URL-safe base64), the first the
        sealing one. Raises ValueError for none, or a key that is not base64."""
        if not fernet_keys:
            raise ValueError("no key to derive seat tokens from")
        self._keys = [
            hmac.new(base64.urlsafe_b64decode(k), LABEL, hashlib.sha256).digest()
            for k in fernet_keys
        ]

    def computer(self, match_id: str, seat: int) -> str:
        """The token of the computer's seat `seat` (from 0) of `match_id`."""
        return self.computer_candidates(match_id, seat)[0]

    def computer_candidates(self, match_id: str, seat: int) -> list[str]:
        """The token of that seat under each key of the file, the sealing key's first."""
        return [COMPUTER_PREFIX + _mac(k, "computer", match_id, str(seat)) for k in self._keys]

    def rematch(self, rematch_id: str, seat: int, previous_token: str) -> str:
        """The token of a person's seat `seat` in the rematch `rematch_id`, for whoever held
        the same seat of the match before with `previous_token`."""
        mac = _mac(self._keys[0], "rematch", rematch_id, str(seat), previous_token)
        return REMATCH_PREFIX + mac
