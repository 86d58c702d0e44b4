"""The ISMCTS policy: legal plays only, decided from the seat's view alone, the same play for
the same seed, and the plays that win at once found."""

from __future__ import annotations

import dataclasses
import math
import random

import pytest

from bergen.domain.deciders import POLICY_NAMES, SEARCHING, decider
from bergen.domain.events import Dealt, Event
from bergen.domain.ismcts import decide_play, ismcts_play
from bergen.domain.montecarlo import Knowledge, Settings, knowledge
from bergen.domain.state import PLAYING, State, evolve
from bergen.domain.tiles import End
from bergen.domain.views import redact_stream

from . import deals
from .support import Game, T
from .test_montecarlo import CONFIGS, matches, positions

FIXED = Settings(samples=60, budget_s=math.inf, min_samples=1)
"""A fixed number of iterations: a decision that does not depend on the machine's speed."""


def decisions(events: list[Event], limit: int) -> list[tuple[State, Knowledge, int]]:
    """Up to `limit` positions with a choice: the full state, the seat's knowledge, and the
    index of the event after which it decides."""
    out = []
    full: State | None = None
    for i, e in enumerate(events):
        full = evolve(full, e)
        seat = full.turn
        if (
            full.phase == PLAYING
            and not full.hand_over
            and seat is not None
            and len(full.legal_plays(seat)) > 1
        ):
            out.append((full, knowledge(redact_stream(events[: i + 1], seat), seat), i))
            if len(out) == limit:
                break
    return out


@pytest.mark.parametrize(("seats", "partnerships", "preset"), CONFIGS)
def test_the_ismcts_play_is_always_legal(seats, partnerships, preset):
    rng = random.Random(5)
    n = 0
    for events in matches(seats, partnerships, preset, 2):
        for full, ks, _ in positions(events):
            seat = full.turn
            if seat is None or not full.legal_plays(seat):
                continue
            n += 1
            if n % 3:
                continue
            play = ismcts_play(ks[seat], rng, Settings(samples=20, budget_s=math.inf))
            assert play in full.legal_plays(seat)
    assert n > 0


def test_the_same_seed_gives_the_same_decision():
    events = next(matches(2, False, "standard", 1))
    for _, k, _ in decisions(events, 4):
        a = decide_play(k, random.Random(11), FIXED)
        b = decide_play(k, random.Random(11), FIXED)
        assert (a.tile, a.end, a.iterations, a.values) == (b.tile, b.end, b.iterations, b.values)


def _with_hidden_tiles_swapped(events: list[Event], upto: int, seat: int) -> list[Event] | None:
    """The record with one tile still hidden from `seat` in another seat's hand swapped with
    one still hidden in the boneyard (never drawn by `upto`): a different truth with the same
    public history. None when there is no such pair."""
    hand_start = max(i for i in range(upto + 1) if isinstance(events[i], Dealt))
    dealt = events[hand_start]
    assert isinstance(dealt, Dealt)
    full: State | None = None
    for e in events[: upto + 1]:
        full = evolve(full, e)
    assert full is not None
    other = next(s for s in range(full.seats) if s != seat)
    held = [t for t in full.hands[other] if t is not None and t in dealt.hands[other]]
    undrawn = [t for t in full.boneyard if t is not None]
    if not held or not undrawn:
        return None
    a, b = held[0], undrawn[0]

    def swap(tiles: tuple) -> tuple:
        return tuple(b if t == a else a if t == b else t for t in tiles)

    changed = dataclasses.replace(
        dealt, hands=tuple(swap(h) for h in dealt.hands), boneyard=swap(dealt.boneyard)
    )
    return [*events[:hand_start], changed, *events[hand_start + 1 :]]


def test_the_decision_never_depends_on_the_hidden_tiles():
    events = next(matches(2, False, "standard", 1))
    checked = 0
    for full, k, i in decisions(events, 12):
        seat = full.turn
        assert seat is not None
        other = _with_hidden_tiles_swapped(events, i, seat)
        if other is None:
            continue
        # The other truth differs, and the seat sees exactly the same.
        assert other[: i + 1] != events[: i + 1]
        seen = redact_stream(other[: i + 1], seat)
        assert seen == redact_stream(events[: i + 1], seat)
        k2 = knowledge(seen, seat)
        a = decide_play(k, random.Random(3), FIXED)
        b = decide_play(k2, random.Random(3), FIXED)
        assert (a.tile, a.end, a.values) == (b.tile, b.end, b.values)
        checked += 1
    assert checked > 0


def test_it_takes_the_header_that_wins_the_match(crafted_deals):
    # Ends 1|3*; seat 1 holds 1-3 (a header at either end, reduced to 1 on 14) and 0-1 (none).
    # Side 1 on 14: 1-3 wins the match at once; 0-1 gives seat 0 its turn.
    crafted_deals({(1, 1): deals.CASE2})
    g = Game().start()
    g.play(1, "3-5", "left")
    g.play(0, "1-5", "left")
    g.set_score(1, 14)
    k = knowledge(redact_stream(g.events, 1), 1)
    for seed in range(5):
        d = decide_play(k, random.Random(seed), FIXED)
        assert d.tile == T("1-3")


def test_it_goes_out_with_the_play_that_scores_most(crafted_deals):
    crafted_deals({(1, 1): deals.GO_OUT})
    g = Game().start()
    for seat, tile, at in deals.GO_OUT_PLAYS:
        g.play(seat, tile, at)
    k = knowledge(redact_stream(g.events, 0), 0)
    # 0-5 left: double header 2 + going out 2; right: triple 3 + going out 2.
    d = decide_play(k, random.Random(0), FIXED)
    assert (d.tile, d.end) == (T("0-5"), End.RIGHT)


def test_ismcts_is_a_named_policy_that_searches():
    assert "ismcts" in POLICY_NAMES
    assert "ismcts" in SEARCHING
    events = next(matches(2, False, "standard", 1))
    full, k, _ = decisions(events, 1)[0]
    assert decider("ismcts", FIXED)(k, random.Random(1)) in full.legal_plays(k.seat)


def test_searching_the_other_seats_too_plays_legally(monkeypatch):
    from bergen.domain import ismcts

    monkeypatch.setattr(ismcts, "SEARCH_OTHERS", True)
    for events in matches(3, False, "standard", 1):
        for full, k, _ in decisions(events, 5):
            assert ismcts_play(k, random.Random(2), FIXED) in full.legal_plays(k.seat)
