"""What each viewer may know: seat and spectator views, redacted streams, reveal at the end."""

from __future__ import annotations

import random

import pytest

from bergen.domain.commands import Abandon, Play
from bergen.domain.events import Dealt, MatchCreated, TileDrawn
from bergen.domain.policies import random_policy
from bergen.domain.rules import make_rules
from bergen.domain.simulation import play_match
from bergen.domain.state import ENDED, evolve, fold
from bergen.domain.tiles import End
from bergen.domain.views import hidden_tiles, redact_event, redact_stream, view

from . import deals
from .support import SEED, Game, T


@pytest.fixture
def drawn(crafted_deals) -> Game:
    # Lead 3-3 by seat 0; seat 1 drew 0-4 then 3-5 and must play 3-5.
    crafted_deals({(1, 1): deals.ONE_THEN_PASS})
    return Game().start()


def test_a_seat_sees_its_own_tiles_and_counts_of_the_rest(drawn):
    s = drawn.s
    mine = view(s, 1)
    assert mine.seat == 1 and mine.my_side == 1
    assert set(mine.tiles) == set(s.hands[1]) and len(mine.tiles) == 8
    assert mine.hand_sizes == (5, 8)
    assert mine.boneyard_size == 14 and mine.drawable == 12
    assert mine.ends == (3, 3, True, True) and mine.line == ((3, 3),)
    assert mine.scores == (2, 0) and mine.turn == 1
    assert mine.must_play == T("3-5")
    assert mine.legal_plays == ((T("3-5"), End.LEFT), (T("3-5"), End.RIGHT))
    assert mine.revealed_hands is None and mine.server_seed is None
    assert mine.players == ("p0", "p1") and mine.commitment == s.commitment


def test_legal_plays_and_the_drawn_tile_only_on_the_seats_turn(drawn):
    other = view(drawn.s, 0)
    assert set(other.tiles) == set(drawn.s.hands[0])
    assert other.legal_plays == () and other.must_play is None
    assert T("3-5") not in other.tiles


def test_a_spectator_sees_no_hand(drawn):
    spectator = view(drawn.s, None)
    assert spectator.seat is None and spectator.my_side is None
    assert spectator.tiles == () and spectator.legal_plays == () and spectator.must_play is None
    assert spectator.revealed_hands is None and spectator.server_seed is None
    assert spectator.hand_sizes == (5, 8)


def test_a_seat_not_in_the_match_has_no_view(drawn):
    with pytest.raises(IndexError):
        view(drawn.s, 2)


def test_everything_is_revealed_after_the_end(drawn):
    drawn.do(Abandon("test"))
    for seat in (0, 1, None):
        v = view(drawn.s, seat)
        assert v.phase == ENDED
        assert v.revealed_hands == tuple(tuple(h) for h in drawn.s.hands)
        assert v.server_seed == SEED.hex()
        assert v.legal_plays == ()
    assert redact_stream(drawn.events, 0) == drawn.events
    assert redact_stream(drawn.events, None) == drawn.events


def test_redaction_hides_others_tiles_draws_and_the_seed_while_live(drawn):
    events = drawn.events
    for viewer in (0, 1, None):
        shown = redact_stream(events, viewer)
        assert hidden_tiles(shown, viewer) == set()
        created = shown[0]
        assert isinstance(created, MatchCreated) and created.server_seed is None
        dealt = next(e for e in shown if isinstance(e, Dealt))
        for seat, hand in enumerate(dealt.hands):
            if seat == viewer:
                assert all(t is not None for t in hand)
            else:
                assert hand == (None,) * len(hand)
        assert set(dealt.boneyard) == {None}
        for e in shown:
            if isinstance(e, TileDrawn):
                assert (e.tile is not None) == (e.seat == viewer)
    # The unredacted stream shows other seats' tiles.
    assert hidden_tiles(events, 0) != set()
    assert hidden_tiles(events, None) >= set(drawn.s.hands[0])


def test_redact_event_leaves_public_facts_alone(drawn):
    for e in drawn.events:
        if not isinstance(e, MatchCreated | Dealt | TileDrawn):
            assert redact_event(e, 0) is e


@pytest.mark.parametrize(("seats", "partnerships"), [(2, False), (3, False), (4, True)])
def test_folding_a_redacted_stream_gives_the_same_view(seats, partnerships):
    rules = make_rules(seats, partnerships, "standard")
    rng = random.Random(seats)
    g = Game(seats, partnerships, rules, server_seed=bytes([seats]) * 32).start()
    viewers = (*range(seats), None)
    partial = {v: fold(redact_stream(g.events, v)) for v in viewers}
    for v in viewers:
        assert view(partial[v], v) == view(g.s, v)
    while g.s.phase != ENDED:
        seat = g.s.turn
        tile, at = random_policy(view(g.s, seat), rng)
        new = g.do(Play(seat, tile, at))
        if g.s.phase == ENDED:
            partial = {v: fold(redact_stream(g.events, v)) for v in viewers}
        else:
            for v in viewers:
                for e in new:
                    partial[v] = evolve(partial[v], redact_event(e, v))
                assert hidden_tiles(redact_stream(g.events, v), v) == set()
        for v in viewers:
            assert view(partial[v], v) == view(g.s, v)
    assert partial[None] == g.s


def test_a_simulated_match_never_leaks_through_redaction():
    rules = make_rules(3, False, "eastern")
    events, _final = play_match("m", rules, 3, False, SEED, [random_policy] * 3, random.Random(1))
    for cut in range(1, len(events) - 2, 7):
        live = events[:cut]
        for viewer in (0, 1, 2, None):
            assert hidden_tiles(redact_stream(live, viewer), viewer) == set()
    assert redact_stream(events, 0) == events
