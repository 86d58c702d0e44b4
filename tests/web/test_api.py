"""The gateway's JSON and Server-Sent Events API against a real `bergen serve` (PostgreSQL)
and a real `bergen web`: the shapes, the refusals, resuming a stream by Last-Event-ID with no
gap and no repeat, the limits, and the test that no payload sent while a match is live holds
a tile of any hand or of the boneyard."""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import grpc
import pytest
from e2e.client import (
    Client,
    bearer,
    create_swiss,
    event_in,
    play_random_move,
    seat_everyone,
)
from e2e.servers import ServerFarm, ServerProcess
from google.protobuf import json_format

from bergen.domain.state import fold
from bergen.domain.tiles import Tile
from bergen.v1 import bergen_pb2 as pb

from .conftest import ORGANISER_TOKEN
from .gateway import EventStream, Gateway, Message, start_gateway

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(300)]

ALL_TILES = {Tile.of(a, b) for a in range(7) for b in range(a, 7)}


def tiles_of(value: Any, key: str = "") -> list[Tile]:
    """Every tile in a JSON value: {low, high} objects, and the line's {left, right}."""
    found: list[Tile] = []
    if isinstance(value, dict):
        if set(value) >= {"low", "high"}:
            found.append(Tile.of(int(value["low"]), int(value["high"])))
        elif key == "line" or (set(value) == {"left", "right"}):
            found.append(Tile.of(int(value["left"]), int(value["right"])))
        for k, v in value.items():
            found += tiles_of(v, k)
    elif isinstance(value, list):
        for v in value:
            found += tiles_of(v, key)
    return found


def sse_reader(stream: EventStream, out: list[Message], stop: threading.Event) -> threading.Thread:
    def run() -> None:
        try:
            for msg in stream.messages():
                out.append(msg)
                if msg.kind == "end" or stop.is_set():
                    return
        except OSError:
            return

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def wait_for(predicate: Any, timeout: float = 60.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


def event_seqs(messages: list[Message]) -> list[int]:
    return [int(m.data["seq"]) for m in messages if m.kind == "event"]


def test_json_shapes_and_refusals(server: ServerProcess, gateway: Gateway) -> None:
    with Client(server.target) as client:
        table = seat_everyone(client, 2, name="shapes")
        status, listing, headers = gateway.get("/api/matches?phase=playing")
        assert status == 200 and headers["content-security-policy"].startswith("default-src")
        assert table.match_id in [m["match_id"] for m in listing["matches"]]
        status, view, _ = gateway.get(f"/api/matches/{table.match_id}")
        assert status == 200
        assert view["phase"] == "PHASE_PLAYING" and view["name"] == "shapes"
        assert [s["name"] for s in view["seats"]] == ["player 0", "player 1"]
        assert [s["seat"] for s in view["seats"]] == [0, 1]  # zeros present
        assert view["my_tiles"] == [] and view["revealed_hands"] == [] and "viewer_seat" not in view
        assert int(view["version"]) == table.version
        status, replay, _ = gateway.get(f"/api/matches/{table.match_id}/replay")
        assert status == 200 and replay["complete"] is False
        assert [int(e["seq"]) for e in replay["events"]] == list(range(1, table.version + 1))
        status, body, _ = gateway.get(f"/api/matches/{table.match_id}/record")
        assert status == 409 and body["code"] == "FAILED_PRECONDITION"

        assert gateway.get("/api/matches/not%20an%20id")[0] == 400
        assert gateway.get("/api/matches/" + "a" * 101)[0] == 400
        assert gateway.get(f"/api/matches/{uuid.uuid4()}")[0] == 404
        assert gateway.get("/api/matches?phase=over")[0] == 400
        assert gateway.get("/api/matches?page_token=%3Cscript%3E")[0] == 400
        assert gateway.get(f"/api/matches/{table.match_id}/replay?after=-1")[0] == 400
        assert gateway.get(f"/api/matches/{uuid.uuid4()}/events")[0] == 404
        status, info, _ = gateway.get("/api/server")
        assert status == 200 and len(info["public_key"]) == 64
        status, tours, _ = gateway.get("/api/tournaments")
        assert status == 200 and "tournaments" in tours
        for page in ("/", "/match?id=x", "/replay?id=x", "/tournament?id=x", "/static/app.css"):
            status, _, headers = gateway.get(page)
            assert status == 200, page
            assert "script-src 'self'" in headers["content-security-policy"]


def test_no_tile_of_a_hand_or_the_boneyard_in_any_payload_while_live(
    server: ServerProcess, gateway: Gateway
) -> None:
    rng = random.Random(15)
    with Client(server.target) as client:
        table = seat_everyone(client, 3, name="hidden", target=20)
        match = table.match_id
        stop = threading.Event()
        early: list[Message] = []
        early_stream = EventStream(gateway, f"/api/matches/{match}/events")
        assert early_stream.status == 200
        sse_reader(early_stream, early, stop)
        streams = [early_stream]
        late: list[Message] = []
        seat_views: dict[int, list[list[Tile]]] = {}  # version -> each seat's tiles
        json_payloads: list[Any] = []
        seat_payloads: list[tuple[int, Any]] = []
        moves = 0
        final_first_seq = 0
        version = table.version
        while True:
            if moves == 5:  # a second spectator joins mid-match, from the first event
                late_stream = EventStream(gateway, f"/api/matches/{match}/events?after=0")
                sse_reader(late_stream, late, stop)
                streams.append(late_stream)
            for path in (f"/api/matches/{match}", f"/api/matches/{match}/replay"):
                status, body, _ = gateway.get(path)
                assert status == 200
                json_payloads.append(body)
            mine = [client.view(match, table.tokens[s]) for s in range(3)]
            if len({v.version for v in mine}) == 1:
                seat_payloads.append(
                    (
                        mine[0].version,
                        json_format.MessageToDict(
                            mine[0],
                            preserving_proto_field_name=True,
                            always_print_fields_with_no_presence=True,
                        ),
                    )
                )
                seat_views[mine[0].version] = [
                    [Tile.of(t.low, t.high) for t in v.my_tiles] for v in mine
                ]
            move = play_random_move([client], rng, table, version)
            moves += 1
            seqs = [e.seq for e in move.response.events]
            version = move.response.view.version
            if move.response.view.phase == pb.PHASE_ENDED:
                final_first_seq = min(seqs)
                break
            # Lockstep: every payload of this move is delivered before the next is played.
            wait_for(lambda v=version: v in event_seqs(early), what=f"seq {version} on the stream")
        wait_for(lambda: any(m.kind == "end" for m in early), what="the end of the stream")
        wait_for(lambda: any(m.kind == "end" for m in late), what="the end of the late stream")
        stop.set()
        for s in streams:
            s.close()
        events = list(client.replay(match).events)
    assert moves > 10

    # The streams: every event once, in order, none missing.
    all_seqs = list(range(1, len(events) + 1))
    assert event_seqs(early) == all_seqs
    assert event_seqs(late) == all_seqs
    assert [m.id for m in late if m.kind == "event"] == [str(s) for s in all_seqs]
    assert all(m.id is None for m in late if m.kind != "event")

    # The state at each seq, folded from the whole record once the match has ended.
    domain_events = [event_in(e) for e in events]
    states = {}
    for n in range(1, len(events) + 1):
        states[n] = fold(domain_events[:n])
    # The hands the seats' own tokens saw are those of the fold (so "hidden" below is right).
    for v, hands in seat_views.items():
        assert [sorted(h) for h in hands] == [sorted(t for t in h if t) for h in states[v].hands]

    def hidden(v: int) -> set[Tile]:
        s = states[v]
        return {t for h in s.hands for t in h if t} | {t for t in s.boneyard if t}

    checked = 0

    def check(payload: Any, v: int) -> None:
        nonlocal checked
        if v >= final_first_seq:
            return  # sent once the match had ended
        leaked = set(tiles_of(payload)) & hidden(v)
        assert not leaked, f"tiles {leaked} hidden at seq {v} in {json.dumps(payload)[:400]}"
        checked += 1

    for msg in [*early, *late]:
        if msg.kind == "event":
            check(msg.data, int(msg.data["seq"]))
        elif msg.kind == "view":
            assert msg.data["my_tiles"] == []
            if int(msg.data["version"]) < final_first_seq:
                assert msg.data["revealed_hands"] == [] and msg.data["server_seed"] == ""
            check(msg.data, int(msg.data["version"]))
    for body in json_payloads:
        if "events" in body:
            for e in body["events"]:
                check(e, int(e["seq"]))
        else:
            check(body, int(body["version"]))
    assert checked > 100
    # The check can fail: a seat's own view, sent to a spectator, would be caught.
    for v, payload in seat_payloads:
        assert set(tiles_of(payload)) & hidden(v), (v, payload)
    # Every tile a spectator was shown while live was on the line by then.
    for msg in early:
        if msg.kind == "event" and int(msg.data["seq"]) < final_first_seq:
            drawn = msg.data.get("tile_drawn")
            assert drawn is None or "tile" not in drawn
            dealt = msg.data.get("dealt")
            assert dealt is None or all(h["tiles"] == [] for h in dealt["hands"])
    # The raw bytes too: nothing but what was parsed.
    assert b'my_tiles":[{' not in bytes(early_stream.raw)


def test_resume_by_last_event_id_without_gap_or_repeat(
    server: ServerProcess, gateway: Gateway
) -> None:
    rng = random.Random(7)
    with Client(server.target) as client:
        table = seat_everyone(client, 2, name="resume", target=30)
        match = table.match_id
        version = table.version
        for _ in range(6):  # played before anyone follows: the gap comes from the replay
            version = play_random_move([client], rng, table, version).response.view.version
        first = EventStream(gateway, f"/api/matches/{match}/events")
        got: list[int] = []
        for msg in first.messages():
            if msg.kind == "event":
                got.append(int(msg.data["seq"]))
                if got[-1] == version:
                    break
        first.close()
        assert got == list(range(1, version + 1))
        # Moves while disconnected, then resume: Last-Event-ID wins over ?after=.
        for _ in range(4):
            version = play_random_move([client], rng, table, version).response.view.version
        second = EventStream(
            gateway, f"/api/matches/{match}/events?after=1", last_event_id=str(got[-1])
        )
        kinds = []
        for msg in second.messages():
            kinds.append(msg.kind)
            if msg.kind == "event":
                got.append(int(msg.data["seq"]))
                if got[-1] == version:
                    break
        second.close()
        assert kinds[0] == "view"
        assert got == list(range(1, version + 1))
        # A reloaded page names its last seq with ?after=.
        third = EventStream(gateway, f"/api/matches/{match}/events?after={version - 2}")
        seqs = []
        for msg in third.messages():
            if msg.kind == "event":
                seqs.append(int(msg.data["seq"]))
                if len(seqs) == 2:
                    break
        third.close()
        assert seqs == [version - 1, version]
        assert gateway.get(f"/api/matches/{match}/events?after=x")[0] == 400
        bad = EventStream(gateway, f"/api/matches/{match}/events", last_event_id="1e9")
        assert bad.status == 400
        bad.close()


def test_streams_are_bounded(server: ServerProcess, module_farm: ServerFarm) -> None:
    gw = start_gateway(
        server.target, module_farm.workdir, "--max-streams", "2", "--max-matches", "1"
    )
    try:
        with Client(server.target) as client:
            a = seat_everyone(client, 2, name="a")
            b = seat_everyone(client, 2, name="b")
            s1 = EventStream(gw, f"/api/matches/{a.match_id}/events")
            assert s1.status == 200
            s2 = EventStream(gw, f"/api/matches/{b.match_id}/events")
            assert s2.status == 503  # a second match past --max-matches 1
            assert s2.response.getheader("Retry-After") == "2"
            s2.close()
            s3 = EventStream(gw, f"/api/matches/{a.match_id}/events")
            assert s3.status == 200
            s4 = EventStream(gw, f"/api/matches/{a.match_id}/events")
            assert s4.status == 503  # a third stream past --max-streams 2
            s4.close()
            _, health, _ = gw.get("/api/health")
            assert health["streams"] == 2 and health["matches_followed"] == 1
            assert health["upstream_calls"]["WatchMatch"] == 1  # shared by both streams
            s1.close()
            s3.close()
            wait_for(lambda: gw.get("/api/health")[1]["streams"] == 0, what="streams released")
    finally:
        assert gw.stop() == 0, gw.log()


# --- what the pages need of the API ------------------------------------------------------------


def test_an_id_of_nothing_is_refused_with_a_code_a_page_can_put_in_words(
    gateway: Gateway, silent_gateway: Gateway
) -> None:
    nobody = uuid.uuid4()
    cases = [
        ("/api/matches/nope", 400, "INVALID_ARGUMENT"),
        (f"/api/matches/{nobody}", 404, "NOT_FOUND"),
        ("/api/matches/not%20an%20id", 400, "BAD_REQUEST"),
        ("/api/matches/nope/events", 400, "INVALID_ARGUMENT"),
        (f"/api/matches/{nobody}/events", 404, "NOT_FOUND"),
        ("/api/tournaments/nope", 400, "INVALID_ARGUMENT"),
        (f"/api/tournaments/{nobody}", 404, "NOT_FOUND"),
        (f"/api/tournaments/{nobody}/events", 404, "NOT_FOUND"),
    ]
    for path, status, code in cases:
        got, body, _ = gateway.get(path)
        assert (got, body.get("code")) == (status, code), (path, body)
        assert body["error"], path
    # A game server that does not answer: 503, which a page retries.
    for path in (f"/api/matches/{nobody}", f"/api/matches/{nobody}/events"):
        got, body, _ = silent_gateway.get(path)
        assert (got, body.get("code")) == (503, "UNAVAILABLE"), (path, body)


def test_the_health_endpoint_says_whether_the_game_server_serves(
    gateway: Gateway, silent_gateway: Gateway
) -> None:
    status, body, headers = gateway.get("/api/health")
    assert (status, body["upstream"]) == (200, "SERVING")
    assert headers["cache-control"] == "no-store"
    # No game server: the gateway answers, but a load balancer should send nobody here.
    status, body, _ = silent_gateway.get("/api/health")
    assert (status, body["upstream"]) == (503, "UNAVAILABLE")
    assert body["streams"] == 0


def test_the_icon_is_served_and_every_page_links_it(gateway: Gateway) -> None:
    status, body, headers = gateway.get("/favicon.ico")
    assert status == 200 and headers["content-type"] == "image/x-icon"
    assert body[:4] == b"\x00\x00\x01\x00" and len(body) < 10_000  # an ICO, small
    assert "max-age" in headers["cache-control"]
    status, svg, headers = gateway.get("/static/favicon.svg")
    assert status == 200 and headers["content-type"].startswith("image/svg+xml")
    assert svg.startswith(b"<svg") and b"<script" not in svg
    for page in ("/", "/match?id=x", "/replay?id=x", "/tournament?id=x"):
        _, html, _ = gateway.get(page)
        assert b'<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in html, page


def stamp(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_the_listing_says_when_each_match_was_created_and_started_its_hand_and_how_it_ended(
    server: ServerProcess, gateway: Gateway
) -> None:
    rng = random.Random(4)
    before = datetime.now(UTC)
    with Client(server.target) as client:
        waiting = client.create(2, name="listing: waiting").match_id
        client.join(waiting, "Ada", client_seed="a")
        playing = seat_everyone(client, 2, name="listing: playing", target=100)
        version = playing.version
        hand = 1
        while hand < 2:  # into the second hand
            move = play_random_move([client], rng, playing, version)
            version, hand = move.response.view.version, move.response.view.hand_number
        resigned = seat_everyone(client, 2, name="listing: resigned")
        client.resign(resigned.match_id, resigned.tokens[0])
    after = datetime.now(UTC)
    listed = {}
    for phase in ("seating", "playing", "ended"):
        status, body, _ = gateway.get(f"/api/matches?phase={phase}")
        assert status == 200
        listed.update({m["match_id"]: m for m in body["matches"]})

    w, p, r = listed[waiting], listed[playing.match_id], listed[resigned.match_id]
    for m in (w, p, r):
        assert before <= stamp(m["created_at"]) <= after, m
    assert "started_at" not in w and w["hand"] == 0 and "result" not in w
    assert stamp(p["created_at"]) < stamp(p["started_at"]) <= after
    assert p["hand"] == 2 and "result" not in p
    assert stamp(r["created_at"]) < stamp(r["started_at"]) and r["hand"] == 1
    # How an ended match ended: as its view's result (seats and sides from 0, as the API).
    assert r["result"]["reason"] == "MATCH_END_REASON_FORFEIT"
    assert r["result"]["cause"] == "FORFEIT_CAUSE_RESIGNED"
    assert (r["result"]["resigned_seat"], r["result"]["winner_side"]) == (0, 1)
    # Read once: a second page is answered from what the gateway kept.
    _, health, _ = gateway.get("/api/health")
    calls = health["upstream_calls"].get("GetMatch", 0)
    gateway.get("/api/matches?phase=ended")
    assert gateway.get("/api/health")[1]["upstream_calls"].get("GetMatch", 0) == calls


def test_a_tournament_stream_sends_scores_made_within_a_hand_and_a_reconnect_the_latest(
    server: ServerProcess, gateway: Gateway
) -> None:
    with Client(server.target) as client:
        stub = client.stub
        org = bearer(ORGANISER_TOKEN)
        tid = create_swiss(client, "api cup", ORGANISER_TOKEN, rounds=1, target=100)
        tokens = {}
        for name in ("Ada", "Bo"):
            reply = stub.RegisterEntrant(
                pb.RegisterEntrantRequest(tournament_id=tid, players=[name], client_seed=name)
            )
            tokens[reply.entrant] = reply.player_tokens[0]
        stub.StartTournament(pb.StartTournamentRequest(tournament_id=tid), metadata=org)
        stream = EventStream(gateway, f"/api/tournaments/{tid}/events")
        views: list[Message] = []
        stop = threading.Event()
        sse_reader(stream, views, stop)

        def table() -> Any:
            got = [m.data for m in views if m.kind == "tournament"]
            rounds = got[-1]["rounds"] if got else []
            return rounds[0]["tables"][0] if rounds and rounds[0]["tables"][0]["match_id"] else None

        wait_for(table, timeout=30, what="round 1's match")
        match, sides = table()["match_id"], [int(s) for s in table()["sides"]]

        def being_played() -> bool:
            try:
                return client.view(match).phase == pb.PHASE_PLAYING
            except grpc.RpcError:
                return False  # not created yet: the server makes a round's matches after it

        wait_for(being_played, timeout=30, what="the match seated by the server")
        for _ in range(400):
            seat = client.view(match).turn
            mine = client.view(match, tokens[sides[seat]])
            choice = mine.legal_plays[0]
            played = client.play(match, choice.tile, choice.end, tokens[sides[seat]])
            kinds = {e.WhichOneof("body") for e in played.events}
            if "points_scored" in kinds and "hand_ended" not in kinds:
                break
        else:
            raise AssertionError("no points were scored within a hand")
        scores = list(played.view.scores)
        wait_for(
            lambda: table().get("live_scores") == scores, timeout=15, what=f"live scores {scores}"
        )
        version = views[-1].id
        stop.set()
        stream.close()
        # A reconnect naming the version it had still gets the view as it is now.
        again = EventStream(gateway, f"/api/tournaments/{tid}/events", last_event_id=str(version))
        first = next(m for m in again.messages() if m.kind == "tournament")
        again.close()
        assert first.data["rounds"][0]["tables"][0]["live_scores"] == scores
        _, health, _ = gateway.get("/api/health")
        assert health["tournaments_followed"] <= 1
