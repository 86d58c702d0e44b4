"""Players and ratings in a real browser (headless Chromium) against a real `bergen serve`
(PostgreSQL) and a real `bergen web`: registering a player (its token shown once, copied and
saved to a file), a rated match against the computer played to its end by clicks, the player
page with the new rating, its graph (an SVG with one point per rated match) and history; the
leaderboard a page at a time with its pools as tabs; a rated tournament's standings with each
entrant's rating; signing in with a token on another browser and out; and refusals: a taken
name, a wrong token, another site's page posting to the gateway. Screenshots of the
leaderboard and the player page on a desktop and a phone go to build/screenshots.

Skipped (saying why) without /usr/bin/chromium or playwright, unless BERGEN_REQUIRE_BROWSER=1.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from e2e.client import Client, rule_options
from e2e.servers import ServerFarm, ServerProcess
from e2e.test_players import register

from bergen.cli_client.connect import bearer
from bergen.v1 import bergen_pb2 as pb

from .browsing import DESKTOP, PHONE, SCREENSHOTS, browser, wait_js
from .conftest import ORGANISER_TOKEN
from .gateway import Gateway, start_gateway
from .test_play_browser import Browser
from .test_ratings_api import eventually, settled_players, unique

__all__ = ["browser"]

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(600)]

WAIT_S = 60.0


@pytest.fixture(scope="module")
def gateway(server: ServerProcess, module_farm: ServerFarm) -> Iterator[Gateway]:
    key = module_farm.workdir / "ratings-browser-seal.key"
    gw = start_gateway(
        server.target,
        module_farm.workdir,
        "--seal-key-file",
        str(key),
        "--client-registers",
        "1000",
    )
    yield gw
    assert gw.stop() == 0, gw.log()


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Iterator[Client]:
    with Client(server.target) as c:
        yield c


def loaded(b: Browser, url: str) -> None:
    b.page.goto(url)
    wait_js(b.page, "() => document.body.dataset.loaded === '1'")


def shoot(b: Browser, name: str) -> None:
    """Screenshots of the page on a desktop and a phone; the phone's is no wider than it."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for label, size in (("desktop", DESKTOP), ("phone", PHONE)):
        b.page.set_viewport_size(size)
        b.page.wait_for_timeout(300)  # the graph is drawn again for the new width
        b.page.screenshot(path=str(SCREENSHOTS / f"{name}-{label}.png"), full_page=True)
        width = b.page.evaluate("() => document.documentElement.scrollWidth")
        assert width <= size["width"], f"{name}: the {label} layout is {width} px wide"
    b.page.set_viewport_size(DESKTOP)


def register_in(b: Browser, base: str, name: str) -> str:
    """Register `name` on the sign-in page; the token the page showed."""
    loaded(b, f"{base}/sign-in")
    b.page.fill("#register-form input[name=name]", name)
    b.page.click("#register-form button[type=submit]")
    wait_js(b.page, "() => document.body.dataset.tokenShown === '1'")
    return str(b.page.inner_text("#player-token")).strip()


def play_to_the_end(b: Browser) -> None:
    """Play this browser's seat by clicks until the match ends (the computer plays the other)."""
    deadline = time.monotonic() + 240
    plays = 0
    while not b.page.evaluate("() => document.body?.dataset.ended === '1'"):
        assert time.monotonic() < deadline, "the match did not end"
        if b.page.evaluate("() => document.body?.dataset.turn") != "mine":
            b.page.wait_for_timeout(20)
            continue
        before = int(b.page.evaluate("() => Number(document.body.dataset.version || 0)"))
        b.page.click("#hand button.mytile.legal >> nth=0")
        if b.page.is_visible("#end-choice"):
            b.page.click("#end-choice button >> nth=0")
        wait_js(
            b.page,
            f"() => Number(document.body.dataset.version) > {before}"
            " || document.body.dataset.ended === '1'",
        )
        plays += 1
        assert plays < 600


def test_register_play_rated_against_the_computer_and_see_the_rating(
    browser: Any, gateway: Gateway
) -> None:
    ann = Browser(browser)
    ann.context.grant_permissions(["clipboard-read", "clipboard-write"])
    name = unique("Ann")
    token = register_in(ann, gateway.base, name)
    assert token.startswith("bgp_")
    assert "only time it is shown" in ann.page.inner_text("#keep-it")
    ann.page.click("#copy-token")
    wait_js(ann.page, "() => document.querySelector('#copy-note').textContent !== ''")
    assert ann.page.evaluate("() => navigator.clipboard.readText()") == token
    with ann.page.expect_download() as saved:
        ann.page.click("#save-token")
    assert token in Path(saved.value.path()).read_text()
    ann.page.click("#token-kept")
    wait_js(ann.page, "() => !!document.body.dataset.signedIn")
    assert not ann.page.query_selector("#player-token")  # the page has let it go
    player_id = ann.page.evaluate("() => document.body?.dataset.signedIn")
    assert name in ann.page.inner_text("#signed-in-as")

    # The lobby knows the player: no name to give, and a rated match may be asked for.
    loaded(ann, f"{gateway.base}/")
    wait_js(ann.page, "() => document.body.dataset.signedIn !== undefined")
    assert name in ann.page.inner_text("#me-line")
    wait_js(ann.page, "() => document.querySelector('#create').dataset.signedIn === '1'")
    assert not ann.page.query_selector("#create-form input[name=name]")
    assert f"Playing as {name}" in ann.page.inner_text("#create-form")
    ann.page.check("#create-form input[name=rated]")
    ann.page.fill("#create-form input[name=bots]", "1")
    ann.page.select_option("#create-form select[name=bot_policy]", "random")
    ann.page.click("#create-form button[type=submit]")
    ann.page.wait_for_url("**/match?id=*")
    match = ann.page.url.split("id=")[1]
    wait_js(ann.page, "() => document.body.dataset.player === '1'")
    wait_js(ann.page, "() => document.querySelectorAll('#hand button.mytile').length > 0")
    play_to_the_end(ann)
    assert "rated match" in ann.page.inner_text("#status")

    # The player page: the rating after the match, its graph with one point, its history.
    def rated() -> bool:
        loaded(ann, f"{gateway.base}/player?id={player_id}")
        row = ann.page.query_selector("#ratings-table tr[data-pool='2'] td:nth-child(3)")
        shown = row is not None and row.inner_text() == "1"
        return shown and bool(ann.page.query_selector("#rating-graph"))

    eventually(rated, "the player page to show the rated match")
    assert ann.page.inner_text("#title").startswith(name)
    row = ann.page.inner_text("#ratings-table tr[data-pool='2']")
    assert "1500?" not in row and "?" in row  # moved, and provisional still
    assert ann.page.get_attribute("#rating-graph", "data-points") == "1"
    assert len(ann.page.query_selector_all("#rating-graph circle.point")) == 1
    title = ann.page.text_content("#rating-graph circle.point title") or ""
    assert title.startswith("Rated match 1 of 1") and "1500?" in title
    assert "1 rated match in the 2 seats pool" in ann.page.inner_text("#graph-summary")
    assert "provisional" in ann.page.inner_text("#provisional-note")
    rows = ann.page.query_selector_all("#history-table tbody tr")
    assert len(rows) == 1
    assert ann.page.get_attribute("#history-table tbody tr a", "href") == f"/replay?id={match}"
    shoot(ann, "ratings-player")

    # The token went to the browser in the answer that registered the player, and no other.
    others = [body for url, body in ann.bodies if not url.endswith("/api/play/players")]
    assert others and all(token.encode() not in body for body in others)
    assert token not in gateway.log()
    ann.close()


def test_the_leaderboard_a_page_at_a_time_with_its_pools(
    browser: Any, gateway: Gateway, client: Client
) -> None:
    players, _ = settled_players(client, "Web", bot=2)
    ours = {p.player_id: p for p in players}
    b = Browser(browser)
    loaded(b, f"{gateway.base}/leaderboard?pool=2&page_size=2")
    assert b.page.get_attribute("#pools a[data-pool='2']", "aria-current") == "page"
    shoot(b, "ratings-leaderboard")
    listed: list[str] = []
    ranks: list[int] = []
    pages = 0
    while True:
        pages += 1
        for row in b.page.query_selector_all("#leaderboard-table tbody tr"):
            ranks.append(int(row.query_selector("td").inner_text()))
            pid = row.get_attribute("data-player")
            if pid in ours:
                listed.append(pid)
                link = row.query_selector("a.player-name")
                assert link is not None and link.get_attribute("href").endswith(f"id={pid}&pool=2")
                assert bool(row.query_selector("abbr.bot")) == (pid == players[2].player_id)
        if not b.page.query_selector("#next-page"):
            break
        before = b.page.url
        b.page.click("#next-page")
        b.page.wait_for_url(lambda url, before=before: url != before)
        wait_js(b.page, "() => document.body.dataset.loaded === '1'")
    assert pages >= 3
    assert ranks == list(range(1, len(ranks) + 1))
    assert listed == [p.player_id for p in players]
    b.page.click("#first-page")
    wait_js(b.page, "() => !location.search.includes('page_token')")
    # Another pool's tab: its own leaderboard, on which these players are not.
    b.page.click("#pools a[data-pool='3']")
    wait_js(b.page, "() => location.search.includes('pool=3')")
    wait_js(b.page, "() => document.body.dataset.loaded === '1'")
    assert b.page.get_attribute("#pools a[data-pool='3']", "aria-current") == "page"
    assert not any(
        r.get_attribute("data-player") in ours
        for r in b.page.query_selector_all("#leaderboard-table tbody tr")
    )
    # A player's name leads to their page.
    loaded(b, f"{gateway.base}/leaderboard?pool=2")
    b.page.click(f"tr[data-player='{players[0].player_id}'] a.player-name")
    wait_js(b.page, "() => document.body.dataset.loaded === '1'")
    assert players[0].name in b.page.inner_text("#title")
    points = b.page.get_attribute("#rating-graph", "data-points")
    assert points == str(len(b.page.query_selector_all("#history-table tbody tr")))
    assert int(points or 0) >= 4
    b.close()


def test_a_rated_tournament_shows_each_entrants_rating(
    browser: Any, gateway: Gateway, client: Client
) -> None:
    org = bearer(ORGANISER_TOKEN)
    tid = client.stub.CreateTournament(
        pb.CreateTournamentRequest(
            name="Rated web cup",
            settings=pb.TournamentSettings(
                format=pb.TOURNAMENT_FORMAT_SWISS,
                seats=2,
                preset=pb.PRESET_STANDARD,
                options=rule_options(target=3),
                rounds=1,
                rated=True,
            ),
        ),
        metadata=org,
        timeout=20,
    ).tournament_id
    ann, bob = register(client, unique("Tn")), register(client, unique("Tb"), bot=True)
    seat_tokens = {}
    for p in (ann, bob):
        got = client.stub.RegisterEntrant(
            pb.RegisterEntrantRequest(
                tournament_id=tid,
                players=[""],
                client_seed=p.name,
                registered_player_tokens=[p.player_token],
            ),
            timeout=20,
        )
        (seat_tokens[got.entrant],) = got.player_tokens
    client.stub.StartTournament(pb.StartTournamentRequest(tournament_id=tid), metadata=org)
    b = Browser(browser)
    b.page.goto(f"{gateway.base}/tournament?id={tid}")

    def shown(n: int) -> str:
        found = b.page.query_selector(f"#standings-table td.rating[data-entrant='{n}']")
        return str(found.inner_text()) if found is not None else ""

    eventually(lambda: shown(1) == shown(2) == "1500?", "the entrants' ratings")
    assert "Rating" in b.page.inner_text("#standings-table thead")
    # The table's match ends by a resignation: the ratings shown move with it.
    deadline = time.monotonic() + WAIT_S
    match_id = ""
    while not match_id:
        assert time.monotonic() < deadline, "round 1 was not seated"
        where = client.stub.GetTournament(
            pb.GetTournamentRequest(tournament_id=tid), metadata=bearer(seat_tokens[2])
        ).assignment
        if where.match_id and client.view(where.match_id).phase == pb.PHASE_PLAYING:
            match_id = where.match_id
        else:
            time.sleep(0.05)
    client.resign(match_id, seat_tokens[2])
    eventually(lambda: "1500?" not in (shown(1), shown(2)), "the ratings after the match")
    assert int(shown(1).rstrip("?")) > 1500 > int(shown(2).rstrip("?"))
    href = b.page.get_attribute("#standings-table td.rating[data-entrant='1'] a", "href")
    assert href == f"/player?id={ann.player_id}&pool=2"
    b.close()


def test_sign_in_elsewhere_out_and_refusals(browser: Any, gateway: Gateway, client: Client) -> None:
    name = unique("Sol")
    first = Browser(browser)
    token = register_in(first, gateway.base, name)
    first.close()

    b = Browser(browser)
    loaded(b, f"{gateway.base}/sign-in")
    # A taken name (in another case), and a wrong token: refused, saying why.
    b.page.fill("#register-form input[name=name]", name.upper())
    b.page.click("#register-form button[type=submit]")
    wait_js(b.page, "() => document.body.dataset.refused === 'NAME_TAKEN'")
    assert "taken" in b.page.inner_text("#register-form")
    wrong = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    b.page.fill("#sign-in-form input[name=player_token]", wrong)
    b.page.click("#sign-in-form button[type=submit]")
    wait_js(b.page, "() => document.body.dataset.refused === 'PLAYER_TOKEN_INVALID'")
    assert "not a player's token" in b.page.inner_text("#sign-in-form")
    assert not b.page.evaluate("() => document.body?.dataset.signedIn")
    # The right one, pasted amid the words of the saved file.
    b.page.fill("#sign-in-form input[name=player_token]", f"Bergen player token:\n{token}\n")
    b.page.click("#sign-in-form button[type=submit]")
    wait_js(b.page, "() => !!document.body.dataset.signedIn && !!document.body.dataset.loaded")
    assert name in b.page.inner_text("#signed-in-as")

    # Another site's page posting to the gateway with this browser: refused, nothing changed.
    evil = f"evil {uuid.uuid4().hex[:6]}"
    page = (
        "<!doctype html><title>elsewhere</title><script>"
        f"const base = {gateway.base!r};"
        "const send = (path, body) => fetch(base + path, {method: 'POST', mode: 'no-cors',"
        " credentials: 'include', headers: {'content-type': 'text/plain'},"
        " body: JSON.stringify(body)});"
        f"Promise.all([send('/api/play/players', {{name: {evil!r}}}),"
        " send('/api/play/me/sign-out', {})])"
        ".then(() => { document.title = 'sent'; }, () => { document.title = 'failed'; });"
        "</script>"
    )
    b.page.route(
        "http://elsewhere.example/**",
        lambda route: route.fulfill(status=200, content_type="text/html", body=page),
    )
    b.page.goto("http://elsewhere.example/")
    wait_js(b.page, "() => document.title === 'sent' || document.title === 'failed'")
    with pytest.raises(grpc.RpcError) as info:
        client.stub.GetPlayer(pb.GetPlayerRequest(name=evil), timeout=20)
    assert info.value.code() == grpc.StatusCode.NOT_FOUND
    loaded(b, f"{gateway.base}/sign-in")
    assert name in b.page.inner_text("#signed-in-as")

    # Signing out: the lobby offers to register or sign in again.
    b.page.click("#sign-out")
    wait_js(b.page, "() => document.body.dataset.loaded === '1' && !document.body.dataset.signedIn")
    assert not b.page.query_selector("#signed-in-as")
    b.page.goto(f"{gateway.base}/")
    wait_js(b.page, "() => !!document.querySelector('#me-line a[href=\"/sign-in\"]')")
    assert b.page.query_selector("#create-form input[name=name]")
    assert b.page.is_disabled("#create-form input[name=rated]")
    b.close()
