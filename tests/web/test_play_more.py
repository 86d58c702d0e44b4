"""Playing in a real browser, further: against the computer with a clock, a clock running
out, a rematch, a gateway killed and restarted mid-match, and a phone's screen. Real Chromium
contexts against a real `bergen serve` (PostgreSQL) and a real `bergen web`; screenshots of the
lobby, the player's view and a match's end go to build/screenshots.

Skipped (saying why) without /usr/bin/chromium or playwright, unless BERGEN_REQUIRE_BROWSER=1.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Iterator
from typing import Any

import pytest
from e2e.servers import ServerFarm, ServerProcess

from bergen.api.rematch import rematch_id

from .browsing import PHONE, SCREENSHOTS, browser, wait_js
from .gateway import Gateway, start_gateway
from .test_play_browser import Browser, create_and_join, version

__all__ = ["browser"]

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(300)]

# Every context connects from 127.0.0.1: one client, as far as the per-client limits go.
ROOMY = (
    "--client-creates",
    "200",
    "--client-joins",
    "200",
    "--client-streams",
    "50",
    "--client-follows",
    "50",
)
ENDED = "() => !!document.body && document.body.dataset.ended === '1'"
MY_TURN = "() => !!document.body && document.body.dataset.turn === 'mine'"
CLOCK = re.compile(r"\d+:\d\d")


@pytest.fixture(scope="module")
def server(module_farm: ServerFarm, module_pg_database: str) -> ServerProcess:
    return module_farm.start(module_pg_database)


@pytest.fixture(scope="module")
def gateway(server: ServerProcess, module_farm: ServerFarm) -> Iterator[Gateway]:
    key = module_farm.workdir / "more-seal.key"
    gw = start_gateway(server.target, module_farm.workdir, "--seal-key-file", str(key), *ROOMY)
    yield gw
    assert gw.stop() == 0, gw.log()


@pytest.fixture(scope="module")
def second_gateway(
    server: ServerProcess, module_farm: ServerFarm, gateway: Gateway
) -> Iterator[Gateway]:
    """Another gateway process with the same seal key, as a second replica behind one address
    (a browser's cookies go to every port of its host, so a page on either one is seated)."""
    key = module_farm.workdir / "more-seal.key"
    gw = start_gateway(server.target, module_farm.workdir, "--seal-key-file", str(key), *ROOMY)
    yield gw
    assert gw.stop() == 0, gw.log()


def create(b: Browser, gateway: Gateway, seats: str, clock: str, bots: int) -> str:
    """Create a match on the lobby's form; its id, once the page shows the seat's tiles."""
    b.page.goto(f"{gateway.base}/")
    b.page.fill("#create-form input[name=name]", "Ada")
    b.page.select_option("#create-form select[name=seats]", seats)
    b.page.select_option("#create-form select[name=clock]", clock)
    b.page.fill("#create-form input[name=bots]", str(bots))
    b.page.click("#create-form button[type=submit]")
    b.page.wait_for_url("**/match?id=*")
    wait_js(b.page, "() => document.querySelectorAll('#hand button.mytile').length > 0")
    return b.page.url.split("id=")[1]


def play_once(b: Browser) -> bool:
    """Wait for this seat's turn and play its first legal tile by clicks; False once the
    match has ended instead."""
    for _ in range(3000):
        if b.page.evaluate(ENDED):
            return False
        if b.page.evaluate(MY_TURN):
            break
        b.page.wait_for_timeout(20)
    else:
        raise AssertionError("never this seat's turn")
    before = version(b)
    b.page.click("#hand button.mytile.legal >> nth=0")
    if b.page.is_visible("#end-choice"):
        b.page.click("#end-choice button >> nth=0")
    wait_js(b.page, f"() => Number(document.body.dataset.version) > {before} || {ENDED[6:]}")
    return True


def log_text(b: Browser) -> str:
    return str(b.page.inner_text("#log"))


def clock_cells(b: Browser) -> dict[int, str]:
    cells = b.page.eval_on_selector_all(
        "td.clock", "els => els.map(e => [Number(e.dataset.seat), e.textContent])"
    )
    return {int(seat): str(text) for seat, text in cells}


def shoot(b: Browser, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    b.page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def test_a_person_and_two_computer_seats_play_a_clocked_match_to_its_end(
    browser: Any, gateway: Gateway
) -> None:
    ada = Browser(browser)
    ada.page.goto(f"{gateway.base}/")
    shoot(ada, "lobby")
    create(ada, gateway, "3", "180+2", 2)
    wait_js(ada.page, MY_TURN)
    cells = clock_cells(ada)
    assert sorted(cells) == [0, 1, 2] and all(CLOCK.match(t) for t in cells.values()), cells
    running = [seat for seat, text in clock_cells(ada).items() if "running" in text]
    assert running == [0], clock_cells(ada)
    # The running clock counts down between the server's views.
    first = clock_cells(ada)[0]
    ada.page.wait_for_timeout(2200)
    assert clock_cells(ada)[0] != first and "low" not in clock_cells(ada)[0]
    shoot(ada, "player-clocked-desktop")
    plays = 0
    while play_once(ada):
        plays += 1
        assert plays < 200
    wait_js(ada.page, ENDED)
    assert "Ended" in ada.page.inner_text("#status")
    assert "computer 2" in log_text(ada) and "computer 3" in log_text(ada)
    assert ada.page.is_visible("#rematch")
    shoot(ada, "match-ended")
    ada.close()


def test_a_clock_running_out_is_shown_and_forfeits_on_the_timeout_asked_for(
    browser: Any, gateway: Gateway
) -> None:
    ada = Browser(browser)
    ada.page.goto(f"{gateway.base}/")
    # The lobby's form offers minutes; the API takes the shortest clock, 10 s and nothing added.
    match = ada.page.evaluate(
        """async () => {
          const r = await fetch("/api/play/matches", {method: "POST",
            headers: {"content-type": "application/json"},
            body: JSON.stringify({name: "Ada", seats: 2, bots: 1,
              clock: {initial_s: 10, increment_s: 0, timeouts_to_forfeit: 2}})});
          return (await r.json()).match_id;
        }"""
    )
    ada.page.goto(f"{gateway.base}/match?id={match}")
    wait_js(ada.page, "() => !!document.body && document.body.dataset.player === '1'")
    wait_js(ada.page, MY_TURN)
    # Under 10 s is low time: the running clock says so (the wait fails if it never does; read
    # again afterwards, the clock may have fallen and started a fresh 10 s on her next turn).
    wait_js(ada.page, "() => !!document.querySelector('td.clock.low[data-seat=\"0\"]')")
    # Ada never plays: her clock falls, the server plays for her, and the second fall in a row
    # forfeits her side (timeouts_to_forfeit 2, as asked).
    assert "a timeout plays for the seat, 2 in a row forfeit" in ada.page.inner_text("#seats")
    wait_js(ada.page, ENDED, timeout=90)
    log = log_text(ada)
    assert log.count("Ada's clock fell") == 2, log
    assert "(timed out: played for it)" in log, log
    assert "Ada forfeited on time" in ada.page.inner_text("#status")
    assert "forfeited on time" in log
    ada.close()


def test_a_clock_set_on_the_lobby_form_to_forfeit_ends_the_match_at_the_first_fall(
    browser: Any, gateway: Gateway
) -> None:
    ada = Browser(browser)
    pg = ada.page
    pg.goto(f"{gateway.base}/")
    on_timeout = "#create-form select[name=on_timeout]"
    in_a_row = "#create-form input[name=timeouts_to_forfeit]"
    # What a timeout does is asked only once a clock is chosen; how many in a row forfeit,
    # only while a timeout plays for the seat.
    assert not pg.is_visible(on_timeout) and not pg.is_visible(in_a_row)
    pg.select_option("#create-form select[name=clock]", "180+2")
    assert pg.is_visible(on_timeout) and pg.is_visible(in_a_row)
    assert pg.input_value(on_timeout) == "autoplay" and pg.input_value(in_a_row) == "3"
    pg.select_option(on_timeout, "forfeit")
    assert pg.is_visible(on_timeout) and not pg.is_visible(in_a_row)
    pg.select_option("#create-form select[name=clock]", "")
    assert not pg.is_visible(on_timeout)
    # The form offers minutes; a test has no time for them: a 10 s clock offered as the form's
    # own options are (INITIAL+INCREMENT).
    pg.evaluate(
        """() => document.querySelector("#create-form select[name=clock]")
             .append(new Option("10 s", "10+0"))"""
    )
    pg.fill("#create-form input[name=name]", "Ada")
    pg.select_option("#create-form select[name=clock]", "10+0")
    assert pg.input_value(on_timeout) == "forfeit" and not pg.is_visible(in_a_row)
    pg.fill("#create-form input[name=bots]", "1")
    pg.click("#create-form button[type=submit]")
    pg.wait_for_url("**/match?id=*")
    wait_js(pg, "() => !!document.body && document.body.dataset.player === '1'")
    # The seats' table is drawn once the match's view is in; wait for it, then read it.
    wait_js(pg, "() => document.querySelector('#seats').textContent.includes('Clock')")
    assert "Clock 10 s + 0 s: a timeout forfeits" in pg.inner_text("#seats")
    # Ada never plays: her first fall forfeits her side, with no play made for her.
    wait_js(pg, ENDED, timeout=60)
    log = log_text(ada)
    assert log.count("Ada's clock fell") == 1, log
    assert "played for it" not in log, log
    assert "Ada forfeited on time" in pg.inner_text("#status")
    ada.close()


def test_two_browsers_agree_to_a_rematch_and_play_it_in_their_old_seats(
    browser: Any, gateway: Gateway, second_gateway: Gateway
) -> None:
    ada, bo = Browser(browser), Browser(browser)
    old = create_and_join(gateway, ada, bo)
    # Bo's page is served by the other gateway from now on.
    bo.page.goto(f"{second_gateway.base}/match?id={old}")
    wait_js(bo.page, "() => !!document.body && document.body.dataset.player === '1'")
    bo.page.click("#resign")
    bo.page.click("#resign-yes")
    for b in (ada, bo):
        wait_js(b.page, ENDED)
    ada.page.click("#rematch")
    wait_js(ada.page, "() => document.body.dataset.rematch === 'proposed'")
    assert "waiting for seat 2 (Bo)" in ada.page.inner_text("#rematch-state")
    assert ada.page.inner_text("#rematch") == "Rematch accepted"
    # Bo's page, through the other gateway, learns of the proposal by itself (who accepted
    # it, whom it waits for), and accepts it.
    wait_js(bo.page, "() => document.body.dataset.rematch === 'proposed'")
    assert bo.page.inner_text("#rematch") == "Accept the rematch"
    said = bo.page.inner_text("#rematch-state")
    assert "accepted by seat 1 (Ada)" in said and "waiting for seat 2 (Bo)" in said, said
    # A stranger opening the rematch's page is offered no seat in it.
    new = rematch_id(old)
    stranger = Browser(browser)
    stranger.page.goto(f"{gateway.base}/match?id={new}")
    stranger.page.wait_for_selector("#rematch-note")
    assert stranger.page.query_selector("#join-form") is None
    # The seats are drawn from the page's own view, fetched apart from the note's.
    wait_js(stranger.page, "() => document.querySelector('#seats')?.innerText.length > 0")
    assert "kept for its player" in stranger.page.inner_text("#seats")
    bo.page.click("#rematch")
    for b, seat in ((ada, 0), (bo, 1)):
        b.page.wait_for_url(re.compile(r".*/match\?id=(?!" + old + ").+"))
        wait_js(b.page, "() => !!document.body && document.body.dataset.player === '1'")
        wait_js(b.page, "() => document.querySelectorAll('#hand button.mytile').length > 0")
        assert b.page.evaluate("() => document.body?.dataset.seat") == str(seat)
    assert ada.page.url.split("id=")[1] == bo.page.url.split("id=")[1] == new != old
    # The rematch plays on: one move by whoever's turn it is.
    player = ada if ada.page.evaluate(MY_TURN) else bo
    assert play_once(player)
    # A browser holding no seat of the old match learns nothing of its rematch.
    stranger.page.goto(f"{gateway.base}/")
    status = stranger.page.evaluate(
        f"async () => (await fetch('/api/play/matches/{old}/rematch')).status"
    )
    assert status == 403
    for b in (ada, bo, stranger):
        b.close()


def test_a_gateway_killed_mid_match_and_restarted_resumes_the_page_and_the_seat(
    browser: Any, server: ServerProcess, module_farm: ServerFarm
) -> None:
    workdir = module_farm.workdir
    key, state = workdir / "restart-seal.key", workdir / "restart-state"
    args: tuple[str, ...] = ("--seal-key-file", str(key), *ROOMY)
    gw = start_gateway(server.target, workdir, *args, state=state)
    ada = Browser(browser)
    try:
        create(ada, gw, "2", "600+10", 1)
        assert play_once(ada)
        held = version(ada)
        gw.proc.send_signal(signal.SIGKILL)
        gw.proc.wait()
        wait_js(ada.page, "() => !document.querySelector('#banner').hidden")
        assert "reconnecting" in ada.page.inner_text("#banner")
        gw = start_gateway(server.target, workdir, *args, state=state, port=gw.port)
        # The page comes back by itself: no reload, the banner gone, the seat still held.
        wait_js(ada.page, "() => document.querySelector('#banner').hidden", timeout=60)
        assert version(ada) >= held
        assert ada.page.evaluate("() => performance.getEntriesByType('navigation').length") == 1
        # Play goes on, the computer's seat played by the restarted gateway.
        assert play_once(ada)
        assert play_once(ada)
    finally:
        ada.close()
        assert gw.stop() == 0, gw.log()


def test_a_match_played_on_a_phone(browser: Any, gateway: Gateway) -> None:
    ada = Browser(browser, PHONE)
    create(ada, gateway, "2", "", 1)
    wait_js(ada.page, MY_TURN)
    shoot(ada, "player-mid-match-phone")
    ada.page.set_viewport_size({"width": 1280, "height": 800})
    shoot(ada, "player-mid-match-desktop")
    ada.page.set_viewport_size(PHONE)
    plays = 0
    while play_once(ada):
        plays += 1
        width = ada.page.evaluate("() => document.documentElement.scrollWidth")
        assert width <= PHONE["width"], f"the phone layout is {width} px wide"
        assert plays < 200
    wait_js(ada.page, ENDED)
    assert "Ended" in ada.page.inner_text("#status")
    shoot(ada, "match-ended-phone")
    ada.close()
