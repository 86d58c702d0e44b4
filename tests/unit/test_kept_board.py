"""`engine.execute` keeps the Board that made each State it returns and takes the next
command on the State up on that Board: the outcome must be the one a Board built afresh
gives, whatever came before (a branch from an older State, a refused command, hidden tiles).
"""

from __future__ import annotations

import random
import sys
import threading

import pytest

from bergen.domain import engine
from bergen.domain.commands import Command, CreateMatch, Play, TakeSeat
from bergen.domain.dealing import deal
from bergen.domain.errors import BergenError
from bergen.domain.events import Event
from bergen.domain.fastplay import Board
from bergen.domain.rules import make_rules
from bergen.domain.state import ENDED, State, fold
from bergen.domain.tiles import ALL_TILES, End


def fresh(state: State, command: Command) -> tuple[tuple[Event, ...], State]:
    """What a Board built for the command alone decides."""
    board = Board(state, deal)
    board.execute(command)
    return tuple(board.events), board.state()


def new_match(seats: int, partnerships: bool, seed: str, clock: bool = False) -> State:
    options: dict[str, object] = {"clock": "fischer", "clock_initial": 60} if clock else {}
    rules = make_rules(seats, partnerships, "standard", options)
    rng = random.Random(seed)
    create = CreateMatch(seed, seats, partnerships, rules, rng.randbytes(32))
    state = engine.execute(None, create)[1]
    for s in range(seats):
        state = engine.execute(state, TakeSeat(f"p{s}", f"c{s}", s))[1]
    return state


def kept_for(state: State) -> Board | None:
    return engine.kept_board(state)


@pytest.mark.parametrize(("seats", "partnerships"), [(2, False), (3, False), (4, True)])
def test_each_command_on_the_kept_board_is_what_a_fresh_board_decides(
    seats: int, partnerships: bool
) -> None:
    rng = random.Random(f"kept-{seats}")
    kept = 0
    for m in range(3):
        state = new_match(seats, partnerships, f"kept-{seats}-{m}")
        while state.phase != ENDED:
            seat = state.turn
            assert seat is not None
            tile, end = rng.choice(state.legal_plays(seat))
            command = Play(seat, tile, end)
            expected = fresh(state, command)
            kept += kept_for(state) is not None
            events, after = engine.execute(state, command)
            assert (events, after) == expected
            assert fold(events, state) == after
            state = after
    assert kept > 100  # the kept Board was taken up, not rebuilt each time


def test_a_branch_from_an_older_state_is_decided_afresh() -> None:
    state = new_match(2, False, "branch")
    rng = random.Random("branch")
    for _ in range(20):
        seat = state.turn
        assert seat is not None
        plays = state.legal_plays(seat)
        first = Play(seat, *plays[0])
        other = Play(seat, *plays[-1])
        expected_first, expected_other = fresh(state, first), fresh(state, other)
        assert engine.execute(state, first) == expected_first
        # The Board that stood for `state` went on with `first`: `other` is not played on it.
        assert engine.execute(state, other) == expected_other
        state = engine.execute(state, Play(seat, *rng.choice(plays)))[1]
        if state.phase == ENDED:
            break


def test_a_refused_command_leaves_the_next_one_decided_as_on_a_fresh_board() -> None:
    state = new_match(4, True, "refused")
    rng = random.Random("refused")
    refused = 0
    while state.phase != ENDED:
        seat = state.turn
        assert seat is not None
        wrong = Play((seat + 1) % 4, rng.choice(ALL_TILES), rng.choice((End.LEFT, End.RIGHT)))
        with pytest.raises(BergenError):
            engine.execute(state, wrong)
        refused += 1
        command = Play(seat, *rng.choice(state.legal_plays(seat)))
        expected = fresh(state, command)
        state_after = engine.execute(state, command)
        assert state_after == expected
        state = state_after[1]
    assert refused > 20


def test_a_clocked_match_on_kept_boards_folds_to_the_same_states() -> None:
    state = new_match(3, False, "clocked", clock=True)
    rng = random.Random("clocked")
    now = 0
    while state.phase != ENDED:
        seat = state.turn
        assert seat is not None
        now += rng.randint(100, 3000)
        command = Play(seat, *rng.choice(state.legal_plays(seat)), now)
        expected = fresh(state, command)
        events, after = engine.execute(state, command)
        assert (events, after) == expected
        assert fold(events, state) == after
        state = after


def test_threads_deciding_on_one_state_at_once_each_get_the_right_outcome() -> None:
    """Many threads play on the same States at once (as a server's handlers may, for two
    requests on one match): whichever takes the kept Board, each outcome is a fresh one's."""
    state = new_match(4, True, "threads")
    rng = random.Random("threads")
    wrong: list[object] = []
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch within a command, not only between them
    try:
        play_at_once(state, rng, wrong)
    finally:
        sys.setswitchinterval(interval)
    assert wrong == []
    assert engine.boards_kept() <= 12  # one for each thread deciding at once, at most


def play_at_once(state: State, rng: random.Random, wrong: list[object]) -> None:
    """Play a match out, each of its States decided on by many threads at once first."""
    while state.phase != ENDED:
        seat = state.turn
        assert seat is not None
        commands = [Play(seat, *p) for p in state.legal_plays(seat)] * 3
        expected = {c: fresh(state, c) for c in commands}
        start = threading.Barrier(len(commands))

        def decide(
            command: Play,
            on: State = state,
            start: threading.Barrier = start,
            expected: dict[Play, tuple[tuple[Event, ...], State]] = expected,
        ) -> None:
            start.wait()
            for _ in range(20):
                got = engine.execute(on, command)
                if got != expected[command]:
                    wrong.append((command, got))

        threads = [threading.Thread(target=decide, args=(c,)) for c in commands]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        state = engine.execute(state, rng.choice(commands))[1]
