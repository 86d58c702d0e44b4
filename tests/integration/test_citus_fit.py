"""What the PostgreSQL store asks of the `events` table fits a table distributed by stream id.

Every SQL statement the store sends is captured (at psycopg's cursor, in the process serving)
while a match is created, played, watched, replayed, listed, recorded and audited, and a
tournament is created, filled by bots, played to its end and read. Each statement on `events`
must be one of:

- an INSERT (its rows carry their stream id: routed to one shard);
- a read naming one stream (`stream_id = %s` in its WHERE: one shard);
- the global reader (`read_all` / `head_position`: by transaction and position, every shard);
- the listing of stream ids (`list_streams`: grouped by the distribution column, every shard);
- the listing's audit for rows deleted behind the server's back (the matches opened that it
  does not list: every shard, at start and every five minutes).

The last three are what a distributed table would change (docs/operations.md, "Past one
PostgreSQL primary").
"""

from __future__ import annotations

import re
import subprocess
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from e2e.client import Client, bearer, play_to_end, rule_options, seat_everyone
from e2e.servers import bergen_command

from bergen.server.bootstrap import Secrets, create_server
from bergen.server.config import Config
from bergen.server.keys import LogKeys
from bergen.server.lifecycle import Running
from bergen.server.store import postgres
from bergen.v1 import bergen_pb2 as pb

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(300)]

ORGANISER = "bgo_" + "Zq8w-Xv3_Tn7Ry1Lp5Ks9Jd2Hf6Gb4Mc0Na8Ue3"
ORG = bearer(ORGANISER)

_LITERAL = re.compile(r"'[^']*'")
_ON_EVENTS = re.compile(r"\bevents\b", re.IGNORECASE)
_KINDS = (
    ("insert", re.compile(r"^INSERT INTO events\b", re.IGNORECASE)),
    ("one stream", re.compile(r"\bFROM events WHERE stream_id = %s", re.IGNORECASE)),
    ("global reader", re.compile(r"\bFROM events\b.*\bORDER BY (tx_id|e\.tx_id)\b", re.I)),
    ("global reader", re.compile(r"\bFROM events WHERE position = %s", re.IGNORECASE)),
    ("stream listing", re.compile(r"\bFROM events WHERE stream_id > %s GROUP BY stream_id\b")),
    # A listing page's check that each row is not older than its events: correlated on the
    # row's match id, the distribution column (one shard a row, co-located).
    ("one stream", re.compile(r"\bFROM events n WHERE n\.stream_id = m\.match_id\b")),
    # The listing's audit for deleted rows (at start and every five minutes): every shard.
    ("listing audit", re.compile(r"\bFROM events e WHERE e\.seq = 1 AND e\.type = ")),
)


def kind_of(sql: str) -> str | None:
    """What a statement on `events` is; None when it is on no `events` table."""
    text = " ".join(sql.split())
    if not _ON_EVENTS.search(_LITERAL.sub("''", text)):  # a table, not a name in a string
        return None
    for kind, pattern in _KINDS:
        if pattern.search(text):
            return kind
    return "unfit"


class Capture:
    """Every statement sent through psycopg cursors while installed."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.statements: list[str] = []

    def note(self, query: Any) -> None:
        text = query if isinstance(query, str) else query.as_string(None)  # sql.Composed
        with self.lock:
            self.statements.append(text)


@pytest.fixture
def capture(monkeypatch: pytest.MonkeyPatch) -> Capture:
    cap = Capture()
    execute, executemany = psycopg.Cursor.execute, psycopg.Cursor.executemany

    def capturing_execute(self: psycopg.Cursor[Any], query: Any, *a: Any, **kw: Any) -> Any:
        cap.note(query)
        return execute(self, query, *a, **kw)

    def capturing_executemany(self: psycopg.Cursor[Any], query: Any, *a: Any, **kw: Any) -> Any:
        cap.note(query)
        return executemany(self, query, *a, **kw)

    monkeypatch.setattr(psycopg.Cursor, "execute", capturing_execute)
    monkeypatch.setattr(psycopg.Cursor, "executemany", capturing_executemany)
    # The store's append sends its INSERT straight to libpq, past the cursors.
    insert = postgres._insert

    def capturing_insert(conn: Any, prepared: Any, values: Any, n: int, *a: Any) -> Any:
        cap.note(postgres._insert_statement(n)[1].decode())
        return insert(conn, prepared, values, n, *a)

    monkeypatch.setattr(postgres, "_insert", capturing_insert)
    return cap


@pytest.fixture
def serving(pg_database: str) -> Iterator[Running]:
    running = create_server(
        Config(listen="127.0.0.1:0", database_url=pg_database),
        Secrets(LogKeys.generate(), organiser_token=ORGANISER),
    )
    try:
        yield running
    finally:
        running.stop(1)


def test_every_statement_on_events_names_its_stream_or_is_the_global_reader(
    capture: Capture, serving: Running
) -> None:
    import random

    target = f"127.0.0.1:{serving.port}"
    with Client(target) as client:
        table = seat_everyone(client, 2)
        watch = client.watch(table.match_id, timeout=60)
        play_to_end([client], random.Random(3), table)
        assert len(list(watch)) > 1
        client.replay(table.match_id)
        client.replay(table.match_id, table.tokens[0], after_seq=3)
        client.record(table.match_id)
        client.stub.GetAuditLog(pb.GetAuditLogRequest(match_id=table.match_id), timeout=20)
        client.stub.ListMatches(pb.ListMatchesRequest(page_size=10), timeout=20)

        created = client.stub.CreateTournament(
            pb.CreateTournamentRequest(
                name="citus cup",
                settings=pb.TournamentSettings(
                    format=pb.TOURNAMENT_FORMAT_SWISS,
                    seats=2,
                    preset=pb.PRESET_STANDARD,
                    options=rule_options(target=3),
                    rounds=2,
                ),
            ),
            metadata=ORG,
        )
        tid = created.tournament_id
        bots = subprocess.Popen(
            [*bergen_command(), "bots", "--server", target, "--tournament", tid,
             "--entrants", "4", "--policy", "greedy", "--seed", "citus", "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        try:
            stream = client.stub.WatchTournament(pb.WatchTournamentRequest(tournament_id=tid))
            for reply in stream:
                if len(reply.tournament.entrants) >= 4:
                    stream.cancel()
                    break
            client.stub.StartTournament(pb.StartTournamentRequest(tournament_id=tid), metadata=ORG)
            out, err = bots.communicate(timeout=240)
        finally:
            if bots.poll() is None:
                bots.kill()
                bots.communicate()
        assert bots.returncode == 0, err + out
        got = client.stub.GetTournament(pb.GetTournamentRequest(tournament_id=tid))
        assert got.tournament.phase == pb.TOURNAMENT_PHASE_ENDED
        client.stub.GetTournamentRecord(pb.GetTournamentRecordRequest(tournament_id=tid))
        client.stub.ListTournaments(pb.ListTournamentsRequest(), timeout=20)

    with capture.lock:
        statements = list(capture.statements)
    kinds = Counter(k for k in map(kind_of, statements) if k is not None)
    unfit = sorted({" ".join(s.split()) for s in statements if kind_of(s) == "unfit"})
    assert not unfit, "statements on events that name no stream:\n" + "\n".join(unfit)
    assert kinds["insert"] > 0 and kinds["one stream"] > 0 and kinds["global reader"] > 0
    print(f"\nstatements on events while a match and a tournament were played: {dict(kinds)}")


def test_the_classifier_tells_a_statement_that_names_no_stream() -> None:
    assert kind_of("SELECT count(*) FROM events") == "unfit"
    assert kind_of("SELECT * FROM events WHERE type = %s") == "unfit"
    assert kind_of("SELECT * FROM events WHERE stream_id = %s AND seq >= %s") == "one stream"
    assert kind_of("INSERT INTO events (stream_id) VALUES (%s)") == "insert"
    assert kind_of("SELECT * FROM match_list WHERE match_id = %s") is None
    assert kind_of("SELECT has_table_privilege('events', 'INSERT')") is None
