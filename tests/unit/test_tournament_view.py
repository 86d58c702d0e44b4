"""A tournament in the terminal (`bergen tournament show` and `watch`), drawn from the view the
server would answer for a tournament run by the rules: withdrawn entrants marked and not
ranked, byes by name, the interventions in words, who won; and the help of every
tournament subcommand, which ends with examples and names no call, file or constant of the
code."""

from __future__ import annotations

import argparse
import re

import pytest

from bergen.api import convert
from bergen.cli_client.main import build_parser
from bergen.cli_client.tournament_view import changes, render, reveal_line, winner_line
from bergen.domain.tournament_engine import (
    Cancel,
    CloseReveal,
    CreateTournament,
    End,
    PairRound,
    RecordResult,
    Register,
    RevealSeed,
    Start,
    TournamentState,
    Withdraw,
)
from bergen.domain.tournament_fairness import commitment
from bergen.domain.tournament_pairing import Settings
from bergen.domain.tournament_record import ORGANISER
from bergen.v1 import bergen_pb2 as pb

from .test_tournament_engine import SEED, TID, Run, registered_run


def view_of(state: TournamentState) -> pb.TournamentView:
    return convert.tournament_view_out(
        state.record(),
        state.settings,
        phase=state.phase,
        total_rounds=state.total_rounds,
        version=1,
    )


def _five_with_a_withdrawal() -> Run:
    """A 5-entrant Swiss of 2 rounds: entrant 5 withdrawn by the organiser after round 1."""
    run = registered_run(5, Settings("swiss", 2, rounds=2))
    run.do(Start(SEED))
    run.do(PairRound())
    for t in run.s.rounds[0].tables:
        run.do(RecordResult(1, t.table, "target", (15, 2)))
    run.do(Withdraw(5, ORGANISER, "left early"))
    run.do(PairRound(ORGANISER))
    return run


def test_show_marks_withdrawn_entrants_and_ranks_only_those_still_in() -> None:
    run = _five_with_a_withdrawal()
    shown = render(view_of(run.s))
    lines = shown.splitlines()
    standings = lines[lines.index("Standings") + 1 : lines.index("Withdrawn (not ranked)") - 1]
    assert [row.split()[0] for row in standings[1:]] == ["1", "2", "3", "4"]
    assert all(row.split()[1] != "5" for row in standings[1:])
    (gone,) = lines[
        lines.index("Withdrawn (not ranked)") + 1 : lines.index("Withdrawn (not ranked)") + 2
    ]
    assert gone.split()[:3] == ["-", "5", "p5"]
    assert gone.endswith("withdrawn after round 1 by the organiser")
    # Its figures are the record's.
    record = run.s.record()
    five = next(s for s in record["standings"] if s["entrant"] == 5)
    assert gone.split()[3] == five["match_points"]
    assert "5 (withdrawn)" in shown  # in the crosstables too
    interventions = lines[lines.index("Interventions") + 1 : lines.index("Interventions") + 3]
    assert interventions == [
        '  after round 1: the organiser withdrew p5 (#5): "left early"',
        "  round 2: the organiser started the round by hand",
    ]


def test_byes_are_given_by_name() -> None:
    run = registered_run(5, Settings("swiss", 2, rounds=2))
    run.do(Start(SEED))
    run.do(PairRound())
    view = view_of(run.s)
    (bye,) = view.rounds[0].byes
    assert f"  bye: p{bye} (#{bye})" in render(view)
    said = list(changes(None, view))
    assert f"  bye: p{bye} (#{bye})" in said


def test_the_winner_or_the_shared_first_place_is_said_at_the_end() -> None:
    run = registered_run(4, Settings("swiss", 2, rounds=1))
    run.do(Start(SEED))
    run.do(PairRound())
    first, second = run.s.rounds[0].tables
    run.do(RecordResult(1, 1, "target", (15, 2)))
    assert winner_line(view_of(run.s)) is None  # not ended
    run.do(RecordResult(1, 2, "target", (2, 15)))
    run.do(End(SEED))
    # Both winners equal in every figure: only their seeding rank between them.
    line = winner_line(view_of(run.s))
    assert line is not None and line.startswith("shared first place: ")
    a, b = first.sides[0], second.sides[1]
    assert f"p{a} (#{a})" in line and f"p{b} (#{b})" in line
    lone = registered_run(2, Settings("swiss", 2, rounds=1))
    lone.do(Start(SEED))
    lone.do(PairRound())
    (table,) = lone.s.rounds[0].tables
    lone.do(RecordResult(1, 1, "target", (15, 9)))
    lone.do(End(SEED))
    view = view_of(lone.s)
    w = table.sides[0]
    assert winner_line(view) == f"winner: p{w} (#{w}), 1 match point"
    assert f"  Winner: p{w} (#{w}), 1 match point" in render(view)
    assert list(changes(None, view))[-2:] == ["tournament ended", winner_line(view)]


def test_a_cancelled_tournament_says_so() -> None:
    run = registered_run(2)
    before = view_of(run.s)
    run.do(Cancel(SEED, "hall closed"))
    view = view_of(run.s)
    assert view.cancelled
    assert winner_line(view) == 'cancelled before its start: "hall closed"'
    shown = render(view)
    assert "; cancelled, round 0 of" in shown
    assert '  Cancelled before its start: "hall closed"' in shown
    assert list(changes(before, view)) == [
        "tournament ended",
        'cancelled before its start: "hall closed"',
    ]


def test_watch_says_who_registered_withdrew_and_settled_as_it_happens() -> None:
    run = registered_run(4, Settings("swiss", 2, rounds=2))
    before = view_of(run.s)
    run.do(Register(("late",)))
    run.do(Withdraw(2))
    after = view_of(run.s)
    assert list(changes(before, after)) == [
        "p2 (#2) withdrew before round 1",
        "late (#5) registered",
    ]
    run.do(Start(SEED))
    run.do(PairRound())
    started = view_of(run.s)
    table = run.s.rounds[0].tables[0]
    run.do(RecordResult(1, table.table, "forfeit", (0, 0), 1, ORGANISER, "no-show"))
    said = list(changes(started, view_of(run.s)))
    gone = table.sides[1]
    assert said[0] == (
        f'round 1 table {table.table}: the organiser forfeited p{gone} (#{gone}), side 2: "no-show"'
    )
    assert said[1].startswith(f"round 1 table {table.table} ended 0-0 (forfeit of side 2)")


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    top = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    tournament = top.choices["tournament"]
    own = next(a for a in tournament._actions if isinstance(a, argparse._SubParsersAction))
    return {"": tournament, **own.choices}


RPCS = {m.name for m in pb.DESCRIPTOR.services_by_name["BergenService"].methods}


@pytest.mark.parametrize("name", sorted(_subcommands()))
def test_every_tournament_help_ends_with_examples_and_names_nothing_of_the_code(
    name: str,
) -> None:
    text = _subcommands()[name].format_help()
    tail = text.rstrip().split("\n\n")[-1]
    assert tail.startswith("examples:\n  bergen tournament"), tail
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_.]*", text))
    assert not words & RPCS, words & RPCS
    assert not [w for w in words if w.endswith(".py")]
    constants = [w for w in re.findall(r"(?<![$\w])[A-Z][A-Z0-9]*_[A-Z0-9_]+", text)]
    assert constants == [], constants


def test_the_reveal_phase_shows_who_has_revealed_and_the_latest_start_of_round_1() -> None:
    run = Run()
    run.do(CreateTournament(TID, Settings("swiss", 2, rounds=1), SEED, "cup"))
    for i in (1, 2, 3):
        run.do(Register((f"p{i}",), client_seed_commitment=commitment(f"s{i}".encode())))
    before = reveal_view(run)
    run.do(Start(SEED, at_ms=1_000_000))
    closed = reveal_view(run)
    assert closed.phase == pb.TOURNAMENT_PHASE_REVEAL and closed.reveal_deadline_ms == 1_060_000
    run.do(RevealSeed(2, "s2"))
    one = reveal_view(run)
    assert reveal_line(one, now_ms=1_018_500) == (
        "revealed 1 of 3 seeds; round 1 when all have, or in 42 s at the latest (entrants "
        "still silent then are withdrawn)"
    )
    shown = render(one).splitlines()
    entrants = shown[shown.index("Entrants") + 1 :]
    assert entrants == ["  1 p1  not revealed yet", "  2 p2  revealed", "  3 p3  not revealed yet"]
    assert list(changes(before, closed)) == ["registration closed: the entrants reveal their seeds"]
    assert list(changes(closed, one)) == ["p2 (#2) revealed its seed"]
    # The last reveal and the close seen at once: the reveal is still told, then the
    # withdrawal of the one that never revealed.
    run.do(RevealSeed(1, "s1"))
    run.do(CloseReveal(SEED, at_ms=1_060_000))
    paired = reveal_view(run)
    assert list(changes(one, paired)) == [
        "p1 (#1) revealed its seed",
        'before round 1: the server withdrew p3 (#3): "did not reveal its client seed in the '
        'reveal window"',
        "standings: 1. p2 (#2) 0 MP, 2. p1 (#1) 0 MP",
    ]
    assert reveal_line(paired) is None


def reveal_view(run: Run) -> pb.TournamentView:
    state = run.s
    return convert.tournament_view_out(
        state.record(),
        state.settings,
        phase=state.phase,
        total_rounds=state.total_rounds,
        version=len(run.events),
        reveal_deadline_ms=state.reveal_deadline_ms,
    )
