"""Property tests of clocked play: random clocked matches with random thinking times,
stalls and resignations keep the clock arithmetic of RULES.md section 11."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from bergen.domain.audit import replay_record
from bergen.domain.commands import Play, Resign, Timeout
from bergen.domain.events import MatchEnded, TilePlayed, TimedOut
from bergen.domain.record import build_record
from bergen.domain.scoring import ranking
from bergen.domain.state import ENDED

from .support import Game, of_type, rules_for

SETUPS = [(2, False), (3, False), (4, False), (4, True)]


@settings(max_examples=40, deadline=None)
@given(
    setup=st.sampled_from(SETUPS),
    initial=st.integers(1, 20),
    increment=st.integers(0, 4),
    to_forfeit=st.integers(1, 4),
    on_timeout=st.sampled_from(["autoplay", "autoplay", "forfeit"]),
    think=st.integers(0, 6000),
    stall=st.sampled_from([0.0, 0.05, 0.3]),
    resign=st.sampled_from([0.0, 0.0, 0.02]),
    seed=st.integers(0, 2**32),
)
def test_clocked_play_keeps_the_clock_arithmetic(
    setup, initial, increment, to_forfeit, on_timeout, think, stall, resign, seed
):
    seats, partnerships = setup
    rules = rules_for(
        seats,
        partnerships,
        clock="fischer",
        clock_initial=initial,
        clock_increment=increment,
        on_timeout=on_timeout,
        timeouts_to_forfeit=to_forfeit,
    )
    g = Game(seats, partnerships, rules=rules, server_seed=seed.to_bytes(32, "big")).start()
    rng = random.Random(seed)
    # The test's own books: each seat's time left, spent and earned, from its commands only.
    left = [initial * 1000] * seats
    spent = [0] * seats
    earned = [0] * seats
    row = [0] * seats
    last = 0
    for _ in range(2000):
        if g.s.phase == ENDED:
            break
        seat = g.s.turn
        at = last + rng.randint(0, think)
        if rng.random() < stall or at >= last + left[seat]:
            at = last + left[seat] + rng.randint(0, 50)
            g.do(Timeout(seat, at))
            spent[seat] += left[seat]
            left[seat] = 0
            row[seat] += 1
            if row[seat] >= to_forfeit or on_timeout == "forfeit":
                break
            left[seat] = increment * 1000
        elif rng.random() < resign:
            g.do(Resign(seat, at))
            break
        else:
            tile, end = rng.choice(g.s.legal_plays(seat))
            g.do(Play(seat, tile, end, at))
            spent[seat] += at - last
            left[seat] += increment * 1000 - (at - last)
            row[seat] = 0
        earned[seat] += increment * 1000
        last = at
        if g.s.phase != ENDED:
            assert g.s.clocks == tuple(left)
            assert g.s.timeouts == tuple(row)
    assert g.s.phase == ENDED
    assert g.s.clocks == tuple(left)
    plays = [e for e in of_type(g.events, TilePlayed) if e.end is not None]
    for e in of_type(g.events, TilePlayed):
        assert e.clock_ms is not None and e.clock_ms >= 0
        assert e.at_ms is not None
    for e in plays:
        if not e.auto:
            assert e.clock_ms >= increment * 1000 + 1  # played before its time was out
    for seat in range(seats):
        assert initial * 1000 + earned[seat] - spent[seat] == left[seat]
    ended = g.s.result
    assert isinstance(ended, MatchEnded)
    if ended.reason == "forfeit":
        places = ranking(ended.reason, ended.scores, ended.forfeited_side)
        assert places is not None and places[-1] == (ended.forfeited_side,)
        if ended.cause == "timeout":
            assert isinstance(g.events[-3], TimedOut)
    verdict = replay_record(build_record(g.events))
    assert verdict.ok, verdict.line()
