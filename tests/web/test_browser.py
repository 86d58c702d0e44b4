"""The site in a real browser: headless Chromium (Debian's, launched by Playwright from PyPI
with `executable_path`) against a real `bergen serve` (PostgreSQL) and a real `bergen web`.

A spectator page follows a match played to its end, every play appearing within a second, and
a reload resumes the stream with no event missed or repeated; a replay steps forward and back
by keys and buttons; a tournament page's standings change as rounds end. Screenshots of the
three pages at phone and desktop widths go to build/screenshots/. A clocked match's page shows
each seat's clock, the running one ticking down between events and passing with the turn.

Skipped (saying why) without /usr/bin/chromium or playwright, unless BERGEN_REQUIRE_BROWSER=1
(tests/web/browsing.py).
"""

from __future__ import annotations

import io
import random
import re
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest
from e2e.client import Client, bearer, play_random_move, rule_options, seat_everyone
from e2e.servers import ServerProcess
from e2e.test_bots_tournament import bots, start_when_filled

from bergen.api.exit_status import ExitStatus
from bergen.cli_client.verify import verify_pack
from bergen.v1 import bergen_pb2 as pb

from .browsing import browser, page, shoot, wait_js
from .conftest import ORGANISER_TOKEN
from .gateway import Gateway

__all__ = ["browser", "page"]

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(300)]

PLAY_SHOWN_S = 30.0
"""A bound on waiting for a play to show, not a latency goal: how fast spectators see plays
is the web benchmark's figure (a timed test fails on a loaded machine, not on slow code)."""


def log_seqs(pg: Any) -> list[int]:
    return [
        int(s) for s in pg.eval_on_selector_all("#log li", "els => els.map(e => e.dataset.seq)")
    ]


def test_spectator_page_follows_a_match_to_its_end_and_resumes_after_reload(
    server: ServerProcess, gateway: Gateway, page: Any
) -> None:
    rng = random.Random(21)
    with Client(server.target) as client:
        table = seat_everyone(client, 2, name="Final table", target=15)
        match = table.match_id
        page.goto(f"{gateway.base}/match?id={match}")
        wait_js(page, "() => document.querySelectorAll('#log li').length > 0")
        assert "playing" in page.inner_text("#status")
        names = page.inner_text("#seats")
        assert "player 0" in names and "player 1" in names
        version = table.version
        moves = 0
        while True:
            move = play_random_move([client], rng, table, version)
            moves += 1
            played = move.response.events
            version = move.response.view.version
            for e in played:
                if e.WhichOneof("body") == "tile_played":
                    page.wait_for_selector(
                        f'#log li[data-seq="{e.seq}"]', timeout=PLAY_SHOWN_S * 1000
                    )
            if moves == 6:
                # The line as drawn: one labelled tile per tile of the spectator's view.
                wait_js(
                    page,
                    f"() => document.querySelectorAll('ol.line svg.tile').length === "
                    f"{len(client.view(match).line)}",
                )
                labels = page.eval_on_selector_all(
                    "ol.line svg.tile", "els => els.map(e => e.getAttribute('aria-label'))"
                )
                assert labels and all(re.fullmatch(r"[0-6]-[0-6]", x) for x in labels)
                shoot(page, "match")
                page.reload()
                wait_js(
                    page,
                    f"() => document.querySelector('#log li:last-child')?.dataset.seq >= {version}",
                )
                assert log_seqs(page) == list(range(1, len(log_seqs(page)) + 1))
            if move.response.view.phase == pb.PHASE_ENDED:
                break
        page.wait_for_selector("body[data-ended='1']", timeout=5000)
        total = len(client.replay(match).events)
    # Every event once, in order, across the reload.
    assert log_seqs(page) == list(range(1, total + 1))
    assert "Ended" in page.inner_text("#status")
    assert page.eval_on_selector_all("#hands svg.tile", "els => els.length") > 0


@pytest.fixture
def ended_match(server: ServerProcess) -> str:
    rng = random.Random(3)
    with Client(server.target) as client:
        table = seat_everyone(client, 2, name="Replayed", target=15)
        version = table.version
        while True:
            move = play_random_move([client], rng, table, version)
            version = move.response.view.version
            if move.response.view.phase == pb.PHASE_ENDED:
                return table.match_id


def step(pg: Any) -> int:
    return int(pg.eval_on_selector("body", "b => b.dataset.step"))


def test_replay_steps_forward_and_back(gateway: Gateway, ended_match: str, page: Any) -> None:
    page.goto(f"{gateway.base}/replay?id={ended_match}")
    page.wait_for_selector("body[data-step]")
    total = page.eval_on_selector_all("#log li", "els => els.length")
    assert total > 10 and step(page) == total
    page.keyboard.press("ArrowLeft")
    assert step(page) == total - 1
    page.keyboard.press("Home")
    assert step(page) == 0
    assert page.eval_on_selector_all("ol.line svg.tile", "els => els.length") == 0
    tiles_seen = []
    for expected in range(1, 16):
        page.keyboard.press("ArrowRight")
        assert step(page) == expected
        tiles_seen.append(page.eval_on_selector_all("ol.line svg.tile", "els => els.length"))
    assert max(tiles_seen) > 0  # tiles went down on the line as it stepped
    page.click("#prev")
    assert step(page) == 14
    page.click("#next-hand")
    after_hand = step(page)
    assert after_hand > 14
    page.keyboard.press("PageUp")
    assert step(page) < after_hand
    # The deal is shown (the match has ended), with text labels.
    page.keyboard.press("Home")
    page.keyboard.press("PageDown")  # right after the first deal: every hand whole
    _, replay, _ = gateway.get(f"/api/matches/{ended_match}/replay")
    dealt = next(e["dealt"] for e in replay["events"] if "dealt" in e)
    assert page.eval_on_selector_all("#hands svg.tile", "els => els.length") == sum(
        len(h["tiles"]) for h in dealt["hands"]
    )
    # Each action says its points and why.
    log = page.inner_text("#log")
    assert re.search(r"scored \d+: (double header|domino|blocked|triple header)", log)
    link = page.get_attribute("#links a[download]", "href")
    assert link == f"/api/matches/{ended_match}/record"
    status, record, _ = gateway.get(link)
    assert status == 200 and record["signature"]
    page.keyboard.press("End")
    shoot(page, "replay")


def test_tournament_page_standings_change_as_rounds_end(
    server: ServerProcess, gateway: Gateway, page: Any, tmp_path: Path
) -> None:
    with Client(server.target) as client:
        created = client.stub.CreateTournament(
            pb.CreateTournamentRequest(
                name="Club cup",
                settings=pb.TournamentSettings(
                    format=pb.TOURNAMENT_FORMAT_SWISS,
                    seats=2,
                    preset=pb.PRESET_STANDARD,
                    options=rule_options(target=3),
                    rounds=2,
                    round_delay=1,
                ),
            ),
            metadata=bearer(ORGANISER_TOKEN),
        )
        tid = created.tournament_id
        page.goto(f"{gateway.base}/tournament?id={tid}")
        wait_js(
            page, "() => document.querySelector('#status').textContent.includes('registration')"
        )
        with bots(server, "--tournament", tid, "--entrants", "4", "--seed", "web") as proc:
            start_when_filled(client, tid, 4)
            seen: list[str] = []
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                text = page.inner_text("#standings")
                if not seen or seen[-1] != text:
                    seen.append(text)
                if page.eval_on_selector("body", "b => b.dataset.ended") == "1":
                    break
                page.wait_for_timeout(50)
            out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err + out
    assert page.eval_on_selector("body", "b => b.dataset.ended") == "1", "the page saw no end"
    final = client_standings = page.inner_text("#standings")
    assert len(seen) >= 3, seen  # empty, after round 1, after round 2 (at least)
    assert "Buchholz" in final and "Margin" in final
    rows = page.eval_on_selector_all("#standings tbody tr", "els => els.length")
    assert rows == 4, client_standings
    links = page.eval_on_selector_all(
        "#rounds a[href^='/match?id=']", "els => els.map(e => e.getAttribute('href'))"
    )
    assert len(links) == 4  # 2 tables in each of 2 rounds
    assert page.inner_text("#crosstable").count("vs #") == 8
    assert (
        page.get_attribute("#links a[href$='/record']", "href") == f"/api/tournaments/{tid}/record"
    )
    # The audit pack, as the page links it: the zip holds the pack bergen verify accepts.
    pack = page.get_attribute("#links a[href$='/audit-pack.zip']", "href")
    assert pack == f"/api/tournaments/{tid}/audit-pack.zip"
    status, body, _ = gateway.get(pack)
    assert status == 200, body[:200]
    with zipfile.ZipFile(io.BytesIO(body)) as z:
        z.extractall(tmp_path)
    outcome = verify_pack(tmp_path / f"tournament-{tid}", None)
    assert outcome.status == ExitStatus.SUCCESS, outcome.line
    assert outcome.line.startswith(f"OK: tournament {tid}")
    shoot(page, "tournament")


def test_home_page_lists_live_and_finished_matches_and_links_them(
    server: ServerProcess, gateway: Gateway, ended_match: str, page: Any
) -> None:
    with Client(server.target) as client:
        live = seat_everyone(client, 2, name="Live table").match_id
    page.goto(f"{gateway.base}/")
    page.wait_for_selector(f"#live a[href='/match?id={live}']")
    page.wait_for_selector(f"#ended a[href='/replay?id={ended_match}']")
    page.click(f"#live a[href='/match?id={live}']")
    page.wait_for_selector("#log li")
    assert page.url.endswith(f"/match?id={live}")
    assert "Live table" in page.inner_text("h1")


def clock_cells(pg: Any) -> dict[int, str]:
    """Seat -> the text of its clock cell, as the page shows it now."""
    cells = pg.eval_on_selector_all(
        "td.clock", "els => els.map(e => [Number(e.dataset.seat), e.textContent])"
    )
    return {int(seat): text for seat, text in cells}


def seconds_shown(text: str) -> int:
    """`m:ss` (with or without " running") in seconds."""
    found = re.match(r"(\d+):(\d\d)", text)
    assert found, f"no m:ss in the clock cell {text!r}"
    return int(found[1]) * 60 + int(found[2])


def test_match_page_shows_each_seats_clock_running_down_and_passing_with_the_turn(
    server: ServerProcess, gateway: Gateway, page: Any
) -> None:
    rng = random.Random(8)
    with Client(server.target) as client:
        table = seat_everyone(
            client,
            2,
            name="Clocked",
            target=15,
            clock="fischer",
            clock_initial=90,
            clock_increment=0,
            timeouts_to_forfeit=2,
        )
        match = table.match_id
        first = client.view(match)
        runner = next(c.seat for c in first.clocks if c.running)
        idle = 1 - runner
        page.goto(f"{gateway.base}/match?id={match}")
        wait_js(page, "() => document.querySelectorAll('td.clock').length === 2")
        start = clock_cells(page)
        assert "running" in start[runner] and "running" not in start[idle], start
        assert seconds_shown(start[idle]) == 90
        # The running clock ticks down in the page between events; the other one stands.
        below = seconds_shown(start[runner]) - 2
        wait_js(
            page,
            f"() => {{ const c = document.querySelector('td.clock[data-seat=\"{runner}\"]');"
            f" const m = /(\\d+):(\\d\\d)/.exec(c.textContent);"
            f" return m && Number(m[1]) * 60 + Number(m[2]) <= {below}; }}",
            timeout=6.0,
        )
        assert seconds_shown(clock_cells(page)[idle]) == 90
        # Playing until the clock passes: then the seat that played stands at what the server
        # says it has left, and the other one runs.
        version = table.version
        while True:
            move = play_random_move([client], rng, table, version)
            version = move.response.view.version
            assert move.response.view.phase != pb.PHASE_ENDED, "the match ended first"
            clocks = {c.seat: c for c in move.response.view.clocks}
            if clocks[idle].running:
                break
        wait_js(
            page,
            f"() => document.querySelector('td.clock[data-seat=\"{idle}\"]')"
            f"?.textContent.includes('running')",
        )
        shown = clock_cells(page)
        assert "running" not in shown[runner], shown
        left = clocks[runner].left_ms / 1000
        assert abs(seconds_shown(shown[runner]) - left) <= 1.0, (shown, left)
        shoot(page, "match-clocked")
