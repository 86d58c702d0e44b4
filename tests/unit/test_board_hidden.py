"""A Board built on a seat's view of a match (the other seats' tiles hidden, None in the
State): it gives back that State, and a play from a hidden hand leaves the State that
`evolve` gives for the play."""

from __future__ import annotations

import random

from bergen.domain.dealing import deal
from bergen.domain.events import TilePlayed
from bergen.domain.fastplay import Board
from bergen.domain.policies import random_policy
from bergen.domain.rules import make_rules
from bergen.domain.simulation import play_match
from bergen.domain.state import evolve, fold
from bergen.domain.tiles import FITS
from bergen.domain.views import redact_stream


def test_a_board_on_a_seats_view_plays_from_hidden_hands() -> None:
    rng = random.Random("board-hidden")
    compared = 0
    for m in range(6):
        seats = (2, 3, 4)[m % 3]
        rules = make_rules(seats, seats == 4 and m % 2 == 0, "standard")
        events, _ = play_match(
            f"hidden-{m}", rules, seats, seats == 4 and m % 2 == 0, rng.randbytes(32),
            [random_policy] * seats, rng,
        )  # fmt: skip
        for i, e in enumerate(events):
            if not isinstance(e, TilePlayed) or e.end is None:
                continue
            viewer = (e.seat + 1) % seats  # the next seat: its tiles are known to it
            seen = fold(redact_stream(events[:i], viewer, ended=False))
            assert None in seen.hands[e.seat]  # the player's tiles are hidden from it
            board = Board(seen, deal)
            assert board.state() == seen
            after = evolve(seen, e)
            ends = after.ends
            assert ends is not None
            if (
                not after.masks[viewer] & (FITS[ends[0]] | FITS[ends[1]])
                or ends[0] == ends[1]
                or (e.tile.is_double and rules.double_bonus)
                or len(after.hands[e.seat]) == 0
            ):
                continue  # something is forced or scored after the play: not compared here
            board.play(e.seat, e.tile, e.end)
            assert board.events == [e]
            assert board.state() == after
            assert board.hands[e.seat].count(None) == len(seen.hands[e.seat]) - 1
            compared += 1
    assert compared > 50


def test_a_board_on_any_state_of_a_match_lists_the_states_legal_plays() -> None:
    """Every prefix of a match (seating, each event of each hand, a hand ended, the match
    ended): a Board on its State, for every seat, lists what State.legal_plays lists."""
    rng = random.Random("board-any-state")
    checked = 0
    for m in range(4):
        seats = (2, 3, 4, 4)[m]
        partnerships = m == 3
        rules = make_rules(seats, partnerships, "standard")
        events, _ = play_match(
            f"any-{m}", rules, seats, partnerships, rng.randbytes(32),
            [random_policy] * seats, rng,
        )  # fmt: skip
        for i in range(1, len(events) + 1):
            state = fold(events[:i])
            board = Board(state, deal)
            for seat in (*range(seats), None):
                legal = state.legal_plays(seat)  # type: ignore[arg-type]
                assert board.legal_plays(seat) == legal  # type: ignore[arg-type]
                checked += bool(legal)
    assert checked > 100
