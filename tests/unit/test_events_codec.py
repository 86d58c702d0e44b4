"""Events: a fold of one of every type, and the codec's round trip and corrupt payloads."""

from __future__ import annotations

import json
import random
from dataclasses import FrozenInstanceError, replace

import pytest

from bergen.domain import codec
from bergen.domain.commands import Play
from bergen.domain.errors import CorruptRecord
from bergen.domain.events import (
    EVENT_TYPES,
    Dealt,
    DealVoided,
    HandEnded,
    MatchCreated,
    MatchEnded,
    Passed,
    PointsScored,
    SeatTaken,
    SeedRevealed,
    TileDrawn,
    TilePlayed,
    TimedOut,
    as_logged_then,
)
from bergen.domain.rules import make_rules
from bergen.domain.state import ENDED, evolve, fold
from bergen.domain.tiles import End
from bergen.domain.views import redact_stream
from bergen.domain.vocabulary import MatchEndReason

from . import deals
from .support import Game, T, tiles


def play_to_the_end(g: Game, rng: random.Random) -> None:
    while g.s.phase != ENDED:
        seat = g.s.turn
        tile, end = rng.choice(g.s.legal_plays(seat))
        g.do(Play(seat, tile, end))


def every_type_stream(crafted_deals) -> Game:
    # Two void deals, then a deal where seats draw and pass, then random play to the end.
    crafted_deals({(1, 1): deals.VOID3, (1, 2): deals.PASS3})
    g = Game(3).start()
    play_to_the_end(g, random.Random(7))
    return g


def test_fold_of_one_of_every_event_type(crafted_deals):
    g = every_type_stream(crafted_deals)
    # A timeout needs a clock: test_clocks folds a clocked stream with one.
    assert {type(e) for e in g.events} == set(EVENT_TYPES) - {TimedOut}
    assert len(EVENT_TYPES) == 12
    state = fold(g.events)
    assert state == g.s
    assert state.phase == ENDED
    assert state.version == len(g.events)


SAMPLES = [
    MatchCreated("m", 4, True, make_rules(4, True, "eastern"), "ab" * 32, "friendly", "cd" * 32),
    MatchCreated("m", 2, False, make_rules(2, False, None, {"target": 7}), "ab" * 32, "", None),
    SeatTaken(2, "żółw", "🀱"),
    Dealt(1, 2, (tiles("0-0 1-2"), tiles("3-4 5-6")), tiles("2-2 0-6")),
    Dealt(1, 1, ((T("0-0"), None), (None, None)), (None, None)),
    DealVoided(3, 1),
    TilePlayed(1, 0, T("3-3"), None),
    TilePlayed(1, 1, T("3-5"), End.LEFT),
    TilePlayed(1, 1, T("3-5"), End.RIGHT),
    TileDrawn(1, 1, T("0-4")),
    TileDrawn(1, 1, None),
    Passed(2, 3),
    PointsScored(1, 0, 1, "triple_header", 3, 2),
    PointsScored(1, 1, 2, "blocked", 2, None),
    HandEnded(4, "blocked", None, 0, (3, 4)),
    HandEnded(4, "domino", 1, 2, (3, 6)),
    MatchEnded("target", 1, (9, 15), None, ""),
    MatchEnded("abandoned", None, (0, 0), 1, "seat 1 resigned"),
    MatchCreated(
        "m",
        2,
        False,
        make_rules(2, False, "standard", {"clock": "fischer", "clock_initial": 60}),
        "ab" * 32,
        "",
        None,
    ),
    TilePlayed(1, 0, T("3-3"), None, 0, 60_000),
    TilePlayed(1, 1, T("3-5"), End.LEFT, 4500, 8500),
    TilePlayed(1, 1, T("0-5"), End.RIGHT, 11_000, 2000, True),
    TileDrawn(1, 1, None, 700),
    Passed(2, 3, 0),
    TimedOut(2, 1, 11_000),
    MatchEnded("forfeit", 0, (3, 4), 1, "seat 1 resigned", 1, "resigned"),
    MatchEnded("forfeit", None, (3, 3, 2), None, "", 2, "timeout", 31_250),
    SeedRevealed("cd" * 32),
]


def test_samples_cover_every_event_type():
    assert {type(e) for e in SAMPLES} == set(EVENT_TYPES)


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: type(e).__name__)
def test_codec_round_trip_of_every_event_type_through_json(event):
    name, version, payload = codec.encode(event)
    assert name == type(event).__name__
    stored = json.loads(json.dumps(payload))
    assert codec.decode(name, version, stored) == event


def test_codec_round_trip_of_a_whole_match_full_and_redacted(crafted_deals):
    g = every_type_stream(crafted_deals)
    live = g.events[: len(g.events) // 2]
    for stream in (g.events, redact_stream(live, 1), redact_stream(live, None)):
        back = [codec.decode(*json.loads(json.dumps(codec.encode(e)))) for e in stream]
        assert back == list(stream)


def _payload(event):
    return codec.encode(event)[2]


CORRUPT = [
    ("TilePlayed", 1, "not a mapping"),
    ("TilePlayed", 1, None),
    ("NoSuchEvent", 1, {}),
    ("TilePlayed", 99, _payload(SAMPLES[6])),
    ("TilePlayed", 0, _payload(SAMPLES[6])),
    ("TilePlayed", 1, {k: v for k, v in _payload(SAMPLES[6]).items() if k != "tile"}),
    ("TilePlayed", 1, {**_payload(SAMPLES[6]), "extra": 1}),
    ("TilePlayed", 1, {**_payload(SAMPLES[6]), "tile": "7-7"}),
    ("TilePlayed", 1, {**_payload(SAMPLES[6]), "tile": "x"}),
    ("TilePlayed", 1, {**_payload(SAMPLES[6]), "tile": "1-2-3"}),
    ("TilePlayed", 1, {**_payload(SAMPLES[6]), "tile": "²-1"}),
    ("TilePlayed", 1, {**_payload(SAMPLES[6]), "tile": 12}),
    ("TilePlayed", 1, {**_payload(SAMPLES[6]), "tile": None}),
    ("TilePlayed", 1, {**_payload(SAMPLES[6]), "tile": ["1", "2"]}),
    ("TilePlayed", 1, {**_payload(SAMPLES[6]), "end": "middle"}),
    ("TilePlayed", 1, {**_payload(SAMPLES[6]), "end": 1}),
    ("TilePlayed", 1, {**_payload(SAMPLES[6]), "seat": "0"}),
    ("TilePlayed", 1, {**_payload(SAMPLES[6]), "seat": True}),
    ("TilePlayed", 1, {**_payload(SAMPLES[6]), "seat": None}),
    ("TilePlayed", 1, {**_payload(SAMPLES[6]), "hand": 1.0}),
    ("Dealt", 1, {**_payload(SAMPLES[3]), "hands": "0-0"}),
    ("Dealt", 1, {**_payload(SAMPLES[3]), "hands": ["0-0"]}),
    ("Dealt", 1, {**_payload(SAMPLES[3]), "hands": [[1]]}),
    ("Dealt", 1, {**_payload(SAMPLES[3]), "boneyard": {"a": 1}}),
    ("HandEnded", 1, {**_payload(SAMPLES[14]), "scores": [1, "2"]}),
    ("HandEnded", 1, {**_payload(SAMPLES[14]), "scores": [True, 2]}),
    ("HandEnded", 1, {**_payload(SAMPLES[14]), "scores": 3}),
    ("MatchCreated", 1, {**_payload(SAMPLES[0]), "rules": "standard"}),
    ("MatchCreated", 1, {**_payload(SAMPLES[0]), "rules": {"lead": "lowest_double"}}),
    ("MatchCreated", 1, {**_payload(SAMPLES[0]), "rules": {**SAMPLES[0].rules.as_dict(), "x": 1}}),
    (
        "MatchCreated",
        1,
        {**_payload(SAMPLES[0]), "rules": {**SAMPLES[0].rules.as_dict(), "draw": 3}},
    ),
    (
        "MatchCreated",
        1,
        {**_payload(SAMPLES[0]), "rules": {**SAMPLES[0].rules.as_dict(), "preset": []}},
    ),
    (
        "MatchCreated",
        1,
        {**_payload(SAMPLES[0]), "rules": {**SAMPLES[0].rules.as_dict(), "target": 2.5}},
    ),
    ("MatchCreated", 1, {**_payload(SAMPLES[0]), "partnerships": 1}),
    ("MatchCreated", 1, {**_payload(SAMPLES[0]), "server_seed": 5}),
    ("SeatTaken", 1, {**_payload(SAMPLES[2]), "name": None}),
    ("SeedRevealed", "1", _payload(SAMPLES[-1])),
    ("SeedRevealed", None, _payload(SAMPLES[-1])),
    ("SeedRevealed", True, _payload(SAMPLES[-1])),
    (["SeedRevealed"], 1, _payload(SAMPLES[-1])),
    (None, 1, _payload(SAMPLES[-1])),
]


@pytest.mark.parametrize(("name", "version", "payload"), CORRUPT)
def test_decode_of_a_corrupt_payload_raises_corrupt_record(name, version, payload):
    with pytest.raises(CorruptRecord):
        codec.decode(name, version, payload)


def test_an_old_schema_version_is_upcast_on_read(monkeypatch):
    event = SeedRevealed("ab" * 32)
    name, version, payload = codec.encode(event)
    old = {"seed": payload["server_seed"]}
    monkeypatch.setitem(
        codec.UPCASTERS, ("SeedRevealed", version - 1), lambda d: {"server_seed": d["seed"]}
    )
    assert codec.decode(name, version - 1, old) == event


def test_events_are_frozen():
    with pytest.raises(FrozenInstanceError):
        SAMPLES[6].seat = 1  # type: ignore[misc]
    assert replace(SAMPLES[6], seat=1).seat == 1


def test_evolve_refuses_streams_that_do_not_fold():
    with pytest.raises(CorruptRecord):
        fold([])
    with pytest.raises(CorruptRecord):
        evolve(None, SeatTaken(0, "a", ""))
    state = evolve(None, SAMPLES[1])
    with pytest.raises(CorruptRecord):
        evolve(state, SAMPLES[1])
    with pytest.raises(CorruptRecord):
        evolve(state, object())  # type: ignore[arg-type]
    with pytest.raises(CorruptRecord):
        evolve(state, TileDrawn(1, 0, T("1-1")))  # from an empty boneyard


def test_evolve_of_a_play_from_a_hand_without_the_tile_is_corrupt(crafted_deals):
    crafted_deals({(1, 1): deals.CASE2})
    g = Game().start()
    with pytest.raises(CorruptRecord):
        evolve(g.s, TilePlayed(1, 1, T("3-3"), End.LEFT))


_TARGET = {
    "reason": "target",
    "winner_side": 0,
    "scores": [100, 3],
    "resigned_seat": None,
    "note": "",
}
_FORFEIT = {"reason": "forfeit", "winner_side": 1, "scores": [4, 3], "resigned_seat": 0, "note": ""}
_SEATS_AND_ENDS = [
    (1, {"seat": 1, "name": "ann", "client_seed": "s"}),
    (2, {"seat": 0, "name": "ann", "client_seed": "s", "player": "p1", "bot": True}),
    (2, {"seat": 0, "name": "ann", "client_seed": "s", "player": "p1"}),
    (2, {"seat": 0, "name": "ann", "client_seed": "s", "bot": True}),
    (1, {"seat": 0, "name": "ann", "client_seed": "s", "player": "p1"}),
    (2, {"seat": 0, "name": "ann", "client_seed": "s", "player": "p1", "extra": 1}),
    (2, {"seat": True, "name": "ann", "client_seed": "s"}),
    (2, {"seat": 0, "name": "ann", "client_seed": "s", "player": None}),
    (2, {"seat": 0, "name": "ann", "client_seed": "s", "bot": 1}),
    (2, {"seat": 0, "name": "ann"}),
    (1, {**_TARGET}),
    (2, {**_FORFEIT, "forfeited_side": 0, "cause": "resigned", "at_ms": 12}),
    (
        2,
        {
            "reason": "forfeit",
            "winner_side": None,
            "scores": [4, 3, 4],
            "resigned_seat": None,
            "note": "",
            "forfeited_side": 1,
            "cause": "timeout",
        },
    ),
    (1, {**_FORFEIT, "forfeited_side": 0}),
    (2, {**_FORFEIT, "cause": "lost"}),
    (2, {**_FORFEIT, "cause": None}),
    (
        2,
        {
            "reason": "forfeit",
            "winner_side": 1,
            "scores": [4, True],
            "resigned_seat": 0,
            "note": "",
        },
    ),
    (2, {"reason": "won", "winner_side": 1, "scores": [4, 3], "resigned_seat": 0, "note": ""}),
    (2, {**_TARGET, "holders": [["p1", "ann", False], ["p2", "bob", True]]}),
    (2, {**_TARGET, "holders": []}),
    (2, {**_TARGET, "holders": [["p1", "ann"]]}),
    (2, {**_TARGET, "holders": [["p1", "ann", 0]]}),
    (2, {**_TARGET, "holders": "p1"}),
    (1, {**_TARGET, "holders": [["p1", "ann", False]]}),
    (
        2,
        {
            "reason": "target",
            "winner_side": 1,
            "scores": [4, 3],
            "resigned_seat": 0,
            "note": "",
            "at_ms": None,
        },
    ),
]


@pytest.mark.parametrize(("version", "payload"), _SEATS_AND_ENDS)
def test_seats_and_ends_decode_as_the_generic_path_does(
    version: int, payload: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    # SeatTaken and MatchEnded have readers of their own (a ratings rebuild decodes millions):
    # each gives what the generic checks give, or leaves the refusal to them.
    kind = "SeatTaken" if "seat" in payload else "MatchEnded"

    def decoded() -> object:
        try:
            return codec.decode(kind, version, dict(payload))
        except CorruptRecord as e:
            return ("refused", e.message)

    fast = decoded()
    monkeypatch.setattr(codec, "_FAST_BY_NAME", {})
    assert fast == decoded()


def test_an_end_logged_without_holders_is_compared_as_written_then() -> None:
    named = MatchEnded(
        MatchEndReason.TARGET,
        0,
        (100, 3),
        None,
        "",
        holders=(("p1", "a", False), ("p2", "b", True)),
    )
    bare = replace(named, holders=())
    assert as_logged_then(bare, named) == bare
    assert as_logged_then(named, named) == named
    other = replace(named, holders=(("p3", "c", False), ("p2", "b", True)))
    assert as_logged_then(other, named) == named  # named holders are compared, never dropped
    assert as_logged_then(TileDrawn(1, 0, None), named) == named
