"""Rematches' ids: the server derives a rematch's id from the ended match's, so that a client
finds the rematch of a match it played (`GetMatch` on the id) without asking for one.

A match's rematch is UUIDv5(namespace = the ended match's id, name = "rematch N"), N from 1: a
rematch abandoned before every seat was taken (the server's seating timeout) is followed by
the next N when one is asked for again. A rematch of a rematch is derived alike from the
rematch's id.
"""

from __future__ import annotations

import uuid

MAX_ATTEMPTS = 100
"""Rematches of one match abandoned before their start that the server follows, at most,
with another."""


def rematch_id(match_id: str, attempt: int = 1) -> str:
    """The id of the `attempt`-th rematch of the match `match_id`. Raises ValueError when
    `match_id` is not a UUID or `attempt` is not 1 to MAX_ATTEMPTS."""
    if not 1 <= attempt <= MAX_ATTEMPTS:
        raise ValueError(f"a rematch's attempt is 1 to {MAX_ATTEMPTS}, not {attempt}")
    return str(uuid.uuid5(uuid.UUID(match_id), f"rematch {attempt}"))
