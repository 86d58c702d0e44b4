"""Tampering with stored events behind the server's back: `bergen verify` names the seq.

Acting as a database superuser who turns the append-only guards off (PostgreSQL: `ALTER TABLE
events DISABLE TRIGGER ALL`, as the guards are `ENABLE ALWAYS`; SQLite: `DROP TRIGGER`), each
case changes one finished match: one event's payload changed, one deleted, one inserted (a
forged event, properly chained), two swapped, one changed with its hash recomputed, and the
last event changed with its hash recomputed. The guards are put back afterwards. A server that
started after the tampering (so that it folds the tampered rows) and the server that played
the matches (which holds them folded in its cache) are both asked; `bergen verify <match-id>`
must exit 6 and name the changed seq, and an untouched match still verifies.
"""

from __future__ import annotations

import importlib
import json
import random
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import psycopg
import pytest

from bergen.api.chain import (
    canonical_json,
    content_bytes,
    event_hash,
    metadata_json,
    new_salt,
    parse_metadata,
)
from bergen.api.exit_status import ExitStatus

from .client import Client, play_to_end, seat_everyone
from .servers import ServerFarm, ServerProcess
from .test_verify import run_verify, verdict_line, verify_here

SHIFT = 1_000_000
"""Seqs are moved out of the way through here: (stream, seq) is unique at every row."""


class Row(NamedTuple):
    seq: int
    type: str
    schema_version: int
    payload: dict[str, Any]
    metadata: str
    prev_hash: bytes
    hash: bytes
    salt: bytes


def rehash(match_id: str, seq: int, row: Row, payload: dict[str, Any], prev: bytes) -> bytes:
    """The hash an event with this content would be written with (server/store/chain)."""
    content = content_bytes(
        match_id,
        seq,
        row.type,
        row.schema_version,
        canonical_json(payload, "payload"),
        metadata_json(parse_metadata(row.metadata)),
    )
    return event_hash(prev, row.salt, content)


class Tamperer:
    """Direct SQL on the events table with the append-only guards off."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.sqlite = url.startswith("sqlite")

    def _connect(self) -> Any:
        if self.sqlite:
            return sqlite3.connect(self.url.removeprefix("sqlite:///"), isolation_level=None)
        return psycopg.connect(self.url)

    def _sql(self, statement: str) -> str:
        if self.sqlite:
            return statement.replace("::json", "").replace("%s", "?")
        return statement

    def rows(self, match_id: str) -> list[Row]:
        cast = "" if self.sqlite else "::text"
        with self._connect() as conn:
            found = conn.execute(
                self._sql(
                    f"SELECT seq, type, schema_version, payload{cast}, metadata{cast},"
                    " prev_hash, hash, salt FROM events WHERE stream_id = %s ORDER BY seq"
                ),
                (match_id,),
            ).fetchall()
        return [
            Row(r[0], r[1], r[2], json.loads(r[3]), r[4], bytes(r[5]), bytes(r[6]), bytes(r[7]))
            for r in found
        ]

    def update_refused(self, match_id: str) -> bool:
        """Whether the guards refuse an UPDATE right now."""
        conn = self._connect()
        try:
            conn.execute(
                self._sql("UPDATE events SET type = type WHERE stream_id = %s AND seq = 1"),
                (match_id,),
            )
        except (psycopg.Error, sqlite3.Error) as e:
            return "append-only" in str(e)
        finally:
            if not self.sqlite:
                conn.rollback()
            conn.close()
        return False

    def run(self, *statements: tuple[str, tuple[Any, ...]]) -> None:
        """Run `statements` in one transaction with the guards off, and put them back."""
        if self.sqlite:
            guards = importlib.import_module("bergen.migrations.versions.0001_events")
            conn = self._connect()
            try:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("DROP TRIGGER events_no_update")
                conn.execute("DROP TRIGGER events_no_delete")
                for sql, params in statements:
                    conn.execute(self._sql(sql), params)
                for guard in guards._SQLITE_GUARDS:
                    conn.execute(guard)
                conn.execute("COMMIT")
            finally:
                conn.close()
            return
        with psycopg.connect(self.url) as conn, conn.transaction():
            conn.execute("ALTER TABLE events DISABLE TRIGGER ALL")
            for sql, params in statements:
                conn.execute(sql, params)
            conn.execute("ALTER TABLE events ENABLE ALWAYS TRIGGER events_no_update_delete")
            conn.execute("ALTER TABLE events ENABLE ALWAYS TRIGGER events_no_truncate")

    # one method per kind of tampering: each returns the seq that must be named

    def change_payload(self, match_id: str, rows: list[Row]) -> int:
        row = _middle_play(rows)
        payload = {**row.payload, "tile": _other_tile(row.payload["tile"])}
        self.run(
            (
                "UPDATE events SET payload = %s::json WHERE stream_id = %s AND seq = %s",
                (json.dumps(payload), match_id, row.seq),
            )
        )
        return row.seq

    def change_payload_and_hash(self, match_id: str, rows: list[Row]) -> int:
        row = _middle_play(rows)
        payload = {**row.payload, "tile": _other_tile(row.payload["tile"])}
        new_hash = rehash(match_id, row.seq, row, payload, row.prev_hash)
        self.run(
            (
                "UPDATE events SET payload = %s::json, hash = %s WHERE stream_id = %s AND seq = %s",
                (json.dumps(payload), new_hash, match_id, row.seq),
            )
        )
        return row.seq

    def change_last_and_hash(self, match_id: str, rows: list[Row]) -> int:
        row = rows[-1]
        assert row.type == "SeedRevealed"
        payload = {"server_seed": "ab" * 32}
        new_hash = rehash(match_id, row.seq, row, payload, row.prev_hash)
        self.run(
            (
                "UPDATE events SET payload = %s::json, hash = %s WHERE stream_id = %s AND seq = %s",
                (json.dumps(payload), new_hash, match_id, row.seq),
            )
        )
        return row.seq

    def delete(self, match_id: str, rows: list[Row]) -> int:
        seq = _middle_play(rows).seq
        self.run(("DELETE FROM events WHERE stream_id = %s AND seq = %s", (match_id, seq)))
        return seq

    def insert(self, match_id: str, rows: list[Row]) -> int:
        """A forged pass at seq k, chained to seq k - 1; the events from k move up one."""
        at = _middle_play(rows)
        before = rows[at.seq - 2]
        forged = Row(
            at.seq,
            "Passed",
            1,
            {"hand": at.payload["hand"], "seat": at.payload["seat"]},
            before.metadata,
            before.hash,
            b"",
            new_salt(),
        )
        forged_hash = rehash(match_id, at.seq, forged, forged.payload, before.hash)
        self._insert(match_id, forged, forged_hash, *_move(match_id, at.seq, 1))
        return at.seq

    def append(self, match_id: str, rows: list[Row]) -> int:
        """A forged pass after the last event, chained to it."""
        last = rows[-1]
        hand = max(r.payload["hand"] for r in rows if r.type == "TilePlayed")
        forged = Row(
            last.seq + 1, "Passed", 1, {"hand": hand, "seat": 0}, last.metadata, last.hash,
            b"", new_salt(),
        )  # fmt: skip
        self._insert(
            match_id, forged, rehash(match_id, forged.seq, forged, forged.payload, last.hash)
        )
        return forged.seq

    def _insert(self, match_id: str, row: Row, hash_: bytes, *before: Any) -> None:
        position = ", position" if self.sqlite else ""
        position_value = ", (SELECT max(position) + 1 FROM events)" if self.sqlite else ""
        self.run(
            *before,
            (
                "INSERT INTO events (stream_id, seq, type, schema_version, payload, metadata,"
                f" prev_hash, hash, salt{position}) VALUES (%s, %s, %s, %s, %s::json, %s::json,"
                f" %s, %s, %s{position_value})",
                (
                    match_id,
                    row.seq,
                    row.type,
                    row.schema_version,
                    json.dumps(row.payload),
                    row.metadata,
                    row.prev_hash,
                    hash_,
                    row.salt,
                ),
            ),
        )

    def swap(self, match_id: str, rows: list[Row]) -> int:
        seq = _middle_play(rows).seq
        where = "WHERE stream_id = %s AND seq = %s"
        self.run(
            (f"UPDATE events SET seq = {SHIFT} {where}", (match_id, seq)),
            (f"UPDATE events SET seq = %s {where}", (seq, match_id, seq + 1)),
            (f"UPDATE events SET seq = %s {where}", (seq + 1, match_id, SHIFT)),
        )
        return seq


def _move(match_id: str, from_seq: int, by: int) -> list[tuple[str, tuple[Any, ...]]]:
    return [
        (
            f"UPDATE events SET seq = seq + {SHIFT} WHERE stream_id = %s AND seq >= %s",
            (match_id, from_seq),
        ),
        (
            f"UPDATE events SET seq = seq - {SHIFT} + %s WHERE stream_id = %s AND seq >= {SHIFT}",
            (by, match_id),
        ),
    ]


def _middle_play(rows: list[Row]) -> Row:
    plays = [r for r in rows if r.type == "TilePlayed" and r.payload["end"] is not None]
    return plays[len(plays) // 2]


def _other_tile(tile: str) -> str:
    return "6-6" if tile != "6-6" else "0-0"


CASES: dict[str, Callable[[Tamperer, str, list[Row]], int]] = {
    "payload changed": Tamperer.change_payload,
    "event deleted": Tamperer.delete,
    "event inserted": Tamperer.insert,
    "event appended after the end": Tamperer.append,
    "two events swapped": Tamperer.swap,
    "payload changed and its hash recomputed": Tamperer.change_payload_and_hash,
    "last event changed and its hash recomputed": Tamperer.change_last_and_hash,
}
SQLITE_CASES = ("payload changed", "event deleted", "payload changed and its hash recomputed")


@dataclass
class Tampered:
    """Matches played, then tampered with one case each; `fresh` started afterwards."""

    player: ServerProcess
    fresh: ServerProcess
    expected: dict[str, tuple[str, int]]
    untouched: str


# The servers here run without the transparency log: with it, a server refuses the whole log
# once a row it put in its tree is rewritten (`security/test_rollback.py`), before `verify`
# could name the seq. What is tested here is the layer beneath: the chain and authenticators.
NO_TLOG = ("--no-transparency-log",)


def _tampered(farm: ServerFarm, url: str, cases: tuple[str, ...], seed: int) -> Tampered:
    player = farm.start(url, name="player", extra_args=NO_TLOG)
    rng = random.Random(seed)
    tamperer = Tamperer(url)
    with Client(player.target) as client:
        ids = []
        for i in range(len(cases) + 1):
            table = seat_everyone(client, 2 + i % 3)
            play_to_end([client], rng, table)
            ids.append(table.match_id)
            client.record(table.match_id)  # the player server folds and caches it
    assert tamperer.update_refused(ids[0]), "the append-only guards are not in place"
    expected = {}
    for case, match_id in zip(cases, ids, strict=False):
        seq = CASES[case](tamperer, match_id, tamperer.rows(match_id))
        expected[case] = (match_id, seq)
    assert tamperer.update_refused(ids[0]), "the guards were not put back"
    fresh = farm.start(url, name="fresh", extra_args=NO_TLOG)
    return Tampered(player, fresh, expected, ids[-1])


@pytest.fixture(scope="module")
def pg_tampered(module_farm: ServerFarm, module_pg_database: str) -> Iterator[Tampered]:
    yield _tampered(module_farm, module_pg_database, tuple(CASES), 21)


@pytest.fixture(scope="module")
def sqlite_tampered(module_farm: ServerFarm, module_sqlite_url: str) -> Iterator[Tampered]:
    yield _tampered(module_farm, module_sqlite_url, SQLITE_CASES, 22)


def _check_named(tampered: Tampered, case: str, capsys: pytest.CaptureFixture[str]) -> None:
    match_id, seq = tampered.expected[case]
    # A server that folded the tampered rows when it started, asked by a new process.
    code, out, err = run_verify(match_id, "--server", tampered.fresh.target)
    line = verdict_line(out)
    assert code == ExitStatus.INVALID, (out, err)
    assert line.startswith(f"REJECTED: seq {seq}: "), line
    # The server that played the match, with the untampered events folded in its cache.
    code, out, err = verify_here(capsys, match_id, "--server", tampered.player.target)
    assert code == ExitStatus.INVALID, (out, err)
    assert verdict_line(out).startswith(f"REJECTED: seq {seq}: "), out


@pytest.mark.postgres
@pytest.mark.parametrize("case", CASES)
def test_tampering_on_postgresql_is_caught_and_named_by_seq(
    pg_tampered: Tampered, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _check_named(pg_tampered, case, capsys)


@pytest.mark.parametrize("case", SQLITE_CASES)
def test_tampering_on_sqlite_is_caught_and_named_by_seq(
    sqlite_tampered: Tampered, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _check_named(sqlite_tampered, case, capsys)


@pytest.mark.parametrize(
    "backend", [pytest.param("postgres", marks=pytest.mark.postgres), "sqlite"]
)
def test_an_untouched_match_beside_the_tampered_ones_verifies(
    request: pytest.FixtureRequest, backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    tampered: Tampered = request.getfixturevalue(
        f"{'pg' if backend == 'postgres' else 'sqlite'}_tampered"
    )
    code, out, err = run_verify(tampered.untouched, "--server", tampered.fresh.target)
    assert code == ExitStatus.SUCCESS, (out, err)
    assert verdict_line(out).startswith(f"OK: match {tampered.untouched}, ")
    code, out, _ = verify_here(capsys, tampered.untouched, "--server", tampered.player.target)
    assert code == ExitStatus.SUCCESS, out
