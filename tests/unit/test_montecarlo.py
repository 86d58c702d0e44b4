"""The Monte Carlo policy: what a seat knows, the worlds it samples, the plays it picks."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from bergen.domain.commands import CreateMatch, Play, TakeSeat
from bergen.domain.deciders import POLICY_NAMES, decider
from bergen.domain.engine import execute
from bergen.domain.events import Dealt, Event, Passed, SeatTaken, TileDrawn, TilePlayed
from bergen.domain.montecarlo import (
    Knowledge,
    Sampler,
    Settings,
    decide_play,
    knowledge,
    learn,
    montecarlo_play,
)
from bergen.domain.policies import greedy_policy, random_policy
from bergen.domain.rules import make_rules
from bergen.domain.simulation import play_match
from bergen.domain.state import PLAYING, State, evolve
from bergen.domain.tiles import ALL_TILES, FITS, End, Tile
from bergen.domain.views import redact_event, redact_stream

CONFIGS = [
    (2, False, "standard"),
    (3, False, "standard"),
    (4, False, "standard"),
    (4, True, "standard"),
    (3, False, "eastern"),
    (2, False, "eastern"),
]


def matches(seats: int, partnerships: bool, preset: str, count: int) -> Iterator[list[Event]]:
    rules = make_rules(seats, partnerships, preset)
    rng = random.Random(f"{seats}{partnerships}{preset}")
    for i in range(count):
        policies = [greedy_policy if s % 2 else random_policy for s in range(seats)]
        events, _ = play_match(
            f"mc-{i}", rules, seats, partnerships, bytes([i + 1]) * 32, policies, rng
        )
        yield events


def positions(
    events: list[Event],
) -> Iterator[tuple[State, list[Knowledge], list[tuple[State, Event]]]]:
    """Every state of a hand in play, with each seat's knowledge and the hand so far (each
    event with the state before it)."""
    full: State | None = None
    ks: list[Knowledge] = []
    hand: list[tuple[State, Event]] = []
    for e in events:
        before = full
        full = evolve(full, e)
        if not ks:
            ks = [Knowledge(s, None) for s in range(full.seats)]
        ks = [learn(k, redact_event(e, k.seat)) for k in ks]
        if isinstance(e, Dealt):
            hand = []
        if before is not None:
            hand.append((before, e))
        if full.phase == PLAYING and not full.hand_over and full.ends is not None:
            yield full, ks, list(hand)


def facts(hand: list[tuple[State, Event]], seat: int) -> list[tuple[int, int, int]]:
    """(left, right, tiles drawn since) for each time `seat` drew or passed facing left|right
    in the hand, worked out from the events alone."""
    out = []
    for i, (before, e) in enumerate(hand):
        if isinstance(e, (TileDrawn, Passed)) and e.seat == seat:
            assert before.ends is not None
            since = sum(isinstance(x, TileDrawn) and x.seat == seat for _, x in hand[i:])
            out.append((before.ends[0], before.ends[1], since))
    return out


def lead_of_hand(hand: list[tuple[State, Event]]) -> Tile:
    return next(e.tile for _, e in hand if isinstance(e, TilePlayed))


@pytest.mark.parametrize(("seats", "partnerships", "preset"), CONFIGS)
def test_every_sampled_world_agrees_with_what_the_seat_saw(seats, partnerships, preset):
    rng = random.Random(7)
    checked_voids = 0
    for events in matches(seats, partnerships, preset, 3):
        for n, (full, ks, hand) in enumerate(positions(events)):
            if n % 3:
                continue
            seat = full.turn if full.turn is not None else 0
            k = ks[seat]
            line = {Tile.of(a, b) for a, b in full.line}
            lead = lead_of_hand(hand)
            drawn = [sum(isinstance(e, TileDrawn) and e.seat == s for _, e in hand)
                     for s in range(seats)]  # fmt: skip
            sampler = Sampler(k)
            for _ in range(4):
                w = sampler.world(rng)
                # Its own tiles, every count, every tile exactly once, nothing played in hand.
                assert sorted(w.hands[seat]) == sorted(t for t in full.hands[seat] if t)
                assert [len(h) for h in w.hands] == [len(h) for h in full.hands]
                assert len(w.boneyard) == len(full.boneyard)
                placed = [t for h in w.hands for t in h] + list(w.boneyard) + list(line)
                assert sorted(placed) == list(ALL_TILES)
                assert w.line == full.line and w.scores == full.scores and w.turn == full.turn
                for other in range(seats):
                    if other == seat:
                        continue
                    held = w.hands[other]
                    assert not line & set(held)
                    # A seat that drew or passed facing L|R held nothing showing L or R then:
                    # only tiles it drew afterwards may show them.
                    for left, right, since in facts(hand, other):
                        showing = [t for t in held if FITS[left] & t.bit or FITS[right] & t.bit]
                        assert len(showing) <= since, (left, right, since, held)
                        checked_voids += since == 0
                    # No dealt hand held a double below the lead (lowest-double rules).
                    if lead.is_double:
                        lower = [t for t in held if t.is_double and t < lead]
                        assert len(lower) <= drawn[other]
    assert checked_voids > 0


@pytest.mark.parametrize(("seats", "partnerships", "preset"), CONFIGS)
def test_the_true_deal_is_always_one_of_the_possible_worlds(seats, partnerships, preset):
    for events in matches(seats, partnerships, preset, 3):
        for full, ks, _ in positions(events):
            for k in ks:
                for other, masks in enumerate(k.slots):
                    if other == k.seat:
                        continue
                    tiles = [t for t in full.hands[other] if t is not None]
                    assert len(masks) == len(tiles)
                    assert _perfect_matching(tiles, list(masks)), (other, tiles, masks)


def _perfect_matching(tiles: list[Tile], masks: list[int]) -> bool:
    owner: dict[int, Tile] = {}

    def augment(t: Tile, seen: set[int]) -> bool:
        for j, m in enumerate(masks):
            if m & t.bit or j in seen:
                continue
            seen.add(j)
            if j not in owner or augment(owner[j], seen):
                owner[j] = t
                return True
        return False

    return all(augment(t, set()) for t in tiles)


def test_a_draw_constrains_the_tiles_held_then_and_not_the_tile_drawn():
    rules = make_rules(2, False, "standard")
    created, _ = execute(None, CreateMatch("m", 2, False, rules, bytes(32), ""))
    k = knowledge([*created, SeatTaken(0, "a", ""), SeatTaken(1, "b", "")], 0)
    mine = tuple(Tile.parse(t) for t in ["3-3", "0-1", "0-2", "1-2", "4-5", "4-6"])
    k = learn(k, Dealt(hand=1, attempt=1, hands=(mine, (None,) * 6), boneyard=(None,) * 16))
    k = learn(k, TilePlayed(hand=1, seat=0, tile=Tile.of(3, 3), end=None))
    # The lead 3-3 was the lowest double: seat 1 was dealt no 0-0, 1-1 or 2-2.
    lower = Tile.of(0, 0).bit | Tile.of(1, 1).bit | Tile.of(2, 2).bit
    assert all(m & lower == lower for m in k.slots[1])
    k = learn(k, TileDrawn(hand=1, seat=1, tile=None))
    k = learn(k, TileDrawn(hand=1, seat=1, tile=None))
    assert len(k.slots[1]) == 8
    assert all(m & FITS[3] == FITS[3] for m in k.slots[1][:7])
    assert k.slots[1][7] == 0
    rng = random.Random(2)
    sampler = Sampler(k)
    doubles_seen = 0
    for _ in range(200):
        w = sampler.world(rng)
        # Only the two tiles drawn may break what the deal and the first draw showed.
        assert sum(t.has(3) for t in w.hands[1]) <= 1
        low = [t for t in w.hands[1] if t.bit & lower]
        assert len(low) + sum(t.has(3) for t in w.hands[1]) <= 2
        doubles_seen += bool(low)
    assert doubles_seen > 0  # the drawn tiles are not held to the deal's constraint
    # A play of a tile showing 3 can only be the tile drawn last: the rest stay constrained.
    k = learn(k, TilePlayed(hand=1, seat=1, tile=Tile.of(3, 5), end=End.LEFT))
    assert len(k.slots[1]) == 7 and all(m & FITS[3] for m in k.slots[1])


def test_the_sampler_refuses_knowledge_no_world_fits():
    events = next(matches(2, False, "standard", 1))
    _, ks, _ = next(positions(events))
    k = ks[0]
    everything = (1 << 28) - 1
    impossible = Knowledge(k.seat, k.state, tuple(tuple(everything for _ in ms) for ms in k.slots))
    with pytest.raises(ValueError, match="no world fits"):
        Sampler(impossible).world(random.Random(1))


@pytest.mark.parametrize(("seats", "partnerships", "preset"), CONFIGS)
def test_the_monte_carlo_play_is_always_legal(seats, partnerships, preset):
    rng = random.Random(3)
    decided = 0
    for events in matches(seats, partnerships, preset, 2):
        for n, (full, ks, _) in enumerate(positions(events)):
            seat = full.turn
            if seat is None or n % 2 or not full.legal_plays(seat):
                continue
            d = decide_play(ks[seat], rng, Settings(samples=3))
            assert (d.tile, d.end) in full.legal_plays(seat)
            assert d.samples == (3 if len(full.legal_plays(seat)) > 1 else 0)
            decided += 1
    assert decided > 10


def test_a_decision_keeps_to_its_time_budget():
    events = next(matches(3, False, "standard", 1))
    rng = random.Random(5)
    for full, ks, _ in positions(events):
        seat = full.turn
        if seat is not None and len(full.legal_plays(seat)) > 1:
            d = decide_play(ks[seat], rng, Settings(budget_s=0.05))
            assert d.samples >= Settings().min_samples
            assert d.seconds < 0.5
            return
    pytest.fail("no decision with a choice")


def test_every_policy_decides_from_the_redacted_stream_alone():
    events = next(matches(2, False, "standard", 1))
    full: State | None = None
    for i, e in enumerate(events):
        full = evolve(full, e)
        if full.phase == PLAYING and full.turn is not None and full.legal_plays(full.turn):
            seat = full.turn
            k = knowledge(redact_stream(events[: i + 1], seat), seat)
            for name in POLICY_NAMES:
                play = decider(name, Settings(samples=2))(k, random.Random(1))
                assert play in full.legal_plays(seat)
            assert montecarlo_play(k, random.Random(1), Settings(samples=2)) in full.legal_plays(
                seat
            )
            return


def test_the_monte_carlo_play_on_a_clocked_match_imagines_its_playouts_without_clocks():
    rules = make_rules(2, False, "standard", {"clock": "fischer", "clock_initial": 60})
    rng = random.Random(7)
    state: State | None = None
    events: list[Event] = []
    for command in (
        CreateMatch("mc-clock", 2, False, rules, bytes(32)),
        TakeSeat("a", "", None),
        TakeSeat("b", "", None),
    ):
        decided, state = execute(state, command)
        events += decided
    at = 0
    decided_on_clock = 0
    while state is not None and state.phase == PLAYING and decided_on_clock < 3:
        seat = state.turn
        assert seat is not None and state.clocks
        legal = state.legal_plays(seat)
        k = knowledge(redact_stream(events, seat), seat)
        d = decide_play(k, rng, Settings(samples=2))
        assert (d.tile, d.end) in legal
        decided_on_clock += len(legal) > 1
        at += 500
        decided, state = execute(state, Play(seat, d.tile, d.end, at))
        events += decided
    assert decided_on_clock == 3
