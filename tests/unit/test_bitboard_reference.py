"""The bitboard rules core against a plain reference of the rules.

`Reference` below plays Bergen from RULES.md with sets of (low, high) pairs and
straightforward loops, nothing shared with the engine but the fair deal (whose vectors are
tested on their own). Random matches are played on both side by side, for every preset,
every seat count and several options: at each choice the reference's legal plays must be the
engine's, and the events the engine gives for the chosen play must be the facts the reference
derives (forced lead, draws, passes, points with their reason, the end of the hand and of the
match). At every move the rules core (`execute`, on a Board) is also compared with the
reference engine's event-by-event path (`execute_evolving`, tests/unit/reference), and the
stream's `fold` with the reference `evolve` applied event by event, whole and as each seat's
redacted stream.

Random positions outside of play check the blocked-hand winner on masks against the
reference for every blocked rule.

The default run is sized for CI (a few seconds). BERGEN_BITBOARD_MATCHES=N plays N matches
per configuration instead, for a long check: N=2000 compares over a million positions.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

import pytest

from bergen.domain import codec, dealing
from bergen.domain.commands import CreateMatch, Play, TakeSeat
from bergen.domain.dealing import deal
from bergen.domain.engine import execute
from bergen.domain.errors import BergenError, CorruptRecord, MatchNotInProgress
from bergen.domain.events import (
    Dealt,
    DealVoided,
    Event,
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
)
from bergen.domain.fastplay import Board, blocked_winner_of_masks
from bergen.domain.montecarlo import Sampler, knowledge, playout, playout_by_states
from bergen.domain.policies import random_policy
from bergen.domain.rules import Rules, make_rules
from bergen.domain.simulation import Timing, play_match
from bergen.domain.state import ENDED, State, evolve, fold
from bergen.domain.tiles import ALL_TILES, End, Tile
from bergen.domain.views import redact_stream
from bergen.domain.vocabulary import PointsReason

from .reference.engine import execute_evolving
from .reference.evolve import evolve as reference_evolve

MATCHES = int(os.environ.get("BERGEN_BITBOARD_MATCHES", "0"))
"""Matches per configuration for a long run; 0: the CI default of each test."""

Pair = tuple[int, int]


def pair(t: Tile) -> Pair:
    return (t.low, t.high)


class Reference:
    """A match of Bergen on sets, written from RULES.md. `facts` collects what happens, in
    order, as plain tuples."""

    def __init__(self, rules: Rules, seats: int, partnerships: bool, match_id: str,
                 seed: bytes, client_seeds: Sequence[str]) -> None:  # fmt: skip
        self.rules = rules
        self.seats = seats
        self.partnerships = partnerships
        self.match_id = match_id
        self.seed = seed
        self.client_seeds = list(client_seeds)
        self.sides = 2 if partnerships else seats
        self.scores = [0] * self.sides
        self.facts: list[tuple[object, ...]] = []
        self.over = False
        self.hand = 0
        self.hands: list[set[Pair]] = []
        self.boneyard: list[Pair] = []
        self.left = self.right = -1
        self.left_double = self.right_double = False
        self.on_line = 0
        self.turn = 0
        self.must: Pair | None = None

    def side(self, seat: int) -> int:
        return seat % 2 if self.partnerships else seat

    # Section 1 and 2: the deal and the lead.
    def start_hand(self, number: int) -> None:
        self.hand = number
        attempt = 1
        while True:
            hands, boneyard = deal(self.seed, self.match_id, number, attempt, self.client_seeds)
            self.facts.append(("dealt", number, attempt))
            self.hands = [{pair(t) for t in h} for h in hands]
            self.boneyard = [pair(t) for t in boneyard]
            self.on_line = 0
            self.must = None
            held = {t: s for s, h in enumerate(self.hands) for t in h}
            doubles = sorted(t for t in held if t[0] == t[1])
            lead: Pair | None = None
            if doubles:
                lead = doubles[-1] if self.rules.lead == "highest_double" else doubles[0]
            elif self.rules.lead == "lowest_double_else_lowest_tile":
                lead = min(held)
            if lead is not None:
                break
            self.facts.append(("voided", number, attempt))
            attempt += 1
        self.play(held[lead], lead, "lead")

    def drawable(self) -> int:
        return max(0, len(self.boneyard) - 2)

    def fits(self, t: Pair) -> bool:
        return self.left in t or self.right in t

    # Section 3: the legal plays of the seat to play.
    def legal(self) -> set[tuple[Pair, str]]:
        tiles = [self.must] if self.must is not None else list(self.hands[self.turn])
        out = set()
        for t in tiles:
            assert t is not None
            if self.left in t:
                out.add((t, "left"))
            if self.right in t:
                out.add((t, "right"))
        return out

    def blocked(self) -> bool:
        return self.drawable() == 0 and not any(self.fits(t) for h in self.hands for t in h)

    # Sections 4 to 7: a play, what it scores, and what follows.
    def play(self, seat: int, t: Pair, end: str) -> None:
        self.hands[seat].remove(t)
        self.must = None
        double = t[0] == t[1]
        if end == "lead":
            self.left, self.right = t
            self.left_double = self.right_double = double
        elif end == "left":
            self.left = t[1] if t[0] == self.left else t[0]
            self.left_double = double
        else:
            self.right = t[1] if t[0] == self.right else t[0]
            self.right_double = double
        self.on_line += 1
        self.facts.append(("played", seat, t, None if end == "lead" else end))
        if self.on_line == 1:
            award, reason = (2, "double_header") if double else (0, "")
        elif self.left != self.right:
            award, reason = 0, ""
        elif self.left_double != self.right_double:
            award, reason = 3, "triple_header"
        else:
            award, reason = 2, "double_header"
        if self.rules.double_bonus and double and self.rules.double_bonus > award:
            award, reason = self.rules.double_bonus, "double_bonus"
        side = self.side(seat)
        if award:
            points = award
            if self.rules.endgame_reduction == "on":
                distance = self.rules.target - self.scores[side]
                if distance <= 2:
                    points = 1
                elif distance == 3:
                    points = min(points, 2)
            self.score(side, points, reason, seat)
            if self.rules.match_end == "instant" and self.scores[side] >= self.rules.target:
                self.facts.append(("hand_ended", "match_over", None, 0, tuple(self.scores)))
                self.end_match(side)
                return
        if not self.hands[seat]:
            self.score(side, self.rules.domino_points, "domino", seat)
            self.end_hand("domino", side, self.rules.domino_points)
            return
        self.turn = (seat + 1) % self.seats
        self.forced()

    def score(self, side: int, points: int, reason: str, seat: int | None) -> None:
        self.scores[side] += points
        self.facts.append(("points", side, points, reason, seat))

    def forced(self) -> None:
        """Draws and passes until a seat has a choice, or the hand blocks."""
        while True:
            if self.blocked():
                self.block()
                return
            seat = self.turn
            if any(self.fits(t) for t in self.hands[seat]):
                return
            draws = 0
            while self.drawable() > 0 and (self.rules.draw == "until_fits" or draws == 0):
                t = self.boneyard.pop(0)
                draws += 1
                self.hands[seat].add(t)
                self.facts.append(("drew", seat, t))
                if self.fits(t):
                    self.must = t
                    return
                if self.blocked():
                    self.block()
                    return
            self.facts.append(("passed", seat))
            self.turn = (seat + 1) % self.seats

    def block(self) -> None:
        side_tiles = [[t for s in range(self.seats) if self.side(s) == side
                       for t in self.hands[s]] for side in range(self.sides)]  # fmt: skip
        winner = reference_blocked_winner(self.rules.blocked, side_tiles)
        if winner is not None:
            self.score(winner, 2, "blocked", None)
        self.end_hand("blocked", winner, 2 if winner is not None else 0)

    def end_hand(self, reason: str, side: int | None, points: int) -> None:
        self.facts.append(("hand_ended", reason, side, points, tuple(self.scores)))
        top = max(self.scores)
        leaders = [s for s, v in enumerate(self.scores) if v == top]
        if top >= self.rules.target and len(leaders) == 1:
            self.end_match(leaders[0])
        else:
            self.start_hand(self.hand + 1)

    def end_match(self, winner: int) -> None:
        self.facts.append(("match_ended", winner, tuple(self.scores)))
        self.over = True


def reference_blocked_winner(rule: str, side_tiles: Sequence[Sequence[Pair]]) -> int | None:
    """RULES.md sections 6 and 9, on lists of pairs."""

    def unique_best(keys: list[tuple[int, ...]], among: list[int]) -> int | None:
        best = min(keys[i] for i in among)
        winners = [i for i in among if keys[i] == best]
        return winners[0] if len(winners) == 1 else None

    everyone = list(range(len(side_tiles)))
    doubles = [sum(1 for a, b in ts if a == b) for ts in side_tiles]
    pips = [sum(a + b for a, b in ts) for ts in side_tiles]
    if rule == "german":
        return unique_best([(doubles[i], pips[i]) for i in everyone], everyone)
    if rule == "pips":
        return unique_best([(pips[i],) for i in everyone], everyone)
    without = [i for i in everyone if doubles[i] == 0]
    if len(without) == 1:
        return without[0]
    if without:
        if rule == "american":
            return unique_best([(len(side_tiles[i]), pips[i]) for i in everyone], without)
        return unique_best([(pips[i],) for i in everyone], without)
    lowest = {i: min(t for t in side_tiles[i] if t[0] == t[1]) for i in everyone}
    return min(everyone, key=lambda i: lowest[i])


def facts_of(events: Sequence[Event]) -> list[tuple[object, ...]]:
    """The engine's events as the reference's facts."""
    out: list[tuple[object, ...]] = []
    for e in events:
        if isinstance(e, Dealt):
            out.append(("dealt", e.hand, e.attempt))
        elif isinstance(e, DealVoided):
            out.append(("voided", e.hand, e.attempt))
        elif isinstance(e, TilePlayed):
            out.append(("played", e.seat, pair(e.tile), None if e.end is None else e.end.value))
        elif isinstance(e, TileDrawn):
            assert e.tile is not None
            out.append(("drew", e.seat, pair(e.tile)))
        elif isinstance(e, Passed):
            out.append(("passed", e.seat))
        elif isinstance(e, PointsScored):
            out.append(("points", e.side, e.points, e.reason.value, e.seat))
        elif isinstance(e, HandEnded):
            side = e.side
            out.append(("hand_ended", e.reason.value, side, e.points, e.scores))
        elif isinstance(e, MatchEnded):
            out.append(("match_ended", e.winner_side, e.scores))
        else:
            assert isinstance(e, (MatchCreated, SeatTaken, SeedRevealed)), e
    return out


CONFIGS: list[tuple[int, bool, str, dict[str, object]]] = [
    (seats, partnerships, preset, {})
    for seats, partnerships in ((2, False), (3, False), (4, False), (4, True))
    for preset in ("standard", "american", "pips", "eastern")
] + [
    (2, False, "standard", {"lead": "highest_double", "domino_points": 5}),
    (3, False, "custom", {"match_end": "end_of_hand", "target": 7, "double_bonus": 2}),
    (4, True, "custom", {"endgame_reduction": "off", "domino_points": 1, "draw": "one_then_pass"}),
    (4, False, "custom", {"lead": "lowest_double_else_lowest_tile", "blocked": "american"}),
]


def config_id(config: tuple[int, bool, str, dict[str, object]]) -> str:
    seats, partnerships, preset, options = config
    extra = ",".join(f"{k}={v}" for k, v in options.items())
    return f"{seats}{'p' if partnerships else ''}-{preset}" + (f"-{extra}" if extra else "")


def play_both(config: tuple[int, bool, str, dict[str, object]], rng: random.Random,
              match_id: str, check_paths: bool) -> tuple[int, list[Event]]:  # fmt: skip
    """One random match on the engine and on the reference; returns the choices compared
    and the engine's events."""
    seats, partnerships, preset, options = config
    rules = make_rules(seats, partnerships, preset, options)
    seed = rng.randbytes(32)
    names = [f"p{s}" for s in range(seats)]
    events: list[Event] = []
    new, state = execute(None, CreateMatch(match_id, seats, partnerships, rules, seed))
    events += new
    for s in range(seats):
        new, state = execute(state, TakeSeat(names[s], names[s], s))
        events += new
    ref = Reference(rules, seats, partnerships, match_id, seed, names)
    ref.start_hand(1)
    assert facts_of(events) == ref.facts
    positions = 0
    while not ref.over:
        assert state.phase != ENDED
        assert state.turn == ref.turn
        legal = state.legal_plays(state.turn)
        assert {(pair(t), e.value) for t, e in legal} == ref.legal()
        assert len(legal) == len(set(legal))
        positions += 1
        tile, end = rng.choice(legal)
        # Half the plays leave out the end when only one fits, as a client may.
        ends_fitting = sum(1 for t, _ in legal if t is tile)
        command = Play(state.turn, tile, None if ends_fitting == 1 and rng.random() < 0.5 else end)
        new, after = execute(state, command)
        if check_paths:
            assert execute_evolving(state, command) == (new, after)
        done = len(ref.facts)
        ref.play(state.turn, pair(tile), end.value)
        assert facts_of(new) == ref.facts[done:]
        events += new
        state = after
    assert state.phase == ENDED
    return positions, events


def check_folds(events: list[Event], seats: int, rng: random.Random) -> None:
    """fold against the reference evolve event by event: after every event of the stream,
    from nothing and from a state folded before; and each seat's and a spectator's redacted
    stream at random places."""
    states: list[State] = []
    expected: State | None = None
    for e in events:
        expected = reference_evolve(expected, e)
        assert evolve(states[-1] if states else None, e) == expected
        states.append(expected)
    for i in range(1, len(events) + 1):
        assert fold(events[:i]) == states[i - 1], (i, events[i - 1])
    assert fold(iter(events)) == states[-1]
    for _ in range(20):
        cut = rng.randrange(1, len(events))
        end = rng.randrange(cut, len(events) + 1)
        assert fold(events[cut:end], states[cut - 1]) == states[end - 1]
    for viewer in (*range(seats), None):
        redacted = redact_stream(events, viewer, ended=False)
        one: State | None = None
        for i, e in enumerate(redacted, start=1):
            one = reference_evolve(one, e)
            if i % 7 == 0 or i == len(redacted):
                assert fold(redacted[:i]) == one


@pytest.mark.parametrize("config", CONFIGS, ids=config_id)
def test_engine_matches_the_reference(config: tuple[int, bool, str, dict[str, object]]) -> None:
    rng = random.Random(f"bitboard-{config_id(config)}")
    matches = MATCHES or 6
    total = 0
    for m in range(matches):
        positions, events = play_both(config, rng, f"ref-{m}", check_paths=m < 3 or not MATCHES)
        total += positions
        if m < 1 or (MATCHES and m < 20):
            check_folds(events, config[0], rng)
    assert total > matches * 10  # every match had choices to compare


def test_blocked_winner_on_masks_matches_the_reference() -> None:
    rng = random.Random("bitboard-blocked")
    for _ in range(MATCHES * 20 or 4000):
        sides = rng.choice((2, 3, 4))
        tiles = list(ALL_TILES)
        rng.shuffle(tiles)
        side_tiles: list[list[Tile]] = []
        for _ in range(sides):
            count = rng.randint(1, 7)
            side_tiles.append(tiles[:count])
            tiles = tiles[count:]
        masks = [sum(t.bit for t in ts) for ts in side_tiles]
        for rule in ("german", "american", "eastern", "pips"):
            rules = replace(Rules(), blocked=rule)
            expected = reference_blocked_winner(rule, [[pair(t) for t in ts] for ts in side_tiles])
            assert blocked_winner_of_masks(rules, masks) == expected, (rule, side_tiles)


def test_fold_of_a_corrupt_stream_raises_as_evolve_does() -> None:
    rng = random.Random("bitboard-corrupt")
    _, events = play_both(CONFIGS[0], rng, "corrupt", check_paths=False)
    played = next(i for i, e in enumerate(events) if isinstance(e, TilePlayed) and i > 10)
    e = events[played]
    assert isinstance(e, TilePlayed)
    # A tile the seat does not hold, a seat out of range, a draw past the boneyard.
    other = next(t for t in ALL_TILES if t is not e.tile)
    wrong = [
        events[:played] + [replace(e, tile=other)] * 8,
        [*events[:played], replace(e, seat=7)],
        events[:played] + [TileDrawn(e.hand, e.seat, None)] * 30,
        events[1:],
        [],
    ]
    for stream in wrong:
        reference: BaseException | None = None
        try:
            state: State | None = None
            for x in stream:
                state = evolve(state, x)
            if state is None:
                raise CorruptRecord("an empty stream holds no match")
        except Exception as exc:  # the reference's outcome, whatever it is
            reference = exc
        assert reference is not None
        with pytest.raises(type(reference)):
            fold(stream)


def test_a_stream_that_does_not_fold_names_the_event_and_why() -> None:
    """No error of the fold is swallowed or left bare: each is a CorruptRecord that says
    which event (its number in the match and its type) and why."""
    rng = random.Random("bitboard-corrupt-named")
    _, events = play_both(CONFIGS[0], rng, "named", check_paths=False)
    played = next(i for i, e in enumerate(events) if isinstance(e, TilePlayed) and i > 10)
    e = events[played]
    assert isinstance(e, TilePlayed)
    before = fold(events[:played])
    other = next(t for t in ALL_TILES if before.fits(t) and t not in before.hands[e.seat])
    at = played + 1  # events are numbered from 1
    cases = [
        ([*events[:played], replace(e, tile=other)], rf"event {at} \(TilePlayed\): tile"),
        ([*events[:played], replace(e, seat=7)], rf"event {at} \(TilePlayed\): no seat 7"),
        ([*events[:played], Passed(e.hand, -1)], rf"event {at} \(Passed\): no seat -1"),
        (
            [*events[:played], PointsScored(e.hand, 5, 2, PointsReason.DOUBLE_HEADER, 2, 0)],
            rf"event {at} \(PointsScored\): no side 5",
        ),
        (events[:played] + [TileDrawn(e.hand, e.seat, None)] * 30, r"\(TileDrawn\): seat .* empty"),
        (events[1:], r"event 1 \(SeatTaken\): SeatTaken before MatchCreated"),
        ([events[0], events[0]], r"event 2 \(MatchCreated\): MatchCreated on a stream"),
        ([*events[:played], TimedOut(e.hand, 0, 5)], rf"event {at} \(TimedOut\): .*without clocks"),
        ([*events[:played], object()], rf"event {at} \(object\): unknown event type object"),
    ]
    for stream, message in cases:
        with pytest.raises(CorruptRecord, match=message):
            fold(stream)  # type: ignore[arg-type]
    with pytest.raises(CorruptRecord, match="an empty stream holds no match"):
        fold([])
    state = fold(events[:played])
    with pytest.raises(CorruptRecord, match=rf"event {at} \(TilePlayed\): no seat 7"):
        evolve(state, replace(e, seat=7))


@pytest.mark.parametrize("seats,partnerships", [(2, False), (4, True)])
def test_fold_of_clocked_matches_matches_evolve(seats: int, partnerships: bool) -> None:
    """Clocks, timeouts, automatic plays and forfeits, through the fast fold."""
    rng = random.Random(f"bitboard-clocked-{seats}")
    rules = make_rules(
        seats, partnerships, "standard",
        {"clock": "fischer", "clock_initial": 20, "clock_increment": 1, "timeouts_to_forfeit": 4},
    )  # fmt: skip
    timing = Timing(think_ms=(100, 4000), stall=0.05, resign=0.002, lag_ms=50)
    seen_timeouts = 0
    for m in range(MATCHES // 50 or 3):
        events, _ = play_match(
            f"clocked-{m}", rules, seats, partnerships, rng.randbytes(32),
            [random_policy] * seats, rng, timing=timing,
        )  # fmt: skip
        seen_timeouts += sum(isinstance(e, TimedOut) for e in events)
        check_folds(events, seats, rng)
    assert seen_timeouts > 0


def reference_permute(items: Sequence[object], key: bytes) -> list[object]:
    """RULES.md section 8's shuffle, read literally: blocks HMAC-SHA256(key, i), 4-byte
    integers, Fisher-Yates from the top with rejection."""

    def numbers() -> Iterator[int]:
        block = 0
        while True:
            digest = hmac.new(key, block.to_bytes(8, "big"), hashlib.sha256).digest()
            yield from dealing._EIGHT_INTS(digest)
            block += 1

    stream = numbers()
    order = list(items)
    for i in range(len(order) - 1, 0, -1):
        x = next(stream)
        while x >= 2**32 - (2**32 % (i + 1)):
            x = next(stream)
        j = x % (i + 1)
        order[i], order[j] = order[j], order[i]
    return order


@pytest.mark.parametrize("size", [0, 1, 2, 28, 63, 64, 100])
def test_shuffle_matches_the_reference(size: int) -> None:
    rng = random.Random(f"bitboard-shuffle-{size}")
    for _ in range(200):
        key = rng.randbytes(32)
        assert list(dealing.permute(range(size), key)) == reference_permute(range(size), key)


def test_shuffle_rejects_as_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rejections are about 1 in 10^9 at 28 tiles: a stream where every third integer must
    be rejected takes the shuffle down its slow path."""
    unpack = dealing._EIGHT_INTS

    def with_rejections(digest: bytes) -> tuple[int, ...]:
        return tuple(2**32 - 1 if i % 3 == 1 else x for i, x in enumerate(unpack(digest)))

    monkeypatch.setattr(dealing, "_EIGHT_INTS", with_rejections)
    rng = random.Random("bitboard-rejections")
    for _ in range(50):
        key = rng.randbytes(32)
        assert list(dealing.permute(range(28), key)) == reference_permute(range(28), key)


def _decoded(type_name: str, version: int, payload: dict[str, object]) -> object:
    try:
        return codec.decode(type_name, version, payload)
    except CorruptRecord:
        return CorruptRecord


def _generic(type_name: str, version: int, payload: dict[str, object]) -> object:
    try:
        return codec._build(codec._BY_NAME[type_name], type_name, payload)
    except CorruptRecord:
        return CorruptRecord


def test_decoding_on_the_fast_path_matches_the_generic_one() -> None:
    """Every stored event reads back as itself, and a payload with any field spoilt reads
    as the generic checks read it (the same event, or CorruptRecord)."""
    rng = random.Random("bitboard-codec")
    _, events = play_both(CONFIGS[3], rng, "codec", check_paths=False)
    streams = [events, *(redact_stream(events, v, ended=False) for v in (0, None))]
    spoilt: list[object] = [None, True, 1.5, "x", "9-9", " 1-2", "2-1", [], ["0-0"], {}, -1, 7]
    checked = 0
    for stream in streams:
        for e in stream:
            name, version, payload = codec.encode(e)
            assert codec.decode(name, version, payload) == e
            if version != 1:
                continue
            for field in payload:
                renamed = {k: v for k, v in payload.items() if k != field} | {"other": 1}
                assert _decoded(name, version, renamed) is CorruptRecord
                for bad in rng.sample(spoilt, 4):
                    broken = {**payload, field: bad}
                    assert _decoded(name, version, broken) == _generic(name, version, broken)
                    checked += 1
            if isinstance(e, Dealt):
                hands = [list(h) for h in payload["hands"]]  # type: ignore[attr-defined]
                hands[0][0] = rng.choice(spoilt)
                broken = {**payload, "hands": hands}
                assert _decoded(name, version, broken) == _generic(name, version, broken)
    assert checked > 1000


@pytest.mark.parametrize(
    "config", [CONFIGS[0], CONFIGS[7], CONFIGS[15], CONFIGS[17]], ids=config_id
)
def test_playouts_on_the_board_match_playouts_through_states(
    config: tuple[int, bool, str, dict[str, object]],
) -> None:
    """The Monte Carlo playout on one mutable board gives what it gives play by play
    through `execute`, and draws the same numbers from its random source."""
    rng = random.Random(f"bitboard-playout-{config_id(config)}")
    _, events = play_both(config, rng, "playout", check_paths=False)
    seats = config[0]
    compared = 0
    for i, e in enumerate(events):
        if not isinstance(e, TilePlayed) or e.end is None:
            continue
        k = knowledge(redact_stream(events[:i], e.seat, ended=False), e.seat)
        assert k.state is not None
        legal = k.state.legal_plays(e.seat)
        if len(legal) < 2:
            continue
        world = Sampler(k).world(rng)
        for horizon in (None, 2):
            for tile, end in legal:
                seed = rng.random()
                a, b = random.Random(seed), random.Random(seed)
                on_board = playout(world, e.seat, tile, end, a, horizon)
                by_states = playout_by_states(world, e.seat, tile, end, b, horizon)
                assert on_board == by_states
                assert a.getstate() == b.getstate()
                compared += 1
    assert compared >= 10 * seats


def play_on_board(config: tuple[int, bool, str, dict[str, object]], rng: random.Random,
                  match_id: str) -> int:  # fmt: skip
    """One random match played out on one Board, against the reference fact by fact and
    against the engine's per-command path event by event; returns the choices compared.
    Half the plays go through `play_checked` (with the end left out when only one fits,
    as a client may), the rest through the trusted `play`."""
    seats, partnerships, preset, options = config
    rules = make_rules(seats, partnerships, preset, options)
    seed = rng.randbytes(32)
    names = [f"p{s}" for s in range(seats)]
    events: list[Event] = []
    new, state = execute(None, CreateMatch(match_id, seats, partnerships, rules, seed))
    events += new
    for s in range(seats):
        new, state = execute(state, TakeSeat(names[s], names[s], s))
        events += new
    ref = Reference(rules, seats, partnerships, match_id, seed, names)
    ref.start_hand(1)
    assert facts_of(events) == ref.facts
    board = Board(state, deal)
    positions = 0
    while not ref.over:
        assert board.phase is not ENDED
        turn = board.turn
        assert turn is not None and turn == ref.turn == state.turn
        legal = board.legal_plays(turn)
        assert legal == state.legal_plays(turn)  # the same plays in the same order
        assert {(pair(t), e.value) for t, e in legal} == ref.legal()
        for seat in range(seats):
            if seat != turn:
                assert board.legal_plays(seat) == ()
        tile, end = rng.choice(legal)
        one_end = sum(1 for t, _ in legal if t is tile) == 1
        command = Play(turn, tile, None if one_end and rng.random() < 0.5 else end)
        first = len(board.events)
        if rng.random() < 0.5:
            board.play_checked(command.seat, command.tile, command.end)
        else:
            board.play(turn, tile, end)
        new, state = execute(state, command)
        assert tuple(board.events[first:]) == new  # the engine's events, in its order
        done = len(ref.facts)
        ref.play(turn, pair(tile), end.value)
        assert facts_of(new) == ref.facts[done:]
        if positions % 7 == 0:
            assert board.state() == state
        positions += 1
    assert board.phase is ENDED and state.phase == ENDED
    assert board.state() == state == fold([*events, *board.events])
    return positions


@pytest.mark.parametrize("config", CONFIGS, ids=config_id)
def test_matches_on_one_board_match_the_reference(
    config: tuple[int, bool, str, dict[str, object]],
) -> None:
    rng = random.Random(f"board-{config_id(config)}")
    matches = MATCHES or 3
    total = sum(play_on_board(config, rng, f"board-{m}") for m in range(matches))
    assert total > matches * 10


def _outcome(run: Callable[[], object]) -> tuple[object, ...]:
    """What a call did: its error's kind, message and reason, or None."""
    try:
        run()
    except BergenError as e:
        return (type(e), str(e), e.reason)
    return (None,)


@pytest.mark.parametrize(
    "config", [CONFIGS[0], CONFIGS[4], CONFIGS[15], CONFIGS[18]], ids=config_id
)
def test_checked_plays_on_the_board_are_the_engines(
    config: tuple[int, bool, str, dict[str, object]],
) -> None:
    """At random positions, every play a client could send (every seat, tile and end, and
    malformed ones) on a Board: refused with the engine's own error and the board
    unchanged, or made with the engine's events and state."""
    rng = random.Random(f"board-checked-{config_id(config)}")
    _, events = play_both(config, rng, "checked", check_paths=False)
    seats = config[0]
    cuts = rng.sample(range(len(events) // 2, len(events) + 1), 5)
    # And two positions where the seat to play must play the tile it drew.
    drew = [i + 1 for i, e in enumerate(events) if isinstance(e, TileDrawn)]
    cuts += [i for i in drew if fold(events[:i]).must_play is not None][:2]
    assert len(cuts) == 7
    refused = made = 0
    for cut in cuts:
        state = fold(events[:cut])
        if state.phase is not ENDED and state.hand_over:
            continue  # between a hand's end and the next deal: no Board is built there
        must = state.must_play
        commands = [
            Play(seat, tile, end)
            for seat in range(-1, seats + 1)
            for tile in ALL_TILES
            for end in (None, End.LEFT, End.RIGHT)
        ]
        commands += [Play(True, must or ALL_TILES[0], None), Play(0, "0-0", None)]  # type: ignore[arg-type]
        for command in commands:
            board = Board(state, deal)
            engine_says = _outcome(lambda: execute_evolving(state, command))  # noqa: B023
            board_says = _outcome(
                lambda: board.play_checked(command.seat, command.tile, command.end)  # noqa: B023
            )
            assert board_says == engine_says, command
            if engine_says[0] is None:
                assert (tuple(board.events), board.state()) == execute_evolving(state, command)
                made += 1
            else:
                assert board.events == [] and board.state() == state
                refused += 1
    assert refused > 100 and made >= 1


def test_play_checked_after_the_end_says_the_match_has_ended() -> None:
    rng = random.Random("board-ended")
    config = CONFIGS[0]
    _, events = play_both(config, rng, "ended", check_paths=False)
    state = fold(events)
    assert state.phase == ENDED
    board = Board(state, deal)
    with pytest.raises(MatchNotInProgress) as refused:
        board.play_checked(0, ALL_TILES[0], None)
    assert refused.value.reason == "MATCH_ENDED"
    assert board.events == []


def test_a_long_match_on_one_board_matches_the_reference_past_the_interned_hands(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Hands past events.INTERNED_HANDS: the Board's plays are its own objects there, the
    same events as the engine's and the reference's."""
    from bergen.domain import fastplay
    from bergen.domain.events import INTERNED_HANDS

    rows = fastplay._played_row
    hands: list[int] = []

    def played_row(hand: int) -> list[TilePlayed | None]:
        hands.append(hand)
        return rows(hand)

    monkeypatch.setattr(fastplay, "_played_row", played_row)
    rng = random.Random("board-long")
    play_on_board((2, False, "custom", {"target": 400}), rng, "board-long")
    assert max(hands) > INTERNED_HANDS + 10
