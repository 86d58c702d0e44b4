"""Players and ratings through real `bergen serve` processes, on SQLite and PostgreSQL:
players registered, rated matches joined with their tokens and played to their ends (by the
target and by forfeits, in every pool), and what the server shows of them held to
`bergen.domain.ratings.recompute` over the matches' own signed records. The refusals; a
restart that resumes the ratings where they were; a rebuild asked for; a rated tournament."""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import Any

import grpc
import psycopg
import pytest

from bergen.api.signing import verify_signature
from bergen.cli_client.verify import verify_match, verify_record
from bergen.domain.ratings import (
    NEWCOMER,
    POOLS,
    Rating,
    leaderboard,
    rated_match_of_record,
    recompute,
)
from bergen.v1 import bergen_pb2 as pb

from .client import Client, Table, bearer, play_to_end, rule_options
from .conftest import ORGANISER_TOKEN, on_backend
from .refusals import refusal
from .servers import ServerFarm, ServerProcess, bergen_command
from .test_tournaments import verify_pack

pytestmark = [pytest.mark.timeout(300)]

ORG = bearer(ORGANISER_TOKEN)
POOL_NUMBER = {
    "2": pb.RATING_POOL_TWO,
    "3": pb.RATING_POOL_THREE,
    "4": pb.RATING_POOL_FOUR,
    "pairs": pb.RATING_POOL_PAIRS,
}
WAIT_S = 30.0


def register(client: Client, name: str, bot: bool = False) -> pb.RegisterPlayerResponse:
    reply: pb.RegisterPlayerResponse = client.stub.RegisterPlayer(
        pb.RegisterPlayerRequest(name=name, bot=bot), timeout=20
    )
    return reply


def refused(call: Callable[[], object]) -> Any:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return refusal(info.value)


def rated_table(
    client: Client,
    players: Sequence[pb.RegisterPlayerResponse],
    *,
    partnerships: bool = False,
    rated: bool = True,
    target: int = 3,
) -> Table:
    """A match with every seat taken by `players` in seat order, each with its token."""
    created = client.stub.CreateMatch(
        pb.CreateMatchRequest(
            seats=len(players),
            partnerships=partnerships,
            preset=pb.PRESET_STANDARD,
            options=rule_options(target=target),
            rated=rated,
        ),
        timeout=20,
    )
    table = Table(created.match_id, len(players), [""] * len(players), created)
    for seat, p in enumerate(players):
        joined = client.stub.JoinMatch(
            pb.JoinMatchRequest(
                match_id=created.match_id,
                seat=seat,
                client_seed=f"seed {seat}",
                player_token=p.player_token,
            ),
            timeout=20,
        )
        table.tokens[seat] = joined.seat_token
        table.joins.append(joined)
    return table


def resign(client: Client, table: Table, seat: int) -> None:
    client.resign(table.match_id, table.tokens[seat])


def records(client: Client, match_ids: Sequence[str]) -> list[dict[str, Any]]:
    key = client.stub.GetServerInfo(pb.GetServerInfoRequest()).public_key
    out = []
    for match_id in match_ids:
        record = client.record(match_id)
        verify_signature(record, key)
        out.append(record)
    return out


def recomputed(rs: Sequence[dict[str, Any]]) -> dict[str, dict[str, Rating]]:
    """Every rating, from the records alone, as anyone holding them would recompute it."""
    rated = [m for m in map(rated_match_of_record, rs) if m is not None]
    return recompute(m for _, m in sorted(rated, key=lambda om: om[0]))


def shown(client: Client, player_id: str) -> dict[str, pb.PoolRating]:
    reply = client.stub.GetPlayer(pb.GetPlayerRequest(player_id=player_id), timeout=20)
    return {pool: r for pool, r in zip(POOLS, reply.ratings, strict=True)}


def same(got: pb.PoolRating, want: Rating) -> bool:
    return (
        abs(got.mu - want.mu) <= 1e-9
        and abs(got.sigma - want.sigma) <= 1e-9
        and (got.rating, got.provisional, got.rated_matches)
        == (want.display, want.provisional, want.matches)
    )


def await_ratings(
    client: Client, players: Sequence[str], want: dict[str, dict[str, Rating]]
) -> None:
    """Wait (up to WAIT_S) until every player shows `want` in every pool; the server folds
    rated ends as they are written and catches up before it answers."""
    deadline = time.monotonic() + WAIT_S
    while True:
        wrong = [
            (p, pool, shown_rating)
            for p in players
            for pool, shown_rating in shown(client, p).items()
            if not same(shown_rating, want[pool].get(p, NEWCOMER))
        ]
        if not wrong:
            return
        assert time.monotonic() < deadline, f"ratings not as recomputed: {wrong[:2]}"
        time.sleep(0.1)


def leaderboard_ids(client: Client, pool: str, size: int) -> list[pb.LeaderboardEntry]:
    entries: list[pb.LeaderboardEntry] = []
    token = ""
    while True:
        reply = client.stub.ListLeaderboard(
            pb.ListLeaderboardRequest(pool=POOL_NUMBER[pool], page_size=size, page_token=token),
            timeout=20,
        )
        entries += reply.entries
        token = reply.next_page_token
        if not token:
            return entries


def player_matches(client: Client, player_id: str, pool: str | None) -> list[pb.PlayerMatch]:
    out: list[pb.PlayerMatch] = []
    token = ""
    while True:
        reply = client.stub.ListPlayerMatches(
            pb.ListPlayerMatchesRequest(
                player_id=player_id,
                pool=POOL_NUMBER[pool] if pool else pb.RATING_POOL_UNSPECIFIED,
                page_size=4,
                page_token=token,
            ),
            timeout=20,
        )
        out += reply.matches
        token = reply.next_page_token
        if not token:
            return out


def test_rated_matches_rate_their_players_as_their_records_recompute(
    farm: ServerFarm, database: str
) -> None:
    server = farm.start(database, organiser_token=ORGANISER_TOKEN)
    rng = random.Random(7)
    with Client(server.target) as client:
        ann, bob, cy, dee = (
            register(client, n, bot=n == "Bob") for n in ("Ann", "Bob", "Cy", "Dee")
        )
        ids = [p.player_id for p in (ann, bob, cy, dee)]
        names = {p.player_id: p.name for p in (ann, bob, cy, dee)}
        match_ids: list[str] = []
        # Two-seat matches until three players are past provisional: most by a resignation,
        # some played to the target.
        trio = [ann, bob, cy]
        for i in range(27):
            a, b = trio[i % 3], trio[(i + 1) % 3]
            table = rated_table(client, [a, b] if i % 2 else [b, a])
            if i % 9 == 4:
                play_to_end([client], rng, table)
            else:
                resign(client, table, rng.randrange(2))
            match_ids.append(table.match_id)
        for players, pairs in (([ann, bob, dee], False), ([dee, cy, bob, ann], False),
                               ([ann, bob, cy, dee], True)):  # fmt: skip
            table = rated_table(client, players, partnerships=pairs)
            resign(client, table, 1)
            match_ids.append(table.match_id)
        played = rated_table(client, [dee, cy, ann])
        play_to_end([client], rng, played)
        match_ids.append(played.match_id)
        # Not rated: an abandoned rated match, and a match created unrated.
        abandoned = rated_table(client, [cy, dee])
        client.abandon(abandoned.match_id, ORGANISER_TOKEN, "no show")
        unrated = rated_table(client, [dee, ann], rated=False)
        resign(client, unrated, 0)
        rs = records(client, [*match_ids, abandoned.match_id, unrated.match_id])

        # The records name every seat's player; the rated ones their pool and the position
        # of their end, which orders them.
        for record in rs:
            assert all(s["player"] in ids for s in record["seats"]), record["seats"]
        assert all("rated" in r for r in rs[: len(match_ids)])
        assert "rated" not in rs[-2] and "rated" not in rs[-1]
        assert [r["rated"]["pool"] for r in rs[27:31]] == ["3", "4", "pairs", "3"]
        orders = [r["rated"]["order"] for r in rs[: len(match_ids)]]
        assert orders == sorted(orders) and len(set(orders)) == len(orders)
        want = recomputed(rs)
        await_ratings(client, ids, want)

        # The leaderboard: the players past provisional, in RATINGS.md's order.
        board = leaderboard_ids(client, "2", 1)
        assert [e.player.player_id for e in board] == leaderboard(want["2"])
        assert len(board) == 3 and [e.rank for e in board] == [1, 2, 3]
        for e in board:
            assert (e.player.name, e.player.bot) == (
                names[e.player.player_id],
                e.player.name == "Bob",
            )
            assert same(e.rating, want["2"][e.player.player_id])
        assert leaderboard_ids(client, "3", 10) == []  # everyone there is provisional

        # A player's matches: newest first, each rating following on from the one before.
        mine = player_matches(client, ann.player_id, None)
        ann_rated = [r["match_id"] for r in rs[: len(match_ids)] if any(
            s["player"] == ann.player_id for s in r["seats"])]  # fmt: skip
        assert [m.match_id for m in mine] == list(reversed(ann_rated))
        for pool in POOLS:
            in_pool = [m for m in reversed(mine) if m.pool == POOL_NUMBER[pool]]
            assert [m.match_id for m in player_matches(client, ann.player_id, pool)] == [
                m.match_id for m in reversed(in_pool)
            ]
            before = NEWCOMER
            for m in in_pool:
                assert same(m.before, before), (pool, m.match_id)
                before = Rating(m.after.mu, m.after.sigma, m.after.rated_matches)
            assert same(shown(client, ann.player_id)[pool], before)

        # The views, the events and the listing name each seat's player and its bot flag.
        view = client.view(played.match_id)
        assert view.rated
        assert [(s.player_id, s.bot, s.name) for s in view.seats] == [
            (dee.player_id, False, "Dee"),
            (cy.player_id, False, "Cy"),
            (ann.player_id, False, "Ann"),
        ]
        seated = client.replay(table.match_id).events
        taken = [e.seat_taken for e in seated if e.HasField("seat_taken")]
        assert [(t.player_id, t.bot) for t in taken] == [
            (p.player_id, p.name == "Bob") for p in (ann, bob, cy, dee)
        ]
        listing = client.stub.ListMatches(pb.ListMatchesRequest(page_size=3), timeout=20)
        newest = {m.match_id: m for m in listing.matches}
        assert newest[unrated.match_id].player_ids == [dee.player_id, ann.player_id]
        assert not newest[unrated.match_id].rated and newest[abandoned.match_id].rated
        assert list(newest[abandoned.match_id].bots) == [False, False]


@on_backend("sqlite")
def test_refusals_name_their_rule_and_tell_nothing_of_a_token(
    farm: ServerFarm, database: str
) -> None:
    server = farm.start(database)
    with Client(server.target) as client:
        ann = register(client, "\u00c1nn")
        bob = register(client, "Bob")
        assert (ann.name, ann.player_token[:4]) == ("\u00c1nn", "bgp_")
        for taken in ("A\u0301NN", "\u00e1nn", "\uff21\u0301nn"):
            got = refused(lambda name=taken: register(client, name))
            assert (got.code, got.reason) == (grpc.StatusCode.ALREADY_EXISTS, "NAME_TAKEN")
        for bad, rule in (
            ("ann!", "PLAYER_NAME_CHARACTERS"),
            ("", "PLAYER_NAME_LENGTH"),
            (" ann", "PLAYER_NAME_SPACES"),
            ("x" * 25, "PLAYER_NAME_LENGTH"),
        ):
            got = refused(lambda name=bad: register(client, name))
            assert (got.code, got.reason) == (grpc.StatusCode.INVALID_ARGUMENT, rule)

        # Found by id, and by any spelling of the name.
        for request in (pb.GetPlayerRequest(player_id=ann.player_id),
                        pb.GetPlayerRequest(name="a\u0301nn")):  # fmt: skip
            assert client.stub.GetPlayer(request, timeout=20).player.name == "\u00c1nn"
        got = refused(lambda: client.stub.GetPlayer(pb.GetPlayerRequest(name="nobody")))
        assert (got.code, got.reason) == (grpc.StatusCode.NOT_FOUND, "PLAYER_NOT_FOUND")

        match_id = client.stub.CreateMatch(
            pb.CreateMatchRequest(seats=3, preset=pb.PRESET_STANDARD, rated=True), timeout=20
        ).match_id

        def join(token: str | None, name: str = "", seat: int | None = None) -> Any:
            request = pb.JoinMatchRequest(match_id=match_id, name=name)
            if token is not None:
                request.player_token = token
            if seat is not None:
                request.seat = seat
            return client.stub.JoinMatch(request, timeout=20)

        got = refused(lambda: join(None, "ann"))
        assert (got.code, got.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "PLAYER_REQUIRED")
        got = refused(lambda: join(bob.player_token, "Robert"))
        assert (got.code, got.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "NAME_NOT_PLAYERS")
        assert join(ann.player_token, "\u00e1nn").seat == 0
        got = refused(lambda: join(ann.player_token))
        assert (got.code, got.reason) == (
            grpc.StatusCode.FAILED_PRECONDITION,
            "PLAYER_ALREADY_SEATED",
        )

        # A wrong secret for a player that exists, a token of no player, and text that is
        # no token at all: one answer.
        token = ann.player_token
        wrong_secret = token[:-6] + ("AAAAAA" if not token.endswith("AAAAAA") else "BBBBBB")
        no_player = "bgp_" + "A" * 22 + token[26:]
        answers = {
            (g.code, g.reason, g.message, tuple(sorted(g.metadata.items())))
            for g in (refused(lambda t=t: join(t)) for t in (wrong_secret, no_player, "nonsense"))
        }
        assert len(answers) == 1
        ((code, reason, message, _),) = answers
        assert (code, reason) == (grpc.StatusCode.UNAUTHENTICATED, "PLAYER_TOKEN_INVALID")
        assert token not in message and wrong_secret not in message
        assert [s.taken for s in client.view(match_id).seats] == [True, False, False]

        # A token checked alone (a sign-in): its player, else that same one answer.
        def by_token(t: str) -> Any:
            return client.stub.GetPlayer(pb.GetPlayerRequest(player_token=t), timeout=20)

        assert by_token(token).player.player_id == ann.player_id
        assert by_token(bob.player_token).player.name == "Bob"
        checked = {
            (g.code, g.reason, g.message, tuple(sorted(g.metadata.items())))
            for g in (refused(lambda t=t: by_token(t)) for t in (wrong_secret, no_player, "x"))
        }
        assert len(checked) == 1
        ((code, reason, message, _),) = checked
        assert (code, reason) == (grpc.StatusCode.UNAUTHENTICATED, "PLAYER_TOKEN_INVALID")
        assert token not in message and wrong_secret not in message

        got = refused(lambda: client.stub.ListLeaderboard(pb.ListLeaderboardRequest()))
        assert got.code is grpc.StatusCode.INVALID_ARGUMENT
        got = refused(
            lambda: client.stub.ListLeaderboard(
                pb.ListLeaderboardRequest(pool=pb.RATING_POOL_TWO, page_token="x" * 30)
            )
        )
        assert (got.code, got.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "BAD_PAGE_TOKEN")
    # The secret is nowhere in the server's log.
    assert server.terminate() == 0  # its log is then written whole
    assert ann.player_token not in server.log() and "registered" in server.log()


def ratings_sql(database: str, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """Run `sql` on the server's database directly (%s markers)."""
    if database.startswith("sqlite:///"):
        conn = sqlite3.connect(database.removeprefix("sqlite:///"), isolation_level=None)
        try:
            return conn.execute(sql.replace("%s", "?"), params).fetchall()
        finally:
            conn.close()
    with psycopg.connect(database, autocommit=True) as pg:
        cursor = pg.execute(sql, params)
        return cursor.fetchall() if cursor.description else []


def logged(server: ServerProcess, text: str, timeout: float = 30.0) -> bool:
    """Whether the server's log says `text` within `timeout` seconds: its lines are written
    by a thread of their own, a moment after what they tell of."""
    deadline = time.monotonic() + timeout
    while text not in server.log():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_restart_resumes_the_ratings_and_a_rebuild_folds_them_again(
    farm: ServerFarm, database: str
) -> None:
    server = farm.start(database)
    with Client(server.target) as client:
        ann, bob, cy = (register(client, n) for n in ("Ann", "Bob", "Cy"))
        match_ids = []
        for players in ([ann, cy], [cy, ann], [bob, cy]):
            table = rated_table(client, players)
            resign(client, table, 0)
            match_ids.append(table.match_id)
        await_ratings(
            client, [p.player_id for p in (ann, bob, cy)], recomputed(records(client, match_ids))
        )
    assert server.terminate() == 0
    ((position,),) = ratings_sql(
        database, "SELECT position FROM projection_positions WHERE name = %s", ("ratings",)
    )
    assert position > 0
    # (A row changed behind the server is no mark of a resumed fold: it is not served, and
    # the ratings are folded again; tests/security/test_read_models.py.)

    server = farm.start(database)
    with Client(server.target) as client:
        table = rated_table(client, [ann, bob])
        resign(client, table, 1)
        match_ids.append(table.match_id)
        want = recomputed(records(client, match_ids))
        await_ratings(client, [p.player_id for p in (ann, bob, cy)], want)
    assert server.terminate() == 0  # its log is then written whole
    assert f"ratings: folded up to position {position}" in server.log()
    assert "ratings: folded up to position 0" not in server.log()

    rebuilt = subprocess.run(
        [*bergen_command(), "migrate", "--rebuild-ratings", "--database", database],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert rebuilt.returncode == 0, rebuilt.stderr
    server = farm.start(database)
    with Client(server.target) as client:
        await_ratings(client, [p.player_id for p in (ann, bob, cy)], want)
    assert server.terminate() == 0  # its log is then written whole
    assert "ratings: folded up to position 0" in server.log()


@on_backend("postgresql")
def test_a_rated_tournament_enters_registered_players_and_rates_its_matches(
    farm: ServerFarm, database: str
) -> None:
    server = farm.start(database, organiser_token=ORGANISER_TOKEN)
    with Client(server.target) as client:
        stub = client.stub
        tid = stub.CreateTournament(
            pb.CreateTournamentRequest(
                name="rated cup",
                settings=pb.TournamentSettings(
                    format=pb.TOURNAMENT_FORMAT_SWISS,
                    seats=2,
                    preset=pb.PRESET_STANDARD,
                    options=rule_options(target=3),
                    rounds=1,
                    rated=True,
                ),
            ),
            metadata=ORG,
        ).tournament_id
        got = refused(
            lambda: stub.RegisterEntrant(
                pb.RegisterEntrantRequest(tournament_id=tid, players=["eve"], client_seed="e")
            )
        )
        assert (got.code, got.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "PLAYER_REQUIRED")
        ann, bot = register(client, "Ann"), register(client, "Robo", bot=True)
        seats: dict[int, str] = {}
        for p in (ann, bot):
            reply = stub.RegisterEntrant(
                pb.RegisterEntrantRequest(
                    tournament_id=tid,
                    players=[""],
                    client_seed=p.name,
                    registered_player_tokens=[p.player_token],
                )
            )
            (seats[reply.entrant],) = reply.player_tokens
        got = refused(
            lambda: stub.RegisterEntrant(
                pb.RegisterEntrantRequest(
                    tournament_id=tid,
                    players=["Ann"],
                    client_seed="again",
                    registered_player_tokens=[ann.player_token],
                )
            )
        )
        assert got.reason == "PLAYER_ALREADY_ENTERED"
        view = stub.GetTournament(pb.GetTournamentRequest(tournament_id=tid)).tournament
        assert view.settings.rated
        assert [(list(e.players), list(e.player_ids), list(e.bots)) for e in view.entrants] == [
            (["Ann"], [ann.player_id], [False]),
            (["Robo"], [bot.player_id], [True]),
        ]
        stub.StartTournament(pb.StartTournamentRequest(tournament_id=tid), metadata=ORG)
        deadline = time.monotonic() + WAIT_S
        match_id = ""
        while not match_id:
            assert time.monotonic() < deadline, "round 1 was not seated"
            where = stub.GetTournament(
                pb.GetTournamentRequest(tournament_id=tid), metadata=bearer(seats[1])
            ).assignment
            if where.match_id and client.view(where.match_id).phase == pb.PHASE_PLAYING:
                match_id = where.match_id
            else:
                time.sleep(0.05)
        client.resign(match_id, seats[1])
        while stub.GetTournament(pb.GetTournamentRequest(tournament_id=tid)).tournament.phase != (
            pb.TOURNAMENT_PHASE_ENDED
        ):
            assert time.monotonic() < deadline, "the tournament did not end"
            time.sleep(0.05)
        (record,) = records(client, [match_id])
        assert record["rated"]["pool"] == "2" and record["tournament"]["tournament_id"] == tid
        assert {s["player"] for s in record["seats"]} == {ann.player_id, bot.player_id}
        tournament = json.loads(
            stub.GetTournamentRecord(pb.GetTournamentRecordRequest(tournament_id=tid)).record_json
        )
        assert tournament["settings"]["rated"] is True
        assert [e["player_ids"] for e in tournament["entrants"]] == [
            [ann.player_id],
            [bot.player_id],
        ]
        await_ratings(client, [ann.player_id, bot.player_id], recomputed([record]))
        # Its audit pack checks whole: each seat's player and the match's rated field are the
        # tournament's.
        verify_pack(client, tournament, farm.workdir)


def test_bergen_verify_checks_rated_records_against_the_log(
    farm: ServerFarm, sqlite_url: str
) -> None:
    server = farm.start(sqlite_url, organiser_token=ORGANISER_TOKEN)
    with Client(server.target) as client:
        ann, bot = register(client, "Ann"), register(client, "Robo", bot=True)
        finished = rated_table(client, [ann, bot])
        resign(client, finished, 1)
        abandoned = rated_table(client, [bot, ann])
        client.abandon(abandoned.match_id, ORGANISER_TOKEN)
        key = client.stub.GetServerInfo(pb.GetServerInfoRequest()).public_key
        for table in (finished, abandoned):
            outcome = verify_match(server.target, table.match_id, key)
            assert outcome.ok, outcome.line
        (record,) = records(client, [finished.match_id])
    assert verify_record(record, key).ok
    for change in (
        lambda r: r["rated"].update(pool="3"),
        lambda r: r["seats"][1].update(player=ann.player_id),
        lambda r: r.pop("rated"),
    ):
        changed = json.loads(json.dumps(record))
        change(changed)
        assert not verify_record(changed, key).ok
