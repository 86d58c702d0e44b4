"""What a tournament costs the store and the CPU beside its matches: the manager, fed every
event, reads a seated table's match again only when its end is noted; GetTournament builds a
tournament's record once per version, whoever asks, and its view message once per version;
a watcher woken by its tables' matches reads the tournament again only when it moved."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

import pytest
from test_tournament_service import (  # noqa: F401 - `keys` and `replicas` are fixtures
    ORG,
    Replica,
    keys,
    play_out,
    registered,
    replicas,
    swiss,
)

from bergen.api import convert
from bergen.domain.state import PLAYING
from bergen.domain.tournament_engine import TournamentState
from bergen.server import servicer
from bergen.server.identity import Caller
from bergen.server.matches import Match
from bergen.server.tournament_manager import TournamentManager
from bergen.server.tournaments import Tournament, TournamentView


def counting_loads(monkeypatch: pytest.MonkeyPatch, replica: Replica) -> list[str]:
    """The match ids the application's match repository reads from the store, in order."""
    app = replica[0]
    loads: list[str] = []
    load: Callable[[str], Match] = app.repository.load

    def counted(match_id: str) -> Match:
        loads.append(match_id)
        return load(match_id)

    monkeypatch.setattr(app.repository, "load", counted)
    return loads


def test_a_fed_manager_reads_a_seated_table_again_only_when_its_end_is_noted(
    replicas: list[Replica],  # noqa: F811 - the fixture
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (app, store, _), _ = replicas
    tid, tokens = registered(app, 4, swiss())
    app.tournaments.start(ORG, tid)
    m = TournamentManager(app.tournaments, app.work, app.repository)
    assert m.advance(tid, fed=True) is None
    tables = app.tournaments.repository.load(tid).state.rounds[-1].tables
    assert all(app.repository.load(t.match_id).state.phase == PLAYING for t in tables)  # type: ignore[arg-type]

    loads = counting_loads(monkeypatch, replicas[0])
    assert m.advance(tid, fed=True) is None
    assert loads == []  # both tables seen seated: neither read again

    first = tables[0].match_id
    assert first is not None
    seats = {}
    for entrant in tables[0].sides:
        a = app.tournaments.get(Caller(tokens[entrant]), tid).assignment
        assert a is not None and a.seat is not None
        seats[a.seat] = tokens[entrant]
    play_out(app, first, [seats[s] for s in sorted(seats)])
    m.note(store.read_stream(first))
    loads.clear()
    assert m.advance(tid, fed=True) is None
    assert loads == [first]  # the table that ended, and only it
    t = app.tournaments.repository.load(tid)
    assert [x.result is not None for x in t.state.rounds[-1].tables] == [True, False]


def test_get_builds_the_record_once_per_version_for_every_caller(
    replicas: list[Replica],  # noqa: F811 - the fixture
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = replicas[0][0]
    tid, tokens = registered(app, 4, swiss())
    built: list[int] = []
    record = TournamentState.record

    def counted(self: TournamentState) -> dict[str, Any]:
        built.append(len(self.entrants))
        return record(self)

    monkeypatch.setattr(TournamentState, "record", counted)
    views = [app.tournaments.get(Caller(token), tid) for token in tokens.values()]
    views.append(app.tournaments.get(Caller(), tid))
    assert built == [4]
    assert all(v.record is views[0].record for v in views)
    # A new version: built again, and shown.
    app.tournaments.register(tid, ("late",), "seed")
    v = app.tournaments.get(Caller(), tid)
    assert built == [4, 5]
    assert len(v.record["entrants"]) == 5


def test_get_reads_one_table_not_yet_created_not_every_one(
    replicas: list[Replica],  # noqa: F811 - the fixture
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = replicas[0][0]
    tid, _ = registered(app, 8, swiss())
    app.tournaments.start(ORG, tid)
    app.tournaments.pair(tid, 1)  # paired, and no manager has created its 4 matches yet
    loads = counting_loads(monkeypatch, replicas[0])
    v = app.tournaments.get(Caller(), tid)
    assert v.live_scores == {}
    assert len(loads) == 1
    # Created in table order by the manager: each then shows its scores.
    m = TournamentManager(app.tournaments, app.work, app.repository)
    assert m.advance(tid) is None
    v = app.tournaments.get(Caller(), tid)
    tables = v.tournament.state.rounds[-1].tables
    assert sorted(v.live_scores) == sorted(t.match_id for t in tables)  # type: ignore[type-var]


def test_the_view_message_is_translated_once_per_version_and_shows_each_callers_live_scores(
    replicas: list[Replica],  # noqa: F811 - the fixture
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = replicas[0][0]
    tid, _ = registered(app, 4, swiss())
    app.tournaments.start(ORG, tid)
    app.tournaments.pair(tid, 1)
    assert TournamentManager(app.tournaments, app.work, app.repository).advance(tid) is None
    v = app.tournaments.get(Caller(), tid)
    tables = v.tournament.state.rounds[-1].tables
    live = {t.match_id: (len(tables) + i, i) for i, t in enumerate(tables) if t.match_id}
    assert len(live) == 2

    def whole(view: TournamentView) -> Any:
        t = view.tournament
        return convert.tournament_view_out(
            view.record,
            t.state.settings,
            phase=t.state.phase,
            total_rounds=t.state.total_rounds,
            version=t.version,
            by_hand=t.by_hand,
            live_scores=view.live_scores,
        )

    translated: list[int] = []
    translate = convert.tournament_view_out

    def counted(*args: Any, **kw: Any) -> Any:
        translated.append(kw["version"])
        return translate(*args, **kw)

    monkeypatch.setattr(convert, "tournament_view_out", counted)
    views = [
        TournamentView(v.tournament, v.record, scores)
        for scores in ({}, live, {next(iter(live)): (7, 7)}, {})
    ]
    shown = [servicer._tournament_out(x)[0] for x in views]
    assert translated == [v.tournament.version]  # once, for every caller of this version
    monkeypatch.setattr(convert, "tournament_view_out", translate)
    for x, message in zip(views, shown, strict=True):
        assert message == whole(x)  # a caller's live scores never reach another's view
    assert [list(t.live_scores) for t in shown[1].rounds[-1].tables] == [[2, 0], [3, 1]]


def test_a_watcher_woken_by_its_tables_reads_the_tournament_again_only_when_it_moved(
    replicas: list[Replica],  # noqa: F811 - the fixture
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = replicas[0][0]
    tid, tokens = registered(app, 4, swiss())
    app.tournaments.start(ORG, tid)
    app.tournaments.pair(tid, 1)
    m = TournamentManager(app.tournaments, app.work, app.repository)
    assert m.advance(tid) is None
    first = app.tournaments.repository.load(tid).state.rounds[-1].tables[0]
    assert first.match_id is not None
    seats = {}
    for entrant in first.sides:
        a = app.tournaments.get(Caller(tokens[entrant]), tid).assignment
        assert a is not None and a.seat is not None
        seats[a.seat] = tokens[entrant]

    repo = app.tournaments.repository
    reads: list[int] = []
    load: Callable[[str], Tournament] = repo.load

    def counted(tournament_id: str) -> Tournament:
        if threading.current_thread().name == "watcher":
            reads.append(len(reads))
        return load(tournament_id)

    monkeypatch.setattr(repo, "load", counted)
    shown: queue.Queue[TournamentView | None] = queue.Queue()
    stop = threading.Event()

    def watch() -> None:
        for v in app.tournaments.watch(Caller(), tid, lambda: not stop.is_set()):
            shown.put(v)
        shown.put(None)

    watcher = threading.Thread(target=watch, name="watcher")
    watcher.start()
    try:
        v = shown.get(timeout=10)
        assert v is not None and len(reads) == 1
        version = v.tournament.version
        play_out(app, first.match_id, [seats[s] for s in sorted(seats)])
        final = tuple(app.repository.load(first.match_id).state.scores)
        while v.live_scores.get(first.match_id) != final:  # each hand's end shown
            v = shown.get(timeout=10)
            assert v is not None and v.tournament.version == version
        assert len(reads) == 1  # the tournament did not move: not read again
        assert m.advance(tid) is None  # the result recorded: the tournament moved
        v = shown.get(timeout=10)
        assert v is not None and v.tournament.version == version + 1
        assert v.tournament.state.rounds[-1].tables[0].result is not None
        assert len(reads) == 2
    finally:
        stop.set()
        watcher.join(10)
