"""Fair dealing by commit and reveal (RULES.md section 8)."""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Callable, Sequence
from operator import mod
from typing import Any, TypeVar

from .errors import InvalidArgument, shown
from .tiles import ALL_TILES, Tile, hand_size

SEED_BYTES = 32
DEAL_ALGORITHM = "bergen-deal-v1"

T = TypeVar("T")
_Deal = tuple[tuple[tuple[Tile, ...], ...], tuple[Tile, ...]]
"""The hands and the boneyard of a deal."""


def commitment(server_seed: bytes) -> str:
    """SHA-256 of the server seed, lowercase hex."""
    return hashlib.sha256(server_seed).hexdigest()


def parse_seed(text: str) -> bytes:
    """A server seed from its lowercase hex. Raises InvalidArgument unless 32 bytes of hex."""
    try:
        seed = bytes.fromhex(text)
    except (ValueError, TypeError):
        raise InvalidArgument(f"a server seed is 64 hex digits, got {shown(text)}") from None
    if len(seed) != SEED_BYTES:
        raise InvalidArgument(f"a server seed is {SEED_BYTES} bytes, got {len(seed)}")
    return seed


def deal_key(
    server_seed: bytes, match_id: str, hand: int, attempt: int, client_seeds: Sequence[str]
) -> bytes:
    """HMAC-SHA256(server_seed, "bergen-deal-v1|match|hand|attempt|seed0|...|seedN-1")."""
    message = "|".join([DEAL_ALGORITHM, match_id, str(hand), str(attempt), *client_seeds])
    return hmac.digest(server_seed, message.encode("utf-8"), "sha256")


def shuffle(key: bytes) -> tuple[Tile, ...]:
    """The 28 tiles in the order the deal key gives (Fisher-Yates, rejection sampled)."""
    return permute(ALL_TILES, key)


def permute(items: Sequence[T], key: bytes) -> tuple[T, ...]:
    """`items` shuffled by the random stream of `key` (Fisher-Yates, rejection sampled):
    RULES.md section 8's shuffle, which TOURNAMENT.md section 3 applies to n entrants."""
    order = list(items)
    # HMAC-SHA256 with the key's padded halves hashed once: each block is then two
    # continued hashes (half the cost of hmac.digest, which pads the key again each time).
    inner, outer = hmac_pads(key)

    def block(i: int) -> tuple[int, ...]:
        h = inner.copy()
        h.update(i.to_bytes(8, "big"))
        o = outer.copy()
        o.update(h.digest())
        return _EIGHT_INTS(o.digest())

    # The random stream (RULES.md section 8), 8 integers per block: the blocks a shuffle
    # needs without a rejection are made at once (a rejection is rare: about n in 2^32),
    # more if needed.
    n = len(order)
    stream: list[int] = []
    blocks = 0
    while len(stream) < n - 1:
        stream += block(blocks)
        blocks += 1
    sizes = range(n, 1, -1)
    if n < len(_LIMITS) and (
        n < 2
        or max(stream[: n - 1]) < _BELOW_EVERY_LIMIT
        or not any(x >= _LIMITS[m] for x, m in zip(stream, sizes, strict=False))
    ):
        # No rejection (the common case): each swap takes the next integer.
        for i, j in zip(range(n - 1, 0, -1), map(mod, stream, sizes), strict=False):
            order[i], order[j] = order[j], order[i]
        return tuple(order)
    k = 0
    for i in range(n - 1, 0, -1):
        m = i + 1
        limit = _LIMITS[m] if m < len(_LIMITS) else _TWO_32 - (_TWO_32 % m)
        while True:
            if k == len(stream):
                stream += block(blocks)
                blocks += 1
            x = stream[k]
            k += 1
            if x < limit:
                break
        j = x % m
        order[i], order[j] = order[j], order[i]
    return tuple(order)


_TWO_32 = 2**32
_EIGHT_INTS = struct.Struct(">8I").unpack
_LIMITS = [_TWO_32 - (_TWO_32 % n) if n else 0 for n in range(64)]
"""The rejection bound for each n below 64: an integer at or above it is drawn again."""
_BELOW_EVERY_LIMIT = _TWO_32 - 64
"""No integer below this is rejected for any n below 64."""
_SHA256_BLOCK = 64
_IPAD = bytes(b ^ 0x36 for b in range(256))
_OPAD = bytes(b ^ 0x5C for b in range(256))
_sha256 = hashlib.sha256


def hmac_pads(key: bytes) -> tuple[Any, Any]:
    """HMAC-SHA256's inner and outer hashes with `key` already absorbed (RFC 2104): an HMAC
    of a message is outer.copy() updated with the digest of inner.copy() updated with the
    message, the same bytes as hmac.digest(key, message, "sha256") without setting the key
    up again for each message."""
    if len(key) > _SHA256_BLOCK:
        key = _sha256(key).digest()
    padded = key.ljust(_SHA256_BLOCK, b"\0")
    return _sha256(padded.translate(_IPAD)), _sha256(padded.translate(_OPAD))


def hmac_on(pads: tuple[Any, Any], message: bytes | memoryview) -> bytes:
    """HMAC-SHA256 of `message` under the key whose `hmac_pads` are `pads`."""
    inner, outer = pads[0].copy(), pads[1].copy()
    inner.update(message)
    outer.update(inner.digest())
    return bytes(outer.digest())


def split(
    shuffled: Sequence[Tile], seats: int
) -> tuple[tuple[tuple[Tile, ...], ...], tuple[Tile, ...]]:
    """Seat s takes positions s*h .. s*h+h-1; the rest is the boneyard in draw order."""
    h = hand_size(seats)
    hands = tuple(tuple(shuffled[s * h : s * h + h]) for s in range(seats))
    return hands, tuple(shuffled[seats * h :])


def dealer(
    server_seed: bytes, match_id: str, client_seeds: Sequence[str]
) -> Callable[[int, int], tuple[tuple[tuple[Tile, ...], ...], tuple[Tile, ...]]]:
    """`deal` of one match by (hand, attempt): the same deals, with what does not change
    from deal to deal (the key message's head and tail, the hands' bounds) made once."""
    head = f"{DEAL_ALGORITHM}|{match_id}|".encode()
    tail = "".join(["|" + s for s in client_seeds]).encode()
    seats = len(client_seeds)
    split_tiles = _SPLITS.get(seats) or (lambda shuffled: split(shuffled, seats))
    # HMAC-SHA256 keyed by the server seed, its padded halves hashed once for the match.
    inner, outer = hmac_pads(server_seed)

    def dealt(hand: int, attempt: int) -> tuple[tuple[tuple[Tile, ...], ...], tuple[Tile, ...]]:
        i = inner.copy()
        i.update(b"%b%d|%d%b" % (head, hand, attempt, tail))
        o = outer.copy()
        o.update(i.digest())
        return split_tiles(_shuffle_tiles(o.digest()))

    return dealt


def _shuffle_tiles(key: bytes) -> tuple[Tile, ...]:
    """shuffle(key), written out for the 28 tiles: the stream's first 4 blocks give the 27
    integers a shuffle takes when none is rejected (the rest goes to `permute`)."""
    inner, outer = hmac_pads(key)
    out = b""
    for counter in _COUNTERS:
        h = inner.copy()
        h.update(counter)
        o = outer.copy()
        o.update(h.digest())
        out += o.digest()
    stream = _TWENTY_SEVEN_INTS(out)
    if max(stream) >= _BELOW_EVERY_LIMIT:
        return permute(ALL_TILES, key)  # an integer that may be rejected
    return _swaps(stream)


def _written_out_swaps() -> Callable[[Sequence[int]], tuple[Tile, ...]]:
    """Fisher-Yates on the 28 tiles with the stream's first 27 integers, none rejected:
    `permute`'s loop written out, a line per swap (a third cheaper than the loop)."""
    lines = ["def swaps(stream):", "    o = list(ALL_TILES)"]
    for k, i in enumerate(range(len(ALL_TILES) - 1, 0, -1)):
        lines.append(f"    j = stream[{k}] % {i + 1}")
        lines.append(f"    o[{i}], o[j] = o[j], o[{i}]")
    lines.append("    return tuple(o)")
    namespace: dict[str, object] = {"ALL_TILES": ALL_TILES}
    exec("\n".join(lines), namespace)  # built from the numbers above only
    return namespace["swaps"]  # type: ignore[return-value]


_swaps = _written_out_swaps()
_SPLITS: dict[
    int, Callable[[tuple[Tile, ...]], tuple[tuple[tuple[Tile, ...], ...], tuple[Tile, ...]]]
] = {
    2: lambda t: ((t[:6], t[6:12]), t[12:]),
    3: lambda t: ((t[:6], t[6:12], t[12:18]), t[18:]),
    4: lambda t: ((t[:5], t[5:10], t[10:15], t[15:20]), t[20:]),
}
"""`split` for 2, 3 and 4 seats, written out."""
_COUNTERS = tuple(i.to_bytes(8, "big") for i in range(4))
_TWENTY_SEVEN_INTS = struct.Struct(">27I20x").unpack


def deal(
    server_seed: bytes, match_id: str, hand: int, attempt: int, client_seeds: Sequence[str]
) -> tuple[tuple[tuple[Tile, ...], ...], tuple[Tile, ...]]:
    """The hands and boneyard of one deal attempt."""
    key = deal_key(server_seed, match_id, hand, attempt, client_seeds)
    return split(shuffle(key), len(client_seeds))
