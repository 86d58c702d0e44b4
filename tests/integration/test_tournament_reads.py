"""What a tournament costs the store and the CPU beside its matches: the manager, fed every
event, reads a seated table's match again only when its end is noted; GetTournament builds a
tournament's record once per version, whoever asks."""

from __future__ import annotations

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

from bergen.domain.state import PLAYING
from bergen.domain.tournament_engine import TournamentState
from bergen.server.identity import Caller
from bergen.server.matches import Match
from bergen.server.tournament_manager import TournamentManager


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
