"""The reveal window (TOURNAMENT.md section 3): entrants register with a commitment to their
client seeds, the start closes registration, each entrant reveals its seed, and round 1 is
paired from the revealers once all have revealed or the window has passed, those that did
not withdrawn by the server. Every refusal with its reason, the events through their codec,
the record of section 6, and the reveal vectors replayed command by command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bergen.domain.errors import CorruptRecord
from bergen.domain.tournament_engine import (
    ENDED,
    NO_REVEAL_NOTE,
    REGISTRATION,
    REVEAL,
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
    Withdraw,
    decide_tournament,
    fold_tournament,
)
from bergen.domain.tournament_events import (
    TOURNAMENT_SCHEMA_VERSION,
    EntrantRegistered,
    EntrantSeedRevealed,
    EntrantWithdrew,
    RegistrationClosed,
    TournamentStarted,
    decode_tournament_event,
)
from bergen.domain.tournament_fairness import commitment, seeding_order
from bergen.domain.tournament_pairing import Settings
from bergen.domain.tournament_record import (
    SERVER,
    Intervention,
    check_tournament_record,
    parse_tournament_record,
)

from .test_tournament_engine import SEED, TID, Run, assert_refused

REVEAL_VECTORS = json.loads(
    (Path(__file__).with_name("vectors") / "tournament-reveal.json").read_text(encoding="utf-8")
)
CLOSED_AT = 1_700_000_000_000


def sha(seed: str) -> str:
    return commitment(seed.encode("utf-8"))


def committed_run(n: int, settings: Settings | None = None) -> Run:
    """A tournament of `n` entrants that each gave only their seed's commitment."""
    run = Run()
    run.do(CreateTournament(TID, settings or Settings("swiss", 2, rounds=2), SEED, "cup"))
    for i in range(1, n + 1):
        run.do(Register((f"p{i}",), client_seed_commitment=sha(f"seed {i}")))
    return run


def test_a_registration_records_the_commitment_and_no_seed():
    run = committed_run(1)
    (event,) = run.events[1:]
    assert event == EntrantRegistered(1, ("p1",), None, sha("seed 1"))
    assert run.s.entrants[0].client_seed is None
    record = run.s.record()
    assert record["entrants"][0]["client_seed_commitment"] == sha("seed 1")
    assert record["entrants"][0]["client_seed"] is None


def test_a_seed_given_at_registration_is_shown_only_after_the_close():
    # An older client's way: the seed itself, its commitment recorded for it.
    run = Run()
    run.do(CreateTournament(TID, Settings("swiss", 2, rounds=1), SEED))
    run.do(Register(("a",), "alpha"))
    run.do(Register(("b",), "beta"))
    assert run.events[1] == EntrantRegistered(1, ("a",), "alpha", sha("alpha"))
    assert [e["client_seed"] for e in run.s.record()["entrants"]] == [None, None]
    (started,) = run.do(Start(SEED, at_ms=CLOSED_AT))
    # Every seed known: no window to wait for.
    assert isinstance(started, TournamentStarted) and run.s.phase == RUNNING
    assert [e["client_seed"] for e in run.s.record()["entrants"]] == ["alpha", "beta"]
    assert started.seeding == seeding_order(SEED, TID, ["alpha", "beta"])


@pytest.mark.parametrize(
    ("register", "reason"),
    [
        (Register(("x",), client_seed_commitment="00" * 31), "BAD_SEED_COMMITMENT"),
        (Register(("x",), client_seed_commitment=sha("s").upper()), "BAD_SEED_COMMITMENT"),
        (Register(("x",), client_seed_commitment="g" * 64), "BAD_SEED_COMMITMENT"),
        (Register(("x",), client_seed_commitment=sha("s") + " "), "BAD_SEED_COMMITMENT"),
        (Register(("x",), "s", sha("s")), "SEED_AND_COMMITMENT"),
    ],
)
def test_a_malformed_commitment_is_refused_and_changes_nothing(register, reason):
    run = committed_run(2)
    assert_refused(run.s, register, reason)
    with pytest.raises(Exception) as caught:
        decide_tournament(run.s, register)
    assert getattr(caught.value, "status", "") == "INVALID_ARGUMENT"


def test_the_start_opens_the_reveal_window_and_closes_registration():
    run = committed_run(3)
    (closed,) = run.do(Start(SEED, at_ms=CLOSED_AT))
    assert closed == RegistrationClosed(CLOSED_AT + 60_000)
    assert run.s.phase == REVEAL and run.s.reveal_deadline_ms == CLOSED_AT + 60_000
    assert run.s.seeding is None and run.s.unrevealed() == [1, 2, 3]
    assert_refused(
        run.s, Register(("late",), client_seed_commitment=sha("l")), "REGISTRATION_CLOSED"
    )
    assert_refused(run.s, Start(SEED, at_ms=CLOSED_AT), "ALREADY_STARTED")
    assert_refused(run.s, PairRound(), "REVEAL_WINDOW_OPEN")
    assert_refused(run.s, RecordResult(1, 1, "target", (1, 2)), "REVEAL_WINDOW_OPEN")
    assert_refused(run.s, End(SEED), "REVEAL_WINDOW_OPEN")
    check_tournament_record(run.s.record())


def test_the_reveal_window_is_a_setting_of_its_own():
    run = committed_run(3, Settings("swiss", 2, rounds=2, reveal_window=5))
    (closed,) = run.do(Start(SEED, at_ms=CLOSED_AT))
    assert closed == RegistrationClosed(CLOSED_AT + 5_000)
    assert run.s.record()["settings"]["reveal_window"] == 5
    for bad in (0, -1, 86_401):
        assert_refused(
            None,
            CreateTournament(TID, Settings("swiss", 2, rounds=2, reveal_window=bad), SEED),
            "INVALID_SETTINGS",
        )


def test_reveal_refusals_change_nothing():
    run = committed_run(4)
    assert_refused(run.s, RevealSeed(1, "seed 1"), "REVEAL_NOT_OPEN")
    assert_refused(None, RevealSeed(1, "seed 1"), "TOURNAMENT_NOT_FOUND")
    run.do(Withdraw(3))
    run.do(Start(SEED, at_ms=CLOSED_AT))
    assert_refused(run.s, RevealSeed(5, "seed 5"), "NOT_AN_ENTRANT")
    assert_refused(run.s, RevealSeed(1, "seed 2"), "SEED_DOES_NOT_MATCH")
    assert_refused(run.s, RevealSeed(1, "x" * 257), "INVALID_ARGUMENT")
    assert_refused(run.s, RevealSeed(3, "seed 3"), "ALREADY_WITHDRAWN")
    assert run.s.unrevealed() == [1, 2, 4]
    run.do(RevealSeed(1, "seed 1"))
    assert run.events[-1] == EntrantSeedRevealed(1, "seed 1")
    assert_refused(run.s, RevealSeed(1, "seed 1"), "ALREADY_REVEALED")
    assert_refused(run.s, RevealSeed(1, "seed 9"), "SEED_DOES_NOT_MATCH")
    run.do(RevealSeed(2, "seed 2"))
    run.do(RevealSeed(4, "seed 4"))
    run.do(CloseReveal(SEED, at_ms=CLOSED_AT))
    assert_refused(run.s, RevealSeed(2, "seed 2"), "ALREADY_REVEALED")
    assert_refused(run.s, RevealSeed(3, "seed 3"), "REVEAL_CLOSED")


def test_close_refusals():
    run = committed_run(3)
    assert_refused(run.s, CloseReveal(SEED, at_ms=CLOSED_AT), "REVEAL_NOT_OPEN")
    run.do(Start(SEED, at_ms=CLOSED_AT))
    run.do(RevealSeed(1, "seed 1"))
    assert_refused(run.s, CloseReveal(SEED, at_ms=CLOSED_AT + 59_999), "REVEAL_WINDOW_OPEN")
    assert_refused(
        run.s, CloseReveal(bytes(32), at_ms=CLOSED_AT + 60_000), "SEED_DOES_NOT_MATCH_COMMITMENT"
    )
    run.do(CloseReveal(SEED, at_ms=CLOSED_AT + 60_000))
    assert_refused(run.s, CloseReveal(SEED, at_ms=CLOSED_AT + 60_000), "REVEAL_NOT_OPEN")


def test_when_every_entrant_has_revealed_the_window_closes_before_its_time():
    run = committed_run(3)
    run.do(Start(SEED, at_ms=CLOSED_AT))
    for i in (3, 1, 2):
        run.do(RevealSeed(i, f"seed {i}"))
    (started,) = run.do(CloseReveal(SEED, at_ms=CLOSED_AT + 1))
    assert started == TournamentStarted(seeding_order(SEED, TID, ["seed 1", "seed 2", "seed 3"]))
    assert run.s.phase == RUNNING and run.s.interventions == ()


def test_at_the_deadline_the_silent_are_withdrawn_and_the_revealers_alone_seeded():
    run = committed_run(5)
    run.do(Start(SEED, at_ms=CLOSED_AT))
    for i in (1, 3, 4):
        run.do(RevealSeed(i, f"seed {i}"))
    events = run.do(CloseReveal(SEED, at_ms=CLOSED_AT + 60_000))
    assert events == (
        EntrantWithdrew(2, 0, SERVER, NO_REVEAL_NOTE),
        EntrantWithdrew(5, 0, SERVER, NO_REVEAL_NOTE),
        TournamentStarted(seeding_order(SEED, TID, ["seed 1", "seed 3", "seed 4"], [1, 3, 4])),
    )
    assert run.s.interventions == (
        Intervention(0, None, "withdraw", SERVER, 2, NO_REVEAL_NOTE),
        Intervention(0, None, "withdraw", SERVER, 5, NO_REVEAL_NOTE),
    )
    run.do(PairRound())
    paired = {e for t in run.s.rounds[0].tables for e in t.sides} | set(run.s.rounds[0].byes)
    assert paired == {1, 3, 4}
    record = run.s.record()
    by = {e["entrant"]: (e["withdrawn_after_round"], e["withdrawn_by"]) for e in record["entrants"]}
    assert by[2] == by[5] == (0, "no_reveal") and by[1] == (None, None)
    assert [e["client_seed"] for e in record["entrants"]] == [
        "seed 1",
        None,
        "seed 3",
        "seed 4",
        None,
    ]
    assert {s["entrant"] for s in record["standings"]} == {1, 3, 4}
    assert record["interventions"][0] == {
        "round": 0,
        "table": None,
        "action": "withdraw",
        "by": "server",
        "entrant": 2,
        "reason": NO_REVEAL_NOTE,
    }
    check_tournament_record(record)
    assert fold_tournament(run.events) == run.s


def test_fewer_than_two_revealers_end_the_tournament_without_a_round():
    run = committed_run(3)
    run.do(Start(SEED, at_ms=CLOSED_AT))
    run.do(RevealSeed(2, "seed 2"))
    run.do(CloseReveal(SEED, at_ms=CLOSED_AT + 60_000))
    assert run.s.seeding == (2,) and run.s.over
    assert_refused(run.s, PairRound(), "NO_ROUND_LEFT")
    run.do(End(SEED))
    assert run.s.phase == ENDED
    record = run.s.record()
    assert record["rounds"] == [] and record["ended"] is True
    assert [s["entrant"] for s in record["standings"]] == [2]
    check_tournament_record(record)
    nobody = committed_run(3)
    nobody.do(Start(SEED, at_ms=CLOSED_AT))
    nobody.do(CloseReveal(SEED, at_ms=CLOSED_AT + 60_000))
    assert nobody.s.seeding == () and nobody.s.over
    nobody.do(End(SEED))
    check_tournament_record(nobody.s.record())


def test_an_entrant_that_withdrew_before_revealing_takes_no_part_in_the_seeding():
    run = committed_run(4)
    run.do(Withdraw(1))  # before the close, its seed never revealed
    run.do(Start(SEED, at_ms=CLOSED_AT))
    run.do(RevealSeed(2, "seed 2"))
    run.do(Withdraw(2))  # revealed, then withdrew: seeded, as one withdrawn before round 1
    run.do(RevealSeed(3, "seed 3"))
    run.do(RevealSeed(4, "seed 4"))
    (started,) = run.do(CloseReveal(SEED, at_ms=CLOSED_AT))
    assert started == TournamentStarted(
        seeding_order(SEED, TID, ["seed 2", "seed 3", "seed 4"], [2, 3, 4])
    )
    run.do(PairRound())
    withdrawn_by = [e["withdrawn_by"] for e in run.s.record()["entrants"]]
    assert withdrawn_by == ["entrant", "entrant", None, None]
    check_tournament_record(run.s.record())


def test_a_tournament_in_its_reveal_window_can_be_cancelled():
    run = committed_run(3)
    run.do(Start(SEED, at_ms=CLOSED_AT))
    run.do(RevealSeed(1, "seed 1"))
    run.do(Cancel(SEED, "the hall closed"))
    assert run.s.phase == ENDED and run.s.cancelled
    check_tournament_record(run.s.record())


def test_a_round_robin_has_the_rounds_of_its_revealers():
    run = committed_run(6, Settings("round_robin", 2))
    assert run.s.total_rounds == 5
    run.do(Start(SEED, at_ms=CLOSED_AT))
    for i in range(1, 6):
        run.do(RevealSeed(i, f"seed {i}"))
    run.do(CloseReveal(SEED, at_ms=CLOSED_AT + 60_000))
    assert run.s.total_rounds == 5  # five entrants: a bye each round
    rounds = 0
    while not run.s.over:
        run.do(PairRound())
        rounds += 1
        assert len(run.s.rounds[-1].byes) == 1
        for t in run.s.rounds[-1].tables:
            run.do(RecordResult(rounds, t.table, "target", (15, 2)))
    run.do(End(SEED))
    assert rounds == 5
    check_tournament_record(run.s.record())


@pytest.mark.parametrize("index", range(len(REVEAL_VECTORS["tournaments"])))
def test_reveal_vector_tournaments_run_by_commands_give_their_seeding_rounds_and_standings(
    index: int,
) -> None:
    record: dict[str, Any] = REVEAL_VECTORS["tournaments"][index]["record"]
    given = parse_tournament_record(record)
    seed = bytes.fromhex(record["tournament_seed"])
    run = Run()
    run.do(CreateTournament(given.tournament_id, given.settings, seed, "vector"))
    for e in given.entrants:
        assert e.client_seed_commitment is not None
        run.do(Register((f"p{e.entrant}",), client_seed_commitment=e.client_seed_commitment))
    run.do(Start(seed, at_ms=CLOSED_AT))
    silent = {e.entrant for e in given.entrants if e.withdrawn_by == SERVER}
    for e in given.entrants:
        if e.entrant not in silent:
            assert e.client_seed is not None
            run.do(RevealSeed(e.entrant, e.client_seed))
    deadline = CLOSED_AT + given.settings.reveal_window * 1000
    assert_refused(run.s, CloseReveal(seed, at_ms=deadline - 1), "REVEAL_WINDOW_OPEN")
    run.do(CloseReveal(seed, at_ms=deadline))
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
    assert run.s.over
    run.do(End(seed))
    built = run.s.record()
    for key in ("seeding", "rounds", "standings", "tournament_seed", "commitment"):
        assert built[key] == record[key], key
    for got, want in zip(built["entrants"], record["entrants"], strict=True):
        assert got["withdrawn_after_round"] == want["withdrawn_after_round"]
        assert got["withdrawn_by"] == want["withdrawn_by"]
        assert got["client_seed_commitment"] == want["client_seed_commitment"]
        if want["withdrawn_by"] != "no_reveal":
            assert got["client_seed"] == want["client_seed"]
        else:
            assert got["client_seed"] is None
    check_tournament_record(built)


def test_stored_registrations_of_before_read_as_revealed_and_new_ones_are_checked():
    legacy = decode_tournament_event(
        "EntrantRegistered",
        TOURNAMENT_SCHEMA_VERSION,
        {"entrant": 1, "players": ["a"], "client_seed": "old"},
    )
    assert legacy == EntrantRegistered(1, ("a",), "old", sha("old"))
    for payload in (
        {"entrant": 1, "players": ["a"], "client_seed": "x", "client_seed_commitment": sha("y")},
        {"entrant": 1, "players": ["a"], "client_seed": None, "client_seed_commitment": "AB"},
        {"entrant": 1, "players": ["a"], "client_seed": 3, "client_seed_commitment": sha("y")},
    ):
        with pytest.raises(CorruptRecord):
            decode_tournament_event("EntrantRegistered", TOURNAMENT_SCHEMA_VERSION, payload)
    for name, payload in (
        ("RegistrationClosed", {"reveal_deadline_ms": "soon"}),
        ("EntrantSeedRevealed", {"entrant": 1}),
        ("EntrantSeedRevealed", {"entrant": 1, "client_seed": None}),
    ):
        with pytest.raises(CorruptRecord):
            decode_tournament_event(name, TOURNAMENT_SCHEMA_VERSION, payload)


def test_the_record_writes_every_setting_defaults_included():
    run = committed_run(2)
    assert run.s.record()["settings"] == {
        "format": "swiss",
        "rounds": 2,
        "round_delay": 0,
        "reveal_window": 60,
        "max_entrants": None,
        "rated": False,
        "table": {"seats": 2, "partnerships": False, "rules": {"preset": "standard"}},
    }
    assert run.s.phase == REGISTRATION


def test_a_rated_tournament_has_its_reveal_window_too():
    # Registered players commit to their seeds as anyone does; the record names their ids,
    # says the tournament is rated, and the silent one is withdrawn before round 1.
    ids = [f"00000000-0000-4000-8000-00000000000{i}" for i in (1, 2, 3)]
    run = Run()
    run.do(CreateTournament(TID, Settings("swiss", 2, rounds=2, rated=True), SEED, "rated"))
    assert_refused(run.s, Register(("anon",), client_seed_commitment=sha("a")), "PLAYER_REQUIRED")
    for i, pid in enumerate(ids, start=1):
        run.do(
            Register(
                (f"p{i}",),
                client_seed_commitment=sha(f"seed {i}"),
                player_ids=(pid,),
                bots=(False,),
            )
        )
    assert run.events[1] == EntrantRegistered(1, ("p1",), None, sha("seed 1"), (ids[0],), (False,))
    run.do(Start(SEED, at_ms=CLOSED_AT))
    assert run.s.phase == REVEAL
    run.do(RevealSeed(1, "seed 1"))
    run.do(RevealSeed(3, "seed 3"))
    run.do(CloseReveal(SEED, CLOSED_AT + 60_000))
    assert run.s.phase == RUNNING
    assert run.s.seeding == seeding_order(SEED, TID, ["seed 1", "seed 3"], (1, 3))
    record = run.s.record()
    assert record["settings"]["rated"] is True
    assert [e["player_ids"] for e in record["entrants"]] == [[pid] for pid in ids]
    silent = record["entrants"][1]
    assert (silent["client_seed"], silent["withdrawn_after_round"]) == (None, 0)
    assert silent["withdrawn_by"] == "no_reveal"
    check_tournament_record(record)
