"""The web replay's analysis: asked for once, worked out in the gateway's own processes,
read back, kept through a restart, refused for a live match and limited per client; the
page draws the winning chances, marks the decisions and gives each seat's accuracy."""

from __future__ import annotations

import http.client
import json
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e.client import Client, play_random_move, seat_everyone
from e2e.servers import ServerFarm, ServerProcess

from bergen.v1 import bergen_pb2 as pb

from .browsing import browser, page, shoot, wait_js
from .gateway import Gateway, start_gateway

__all__ = ["browser", "page"]


def post(gw: Gateway, path: str) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=20)
    try:
        conn.request("POST", path, body=b"", headers={"accept": "application/json"})
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        conn.close()


def played(server: ServerProcess, seed: int, to_end: bool = True) -> str:
    rng = random.Random(seed)
    with Client(server.target) as client:
        table = seat_everyone(client, 2, name="Analysed", target=10)
        version = table.version
        for _ in range(10_000):
            move = play_random_move([client], rng, table, version)
            version = move.response.view.version
            if not to_end or move.response.view.phase == pb.PHASE_ENDED:
                return table.match_id
    raise AssertionError("the match did not end")


def analysis_of(gw: Gateway, match_id: str, timeout: float = 180.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        status, body, headers = gw.get(f"/api/matches/{match_id}/analysis")
        if status == 200:
            found: dict[str, Any] = body["analysis"]
            return found
        assert status == 202 and headers.get("retry-after"), (status, body)
        assert time.monotonic() < deadline, "the analysis took too long"
        time.sleep(0.5)


@pytest.fixture(scope="module")
def own_gateway(server: ServerProcess, module_farm: ServerFarm) -> Iterator[Gateway]:
    """A gateway of this module's (its clients' limits its own), its state kept in a folder
    a restart is given again."""
    state = module_farm.workdir / "analysis-state"
    gw = start_gateway(server.target, module_farm.workdir, state=state)
    yield gw
    gw.stop()


def test_an_analysis_is_asked_for_worked_out_and_read(
    own_gateway: Gateway, server: ServerProcess, module_farm: ServerFarm
) -> None:
    gw = own_gateway
    match_id = played(server, 1)
    assert gw.get(f"/api/matches/{match_id}/analysis")[0] == 404  # reading starts nothing
    status, body = post(gw, f"/api/matches/{match_id}/analysis")
    assert status == 202 and body["state"] == "pending"
    a = analysis_of(gw, match_id)
    assert a["engine"] == "bergen-analysis/1" and a["decisions"]
    _, replay, _ = gw.get(f"/api/matches/{match_id}/replay")
    by_seq = {int(e["seq"]): e for e in replay["events"]}
    for d in a["decisions"]:
        played_event = by_seq[d["seq"]]["tile_played"]
        assert int(played_event.get("seat", 0)) == d["seat"]
        assert len(d["options"]) > 1 and d["mark"] in (None, "inaccuracy", "mistake", "blunder")
    assert len(a["accuracy"]) == 2 and len(a["pars"]) >= 1
    # Asked again: answered from what was kept, nothing worked out twice.
    assert post(gw, f"/api/matches/{match_id}/analysis") == (200, {"state": "done", "analysis": a})
    # A restarted gateway, given the same state folder, serves it at once.
    gw.stop()
    again = start_gateway(
        server.target, module_farm.workdir, state=module_farm.workdir / "analysis-state"
    )
    try:
        status, body, _ = again.get(f"/api/matches/{match_id}/analysis")
        assert status == 200 and body["analysis"] == a
    finally:
        again.stop()


def test_a_live_match_is_not_analysed_and_a_client_is_limited(
    server: ServerProcess, module_farm: ServerFarm, tmp_path: Path
) -> None:
    gw = start_gateway(server.target, module_farm.workdir, state=tmp_path / "state")
    try:
        live = played(server, 2, to_end=False)
        path = f"/api/matches/{live}/analysis"
        for _ in range(3):
            status, body = post(gw, path)
            assert status == 409 and body["code"] == "MATCH_NOT_ENDED", body
        status, body = post(gw, path)
        assert status == 429 and body["code"] == "CLIENT_LIMIT", body
        assert gw.get(path)[0] == 404
        assert post(gw, "/api/matches/not%20an%20id/analysis")[0] in (400, 404)
    finally:
        gw.stop()


def test_the_replay_page_draws_the_chances_marks_the_decisions_and_gives_accuracy(
    gateway: Gateway, server: ServerProcess, page: Any
) -> None:
    match_id = played(server, 3)
    page.goto(f"{gateway.base}/replay?id={match_id}")
    wait_js(page, "() => !document.querySelector('#analysis-section').hidden")
    wait_js(page, "() => !document.querySelector('#analyse').disabled")
    page.click("#analyse")
    wait_js(page, "() => document.body.dataset.analysed === '1'", timeout=180)
    a = analysis_of(gateway, match_id)
    decisions = a["decisions"]
    assert page.get_attribute("#chances-graph", "data-points") == str(len(decisions))
    judged = page.eval_on_selector_all("#log li[data-judged]", "els => els.length")
    assert judged == len(decisions)
    marked = [d for d in decisions if d["mark"]]
    shown = page.eval_on_selector_all("#log li .mark", "els => els.map(e => e.textContent)")
    assert shown == [d["mark"] for d in marked]
    rows = page.eval_on_selector_all("#accuracy tbody tr", "els => els.length")
    assert rows == 2
    assert page.eval_on_selector_all("#pars tbody tr", "els => els.length") == len(a["pars"])
    # The best option is said on focus of a decision's step.
    first = decisions[0]
    page.focus(f"#log li[data-seq='{first['seq']}'] a")
    assert page.is_visible(f"#log li[data-seq='{first['seq']}'] .best")
    shoot(page, "replay-analysis")
