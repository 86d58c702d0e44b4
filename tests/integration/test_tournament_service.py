"""Tournaments on a real store of each backend: the commands, the process manager that pairs
rounds, creates and seats their matches and records their results, and two applications on
one database standing for two replicas, each with its own manager. The organiser's
interventions: a stuck table settled (its no-show forfeited, or its match abandoned) and the
tournament going on as usual, even when a settlement stops between the match's end and its
result; a tournament cancelled before its start; withdrawals and rounds started by hand
shown with who did them. The reveal window: seeds committed, revealed, and the window closed
at its deadline by whichever replica's manager is up."""

from __future__ import annotations

import queue
import secrets
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Backend
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bergen.api import convert
from bergen.api.audit_pack import played_matches
from bergen.api.checkpoints import verify_transparency
from bergen.api.exit_status import ExitStatus
from bergen.api.signing import RecordSigner, verify_signature
from bergen.cli_client.tournament_pack import served_pack, write_files
from bergen.cli_client.verify import verify_pack
from bergen.domain.engine import first_legal_play
from bergen.domain.errors import (
    BergenError,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    RuleViolation,
    StorageUnavailable,
    Unauthenticated,
)
from bergen.domain.state import ENDED, PLAYING
from bergen.domain.tournament_engine import ENDED as TOURNAMENT_ENDED
from bergen.domain.tournament_engine import RUNNING
from bergen.domain.tournament_fairness import commitment, match_id, table_server_seed
from bergen.domain.tournament_pairing import SWISS, Settings
from bergen.domain.tournament_record import (
    ABANDON,
    FORFEIT_TABLE,
    Intervention,
    check_tournament_record,
)
from bergen.domain.tournament_record import ORGANISER as BY_ORGANISER
from bergen.server.app import Application, build_application
from bergen.server.app import Settings as AppSettings
from bergen.server.commands import Authorise, UnitOfWork, Written
from bergen.server.feed import EventFeed
from bergen.server.identity import Caller
from bergen.server.keys import LogKeys
from bergen.server.store import EventStore, open_store
from bergen.server.tlog import TransparencyLog
from bergen.server.tournament_manager import TournamentManager
from bergen.server.tournaments import Assignment, TournamentView, tournament_stream
from bergen.v1 import bergen_pb2 as pb

ORGANISER = "bgo_" + "Zq8w-Xv3_Tn7Ry1Lp5Ks9Jd2Hf6Gb4Mc0Na8Ue3"
ORG = Caller(ORGANISER)
QUICK = {"preset": "standard", "target": 3}


def swiss(entrants_rounds: int = 2, **kw: object) -> Settings:
    return Settings(format=SWISS, seats=2, rules=dict(QUICK), rounds=entrants_rounds, **kw)  # type: ignore[arg-type]


@pytest.fixture
def keys() -> LogKeys:
    return LogKeys.generate()


Replica = tuple[Application, EventStore, EventFeed]


@pytest.fixture
def replicas(backend: Backend, keys: LogKeys) -> Iterator[list[Replica]]:
    stores = [open_store(backend.url, log_keys=keys) for _ in range(2)]
    feeds = [EventFeed(s) for s in stores]
    apps = [
        build_application(s, f, AppSettings(organiser_token=ORGANISER), keys)
        for s, f in zip(stores, feeds, strict=True)
    ]
    yield list(zip(apps, stores, feeds, strict=True))
    for s in stores:
        s.close()


def manager(app: Application) -> TournamentManager:
    return TournamentManager(app.tournaments, app.work, app.repository)


def registered(app: Application, n: int, settings: Settings) -> tuple[str, dict[int, str]]:
    t = app.tournaments.create(ORG, settings, "cup")
    tokens = {}
    for i in range(n):
        entrant, (token,) = app.tournaments.register(t.state.tournament_id, (f"p{i}",), f"s{i}")
        tokens[entrant] = token
    return t.state.tournament_id, tokens


def play_out(app: Application, mid: str, tokens: list[str]) -> None:
    """Play a match to its end, each seat's first legal play, with the players' tokens."""
    while True:
        v = app.queries.get_view(Caller(), mid)
        if v.phase == ENDED:
            return
        assert v.phase == PLAYING and v.turn is not None
        caller = Caller(tokens[v.turn])
        tile, end = app.queries.get_view(caller, mid).legal_plays[0]
        app.commands.play(caller, mid, tile, end, None, None)


def play_round(app: Application, tid: str, tokens: dict[int, str]) -> None:
    """Every match of the latest round played out by its players, each finding its own match
    and seat through `get`."""
    state = app.tournaments.repository.load(tid).state
    for table in state.rounds[-1].tables:
        assert table.match_id is not None
        seats: dict[int, str] = {}
        for entrant in table.sides:
            view = app.tournaments.get(Caller(tokens[entrant]), tid)
            assert view.assignment is not None
            assert view.assignment.match_id == table.match_id
            assert view.assignment.seat is not None
            seats[view.assignment.seat] = tokens[entrant]
        play_out(app, table.match_id, [seats[s] for s in sorted(seats)])


def test_a_swiss_is_paired_seated_recorded_and_ended_by_the_manager(
    replicas: list[Replica],
) -> None:
    (app, store, feed), _ = replicas
    tid, tokens = registered(app, 4, swiss())
    app.tournaments.start(ORG, tid)
    m = manager(app)
    for _ in range(2):
        assert m.advance(tid) is None
        t = app.tournaments.repository.load(tid)
        latest = t.state.rounds[-1]
        for table in latest.tables:
            # Ids and seeds derived: the server chose neither.
            assert table.match_id == match_id(tid, latest.round, table.table)
            created = app.repository.load(table.match_id)
            assert created.state.phase == PLAYING
            seed = table_server_seed(app.tournaments.seed_of(t), table.match_id)
            assert created.state.info.commitment == commitment(seed)
            names = [p.name for p in created.state.players if p is not None]
            entrants = t.state.entrants
            assert names == [entrants[e - 1].players[0] for e in table.sides]  # type: ignore[index]
        play_round(app, tid, tokens)
    assert m.advance(tid) is None
    t = app.tournaments.repository.load(tid)
    assert t.state.phase == TOURNAMENT_ENDED
    record = app.tournaments.record(tid)
    check_tournament_record(record)
    assert record["ended"] is True and len(record["rounds"]) == 2  # type: ignore[arg-type]
    # The tournament is a stream of its own, and the match listing holds only its matches.
    streams = {s.stream_id for s in store.list_streams(limit=1000)}
    assert tournament_stream(tid) in streams
    listed, _ = feed.listing.page(None, "", 100, "")
    assert sorted(m.match_id for m in listed) == sorted(streams - {tournament_stream(tid)})


def test_two_replicas_doing_every_step_at_once_neither_lose_nor_double_one(
    replicas: list[Replica],
) -> None:
    (a, store, _), (b, _, _) = replicas
    tid, tokens = registered(a, 4, swiss())
    a.tournaments.start(ORG, tid)
    managers = [manager(a), manager(b)]
    for _ in range(2):
        barrier = threading.Barrier(2)
        errors: list[BaseException] = []

        def run(
            m: TournamentManager,
            barrier: threading.Barrier = barrier,
            errors: list[BaseException] = errors,
        ) -> None:
            try:
                barrier.wait()
                m.advance(tid)
            except BaseException as e:  # pragma: no cover - reported below
                errors.append(e)

        threads = [threading.Thread(target=run, args=(m,)) for m in managers]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert errors == []
        play_round(a, tid, tokens)
    for m in managers:
        m.advance(tid)
    types = [e.type for e in store.read_stream(tournament_stream(tid))]
    assert types.count("RoundPaired") == 2
    assert types.count("ResultRecorded") == 4
    assert types.count("TournamentEnded") == 1
    for r in (1, 2):
        for table in (1, 2):
            events = store.read_stream(match_id(tid, r, table))
            assert [e.type for e in events].count("SeatTaken") == 2
    check_tournament_record(b.tournaments.record(tid))


def wait_for(what: Callable[[], bool], timeout: float = 60.0) -> None:
    """Block until `what()` holds: the managers' threads work on events."""
    end = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < end, "timed out waiting"
        time.sleep(0.02)


def test_the_managers_threads_follow_the_feed_and_a_late_one_catches_up(
    replicas: list[Replica], keys: LogKeys
) -> None:
    (a, _, feed), (b, _, _) = replicas
    tid, tokens = registered(a, 4, swiss())
    m = manager(a)
    feed.listen(m.note)
    feed.start()
    m.start()
    try:
        a.tournaments.start(ORG, tid)

        def round_ready(r: int) -> bool:
            t = a.tournaments.repository.load(tid).state
            if t.round < r:
                return False
            try:
                return all(
                    x.match_id is not None and a.repository.load(x.match_id).state.phase == PLAYING
                    for x in t.rounds[r - 1].tables
                )
            except NotFound:
                return False  # paired, its matches not created yet

        wait_for(lambda: round_ready(1))
        play_round(a, tid, tokens)
        wait_for(lambda: round_ready(2))
    finally:
        m.stop()
        feed.stop()
    # The second replica starts only now: its scan finds the tournament and finishes it.
    play_round(b, tid, tokens)
    late = manager(b)
    late.start()
    try:
        wait_for(lambda: b.tournaments.repository.load(tid).state.phase == TOURNAMENT_ENDED)
    finally:
        late.stop()
    check_tournament_record(b.tournaments.record(tid))


def test_commands_are_refused_with_their_reasons(replicas: list[Replica]) -> None:
    (app, _, _), _ = replicas
    with pytest.raises(Unauthenticated):
        app.tournaments.create(Caller(), swiss(), "x")
    with pytest.raises(PermissionDenied):
        app.tournaments.create(Caller("bgs_" + "a1" * 20), swiss(), "x")
    with pytest.raises(InvalidArgument) as bad:
        app.tournaments.create(ORG, Settings(format=SWISS, seats=2, rounds=0), "x")
    assert bad.value.reason == "INVALID_SETTINGS"
    with pytest.raises(InvalidArgument) as hidden:
        app.tournaments.create(ORG, swiss(), "cup \u202e")
    assert hidden.value.reason == "INVISIBLE_CHARACTER"
    tid, tokens = registered(app, 2, swiss(1))
    # Refused as the matches would refuse them: no entrant is registered that cannot be seated.
    for name, reason in (("n" * 65, "TEXT_TOO_LONG"), ("a\x07b", "CONTROL_CHARACTER")):
        with pytest.raises(InvalidArgument) as bad_name:
            app.tournaments.register(tid, (name,), "")
        assert bad_name.value.reason == reason
    with pytest.raises(PermissionDenied) as other:
        app.tournaments.withdraw(Caller(tokens[2]), tid, 1)
    assert other.value.reason == "NOT_THIS_ENTRANT"
    with pytest.raises(RuleViolation) as early:
        app.tournaments.start_next_round(ORG, tid)
    assert early.value.reason == "TOURNAMENT_NOT_STARTED"
    with pytest.raises(NotFound) as missing:
        app.tournaments.get(Caller(), "0" * 8 + "-0000-4000-8000-" + "0" * 12)
    assert missing.value.reason == "TOURNAMENT_NOT_FOUND"
    assert app.tournaments.withdraw(Caller(tokens[2]), tid, 2) == 0
    with pytest.raises(RuleViolation) as few:
        app.tournaments.start(ORG, tid)
    assert few.value.reason == "TOO_FEW_ENTRANTS"


def test_rounds_by_hand_wait_for_the_organiser(
    replicas: list[Replica],
) -> None:
    (app, _, _), _ = replicas
    t = app.tournaments.create(ORG, swiss(), "by hand", by_hand=True)
    tid = t.state.tournament_id
    tokens = {}
    for i in range(4):
        entrant, (token,) = app.tournaments.register(tid, (f"p{i}",), "")
        tokens[entrant] = token
    app.tournaments.start(ORG, tid)
    m = manager(app)
    m.advance(tid)
    play_round(app, tid, tokens)
    m.advance(tid)
    state = app.tournaments.repository.load(tid).state
    assert state.phase == RUNNING and state.round == 1 and state.round_finished
    assert app.tournaments.start_next_round(ORG, tid) == 2
    m.advance(tid)
    play_round(app, tid, tokens)
    m.advance(tid)
    assert app.tournaments.repository.load(tid).state.phase == TOURNAMENT_ENDED


def play_all(app: Application, tid: str, tokens: dict[int, tuple[str, ...]]) -> None:
    """Every match of the latest round played out, each player finding its seat through
    `get` (partnership tables: both players of each entrant)."""
    state = app.tournaments.repository.load(tid).state
    for table in state.rounds[-1].tables:
        if table.match_id is None:
            continue
        seats: dict[int, str] = {}
        for entrant in table.sides:
            for token in tokens[entrant]:
                a = app.tournaments.get(Caller(token), tid).assignment
                assert a is not None and a.match_id == table.match_id and a.seat is not None
                seats[a.seat] = token
        play_out(app, table.match_id, [seats[s] for s in sorted(seats)])


def test_a_round_robin_of_pairs_seats_both_players_and_gives_the_byes(
    replicas: list[Replica],
) -> None:
    (app, _, _), _ = replicas
    settings = Settings(format="round_robin", seats=4, partnerships=True, rules=dict(QUICK))
    tid = app.tournaments.create(ORG, settings, "pairs").state.tournament_id
    tokens = {}
    for i in range(3):
        entrant, pair = app.tournaments.register(tid, (f"a{i}", f"b{i}"), f"s{i}")
        tokens[entrant] = pair
    app.tournaments.start(ORG, tid)
    m = manager(app)
    for _ in range(3):
        m.advance(tid)
        state = app.tournaments.repository.load(tid).state
        assert len(state.rounds[-1].byes) == 1 and len(state.rounds[-1].tables) == 1
        (table,) = state.rounds[-1].tables
        assert table.match_id is not None
        players = app.repository.load(table.match_id).state.players
        first, second = table.sides
        # The first side on seats 0 and 2, each entrant's first player on the lower seat.
        assert [p.name for p in players if p is not None] == [
            f"a{first - 1}",
            f"a{second - 1}",
            f"b{first - 1}",
            f"b{second - 1}",
        ]
        play_all(app, tid, tokens)
    m.advance(tid)
    assert app.tournaments.repository.load(tid).state.phase == TOURNAMENT_ENDED
    check_tournament_record(app.tournaments.record(tid))


def test_a_withdrawn_entrant_plays_on_and_is_paired_no_more(replicas: list[Replica]) -> None:
    (app, _, _), _ = replicas
    tid, single = registered(app, 4, swiss())
    tokens = {e: (t,) for e, t in single.items()}
    app.tournaments.start(ORG, tid)
    m = manager(app)
    m.advance(tid)
    assert app.tournaments.withdraw(Caller(single[4]), tid, 4) == 1
    play_all(app, tid, tokens)  # its match goes on, and counts
    m.advance(tid)
    state = app.tournaments.repository.load(tid).state
    assert state.round == 2 and len(state.rounds[1].byes) == 1
    assert all(4 not in t.sides for t in state.rounds[1].tables) and 4 not in state.rounds[1].byes
    assert app.tournaments.get(Caller(single[4]), tid).assignment.match_id == ""  # type: ignore[union-attr]
    play_all(app, tid, tokens)
    m.advance(tid)
    assert app.tournaments.repository.load(tid).state.phase == TOURNAMENT_ENDED
    check_tournament_record(app.tournaments.record(tid))


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_800_000_000_000

    def __call__(self) -> int:
        return self.now


def test_the_next_round_waits_for_the_round_delay(backend: Backend, keys: LogKeys) -> None:
    clock = FakeClock()
    store = open_store(backend.url, log_keys=keys)
    try:
        settings = AppSettings(organiser_token=ORGANISER)
        app = build_application(store, EventFeed(store), settings, keys, clock=clock)
        tid, single = registered(app, 4, swiss(round_delay=30))
        app.tournaments.start(ORG, tid)
        m = TournamentManager(app.tournaments, app.work, app.repository, clock)
        assert m.advance(tid) is None  # the first round at once
        play_all(app, tid, {e: (t,) for e, t in single.items()})
        clock.now += 1_000
        finished = clock.now
        assert m.advance(tid) == finished + 30_000  # the results recorded, not yet paired
        assert app.tournaments.repository.load(tid).state.round == 1
        clock.now = finished + 29_999
        assert m.advance(tid) == finished + 30_000
        clock.now = finished + 30_000
        assert m.advance(tid) is None
        assert app.tournaments.repository.load(tid).state.round == 2
    finally:
        store.close()


def test_a_watching_player_is_woken_when_the_server_seats_it(replicas: list[Replica]) -> None:
    (app, _, _), _ = replicas
    tid, single = registered(app, 4, swiss())
    app.tournaments.start(ORG, tid)
    shown: queue.Queue[TournamentView | None] = queue.Queue()
    stop = threading.Event()

    def watch() -> None:
        for v in app.tournaments.watch(Caller(single[1]), tid, lambda: not stop.is_set()):
            shown.put(v)
        shown.put(None)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        assert shown.get(timeout=10).assignment == Assignment(1, 0)  # type: ignore[union-attr]
        app.tournaments.pair(tid, 1)  # paired, not seated yet: nothing to play
        paired = shown.get(timeout=10)
        assert paired is not None and paired.assignment is not None
        assert paired.assignment.round == 1 and paired.assignment.match_id == ""
        manager(app).advance(tid)  # the matches created and seated: no tournament event
        seated = shown.get(timeout=10)
        while seated is not None and seated.assignment is not None:
            if seated.assignment.match_id:
                break
            seated = shown.get(timeout=10)  # the tables' matches created, seated one by one
        assert seated is not None and seated.assignment is not None
        assert seated.assignment.match_id == match_id(tid, 1, seated.assignment.table)
        assert seated.assignment.seat is not None
    finally:
        stop.set()
        watcher.join(10)


class CreatedTogether:
    """A unit of work whose match creations wait until `parties` of them are in flight."""

    def __init__(self, work: UnitOfWork, parties: int) -> None:
        self._work = work
        self._together = threading.Barrier(parties, timeout=10)

    def run(self, match_id: str, authorise: Authorise, **kw: Any) -> Written:
        if kw.get("new"):
            self._together.wait()  # BrokenBarrierError unless the others come meanwhile
        return self._work.run(match_id, authorise, **kw)


def test_a_rounds_tables_are_created_and_seated_several_at_once(replicas: list[Replica]) -> None:
    (app, _, _), _ = replicas
    tid, _ = registered(app, 8, swiss())
    app.tournaments.start(ORG, tid)
    app.tournaments.pair(tid, 1)
    m = TournamentManager(app.tournaments, CreatedTogether(app.work, 4), app.repository)  # type: ignore[arg-type]
    assert m.advance(tid) is None
    tables = app.tournaments.repository.load(tid).state.rounds[-1].tables
    assert len(tables) == 4
    assert all(app.repository.load(t.match_id).state.phase == PLAYING for t in tables)  # type: ignore[arg-type]
    assert m.steps == 4 * 3  # each table created and both its seats taken, once


class SeatingFails:
    """A unit of work that cannot take a seat: the store went away after the creation."""

    def __init__(self, work: UnitOfWork) -> None:
        self._work = work

    def run(self, match_id: str, authorise: Authorise, **kw: Any) -> Written:
        if str(kw.get("command_id", "")).startswith("tournament-seat-"):
            raise StorageUnavailable("the database went away")
        return self._work.run(match_id, authorise, **kw)


def test_a_table_abandoned_before_it_was_seated_counts_as_abandoned(
    replicas: list[Replica],
) -> None:
    (app, _, _), _ = replicas
    tid, _ = registered(app, 4, swiss())
    app.tournaments.start(ORG, tid)
    crashing = TournamentManager(app.tournaments, SeatingFails(app.work), app.repository)  # type: ignore[arg-type]
    with pytest.raises(StorageUnavailable):
        crashing.advance(tid)
    first = match_id(tid, 1, 1)
    assert app.commands.abandon_unseated(first, "still seating")  # as the janitor does
    assert manager(app).advance(tid) is None
    state = app.tournaments.repository.load(tid).state
    table = state.rounds[0].tables[0]
    assert table.result is not None and table.result.reason == "abandoned"
    second = state.rounds[0].tables[1].match_id
    assert second is not None and app.repository.load(second).state.phase == PLAYING


def test_a_registration_sent_again_with_its_tokens_is_answered_from_the_log(
    replicas: list[Replica],
) -> None:
    (a, store, _), (b, _, _) = replicas
    settings = Settings(format="round_robin", seats=4, partnerships=True, rules=dict(QUICK))
    tid = a.tournaments.create(ORG, settings, "again").state.tournament_id
    mine = ("bgs_" + secrets.token_urlsafe(32), "bgs_" + secrets.token_urlsafe(32))
    assert a.tournaments.register(tid, ("ann", "bob"), "s", mine) == (1, mine)
    # The answer was lost: sent again, to another replica.
    assert b.tournaments.register(tid, ("ann", "bob"), "s", mine) == (1, mine)
    types = [e.type for e in store.read_stream(tournament_stream(tid))]
    assert types.count("EntrantRegistered") == 1
    t = a.tournaments.repository.load(tid)
    assert a.tournaments.entrant_of(t, Caller(mine[1])) == (1, 1)
    with pytest.raises(InvalidArgument) as other:
        a.tournaments.register(tid, ("cid", "dot"), "s", mine)
    assert other.value.reason == "COMMAND_ID_REUSED"
    for tokens, reason in (
        (mine[:1], "WRONG_TOKEN_COUNT"),
        (("a" * 40, "bgs_" + secrets.token_urlsafe(32)), "WEAK_SEAT_TOKEN"),
        ((mine[0] + "x", mine[0] + "x"), "BAD_SEAT_TOKEN"),
    ):
        with pytest.raises(InvalidArgument) as bad:
            a.tournaments.register(tid, ("eve", "fay"), "s", tokens)
        assert bad.value.reason == reason


def test_a_page_of_the_match_listing_does_not_wait_for_a_tournament_to_be_listed(
    replicas: list[Replica], caplog: pytest.LogCaptureFixture
) -> None:
    (app, _, feed), _ = replicas
    registered(app, 2, swiss(1))  # written here: the listing is told of the rows
    with caplog.at_level("WARNING", logger="bergen.server.projections"):
        assert feed.listing.page(None, "", 10, "") == ([], "")
    assert "not listed yet" not in caplog.text


def test_the_audit_manifest_is_signed_at_the_end_and_refused_before_it(
    backend: Backend, keys: LogKeys, tmp_path: Path
) -> None:
    signer = RecordSigner(Ed25519PrivateKey.generate())
    store = open_store(backend.url, log_keys=keys)
    app = build_application(
        store, EventFeed(store), AppSettings(organiser_token=ORGANISER, signer=signer), keys
    )

    def served(mid: str) -> dict[str, Any]:
        return app.queries.record(Caller(), mid)

    try:
        with pytest.raises(NotFound):
            app.tournaments.audit_manifest(str(uuid.uuid4()), served)
        tid, tokens = registered(app, 4, swiss())
        app.tournaments.start(ORG, tid)
        m = manager(app)
        for _ in range(2):
            assert m.advance(tid) is None
            with pytest.raises(RuleViolation) as refused:
                app.tournaments.audit_manifest(tid, served)
            assert refused.value.reason == "TOURNAMENT_NOT_ENDED"
            play_round(app, tid, tokens)
        assert m.advance(tid) is None
        manifest = app.tournaments.audit_manifest(tid, served)
        assert verify_signature(manifest, signer.public_key) == signer.public_key
        # What anyone fetches makes the pack the manifest lists, and the pack verifies.
        record = app.tournaments.record(tid)
        matches = [served(mid) for mid in played_matches(record)]
        assert len(matches) == 4
        folder = tmp_path / "pack"
        write_files(folder, served_pack(record, matches, manifest))
        outcome = verify_pack(folder, signer.public_key)
        assert outcome.status == ExitStatus.SUCCESS, outcome.line
        # Built once: asked again, the same manifest, with no match record read again.
        assert app.tournaments.audit_manifest(tid, lambda mid: {}) == manifest
    finally:
        store.close()


def test_a_server_that_signs_nothing_signs_no_audit_manifest(replicas: list[Replica]) -> None:
    (app, _, _), _ = replicas
    tid, _ = registered(app, 2, swiss())
    with pytest.raises(RuleViolation) as refused:
        app.tournaments.audit_manifest(tid, lambda mid: {})
    assert refused.value.reason == "RECORDS_NOT_SIGNED"


# ----- the organiser's interventions --------------------------------------------------


def _seated(app: Application, tid: str) -> tuple[str, tuple[int, ...]]:
    """Round 1 paired, its matches created and seated: table 1's match and sides."""
    app.tournaments.start(ORG, tid)
    assert manager(app).advance(tid) is None
    table = app.tournaments.repository.load(tid).state.rounds[0].tables[0]
    assert table.match_id is not None
    assert app.repository.load(table.match_id).state.phase == PLAYING
    return table.match_id, table.sides


def _refused(reason: str, call: Any, *args: Any) -> BergenError:
    with pytest.raises(BergenError) as caught:
        call(*args)
    assert caught.value.reason == reason, caught.value
    return caught.value


def _types(store: Any, tid: str) -> list[str]:
    return [e.type for e in store.read_stream(tournament_stream(tid))]


def test_a_no_show_forfeited_by_the_organiser_lets_the_tournament_go_on(
    replicas: list[Replica],
) -> None:
    (a, store, _), (b, _, _) = replicas
    tid, tokens = registered(a, 4, swiss())
    mid, (first, no_show) = _seated(a, tid)
    result = a.tournaments.settle(ORG, tid, 1, 1, FORFEIT_TABLE, 1, "did not come")
    assert (result.reason, result.forfeited_side, result.places) == ("forfeit", 1, (1, 2))
    ended = a.repository.load(mid).state.result
    assert ended is not None and (ended.cause, ended.resigned_seat) == ("resigned", 1)
    assert ended.note == "forfeited by the organiser: did not come"
    # Either replica's manager sees the same end: nothing recorded twice.
    for m in (manager(b), manager(a)):
        m.advance(tid)
    state = a.tournaments.repository.load(tid).state
    assert state.interventions == (
        Intervention(1, 1, FORFEIT_TABLE, BY_ORGANISER, no_show, "did not come"),
    )
    # The other table plays on; the next round is paired as usual.
    other = state.rounds[0].tables[1]
    assert other.match_id is not None
    seats = {}
    for entrant in other.sides:
        where = a.tournaments.get(Caller(tokens[entrant]), tid).assignment
        assert where is not None and where.seat is not None
        seats[where.seat] = tokens[entrant]
    play_out(a, other.match_id, [seats[s] for s in sorted(seats)])
    manager(a).advance(tid)
    assert a.tournaments.repository.load(tid).state.round == 2
    play_round(a, tid, tokens)
    manager(b).advance(tid)
    assert a.tournaments.repository.load(tid).state.phase == TOURNAMENT_ENDED
    types = _types(store, tid)
    assert types.count("TableSettled") == 1 and types.count("ResultRecorded") == 4
    record = b.tournaments.record(tid)
    check_tournament_record(record)
    assert record["interventions"] == [
        {
            "round": 1,
            "table": 1,
            "action": "forfeit",
            "by": "organiser",
            "entrant": no_show,
            "reason": "did not come",
        }
    ]
    assert first != no_show


def test_a_settlement_stopped_after_the_matchs_end_is_recorded_by_any_replica(
    replicas: list[Replica],
) -> None:
    (a, store, _), (b, _, _) = replicas
    tid, _ = registered(a, 4, swiss())
    mid, _ = _seated(a, tid)

    def never_played(m: Any) -> None:
        return None

    # The settlement's first step only, as if its server died right after it.
    a.commands.forfeit_side(ORG, mid, 0, "no-show", never_played)
    assert "TableSettled" not in _types(store, tid)
    manager(b).advance(tid)
    state = b.tournaments.repository.load(tid).state
    assert state.interventions[0].action == FORFEIT_TABLE
    assert state.interventions[0].note == "no-show"
    _refused("RESULT_ALREADY_RECORDED", a.tournaments.settle, ORG, tid, 1, 1, ABANDON, None, "")
    assert _types(store, tid).count("TableSettled") == 1


def test_an_abandoned_table_scores_as_abandoned_whoever_abandoned_it(
    replicas: list[Replica],
) -> None:
    (a, _, _), _ = replicas
    tid, _ = registered(a, 4, swiss())
    _seated(a, tid)
    result = a.tournaments.settle(ORG, tid, 1, 1, ABANDON, None, "power cut")
    assert (result.reason, result.places, result.match_points) == ("abandoned", (1, 1), (0.5, 0.5))
    # The match abandoned through AbandonMatch directly is an intervention too.
    second = a.tournaments.repository.load(tid).state.rounds[0].tables[1].match_id
    assert second is not None
    a.commands.abandon(ORG, second, "fire alarm")
    manager(a).advance(tid)
    state = a.tournaments.repository.load(tid).state
    assert [(i.table, i.action, i.by, i.note) for i in state.interventions] == [
        (1, ABANDON, BY_ORGANISER, "power cut"),
        (2, ABANDON, BY_ORGANISER, "fire alarm"),
    ]
    assert state.round == 2
    check_tournament_record(a.tournaments.record(tid))


def test_settle_refusals_name_their_reasons(replicas: list[Replica]) -> None:
    (a, _, _), _ = replicas
    tid, tokens = registered(a, 4, swiss())
    _refused("TOURNAMENT_NOT_STARTED", a.tournaments.settle, ORG, tid, 1, 1, ABANDON, None, "")
    a.tournaments.start(ORG, tid)
    a.tournaments.pair(tid, 1)
    # Paired, its matches not created yet.
    _refused("TABLE_NOT_READY", a.tournaments.settle, ORG, tid, 1, 1, ABANDON, None, "")
    manager(a).advance(tid)
    with pytest.raises(Unauthenticated):
        a.tournaments.settle(Caller(), tid, 1, 1, ABANDON, None, "")
    with pytest.raises(PermissionDenied):
        a.tournaments.settle(Caller(tokens[1]), tid, 1, 1, ABANDON, None, "")
    _refused("NO_SUCH_TABLE", a.tournaments.settle, ORG, tid, 1, 3, ABANDON, None, "")
    _refused("NO_SUCH_TABLE", a.tournaments.settle, ORG, tid, 2, 1, ABANDON, None, "")
    _refused("NO_SUCH_SIDE", a.tournaments.settle, ORG, tid, 1, 1, FORFEIT_TABLE, 2, "")
    table = a.tournaments.repository.load(tid).state.rounds[0].tables[0]
    assert table.match_id is not None
    match = a.repository.load(table.match_id)
    turn = match.state.turn
    assert turn is not None
    entrant = table.sides[match.state.side_of(turn)]
    tile, end = first_legal_play(match.state, turn)  # type: ignore[misc]
    a.commands.play(Caller(tokens[entrant]), table.match_id, tile, end, None, None)
    side = match.state.side_of(turn)
    _refused("SIDE_HAS_PLAYED", a.tournaments.settle, ORG, tid, 1, 1, FORFEIT_TABLE, side, "")
    with pytest.raises(InvalidArgument):
        a.tournaments.settle(ORG, tid, 1, 1, ABANDON, None, "x" * 201)
    # Ended by play: its result stands.
    play_out(a, table.match_id, _seat_tokens(a, tid, tokens, table.sides))
    _refused("MATCH_ENDED", a.tournaments.settle, ORG, tid, 1, 1, ABANDON, None, "")
    manager(a).advance(tid)
    _refused("RESULT_ALREADY_RECORDED", a.tournaments.settle, ORG, tid, 1, 1, ABANDON, None, "")
    assert a.tournaments.repository.load(tid).state.interventions == ()


def _seat_tokens(
    app: Application, tid: str, tokens: dict[int, str], sides: tuple[int, ...]
) -> list[str]:
    seats = {}
    for entrant in sides:
        where = app.tournaments.get(Caller(tokens[entrant]), tid).assignment
        assert where is not None and where.seat is not None
        seats[where.seat] = tokens[entrant]
    return [seats[s] for s in sorted(seats)]


def test_withdrawals_and_rounds_by_hand_say_who(replicas: list[Replica]) -> None:
    (a, _, _), _ = replicas
    t = a.tournaments.create(ORG, swiss(), "by hand", by_hand=True)
    tid = t.state.tournament_id
    tokens = {}
    for i in range(5):
        entrant, (token,) = a.tournaments.register(tid, (f"p{i}",), "")
        tokens[entrant] = token
    a.tournaments.withdraw(ORG, tid, 5, "disqualified")
    a.tournaments.withdraw(Caller(tokens[4]), tid, 4, "")
    a.tournaments.start(ORG, tid)
    manager(a).advance(tid)
    play_round(a, tid, {e: tok for e, tok in tokens.items() if e < 4})
    manager(a).advance(tid)
    assert a.tournaments.start_next_round(ORG, tid) == 2
    view = a.tournaments.get(Caller(), tid)
    msg = convert.tournament_view_out(
        view.record, view.tournament.state.settings, phase="running", total_rounds=2, version=1
    )
    by = {e.entrant: e.withdrawn_by for e in msg.entrants}
    assert by == {1: 0, 2: 0, 3: 0, 4: pb.ACTOR_ENTRANT, 5: pb.ACTOR_ORGANISER}
    assert [(i.action, i.by, i.round, i.note) for i in msg.interventions] == [
        (pb.INTERVENTION_ACTION_WITHDRAW, pb.ACTOR_ORGANISER, 0, "disqualified"),
        (pb.INTERVENTION_ACTION_START_ROUND, pb.ACTOR_ORGANISER, 2, ""),
    ]
    assert msg.interventions[0].entrant == 5 and not msg.interventions[0].HasField("table")
    assert not msg.cancelled


def test_a_cancelled_tournament_ends_its_watchers_and_takes_no_more_entrants(
    replicas: list[Replica],
) -> None:
    (a, store, _), (b, _, _) = replicas
    tid, tokens = registered(a, 2, swiss(1))
    shown: queue.Queue[TournamentView | None] = queue.Queue()

    def watch() -> None:
        for v in a.tournaments.watch(Caller(tokens[1]), tid, lambda: True):
            shown.put(v)
        shown.put(None)  # the stream ended

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    assert shown.get(timeout=10) is not None
    with pytest.raises(PermissionDenied):
        a.tournaments.cancel(Caller(tokens[1]), tid, "")
    a.tournaments.cancel(ORG, tid, "the hall is closed")
    last = shown.get(timeout=10)
    assert last is not None and last.tournament.state.cancelled
    assert shown.get(timeout=10) is None
    watcher.join(10)
    _refused("TOURNAMENT_CANCELLED", b.tournaments.register, tid, ("late",), "")
    _refused("TOURNAMENT_CANCELLED", a.tournaments.start, ORG, tid)
    _refused("TOURNAMENT_CANCELLED", a.tournaments.cancel, ORG, tid, "")
    assert _types(store, tid)[-2:] == ["TournamentCancelled", "TournamentEnded"]
    started, _ = registered(a, 3, swiss())
    a.tournaments.start(ORG, started)
    _refused("ALREADY_STARTED", a.tournaments.cancel, ORG, started, "")


def test_a_cancelled_tournaments_audit_pack_is_made_and_verifies(
    backend: Backend, keys: LogKeys, tmp_path: Path
) -> None:
    signer = RecordSigner(Ed25519PrivateKey.generate())
    store = open_store(backend.url, log_keys=keys)
    try:
        app = build_application(
            store, EventFeed(store), AppSettings(organiser_token=ORGANISER, signer=signer), keys
        )
        tid, _ = registered(app, 3, swiss())
        app.tournaments.cancel(ORG, tid, "nobody came")
        manifest = app.tournaments.audit_manifest(tid, lambda mid: {})
        record = app.tournaments.record(tid)
        assert played_matches(record) == [] and record["ended"] is True
        folder = tmp_path / "pack"
        write_files(folder, served_pack(record, [], manifest))
        outcome = verify_pack(folder, signer.public_key)
        assert outcome.status == ExitStatus.SUCCESS, outcome.line
        assert "cancelled" in outcome.line
    finally:
        store.close()


def test_a_tournament_record_carries_the_checkpoint_and_proof_of_its_last_event(
    backend: Backend, keys: LogKeys, tmp_path: Path
) -> None:
    signer = RecordSigner(Ed25519PrivateKey.generate())
    store = open_store(backend.url, log_keys=keys)
    try:
        tlog = TransparencyLog(store, signer, tmp_path / "checkpoint", every_s=0.0)
        tlog.open()
        settings = AppSettings(organiser_token=ORGANISER, signer=signer, tlog=tlog)
        app = build_application(store, EventFeed(store, tlog=tlog), settings, keys)
        tid, tokens = registered(app, 2, swiss(1))
        app.tournaments.start(ORG, tid)
        m = manager(app)
        assert m.advance(tid) is None
        play_round(app, tid, tokens)
        assert m.advance(tid) is None
        t = app.tournaments.repository.load(tid)
        assert t.state.phase == TOURNAMENT_ENDED
        record = app.tournaments.record(tid)
        (head,) = store.read_stream(tournament_stream(tid), t.version, limit=1)
        assert record["log"] == {"events": t.version, "head": head.hash.hex()}
        proved = record["transparency"]
        checkpoint = verify_transparency(
            proved, signer.public_key, tournament_stream(tid), t.version, head.hash
        )
        assert checkpoint.size == proved["leaf_index"] + 1  # the tree that ends with it
        assert proved["position"] == head.position
        assert app.tournaments.record(tid) == record  # the same every time: a pack hashes it
        check_tournament_record(record)
        # The audit pack, as `bergen tournament export` writes it: every record's checkpoint
        # and proof checked, the tournament's with the matches'.
        manifest = app.tournaments.audit_manifest(
            tid, lambda mid: app.queries.record(Caller(), mid)
        )
        matches = [app.queries.record(Caller(), mid) for mid in played_matches(record)]
        folder = tmp_path / "pack"
        write_files(folder, served_pack(record, matches, manifest))
        outcome = verify_pack(folder, signer.public_key)
        assert outcome.status == ExitStatus.SUCCESS, outcome.line
        assert outcome.facts["logged"] == 1 + len(matches)
        assert outcome.facts["checkpoint_size"] == checkpoint.size
        assert "every record logged in the transparency log" in outcome.line
    finally:
        store.close()


def test_an_abandoned_table_keeps_its_scores_and_places_every_side_first(
    replicas: list[Replica],
) -> None:
    (a, _, _), _ = replicas
    long = Settings(format=SWISS, seats=2, rules={"preset": "standard", "target": 500}, rounds=2)
    tid, tokens = registered(a, 4, long)
    mid, sides = _seated(a, tid)
    seats = {}
    for entrant in sides:
        where = a.tournaments.get(Caller(tokens[entrant]), tid).assignment
        assert where is not None and where.seat is not None
        seats[where.seat] = tokens[entrant]
    # Played until a hand has scored, the match far from its end.
    while not any(a.queries.get_view(Caller(), mid).scores):
        v = a.queries.get_view(Caller(), mid)
        assert v.phase == PLAYING and v.turn is not None
        caller = Caller(seats[v.turn])
        tile, end = a.queries.get_view(caller, mid).legal_plays[0]
        a.commands.play(caller, mid, tile, end, None, None)
    scores = tuple(a.queries.get_view(Caller(), mid).scores)
    result = a.tournaments.settle(ORG, tid, 1, 1, ABANDON, None, "the hall closed")
    assert (result.scores, result.places, result.margins) == (scores, (1, 1), (0, 0))
    record = a.tournaments.record(tid)
    table = record["rounds"][0]["tables"][0]
    assert table["result"]["scores"] == list(scores) and table["result"]["places"] == [1, 1]
    assert record["interventions"] == [
        {
            "round": 1,
            "table": 1,
            "action": "abandon",
            "by": "organiser",
            "entrant": None,
            "reason": "the hall closed",
        }
    ]
    check_tournament_record(record)


class Clock:
    """A clock of the test's own (Unix ms), moved by hand."""

    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


def test_the_reveal_window_closes_at_its_deadline_on_any_replica(
    backend: Backend, keys: LogKeys
) -> None:
    clock = Clock()
    stores = [open_store(backend.url, log_keys=keys) for _ in range(2)]
    try:
        feeds = [EventFeed(s) for s in stores]
        a, b = (
            build_application(s, f, AppSettings(organiser_token=ORGANISER), keys, clock)
            for s, f in zip(stores, feeds, strict=True)
        )
        t = a.tournaments.create(ORG, swiss(reveal_window=30), "reveal cup")
        tid = t.state.tournament_id
        tokens = {}
        for i in range(1, 5):
            said = commitment(f"seed {i}".encode())
            entrant, (token,) = a.tournaments.register(
                tid, (f"p{i}",), tokens=(), client_seed_commitment=said
            )
            tokens[entrant] = token
        _refused("BAD_SEED_COMMITMENT", a.tournaments.register, tid, ("x",), "", (), "A" * 64)
        _refused("REVEAL_NOT_OPEN", a.tournaments.reveal, Caller(tokens[1]), tid, 1, "seed 1")
        started = a.tournaments.start(ORG, tid).state
        assert started.reveal_deadline_ms == clock.now + 30_000
        first = TournamentManager(a.tournaments, a.work, a.repository, clock)
        assert first.advance(tid) == clock.now + 30_000  # nothing to do before the deadline
        _refused("SEED_DOES_NOT_MATCH", a.tournaments.reveal, Caller(tokens[1]), tid, 1, "x")
        _refused("NOT_THIS_ENTRANT", a.tournaments.reveal, Caller(tokens[2]), tid, 1, "seed 1")
        _refused("TOKEN_REQUIRED", a.tournaments.reveal, Caller(), tid, 1, "seed 1")
        _refused("CONTROL_CHARACTER", a.tournaments.reveal, Caller(tokens[1]), tid, 1, "a\x07")
        for i in (1, 2, 3):
            a.tournaments.reveal(Caller(tokens[i]), tid, i, f"seed {i}")
        # Sent again through the other replica: answered, nothing written.
        version = a.tournaments.repository.load(tid).version
        b.tournaments.reveal(Caller(tokens[2]), tid, 2, "seed 2")
        assert b.tournaments.repository.load(tid).version == version
        clock.now += 29_999
        assert first.advance(tid) == clock.now + 1
        # The first replica is gone; the other, started afresh, closes the window on time.
        clock.now += 1
        second = TournamentManager(b.tournaments, b.work, b.repository, clock)
        assert second.advance(tid) is None
        state = b.tournaments.repository.load(tid).state
        assert state.round == 1 and sorted(state.seeding or ()) == [1, 2, 3]
        assert state.entrants[3].withdrawn_by == "server"
        assert state.entrants[3].withdrawn_after_round == 0
        assert first.advance(tid) is None  # its own step again: the window is closed once
        types = [e.type for e in stores[0].read_stream(tournament_stream(tid))]
        assert types.count("EntrantWithdrew") == 1 and types.count("TournamentStarted") == 1
        assert types.count("RoundPaired") == 1
        _refused("REVEAL_CLOSED", a.tournaments.reveal, Caller(tokens[4]), tid, 4, "seed 4")
        record = a.tournaments.record(tid)
        assert record["entrants"][3]["withdrawn_by"] == "no_reveal"
        check_tournament_record(record)
    finally:
        for s in stores:
            s.close()
