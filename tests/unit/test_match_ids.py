"""A new match's id is a version 7 UUID: ordered by the time it was made, random after it."""

from __future__ import annotations

import uuid

from bergen.server.commands import new_match_id


def test_an_id_is_a_version_7_uuid_with_the_milliseconds_first() -> None:
    made = uuid.UUID(new_match_id(lambda: 1_767_225_600_123_456_789))
    assert (made.version, made.variant) == (7, uuid.RFC_4122)
    assert made.int >> 80 == 1_767_225_600_123


def test_ids_made_later_sort_later_and_never_repeat() -> None:
    ids = [new_match_id(lambda t=t: t * 1_000_000) for t in range(1_000, 3_000)]
    assert ids == sorted(ids)
    same_moment = {new_match_id(lambda: 5_000_000) for _ in range(10_000)}
    assert len(same_moment) == 10_000  # 74 random bits a millisecond
