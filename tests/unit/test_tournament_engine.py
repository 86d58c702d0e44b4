"""The tournament aggregate: the vector tournaments run command by command, every event
through its codec, and each refusal with its reason."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest

from bergen.domain.errors import BergenError, CorruptRecord, InvalidArgument
from bergen.domain.tournament_engine import (
    ENDED,
    REGISTRATION,
    RUNNING,
    Cancel,
    CloseReveal,
    CreateTournament,
    End,
    PairRound,
    RecordResult,
    Register,
    RevealSeed,
    Start,
    TournamentCommand,
    TournamentState,
    Withdraw,
    decide_tournament,
    evolve_tournament,
    fold_tournament,
)
from bergen.domain.tournament_events import (
    TOURNAMENT_EVENT_TYPES,
    TOURNAMENT_SCHEMA_VERSION,
    TournamentEvent,
    decode_tournament_event,
    encode_tournament_event,
)
from bergen.domain.tournament_fairness import commitment
from bergen.domain.tournament_pairing import Settings
from bergen.domain.tournament_record import (
    ORGANISER,
    build_tournament_record,
    check_tournament_record,
    parse_tournament_record,
)

VECTORS = json.loads(
    (Path(__file__).with_name("vectors") / "tournament.json").read_text(encoding="utf-8")
)
TID = "5b0e7a34-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
SEED = bytes(range(32))


class Run:
    """A tournament driven by commands, each event passed through its codec."""

    def __init__(self) -> None:
        self.state: TournamentState | None = None
        self.events: list[TournamentEvent] = []

    def do(self, command: TournamentCommand) -> tuple[TournamentEvent, ...]:
        events = decide_tournament(self.state, command)
        for e in events:
            name, version, payload = encode_tournament_event(e)
            assert version == TOURNAMENT_SCHEMA_VERSION
            again = decode_tournament_event(name, version, json.loads(json.dumps(payload)))
            assert again == e
            self.state = evolve_tournament(self.state, e)
            self.events.append(e)
        return events

    @property
    def s(self) -> TournamentState:
        assert self.state is not None
        return self.state


def _without_names(record: dict[str, Any]) -> dict[str, Any]:
    """The record as the vectors write it: no names, and (made before they were recorded)
    neither interventions, nor who withdrew an entrant, nor seed commitments, nor the
    settings left at their defaults."""
    out = copy.deepcopy(record)
    out.pop("name", None)
    assert out.pop("interventions") == []
    defaults = {"round_delay": 0, "reveal_window": 60, "max_entrants": None, "rated": False}
    for key, value in defaults.items():
        assert out["settings"].pop(key) == value
    for e in out["entrants"]:
        e.pop("players", None)
        assert e.pop("client_seed_commitment") == commitment(e["client_seed"].encode())
        assert e.pop("withdrawn_by") == (None if e["withdrawn_after_round"] is None else "entrant")
    return out


@pytest.mark.parametrize("index", range(len(VECTORS["tournaments"])))
def test_vector_tournament_run_by_commands_gives_its_record(index):
    record = VECTORS["tournaments"][index]["record"]
    given = parse_tournament_record(record)
    seed = bytes.fromhex(record["tournament_seed"])
    run = Run()
    run.do(CreateTournament(given.tournament_id, given.settings, seed, "vector"))
    pairs = given.settings.partnerships
    for e in given.entrants:
        players = (f"p{e.entrant}a", f"p{e.entrant}b") if pairs else (f"p{e.entrant}",)
        run.do(Register(players, e.client_seed))
    run.do(Start(seed))
    assert run.s.seeding == given.seeding
    for r, rnd in enumerate(record["rounds"], start=1):
        run.do(PairRound())
        for t in rnd["tables"]:
            res = t["result"]
            if t["match_id"] is not None:
                run.do(
                    RecordResult(
                        r, t["table"], res["reason"], tuple(res["scores"]), res["forfeited_side"]
                    )
                )
        for e in given.entrants:
            if e.withdrawn_after_round == r:
                run.do(Withdraw(e.entrant))
    assert run.s.over
    run.do(End(seed))
    assert run.s.phase == ENDED
    built = run.s.record()
    assert _without_names(built) == record
    check_tournament_record(built)
    assert fold_tournament(run.events) == run.s


@pytest.mark.parametrize("seats", [2, 3, 4])
def test_the_record_from_the_running_tally_is_the_record_counted_again(seats):
    # The state's record takes its standings from the tally kept event by event; the
    # verifier's counts every bye and result again from the rounds. They must agree at
    # every step: byes, forfeits, walkovers of withdrawn entrants, results out of order.
    rng = random.Random(seats)
    run = Run()
    run.do(CreateTournament(TID, Settings("swiss", seats, rounds=5), SEED, "swiss"))
    for i in range(1, 14):
        run.do(Register((f"p{i}",), f"s{i}"))
    run.do(Start(SEED))
    checked = 0
    while not run.s.over:
        run.do(PairRound())
        pending = [t for t in run.s.rounds[-1].tables if t.result is None]
        rng.shuffle(pending)
        for t in pending:
            scores = tuple(rng.randint(0, 20) for _ in t.sides)
            forfeit = rng.randrange(len(t.sides)) if rng.random() < 0.2 else None
            reason = "forfeit" if forfeit is not None else "target"
            run.do(RecordResult(run.s.round, t.table, reason, scores, forfeit))
            assert run.s.record() == build_tournament_record(run.s.as_tournament())
            checked += 1
        if run.s.round == 2:
            run.do(Withdraw(run.s.active_entrants(3)[0]))
    run.do(End(SEED))
    assert run.s.record() == build_tournament_record(run.s.as_tournament())
    assert run.s.round == 5 and checked >= 10


def test_every_event_type_is_folded_and_round_trips():
    run = Run()
    run.do(CreateTournament(TID, Settings("round_robin", 2), SEED, "rr"))
    for i in range(1, 5):
        run.do(Register((f"p{i}",), f"s{i}"))
    run.do(Start(SEED))
    run.do(PairRound())
    for t in run.s.rounds[0].tables:
        run.do(RecordResult(1, t.table, "target", (15, 3)))
    run.do(Withdraw(run.s.rounds[0].tables[0].sides[0]))
    for r in (2, 3):
        run.do(PairRound())
        for t in run.s.rounds[-1].tables:
            if t.result is None:
                run.do(RecordResult(r, t.table, "abandoned", (4, 4), None, ORGANISER, "rain"))
    run.do(End(SEED))
    cancelled = registered_run(2)
    cancelled.do(Cancel(SEED, "nobody came"))
    # Seeds committed at registration, revealed after the close; one never is.
    revealed = Run()
    revealed.do(CreateTournament(TID, Settings("swiss", 2, rounds=1), SEED, "reveal"))
    for i in range(1, 4):
        revealed.do(Register((f"p{i}",), client_seed_commitment=commitment(f"c{i}".encode())))
    revealed.do(Start(SEED, at_ms=1_000))
    revealed.do(RevealSeed(1, "c1"))
    revealed.do(RevealSeed(3, "c3"))
    revealed.do(CloseReveal(SEED, at_ms=61_000))
    runs = (run, cancelled, revealed)
    events = {type(e) for r in runs for e in r.events}
    assert events == set(TOURNAMENT_EVENT_TYPES)
    for r in runs:
        assert fold_tournament(r.events) == r.s
        check_tournament_record(r.s.record())


def test_a_round_robin_table_of_a_withdrawn_entrant_is_listed_without_a_match_as_its_forfeit():
    run = Run()
    run.do(CreateTournament(TID, Settings("round_robin", 2), SEED))
    for i in range(1, 5):
        run.do(Register((f"p{i}",)))
    run.do(Start(SEED))
    run.do(PairRound())
    for t in run.s.rounds[0].tables:
        run.do(RecordResult(1, t.table, "target", (15, 3)))
    gone = run.s.rounds[0].tables[0].sides[1]
    run.do(Withdraw(gone))
    assert run.s.entrants[gone - 1].withdrawn_after_round == 1
    run.do(PairRound())
    [walkover] = [t for t in run.s.rounds[1].tables if gone in t.sides]
    assert walkover.match_id is None
    assert walkover.result is not None
    side = walkover.sides.index(gone)
    assert walkover.result.forfeited_side == side
    assert walkover.result.match_points[1 - side] == 1
    assert walkover.result.margins == (0, 0)
    # Only the other table is waiting for its result.
    assert sum(t.result is None for t in run.s.rounds[1].tables) == 1
    check_tournament_record(run.s.record())


def test_the_tournament_is_over_when_fewer_than_two_entrants_are_left():
    run = Run()
    run.do(CreateTournament(TID, Settings("swiss", 2, rounds=2), SEED))
    for i in range(1, 4):
        run.do(Register((f"p{i}",)))
    run.do(Start(SEED))
    run.do(PairRound())
    [table] = run.s.rounds[0].tables
    run.do(Withdraw(table.sides[0]))
    run.do(Withdraw(run.s.rounds[0].byes[0]))
    assert not run.s.over  # the match in play goes on
    run.do(RecordResult(1, 1, "target", (15, 2)))
    assert run.s.over
    assert_refused(run.s, PairRound(), "NO_ROUND_LEFT")
    run.do(End(SEED))
    record = run.s.record()
    assert record["ended"] is True
    check_tournament_record(record)


def assert_refused(state: TournamentState | None, command: TournamentCommand, reason: str) -> None:
    with pytest.raises(BergenError) as caught:
        decide_tournament(state, command)
    assert caught.value.reason == reason, caught.value


def registered_run(n: int, settings: Settings | None = None) -> Run:
    run = Run()
    run.do(CreateTournament(TID, settings or Settings("swiss", 2, rounds=2), SEED))
    for i in range(1, n + 1):
        run.do(Register((f"p{i}",), f"c{i}"))
    return run


def test_registration_refusals():
    run = registered_run(3)
    assert run.s.phase == REGISTRATION
    assert_refused(run.s, Register(("p1",)), "NAME_TAKEN")
    assert_refused(run.s, Register(("a", "b")), "WRONG_PLAYER_COUNT")
    assert_refused(run.s, Register(("",)), "INVALID_ARGUMENT")
    assert_refused(None, Register(("x",)), "TOURNAMENT_NOT_FOUND")
    full = Run()
    full.do(CreateTournament(TID, Settings("swiss", 2, rounds=1, max_entrants=2), SEED))
    full.do(Register(("a",)))
    full.do(Register(("b",)))
    assert_refused(full.s, Register(("c",)), "REGISTRATION_FULL")
    run.do(Start(SEED))
    assert run.s.phase == RUNNING
    assert_refused(run.s, Register(("p9",)), "REGISTRATION_CLOSED")


def test_partnership_entrants_are_two_players():
    run = Run()
    run.do(CreateTournament(TID, Settings("round_robin", 4, partnerships=True), SEED))
    assert_refused(run.s, Register(("a",)), "WRONG_PLAYER_COUNT")
    assert_refused(run.s, Register(("a", "a")), "NAME_TAKEN")
    run.do(Register(("a", "b")))
    assert run.s.entrants[0].players == ("a", "b")


def test_start_refusals():
    assert_refused(registered_run(1).s, Start(SEED), "TOO_FEW_ENTRANTS")
    # Two Swiss rounds at two-sided tables need three entrants.
    assert_refused(registered_run(2).s, Start(SEED), "TOO_FEW_ENTRANTS")
    withdrawn = registered_run(3)
    withdrawn.do(Withdraw(2))
    assert withdrawn.s.entrants[1].withdrawn_after_round == 0
    assert_refused(withdrawn.s, Start(SEED), "TOO_FEW_ENTRANTS")
    run = registered_run(3)
    assert_refused(run.s, Start(bytes(32)), "SEED_DOES_NOT_MATCH_COMMITMENT")
    assert_refused(run.s, PairRound(), "TOURNAMENT_NOT_STARTED")
    run.do(Start(SEED))
    assert_refused(run.s, Start(SEED), "ALREADY_STARTED")


def test_round_and_result_refusals():
    run = registered_run(4)
    run.do(Start(SEED))
    run.do(PairRound())
    assert_refused(run.s, PairRound(), "ROUND_NOT_FINISHED")
    assert_refused(run.s, RecordResult(1, 3, "target", (1, 2)), "NO_SUCH_TABLE")
    assert_refused(run.s, RecordResult(2, 1, "target", (1, 2)), "NO_SUCH_TABLE")
    assert_refused(run.s, RecordResult(1, 1, "target", (1, 2, 3)), "INVALID_RESULT")
    assert_refused(run.s, RecordResult(1, 1, "forfeit", (1, 2)), "INVALID_RESULT")
    assert_refused(run.s, End(SEED), "TOURNAMENT_NOT_OVER")
    run.do(RecordResult(1, 1, "target", (15, 2)))
    assert_refused(run.s, RecordResult(1, 1, "target", (15, 2)), "RESULT_ALREADY_RECORDED")
    assert_refused(run.s, Withdraw(5), "NOT_AN_ENTRANT")
    run.do(Withdraw(4))
    assert_refused(run.s, Withdraw(4), "ALREADY_WITHDRAWN")
    run.do(RecordResult(1, 2, "forfeit", (3, 9), forfeited_side=1))
    run.do(PairRound())
    for t in run.s.rounds[1].tables:
        run.do(RecordResult(2, t.table, "target", (15, 2)))
    assert_refused(run.s, End(bytes(32)), "SEED_DOES_NOT_MATCH_COMMITMENT")
    run.do(End(SEED))
    assert_refused(run.s, PairRound(), "TOURNAMENT_ENDED")
    assert_refused(run.s, Withdraw(1), "TOURNAMENT_ENDED")
    check_tournament_record(run.s.record())


def test_creation_refusals():
    assert_refused(
        None, CreateTournament("nope", Settings("swiss", 2, rounds=2), SEED), "INVALID_ARGUMENT"
    )
    assert_refused(
        None, CreateTournament(TID, Settings("round_robin", 3), SEED), "INVALID_SETTINGS"
    )
    assert_refused(
        None, CreateTournament(TID, Settings("swiss", 2, rounds=51), SEED), "INVALID_SETTINGS"
    )
    assert_refused(
        None, CreateTournament(TID, Settings("swiss", 2, rounds=2), b"short"), "INVALID_ARGUMENT"
    )
    run = registered_run(0)
    assert_refused(
        run.s, CreateTournament(TID, Settings("swiss", 2, rounds=2), SEED), "TOURNAMENT_EXISTS"
    )
    assert run.s.commitment != SEED.hex()


@pytest.mark.parametrize(
    ("name", "payload"),
    [
        ("EntrantWithdrew", {"entrant": 1}),
        ("EntrantWithdrew", {"entrant": "1", "after_round": 0}),
        ("EntrantWithdrew", {"entrant": 1, "after_round": 0, "extra": 1}),
        ("RoundPaired", {"round": 1, "byes": [], "tables": [{"table": 1, "sides": [1, 2]}]}),
        ("TournamentStarted", {"seeding": [1, True]}),
        ("Nothing", {}),
        (
            "TournamentCreated",
            {
                "tournament_id": TID,
                "name": "",
                "settings": {"format": "knockout", "table": {}},
                "commitment": "",
            },
        ),
    ],
)
def test_a_malformed_payload_is_a_corrupt_record(name, payload):
    with pytest.raises(CorruptRecord):
        decode_tournament_event(name, TOURNAMENT_SCHEMA_VERSION, payload)


def test_an_unknown_schema_version_is_a_corrupt_record():
    name, _, payload = encode_tournament_event(registered_run(1).events[1])
    with pytest.raises(CorruptRecord):
        decode_tournament_event(name, TOURNAMENT_SCHEMA_VERSION + 1, payload)


def test_invalid_argument_refusals_are_invalid_argument_status():
    with pytest.raises(InvalidArgument) as caught:
        decide_tournament(registered_run(3).s, Start(bytes(32)))
    assert caught.value.status == "INVALID_ARGUMENT"
