"""The domain's closed sets of words: enums whose values are the words stored and recorded."""

from __future__ import annotations

import json
import random

import pytest

from bergen.domain import codec
from bergen.domain.commands import Play
from bergen.domain.errors import CorruptRecord
from bergen.domain.events import HandEnded, MatchEnded, PointsScored
from bergen.domain.record import build_record
from bergen.domain.state import fold
from bergen.domain.vocabulary import (
    ForfeitCause,
    HandEndReason,
    MatchEndReason,
    Phase,
    PointsReason,
    StepKind,
    word,
)

from .support import Game


def test_each_enum_keeps_the_words_of_records_and_stored_events() -> None:
    # RECORD.md and the stored payloads spell them so: a changed value would break both.
    assert [m.value for m in Phase] == ["seating", "playing", "ended"]
    assert [m.value for m in PointsReason] == [
        "double_header",
        "triple_header",
        "double_bonus",
        "domino",
        "blocked",
    ]
    assert [m.value for m in HandEndReason] == ["domino", "blocked", "match_over"]
    assert [m.value for m in MatchEndReason] == ["target", "abandoned", "forfeit"]
    assert [m.value for m in ForfeitCause] == ["timeout", "resigned"]
    assert {StepKind.PLAY.value, StepKind.DRAW.value, StepKind.PASS.value} == {
        "play",
        "draw",
        "pass",
    }


@pytest.mark.parametrize(
    ("type_name", "payload", "kind"),
    [
        (
            "PointsScored",
            {"hand": 1, "side": 0, "points": 2, "reason": "double_header", "base": 2, "seat": 0},
            PointsReason,
        ),
        (
            "HandEnded",
            {"hand": 1, "reason": "match_over", "side": None, "points": 0, "scores": [15, 3]},
            HandEndReason,
        ),
        (
            "MatchEnded",
            {
                "reason": "abandoned",
                "winner_side": None,
                "scores": [0, 0],
                "resigned_seat": 1,
                "note": "",
            },
            MatchEndReason,
        ),
    ],
)
def test_a_stored_reason_decodes_to_its_enum_member_and_encodes_back_to_the_plain_word(
    type_name: str, payload: dict[str, object], kind: type
) -> None:
    event = codec.decode(type_name, codec.SCHEMA_VERSION, payload)
    assert isinstance(event, PointsScored | HandEnded | MatchEnded)
    assert type(event.reason) is kind
    name, _, again = codec.encode(event)
    assert name == type_name
    assert type(again["reason"]) is str  # plain JSON, never the enum
    assert json.dumps(again, sort_keys=True) == json.dumps(payload, sort_keys=True)


@pytest.mark.parametrize(
    ("type_name", "payload"),
    [
        (
            "PointsScored",
            {"hand": 1, "side": 0, "points": 2, "reason": "lucky", "base": 2, "seat": 0},
        ),
        ("HandEnded", {"hand": 1, "reason": "target", "side": 0, "points": 2, "scores": [2, 0]}),
        (
            "MatchEnded",
            {"reason": 3, "winner_side": None, "scores": [0], "resigned_seat": None, "note": ""},
        ),
    ],
)
def test_a_stored_reason_of_no_known_word_is_a_corrupt_record(
    type_name: str, payload: dict[str, object]
) -> None:
    with pytest.raises(CorruptRecord, match=r"expected a .*Reason"):
        codec.decode(type_name, codec.SCHEMA_VERSION, payload)


def test_word_names_the_words_allowed() -> None:
    assert word(Phase, "ended") is Phase.ENDED
    with pytest.raises(CorruptRecord, match=r"seating, playing, ended.*'over'"):
        word(Phase, "over")


def test_a_played_match_folds_to_phase_members_and_records_the_same_words() -> None:
    g = Game(2).start()
    assert g.s.phase is Phase.PLAYING
    rng = random.Random(3)
    while g.s.phase != Phase.ENDED:
        seat = g.s.turn
        tile, end = rng.choice(g.s.legal_plays(seat))
        g.do(Play(seat, tile, end))
    assert fold(g.events).phase is Phase.ENDED
    record = build_record(g.events)
    text = json.loads(json.dumps(record))
    assert text == record
    assert {a["act"] for h in record["hands"] for a in h["actions"]} <= {"play", "draw", "pass"}
    assert type(record["result"]["reason"]) is str and record["result"]["reason"] == "target"
    assert all(type(h["end"]["reason"]) is str for h in record["hands"])
