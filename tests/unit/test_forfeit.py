"""Resignation as a forfeit, the forfeit's result and ranking (RULES.md section 11), and the
replay of stored commands, old resignations included."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bergen.domain import codec
from bergen.domain.commands import Abandon, Command, Play, Resign, Timeout
from bergen.domain.engine import command_of, execute
from bergen.domain.events import Event, MatchEnded, SeedRevealed
from bergen.domain.policies import greedy_policy, random_policy
from bergen.domain.rules import make_rules
from bergen.domain.scoring import ranking
from bergen.domain.simulation import play_match
from bergen.domain.state import ENDED, State

from .support import SEED, Game, rules_for

VECTORS = Path(__file__).parent / "vectors" / "unclocked_events_v1.json"


def resign_at(g: Game, seat: int, at_ms: int | None = None) -> MatchEnded:
    events = g.do(Resign(seat, at_ms))
    assert isinstance(events[-1], SeedRevealed) and events[-1].server_seed == SEED.hex()
    ended = events[-2]
    assert isinstance(ended, MatchEnded)
    return ended


def test_resignation_forfeits_for_the_seat_and_the_other_side_wins():
    g = Game().start()
    g.set_score(1, 9)
    ended = resign_at(g, 1)
    assert (ended.reason, ended.forfeited_side, ended.cause, ended.resigned_seat) == (
        "forfeit",
        1,
        "resigned",
        1,
    )
    # With two sides the other wins, whatever the scores.
    assert ended.winner_side == 0 and ended.scores == (0, 9)
    assert ended.at_ms is None  # no clock
    assert g.s.phase == ENDED


def test_a_partner_resigns_for_the_partnership():
    g = Game(4, partnerships=True).start()
    ended = resign_at(g, 2)
    assert (ended.forfeited_side, ended.winner_side, ended.resigned_seat) == (0, 1, 2)


@pytest.mark.parametrize(
    ("scores", "resigning", "winner"),
    [((3, 7, 5), 1, 2), ((3, 7, 5), 0, 1), ((6, 2, 6), 1, None), ((2, 2, 2), 2, None)],
)
def test_the_winner_is_the_best_of_the_other_sides_and_a_tie_has_none(scores, resigning, winner):
    g = Game(3).start()
    for side, score in enumerate(scores):
        g.set_score(side, score)
    ended = resign_at(g, resigning)
    assert (ended.winner_side, ended.scores) == (winner, scores)


def test_resignation_in_a_clocked_match_records_its_time():
    g = Game(rules=rules_for(clock="fischer")).start()
    ended = resign_at(g, 0, 2500)
    assert (ended.forfeited_side, ended.at_ms) == (0, 2500)


def test_ranking_puts_the_forfeiting_side_last():
    assert ranking("forfeit", (9, 2, 5), forfeited_side=0) == ((2,), (1,), (0,))
    assert ranking("forfeit", (4, 4, 1), forfeited_side=2) == ((0, 1), (2,))
    assert ranking("target", (10, 3, 3)) == ((0,), (1, 2))
    assert ranking("abandoned", (1, 2)) is None


@settings(max_examples=60, deadline=None)
@given(
    seats=st.sampled_from([(2, False), (3, False), (4, False), (4, True)]),
    # From 2: the lead may already have scored its double header.
    scores=st.lists(st.integers(2, 14), min_size=4, max_size=4),
    resigning=st.integers(0, 3),
)
def test_a_forfeit_ranks_the_forfeiting_side_last_and_crowns_the_best_other(
    seats, scores, resigning
):
    n, partnerships = seats
    g = Game(n, partnerships=partnerships).start()
    sides = len(g.s.sides)
    for side in range(sides):
        g.set_score(side, min(scores[side], g.s.rules.target - 1))
    seat = resigning % n
    ended = resign_at(g, seat)
    places = ranking(ended.reason, ended.scores, ended.forfeited_side)
    assert places is not None
    assert places[-1] == (g.s.side_of(seat),)
    assert ended.winner_side is None or places[0] == (ended.winner_side,)
    assert (ended.winner_side is None) == (len(places[0]) > 1)


# ----- replaying stored commands --------------------------------------------------------------


def redecide(events: list[Event]) -> State:
    """Decide every command the events hold again, as a server checks its stored log."""
    state = None
    i = 0
    while i < len(events):
        command: Command | None = command_of(events[i])
        assert command is not None, events[i]
        decided, state = execute(state, command)
        assert list(decided) == events[i : i + len(decided)]
        i += len(decided)
    assert state is not None
    return state


def test_a_clocked_stream_is_decided_again_to_the_same_events():
    g = Game(3, rules=rules_for(3, clock="fischer", clock_initial=3, clock_increment=1)).start()
    rng = random.Random(4)
    at = 0
    while g.s.phase != ENDED:
        at += rng.randint(0, 2500)
        seat = g.s.running
        if at >= g.s.due_at_ms:
            g.do(Timeout(seat, at))
        else:
            tile, end = rng.choice(g.s.legal_plays(seat))
            g.do(Play(seat, tile, end, at))
    assert redecide(g.events) == g.s


def test_resignations_and_abandonments_are_decided_again_to_the_same_events():
    g = Game(rules=rules_for(clock="fischer")).start()
    g.do(Resign(1, 700))
    assert redecide(g.events) == g.s
    g = Game().start()
    g.do(Abandon("rain"))
    assert redecide(g.events) == g.s


def stored(name: str) -> list[list]:
    return json.loads(VECTORS.read_text(encoding="utf-8"))[name]


@pytest.mark.parametrize("name", ["match", "resigned"])
def test_events_stored_before_clocks_decode_fold_and_encode_as_stored(name):
    rows = stored(name)
    events = [codec.decode(t, v, p) for t, v, p in rows]
    # Re-encoded, each is the very row stored: type, version 1, the same payload in the same
    # key order, so the same bytes and the same hash chain.
    again = [list(codec.encode(e)) for e in events]
    assert json.dumps(again) == json.dumps(rows)
    state = redecide(events)
    assert state.phase == ENDED


def test_a_resignation_stored_before_it_was_a_forfeit_reads_as_it_was():
    events = [codec.decode(t, v, p) for t, v, p in stored("resigned")]
    ended = events[-2]
    assert isinstance(ended, MatchEnded)
    assert (ended.reason, ended.winner_side, ended.resigned_seat) == ("abandoned", None, 1)
    assert command_of(ended) == Abandon(ended.note, 1)


def test_an_unclocked_match_today_encodes_as_before():
    # The match the stored rows hold, played again by today's rules: the very same rows.
    rules = make_rules(3, False, "eastern")
    policies = [random_policy, greedy_policy, random_policy]
    events, _ = play_match("old-1", rules, 3, False, SEED, policies, random.Random(11))
    assert [list(codec.encode(e)) for e in events] == stored("match")
