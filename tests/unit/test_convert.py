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
from bergen.domain.simulation import Timing, play_match
from bergen.domain.state import evolve
from bergen.domain.tiles import End, Tile
from bergen.domain.views import View, view
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


# ----- clocks and forfeits ----------------------------------------------------------------


CLOCKED = {
    "clock": "fischer",
    "clock_initial": 45,
    "clock_increment": 0,
    "on_timeout": "forfeit",
    "timeouts_to_forfeit": 2,
}


def test_clocked_rules_and_clock_options_go_out_and_come_back_the_same():
    rules = make_rules(3, False, "pips", CLOCKED)
    assert convert.rules_in(convert.rules_out(rules)) == rules
    assert convert.options_in(convert.options_out(CLOCKED)) == CLOCKED
    unclocked = convert.rules_out(make_rules(2, False))
    assert unclocked.clock == pb.CLOCK_NONE and unclocked.clock_initial == 0
    unclocked.ClearField("clock")  # as a server without clocks sends it
    assert convert.rules_in(unclocked) == make_rules(2, False)


def test_every_event_of_a_clocked_match_goes_out_and_comes_back_the_same():
    events, _ = play_match(
        "conv-2",
        make_rules(3, False, "standard", {"clock": "fischer", "clock_initial": 10}),
        3,
        False,
        bytes(32),
        [greedy_policy, random_policy, random_policy],
        random.Random(8),
        timing=Timing(think_ms=(100, 3000), stall=0.2),
    )
    kinds = set()
    for seq, e in enumerate(events, 1):
        expected = dataclasses.replace(e, server_seed=None) if isinstance(e, ev.MatchCreated) else e
        assert convert.event_in(convert.event_out(seq, e)) == (seq, expected)
        kinds.add(type(e))
    assert {ev.TimedOut, ev.TilePlayed, ev.MatchEnded} <= kinds


@pytest.mark.parametrize(
    "ended",
    [
        ev.MatchEnded(MatchEndReason.FORFEIT, 0, (3, 4), 1, "seat 1 resigned", 1, "resigned"),
        ev.MatchEnded(MatchEndReason.FORFEIT, None, (3, 3, 1), None, "", 2, "timeout", 9_001),
    ],
)
def test_a_forfeit_comes_back_with_its_side_cause_and_time(ended):
    msg = convert.result_out(ended)
    assert msg.reason == pb.MATCH_END_REASON_FORFEIT
    assert convert.result_in(msg) == ended


def test_the_view_carries_every_seats_clock():
    from bergen.domain.commands import CreateMatch, Play, TakeSeat
    from bergen.domain.engine import execute
    from bergen.domain.views import view

    rules = make_rules(2, False, "standard", {"clock": "fischer", "clock_initial": 10})
    _, state = execute(None, CreateMatch("v", 2, False, rules, bytes(32)))
    for seat in range(2):
        _, state = execute(state, TakeSeat(f"p{seat}", "", seat))
    seat = state.turn
    tile, end = state.legal_plays(seat)[0]
    _, state = execute(state, Play(seat, tile, end, 2500))
    msg = convert.view_out(view(state, 0))
    assert msg.at_ms == 2500
    clocks = {c.seat: c for c in msg.clocks}
    assert clocks[seat].left_ms == 10_000 - 2500 + 5000 and not clocks[seat].running
    other = clocks[1 - seat]
    assert other.running and other.falls_at_ms == 2500 + 10_000


def _dealt_state(match_id: str, rules):
    from bergen.domain.commands import CreateMatch, TakeSeat
    from bergen.domain.engine import execute

    _, state = execute(None, CreateMatch(match_id, 2, False, rules, bytes(32)))
    for seat in range(2):
        _, state = execute(state, TakeSeat(f"p{seat}", "", seat))
    return state


def test_a_views_rules_are_its_own_matchs_whatever_was_converted_before():
    """The view's rules are converted once per distinct rules and reused: what goes out is
    what converting them afresh gives, another match's rules never, and a caller changing
    one view's message changes no other."""
    from bergen.domain.views import view

    kinds = [
        make_rules(2, False, "standard"),
        make_rules(2, False, "eastern"),
        make_rules(2, False, None, {"blocked": "pips", "target": 9}),
        make_rules(2, False, "pips", CLOCKED),
    ]
    states = [_dealt_state(f"m{i}", rules) for i, rules in enumerate(kinds)]
    for _ in range(2):  # the second time round, from what the first made
        for state, rules in zip(states, kinds, strict=True):
            for seat in (0, 1, None):
                msg = convert.view_out(view(state, seat))
                assert msg.rules == convert.rules_out(rules)
                assert convert.rules_in(msg.rules) == rules
    first = convert.view_out(view(states[0], 0))
    first.rules.target = 99
    first.rules.clock = pb.CLOCK_FISCHER
    again = convert.view_out(view(states[0], 0))
    assert again.rules == convert.rules_out(kinds[0])
    assert again.rules.target == kinds[0].target and again.rules.clock == pb.CLOCK_NONE


def test_a_views_hand_line_and_legal_plays_go_out_as_the_view_has_them():
    """At every state of a played match and through every seat's eyes: the tiles of the
    hand, the line and the legal plays of the message are the view's, in its order (a 0-0
    tile included: a tile whose numbers are both zero is still sent)."""
    from bergen.domain.state import evolve
    from bergen.domain.views import view

    events, _ = play_match(
        "conv-3",
        make_rules(2, False, "standard"),
        2,
        False,
        bytes(32),
        [greedy_policy, random_policy],
        random.Random(11),
    )
    state = None
    zero_seen = 0
    for e in events:
        state = evolve(state, e)
        for seat in (0, 1, None):
            v = view(state, seat)
            msg = convert.view_out(v)
            assert [(t.low, t.high) for t in msg.my_tiles] == [(t.low, t.high) for t in v.tiles]
            assert [(t.left, t.right) for t in msg.line] == list(v.line)
            assert [(p.tile.low, p.tile.high, p.end) for p in msg.legal_plays] == [
                (t.low, t.high, convert.ENDS[end]) for t, end in v.legal_plays
            ]
            assert all(p.HasField("tile") for p in msg.legal_plays)
            zero_seen += sum(1 for t, _end in v.legal_plays if (t.low, t.high) == (0, 0))
    assert zero_seen  # the seed deals 0-0 to a hand that plays it


@pytest.mark.parametrize(
    ("event", "body"),
    [
        (ev.Passed(0, 0), "passed"),
        (ev.TileDrawn(0, 0, None), "tile_drawn"),
        (ev.TilePlayed(0, 0, Tile.of(0, 0), End.LEFT), "tile_played"),
    ],
)
def test_an_event_whose_fields_are_all_zero_still_goes_out_with_its_body(event, body):
    msg = convert.event_out(1, event)
    assert msg.WhichOneof("body") == body
    assert convert.event_in(pb.Event.FromString(msg.SerializeToString())) == (1, event)


def view_out_plain(v: View) -> pb.MatchView:
    """A view's message built field by field, in one constructor (an unset optional field
    given as None): the reference `convert.view_out`, which merges pre-made bytes, is
    checked against."""
    tile = convert.tile_out
    ends = None
    if v.ends is not None:
        left, right, left_double, right_double = v.ends
        ends = pb.Ends(left=left, right=right, left_double=left_double, right_double=right_double)
    return pb.MatchView(
        match_id=v.match_id,
        name=v.name,
        phase=convert.PHASE.out(v.phase),
        rules=convert.rules_out(v.rules),
        partnerships=v.partnerships,
        viewer_seat=v.seat,
        seats=[
            pb.SeatInfo(
                seat=seat,
                name=name or "",
                taken=name is not None,
                tile_count=v.hand_sizes[seat],
                side=seat % 2 if v.partnerships else seat,
            )
            for seat, name in enumerate(v.players)
        ],
        commitment=v.commitment,
        server_seed=v.server_seed or "",
        hand_number=v.hand,
        my_tiles=[tile(t) for t in v.tiles],
        revealed_hands=None
        if v.revealed_hands is None
        else [pb.Hand(tiles=[tile(t) for t in h]) for h in v.revealed_hands],
        boneyard_size=v.boneyard_size,
        drawable=v.drawable,
        line=[pb.LineTile(left=a, right=b) for a, b in v.line],
        ends=ends,
        scores=list(v.scores),
        turn=v.turn,
        must_play=None if v.must_play is None else tile(v.must_play),
        legal_plays=[pb.LegalPlay(tile=tile(t), end=convert.ENDS[e]) for t, e in v.legal_plays],
        result=None if v.result is None else convert.result_out(v.result),
        version=v.version,
        clocks=[
            pb.SeatClock(
                seat=c.seat,
                left_ms=c.left_ms,
                running=c.running,
                timeouts=c.timeouts,
                falls_at_ms=c.falls_at_ms,
            )
            for c in v.clocks
        ],
        at_ms=v.at_ms,
    )


@pytest.mark.parametrize(
    ("seats", "partnerships", "preset", "clocked"),
    [
        (2, False, "standard", False),
        (3, False, "american", True),
        (4, True, "pips", False),
        (4, False, "eastern", True),
    ],
)
def test_a_view_goes_out_as_the_message_built_field_by_field(seats, partnerships, preset, clocked):
    """`view_out` merges pre-made bytes; every view of a whole match (each seat's and a
    spectator's, after every event, seating and the end included) is the message built
    field by field, and serializes to the same bytes."""
    options = {"clock": "fischer", "clock_initial": 60} if clocked else None
    rules = make_rules(seats, partnerships, preset, options)
    events, _ = play_match(
        "view-1",
        rules,
        seats,
        partnerships,
        bytes(range(32)),
        [greedy_policy, random_policy] * 2,
        random.Random(seats),
        names=["Ωmega", "b 𝄞", 'c"d', "d"][:seats],
        timing=Timing(think_ms=(100, 70_000), stall=0.05) if clocked else None,
    )
    state = None
    checked = set()
    for e in events:
        state = evolve(state, e)
        for seat in [None, *range(seats)]:
            v = view(state, seat)
            fast, plain = convert.view_out(v), view_out_plain(v)
            assert fast == plain
            assert fast.SerializeToString(deterministic=True) == plain.SerializeToString(
                deterministic=True
            )
            checked |= {f.name for f, _ in fast.ListFields()}
    # Every field the fast path makes from bytes was set in some view.
    assert {"match_id", "rules", "seats", "my_tiles", "line", "legal_plays", "ends"} <= checked
    assert {"must_play", "result", "revealed_hands"} & checked >= {"result", "revealed_hands"}
    assert ("clocks" in checked) == clocked
