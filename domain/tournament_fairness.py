"""Commit and reveal for tournaments (TOURNAMENT.md section 3): the seed's commitment, the
seeding order, and each table's match id and server seed, all derived so that the server
chooses none of them."""

from __future__ import annotations

import hashlib
import hmac
import uuid
from collections.abc import Sequence

from .dealing import commitment, parse_seed, permute

SEEDING_ALGORITHM = "bergen-seeding-v1"
TABLE_ALGORITHM = "bergen-table-v1"

__all__ = [
    "commitment",
    "match_id",
    "parse_seed",
    "seeding_key",
    "seeding_order",
    "table_server_seed",
]


def seeding_key(tournament_seed: bytes, tournament_id: str, client_seeds: Sequence[str]) -> bytes:
    """HMAC-SHA256(seed, "bergen-seeding-v1|id|client_seed_1|...|client_seed_n"), the
    client seeds in registration order."""
    message = "|".join([SEEDING_ALGORITHM, tournament_id, *client_seeds])
    return hmac.new(tournament_seed, message.encode("utf-8"), hashlib.sha256).digest()


def seeding_order(
    tournament_seed: bytes,
    tournament_id: str,
    client_seeds: Sequence[str],
    numbers: Sequence[int] | None = None,
) -> tuple[int, ...]:
    """The entrant numbers of the entrants that take part (`numbers`, in registration order;
    by default 1..n, every entrant) in seeding-rank order, keyed by their client seeds."""
    if numbers is None:
        numbers = range(1, len(client_seeds) + 1)
    elif len(numbers) != len(client_seeds):
        raise ValueError("one client seed for each entrant that takes part")
    key = seeding_key(tournament_seed, tournament_id, client_seeds)
    return permute(numbers, key)


def match_id(tournament_id: str, round_number: int, table: int) -> str:
    """UUIDv5(namespace = tournament id, name = "round R table T"), both 1-based.

    Raises ValueError when `tournament_id` is not a UUID.
    """
    return str(uuid.uuid5(uuid.UUID(tournament_id), f"round {round_number} table {table}"))


def table_server_seed(tournament_seed: bytes, table_match_id: str) -> bytes:
    """HMAC-SHA256(tournament seed, "bergen-table-v1|" + match id): the table's server seed."""
    message = f"{TABLE_ALGORITHM}|{table_match_id}"
    return hmac.new(tournament_seed, message.encode("utf-8"), hashlib.sha256).digest()
