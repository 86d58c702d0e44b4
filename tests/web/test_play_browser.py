"""Playing in a real browser: two Chromium contexts (two players' browsers) against a real
`bergen serve` (PostgreSQL) and a real `bergen web`. One creates a match on the lobby's form,
the other joins on the match page's form, and they play it to its end by clicks; every
response body each browser received is kept, and none holds a tile of the other's hand before
the end. Some plays by keys alone, a resignation with its confirmation, and screenshots of the
player's view on a desktop and a phone (build/screenshots).

Skipped (saying why) without /usr/bin/chromium or playwright, unless BERGEN_REQUIRE_BROWSER=1.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from e2e.servers import ServerFarm, ServerProcess

from .browsing import DESKTOP, PHONE, SCREENSHOTS, browser, wait_js
from .gateway import Gateway, start_gateway
from .test_play_api import tiles_in

__all__ = ["browser"]

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(300)]


KEEP_SSE = """
(() => {
  const Real = window.EventSource;
  window.__sse = [];
  window.EventSource = class extends Real {
    addEventListener(type, listener, options) {
      super.addEventListener(type, (m) => { window.__sse.push(m.data); listener(m); }, options);
    }
  };
})();
"""


class Browser:
    """One player's browser context, keeping every response body it received."""

    def __init__(self, browser: Any, viewport: dict[str, int] = DESKTOP) -> None:
        self.context = browser.new_context(viewport=viewport)
        self.page = self.context.new_page()
        self.bodies: list[tuple[str, bytes]] = []
        self.errors: list[str] = []
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("response", self._keep)
        # Server-Sent Events reach the page, not Playwright's response bodies: the page keeps
        # each message it gets from an EventSource, read back by `stream_messages`.
        self.page.add_init_script(script=KEEP_SSE)

    def _keep(self, response: Any) -> None:
        if "text/event-stream" in (response.headers.get("content-type") or ""):
            return
        with contextlib.suppress(Exception):  # a body gone with a navigation
            self.bodies.append((response.url, response.body()))

    def stream_messages(self) -> list[Any]:
        kept = self.page.evaluate("() => window.__sse || []")
        return [json.loads(m) for m in kept]

    def close(self) -> None:
        self.context.close()
        assert not self.errors, self.errors


@pytest.fixture(scope="module")
def server(module_farm: ServerFarm, module_pg_database: str) -> ServerProcess:
    return module_farm.start(module_pg_database)


@pytest.fixture(scope="module")
def gateway(server: ServerProcess, module_farm: ServerFarm) -> Iterator[Gateway]:
    key = module_farm.workdir / "browser-seal.key"
    gw = start_gateway(server.target, module_farm.workdir, "--seal-key-file", str(key))
    yield gw
    assert gw.stop() == 0, gw.log()


def create_and_join(gateway: Gateway, ada: Browser, bo: Browser) -> str:
    ada.page.goto(f"{gateway.base}/")
    ada.page.fill("#create-form input[name=name]", "Ada")
    ada.page.fill("#create-form input[name=match_name]", "Browser table")
    ada.page.click("#create-form button[type=submit]")
    ada.page.wait_for_url("**/match?id=*")
    match = ada.page.url.split("id=")[1]
    wait_js(ada.page, "() => document.body.dataset.player === '1'")
    bo.page.goto(f"{gateway.base}/match?id={match}")
    bo.page.wait_for_selector("#join-form")
    bo.page.fill("#join-form input[name=name]", "Bo")
    bo.page.click("#join-form button[type=submit]")
    # Joining reloads the page: its body is missing for a moment.
    wait_js(bo.page, "() => !!document.body && document.body.dataset.player === '1'")
    for b in (ada, bo):
        wait_js(b.page, "() => document.querySelectorAll('#hand button.mytile').length > 0")
    return match


def version(b: Browser) -> int:
    return int(b.page.evaluate("() => Number(document.body.dataset.version || 0)"))


def whose_turn(ada: Browser, bo: Browser) -> Browser | None:
    for b in (ada, bo):
        if b.page.evaluate("() => document.body?.dataset.turn") == "mine":
            return b
    return None


def test_two_browsers_play_a_match_to_its_end_by_clicks(browser: Any, gateway: Gateway) -> None:
    ada, bo = Browser(browser), Browser(browser)
    match = create_and_join(gateway, ada, bo)
    assert ada.page.get_attribute("#hand button.mytile", "aria-label")
    plays = 0
    while not ada.page.evaluate("() => document.body?.dataset.ended === '1'"):
        player = None
        deadline = time.monotonic() + 60  # a loaded machine may take a while to show the turn
        while time.monotonic() < deadline:
            player = whose_turn(ada, bo)
            if player or ada.page.evaluate("() => document.body?.dataset.ended === '1'"):
                break
            ada.page.wait_for_timeout(20)
        if player is None:
            break
        before = version(player)
        if plays == 2:
            shoot_player(player, "play")
            sizes = player.page.eval_on_selector_all(
                "#hand button.mytile",
                "els => els.map(e => [e.offsetWidth, e.offsetHeight, e.ariaLabel])",
            )
            assert sizes and all(w >= 44 and h >= 44 and "-" in label for w, h, label in sizes)
        player.page.click("#hand button.mytile.legal >> nth=0")
        if player.page.is_visible("#end-choice"):
            player.page.click("#end-choice button >> nth=0")
        wait_js(player.page, f"() => Number(document.body.dataset.version) > {before}")
        plays += 1
        assert plays < 400
    for b in (ada, bo):
        wait_js(b.page, "() => document.body.dataset.ended === '1'")
        assert "Ended" in b.page.inner_text("#status")
        assert b.page.get_attribute("#links a", "href") == f"/replay?id={match}"
    # Neither browser ever received a tile of the other's hand before the end.
    for seat, (me, other) in enumerate(((ada, bo), (bo, ada))):
        # What came before the page learned of the end (after it, every hand is shown).
        live = []
        for m in me.stream_messages():
            if m.get("phase") == "PHASE_ENDED" or "match_ended" in m:
                break
            live.append(m)
        own: set[tuple[int, int]] = set()
        played: set[tuple[int, int]] = set()
        for m in live:
            own |= {(t["low"], t["high"]) for t in m.get("my_tiles", [])}
            if "dealt" in m:
                # A deal may come before the view that lists the new hand: it shows this
                # seat's tiles, and no other seat's nor the boneyard's.
                hands = m["dealt"].get("hands", [])
                shown = [i for i, hand in enumerate(hands) if hand.get("tiles")]
                assert shown in ([], [seat]), m
                assert not tiles_in(m["dealt"].get("boneyard", [])), m
                own |= tiles_in(hands[seat]) if shown else set()
            if "tile_played" in m:
                t = m["tile_played"]["tile"]
                played.add((t["low"], t["high"]))
            line = {tuple(sorted((t["left"], t["right"]))) for t in m.get("line", [])}
            assert tiles_in(m) <= own | played | line, m
            assert not m.get("revealed_hands"), m
        for url, body in me.bodies:
            if "/api/" not in url or not body.startswith(b"{"):
                continue
            data = json.loads(body)
            if data.get("phase") == "PHASE_ENDED":
                continue
            assert not data.get("revealed_hands"), url
            mine = {(t["low"], t["high"]) for t in data.get("my_tiles", [])}
            line = {tuple(sorted((t["left"], t["right"]))) for t in data.get("line", [])}
            assert tiles_in(data) <= mine | line | played_so_far(me), url
        assert other.stream_messages()
    ada.close()
    bo.close()


def played_so_far(b: Browser) -> set[tuple[int, int]]:
    out = set()
    for m in b.stream_messages():
        if "tile_played" in m:
            t = m["tile_played"]["tile"]
            out.add((t["low"], t["high"]))
    return out


def shoot_player(b: Browser, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for label, size in (("desktop", DESKTOP), ("phone", PHONE)):
        b.page.set_viewport_size(size)
        b.page.wait_for_timeout(150)
        b.page.screenshot(path=str(SCREENSHOTS / f"{name}-{label}.png"), full_page=True)
        if label == "phone":
            width = b.page.evaluate("() => document.documentElement.scrollWidth")
            assert width <= PHONE["width"], f"the phone layout is {width} px wide"
    b.page.set_viewport_size(DESKTOP)


def test_keyboard_only_plays_and_a_resignation(browser: Any, gateway: Gateway) -> None:
    ada, bo = Browser(browser), Browser(browser)
    create_and_join(gateway, ada, bo)
    for _ in range(4):
        player = None
        deadline = time.monotonic() + 60  # a loaded machine may take a while to show the turn
        while player is None and time.monotonic() < deadline:
            player = whose_turn(ada, bo)
            if player is None:
                ada.page.wait_for_timeout(20)
        assert player is not None
        before = version(player)
        player.page.locator("body").focus()
        player.page.keyboard.press("ArrowRight")
        wait_js(player.page, "() => !!document.querySelector('#hand button[aria-pressed=true]')")
        chosen = player.page.get_attribute("#hand button[aria-pressed=true]", "data-tile")
        assert chosen
        if player.page.is_visible("#end-choice"):
            player.page.keyboard.press("r")
            right = "#end-choice button[data-end=right]"
            assert player.page.get_attribute(right, "aria-pressed") == "true"
        player.page.keyboard.press("Enter")
        wait_js(player.page, f"() => Number(document.body.dataset.version) > {before}")
        assert chosen not in [
            b.get_attribute("data-tile") for b in player.page.query_selector_all("#hand button")
        ]
    bo.page.click("#resign")
    bo.page.click("#resign-no")
    assert not bo.page.is_visible("#resign-yes")
    # The question stays on Bo's page while the match moves on and the page is drawn again.
    bo.page.click("#resign")
    player = None
    deadline = time.monotonic() + 60
    while player is None and time.monotonic() < deadline:
        player = whose_turn(ada, bo)
    assert player is not None
    before = version(bo)
    player.page.click("#hand button.mytile.legal >> nth=0")
    if player.page.is_visible("#end-choice"):
        player.page.click("#end-choice button >> nth=0")
    wait_js(bo.page, f"() => Number(document.body.dataset.version) > {before}")
    assert bo.page.is_visible("#resign-yes")
    bo.page.click("#resign-yes")
    for b in (ada, bo):
        wait_js(b.page, "() => document.body.dataset.ended === '1'")
        assert "resigned" in b.page.inner_text("#status")
    ada.close()
    bo.close()
