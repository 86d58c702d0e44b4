"""The site as a new visitor meets it, in a real browser against a real `bergen serve`
(PostgreSQL) and a real `bergen web`: a page asked for something that does not exist says so
and links home; one whose game server does not answer says so and keeps trying; every page
has its icon and no request of it fails; the home page tells matches apart (times in the
visitor's own time zone, state, hand, table) and reads on a phone; a tournament page marks
withdrawn entrants, names byes, says who won and keeps live scores current while tables play.

Screenshots of the home page and of a tournament page go to build/screenshots/.
"""

from __future__ import annotations

import random
import time
import uuid
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import grpc
import pytest
from e2e.client import (
    Client,
    Table,
    bearer,
    create_swiss,
    play_random_move,
    seat_everyone,
)
from e2e.servers import ServerProcess

from bergen.v1 import bergen_pb2 as pb

from .browsing import DESKTOP, PHONE, browser, page, shoot, wait_js
from .conftest import ORGANISER_TOKEN
from .gateway import Gateway

__all__ = ["browser", "page"]

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(300)]

ORG = bearer(ORGANISER_TOKEN)
ZONE = "Asia/Kolkata"
"""The visitor's time zone in the home page's test: half an hour off any whole-hour zone, so
a time shown in UTC or in the machine's zone cannot pass for it."""


def shown_time(iso: str, zone: str = ZONE) -> str:
    """HH:MM of an API timestamp in `zone`, as an en-GB browser there shows it."""
    at = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    return at.astimezone(ZoneInfo(zone)).strftime("%H:%M")


def problem(pg: Any) -> str | None:
    found: str | None = pg.eval_on_selector("body", "b => b.dataset.problem || null")
    return found


# --- 1. what a page says when it cannot show what it was asked for --------------------------


CASES = [
    ("/match?id=nope", "bad-id", "This is not a match id."),
    ("/match?id={uuid}", "not-found", "No match with this id."),
    ("/replay?id=nope", "bad-id", "This is not a match id."),
    ("/replay?id={uuid}", "not-found", "No match with this id."),
    ("/tournament?id=nope", "bad-id", "This is not a tournament id."),
    ("/tournament?id={uuid}", "not-found", "No tournament with this id."),
    ("/match?id=%3Cscript%3E", "bad-id", "This is not a match id."),
]


@pytest.mark.parametrize(("path", "kind", "words"), CASES, ids=[c[0] for c in CASES])
def test_a_page_asked_for_what_does_not_exist_says_so_and_links_home(
    gateway: Gateway, page: Any, path: str, kind: str, words: str
) -> None:
    page.goto(gateway.base + path.format(uuid=uuid.uuid4()))
    wait_js(page, "() => document.body.dataset.problem !== undefined")
    assert problem(page) == kind
    status = page.inner_text("#status")
    assert status.startswith(words), status
    assert "Connecting" not in status and "Trying again" not in status
    assert page.get_attribute("#status a", "href") == "/"
    # Nothing else: the page's sections would be empty.
    shown = page.eval_on_selector_all(
        "#main > *", "els => els.filter(e => e.offsetParent !== null).map(e => e.tagName)"
    )
    assert shown == ["H1", "P"], shown
    if path == "/match?id={uuid}":
        shoot(page, "match-not-found")
    # Nothing more is asked: trying again cannot help.
    page.wait_for_timeout(2500)
    assert page.eval_on_selector("body", "b => b.dataset.retries || null") is None
    page.click("#status a")
    page.wait_for_url(gateway.base + "/")


@pytest.mark.parametrize("path", ["/match?id={uuid}", "/replay?id={uuid}", "/tournament?id={uuid}"])
def test_a_page_whose_game_server_does_not_answer_says_so_and_keeps_trying(
    silent_gateway: Gateway, page: Any, path: str
) -> None:
    page.goto(silent_gateway.base + path.format(uuid=uuid.uuid4()))
    wait_js(page, "() => document.body.dataset.problem !== undefined")
    assert problem(page) == "unavailable"
    status = page.inner_text("#status")
    assert status.startswith("The game server does not answer. Trying again in 2 s."), status
    assert page.get_attribute("#status a", "href") == "/"
    wait_js(page, "() => Number(document.body.dataset.retries || 0) >= 1", timeout=10)
    wait_js(page, "() => document.querySelector('#status').textContent.includes('in 4 s')")
    assert problem(page) == "unavailable"


def test_the_home_page_says_when_its_game_server_does_not_answer(
    silent_gateway: Gateway, page: Any
) -> None:
    page.goto(silent_gateway.base + "/")
    wait_js(page, "() => document.querySelector('#status').textContent !== ''")
    assert page.inner_text("#status").startswith("The game server does not answer")


# --- 2. the icon --------------------------------------------------------------------------


def test_every_page_has_its_icon_and_no_request_of_it_fails(
    server: ServerProcess, gateway: Gateway, page: Any
) -> None:
    with Client(server.target) as client:
        match = seat_everyone(client, 2, name="Icon table").match_id
    failed: list[str] = []
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text) if m.type in ("error", "warning") else None)
    for path in ("/", f"/match?id={match}", f"/replay?id={match}"):
        page.goto(gateway.base + path)
        wait_js(page, "() => document.querySelector('#status')?.textContent !== 'Connecting…'")
        icon = page.get_attribute("link[rel=icon]", "href")
        assert icon == "/static/favicon.svg", path
        answer = page.request.get(gateway.base + icon)
        assert answer.status == 200 and answer.headers["content-type"] == "image/svg+xml"
    answer = page.request.get(gateway.base + "/favicon.ico")
    assert answer.status == 200 and answer.body()[:4] == b"\x00\x00\x01\x00"
    page.wait_for_timeout(500)
    assert not failed, failed
    assert not [c for c in console if "Content Security Policy" in c], console


# --- 3. the home page ---------------------------------------------------------------------


def row(pg: Any, match_id: str) -> dict[str, str]:
    """The cells of a match's row on the home page, by class, and its <time>s."""
    found: dict[str, str] = pg.eval_on_selector(
        f'tr[data-match="{match_id}"]',
        """tr => {
          const out = {};
          for (const c of tr.children) out[c.className.split(' ').pop()] = c.textContent;
          out.times = [...tr.querySelectorAll('time')]
            .map(t => t.getAttribute('datetime') + '=' + t.textContent).join(' ');
          return out;
        }""",
    )
    return found


def seat_named(client: Client, names: list[str], name: str, **options: Any) -> Table:
    """A match of len(names) seats, each taken by its name (so the first hand is dealt)."""
    created = client.create(len(names), name=name, **options)
    table = Table(created.match_id, len(names), [""] * len(names), created)
    for player in names:
        joined = client.join(created.match_id, player, client_seed=player)
        table.tokens[joined.seat] = joined.seat_token
        table.joins.append(joined)
    return table


def test_the_home_page_tells_matches_apart_by_time_state_hand_and_table(
    server: ServerProcess, gateway: Gateway, browser: Any
) -> None:
    rng = random.Random(5)
    with Client(server.target) as client:
        waiting = client.create(3, name="Waiting table").match_id
        client.join(waiting, "Ada", client_seed="a")
        playing = seat_named(client, ["Bo", "Cy"], "Live table", target=100)
        version = playing.version
        for _ in range(4):
            version = play_random_move([client], rng, playing, version).response.view.version
        won = seat_named(client, ["Dee", "Eve"], "Won table", target=15)
        version = won.version
        while True:
            move = play_random_move([client], rng, won, version)
            version = move.response.view.version
            if move.response.view.phase == pb.PHASE_ENDED:
                break
        resigned = seat_named(
            client, ["Fay", "Gus", "Hal", "Ivy"], "Resigned table", partnerships=True
        )
        client.resign(resigned.match_id, resigned.tokens[1])
        abandoned = seat_named(client, ["Jo", "Kai"], "Abandoned table")
        client.abandon(abandoned.match_id, ORGANISER_TOKEN, note="a no-show")
        final = client.view(won.match_id)
    winner = ["Dee", "Eve"][final.result.winner_side]

    context = browser.new_context(viewport=DESKTOP, locale="en-GB", timezone_id=ZONE)
    try:
        pg = context.new_page()
        errors: list[str] = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.goto(gateway.base + "/")
        wait_js(
            pg,
            f"() => document.querySelector('tr[data-match=\"{abandoned.match_id}\"] td.state')"
            "?.textContent.includes('abandoned')",
        )
        listed = {}
        for phase in ("seating", "playing", "ended"):
            status, body, _ = gateway.get(f"/api/matches?phase={phase}")
            assert status == 200
            listed.update({m["match_id"]: m for m in body["matches"]})

        w = row(pg, waiting)
        created = listed[waiting]["created_at"]
        assert w["state"] == f"waiting for 2 players since {shown_time(created)}"
        assert w["times"] == f"{created}={shown_time(created)}"
        assert w["hand-number"] == "–"
        assert w["players"] == "Ada · (free seat) · (free seat)"
        assert w["table"] == "3 seats, standard"

        p = row(pg, playing.match_id)
        started = listed[playing.match_id]["started_at"]
        assert p["state"] == f"playing since {shown_time(started)}"
        assert p["hand-number"] == str(listed[playing.match_id]["hand"]) == "1"
        scores = listed[playing.match_id]["scores"]
        assert p["players"] == f"Bo: {scores[0]} · Cy: {scores[1]}"
        assert p["table"] == "2 seats, standard"

        e = row(pg, won.match_id)
        assert e["state"].startswith(f"won by {winner}, started ")
        assert int(e["hand-number"]) == final.hand_number >= 1
        r = row(pg, resigned.match_id)
        # Seat 1 (from 0) resigned for its side, seats 1 and 3: the other side won.
        assert r["state"].startswith("Gus resigned; won by Fay and Hal, started ")
        assert r["table"] == "4 seats in partnerships, standard"
        assert row(pg, abandoned.match_id)["state"].startswith("abandoned (“a no-show”), started ")

        shoot(pg, "home")
        pg.set_viewport_size(PHONE)
        pg.wait_for_timeout(100)
        # Readable on a phone: nothing wider than the screen, each cell labelled.
        assert pg.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]
        label = pg.evaluate(
            f"""() => getComputedStyle(document.querySelector(
                 'tr[data-match="{playing.match_id}"] td.hand-number'), '::before').content"""
        )
        assert label == '"Hand: "', label
        assert not errors, errors
    finally:
        context.close()


# --- 4. a tournament page -----------------------------------------------------------------


def tournament_view(client: Client, tid: str) -> pb.TournamentView:
    got: pb.GetTournamentResponse = client.stub.GetTournament(
        pb.GetTournamentRequest(tournament_id=tid)
    )
    return got.tournament


def until(what: str, check: Any, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def being_played(client: Client, match_id: str) -> bool:
    try:
        return client.view(match_id).phase == pb.PHASE_PLAYING
    except grpc.RpcError:
        return False  # not created yet: the server makes a round's matches after pairing it


def cell(pg: Any, selector: str) -> str:
    text: str = pg.evaluate(f"() => document.querySelector({selector!r})?.textContent ?? ''")
    return text


def test_a_tournament_page_names_byes_marks_withdrawals_keeps_live_scores_and_says_who_won(
    server: ServerProcess, gateway: Gateway, page: Any
) -> None:
    with Client(server.target) as client:
        stub = client.stub
        tid = create_swiss(client, "Town cup", ORGANISER_TOKEN, rounds=1, target=100)
        names = {1: "Ada", 2: "Bo", 3: "Cy"}
        tokens: dict[int, str] = {}
        for n, name in names.items():
            reply = stub.RegisterEntrant(
                pb.RegisterEntrantRequest(tournament_id=tid, players=[name], client_seed=name)
            )
            assert reply.entrant == n
            (tokens[n],) = reply.player_tokens
        page.goto(f"{gateway.base}/tournament?id={tid}")
        wait_js(
            page, "() => document.querySelector('#status').textContent.includes('registration')"
        )
        stub.StartTournament(pb.StartTournamentRequest(tournament_id=tid), metadata=ORG)
        view = until(
            "round 1 and its match",
            lambda: (
                (v := tournament_view(client, tid)).rounds and v.rounds[0].tables[0].match_id and v
            ),
        )
        (bye,) = view.rounds[0].byes
        table = view.rounds[0].tables[0]
        match, sides = table.match_id, list(table.sides)
        until("the match seated by the server", lambda: being_played(client, match))
        # A bye is named, not numbered.
        wait_js(page, "() => document.querySelector('.byes') !== null")
        assert cell(page, ".byes") == f"Bye: {names[bye]} (#{bye})"

        # The organiser withdraws the entrant with the bye: it stays in the standings, marked.
        stub.WithdrawEntrant(
            pb.WithdrawEntrantRequest(tournament_id=tid, entrant=bye), metadata=ORG
        )
        gone = next(e for e in tournament_view(client, tid).entrants if e.entrant == bye)
        mark = "withdrawn after round 1" + (
            " by the organiser" if gone.withdrawn_by == pb.ACTOR_ORGANISER else ""
        )
        wait_js(page, f"() => document.querySelector('tr.withdrawn[data-entrant=\"{bye}\"]')")
        assert f"{names[bye]} (#{bye}) ({mark})" in cell(page, f'tr[data-entrant="{bye}"]')
        others = [n for n in names if n != bye]
        assert not page.query_selector_all(
            ", ".join(f'tr.withdrawn[data-entrant="{n}"]' for n in others)
        )

        # Scores made within a hand show at the table while it is played, not only when the
        # hand ends.
        live = 'tr[data-round="1"][data-table="1"] td.result'
        for _ in range(400):
            public = client.view(match)
            seat = public.turn
            token = tokens[sides[seat]]
            mine = client.view(match, token)
            choice = mine.legal_plays[0]
            played = client.play(match, choice.tile, choice.end, token)
            kinds = {e.WhichOneof("body") for e in played.events}
            if "points_scored" in kinds and "hand_ended" not in kinds:
                break
        else:
            raise AssertionError("no points were scored within a hand")
        scores = list(played.view.scores)
        want = f"live {scores[0]} – {scores[1]}"
        wait_js(page, f"() => document.querySelector({live!r})?.textContent === {want!r}")
        shoot(page, "tournament-live")

        # The side behind (or level) resigns: the other wins the match and the tournament.
        loser = 0 if scores[0] <= scores[1] else 1
        client.resign(match, tokens[sides[loser]])
        winner = sides[1 - loser]
        page.wait_for_selector("body[data-ended='1']", timeout=30_000)
        final = tournament_view(client, tid)
        assert final.standings[0].entrant == winner
    assert cell(page, "#winner") == f"Won by {names[winner]} (#{winner}), with 1 match point."
    assert page.is_visible("#winner")
    shoot(page, "tournament-ended")
