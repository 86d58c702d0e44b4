"""The hand-off aggregate (bergen.domain.handoff): an offer keeps its parcel until its expiry,
a claim spends it once, a holder has at most MAX_OUTSTANDING open and MAX_OFFERS ever, and a
code used, expired or never given is refused alike."""

from __future__ import annotations

import pytest

from bergen.domain.errors import CorruptRecord, InvalidArgument, NotFound, ResourceExhausted
from bergen.domain.handoff import (
    ENTRANT,
    MAX_OFFERS,
    MAX_OUTSTANDING,
    MAX_PARCEL_BYTES,
    SEAT,
    SPENT_OR_UNKNOWN,
    TTL_MS,
    ClaimHandOff,
    HandOffClaimed,
    HandOffEvent,
    HandOffOffered,
    HandOffs,
    Holder,
    OfferHandOff,
    decide_hand_off,
    decode_hand_off_event,
    encode_hand_off_event,
    evolve_hand_off,
    fold_hand_offs,
)

NOW = 1_800_000_000_000
ADA = Holder(SEAT, "6f1c2a9e-3b7d-4e2a-9c51-0d8e7f6a5b43", 1)


def offered(state: HandOffs | None, digest: str, now: int = NOW, holder: Holder = ADA) -> HandOffs:
    events = decide_hand_off(
        state, OfferHandOff(holder, digest, "k1", b"parcel " + digest.encode(), now)
    )
    return fold_hand_offs(events, state)


def refused_alike(state: HandOffs | None, digest: str | None, now: int = NOW) -> str:
    with pytest.raises(NotFound) as info:
        decide_hand_off(state, ClaimHandOff(digest, now))
    assert info.value.reason == SPENT_OR_UNKNOWN
    return info.value.message


def test_an_offer_is_claimed_once_and_then_refused_as_unknown_is() -> None:
    state = offered(None, "d1")
    (event,) = decide_hand_off(state, ClaimHandOff("d1", NOW + 1))
    assert event == HandOffClaimed("d1", NOW + 1)
    after = evolve_hand_off(state, event)
    assert after.outstanding(NOW + 1) == 0
    spent = refused_alike(after, "d1", NOW + 2)
    assert refused_alike(after, "d2") == spent
    assert refused_alike(after, None) == spent
    assert refused_alike(None, "d1") == spent


def test_an_offer_expires_after_its_time() -> None:
    state = offered(None, "d1")
    (event,) = decide_hand_off(state, ClaimHandOff("d1", NOW + TTL_MS - 1))
    assert isinstance(event, HandOffClaimed)
    refused_alike(state, "d1", NOW + TTL_MS)


def test_a_holder_has_at_most_five_open_and_an_expired_or_spent_one_frees_a_place() -> None:
    state = None
    for i in range(MAX_OUTSTANDING):
        state = offered(state, f"d{i}")
    assert state is not None and state.outstanding(NOW) == MAX_OUTSTANDING
    with pytest.raises(ResourceExhausted) as info:
        offered(state, "more")
    assert info.value.reason == "TOO_MANY_HAND_OFFS"
    spent = fold_hand_offs(decide_hand_off(state, ClaimHandOff("d0", NOW)), state)
    assert offered(spent, "more").outstanding(NOW) == MAX_OUTSTANDING
    later = offered(state, "later", NOW + TTL_MS)
    assert later.outstanding(NOW + TTL_MS) == 1


def test_a_holder_is_given_at_most_max_offers_ever() -> None:
    state = None
    for i in range(MAX_OFFERS):
        state = offered(state, f"d{i}", NOW + i * TTL_MS)
    with pytest.raises(ResourceExhausted) as info:
        offered(state, "one more", NOW + MAX_OFFERS * TTL_MS)
    assert info.value.reason == "HAND_OFF_LIMIT"


@pytest.mark.parametrize("parcel", [b"", b"x" * (MAX_PARCEL_BYTES + 1)])
def test_a_parcel_is_one_to_max_bytes(parcel: bytes) -> None:
    with pytest.raises(InvalidArgument) as info:
        decide_hand_off(None, OfferHandOff(ADA, "d", "k1", parcel, NOW))
    assert info.value.reason == "INVALID_PARCEL"
    assert decide_hand_off(None, OfferHandOff(ADA, "d", "k1", b"x" * MAX_PARCEL_BYTES, NOW))


def test_an_offer_for_another_holder_is_refused_in_this_ones_stream() -> None:
    state = offered(None, "d1")
    with pytest.raises(InvalidArgument):
        offered(state, "d2", holder=Holder(SEAT, ADA.of, 0))


def test_every_event_is_stored_and_read_back_as_it_was() -> None:
    events: list[HandOffEvent] = [
        HandOffOffered("ab" * 32, "k1", Holder(ENTRANT, "t-id", 3, 1), bytes(range(256)), NOW),
        HandOffOffered("cd" * 32, "", ADA, b"\x00", NOW),
        HandOffClaimed("ab" * 32, NOW + 5),
    ]
    for e in events:
        assert decode_hand_off_event(*encode_hand_off_event(e)) == e
    state = fold_hand_offs(events)
    assert [o.claimed for o in state.offers] == [True, False]


@pytest.mark.parametrize(
    ("type_name", "version", "payload"),
    [
        ("HandOffTaken", 1, {"digest": "d", "at_ms": 1}),
        ("HandOffClaimed", 2, {"digest": "d", "at_ms": 1}),
        ("HandOffClaimed", 1, {"digest": "d"}),
        ("HandOffClaimed", 1, {"digest": "d", "at_ms": True}),
        ("HandOffClaimed", 1, ["d", 1]),
        (
            "HandOffOffered",
            1,
            {
                "digest": "d",
                "key_id": "k1",
                "holder": {"kind": "table", "of": "m", "number": 0, "player": 0},
                "parcel": "eA==",
                "expires_ms": 1,
            },
        ),
        (
            "HandOffOffered",
            1,
            {
                "digest": "d",
                "key_id": "k1",
                "holder": {"kind": "seat", "of": "m", "number": 0, "player": 0},
                "parcel": "not base64!",
                "expires_ms": 1,
            },
        ),
    ],
)
def test_a_malformed_payload_is_a_corrupt_record(
    type_name: str, version: int, payload: object
) -> None:
    with pytest.raises(CorruptRecord):
        decode_hand_off_event(type_name, version, payload)
