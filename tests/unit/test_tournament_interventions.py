"""What the organiser and the server do that play does not (TOURNAMENT.md section 3): who
withdrew an entrant, rounds started by hand, tables settled (an abandon, or the forfeit of a
side that never played), a cancellation before the start; each an intervention of the
tournament's own stream and record, checked against what it did; and stored events of
before, which said none of it, folded as they were."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from bergen.domain.commands import Abandon, Play, Resign, Timeout
from bergen.domain.engine import command_of, execute, first_legal_play
from bergen.domain.errors import BergenError, CorruptRecord
from bergen.domain.events import MatchEnded
from bergen.domain.state import ENDED
from bergen.domain.tournament_engine import (
    ORGANISER_FORFEIT,
    Cancel,
    End,
    PairRound,
    RecordResult,
    Register,
    Start,
    Withdraw,
    check_settle,
    check_settle_match,
    decide_tournament,
    fold_tournament,
    forfeit_note,
    own_plays,
    settlement_of,
)
from bergen.domain.tournament_events import (
    EntrantWithdrew,
    RoundPaired,
    TableSettled,
    TournamentCancelled,
    TournamentEnded,
    decode_tournament_event,
    encode_tournament_event,
)
from bergen.domain.tournament_pairing import Settings
from bergen.domain.tournament_record import (
    ABANDON,
    CANCEL,
    ENTRANT,
    FORFEIT_TABLE,
    ORGANISER,
    SERVER,
    START_ROUND,
    WITHDRAW,
    Intervention,
    check_tournament_record,
)
from bergen.domain.vocabulary import ForfeitCause, MatchEndReason

from .support import Game, rules_for
from .test_tournament_engine import SEED, Run, assert_refused, registered_run


def _started(n: int = 4, settings: Settings | None = None) -> Run:
    run = registered_run(n, settings)
    run.do(Start(SEED))
    run.do(PairRound())
    return run


def _ended_with(run: Run) -> dict[str, Any]:
    """Every table of every round given a result until the end; the record checked."""
    while not run.s.over:
        for t in run.s.rounds[-1].tables:
            if t.result is None:
                run.do(RecordResult(run.s.round, t.table, "target", (15, 2)))
        if not run.s.over:
            run.do(PairRound())
    run.do(End(SEED))
    record = run.s.record()
    check_tournament_record(record)
    return record


# ----- withdrawals say who ------------------------------------------------------------


def test_an_entrant_withdrawn_by_the_organiser_is_an_intervention_and_its_own_is_not():
    run = registered_run(4)
    run.do(Withdraw(2, ORGANISER, "did not show up"))
    run.do(Withdraw(3))
    assert run.s.entrants[1].withdrawn_by == ORGANISER
    assert run.s.entrants[2].withdrawn_by == ENTRANT
    assert run.s.interventions == (
        Intervention(0, None, WITHDRAW, ORGANISER, 2, "did not show up"),
    )
    record = run.s.record()
    assert [e["withdrawn_by"] for e in record["entrants"]] == [None, "organiser", "entrant", None]
    assert record["interventions"] == [
        {
            "round": 0,
            "table": None,
            "action": "withdraw",
            "by": "organiser",
            "entrant": 2,
            "reason": "did not show up",
        }
    ]


def test_a_withdrawal_by_the_server_reads_no_reveal_in_the_record():
    run = registered_run(3)
    run.do(Withdraw(1, SERVER))
    record = run.s.record()
    assert record["entrants"][0]["withdrawn_by"] == "no_reveal"
    assert record["interventions"][0]["by"] == "server"


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        (Withdraw(1, "somebody"), "INVALID_ACTOR"),
        (Withdraw(1, ORGANISER, "x" * 201), "TEXT_TOO_LONG"),
        (Withdraw(1, ORGANISER, "bell\a"), "CONTROL_CHARACTER"),
        (Cancel(SEED, "x" * 201), "TEXT_TOO_LONG"),
    ],
)
def test_who_withdraws_and_the_notes_are_checked(command, reason):
    assert_refused(registered_run(3).s, command, reason)


# ----- stored events of before ---------------------------------------------------------


def _v1(event: Any) -> tuple[str, dict[str, Any]]:
    """An event as version 1 stored it: without who acted."""
    name, _, payload = encode_tournament_event(event)
    payload.pop("by", None)
    if name == "EntrantWithdrew":
        payload.pop("note")
    return name, payload


@pytest.mark.parametrize(
    ("actor", "withdrawn_by", "paired_by"),
    [
        ("organiser", ORGANISER, ORGANISER),
        ("entrant:2", ENTRANT, SERVER),
        ("server", ENTRANT, SERVER),
    ],
)
def test_version_1_events_fold_with_who_acted_taken_from_their_rows(actor, withdrawn_by, paired_by):
    run = registered_run(4)
    run.do(Withdraw(2))
    run.do(Start(SEED))
    run.do(PairRound())
    stored = [(*_v1(e), actor) for e in run.events]
    assert stored[5][0] == "EntrantWithdrew" and set(stored[5][1]) == {"entrant", "after_round"}
    events = [decode_tournament_event(n, 1, json.loads(json.dumps(p)), a) for n, p, a in stored]
    state = fold_tournament(events)
    assert state.entrants[1].withdrawn_by == withdrawn_by
    assert state.rounds == run.s.rounds
    want = []
    if withdrawn_by == ORGANISER:
        want.append(Intervention(0, None, WITHDRAW, ORGANISER, 2))
    if paired_by == ORGANISER:
        want.append(Intervention(1, None, START_ROUND, ORGANISER))
    assert state.interventions == tuple(want)
    # A tournament created before interventions were recorded keeps its record's shape.
    assert "interventions" not in state.record()
    check_tournament_record(state.record())


def test_a_tournament_of_before_keeps_a_record_that_checks_with_its_abandoned_tables():
    run = _started(4)
    for t in run.s.rounds[0].tables:
        # As servers of before recorded an abandoned table: no word of who abandoned it.
        run.do(RecordResult(1, t.table, "abandoned", (3, 3)))
    stored = [(*_v1(e), "server") for e in run.events]
    state = fold_tournament(decode_tournament_event(n, 1, p, a) for n, p, a in stored)
    assert not state.records_interventions
    check_tournament_record(state.record())
    # The same tournament today says who abandoned them, and is checked for it.
    with pytest.raises(CorruptRecord) as caught:
        check_tournament_record(run.s.record())
    assert caught.value.metadata["place"] == "rounds[0].tables[0].result"


def test_version_1_has_none_of_the_new_types_and_version_2_needs_who():
    name, payload = (
        "TableSettled",
        encode_tournament_event(TableSettled(1, 1, ABANDON, ORGANISER, None, ""))[2],
    )
    with pytest.raises(CorruptRecord):
        decode_tournament_event(name, 1, payload)
    with pytest.raises(CorruptRecord):
        decode_tournament_event("EntrantWithdrew", 2, {"entrant": 1, "after_round": 0})
    with pytest.raises(CorruptRecord):
        decode_tournament_event(
            "EntrantWithdrew", 2, {"entrant": 1, "after_round": 0, "by": "x", "note": ""}
        )
    with pytest.raises(CorruptRecord):
        decode_tournament_event("TableSettled", 2, {**payload, "action": "withdraw"})


# ----- rounds started by hand ----------------------------------------------------------


def test_a_round_paired_by_the_organiser_is_an_intervention():
    run = registered_run(4)
    run.do(Start(SEED))
    assert_refused(run.s, PairRound("entrant"), "INVALID_ACTOR")
    (paired,) = run.do(PairRound(ORGANISER))
    assert isinstance(paired, RoundPaired) and paired.by == ORGANISER
    assert run.s.interventions == (Intervention(1, None, START_ROUND, ORGANISER),)
    record = _ended_with(run)
    assert [i["action"] for i in record["interventions"]] == ["start_round"]


# ----- cancelling ------------------------------------------------------------------------


def test_a_tournament_open_for_registration_is_cancelled_its_seed_revealed():
    run = registered_run(3)
    events = run.do(Cancel(SEED, "the hall is closed"))
    assert events == (TournamentCancelled("the hall is closed"), TournamentEnded(SEED.hex()))
    assert run.s.cancelled and run.s.phase == "ended"
    assert run.s.interventions == (
        Intervention(0, None, CANCEL, ORGANISER, None, "the hall is closed"),
    )
    record = run.s.record()
    assert record["ended"] is True and record["tournament_seed"] == SEED.hex()
    assert record["seeding"] is None and record["rounds"] == [] and record["standings"] == []
    assert check_tournament_record(record).cancelled
    assert_refused(run.s, Register(("late",)), "TOURNAMENT_CANCELLED")
    assert_refused(run.s, Withdraw(1), "TOURNAMENT_CANCELLED")
    assert_refused(run.s, Start(SEED), "TOURNAMENT_CANCELLED")
    assert_refused(run.s, Cancel(SEED), "TOURNAMENT_CANCELLED")
    assert_refused(run.s, PairRound(), "TOURNAMENT_CANCELLED")


def test_a_tournament_with_no_entrant_can_be_cancelled_but_not_one_started():
    empty = registered_run(0)
    empty.do(Cancel(SEED))
    check_tournament_record(empty.s.record())
    assert_refused(registered_run(2).s, Cancel(bytes(32)), "SEED_DOES_NOT_MATCH_COMMITMENT")
    assert_refused(None, Cancel(SEED), "TOURNAMENT_NOT_FOUND")
    started = _started(4)
    assert_refused(started.s, Cancel(SEED), "ALREADY_STARTED")
    _ended_with(started)
    assert_refused(started.s, Cancel(SEED), "TOURNAMENT_ENDED")


# ----- settling a table: the tournament's side ----------------------------------------


def test_settle_refusals_on_the_tournament():
    registered = registered_run(4)
    with pytest.raises(BergenError) as caught:
        check_settle(registered.s, 1, 1, ABANDON)
    assert caught.value.reason == "TOURNAMENT_NOT_STARTED"
    run = _started(4)
    for args, reason in [
        ((0, 1, ABANDON), "NO_SUCH_TABLE"),
        ((2, 1, ABANDON), "NO_SUCH_TABLE"),
        ((1, 3, ABANDON), "NO_SUCH_TABLE"),
        ((1, 1, "withdraw"), "INVALID_SETTLE_ACTION"),
        ((1, 1, FORFEIT_TABLE), "SIDE_REQUIRED"),
        ((1, 1, ABANDON, 0), "SIDE_REQUIRED"),
        ((1, 1, FORFEIT_TABLE, 2), "NO_SUCH_SIDE"),
        ((1, 1, FORFEIT_TABLE, -1), "NO_SUCH_SIDE"),
        ((1, 1, ABANDON, None, "x" * 201), "TEXT_TOO_LONG"),
    ]:
        with pytest.raises(BergenError) as caught:
            check_settle(run.s, *args)
        assert caught.value.reason == reason, args
    assert check_settle(run.s, 1, 2, FORFEIT_TABLE, 1).table == 2
    run.do(RecordResult(1, 1, "target", (15, 2)))
    with pytest.raises(BergenError) as caught:
        check_settle(run.s, 1, 1, ABANDON)
    assert caught.value.reason == "RESULT_ALREADY_RECORDED"
    _ended_with(run)
    with pytest.raises(BergenError) as caught:
        check_settle(run.s, 1, 1, ABANDON)
    assert caught.value.reason == "TOURNAMENT_ENDED"


def test_a_table_not_played_for_a_withdrawn_entrant_cannot_be_settled():
    run = registered_run(4, Settings("round_robin", 2))
    run.do(Start(SEED))
    run.do(PairRound())
    for t in run.s.rounds[0].tables:
        run.do(RecordResult(1, t.table, "target", (15, 3)))
    run.do(Withdraw(run.s.rounds[0].tables[0].sides[0], ORGANISER))
    run.do(PairRound())
    walkover = next(t for t in run.s.rounds[1].tables if t.match_id is None)
    run_state = run.s
    # Its result is there at once: there is nothing to settle.
    with pytest.raises(BergenError) as caught:
        check_settle(run_state, 2, walkover.table, ABANDON)
    assert caught.value.reason == "RESULT_ALREADY_RECORDED"


def test_a_settled_result_records_the_intervention_with_it():
    run = _started(4)
    t1 = run.s.rounds[0].tables[0]
    events = run.do(RecordResult(1, 1, "forfeit", (4, 2), 1, ORGANISER, "no-show"))
    assert events[0] == TableSettled(1, 1, FORFEIT_TABLE, ORGANISER, t1.sides[1], "no-show")
    run.do(RecordResult(1, 2, "abandoned", (3, 3), None, SERVER, "never seated"))
    assert run.s.interventions == (
        Intervention(1, 1, FORFEIT_TABLE, ORGANISER, t1.sides[1], "no-show"),
        Intervention(1, 2, ABANDON, SERVER, None, "never seated"),
    )
    result = run.s.rounds[0].tables[0].result
    assert result is not None and result.places == (1, 2) and result.forfeited_side == 1
    # The tournament goes on as usual: the next round is paired from these results.
    run.do(PairRound())
    record = _ended_with(run)
    assert [(i["action"], i["by"], i["table"]) for i in record["interventions"]] == [
        ("forfeit", "organiser", 1),
        ("abandon", "server", 2),
    ]


def test_a_result_by_play_is_not_settled_nor_a_forfeit_by_the_server():
    run = _started(4)
    assert_refused(run.s, RecordResult(1, 1, "target", (15, 2), None, ORGANISER), "INVALID_RESULT")
    assert_refused(run.s, RecordResult(1, 1, "forfeit", (1, 2), 0, SERVER), "INVALID_ACTOR")


# ----- settling a table: the match's side -----------------------------------------------


def _refused_match(g: Game, action: str, side: int | None, reason: str) -> None:
    with pytest.raises(BergenError) as caught:
        check_settle_match(g.s, g.events, action, side)
    assert caught.value.reason == reason


def test_only_a_side_that_never_played_its_own_play_can_be_forfeited():
    g = Game().start()  # the lead is the server's
    leader = next(e.seat for e in g.events if type(e).__name__ == "TilePlayed")
    assert own_plays(g.events) == frozenset()
    for side in (0, 1):
        check_settle_match(g.s, g.events, FORFEIT_TABLE, side)
    turn = g.s.turn
    assert turn is not None and turn != leader
    tile, at = first_legal_play(g.s, turn)  # type: ignore[misc]
    g.do(Play(turn, tile, at))
    assert turn in own_plays(g.events)
    _refused_match(g, FORFEIT_TABLE, g.s.side_of(turn), "SIDE_HAS_PLAYED")
    check_settle_match(g.s, g.events, FORFEIT_TABLE, g.s.side_of(leader))
    check_settle_match(g.s, g.events, ABANDON, None)


def test_an_automatic_play_on_a_timeout_is_not_the_sides_own():
    g = Game(rules=rules_for(clock="fischer", clock_initial=5)).start()
    seat = g.s.turn
    assert seat is not None
    g.do(Timeout(seat, 10_000))
    assert any(getattr(e, "auto", False) for e in g.last)
    assert own_plays(g.events) == frozenset()
    check_settle_match(g.s, g.events, FORFEIT_TABLE, g.s.side_of(seat))


def test_a_match_ended_or_still_seating():
    seating = Game()
    seating.create()
    seating.sit([0])
    _refused_match(seating, FORFEIT_TABLE, 1, "MATCH_STILL_SEATING")
    check_settle_match(seating.s, seating.events, ABANDON, None)
    ended = Game().start()
    ended.do(Resign(0))
    _refused_match(ended, ABANDON, None, "MATCH_ENDED")
    _refused_match(ended, FORFEIT_TABLE, 1, "MATCH_ENDED")


def test_the_organisers_forfeit_ends_the_match_as_a_resignation_of_its_first_seat():
    g = Game(4, partnerships=True).start()
    g.do(Resign(g.s.sides[1][0], None, forfeit_note("no-show")))
    ended = next(e for e in g.last if isinstance(e, MatchEnded))
    assert (ended.reason, ended.cause, ended.forfeited_side) == ("forfeit", "resigned", 1)
    assert ended.note == f"{ORGANISER_FORFEIT}: no-show"
    assert g.s.phase == ENDED
    # Decided again from the stored event, the same events follow (the log stays checkable).
    command = command_of(ended)
    assert command == Resign(1, None, ended.note)
    again, _ = execute(Game(4, partnerships=True).start().s, command)
    assert again == g.last


def _ended(reason: str, note: str = "", **kw: Any) -> MatchEnded:
    return MatchEnded(
        MatchEndReason(reason), None, (3, 2), kw.get("seat"), note, kw.get("side"), kw.get("cause")
    )


@pytest.mark.parametrize(
    ("ended", "by_server", "want"),
    [
        (_ended("abandoned", "rain"), False, (ORGANISER, "rain")),
        (_ended("abandoned", "seating timed out"), True, (SERVER, "seating timed out")),
        (
            _ended("forfeit", forfeit_note("no-show"), side=1, seat=1, cause=ForfeitCause.RESIGNED),
            False,
            (ORGANISER, "no-show"),
        ),
        (
            _ended("forfeit", forfeit_note(""), side=1, seat=1, cause=ForfeitCause.RESIGNED),
            False,
            (ORGANISER, ""),
        ),
        (
            _ended("forfeit", "seat 1 resigned", side=1, seat=1, cause=ForfeitCause.RESIGNED),
            False,
            None,
        ),
        (
            _ended("forfeit", "seat 0 ran out of time", side=0, cause=ForfeitCause.TIMEOUT),
            False,
            None,
        ),
        (_ended("target"), False, None),
        # A resignation stored before resignation was a forfeit: the seat's own.
        (_ended("abandoned", "seat 1 resigned", seat=1), False, None),
    ],
)
def test_who_settled_a_match_is_read_from_its_end(ended, by_server, want):
    assert settlement_of(ended, by_server) == want


def test_the_server_abandons_like_the_organiser():
    g = Game().start()
    events = g.do(Abandon("nobody came"))
    ended = next(e for e in events if isinstance(e, MatchEnded))
    assert settlement_of(ended) == (ORGANISER, "nobody came")


# ----- the record checks its interventions ---------------------------------------------


def _settled_record() -> dict[str, Any]:
    run = registered_run(5)
    run.do(Withdraw(5, ORGANISER, "left"))
    run.do(Start(SEED))
    run.do(PairRound(ORGANISER))
    run.do(RecordResult(1, 1, "forfeit", (0, 2), 0, ORGANISER, "no-show"))
    run.do(RecordResult(1, 2, "abandoned", (3, 3), None, ORGANISER, "power cut"))
    return _ended_with(run)


def _tampered(change: Any) -> dict[str, Any]:
    record = copy.deepcopy(_settled_record())
    change(record)
    return record


def _drop_abandon(r: dict[str, Any]) -> None:
    r["interventions"] = [i for i in r["interventions"] if i["action"] != "abandon"]


def _drop_withdrawal(r: dict[str, Any]) -> None:
    r["interventions"] = [i for i in r["interventions"] if i["action"] != "withdraw"]


def _forfeit_other_entrant(r: dict[str, Any]) -> None:
    i = next(i for i in r["interventions"] if i["action"] == "forfeit")
    i["entrant"] = r["rounds"][0]["tables"][0]["sides"][1][0]


def _withdrawn_by_entrant(r: dict[str, Any]) -> None:
    r["entrants"][4]["withdrawn_by"] = "entrant"


def _unknown_action(r: dict[str, Any]) -> None:
    r["interventions"][0]["action"] = "disqualify"


def _target_said_abandoned(r: dict[str, Any]) -> None:
    r["interventions"].append(
        {
            "round": 2,
            "table": 1,
            "action": "abandon",
            "by": "organiser",
            "entrant": None,
            "reason": "",
        }
    )


def _cancel_after_start(r: dict[str, Any]) -> None:
    r["interventions"].append(
        {
            "round": 2,
            "table": None,
            "action": "cancel",
            "by": "organiser",
            "entrant": None,
            "reason": "",
        }
    )


@pytest.mark.parametrize(
    ("change", "place"),
    [
        (_drop_abandon, "rounds[0].tables[1].result"),
        (_drop_withdrawal, "entrants[4].withdrawn_by"),
        (_forfeit_other_entrant, "interventions[2].entrant"),
        (_withdrawn_by_entrant, "interventions[0].entrant"),
        (_unknown_action, "interventions[0].action"),
        (_target_said_abandoned, "interventions[4].action"),
        (_cancel_after_start, "interventions[4]"),
    ],
)
def test_an_intervention_that_does_not_match_the_record_is_rejected_with_its_place(change, place):
    check_tournament_record(_settled_record())
    with pytest.raises(CorruptRecord) as caught:
        check_tournament_record(_tampered(change))
    assert caught.value.metadata["place"] == place


def test_a_record_ended_without_a_start_must_say_it_was_cancelled():
    run = registered_run(2)
    run.do(Cancel(SEED))
    record = run.s.record()
    record["interventions"] = []
    with pytest.raises(CorruptRecord) as caught:
        check_tournament_record(record)
    assert caught.value.metadata["place"] == "seeding"


def test_every_intervention_kind_round_trips_its_event():
    for event in (
        EntrantWithdrew(1, 0, ORGANISER, "x"),
        RoundPaired(1, (), (), ORGANISER),
        TableSettled(1, 2, FORFEIT_TABLE, ORGANISER, 3, "why"),
        TournamentCancelled("because"),
    ):
        name, version, payload = encode_tournament_event(event)
        assert decode_tournament_event(name, version, json.loads(json.dumps(payload))) == event


def test_decide_gives_no_events_for_a_refused_settlement_result():
    run = _started(4)
    before = run.s
    with pytest.raises(BergenError):
        decide_tournament(run.s, RecordResult(1, 1, "forfeit", (0, 2), 0, ORGANISER, "\x00"))
    assert run.s is before
