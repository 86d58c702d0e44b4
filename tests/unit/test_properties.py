"""Property tests: random legal play, for every preset and seat count, never breaks a rule.

A referee written from RULES.md (not from the engine) walks every event with the state before
it, folded from the stream, and checks each fact: the lead, turns, draws, passes, points,
blocks, the end of each hand and of the match. At every command, folding the prefix of the
events gives the state the engine returned.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bergen.domain import codec
from bergen.domain.commands import CreateMatch, Play, TakeSeat
from bergen.domain.engine import execute
from bergen.domain.events import (
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
)
from bergen.domain.rules import CHOICES, PRESETS, Rules, make_rules
from bergen.domain.state import ENDED, PLAYING, State, evolve, fold
from bergen.domain.tiles import ALL_TILES, End, Tile
from bergen.domain.views import view

CONFIGS = [(2, False), (3, False), (4, False), (4, True)]
HAND_SIZE = {2: 6, 3: 6, 4: 5}
DRAWABLE = {2: 14, 3: 8, 4: 6}
MAX_PLAYS = 3000

PROPERTY = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# --- the referee's own reading of RULES.md ----------------------------------------------------


def side_of(seat: int, partnerships: bool) -> int:
    return seat % 2 if partnerships else seat


def sides(seats: int, partnerships: bool) -> list[list[int]]:
    return [[0, 2], [1, 3]] if partnerships else [[s] for s in range(seats)]


def fits(tile: Tile, left: int, right: int) -> bool:
    return left in (tile.low, tile.high) or right in (tile.low, tile.high)


def ends_of(line) -> tuple[int, int, bool, bool]:
    (a, b), (c, d) = line[0], line[-1]
    return a, d, a == b, c == d


def holds_fit(state: State, seat: int) -> bool:
    left, right = state.ends[0], state.ends[1]
    return any(t is not None and fits(t, left, right) for t in state.hands[seat])


def blocked_now(state: State) -> bool:
    return (
        state.phase == PLAYING
        and not state.hand_over
        and state.ends is not None
        and len(state.boneyard) <= 2
        and not any(holds_fit(state, s) for s in range(state.seats))
    )


def lead_oracle(rules: Rules, hands) -> tuple[int, Tile] | None:
    held = {t: s for s, h in enumerate(hands) for t in h}
    doubles = sorted((t for t in held if t.low == t.high), key=lambda t: t.low)
    if doubles:
        tile = doubles[-1] if rules.lead == "highest_double" else doubles[0]
    elif rules.lead == "lowest_double_else_lowest_tile":
        tile = min(held, key=lambda t: (t.low, t.high))
    else:
        return None
    return held[tile], tile


def award_oracle(rules: Rules, line, tile: Tile, side_score: int) -> tuple[int, str, int]:
    left, right, dl, dr = ends_of(line)
    base, reason = 0, ""
    if len(line) == 1:
        if tile.low == tile.high:
            base, reason = 2, "double_header"
    elif left == right:
        base, reason = (3, "triple_header") if dl != dr else (2, "double_header")
    if rules.double_bonus and tile.low == tile.high and rules.double_bonus > base:
        base, reason = rules.double_bonus, "double_bonus"
    got = base
    if base and rules.endgame_reduction == "on":
        d = rules.target - side_score
        got = 1 if d <= 2 else min(base, 2) if d == 3 else base
    return got, reason, base


def blocked_oracle(rule: str, side_tiles: list[list[Tile]]) -> int | None:
    def unique_min(pairs):
        best = min(k for k, _ in pairs)
        winners = [i for k, i in pairs if k == best]
        return winners[0] if len(winners) == 1 else None

    n = len(side_tiles)
    doubles = [sum(t.low == t.high for t in ts) for ts in side_tiles]
    pips = [sum(t.low + t.high for t in ts) for ts in side_tiles]
    if rule == "german":
        return unique_min([((doubles[i], pips[i]), i) for i in range(n)])
    if rule == "pips":
        return unique_min([(pips[i], i) for i in range(n)])
    none = [i for i in range(n) if doubles[i] == 0]
    if len(none) == 1:
        return none[0]
    if none:
        if rule == "american":
            return unique_min([((len(side_tiles[i]), pips[i]), i) for i in none])
        return unique_min([(pips[i], i) for i in none])
    lowest = min((t.low, i) for i, ts in enumerate(side_tiles) for t in ts if t.low == t.high)
    return lowest[1]


# --- playing ----------------------------------------------------------------------------------


def choose(state: State, legal, rnd, style: str):
    """A random legal play; the `blocking` style prefers plays that leave the fewest unplayed
    tiles fitting the ends, to reach dead lines and blocked hands often."""
    if style == "random":
        return rnd.choice(legal)
    on_line = {Tile.of(a, b) for a, b in state.line}
    unplayed = [t for t in ALL_TILES if t not in on_line]

    def live(play):
        tile, end = play
        left, right = state.ends[0], state.ends[1]
        if end is End.LEFT:
            left = tile.high if tile.low == left else tile.low
        else:
            right = tile.high if tile.low == right else tile.low
        return sum(fits(t, left, right) for t in unplayed if t != tile)

    best = min(live(p) for p in legal)
    return rnd.choice([p for p in legal if live(p) == best])


def play_out(seats, partnerships, rules, seed, rnd, omit_ends, style="random"):
    """Every command's (events, state) of a match played to the end with random legal moves."""
    steps = []
    state = None

    def do(command):
        nonlocal state
        events, state = execute(state, command)
        steps.append((events, state))

    do(CreateMatch("prop", seats, partnerships, rules, seed, "p"))
    order = list(range(seats))
    rnd.shuffle(order)
    for seat in order:
        do(TakeSeat(name=f"n{seat}", client_seed=str(rnd.randint(0, 9)), seat=seat))
    plays = 0
    while state.phase != ENDED:
        plays += 1
        assert plays < MAX_PLAYS, "the match does not end"
        seat = state.turn
        legal = view(state, seat).legal_plays
        tile, end = choose(state, legal, rnd, style)
        if omit_ends and [t for t, _ in legal].count(tile) == 1:
            end = None
        do(Play(seat, tile, end))
    return steps


def check_legal_plays(state: State) -> None:
    if state.phase != PLAYING:
        return
    seat = state.turn
    left, right = state.ends[0], state.ends[1]
    pool = [state.must_play] if state.must_play is not None else list(state.hands[seat])
    expected = {(t, End.LEFT) for t in pool if left in (t.low, t.high)}
    expected |= {(t, End.RIGHT) for t in pool if right in (t.low, t.high)}
    assert expected, "the seat to move has no legal play"
    assert set(state.legal_plays(seat)) == expected
    for other in range(state.seats):
        if other != seat:
            assert state.legal_plays(other) == ()


def referee(steps, seats, partnerships, rules: Rules, seed: bytes, sample) -> None:
    """Walk every event with the state before it and check it against RULES.md."""
    n_sides = 2 if partnerships else seats
    target = rules.target
    events = [e for evs, _ in steps for e in evs]
    state: State | None = None
    prev = None
    actor = None  # the seat expected to act next
    draws_this_hand = 0
    hands_dealt = hands_ended = 0
    pending_award = None  # (side, points, reason, base) a play must be followed by
    count = 0
    for evs, engine_state in steps:
        for e in evs:
            before = state
            after = evolve(state, e)
            if isinstance(e, MatchCreated):
                assert before is None and e.commitment == hashlib.sha256(seed).hexdigest()
            elif isinstance(e, SeatTaken):
                assert before.players[e.seat] is None
            elif isinstance(e, Dealt):
                assert isinstance(prev, SeatTaken | DealVoided | HandEnded)
                if isinstance(prev, DealVoided):
                    assert (e.hand, e.attempt) == (prev.hand, prev.attempt + 1)
                else:
                    assert (e.hand, e.attempt) == (before.hand + 1, 1)
                    hands_dealt += 1
                assert [len(h) for h in e.hands] == [HAND_SIZE[seats]] * seats
                assert len(e.boneyard) == 28 - seats * HAND_SIZE[seats]
                assert sorted([t for h in e.hands for t in h] + list(e.boneyard)) == list(ALL_TILES)
                draws_this_hand = 0
            elif isinstance(e, DealVoided):
                assert isinstance(prev, Dealt) and lead_oracle(rules, prev.hands) is None
            elif isinstance(e, TilePlayed):
                assert pending_award is None
                if not before.line:
                    assert isinstance(prev, Dealt) and e.end is None
                    assert (e.seat, e.tile) == lead_oracle(rules, prev.hands)
                else:
                    assert e.seat == actor == before.turn, "played out of turn"
                    assert e.tile in before.hands[e.seat], "played a tile not held"
                    if before.must_play is not None:
                        assert e.tile == before.must_play
                    number = before.ends[0] if e.end is End.LEFT else before.ends[1]
                    assert number in (e.tile.low, e.tile.high), "the tile does not fit that end"
                assert after.ends == ends_of(after.line)
                assert len(after.line) == len(before.line) + 1
                side = side_of(e.seat, partnerships)
                got, reason, base = award_oracle(rules, after.line, e.tile, before.scores[side])
                pending_award = (side, got, reason, base) if got else None
                actor = (e.seat + 1) % seats
            elif isinstance(e, TileDrawn):
                assert pending_award is None
                assert e.seat == actor == before.turn
                assert not holds_fit(before, e.seat), "drew while holding a fitting tile"
                assert len(before.boneyard) > 2, "drew from the reserve"
                assert e.tile == before.boneyard[0]
                if rules.draw == "one_then_pass":
                    assert not isinstance(prev, TileDrawn)
                elif isinstance(prev, TileDrawn):
                    assert prev.seat == e.seat and prev.tile not in (before.must_play,)
                draws_this_hand += 1
                assert draws_this_hand <= DRAWABLE[seats]
                fit = fits(e.tile, before.ends[0], before.ends[1])
                assert after.must_play == (e.tile if fit else None)
            elif isinstance(e, Passed):
                assert pending_award is None
                assert e.seat == actor == before.turn
                assert not holds_fit(before, e.seat), "passed while holding a fitting tile"
                drew = isinstance(prev, TileDrawn) and prev.seat == e.seat
                assert len(before.boneyard) == 2 or (rules.draw == "one_then_pass" and drew)
                actor = (e.seat + 1) % seats
            elif isinstance(e, PointsScored):
                assert e.points > 0
                if e.reason in ("double_header", "triple_header", "double_bonus"):
                    assert isinstance(prev, TilePlayed) and e.seat == prev.seat
                    assert (e.side, e.points, e.reason, e.base) == pending_award
                    pending_award = None
                elif e.reason == "domino":
                    assert pending_award is None
                    assert isinstance(prev, TilePlayed | PointsScored)
                    assert before.hands[e.seat] == ()
                    assert (e.side, e.points, e.base) == (
                        side_of(e.seat, partnerships),
                        rules.domino_points,
                        rules.domino_points,
                    )
                else:
                    assert e.reason == "blocked" and blocked_now(before)
                    assert e.points == e.base == 2
                expected_scores = list(before.scores)
                expected_scores[e.side] += e.points
                assert list(after.scores) == expected_scores
            elif isinstance(e, HandEnded):
                assert pending_award is None
                assert e.scores == before.scores and e.hand == before.hand
                hands_ended += 1
                if e.reason == "blocked":
                    assert blocked_now(before)
                    side_tiles = [
                        [t for s in side for t in before.hands[s]]
                        for side in sides(seats, partnerships)
                    ]
                    winner = blocked_oracle(rules.blocked, side_tiles)
                    assert (e.side, e.points) == ((winner, 2) if winner is not None else (None, 0))
                    if winner is not None:
                        assert isinstance(prev, PointsScored) and prev.reason == "blocked"
                elif e.reason == "domino":
                    assert isinstance(prev, PointsScored) and prev.reason == "domino"
                    assert (e.side, e.points) == (prev.side, prev.points)
                else:
                    assert e.reason == "match_over" and rules.match_end == "instant"
                    assert (e.side, e.points) == (None, 0) and max(e.scores) >= target
            elif isinstance(e, MatchEnded):
                assert isinstance(prev, HandEnded)
                top = max(before.scores)
                assert e.reason == "target" and top >= target
                assert e.scores == before.scores
                assert before.scores.count(top) == 1 and e.winner_side == before.scores.index(top)
            elif isinstance(e, SeedRevealed):
                assert isinstance(prev, MatchEnded) and e.server_seed == seed.hex()
            else:  # pragma: no cover
                raise AssertionError(f"unknown event {e!r}")

            # After every event: every tile is in exactly one place; scores only grow.
            if after.hands:
                where = [t for h in after.hands for t in h] + list(after.boneyard)
                where += [Tile.of(a, b) for a, b in after.line]
                assert sorted(where) == list(ALL_TILES)
            if before is not None and before.scores:
                assert all(a >= b for a, b in zip(after.scores, before.scores, strict=True))
                assert len(after.scores) == n_sides
            if rules.match_end == "instant" and after.scores and max(after.scores) >= target:
                assert isinstance(e, PointsScored | HandEnded | MatchEnded | SeedRevealed)
            instant = rules.match_end == "instant"
            if instant and before is not None and before.scores and max(before.scores) >= target:
                assert not isinstance(e, PointsScored), "scored after the target was reached"
            if isinstance(prev, Dealt) and not isinstance(e, DealVoided):
                assert isinstance(e, TilePlayed), "the lead is made at once"
            if (
                before is not None
                and before.phase == PLAYING
                and not before.hand_over
                and any(not h for h in before.hands)
            ):
                # A seat went out: the hand ends with nothing else played, drawn or passed.
                assert isinstance(e, PointsScored | HandEnded)
            # Every fact can be stored and read back.
            assert codec.decode(*codec.encode(e)) == e
            if before is not None and blocked_now(before):
                # A blocked hand is scored at once: nobody draws, passes or plays on.
                assert isinstance(e, PointsScored | HandEnded), "played on in a blocked hand"
            prev = e
            state = after
            count += 1
        # Folding this prefix of the stream gives the engine's state.
        assert state == engine_state
        if sample(count):
            assert fold(events[:count]) == engine_state
        check_legal_plays(engine_state)
        if engine_state.phase == PLAYING:
            assert engine_state.turn == actor
    assert state.phase == ENDED
    assert [type(e) for e in events[-2:]] == [MatchEnded, SeedRevealed]
    assert hands_dealt == hands_ended, "a hand did not end"
    assert pending_award is None
    # Scores grow exactly by the points events.
    totals = Counter()
    for e in events:
        if isinstance(e, PointsScored):
            totals[e.side] += e.points
    assert list(state.scores) == [totals[s] for s in range(n_sides)]


# --- strategies -------------------------------------------------------------------------------

configs = st.sampled_from(CONFIGS)
custom_options = st.fixed_dictionaries(
    {},
    optional={
        **{name: st.sampled_from(values) for name, values in CHOICES.items()},
        "target": st.integers(1, 25),
    },
)


styles = st.sampled_from(["random", "blocking"])


def run(seats, partnerships, rules, seed, rnd, omit_ends, cut, style):
    steps = play_out(seats, partnerships, rules, seed, rnd, omit_ends, style)
    referee(steps, seats, partnerships, rules, seed, lambda k: k % cut == 0)


@PROPERTY
@given(
    config=configs,
    preset=st.sampled_from(sorted(PRESETS)),
    seed=st.binary(min_size=32, max_size=32),
    rnd=st.randoms(use_true_random=False),
    omit_ends=st.booleans(),
    cut=st.integers(5, 40),
    style=styles,
)
def test_random_legal_play_under_every_preset_keeps_every_rule(
    config, preset, seed, rnd, omit_ends, cut, style
):
    seats, partnerships = config
    rules = make_rules(seats, partnerships, preset)
    run(seats, partnerships, rules, seed, rnd, omit_ends, cut, style)


@PROPERTY
@given(
    config=configs,
    options=custom_options,
    seed=st.binary(min_size=32, max_size=32),
    rnd=st.randoms(use_true_random=False),
    cut=st.integers(5, 40),
    style=styles,
)
def test_random_legal_play_under_any_options_keeps_every_rule(
    config, options, seed, rnd, cut, style
):
    seats, partnerships = config
    rules = make_rules(seats, partnerships, None, options)
    run(seats, partnerships, rules, seed, rnd, False, cut, style)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    preset=st.sampled_from(sorted(PRESETS)),
    seed=st.binary(min_size=32, max_size=32),
    rnd=st.randoms(use_true_random=False),
    style=styles,
)
def test_four_seat_partnerships_under_every_preset(preset, seed, rnd, style):
    rules = make_rules(4, True, preset)
    run(4, True, rules, seed, rnd, False, 10, style)


def _refolded(steps, tamper):
    """The steps with one event replaced, and states folded from the tampered stream, so that
    only the referee's reading of the rules can notice."""
    out, state, done = [], None, False
    for evs, _ in steps:
        new = []
        for e in evs:
            if not done and (changed := tamper(e)) is not None:
                e, done = changed, True
            new.append(e)
            state = evolve(state, e)
        out.append((tuple(new), state))
    assert done
    return out


TAMPERS = {
    "more points": lambda e: (
        replace(e, points=e.points + 1) if isinstance(e, PointsScored) else None
    ),
    "another reason": lambda e: (
        replace(e, reason="triple_header")
        if isinstance(e, PointsScored) and e.reason == "double_header"
        else None
    ),
    "points to the other side": lambda e: (
        replace(e, side=1 - e.side)
        if isinstance(e, PointsScored) and e.reason == "domino"
        else None
    ),
    "another winner": lambda e: (
        replace(e, winner_side=1 - e.winner_side) if isinstance(e, MatchEnded) else None
    ),
    "hand won by nobody": lambda e: (
        replace(e, side=None, points=0) if isinstance(e, HandEnded) and e.side is not None else None
    ),
}


@pytest.mark.parametrize("name", sorted(TAMPERS))
def test_the_referee_rejects_a_tampered_stream(name):
    rules = make_rules(2, False, "standard")
    seed = bytes(32)
    steps = play_out(2, False, rules, seed, random.Random(1), False)
    referee(steps, 2, False, rules, seed, lambda k: True)
    with pytest.raises(AssertionError):
        referee(_refolded(steps, TAMPERS[name]), 2, False, rules, seed, lambda k: True)
