"""The players' API against a real `bergen serve` (PostgreSQL) and a real `bergen web`:
creating and joining a match (joining again gives back the same seat), playing it, the
refusals (a stale version, not one's turn, an illegal play, a cross-site POST, no seat) that
change nothing, the one-time link for another device (made on one gateway process, opened
once through another), a restarted gateway keeping its players seated, and the seat token in
no answer, stream and log line of the gateway."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Iterator
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from e2e.servers import ServerFarm, ServerProcess

from bergen.cli_client.web.players import Sealer

from .gateway import EventStream, Gateway, Message, start_gateway

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(300)]


class Player:
    """A browser as the gateway sees it: a cookie jar, same-origin POSTs, and every answer's
    body and headers kept."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.cookies: dict[str, tuple[str, str]] = {}
        """name -> (value, path)."""
        self.seen: list[bytes] = []

    def _cookie_header(self, path: str) -> str:
        return "; ".join(
            f"{k}={v}" for k, (v, p) in self.cookies.items() if path.split("?")[0].startswith(p)
        )

    def request(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, Any, dict[str, str]]:
        conn = http.client.HTTPConnection("127.0.0.1", self.gateway.port, timeout=20)
        sent = {"Sec-Fetch-Site": "same-origin", **(headers or {})}
        sent = {k: v for k, v in sent.items() if v}  # "" drops a header
        cookie = self._cookie_header(path)
        if cookie:
            sent["Cookie"] = cookie
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            sent.setdefault("Content-Type", "application/json")
        try:
            conn.request(method, path, body=data, headers=sent)
            response = conn.getresponse()
            raw = response.read()
            self.seen.append(raw)
            for k, v in response.getheaders():
                self.seen.append(f"{k}: {v}".encode())
                if k.lower() == "set-cookie":
                    jar: SimpleCookie = SimpleCookie()
                    jar.load(v)
                    for name, morsel in jar.items():
                        self.cookies[name] = (morsel.value, morsel["path"] or "/")
            kind = response.getheader("content-type", "")
            parsed = json.loads(raw) if kind.startswith("application/json") else raw
            answered: dict[str, str] = {}
            for k, v in response.getheaders():
                # Several Set-Cookie headers: one line each, in the order sent.
                key = k.lower()
                answered[key] = f"{answered[key]}\n{v}" if key in answered else v
            return response.status, parsed, answered
        finally:
            conn.close()

    def post(self, path: str, body: Any = None, **kw: Any) -> tuple[int, Any, dict[str, str]]:
        return self.request("POST", path, {} if body is None else body, **kw)

    def view(self, match: str) -> dict[str, Any]:
        status, body, _ = self.request("GET", f"/api/play/matches/{match}")
        assert status == 200, body
        assert isinstance(body, dict)
        return body

    def tokens(self, sealer: Sealer) -> list[str]:
        """The seat tokens this browser's cookies hold."""
        out = []
        for value, _ in self.cookies.values():
            held = sealer.open(value)
            if held is not None:
                out.append(held.token)
        return out


@pytest.fixture(scope="module")
def key_file(module_farm: ServerFarm) -> Path:
    return module_farm.workdir / "seal.key"


@pytest.fixture(scope="module")
def server(module_farm: ServerFarm, module_pg_database: str) -> ServerProcess:
    return module_farm.start(module_pg_database)


@pytest.fixture(scope="module")
def gateway(server: ServerProcess, module_farm: ServerFarm, key_file: Path) -> Iterator[Gateway]:
    gw = start_gateway(server.target, module_farm.workdir, "--seal-key-file", str(key_file))
    yield gw
    assert gw.stop() == 0, gw.log()


def tiles_in(value: Any) -> set[tuple[int, int]]:
    """Every {low, high} tile in a JSON value."""
    found: set[tuple[int, int]] = set()
    if isinstance(value, dict):
        if {"low", "high"} <= set(value):
            found.add((int(value["low"]), int(value["high"])))
        for v in value.values():
            found |= tiles_in(v)
    elif isinstance(value, list):
        for v in value:
            found |= tiles_in(v)
    return found


def create(player: Player, seats: int = 2, **extra: Any) -> dict[str, Any]:
    body = {"name": "Ada", "seats": seats, "partnerships": False, "preset": "standard"}
    status, answer, _ = player.post("/api/play/matches", {**body, **extra})
    assert status == 201, answer
    assert isinstance(answer, dict)
    return answer


def two_seated(gateway: Gateway) -> tuple[str, Player, Player]:
    ada, bo = Player(gateway), Player(gateway)
    match = create(ada)["match_id"]
    status, joined, _ = bo.post(f"/api/play/matches/{match}/join", {"name": "Bo"})
    assert status == 201, joined
    return match, ada, bo


def to_play(match: str, players: list[Player]) -> tuple[Player, dict[str, Any]]:
    for p in players:
        view = p.view(match)
        if "turn" in view and view["turn"] == view["viewer_seat"]:
            return p, view
    raise AssertionError("nobody is to play")


def play_one(match: str, players: list[Player]) -> dict[str, Any] | None:
    """The seat to play plays its first legal play; the view after it (None once ended)."""
    player, view = to_play(match, players)
    choice = view["playable"][0]
    status, after, _ = player.post(
        f"/api/play/matches/{match}/play",
        {"tile": choice["tile"], "end": choice["ends"][0], "version": int(view["version"])},
    )
    assert status == 200, after
    assert isinstance(after, dict)
    return None if after["phase"] == "PHASE_ENDED" else after


def test_create_and_join_seat_each_browser_once(gateway: Gateway) -> None:
    ada, bo = Player(gateway), Player(gateway)
    made = create(ada, match_name="Club night")
    match = made["match_id"]
    assert made["seat"] == 0
    assert made["link"] == f"{gateway.base}/match?id={match}"
    cookie = ada.cookies[f"bergen_seat_{match}"]
    assert cookie[1] == f"/api/play/matches/{match}"
    status, joined, headers = bo.post(f"/api/play/matches/{match}/join", {"name": "Bo"})
    assert (status, joined["seat"]) == (201, 1)
    seat_cookie = next(
        line.lower()
        for line in headers["set-cookie"].splitlines()
        if line.startswith(f"bergen_seat_{match}=")
    )
    assert "httponly" in seat_cookie
    assert "samesite=strict" in seat_cookie
    # Again, and from the creator: each gets the seat it holds, never another.
    status, again, _ = bo.post(f"/api/play/matches/{match}/join", {"name": "Bo"})
    assert (status, again["seat"]) == (200, 1)
    status, again, _ = ada.post(f"/api/play/matches/{match}/join", {"name": "Ada"})
    assert (status, again["seat"]) == (200, 0)
    view = bo.view(match)
    assert view["viewer_seat"] == 1
    assert view["phase"] == "PHASE_PLAYING"
    assert [s["name"] for s in view["seats"]] == ["Ada", "Bo"]
    # Its own tiles, the other's count only.
    mine = {(t["low"], t["high"]) for t in view["my_tiles"]}
    theirs = {(t["low"], t["high"]) for t in ada.view(match)["my_tiles"]}
    assert mine and theirs and not mine & theirs
    assert not view["revealed_hands"]


def test_a_match_played_to_its_end_through_the_gateway(gateway: Gateway) -> None:
    match, ada, bo = two_seated(gateway)
    plays = 0
    while play_one(match, [ada, bo]) is not None:
        plays += 1
        assert plays < 500
    end = ada.view(match)
    assert end["phase"] == "PHASE_ENDED"
    assert "winner_side" in end["result"]
    assert len(end["revealed_hands"]) == 2


def test_refusals_say_why_and_change_nothing(gateway: Gateway) -> None:
    match, ada, bo = two_seated(gateway)
    player, view = to_play(match, [ada, bo])
    other = bo if player is ada else ada
    version = int(view["version"])
    url = f"/api/play/matches/{match}/play"
    choice = view["playable"][0]
    move = {"tile": choice["tile"], "end": choice["ends"][0]}
    held = {f"{t['low']}-{t['high']}" for t in view["my_tiles"]}
    unplayable = held - {p["tile"] for p in view["playable"]}
    cases: list[tuple[Player, Any, int, str]] = [
        (player, {**move, "version": version - 1}, 409, "STALE_VERSION"),
        (other, {**move, "version": version}, 409, "NOT_YOUR_TURN"),
        (player, {"tile": "7-1", "end": None, "version": version}, 400, "BAD_REQUEST"),
        (player, {"tile": choice["tile"], "end": "up", "version": version}, 400, "BAD_REQUEST"),
        (player, {"tile": choice["tile"], "end": None}, 400, "BAD_REQUEST"),
        (player, [1, 2], 400, "BAD_REQUEST"),
        (Player(gateway), {**move, "version": version}, 403, "NO_SEAT"),
    ]
    if unplayable:
        tile = sorted(unplayable)[0]
        cases.append((player, {"tile": tile, "end": "left", "version": version}, 422, ""))
    for who, body, status, code in cases:
        got, answer, _ = who.post(url, body)
        assert got == status, (body, answer)
        assert answer["error"], answer
        if code:
            assert answer["code"] == code, answer
        else:
            # A tile held that is not playable: it does not fit, or a drawn tile must be played.
            assert answer["code"] in ("TILE_DOES_NOT_FIT", "MUST_PLAY_DRAWN_TILE"), answer
    # A cross-site POST, by Sec-Fetch-Site or by Origin, and a form's body.
    for headers in (
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},
        {"Origin": "https://evil.example"},
    ):
        sent = {"Sec-Fetch-Site": "", **headers}
        got, answer, _ = player.request("POST", url, {**move, "version": version}, headers=sent)
        assert (got, answer["code"]) == (403, "CROSS_SITE"), headers
    got, answer, _ = player.request(
        "POST",
        url,
        {**move, "version": version},
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert got == 400
    # The same Origin as the page, without Sec-Fetch-Site, is let through (a stale version
    # here, so that nothing changes).
    same = {"Sec-Fetch-Site": "", "Origin": gateway.base}
    got, answer, _ = player.request("POST", url, {**move, "version": version - 1}, headers=same)
    assert (got, answer["code"]) == (409, "STALE_VERSION")
    assert int(player.view(match)["version"]) == version
    assert player.view(match)["my_tiles"] == view["my_tiles"]
    # A bad match id, and a view without a seat.
    assert player.request("GET", "/api/play/matches/no!such")[0] in (400, 404)
    assert Player(gateway).request("GET", f"/api/play/matches/{match}")[0] == 403


def test_resign_ends_the_match_with_the_other_side_winning(gateway: Gateway) -> None:
    match, ada, bo = two_seated(gateway)
    status, view, _ = bo.post(f"/api/play/matches/{match}/resign", {})
    assert status == 200, view
    assert view["phase"] == "PHASE_ENDED"
    assert view["result"]["resigned_seat"] == 1
    assert view["result"]["winner_side"] == 0
    assert ada.view(match)["phase"] == "PHASE_ENDED"


def test_a_code_made_on_one_gateway_seats_a_device_through_another_once(
    gateway: Gateway, server: ServerProcess, module_farm: ServerFarm, key_file: Path
) -> None:
    """Two gateway processes in front of one game server, holding one seal key: a link made
    on one opens once, through either; a gateway with another key spends it and opens
    nothing."""
    other = start_gateway(server.target, module_farm.workdir, "--seal-key-file", str(key_file))
    stranger = start_gateway(
        server.target, module_farm.workdir, "--seal-key-file", str(key_file) + ".stranger"
    )
    try:
        match, ada, _ = two_seated(gateway)
        status, made, _ = ada.post(f"/api/play/matches/{match}/link", {})
        assert status == 201, made
        assert 590 <= made["expires_in_s"] <= 600
        url = urlsplit(made["url"])
        assert (url.scheme + "://" + url.netloc, url.path) == (gateway.base, "/claim")
        phone = Player(other)
        status, _, headers = phone.request("GET", f"/claim?{url.query}")
        assert status == 303
        assert headers["location"] == f"/match?id={match}"
        seat_cookie = next(
            line.lower()
            for line in headers["set-cookie"].splitlines()
            if line.startswith(f"bergen_seat_{match}=")
        )
        assert "httponly" in seat_cookie and "samesite=strict" in seat_cookie
        assert phone.view(match)["viewer_seat"] == 0
        for where in (gateway, other):
            thief = Player(where)
            status, body, _ = thief.request("GET", f"/claim?{url.query}")
            assert status == 410 and b"has been used" in body
            assert not thief.cookies
        never = "A" * 40
        for code in (never, "not-a-code-at-all-nope", ""):
            assert Player(other).request("GET", f"/claim?code={code}")[0] == 410
        # Through a gateway with another key the code is spent, and nothing is seated.
        status, made, _ = ada.post(f"/api/play/matches/{match}/link", {})
        assert status == 201, made
        code = urlsplit(made["url"]).query
        wrong = Player(stranger)
        status, body, _ = wrong.request("GET", f"/claim?{code}")
        assert status == 410 and b"another key" in body
        assert not wrong.cookies
        assert Player(gateway).request("GET", f"/claim?{code}")[0] == 410
        # No code in a gateway's log.
        for where in (gateway, other, stranger):
            assert code.split("=", 1)[1] not in where.log()
    finally:
        assert other.stop() == 0, other.log()
        assert stranger.stop() == 0, stranger.log()


def test_a_seat_has_five_links_open_at_most(gateway: Gateway) -> None:
    match, _, bo = two_seated(gateway)
    for _ in range(5):
        assert bo.post(f"/api/play/matches/{match}/link", {})[0] == 201
    status, body, _ = bo.post(f"/api/play/matches/{match}/link", {})
    assert (status, body["code"]) == (429, "TOO_MANY_HAND_OFFS"), body
    assert Player(gateway).post(f"/api/play/matches/{match}/link", {})[1]["code"] == "NO_SEAT"
    status, body, _ = bo.post(
        f"/api/play/matches/{match}/link", {}, headers={"Sec-Fetch-Site": "cross-site"}
    )
    assert (status, body["code"]) == (403, "CROSS_SITE")


def test_a_restarted_gateway_keeps_its_players_seated(
    server: ServerProcess, module_farm: ServerFarm, key_file: Path
) -> None:
    first = start_gateway(server.target, module_farm.workdir, "--seal-key-file", str(key_file))
    try:
        match, ada, bo = two_seated(first)
        before = ada.view(match)
        assert first.stop() == 0
        second = start_gateway(server.target, module_farm.workdir, "--seal-key-file", str(key_file))
        try:
            ada.gateway = bo.gateway = second
            assert ada.view(match)["my_tiles"] == before["my_tiles"]
            assert play_one(match, [ada, bo]) is not None
            assert int(ada.view(match)["version"]) > int(before["version"])
        finally:
            assert second.stop() == 0
        # A gateway with another key opens none of these cookies.
        other = start_gateway(
            server.target, module_farm.workdir, "--seal-key-file", str(key_file) + ".other"
        )
        try:
            ada.gateway = other
            assert ada.request("GET", f"/api/play/matches/{match}")[0] == 403
        finally:
            assert other.stop() == 0
    finally:
        first.stop()


def test_the_seat_stream_and_no_token_anywhere(gateway: Gateway, key_file: Path) -> None:
    match, ada, bo = two_seated(gateway)
    stream = EventStream(gateway, f"/api/play/matches/{match}/events")
    assert stream.status == 403
    stream.close()
    path = f"/api/play/matches/{match}/events"
    cookie = {"Cookie": ada._cookie_header(path)}
    got: list[Message] = []
    received: list[float] = []
    stream = EventStream(gateway, path, timeout=30, headers=cookie)
    assert stream.status == 200
    done = threading.Event()

    def read() -> None:
        for msg in stream.messages():
            received.append(time.monotonic())
            got.append(msg)
            if msg.kind == "end":
                break
        done.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    while True:
        # Until the last play is sent the match has not ended: what arrives before then was
        # read from the game server while it was being played. (Events of the last burst
        # read after the end are the replay's, every hand shown, as any spectator's.)
        last_sent = time.monotonic()
        if play_one(match, [ada, bo]) is None:
            break
    assert done.wait(30), [m.kind for m in got]
    stream.close()
    views = [m.data for m in got if m.kind == "view"]
    assert views and all(v["viewer_seat"] == 0 for v in views)
    assert views[-1]["phase"] == "PHASE_ENDED"
    # While the match was played, no message holds a tile but Ada's own and those played.
    played: set[tuple[int, int]] = set()
    during = [msg for msg, at in zip(got, received, strict=True) if at < last_sent]
    assert len(during) > 10
    for msg in during:
        assert msg.kind != "end" and not (msg.kind == "view" and msg.data["phase"] == "PHASE_ENDED")
        if msg.kind == "event" and "tile_played" in msg.data:
            t = msg.data["tile_played"]["tile"]
            played.add((t["low"], t["high"]))
        allowed = set(played)
        if msg.kind == "view":
            allowed |= {(t["low"], t["high"]) for t in msg.data["my_tiles"]}
            allowed |= {tuple(sorted((t["left"], t["right"]))) for t in msg.data["line"]}
            assert not msg.data["revealed_hands"]
        assert tiles_in(msg.data) <= allowed, msg.raw
    # Resuming after the first view's id sends the events missed since.
    first_id = next(m.id for m in got if m.kind == "view")
    resumed = EventStream(gateway, path, str(first_id), timeout=30, headers=cookie)
    kinds = []
    for msg in resumed.messages():
        kinds.append(msg)
        if msg.kind == "end":
            break
    resumed.close()
    # The match has ended: its view comes first, so that the page knows before it reads the
    # missed events, which now show every hand.
    assert kinds[0].kind == "view" and kinds[0].data["phase"] == "PHASE_ENDED", kinds[0].raw
    seqs = [int(m.id) for m in kinds if m.kind == "event" and m.id]
    assert seqs and seqs[0] == int(str(first_id)) + 1
    assert seqs == sorted(set(seqs))
    # No token in any answer, header, stream or log line.
    sealer = Sealer.from_file(key_file)
    tokens = ada.tokens(sealer) + bo.tokens(sealer)
    assert len(tokens) == 2
    everything = b"".join(ada.seen + bo.seen) + bytes(stream.raw) + bytes(resumed.raw)
    log = gateway.log().encode()
    for token in tokens:
        assert token.encode() not in everything
        assert token.encode() not in log


def test_a_double_click_takes_one_seat_and_makes_one_match(gateway: Gateway) -> None:
    """The page sends its own id with each creation and join: the same request sent twice
    at once, or again, is done once, and both answers give the same match and seat."""
    ada = Player(gateway)

    def twice(player: Player, path: str, body: dict[str, Any]) -> list[Any]:
        answers: list[Any] = []
        threads = [
            threading.Thread(target=lambda: answers.append(player.post(path, dict(body))))
            for _ in range(2)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        answers.append(player.post(path, dict(body)))  # and once more, after both
        return answers

    made = twice(ada, "/api/play/matches", {"request": "a" * 22, "name": "Ada", "seats": 3})
    assert [status for status, _, _ in made] == [201, 201, 201], made
    assert len({answer["match_id"] for _, answer, _ in made}) == 1
    match = made[0][1]["match_id"]
    status, listed, _ = gateway.get(f"/api/matches/{match}")
    assert status == 200
    assert sum(1 for s in listed["seats"] if s.get("taken")) == 1

    bo = Player(gateway)  # a browser with no cookie yet, clicking twice
    joined = twice(bo, f"/api/play/matches/{match}/join", {"request": "b" * 22, "name": "Bo"})
    # 201 for a join done; 200 once the browser's cookie shows the seat it holds.
    assert 201 in {status for status, _, _ in joined} <= {200, 201}, joined
    assert {answer["seat"] for _, answer, _ in joined} == {1}
    status, listed, _ = gateway.get(f"/api/matches/{match}")
    assert sum(1 for s in listed["seats"] if s.get("taken")) == 2

    # Another browser's request with another id takes another seat; a malformed id is refused.
    cy = Player(gateway)
    status, third, _ = cy.post(f"/api/play/matches/{match}/join", {"request": "c" * 22})
    assert status == 400, third  # no name: refused before anything is done
    status, third, _ = cy.post(
        f"/api/play/matches/{match}/join", {"request": "c" * 22, "name": "Cy"}
    )
    assert (status, third["seat"]) == (201, 2)
    status, bad, _ = Player(gateway).post(
        "/api/play/matches", {"request": "x", "name": "Di", "seats": 2}
    )
    assert status == 400 and "request" in bad["error"], bad


def test_a_clock_says_what_a_timeout_does_and_bad_settings_are_refused(
    server: ServerProcess, module_farm: ServerFarm, key_file: Path
) -> None:
    gateway = start_gateway(
        server.target, module_farm.workdir, "--seal-key-file", str(key_file),
        "--client-creates", "100",
    )  # fmt: skip
    try:
        timeout_settings(gateway)
    finally:
        assert gateway.stop() == 0, gateway.log()


def timeout_settings(gateway: Gateway) -> None:
    ada = Player(gateway)
    made: list[tuple[dict[str, Any], tuple[str, int]]] = [
        ({"initial_s": 60, "increment_s": 1}, ("ON_TIMEOUT_AUTOPLAY", 3)),
        ({"initial_s": 60, "on_timeout": "forfeit"}, ("ON_TIMEOUT_FORFEIT", 3)),
        (
            {"initial_s": 60, "on_timeout": "autoplay", "timeouts_to_forfeit": 5},
            ("ON_TIMEOUT_AUTOPLAY", 5),
        ),
        ({"initial_s": 60, "timeouts_to_forfeit": 1}, ("ON_TIMEOUT_AUTOPLAY", 1)),
    ]
    for clock, (on_timeout, in_a_row) in made:
        match = create(ada, clock=clock)["match_id"]
        rules = ada.view(match)["rules"]
        assert rules["clock"] == "CLOCK_FISCHER", rules
        assert (rules["on_timeout"], rules["timeouts_to_forfeit"]) == (on_timeout, in_a_row)
    refused: list[tuple[dict[str, Any], str]] = [
        ({"clock": {"initial_s": 60, "on_timeout": "sudden"}}, 'on_timeout is "autoplay"'),
        ({"clock": {"initial_s": 60, "on_timeout": ["forfeit"]}}, 'on_timeout is "autoplay"'),
        ({"clock": {"initial_s": 60, "on_timeout": None}}, 'on_timeout is "autoplay"'),
        *(
            ({"clock": {"initial_s": 60, "timeouts_to_forfeit": bad}}, "from 1 to 99")
            for bad in (0, 100, "3", True, 2.5, None)
        ),
        (
            {"clock": {"initial_s": 60, "on_timeout": "forfeit", "timeouts_to_forfeit": 2}},
            "with forfeit the first timeout forfeits",
        ),
        ({"on_timeout": "forfeit"}, "on_timeout goes inside clock"),
        ({"clock": None, "timeouts_to_forfeit": 2}, "timeouts_to_forfeit goes inside clock"),
        ({"clock": {"initial_s": 60, "ontimeout": "forfeit"}}, "clock has no 'ontimeout'"),
        ({"clock": "300+5"}, "clock is null or {initial_s"),
        ({"preset": ["standard"]}, "preset is one of"),
    ]
    bo = Player(gateway)
    for extra, words in refused:
        body = {"name": "Bo", "seats": 2, **extra}
        status, answer, _ = bo.post("/api/play/matches", body)
        assert (status, answer["code"]) == (400, "BAD_REQUEST"), (extra, answer)
        assert words in answer["error"], (extra, answer)
    assert not bo.cookies  # nothing was created, no seat taken
