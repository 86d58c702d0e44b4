"""The records of ended matches kept in `match_records`: made when a match ends, served by
GetRecord and ExportRecords, and never served as the server's role left them.

An attacker holding the server's database role may UPDATE that table (the server writes a
row over when it makes a record again): an edited row, one moved to another match, and one
made from a log that changed since are each made again from the events instead.
"""

from __future__ import annotations

import json
import random
import time
from typing import Any

import grpc
import pytest
from e2e.client import Client, play_to_end, seat_everyone
from e2e.refusals import refusal
from e2e.servers import ServerFarm, ServerProcess
from e2e.test_metrics import metrics_url, scrape, value

from bergen.v1 import bergen_pb2 as pb

from .conftest import Database
from .test_listing_authenticity import connected
from .test_log_authenticity import Access
from .test_read_models import run, sql, tampered_logged

WAIT_S = 30.0


def ended_match(server: ServerProcess, seed: int) -> str:
    with Client(server.target) as client:
        table = seat_everyone(client, 2)
        play_to_end([client], random.Random(seed), table)
    return table.match_id


def kept_row(database: Database, match_id: str) -> dict[str, Any] | None:
    with connected(database.server_url) as conn:
        cur = conn.execute(
            sql(database, "SELECT * FROM match_records WHERE match_id = ?"), (match_id,)
        )
        names = [d[0] for d in cur.description]
        row = cur.fetchone()
    return None if row is None else dict(zip(names, row, strict=True))


def kept_when_made(database: Database, match_id: str) -> dict[str, Any]:
    """The kept row of `match_id` once the server's recorder has written it."""
    deadline = time.monotonic() + WAIT_S
    while (row := kept_row(database, match_id)) is None:
        assert time.monotonic() < deadline, f"no record kept for {match_id}"
        time.sleep(0.1)
    return row


def served(server: ServerProcess, match_id: str) -> str:
    with Client(server.target) as client:
        reply = client.stub.GetRecord(pb.GetRecordRequest(match_id=match_id), timeout=10)
    text: str = reply.record_json
    return text


def exported(server: ServerProcess) -> dict[str, str]:
    """Every record ExportRecords gives, by match id."""
    found: dict[str, str] = {}
    token = ""
    with Client(server.target) as client:
        while True:
            page = client.stub.ExportRecords(
                pb.ExportRecordsRequest(page_size=2, page_token=token), timeout=10
            )
            assert not page.refused_match_ids
            for text in page.records_json:
                found[json.loads(text)["match_id"]] = text
            token = page.next_page_token
            if not token:
                return found


def test_a_record_is_kept_when_its_match_ends_and_served_as_made(
    farm: ServerFarm, database: Database
) -> None:
    server = farm.start(database.server_url)
    ids = [ended_match(server, seed) for seed in range(3)]
    rows = {m: kept_when_made(database, m) for m in ids}  # made without anyone asking
    assert exported(server) == {m: rows[m]["record"] for m in ids}
    for m in ids:
        assert served(server, m) == rows[m]["record"]
        record = json.loads(rows[m]["record"])
        assert record["match_id"] == m
        assert (rows[m]["events"], bytes(rows[m]["head"]).hex()) == (
            record["log"]["events"],
            record["log"]["head"],
        )
    # Made again from the events, a record is the same bytes: what a server serves when the
    # table was emptied.
    with connected(database.owner_url) as conn:
        conn.execute("DELETE FROM match_records")
    assert {m: served(server, m) for m in ids} == {m: rows[m]["record"] for m in ids}


def test_an_edited_kept_record_is_made_again(farm: ServerFarm, database: Database) -> None:
    server = farm.start(database.server_url, extra_args=["--metrics", "127.0.0.1:0"])
    match_id = ended_match(server, 7)
    honest = kept_when_made(database, match_id)["record"]
    record = json.loads(honest)
    record["result"]["scores"] = [999 for _ in record["result"]["scores"]]
    run(
        database,
        "UPDATE match_records SET record = ? WHERE match_id = ?",
        (json.dumps(record), match_id),
    )
    assert served(server, match_id) == honest
    assert exported(server)[match_id] == honest
    assert tampered_logged(server, "match_records", match_id)
    assert kept_row(database, match_id)["record"] == honest  # type: ignore[index]
    repairs = value(
        scrape(metrics_url(server)), "bergen_read_model_repairs_total", table="match_records"
    )
    assert repairs == 1


def test_a_kept_record_moved_to_another_match_is_not_served(
    farm: ServerFarm, database: Database
) -> None:
    server = farm.start(database.server_url)
    first, second = ended_match(server, 1), ended_match(server, 2)
    rows = {m: kept_when_made(database, m) for m in (first, second)}
    other = rows[first]
    run(
        database,
        "UPDATE match_records SET events = ?, head = ?, record = ?, key_id = ?, mac = ?"
        " WHERE match_id = ?",
        (other["events"], other["head"], other["record"], other["key_id"], other["mac"], second),
    )
    assert json.loads(served(server, second))["match_id"] == second
    assert served(server, second) == rows[second]["record"]
    assert tampered_logged(server, "match_records", second)


def test_a_kept_record_of_a_log_changed_since_is_not_served(
    farm: ServerFarm, database: Database
) -> None:
    """The log rewritten by someone with every right (the append-only guard off, the chain
    hashed again): the kept record pins the former head, so it is not served; made again,
    the log does not verify, and the server says so."""
    server = farm.start(database.server_url)
    match_id = ended_match(server, 3)
    kept_when_made(database, match_id)
    access = Access(database.owner_url)
    seat = next(r for r in access.rows(match_id) if r.type == "SeatTaken")
    access.rewrite(match_id, seat.seq, {**seat.payload, "name": "someone else"})
    with pytest.raises(grpc.RpcError) as caught:
        served(server, match_id)
    assert refusal(caught.value).code == grpc.StatusCode.DATA_LOSS
    with Client(server.target) as client:
        page = client.stub.ExportRecords(pb.ExportRecordsRequest(), timeout=10)
    assert list(page.refused_match_ids) == [match_id]
    assert not page.records_json
