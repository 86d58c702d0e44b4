"""The hand-off aggregate: a seat, or a tournament player's place, carried to another device
by a one-time code. `decide_hand_off`, `evolve_hand_off` and `fold_hand_offs`, as for a match.

One aggregate holds every hand-off of one holder (a seat of a match, or a player of a
tournament's entrant), so that how many it has outstanding is decided on one stream: two
offers made at once cannot both pass the cap, and two claims of one code cannot both spend
it. Each offer keeps an opaque parcel (what the claimer gets back: the offering client's
own sealed copy of the place, never a token in plain) under a keyed hash of its code (the
digest; the code itself is never recorded), until its expiry on the servers' clock.

A hand-off is no part of a match or a tournament: its events are never in their streams,
records or audit logs.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from functools import singledispatch
from typing import Any

from .errors import CorruptRecord, InvalidArgument, NotFound, ResourceExhausted

HAND_OFF_SCHEMA_VERSION = 1
SEAT = "seat"
"""A holder that is a seat of a match."""
ENTRANT = "entrant"
"""A holder that is a player of a tournament's entrant."""
MAX_PARCEL_BYTES = 1024
TTL_MS = 10 * 60 * 1000
"""How long a code may be claimed (once) after it was made."""
MAX_OUTSTANDING = 5
"""Codes one holder may have unclaimed and unexpired at once."""
MAX_OFFERS = 100
"""Codes one holder may ever be given: its stream stays small whatever a client does."""
SPENT_OR_UNKNOWN = "HAND_OFF_SPENT_OR_UNKNOWN"
"""The one reason for a code used, expired or never given: the answer tells them apart for
no one."""


@dataclass(frozen=True, slots=True)
class Holder:
    """What a hand-off carries: seat `number` (from 0) of match `of`, or player `player`
    (from 0) of entrant `number` (from 1) of tournament `of`."""

    kind: str
    of: str
    number: int
    player: int = 0


# Events


@dataclass(frozen=True, slots=True)
class HandOffOffered:
    """A code made: its keyed hash `digest` (hex) under the key `key_id` ("" for a plain
    SHA-256, made without keys), the parcel given for it, and when it expires (the servers'
    clock, Unix ms)."""

    digest: str
    key_id: str
    holder: Holder
    parcel: bytes
    expires_ms: int


@dataclass(frozen=True, slots=True)
class HandOffClaimed:
    """The code of `digest` spent, at `at_ms` (the servers' clock, Unix ms)."""

    digest: str
    at_ms: int


HandOffEvent = HandOffOffered | HandOffClaimed


# Commands


@dataclass(frozen=True, slots=True)
class OfferHandOff:
    """Keep `parcel` for the code whose keyed hash is `digest`, from `now_ms` for `ttl_ms`."""

    holder: Holder
    digest: str
    key_id: str
    parcel: bytes
    now_ms: int
    ttl_ms: int = TTL_MS


@dataclass(frozen=True, slots=True)
class ClaimHandOff:
    """Spend the offer of `digest` (None: the code presented matches none) at `now_ms`."""

    digest: str | None
    now_ms: int


HandOffCommand = OfferHandOff | ClaimHandOff


# State


@dataclass(frozen=True, slots=True)
class Offer:
    digest: str
    key_id: str
    parcel: bytes
    expires_ms: int
    claimed: bool = False

    def open_at(self, now_ms: int) -> bool:
        """Whether it may be claimed at `now_ms`: not yet claimed, and not expired."""
        return not self.claimed and now_ms < self.expires_ms


@dataclass(frozen=True, slots=True)
class HandOffs:
    """Every hand-off of one holder, in the order they were offered."""

    holder: Holder
    offers: tuple[Offer, ...] = ()

    def outstanding(self, now_ms: int) -> int:
        """Offers that may still be claimed at `now_ms`."""
        return sum(1 for o in self.offers if o.open_at(now_ms))

    def find(self, digest: str | None) -> Offer | None:
        return next((o for o in self.offers if o.digest == digest), None)


# Evolve


@singledispatch
def _apply(event: object, state: HandOffs | None) -> HandOffs:
    raise TypeError(f"not a hand-off event: {type(event).__name__}")


@_apply.register
def _(e: HandOffOffered, state: HandOffs | None) -> HandOffs:
    offer = Offer(e.digest, e.key_id, e.parcel, e.expires_ms)
    if state is None:
        return HandOffs(e.holder, (offer,))
    return replace(state, offers=(*state.offers, offer))


@_apply.register
def _(e: HandOffClaimed, state: HandOffs | None) -> HandOffs:
    if state is None:
        raise TypeError("a holder's first hand-off event is an offer")
    offers = tuple(replace(o, claimed=True) if o.digest == e.digest else o for o in state.offers)
    return replace(state, offers=offers)


def evolve_hand_off(state: HandOffs | None, event: HandOffEvent) -> HandOffs:
    """The state after `event`; never checks."""
    return _apply(event, state)


def fold_hand_offs(events: Iterable[HandOffEvent], state: HandOffs | None = None) -> HandOffs:
    """The state `events` build. Raises TypeError for an empty stream."""
    for e in events:
        state = evolve_hand_off(state, e)
    if state is None:
        raise TypeError("no events: no hand-offs")
    return state


# Decide


def spent_or_unknown() -> NotFound:
    """The refusal of a code used, expired or never given: one and the same for each."""
    return NotFound(
        "this hand-off code has been used, has expired or was never given",
        reason=SPENT_OR_UNKNOWN,
    )


def check_parcel(parcel: object) -> bytes:
    """Raises InvalidArgument (INVALID_PARCEL) for anything but 1 to MAX_PARCEL_BYTES bytes."""
    if not isinstance(parcel, bytes) or not 0 < len(parcel) <= MAX_PARCEL_BYTES:
        raise InvalidArgument(
            f"a hand-off's parcel is 1 to {MAX_PARCEL_BYTES} bytes", reason="INVALID_PARCEL"
        )
    return parcel


def decide_hand_off(state: HandOffs | None, command: HandOffCommand) -> tuple[HandOffEvent, ...]:
    """The events `command` causes.

    Raises InvalidArgument (INVALID_PARCEL; an offer for another holder than the stream's),
    ResourceExhausted (TOO_MANY_HAND_OFFS: MAX_OUTSTANDING open; HAND_OFF_LIMIT: MAX_OFFERS
    given), NotFound (HAND_OFF_SPENT_OR_UNKNOWN: a claim of a code used, expired or never
    given)."""
    match command:
        case OfferHandOff():
            return _offer(state, command)
        case ClaimHandOff():
            return _claim(state, command)


def _offer(state: HandOffs | None, c: OfferHandOff) -> tuple[HandOffEvent, ...]:
    check_parcel(c.parcel)
    if c.ttl_ms <= 0:
        raise InvalidArgument("a hand-off lasts a positive time", reason="INVALID_ARGUMENT")
    if state is not None:
        if state.holder != c.holder:
            raise InvalidArgument("these hand-offs are another holder's", reason="INVALID_ARGUMENT")
        if state.outstanding(c.now_ms) >= MAX_OUTSTANDING:
            raise ResourceExhausted(
                f"{MAX_OUTSTANDING} codes of this {c.holder.kind} are still open: use one, or "
                "wait until one expires",
                reason="TOO_MANY_HAND_OFFS",
            )
        if len(state.offers) >= MAX_OFFERS:
            raise ResourceExhausted(
                f"this {c.holder.kind} has been given {MAX_OFFERS} codes, the most it may",
                reason="HAND_OFF_LIMIT",
            )
        if state.find(c.digest) is not None:
            raise InvalidArgument("this code was made before", reason="INVALID_ARGUMENT")
    return (HandOffOffered(c.digest, c.key_id, c.holder, c.parcel, c.now_ms + c.ttl_ms),)


def _claim(state: HandOffs | None, c: ClaimHandOff) -> tuple[HandOffEvent, ...]:
    offer = state.find(c.digest) if state is not None and c.digest is not None else None
    if offer is None or not offer.open_at(c.now_ms):
        raise spent_or_unknown()
    return (HandOffClaimed(offer.digest, c.now_ms),)


# Payloads


def encode_hand_off_event(event: HandOffEvent) -> tuple[str, int, dict[str, Any]]:
    """(type name, schema version, JSON-able payload)."""
    payload: dict[str, Any]
    match event:
        case HandOffOffered():
            h = event.holder
            payload = {
                "digest": event.digest,
                "key_id": event.key_id,
                "holder": {"kind": h.kind, "of": h.of, "number": h.number, "player": h.player},
                "parcel": base64.b64encode(event.parcel).decode("ascii"),
                "expires_ms": event.expires_ms,
            }
        case HandOffClaimed():
            payload = {"digest": event.digest, "at_ms": event.at_ms}
    return type(event).__name__, HAND_OFF_SCHEMA_VERSION, payload


_FIELDS: dict[str, dict[str, type]] = {
    "HandOffOffered": {
        "digest": str,
        "key_id": str,
        "holder": dict,
        "parcel": str,
        "expires_ms": int,
    },
    "HandOffClaimed": {"digest": str, "at_ms": int},
}
_HOLDER: dict[str, type] = {"kind": str, "of": str, "number": int, "player": int}


def _checked(type_name: str, value: object, fields: Mapping[str, type]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping) or set(value) != set(fields):
        raise CorruptRecord(f"{type_name} payload: fields {sorted(fields)} expected")
    for key, kind in fields.items():
        v = value[key]
        if not isinstance(v, kind) or isinstance(v, bool):
            raise CorruptRecord(f"{type_name} payload: {key} is not {kind.__name__}")
    return value


def decode_hand_off_event(type_name: str, version: int, payload: object) -> HandOffEvent:
    """The event a stored payload holds. Raises CorruptRecord for an unknown type or version,
    or a malformed payload."""
    if type_name not in _FIELDS:
        raise CorruptRecord(f"unknown hand-off event type {type_name!r}"[:120])
    if version != HAND_OFF_SCHEMA_VERSION:
        raise CorruptRecord(f"{type_name} payload: unknown schema version {version}")
    p = _checked(type_name, payload, _FIELDS[type_name])
    if type_name == "HandOffClaimed":
        return HandOffClaimed(p["digest"], p["at_ms"])
    h = _checked(type_name, p["holder"], _HOLDER)
    if h["kind"] not in (SEAT, ENTRANT):
        raise CorruptRecord(f"{type_name} payload: a holder is a {SEAT} or an {ENTRANT}")
    try:
        parcel = base64.b64decode(p["parcel"], validate=True)
    except (binascii.Error, ValueError):
        raise CorruptRecord(f"{type_name} payload: parcel is not base64") from None
    holder = Holder(h["kind"], h["of"], h["number"], h["player"])
    return HandOffOffered(p["digest"], p["key_id"], holder, parcel, p["expires_ms"])
