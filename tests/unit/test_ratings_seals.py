"""The bytes a ratings row's authenticator covers (`bergen.server.store.ratings`): packed, not
JSON, and still one message a row: a change to any column, a text's character moved to the
next text, a float's last bit or a row of another table makes other bytes."""

from __future__ import annotations

import math
import struct
from typing import Any

import pytest

from bergen.domain.ratings import Rating
from bergen.server.keys import LogKeys
from bergen.server.store.ratings import (
    pack_ratings,
    rated_message,
    rating_message,
    seal_rating,
    unpack_ratings,
)
from bergen.server.store.sealed import Seals

PLAYER = "6a1b2c3d-1111-2222-3333-444455556666"
MATCH = "0f1e2d3c-aaaa-bbbb-cccc-ddddeeeeffff"
RATING = (PLAYER, "2", "ann", False, 25.5, 7.25, 3, False, -1530, 3.75)
SEATS = ((Rating(25.0, 8.0, 2), Rating(25.5, 7.25, 3)), (Rating(), Rating(24.0, 8.1, 1)))
RATED = (MATCH, "2", 1234, '[["p","ann",false]]', "[[0],[1]]", "[1,2]", pack_ratings(SEATS))
AT = 1_764_806_400_000_000
"""A time as sealed: whole microseconds since 1970 UTC."""


def changed_each(values: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """`values` with each column changed in turn (a text grown by a character, a number by
    one, a float by its last bit, a flag flipped)."""
    out = []
    for i, v in enumerate(values):
        if isinstance(v, bytes):
            w: Any = v[:-1] + bytes([v[-1] ^ 1])
        elif isinstance(v, bool):
            w = not v
        elif isinstance(v, str):
            w = v + "x"
        elif isinstance(v, int):
            w = v + 1
        else:
            w = math.nextafter(v, math.inf)
        out.append((*values[:i], w, *values[i + 1 :]))
    return out


def test_every_column_of_a_rating_is_sealed() -> None:
    messages = {rating_message(v) for v in [RATING, *changed_each(RATING)]}
    assert len(messages) == len(RATING) + 1


def test_every_column_of_a_rated_match_is_sealed() -> None:
    messages = {rated_message(v, AT) for v in [RATED, *changed_each(RATED)]}
    messages.add(rated_message(RATED, AT + 1))
    assert len(messages) == len(RATED) + 2


def test_a_character_moved_from_one_text_to_the_next_is_another_message() -> None:
    moved = (PLAYER + "2", "", *RATING[2:])
    assert rating_message(moved) != rating_message(RATING)
    moved_rated = (MATCH + "2", "", *RATED[2:])
    assert rated_message(moved_rated, AT) != rated_message(RATED, AT)


def test_a_message_begins_with_its_table_name_ended_by_a_nul() -> None:
    # No name is a prefix of another's: rows of two tables never share a message.
    assert rating_message(RATING).startswith(b"player_ratings\0")
    assert rated_message(RATED, AT).startswith(b"rated_matches\0")


def test_a_value_that_does_not_fit_its_column_is_refused() -> None:
    with pytest.raises(struct.error):
        rating_message((*RATING[:6], "3", *RATING[7:]))


def test_a_rating_sealed_verifies_and_the_same_row_changed_does_not() -> None:
    seals = Seals(LogKeys.generate())
    key_id, mac = seal_rating(seals, RATING)
    assert seals.message_fault(rating_message(RATING), key_id, mac) is None
    for changed in changed_each(RATING):
        assert seals.message_fault(rating_message(changed), key_id, mac) is not None
    assert seal_rating(None, RATING) == (None, None)


def test_a_rated_match_holds_each_seats_ratings_before_and_after_bit_for_bit() -> None:
    odd = Rating(math.nextafter(25.0, 0.0), 1e-300, 7)
    seats = (*SEATS, (odd, Rating(-3.5, 0.1, 8)))
    assert unpack_ratings(pack_ratings(seats)) == seats
    # A seat's ratings moved to another seat is another message.
    swapped = (*RATED[:6], pack_ratings(SEATS[::-1]))
    assert rated_message(swapped, AT) != rated_message(RATED, AT)
