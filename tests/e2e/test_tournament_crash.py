"""A whole tournament through one `bergen serve` on PostgreSQL that is SIGKILLed in each of
its phases and restarted each time, while its players play on through their tokens: as a
round is paired and its tables seated, in the middle of a hand (the first, and a later one),
as a match ends and its result is to be recorded, between rounds (while the next pairing waits
for the round delay), and as the last result comes in and the tournament is to end. Each kill
comes as soon as the store shows the moment. It finishes with exactly what a clean run of the
same tournament writes: every round paired as its results before it say, one match per table
created and seated once, one result per table, no step event missing or doubled, every
table's match id and seed derived, a record that checks and an audit pack that verifies."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace

import grpc
import pytest

from bergen.domain.tournament_fairness import match_id
from bergen.domain.tournament_record import next_round, parse_tournament_record
from bergen.server.store import EventStore
from bergen.server.tournaments import tournament_stream
from bergen.v1 import bergen_pb2 as pb

from .client import Client, rule_options
from .conftest import ORGANISER_TOKEN
from .servers import ServerFarm, ServerProcess
from .test_tournaments import ORG, check_record, ended, kill, play_some, play_until, verify_pack
from .truth import check_stream, store_at

# The clean run may take CLEAN_RUN_S and the kill loop KILL_LOOP_S and three clean runs' time
# on a loaded machine (the tests run in several processes), then the checks.
pytestmark = [pytest.mark.timeout(1500), pytest.mark.postgres, pytest.mark.slow]

ENTRANTS = 8
ROUNDS = 3
TABLES = ENTRANTS // 2
TARGET = 15
"""Matches of 3 to 7 hands: a later hand to be killed in, and short rounds."""
ROUND_DELAY_S = 1
"""Between rounds the next pairing waits this long: a kill as a round's last result is in
comes before it."""
CLEAN_RUN_S = 300
KILL_LOOP_S = 300
POLL_S = 0.01
# Codes of a call cut by the server's death (or made while it is down).
CUT = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.UNKNOWN)
# What a match of a table holds once, whatever its deals.
STEPS = ("MatchCreated", "SeatTaken", "MatchEnded")


def create_swiss(client: Client, start: bool = True) -> tuple[str, dict[int, str]]:
    """An 8-entrant 3-round Swiss at 2-seat tables to TARGET points, filled (and started)."""
    stub = client.stub
    tid = stub.CreateTournament(
        pb.CreateTournamentRequest(
            name="crash cup",
            settings=pb.TournamentSettings(
                format=pb.TOURNAMENT_FORMAT_SWISS,
                seats=2,
                preset=pb.PRESET_STANDARD,
                options=rule_options(target=TARGET),
                rounds=ROUNDS,
                round_delay=ROUND_DELAY_S,
            ),
        ),
        metadata=ORG,
    ).tournament_id
    tokens: dict[int, str] = {}
    for i in range(ENTRANTS):
        reply = stub.RegisterEntrant(
            pb.RegisterEntrantRequest(tournament_id=tid, players=[f"p{i}"], client_seed=f"c{i}")
        )
        (tokens[reply.entrant],) = reply.player_tokens
    if start:
        stub.StartTournament(pb.StartTournamentRequest(tournament_id=tid), metadata=ORG)
    return tid, tokens


class Players:
    """The players of a tournament playing on in a thread of their own through whichever
    server is up; a call cut by a kill is made again on the next server."""

    def __init__(self, tid: str, tokens: dict[int, str], server: ServerProcess) -> None:
        self.tid, self.tokens = tid, tokens
        self.changed = threading.Condition()
        self.server, self.generation = server, 0
        self.done = threading.Event()
        self.failure: BaseException | None = None
        self.answered = 0
        """Rounds of calls the server of this generation has answered."""
        self.thread = threading.Thread(target=self._run, daemon=True)

    def restarted(self, server: ServerProcess) -> None:
        with self.changed:
            self.server, self.generation = server, self.generation + 1
            self.answered = 0
            self.changed.notify_all()

    def wait_answered(self, timeout: float) -> None:
        """Until the server now up has answered a round of the players' calls (or the end):
        however slow the machine, every server lives long enough to move the tournament.
        Raises AssertionError when it has not in `timeout` seconds."""
        with self.changed:
            answered = self.changed.wait_for(
                lambda: self.answered > 0 or self.done.is_set(), timeout
            )
        assert answered, f"server {self.generation} answered no call in {timeout:g} s"

    def _wait_for_restart(self, generation: int) -> None:
        with self.changed:
            self.changed.wait_for(lambda: self.generation != generation)

    def _run(self) -> None:
        try:
            while not self.done.is_set():
                with self.changed:
                    server, generation = self.server, self.generation
                try:
                    with Client(server.target) as client:
                        while not self.done.is_set():
                            if play_some(client, self.tid, self.tokens):
                                self.done.set()
                            else:
                                with self.changed:
                                    if generation == self.generation:
                                        self.answered += 1
                                        self.changed.notify_all()
                                self.done.wait(0.01)  # a poll, as play_until's
                except grpc.RpcError as e:
                    if e.code() not in CUT:  # type: ignore[attr-defined]
                        raise
                    self._wait_for_restart(generation)
        except BaseException as e:  # handed to the test
            self.failure = e
            self.done.set()


class Progress:
    """What the store holds of one tournament so far, read in its global order as it
    commits: the tournament's steps by type, and the events of each table's match that tell
    where its play is."""

    TYPES = frozenset(
        {
            "RoundPaired",
            "ResultRecorded",
            "TournamentEnded",
            "TilePlayed",
            "HandEnded",
            "MatchEnded",
        }
    )

    def __init__(self, store: EventStore, tid: str) -> None:
        self.store, self.stream = store, tournament_stream(tid)
        self.after = 0
        self.steps: Counter[str] = Counter()
        self.round_of = {
            match_id(tid, r, t): r for r in range(1, ROUNDS + 1) for t in range(1, TABLES + 1)
        }
        self.matches: dict[str, list[str]] = {m: [] for m in self.round_of}

    def read(self) -> None:
        while True:
            got = self.store.read_all(self.after, 1000, types=self.TYPES)
            for e in got:
                if e.type not in self.TYPES:
                    continue  # the last event of the order, whatever its type
                if e.stream_id == self.stream:
                    self.steps[e.type] += 1
                elif e.stream_id in self.matches:
                    self.matches[e.stream_id].append(e.type)
            if got:
                self.after = got[-1].position
            if len(got) < 1000:
                return

    def tables(self, round_number: int) -> list[list[str]]:
        """The events read of each table's match of the round."""
        return [types for m, types in self.matches.items() if self.round_of[m] == round_number]


def mid_hand(types: list[str], hands_ended: int) -> bool:
    """A tile was the last thing played, after `hands_ended` hands (at least) ended."""
    return bool(types) and types[-1] == "TilePlayed" and types.count("HandEnded") >= hands_ended


KILL_POINTS: list[tuple[str, Callable[[Progress], bool]]] = [
    ("as round 1 is paired and seated", lambda p: p.steps["RoundPaired"] >= 1),
    ("in a first hand", lambda p: any(mid_hand(t, 0) for t in p.tables(1))),
    ("as a match of round 1 ends", lambda p: any("MatchEnded" in t for t in p.tables(1))),
    ("between rounds 1 and 2", lambda p: p.steps["ResultRecorded"] >= TABLES),
    ("as round 2 is paired and seated", lambda p: p.steps["RoundPaired"] >= 2),
    ("in a later hand", lambda p: any(mid_hand(t, 1) for r in (2, 3) for t in p.tables(r))),
    ("as a match of the last round ends", lambda p: any("MatchEnded" in t for t in p.tables(3))),
    ("as the last result is in", lambda p: p.steps["ResultRecorded"] >= ROUNDS * TABLES),
]
"""Where the server is killed, in order: as soon as the store shows each moment."""


def step_events(database: str, tid: str) -> tuple[list[str], list[Counter[str]]]:
    """The tournament stream's event types in order, and each table's match's step events
    (round by round, table by table), every match stream gap-free, chained and folding."""
    with store_at(database) as store:
        types = [e.type for e in store.read_stream(tournament_stream(tid))]
        tables = []
        for r in range(1, ROUNDS + 1):
            for t in range(1, TABLES + 1):
                mid = match_id(tid, r, t)
                stored = store.read_stream(mid)
                check_stream(store, mid, stored)
                tables.append(Counter(e.type for e in stored if e.type in STEPS))
    return types, tables


def test_a_tournament_killed_in_each_phase_finishes_exactly_as_a_clean_run(
    farm: ServerFarm, pg_database: str
) -> None:
    server = farm.start(pg_database, organiser_token=ORGANISER_TOKEN, name="run0")
    # The clean run: the same tournament played to its end with no kill.
    with Client(server.target) as client:
        clean_tid, clean_tokens = create_swiss(client)
        started = time.monotonic()
        play_until(client, clean_tid, clean_tokens, ended(client, clean_tid), CLEAN_RUN_S)
        clean_s = time.monotonic() - started
        check_record(client, clean_tid)
        tid, tokens = create_swiss(client, start=False)

    players = Players(tid, tokens, server)
    players.thread.start()
    kills = 0
    deadline = time.monotonic() + KILL_LOOP_S + 3 * clean_s
    with store_at(pg_database) as store:
        progress = Progress(store, tid)
        progress.read()
        # Started once the store is followed, so that round 1 is seen as soon as it is paired.
        with Client(server.target) as client:
            client.stub.StartTournament(pb.StartTournamentRequest(tournament_id=tid), metadata=ORG)
        for moment, reached in KILL_POINTS:
            # However slow the machine, every server moves the tournament before its kill.
            players.wait_answered(60)
            ended_at: float | None = None
            while True:
                progress.read()
                if reached(progress):
                    break
                if players.done.is_set():
                    if players.failure is not None:
                        raise players.failure
                    # The store's order shows a commit once those begun before it are done.
                    ended_at = ended_at or time.monotonic()
                    assert time.monotonic() < ended_at + 10, (
                        f"the tournament ended before a kill {moment}"
                    )
                assert time.monotonic() < deadline, (
                    f"no kill {moment} in time ({kills} kills; the clean run took {clean_s:.0f} s)"
                )
                time.sleep(POLL_S)
            kill(server)
            kills += 1
            server = farm.start(pg_database, organiser_token=ORGANISER_TOKEN, name=f"run{kills}")
            players.restarted(server)
    assert players.done.wait(max(0.0, deadline - time.monotonic())), (
        f"the tournament did not finish after its {kills} kills"
    )
    players.thread.join(60)
    if players.failure is not None:
        raise players.failure
    assert not players.thread.is_alive(), "the players did not stop at the tournament's end"
    assert kills == len(KILL_POINTS)

    with Client(server.target) as client:
        record = check_record(client, tid)
        verify_pack(client, record, farm.workdir)
        summaries = client.stub.ListMatches(pb.ListMatchesRequest(page_size=100)).matches
    # One match per table of either run, and nothing else.
    both = {match_id(t, r, n) for t in (tid, clean_tid) for r in range(1, ROUNDS + 1)
            for n in range(1, TABLES + 1)}  # fmt: skip
    assert sorted(m.match_id for m in summaries) == sorted(both)

    # Every round is paired as the results before it say: the record replayed through the
    # pure model, round after round, gives its rounds again (tables, sides, match ids).
    played = parse_tournament_record({k: v for k, v in record.items() if k != "signature"})
    replay = replace(played, rounds=())
    for got in played.rounds:
        want = next_round(replay)
        assert [(t.table, t.sides, t.match_id) for t in got.tables] == [
            (t.table, t.sides, t.match_id) for t in want.tables
        ]
        assert got.byes == want.byes
        assert all(t.result is not None for t in got.tables)
        replay = replace(replay, rounds=(*replay.rounds, got))
    assert len(played.rounds) == ROUNDS

    # The same events as the clean run: each step of the tournament once, in the same
    # order, and each table's match created, seated and ended once.
    crash_types, crash_tables = step_events(pg_database, tid)
    clean_types, clean_tables = step_events(pg_database, clean_tid)
    assert crash_types == clean_types
    assert Counter(crash_types)["RoundPaired"] == ROUNDS
    assert Counter(crash_types)["ResultRecorded"] == ROUNDS * TABLES
    assert Counter(crash_types)["TournamentEnded"] == 1
    assert crash_tables == clean_tables
    assert all(c == Counter(MatchCreated=1, SeatTaken=2, MatchEnded=1) for c in crash_tables)
