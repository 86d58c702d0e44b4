"""Tournament seeds: in no event before the end, recomputed by every replica.

A tournament's seed is HMAC-SHA256 of its id under a key derived from a log key for that
purpose alone (`SEED_PURPOSE`); the creation records the id of that log key (`SEED_KEY`).
"""

from __future__ import annotations

import hashlib
import hmac

from bergen.domain.errors import RuleViolation

from ..keys import LogKeys

SEED_PURPOSE = b"bergen tournament seed v1"
"""What the keys that derive tournament seeds are derived for (`bergen.server.keys`)."""


class TournamentSeeds:
    """Derives each tournament's seed from the log keys, so every replica holding them
    computes the same seed and none is stored before the end. Without log keys (a store
    that authenticates nothing, in tests) a key of this process alone is used."""

    def __init__(self, log_keys: LogKeys | None) -> None:
        self._keys = (log_keys or LogKeys.generate("local")).derive(SEED_PURPOSE)

    @property
    def writing(self) -> str:
        return self._keys.writing

    def seed(self, tournament_id: str, key_id: str) -> bytes:
        """The tournament's seed under log key `key_id`. Raises RuleViolation when this
        server does not hold that key."""
        key = self._keys.key(key_id)
        if key is None:
            raise RuleViolation(
                f"tournament {tournament_id}: its seed is derived under log key {key_id!r}, "
                "which this server does not hold",
                reason="SEED_KEY_UNKNOWN",
                tournament_id=tournament_id,
            )
        return hmac.new(key, tournament_id.encode(), hashlib.sha256).digest()
