"""Pages on views crafted for the purpose (tests/web/fake_upstream.py) through a real
`bergen web`, in a real browser: a tournament's interventions, its cancellation, who withdrew
an entrant and a shared first place; a match ended by a resignation, whose server note names
the seat from 0. People read seats and sides from 1 on every page; the API counts from 0.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from bergen.v1 import bergen_pb2 as pb

from .browsing import browser, page, wait_js
from .fake_upstream import Crafted, serve
from .gateway import Gateway, start_gateway

__all__ = ["browser", "page"]

pytestmark = [pytest.mark.timeout(120)]

CUP = str(uuid.uuid4())
CANCELLED = str(uuid.uuid4())
RESIGNED = str(uuid.uuid4())


def club_cup() -> pb.TournamentView:
    """An ended Swiss of four: one entrant withdrawn by the server before round 1, one by the
    organiser after round 1, one by itself after round 2; a table abandoned, one forfeited;
    the two left equal on every figure."""
    view = pb.TournamentView(
        tournament_id=CUP,
        name="Club cup",
        settings=pb.TournamentSettings(format=pb.TOURNAMENT_FORMAT_SWISS, seats=2, rounds=2),
        phase=pb.TOURNAMENT_PHASE_ENDED,
        round=2,
        total_rounds=2,
        version=40,
    )
    view.entrants.add(entrant=1, players=["Ada"])
    view.entrants.add(
        entrant=2, players=["Bo"], withdrawn_after_round=1, withdrawn_by=pb.ACTOR_ORGANISER
    )
    view.entrants.add(
        entrant=3, players=["Cy"], withdrawn_after_round=0, withdrawn_by=pb.ACTOR_SERVER
    )
    view.entrants.add(
        entrant=4, players=["Dee"], withdrawn_after_round=2, withdrawn_by=pb.ACTOR_ENTRANT
    )
    one = view.rounds.add(round=1, byes=[4])
    one.tables.add(
        table=1,
        match_id=str(uuid.uuid4()),
        sides=[1, 2],
        result=pb.TableResult(
            reason=pb.MATCH_END_REASON_ABANDONED,
            scores=[3, 1],
            places=[1, 1],
            match_points=["1/2", "1/2"],
            margins=[0, 0],
        ),
    )
    two = view.rounds.add(round=2)
    two.tables.add(
        table=1,
        match_id=str(uuid.uuid4()),
        sides=[4, 1],
        result=pb.TableResult(
            reason=pb.MATCH_END_REASON_FORFEIT,
            scores=[5, 2],
            places=[2, 1],
            match_points=["0", "1"],
            margins=[3, -3],
            forfeited_side=0,
        ),
    )
    for rank, (entrant, points) in enumerate([(1, "3/2"), (4, "3/2"), (2, "1/2"), (3, "0")], 1):
        view.standings.add(
            rank=rank, entrant=entrant, match_points=points, margin=0, buchholz="1", wins=0
        )
    view.interventions.add(
        round=0, action=pb.INTERVENTION_ACTION_WITHDRAW, by=pb.ACTOR_SERVER, entrant=3
    )
    view.interventions.add(
        round=1, table=1, action=pb.INTERVENTION_ACTION_ABANDON, by=pb.ACTOR_ORGANISER,
        note="the lights went out",
    )  # fmt: skip
    view.interventions.add(
        round=1, action=pb.INTERVENTION_ACTION_WITHDRAW, by=pb.ACTOR_ORGANISER, entrant=2,
        note="a no-show",
    )  # fmt: skip
    view.interventions.add(
        round=1, action=pb.INTERVENTION_ACTION_START_ROUND, by=pb.ACTOR_ORGANISER
    )
    view.interventions.add(
        round=2, table=1, action=pb.INTERVENTION_ACTION_FORFEIT, by=pb.ACTOR_ORGANISER, entrant=4
    )
    return view


def cancelled_cup() -> pb.TournamentView:
    view = pb.TournamentView(
        tournament_id=CANCELLED,
        name="Spring cup",
        settings=pb.TournamentSettings(format=pb.TOURNAMENT_FORMAT_SWISS, seats=2, rounds=3),
        phase=pb.TOURNAMENT_PHASE_ENDED,
        total_rounds=3,
        version=3,
        cancelled=True,
    )
    view.entrants.add(entrant=1, players=["Ada"])
    view.standings.add(rank=1, entrant=1, match_points="0", buchholz="0")
    view.interventions.add(
        round=0, action=pb.INTERVENTION_ACTION_CANCEL, by=pb.ACTOR_ORGANISER,
        note="not enough players",
    )  # fmt: skip
    return view


def resigned_match() -> tuple[pb.MatchView, list[pb.Event]]:
    """Two unnamed seats; seat 0 (from 0) resigns, as the server's note says in its words."""
    result = pb.Result(
        reason=pb.MATCH_END_REASON_FORFEIT,
        winner_side=1,
        scores=[2, 5],
        resigned_seat=0,
        note="seat 0 resigned",
        forfeited_side=0,
        cause=pb.FORFEIT_CAUSE_RESIGNED,
    )
    view = pb.MatchView(
        match_id=RESIGNED,
        name="Resigned",
        phase=pb.PHASE_ENDED,
        rules=pb.Rules(preset=pb.PRESET_STANDARD),
        hand_number=1,
        scores=[2, 5],
        result=result,
        version=11,
    )
    for seat in (0, 1):
        view.seats.add(seat=seat, name="", taken=True, side=seat)
    tile = pb.Tile(low=3, high=3)
    bodies: list[dict[str, Any]] = [
        {"match_created": pb.MatchCreated(match_id=RESIGNED, seats=2, name="Resigned")},
        {"seat_taken": pb.SeatTaken(seat=0, name="")},
        {"seat_taken": pb.SeatTaken(seat=1, name="")},
        {"dealt": pb.Dealt(hand=1, attempt=1, boneyard_size=14)},
        {"tile_played": pb.TilePlayed(hand=1, seat=0, tile=tile)},
        {"tile_drawn": pb.TileDrawn(hand=1, seat=1)},
        {"passed": pb.Passed(hand=1, seat=1)},
        {
            "points_scored": pb.PointsScored(
                hand=1, side=0, points=2, base=2, reason=pb.POINTS_REASON_DOUBLE_HEADER, seat=0
            )
        },
        {"timed_out": pb.TimedOut(hand=1, seat=0, at_ms=1000)},
        {
            "hand_ended": pb.HandEnded(
                hand=1, reason=pb.HAND_END_REASON_DOMINO, side=1, points=5, scores=[2, 5]
            )
        },
        {"match_ended": pb.MatchEnded(result=result)},
    ]
    events = [pb.Event(seq=i, **body) for i, body in enumerate(bodies, 1)]
    return view, events


@pytest.fixture(scope="module")
def crafted_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    crafted = Crafted(
        matches={RESIGNED: resigned_match()},
        tournaments={CUP: club_cup(), CANCELLED: cancelled_cup()},
    )
    server, address = serve(crafted)
    gw = start_gateway(address, tmp_path_factory.mktemp("crafted"))
    try:
        yield gw
    finally:
        code = gw.stop()
        server.stop(grace=None)
        assert code == 0, gw.log()


def texts(pg: Any, selector: str) -> list[str]:
    found: list[str] = pg.eval_on_selector_all(selector, "els => els.map(e => e.textContent)")
    return found


def test_a_tournament_page_shows_its_interventions_withdrawals_and_shared_first_place(
    crafted_gateway: Gateway, page: Any
) -> None:
    page.goto(f"{crafted_gateway.base}/tournament?id={CUP}")
    page.wait_for_selector("body[data-ended='1']")
    assert page.inner_text("#winner") == (
        "First place shared by Ada (#1) and Dee (#4), with 3/2 match points each (equal on"
        " every figure; the standings order them by seeding)."
    )
    assert texts(page, "#interventions li") == [
        "Before round 1: Cy (#3) withdrawn, by the server",
        "Round 1, table 1: match abandoned, by the organiser: “the lights went out”",
        "Round 1: Bo (#2) withdrawn, by the organiser: “a no-show”",
        "Round 1: a round paired by hand, by the organiser",
        "Round 2, table 1: match forfeited by Dee (#4), by the organiser",
    ]
    assert page.is_visible("#interventions-section")
    marks = dict(
        zip(
            page.eval_on_selector_all(
                "#standings tbody tr", "els => els.map(e => e.dataset.entrant)"
            ),
            texts(page, "#standings tbody tr td:nth-child(2)"),
            strict=True,
        )
    )
    assert marks == {
        "1": "Ada (#1)",
        "4": "Dee (#4) (withdrew after round 2)",
        "2": "Bo (#2) (withdrawn after round 1 by the organiser)",
        "3": "Cy (#3) (withdrawn before round 1 by the server (no seed revealed))",
    }
    assert page.eval_on_selector_all("tr.withdrawn", "els => els.length") == 3
    assert texts(page, ".byes") == ["Bye: Dee (#4)"]
    # A forfeit names the entrant of the side (from 0) that forfeited.
    assert "5 – 2, forfeited by Dee" in texts(page, "#rounds td.result")


def test_a_cancelled_tournament_says_so_and_names_no_winner(
    crafted_gateway: Gateway, page: Any
) -> None:
    page.goto(f"{crafted_gateway.base}/tournament?id={CANCELLED}")
    page.wait_for_selector("body[data-ended='1']")
    assert page.inner_text("#status").startswith("cancelled before its start: swiss")
    assert not page.is_visible("#winner")
    assert texts(page, "#interventions li") == [
        "Before round 1: tournament cancelled, by the organiser: “not enough players”"
    ]
    assert page.query_selector("#links a[href$='audit-pack.zip']") is None


def test_seats_and_sides_read_from_1_on_every_page_whatever_the_servers_note(
    crafted_gateway: Gateway, browser: Any
) -> None:
    context = browser.new_context()
    try:
        pg = context.new_page()
        pg.goto(f"{crafted_gateway.base}/match?id={RESIGNED}")
        pg.wait_for_selector("body[data-ended='1']")
        wait_js(pg, "() => document.querySelectorAll('#log li').length === 11")
        assert pg.inner_text("#status") == "Ended: seat 1 resigned; won by seat 2, 2 to 5"
        log = texts(pg, "#log li")
        assert log[1:] == [
            "seat 1 taken",
            "seat 2 taken",
            "Hand 1 dealt (attempt 1), 14 in the boneyard",
            "seat 1 led 3-3",
            "seat 2 drew a tile",
            "seat 2 passed",
            "seat 1 scored 2: double header",
            "seat 1's clock fell",
            "Hand 1 ended: domino, seat 2 took 5; scores 2 to 5",
            "Match ended: seat 1 resigned; won by seat 2, 2 to 5",
        ]
        seen = [pg.inner_text("main")]
        pg.goto(f"{crafted_gateway.base}/replay?id={RESIGNED}")
        pg.wait_for_selector("body[data-step='11']")
        seen.append(pg.inner_text("main"))
        assert "Match ended: seat 1 resigned; won by seat 2, 2 to 5" in seen[-1]
        pg.goto(f"{crafted_gateway.base}/")
        pg.wait_for_selector(f'tr[data-match="{RESIGNED}"]')
        wait_js(
            pg,
            f"() => document.querySelector('tr[data-match=\"{RESIGNED}\"] td.state')"
            ".textContent.includes('resigned')",
        )
        seen.append(pg.inner_text("main"))
        for page_text in seen:
            assert not any(w in page_text for w in ("seat 0", "side 0", "Seat 0")), page_text
    finally:
        context.close()
