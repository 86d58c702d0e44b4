"""A tournament played in real browsers: two Chromium contexts register on the tournament
page, `bergen bots --tournament` adds bot entrants, the organiser starts it, and each round
the page takes each browser player to its table on its own, where it plays by clicks (the
first legal tile each turn) until the match ends and the page comes back. A bye, the
countdown to the next round and the final standings are shown on the page; the entrant's
token never reaches a page, a URL or a response body. A screenshot of the tournament page
goes to build/screenshots. At partnership tables a pair registers from one browser, and each
partner plays their own seat from a browser of their own.

Skipped (saying why) without /usr/bin/chromium or playwright, unless BERGEN_REQUIRE_BROWSER=1.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from e2e.client import rule_options
from e2e.servers import ServerFarm, ServerProcess, bergen_command

from bergen.cli_client.connect import bearer
from bergen.v1 import bergen_pb2 as pb
from bergen.v1 import bergen_pb2_grpc

from .browsing import DESKTOP, SCREENSHOTS, browser, wait_js
from .conftest import ORGANISER_TOKEN
from .gateway import Gateway, start_gateway

__all__ = ["browser"]

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(900)]

BOTS = 3
ROUNDS = 4
"""Five entrants and four Swiss rounds: a bye each round, four of the five entrants with one,
so at least one browser player has a bye."""
ROUND_DELAY_S = 5
"""Long enough for a page back from its table to show the countdown; each round waits it."""
ORG = bearer(ORGANISER_TOKEN)
COUNTDOWN = "() => (document.querySelector('#countdown') || {}).textContent || ''"
LIMITS = ["--client-streams", "40", "--client-follows", "40", "--client-joins", "100"]


@pytest.fixture(scope="module")
def entrants_gateway(server: ServerProcess, module_farm: ServerFarm) -> Iterator[Gateway]:
    """A gateway whose per-client limits hold two browsers on one address."""
    key = module_farm.workdir / "tournament-seal.key"
    gw = start_gateway(server.target, module_farm.workdir, "--seal-key-file", str(key), *LIMITS)
    yield gw
    assert gw.stop() == 0, gw.log()


class Player:
    """One browser player: its context, every URL it went to and every response body it got,
    and the states its "my tournament" section showed."""

    def __init__(self, browser: Any, name: str) -> None:
        self.name = name
        self.context = browser.new_context(viewport=DESKTOP)
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.urls: list[str] = []
        self.bodies: list[tuple[str, bytes]] = []
        self.states: set[str] = set()
        self.countdowns: list[str] = []
        self.plays = 0
        self.seats: set[tuple[str, int]] = set()
        """(match, seat) of each play made here."""
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("framenavigated", lambda f: self.urls.append(f.url))
        self.page.on("response", self._keep)

    def _keep(self, response: Any) -> None:
        if "text/event-stream" in (response.headers.get("content-type") or ""):
            return
        with contextlib.suppress(Exception):  # a body gone with a navigation
            self.bodies.append((response.url, response.body()))

    def tables(self) -> set[str]:
        """The matches the page took this player to, as a tournament's tables."""
        out = set()
        for url in self.urls:
            if "/match?id=" in url and "tournament=" in url:
                out.add(url.split("id=")[1].split("&")[0])
        return out

    def step(self) -> None:
        """Look at the page once: note the tournament's state, or play a turn at the table."""
        pg = self.page
        try:
            if "/tournament?" in pg.url:
                state = pg.evaluate("() => document.body?.dataset.myTournament || ''")
                if state:
                    self.states.add(state)
                shown = pg.evaluate(COUNTDOWN)
                if shown:
                    self.countdowns.append(shown)
            elif "/match?" in pg.url and pg.evaluate("() => document.body?.dataset.turn") == "mine":
                before = pg.evaluate("() => Number(document.body.dataset.version || 0)")
                seat = int(pg.evaluate("() => document.body?.dataset.seat"))
                self.seats.add((pg.url.split("id=")[1].split("&")[0], seat))
                pg.click("#hand button.mytile.legal >> nth=0", timeout=5000)
                if pg.is_visible("#end-choice"):
                    pg.click("#end-choice button >> nth=0", timeout=5000)
                wait_js(pg, f"() => Number(document.body.dataset.version || 0) > {before}", 20)
                self.plays += 1
        except Exception as e:  # the page went on to the next one meanwhile
            if "context was destroyed" not in str(e) and "navigat" not in str(e).lower():
                raise

    def close(self) -> None:
        self.context.close()
        assert not self.errors, self.errors


def create(stub: Any) -> str:
    created = stub.CreateTournament(
        pb.CreateTournamentRequest(
            name="Browser cup",
            settings=pb.TournamentSettings(
                format=pb.TOURNAMENT_FORMAT_SWISS,
                seats=2,
                preset=pb.PRESET_STANDARD,
                options=rule_options(target=3),
                rounds=ROUNDS,
                round_delay=ROUND_DELAY_S,
            ),
        ),
        metadata=ORG,
    )
    return str(created.tournament_id)


def register(player: Player, gateway: Gateway, tid: str) -> None:
    player.page.goto(f"{gateway.base}/tournament?id={tid}")
    player.page.wait_for_selector("#register-form")
    player.page.fill("#register-form input[name=name]", player.name)
    player.page.click("#register-form button[type=submit]")
    wait_js(player.page, "() => document.body.dataset.myTournament === 'waiting'", 20)
    assert player.name in player.page.inner_text("#me")


def test_two_browser_players_and_bots_play_a_tournament_to_its_final_standings(
    browser: Any, server: ServerProcess, entrants_gateway: Gateway
) -> None:
    gateway = entrants_gateway
    channel = grpc.insecure_channel(server.target)
    stub = bergen_pb2_grpc.BergenServiceStub(channel)
    tid = create(stub)
    ada, bo = Player(browser, "Ada"), Player(browser, "Bo")
    register(ada, gateway, tid)
    register(bo, gateway, tid)
    # Registering again from the same browser gives back the entrant it holds.
    again = ada.page.evaluate(
        """async (tid) => {
          const r = await fetch(`/api/play/tournaments/${tid}/register`, {method: "POST",
            headers: {"content-type": "application/json"}, body: JSON.stringify({name: "Ada"})});
          return [r.status, await r.json()];
        }""",
        tid,
    )
    assert again[0] == 200 and again[1]["entrant"] == 1, again
    bots = subprocess.Popen(
        [*bergen_command(), "bots", "--server", server.target, "--tournament", tid,
         "--entrants", str(BOTS), "--policy", "greedy", "--seed", "web"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while len(stub.GetTournament(pb.GetTournamentRequest(tournament_id=tid)).tournament
                   .entrants) < 2 + BOTS:  # fmt: skip
            assert time.monotonic() < deadline, "the bots did not register"
            time.sleep(0.1)
        stub.StartTournament(pb.StartTournamentRequest(tournament_id=tid), metadata=ORG)
        deadline = time.monotonic() + 800
        shot = False
        while not all(p.states >= {"ended"} for p in (ada, bo)):
            assert time.monotonic() < deadline, (ada.states, bo.states)
            for p in (ada, bo):
                p.step()
                if not shot and p.countdowns and "starts in" in p.countdowns[-1]:
                    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
                    p.page.screenshot(path=str(SCREENSHOTS / "tournament-player.png"))
                    shot = True
            time.sleep(0.03)
        out, err = bots.communicate(timeout=120)
        assert bots.returncode == 0, err + out
    finally:
        if bots.poll() is None:
            bots.kill()
            bots.communicate()
    final = stub.GetTournament(pb.GetTournamentRequest(tournament_id=tid)).tournament
    channel.close()
    assert final.phase == pb.TOURNAMENT_PHASE_ENDED and final.round == ROUNDS
    # Each page had its entrant's seed revealed as soon as it saw the reveal phase: nobody
    # was withdrawn for not revealing.
    assert all(e.revealed and not e.HasField("withdrawn_after_round") for e in final.entrants)
    numbers = {e.players[0]: e.entrant for e in final.entrants}
    byes_seen = 0
    for p in (ada, bo):
        me = numbers[p.name]
        for r in final.rounds:
            if me in r.byes:
                byes_seen += 1
                continue
            # Every round's table of the player's was played here, to its end, by clicks.
            (table,) = [t for t in r.tables if me in t.sides]
            assert table.match_id in p.tables(), (p.name, r.round, p.urls)
            assert table.result.reason == pb.MATCH_END_REASON_TARGET, table
        assert p.plays > 0
        # Its bye, the countdown and the final standings, as the page showed them.
        if any(me in r.byes for r in final.rounds):
            assert "bye" in p.states, (p.name, p.states)
        assert "ended" in p.states
        rows = p.page.eval_on_selector_all(
            "#standings-table tbody tr", "rs => rs.map(r => [r.dataset.entrant, r.className])"
        )
        assert [int(e) for e, _ in rows] == [s.entrant for s in final.standings]
        assert [c for e, c in rows if int(e) == me] == ["me"]
        rank = next(s.rank for s in final.standings if s.entrant == me)
        assert f"you placed {rank} of {2 + BOTS}" in p.page.inner_text("#my-status")
        # No page, URL or answer held the entrant's token (the gateway makes it "bgs_...").
        assert not any("bgs_" in u for u in p.urls)
        assert not any(b"bgs_" in body for _, body in p.bodies)
        cookies = {c["name"]: c for c in p.context.cookies()}
        held = cookies[f"bergen_entrant_{tid}"]
        assert held["httpOnly"] and held["sameSite"] == "Strict"
        assert held["path"] == f"/api/play/tournaments/{tid}"
    assert byes_seen >= 1
    countdowns = ada.countdowns + bo.countdowns
    assert any(c.startswith("Round ") and " starts in 0:0" in c for c in countdowns), countdowns
    assert shot and (SCREENSHOTS / "tournament-player.png").stat().st_size > 0
    ada.close()
    bo.close()


PAIRS_BOTS = 3
PAIRS_ROUNDS = 2


def _my_turn(pg: Any) -> bool:
    try:
        return "/match?" in pg.url and pg.evaluate("() => document.body?.dataset.turn") == "mine"
    except Exception:  # the page is being replaced
        return False


def detour(pg: Any) -> None:
    """From the table, on this seat's turn (so that the match waits), back to the tournament
    by the page's link: the tournament page does not send the player straight back, but
    offers the table, and the table takes the player's seat again."""
    pg.click("#table-return a")
    pg.wait_for_url("**/tournament?id=*")
    wait_js(pg, "() => !!document.querySelector('#my-table')", 20)
    assert pg.evaluate("() => document.body?.dataset.myTournament") == "playing"
    pg.wait_for_timeout(1500)  # past the 600 ms after which a seated player is taken there
    assert "/tournament?" in pg.url
    pg.click("#my-table")
    pg.wait_for_url("**/match?id=*")
    wait_js(pg, "() => document.body.dataset.turn === 'mine'", 20)


def test_a_pair_plays_a_partnership_tournament_each_partner_in_their_own_browser(
    browser: Any, server: ServerProcess, entrants_gateway: Gateway
) -> None:
    """Ann registers herself and her partner Bo on the tournament page; her browser asks
    who plays on it, and can switch. Bo's browser holds Bo alone (his cookie carried over, as
    a hand-off to his own device would), and plays as Bo. With three bot pairs they play two
    Swiss rounds to the final standings, each partner in their own seat of their side."""
    gateway = entrants_gateway
    channel = grpc.insecure_channel(server.target)
    stub = bergen_pb2_grpc.BergenServiceStub(channel)
    tid = stub.CreateTournament(
        pb.CreateTournamentRequest(
            name="Pairs cup",
            settings=pb.TournamentSettings(
                format=pb.TOURNAMENT_FORMAT_SWISS,
                seats=4,
                partnerships=True,
                preset=pb.PRESET_STANDARD,
                options=rule_options(target=3),
                rounds=PAIRS_ROUNDS,
                round_delay=2,
            ),
        ),
        metadata=ORG,
    ).tournament_id
    ann, bo = Player(browser, "Ann"), Player(browser, "Bo")
    pg = ann.page
    pg.goto(f"{gateway.base}/tournament?id={tid}")
    pg.wait_for_selector("#register-form input[name=partner]")
    pg.fill("#register-form input[name=name]", "Ann")
    pg.fill("#register-form input[name=partner]", "Bo")
    pg.click("#register-form button[type=submit]")
    wait_js(pg, "() => document.body.dataset.myTournament === 'waiting'", 20)
    assert "Ann & Bo" in pg.inner_text("#me-h")
    # Her browser holds both: it asks who plays on it, and switches on a click.
    assert pg.evaluate("() => document.body?.dataset.playingAs") == ""
    assert pg.inner_text("#play-as-1") == "Play as Bo"
    pg.click("#play-as-1")
    wait_js(pg, "() => document.body.dataset.playingAs === '1'", 20)
    assert pg.inner_text("#playing-as-text") == "This device plays as Bo."
    pg.click("#play-as-0")
    wait_js(pg, "() => document.body.dataset.playingAs === '0'", 20)
    assert pg.inner_text("#playing-as-text") == "This device plays as Ann."
    assert pg.inner_text("#play-as-1") == "Play as Bo instead"
    # Bo's own browser: his player's cookie (and the page's mark) alone.
    carried = [
        c
        for c in ann.context.cookies()
        if c["name"] in (f"bergen_partner_{tid}", f"bergen_entered_{tid}")
    ]
    assert len(carried) == 2, ann.context.cookies()
    bo.context.add_cookies(carried)
    bo.page.goto(f"{gateway.base}/tournament?id={tid}")
    wait_js(bo.page, "() => document.body.dataset.playingAs === '1'", 20)
    assert bo.page.inner_text("#playing-as-text") == "This device plays as Bo."
    assert bo.page.query_selector("#play-as-0") is None
    bots = subprocess.Popen(
        [*bergen_command(), "bots", "--server", server.target, "--tournament", tid,
         "--entrants", str(PAIRS_BOTS), "--policy", "greedy", "--seed", "pairs"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while len(stub.GetTournament(pb.GetTournamentRequest(tournament_id=tid)).tournament
                   .entrants) < 1 + PAIRS_BOTS:  # fmt: skip
            assert time.monotonic() < deadline, "the bots did not register"
            time.sleep(0.1)
        stub.StartTournament(pb.StartTournamentRequest(tournament_id=tid), metadata=ORG)
        deadline = time.monotonic() + 150
        detoured = False
        while not all(p.states >= {"ended"} for p in (ann, bo)):
            assert time.monotonic() < deadline, (ann.states, bo.states)
            if not detoured and ann.plays and _my_turn(pg):
                detour(pg)
                detoured = True
            for p in (ann, bo):
                p.step()
            time.sleep(0.03)
        assert detoured
        out, err = bots.communicate(timeout=120)
        assert bots.returncode == 0, err + out
    finally:
        if bots.poll() is None:
            bots.kill()
            bots.communicate()
    final = stub.GetTournament(pb.GetTournamentRequest(tournament_id=tid)).tournament
    assert final.phase == pb.TOURNAMENT_PHASE_ENDED and final.round == PAIRS_ROUNDS
    assert [list(e.players) for e in final.entrants if e.entrant == 1] == [["Ann", "Bo"]]
    for r in final.rounds:
        (table,) = [t for t in r.tables if 1 in t.sides]
        assert table.result.reason == pb.MATCH_END_REASON_TARGET, table
        seats = stub.GetMatch(pb.GetMatchRequest(match_id=table.match_id)).view.seats
        named = {s.name: s.seat for s in seats}
        # Partners on one side, each played from their own browser in their own seat.
        assert abs(named["Ann"] - named["Bo"]) == 2, named
        for p in (ann, bo):
            assert table.match_id in p.tables(), (p.name, r.round, p.urls)
            played = {seat for match, seat in p.seats if match == table.match_id}
            assert played <= {named[p.name]}, (p.name, played, named)
    channel.close()
    assert ann.plays > 0 and bo.plays > 0
    rank = next(s.rank for s in final.standings if s.entrant == 1)
    for p in (ann, bo):
        assert f"you placed {rank} of {1 + PAIRS_BOTS}" in p.page.inner_text("#my-status")
        rows = p.page.eval_on_selector_all(
            "#standings-table tbody tr", "rs => rs.map(r => [r.dataset.entrant, r.className])"
        )
        assert [c for e, c in rows if int(e) == 1] == ["me"]
        assert not any("bgs_" in u for u in p.urls)
        assert not any(b"bgs_" in body for _, body in p.bodies)
    held = {c["name"]: c for c in ann.context.cookies()}
    for name in (f"bergen_entrant_{tid}", f"bergen_partner_{tid}"):
        assert held[name]["httpOnly"] and held[name]["sameSite"] == "Strict"
        assert held[name]["path"] == f"/api/play/tournaments/{tid}"
    assert f"bergen_entrant_{tid}" not in {c["name"] for c in bo.context.cookies()}
    ann.close()
    bo.close()


def test_the_my_tournament_page_links_another_device_to_the_entrant(
    browser: Any, server: ServerProcess, entrants_gateway: Gateway
) -> None:
    """The "Link for another device" button gives a one-time link; opened in another browser,
    it holds the same entrant there; opened again, it is refused."""
    channel = grpc.insecure_channel(server.target)
    tid = create(bergen_pb2_grpc.BergenServiceStub(channel))
    ann, phone, thief = (Player(browser, name) for name in ("Ann", "Ann's phone", "Thief"))
    try:
        register(ann, entrants_gateway, tid)
        ann.page.click("#device-link")
        # The link, or the page's word on why there is none, read the moment it shows (the
        # section may be drawn again meanwhile).
        read = (
            "() => (document.querySelector('#device-url code')"
            " || document.querySelector('#device-url .problem'))?.textContent ?? null"
        )
        link = None
        deadline = time.monotonic() + 90
        while link is None and time.monotonic() < deadline:
            link = ann.page.evaluate(read)
            if link is None:
                ann.page.wait_for_timeout(20)
        assert link is not None, f"no link shown: {ann.page.inner_text('body')[:600]!r}"
        assert link.startswith(f"{entrants_gateway.base}/claim?code=")
        phone.page.goto(link)
        wait_js(phone.page, "() => document.body.dataset.myTournament === 'waiting'", 20)
        assert phone.page.url == f"{entrants_gateway.base}/tournament?id={tid}"
        assert "You: Ann (#1)" in phone.page.inner_text("#me")
        assert phone.page.is_visible("#device-link") and phone.page.is_visible("#withdraw")
        thief.page.goto(link)
        assert "has been used" in thief.page.inner_text("body")
        thief.page.goto(f"{entrants_gateway.base}/tournament?id={tid}")
        wait_js(thief.page, "() => document.body.dataset.myTournament === 'register'", 20)
        # No page, URL or body of either device holds the token.
        token_free = [body for _, body in ann.bodies + phone.bodies]
        assert all(b"bgs_" not in body for body in token_free)
        assert all("bgs_" not in url for url in ann.urls + phone.urls)
    finally:
        for p in (ann, phone, thief):
            p.close()
        channel.close()
