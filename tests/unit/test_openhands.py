"""The open-hands par: the search against a full-tree search on the rules core, its steps
against the rules' own, hand-built endgames, the shortfall of hands as played."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from bergen.domain.dealing import split
from bergen.domain.errors import InvalidArgument
from bergen.domain.events import Event, HandEnded, PointsScored, TilePlayed
from bergen.domain.fastplay import Board
from bergen.domain.openhands import (
    OpenDeal,
    Solver,
    par,
    shortfall,
    solve,
    start_state,
)
from bergen.domain.policies import greedy_policy, random_policy
from bergen.domain.rules import Rules, make_rules
from bergen.domain.simulation import play_match
from bergen.domain.state import PLAYING, MatchInfo, State, fold
from bergen.domain.tiles import ALL_TILES, FITS, RESERVE, End, Tile, sides_of
from bergen.domain.views import redact_stream

from .support import T, make_deal

SEED = "00" * 32
LEFT, RIGHT = End.LEFT, End.RIGHT


def next_deal(
    server_seed: bytes, match_id: str, hand: int, attempt: int, client_seeds: Sequence[str]
) -> tuple[tuple[tuple[Tile, ...], ...], tuple[Tile, ...]]:
    """The deal after a hand the tests play out: never looked at."""
    return split(ALL_TILES, len(client_seeds))


def position(
    rules: Rules,
    hands: Sequence[Sequence[Tile]],
    line: Sequence[tuple[int, int]],
    boneyard: Sequence[Tile],
    turn: int,
    scores: Sequence[int],
    partnerships: bool = False,
) -> State:
    """A hand being played: `line` the tiles on the table as (left, right) pairs, left
    first; `turn` the seat to choose."""
    seats = len(hands)
    info = MatchInfo(
        "m-open", seats, partnerships, rules, "", "", SEED, (None,) * seats,
        sides_of(seats, partnerships),
    )  # fmt: skip
    left, right = line[0][0], line[-1][1]
    ends = (left, right, line[0][0] == line[0][1], line[-1][0] == line[-1][1])
    return State(
        info,
        phase=PLAYING,
        hand=1,
        attempt=1,
        hands=tuple(tuple(h) for h in hands),
        masks=tuple(sum(t.bit for t in h) for h in hands),
        boneyard=tuple(boneyard),
        line=tuple(line),
        ends=ends,
        turn=turn,
        scores=tuple(scores),
        hand_over=False,
        version=1,
    )


def hand_points(state: State, events: Sequence[Event]) -> tuple[int, bool]:
    """Side 0's points minus side 1's in `state`'s hand among `events`, and whether the hand
    is over."""
    diff = 0
    for e in events:
        if isinstance(e, PointsScored) and e.hand == state.hand:
            diff += e.points if e.side == 0 else -e.points
        if isinstance(e, HandEnded):
            return diff, True
    return diff, False


def after_play(state: State, seat: int, tile: Tile, end: End) -> tuple[int, bool, State]:
    board = Board(state, next_deal)
    board.play(seat, tile, end)
    diff, over = hand_points(state, board.events)
    return diff, over or board.phase != PLAYING, board.state()


def full_tree(state: State) -> int:
    """The par by the rules core alone: every line played out on a Board, no pruning, no
    table."""
    seat = state.turn
    assert seat is not None
    values = []
    for tile, end in state.legal_plays(seat):
        diff, over, after = after_play(state, seat, tile, end)
        values.append(diff if over else diff + full_tree(after))
    return max(values) if state.side_of(seat) == 0 else min(values)


def random_rules(rng: random.Random, seats: int, partnerships: bool) -> Rules:
    return make_rules(
        seats,
        partnerships,
        None,
        {
            "draw": rng.choice(["until_fits", "one_then_pass"]),
            "double_bonus": rng.choice([0, 2]),
            "domino_points": rng.choice([2, 1, 5]),
            "blocked": rng.choice(["german", "american", "eastern", "pips"]),
            "endgame_reduction": rng.choice(["on", "off"]),
            "match_end": rng.choice(["instant", "end_of_hand"]),
        },
    )


def random_endgame(
    rng: random.Random, seats: int = 2, partnerships: bool = False, most: int = 3
) -> State:
    """A small endgame: a line of a few tiles, 1 to `most` tiles a seat, the reserve and 0
    to 3 more in the boneyard, scores anywhere from far off the target to near it; the seat
    to play holds a fitting tile."""
    rules = random_rules(rng, seats, partnerships)
    while True:
        pool = list(ALL_TILES)
        rng.shuffle(pool)
        first = pool.pop()
        line = [(first.low, first.high)]
        for _ in range(rng.randint(0, 6)):
            at_left = rng.random() < 0.5
            number = line[0][0] if at_left else line[-1][1]
            fitting = [t for t in pool if t.has(number)]
            if not fitting:
                continue
            t = rng.choice(fitting)
            pool.remove(t)
            other = t.other(number)
            if at_left:
                line.insert(0, (other, number))
            else:
                line.append((number, other))
        hands = [[pool.pop() for _ in range(rng.randint(1, most))] for _ in range(seats)]
        boneyard = [pool.pop() for _ in range(RESERVE + rng.randint(0, 3))]
        fit = FITS[line[0][0]] | FITS[line[-1][1]]
        movers = [s for s, h in enumerate(hands) if any(t.bit & fit for t in h)]
        if not movers:
            continue
        target = rules.target
        scores = [rng.choice([0, 3, target - 5, target - 4, target - 3, target - 2, target - 1])
                  for _ in sides_of(seats, partnerships)]  # fmt: skip
        return position(rules, hands, line, boneyard, rng.choice(movers), scores, partnerships)


@pytest.mark.parametrize(
    ("seats", "partnerships", "most", "endgames"),
    [(2, False, 3, 400), (2, False, 6, 100), (4, True, 3, 150), (4, True, 5, 30)],
)
def test_the_par_agrees_with_a_full_tree_search_on_small_endgames(
    seats: int, partnerships: bool, most: int, endgames: int
) -> None:
    rng = random.Random(f"open-hands-{seats}-{most}")
    values = set()
    for _ in range(endgames):
        state = random_endgame(rng, seats, partnerships, most)
        found = solve(state)
        assert found.value == full_tree(state)
        values.add(found.value)
    assert len(values) >= 5  # the endgames are not all alike


def test_every_step_the_search_takes_is_the_rules_own() -> None:
    """Along random lines of random endgames (drawn tiles to play, mirrored ends, the
    scores near the target): the search's plays are the rules' legal plays, and each one's
    points and the position it leads to are the Board's."""
    rng = random.Random("open-hands-steps")
    checked = must_plays = 0
    for _ in range(150):
        state = random_endgame(rng, *rng.choice([(2, False), (4, True)]))
        solver = Solver(state.rules, state.seats, state.partnerships, state.boneyard)
        while True:
            seat = state.turn
            assert seat is not None
            node = solver.node(state)
            flipped = solver.flipped(state)
            steps = solver.moves(node)
            plays = sorted((ALL_TILES[s[0]].index, _end(s[1], flipped) is RIGHT) for s in steps)
            assert plays == sorted((t.index, e is RIGHT) for t, e in state.legal_plays(seat))
            must_plays += state.must_play is not None
            outcomes = []
            for step in steps:
                tile, end = ALL_TILES[step[0]], _end(step[1], flipped)
                points, child = solver.step(node, step)
                diff, over, after = after_play(state, seat, tile, end)
                assert points == diff
                assert (child is None) == over
                if child is not None:
                    assert child == solver.node(after)
                    outcomes.append(after)
                checked += 1
            if not outcomes:
                break
            state = rng.choice(outcomes)
    assert checked > 500
    assert must_plays > 10


def _end(end: End, flipped: bool) -> End:
    return end if not flipped else RIGHT if end is LEFT else LEFT


def test_the_principal_line_is_legal_and_scores_the_par() -> None:
    rng = random.Random("open-hands-lines")
    for _ in range(60):
        state = random_endgame(rng)
        found = solve(state)
        after = fold(found.events, state)  # the line's events fold on the position
        assert sum(found.points) == sum(
            e.points for e in found.events if isinstance(e, PointsScored)
        )
        assert found.points[0] - found.points[1] == found.value
        played = [e for e in found.events if isinstance(e, TilePlayed)]
        assert [(e.seat, e.tile, e.end) for e in played] == list(found.plays)
        assert after.hand_over or after.phase != PLAYING


# Ends 1|4 (the line 1-3, 3-4). Seat 0 holds 1-2 (fits the left end only) and 4-5 (the right
# only); seat 1 holds 2-6 alone; the boneyard is the reserve. Played first, 1-2 shows a 2
# and seat 1 goes out on it: side 1 scores 2. Played first, 4-5 leaves 1|5: seat 1 cannot
# play and passes, and seat 0 goes out with 1-2: side 0 scores 2. No play makes a header.
DOMINO_HANDED = (
    ["1-2 4-5", "2-6"],
    [(1, 3), (3, 4)],
    "0-0 6-6",
)


def domino_handed() -> State:
    hands, line, reserve = DOMINO_HANDED
    rules = make_rules(2, False, "standard")
    return position(
        rules, [[T(x) for x in h.split()] for h in hands], line,
        [T(x) for x in reserve.split()], 0, (0, 0),
    )  # fmt: skip


def test_a_constructed_endgame_is_won_by_the_play_known_best() -> None:
    found = solve(domino_handed())
    assert found.value == 2
    assert found.points == (2, 0)
    assert found.plays == ((0, T("4-5"), RIGHT), (0, T("1-2"), LEFT))


def test_the_play_that_hands_the_other_side_a_domino_shows_its_loss() -> None:
    state = domino_handed()
    board = Board(state, next_deal)
    board.play(0, T("1-2"), LEFT)
    board.play(1, T("2-6"), LEFT)  # forced: its only tile, at the only end it fits
    measured = shortfall(board.events, 1, state)
    first, second = measured.decisions
    assert (first.seat, first.tile, first.end) == (0, T("1-2"), LEFT)
    assert (first.before, first.after, first.loss) == (2, -2, 4)
    assert first.best == ((T("4-5"), RIGHT),)
    assert {(t, e): v for t, e, v in first.options} == {
        (T("1-2"), LEFT): -2,
        (T("4-5"), RIGHT): 2,
    }
    assert (second.seat, second.loss, len(second.options)) == (1, 0, 1)
    assert measured.loss == (4, 0)
    assert (measured.par, measured.played) == (2, -2)


def played_match(seed: str, partnerships: bool = False) -> list[Event]:
    seats = 4 if partnerships else 2
    rng = random.Random(seed)
    rules = make_rules(seats, partnerships, "standard")
    policies = [greedy_policy, random_policy] * (seats // 2)
    events, _ = play_match(
        f"m-{seed}", rules, seats, partnerships, rng.randbytes(32), policies, rng
    )
    return events


@pytest.mark.parametrize("partnerships", [False, True])
def test_the_shortfall_of_a_played_hand_adds_up_and_forced_plays_lose_nothing(
    partnerships: bool,
) -> None:
    events = played_match("shortfall", partnerships)
    measured = shortfall(events, 1)
    assert measured.decisions
    forced = [d for d in measured.decisions if len(d.options) == 1]
    assert forced, "a hand of two seats has forced plays"
    assert all(d.loss == 0 for d in forced)
    for d in measured.decisions:
        sign = 1 if d.side == 0 else -1
        assert d.loss == sign * (d.before - d.after) >= 0
        assert d.before == sign * max(sign * v for _, _, v in d.options)
        assert (d.tile, d.end) in [(t, e) for t, e, _ in d.options]
    # The hand was played to its end: what the sides gave up is the par less the result.
    assert measured.par - measured.played == measured.loss[0] - measured.loss[1]


def test_the_par_of_a_deal_starts_with_the_forced_lead() -> None:
    hands, boneyard = make_deal(["6-6 4-6 0-1 0-3 1-3 1-5", "2-6 2-4 0-5 3-5 1-4 0-4"])
    deal = OpenDeal(hands, boneyard, make_rules(2, False, "standard"))
    found = par(deal)
    assert found.plays[0] == (0, T("6-6"), None)
    assert found.points[0] >= 2  # the lead's double header
    state = start_state(deal)
    after = fold(found.events, state)
    assert after.hand_over
    assert found.value == found.points[0] - found.points[1]


def test_the_same_input_always_gives_the_same_output() -> None:
    events = played_match("again")
    assert shortfall(events, 1) == shortfall(events, 1)
    rng = random.Random("again")
    state = random_endgame(rng)
    assert solve(state) == solve(state)
    hands, boneyard = make_deal(["3-3 1-5 0-2 0-4 2-4 4-6", "3-5 1-3 0-6 2-6 5-6 0-1"])
    deal = OpenDeal(hands, boneyard, make_rules(2, False, "standard"))
    assert par(deal) == par(deal)


def test_three_sides_are_refused() -> None:
    hands, boneyard = make_deal(["0-0 1-2 3-4 5-6 1-3 0-5", "0-1 2-3 4-5 1-6 3-5 2-4",
                                 "1-1 0-2 0-3 0-4 0-6 1-4"])  # fmt: skip
    with pytest.raises(InvalidArgument) as refused:
        par(OpenDeal(hands, boneyard, make_rules(3, False, "standard")))
    assert refused.value.reason == "TWO_SIDES_ONLY"


def test_a_seats_view_is_refused_for_its_hidden_tiles() -> None:
    events = played_match("hidden")
    first_play = next(
        i for i, e in enumerate(events) if isinstance(e, TilePlayed) and e.end is not None
    )
    seen = redact_stream(events[:first_play], 0, ended=False)
    with pytest.raises(InvalidArgument) as refused:
        solve(fold(seen))
    assert refused.value.reason == "TILES_HIDDEN"


def test_a_void_deal_and_a_broken_deal_are_refused() -> None:
    rules = make_rules(2, False, "standard")
    no_double = tuple(t for t in ALL_TILES if not t.is_double)
    hands = (no_double[:6], no_double[6:12])
    boneyard = no_double[12:] + tuple(t for t in ALL_TILES if t.is_double)
    with pytest.raises(InvalidArgument) as void:
        par(OpenDeal(hands, boneyard, rules))
    assert void.value.reason == "VOID_DEAL"
    with pytest.raises(InvalidArgument) as broken:
        par(OpenDeal(hands, boneyard[:-1], rules))
    assert broken.value.reason == "INVALID_DEAL"
