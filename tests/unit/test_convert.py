"""The translation between domain values and bergen.v1 messages (`bergen.api.convert`): every
word of every closed set has its enum value and back, and an unknown number is refused."""

from __future__ import annotations

import dataclasses
import random
import re
from datetime import UTC, datetime, timedelta, timezone

import pytest
from google.protobuf.descriptor import EnumDescriptor

from bergen.api import convert
from bergen.domain import events as ev
from bergen.domain.errors import CorruptRecord, InvalidArgument, InvalidOptions
from bergen.domain.policies import greedy_policy, random_policy
from bergen.domain.rules import CHOICES, PRESETS, make_rules
from bergen.domain.simulation import play_match
from bergen.domain.tiles import End
from bergen.domain.vocabulary import HandEndReason, MatchEndReason, Phase, PointsReason
from bergen.v1 import bergen_pb2 as pb

# Each table, the domain's words it must cover, and the proto enum it maps to.
TABLES = [
    pytest.param(convert.PHASE, list(Phase), pb.Phase.DESCRIPTOR, id="phase"),
    pytest.param(convert.PRESET, [*PRESETS, "custom"], pb.Preset.DESCRIPTOR, id="preset"),
    *(
        pytest.param(
            convert.OPTION_WORDS[name],
            list(CHOICES[name]),
            pb.RuleOptions.DESCRIPTOR.fields_by_name[name].enum_type,
            id=name,
        )
        for name in ("lead", "draw", "blocked", "endgame_reduction", "match_end")
    ),
    pytest.param(
        convert.POINTS_REASON, list(PointsReason), pb.PointsReason.DESCRIPTOR, id="points"
    ),
    pytest.param(
        convert.HAND_END_REASON, list(HandEndReason), pb.HandEndReason.DESCRIPTOR, id="hand-end"
    ),
    pytest.param(
        convert.MATCH_END_REASON, list(MatchEndReason), pb.MatchEndReason.DESCRIPTOR, id="match-end"
    ),
]


def _prefix(enum: EnumDescriptor) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", enum.name).upper() + "_"


@pytest.mark.parametrize(("table", "words", "enum"), TABLES)
def test_every_domain_word_has_an_enum_value_and_back(table, words, enum):
    for word in words:
        number = table.out(word)
        assert number != 0
        assert enum.values_by_number[number].name == _prefix(enum) + word.upper()
        assert table.into(number) == word


@pytest.mark.parametrize(("table", "words", "enum"), TABLES)
def test_every_enum_value_but_zero_is_a_domain_word(table, words, enum):
    numbers = {v.number for v in enum.values}
    assert enum.values_by_number[0].name == _prefix(enum) + "UNSPECIFIED"
    assert {table.out(w) for w in words} == numbers - {0}


@pytest.mark.parametrize(("table", "words", "enum"), TABLES)
@pytest.mark.parametrize("number", [0, 99, -1, 2**31 - 1])
def test_an_unknown_or_unset_number_is_refused_with_a_short_message(table, words, enum, number):
    with pytest.raises(InvalidOptions) as caught:
        table.into(number, InvalidOptions)
    assert len(str(caught.value)) < 60
    assert caught.value.metadata["field"] == table.what


def test_an_option_with_an_unknown_number_is_invalid_options():
    options = pb.RuleOptions()
    options.blocked = 42  # type: ignore[assignment]
    with pytest.raises(InvalidOptions, match="blocked has no value 42"):
        convert.options_in(options)


def test_an_option_set_to_unspecified_is_invalid_options():
    with pytest.raises(InvalidOptions, match="lead is not set"):
        convert.options_in(pb.RuleOptions(lead=pb.LEAD_UNSPECIFIED))


def test_options_come_in_as_the_words_and_numbers_make_rules_takes():
    options = pb.RuleOptions(
        lead=pb.LEAD_HIGHEST_DOUBLE, match_end=pb.MATCH_END_END_OF_HAND, double_bonus=0, target=7
    )
    assert convert.options_in(options) == {
        "lead": "highest_double",
        "match_end": "end_of_hand",
        "double_bonus": 0,
        "target": 7,
    }
    assert convert.options_out(convert.options_in(options)) == options


@pytest.mark.parametrize(
    "options", [{"lead": "highest"}, {"colour": "red"}, {"target": "7"}, {"draw": 1}]
)
def test_options_out_refuses_what_is_no_option(options):
    with pytest.raises(InvalidOptions):
        convert.options_out(options)


def test_an_unspecified_preset_is_none_and_an_unknown_one_is_invalid_options():
    assert convert.preset_in(pb.PRESET_UNSPECIFIED) is None
    assert convert.preset_in(pb.PRESET_CUSTOM) == "custom"
    with pytest.raises(InvalidOptions, match="preset has no value 77"):
        convert.preset_in(77)


def test_an_unknown_end_is_invalid_argument():
    assert convert.end_in(pb.END_UNSPECIFIED) is None
    assert convert.end_in(pb.END_RIGHT) is End.RIGHT
    with pytest.raises(InvalidArgument, match="end has no value 3"):
        convert.end_in(3)


@pytest.mark.parametrize("preset", [*PRESETS, None])
def test_rules_go_out_and_come_back_the_same(preset):
    rules = make_rules(4, True, preset, {} if preset else {"blocked": "pips", "target": 9})
    assert convert.rules_in(convert.rules_out(rules)) == rules


def test_served_rules_with_an_unset_word_are_a_corrupt_record():
    served = convert.rules_out(make_rules(2, False))
    served.draw = pb.DRAW_UNSPECIFIED
    with pytest.raises(CorruptRecord, match="draw is not set"):
        convert.rules_in(served)


@pytest.mark.parametrize(
    ("seats", "partnerships", "preset"), [(2, False, "eastern"), (4, True, "pips")]
)
def test_every_event_of_a_match_goes_out_and_comes_back_the_same(seats, partnerships, preset):
    events, _ = play_match(
        "conv-1",
        make_rules(seats, partnerships, preset),
        seats,
        partnerships,
        bytes(32),
        [greedy_policy, random_policy] * 2,
        random.Random(5),
    )
    kinds = set()
    for seq, e in enumerate(events, 1):
        # The server seed is no part of MatchCreated on the wire (SeedRevealed carries it).
        expected = dataclasses.replace(e, server_seed=None) if isinstance(e, ev.MatchCreated) else e
        assert convert.event_in(convert.event_out(seq, e)) == (seq, expected)
        kinds.add(type(e))
    assert {ev.PointsScored, ev.HandEnded, ev.MatchEnded} <= kinds


def test_an_abandoned_result_comes_back_with_its_note():
    ended = ev.MatchEnded(MatchEndReason.ABANDONED, None, (3, 4), 1, "seat 1 resigned")
    msg = convert.result_out(ended)
    assert msg.reason == pb.MATCH_END_REASON_ABANDONED
    assert convert.result_in(msg) == ended


@pytest.mark.parametrize(
    ("body", "field"),
    [("points_scored", "reason"), ("hand_ended", "reason"), ("tile_played", "end")],
)
def test_a_served_event_with_an_unknown_enum_number_is_a_corrupt_record(body, field):
    msg = pb.Event(seq=4)
    setattr(getattr(msg, body), field, 9)
    with pytest.raises(CorruptRecord):
        convert.event_in(msg)


def test_a_served_tile_out_of_range_is_a_corrupt_record():
    msg = pb.Event(seq=2)
    msg.tile_played.tile.low = 7
    with pytest.raises(CorruptRecord, match="event 2: tile"):
        convert.event_in(msg)


def test_a_time_goes_out_as_a_timestamp_and_comes_back_in_utc():
    at = datetime(2026, 11, 30, 18, 5, 1, 123456, tzinfo=timezone(timedelta(hours=2)))
    ts = convert.timestamp_out(at)
    assert (ts.seconds, ts.nanos) == (int(at.timestamp()), 123456000)
    back = convert.timestamp_in(ts)
    assert back == at and back.tzinfo == UTC


def test_a_time_without_a_zone_is_refused():
    with pytest.raises(ValueError, match="without a zone"):
        convert.timestamp_out(datetime(2026, 11, 30, 18, 5))
