"""The players' ratings (RATINGS.md): the projection's rebuild against `openskill`, the
leaderboard's pages, and the time from a rated match's end to its new rating, in one run.

    python -m bench ratings      (or: python -m bench.ratings_bench --parts fold board fresh)

Every part runs on a PostgreSQL database made for it from BERGEN_BENCH_DATABASE_URL (default
postgresql://postgres@127.0.0.1:5432/postgres), dropped afterwards.

- fold: `--matches` (100,000) rated matches made from a seed (`generate`: `--players`
  registered players, a tenth of them bots; the four pools, two seats 40 %, three, four and
  pairs 20 % each; 8 % of the ends by target a tie for first, 7 % forfeits) are stored as the
  server stores them: each match's events but its hands (the rated MatchCreated, a SeatTaken
  a seat by its player, the MatchEnded naming its holders, SeedRevealed), chained and
  authenticated under the log key the fold is then given, `--open` matches in play at once
  so that their events interleave, written with one COPY. Timed: the ratings projection's
  rebuild from position 0 in this process (`RatingsProjection.catch_up`, what a server does
  on its first start or after `bergen migrate --rebuild-ratings`), the tables emptied before
  each: reading the rows of the type the ratings fold (the ends) in global order, each
  folded row's link and authenticator, decoding, the update, all folded in memory, and
  writing the ratings' tables once, in one transaction. The reference:
  `openskill` 6.2.0's `PlackettLuce().rate` with its defaults (RATINGS.md section 3) called in
  a bare loop over the same matches in the same order, its ratings kept in a dict. The two
  take turns for `--rounds` rounds; each figure is the median. Goals: >= 5,000 matches/s,
  and the rebuild's time <= 1.3x the loop's. Every player's `mu` and `sigma` in the tables
  must be openskill's within 1e-9, and its count of rated matches right (else the run
  fails). Then each stage is timed alone over the same log (reading, checking, decoding, the
  update), and the rest is what is left of the rebuild's time: the fold's own work (the
  pending matches, the places, the history rows) and writing the tables.
- board: `--board-players` (100,000) players' ratings in pool 2, a fifth of them provisional,
  written straight into the ratings' table (one COPY), then ListLeaderboard pages of 20
  through `bergen serve`'s gRPC port: the first page, and the page after `--deep-rank` by a
  token of the server's own making. The references, timed in the same rounds: a bare gRPC
  echo (`bench._ref_server --kind echo`, the server's gRPC settings) answering with a page of
  the same size; the page's keyset query sent straight to PostgreSQL; and the server's own
  work for the page in this process (`RatingQueries.leaderboard`: its catch-up, the query,
  the rows). Each p50 and p99 is the median of the rounds' own. Goal: p99 < 10 ms.
- fresh: `bergen serve`; one client plays both seats of `--fresh-matches` rated two-seat
  matches between registered players, with a target of 10 (a hand or two), each play one of
  the legal plays its seat's view offers; after the `Play` that ends a match it asks
  GetPlayer for the first seat's player every millisecond until the answer shows the match.
  Timed: from sending that `Play` to that answer. The reference: the same client's `Play`
  round trips. Also shown: when the end joined the commit-safe global order that the fold
  reads (the store's `read_all`), found by the same client asking PostgreSQL meanwhile.
  Goal: p99 < 100 ms.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import psycopg

from bench import harness
from bench.grpc_bench import (
    CALL_TIMEOUT,
    SERVICE,
    bearer,
    launch_server,
    open_channel,
    servers,
    stop_server,
    wait_for_port,
)
from bench.harness import SERVICE_TABLE, ExitStatus, Line, say
from bench.store_bench import bench_database
from bergen.api.chain import parse_metadata
from bergen.api.stored import GENESIS_HASH, EventMetadata
from bergen.domain import codec
from bergen.domain.events import Event, MatchCreated, MatchEnded, SeatTaken, SeedRevealed
from bergen.domain.ratings import POOLS, SIGMA, RatedMatch, Rating, places_of, recompute
from bergen.domain.rules import make_rules
from bergen.domain.tiles import sides_of
from bergen.domain.vocabulary import ForfeitCause, MatchEndReason
from bergen.server.keys import DEFAULT_LOG_KEY_FILE, LogKeys
from bergen.server.projections import RowCheck
from bergen.server.ratings import HELD_PAGE, RatingQueries, RatingsProjection, board_token
from bergen.server.store import NewEvent, open_store
from bergen.server.store.batch import build_rows
from bergen.server.store.ratings import RATINGS, BoardKey, PlayerRating, board_key, seal_rating
from bergen.server.store.sealed import Seals
from bergen.v1 import bergen_pb2 as pb

FOLD, BOARD, FRESH = "fold", "board", "fresh"
PARTS = (FOLD, BOARD, FRESH)
OPENSKILL = "openskill"
RATE_GOAL = 5000.0
"""Matches folded a second."""
RATIO_GOAL = 1.3
"""The rebuild's time against the bare openskill loop's."""
PAGE_GOAL_MS = 10.0
FRESH_GOAL_MS = 100.0
TOLERANCE = 1e-9
"""RATINGS.md section 3: another implementation agrees with openskill within this."""

TABLES = {"2": (2, False), "3": (3, False), "4": (4, False), "pairs": (4, True)}
POOL_WEIGHTS = {"2": 0.4, "3": 0.2, "4": 0.2, "pairs": 0.2}
TARGET = 100
TIE_SHARE = 0.08
"""Of the matches ended by their target: two sides on the same final score."""
FORFEIT_SHARE = 0.07
RATING_TABLES = ("player_ratings", "rating_history", "rated_matches")
FOLDED_TYPES = frozenset({"MatchEnded"})
"""The events the ratings' fold checks."""
DECODED_TYPES = frozenset({"MatchEnded"})
"""The events it decodes: a rated match's end names its holders, so it is read alone."""
STAGE_NAMES = {
    "read": "reading the rows",
    "check": "each row's link and authenticator",
    "decode": "decoding MatchEnded",
    "update": "the update (RATINGS.md section 3)",
}


# --- the matches ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Registered:
    player_id: str
    name: str
    bot: bool


@dataclass(frozen=True, slots=True)
class Played:
    """A rated match as made: its pool, each seat's player (an index into the players), how
    it ended, and each side's place."""

    match_id: str
    pool: str
    seats: tuple[int, ...]
    reason: str
    scores: tuple[int, ...]
    forfeited_side: int | None
    places: tuple[int, ...]

    @property
    def sides(self) -> tuple[tuple[int, ...], ...]:
        return sides_of(*TABLES[self.pool])


@dataclass(frozen=True)
class Generated:
    players: list[Registered]
    matches: list[Played]
    steps: list[tuple[int, int]]
    """The order the events are written in: (match, its event's index)."""
    ends: list[int]
    """The matches in the order of their ends (RATINGS.md section 3)."""


def make_players(count: int, rng: random.Random) -> list[Registered]:
    return [
        Registered(str(uuid.UUID(int=rng.getrandbits(128), version=4)), f"p{i:06}", i % 10 == 0)
        for i in range(count)
    ]


def _ending(rng: random.Random, sides: int) -> tuple[str, tuple[int, ...], int | None]:
    """How a match ends: its reason, each side's final score and the side that forfeited."""
    scores = [5 * rng.randrange(TARGET // 5) for _ in range(sides)]
    if rng.random() < FORFEIT_SHARE:
        return "forfeit", tuple(scores), rng.randrange(sides)
    winners = rng.sample(range(sides), 2 if rng.random() < TIE_SHARE else 1)
    top = TARGET + 5 * rng.randrange(6)
    for w in winners:
        scores[w] = top
    return "target", tuple(scores), None


def generate(matches: int, players: int, seed: int = 2027, at_once: int = 50) -> Generated:
    """`matches` rated matches among `players` registered players, made from `seed`: each
    pool's share (POOL_WEIGHTS), the seats' players at random, ties and forfeits; their
    events interleaved `at_once` matches at a time."""
    if players < 4:
        raise ValueError("a four-seat match needs four players")
    rng = random.Random(seed)
    people = make_players(players, rng)
    pools, weights = list(POOL_WEIGHTS), list(POOL_WEIGHTS.values())
    made = []
    for k in range(matches):
        pool = rng.choices(pools, weights)[0]
        seats, partnerships = TABLES[pool]
        sides = sides_of(seats, partnerships)
        reason, scores, forfeited = _ending(rng, len(sides))
        made.append(
            Played(
                f"match-{k:07}", pool, tuple(rng.sample(range(players), seats)), reason, scores,
                forfeited, places_of(reason, scores, forfeited),
            )
        )  # fmt: skip
    # Interleave: each step writes the next event of one of the matches in play.
    steps: list[tuple[int, int]] = []
    ends: list[int] = []
    playing: list[list[int]] = []  # [match, next event]
    started = 0
    while started < matches or playing:
        while started < matches and len(playing) < at_once:
            playing.append([started, 0])
            started += 1
        i = rng.randrange(len(playing))
        k, e = playing[i]
        steps.append((k, e))
        if e == len(made[k].seats) + 1:
            ends.append(k)  # the MatchEnded
        if e + 1 == event_count(made[k]):
            playing[i] = playing[-1]
            playing.pop()
        else:
            playing[i][1] = e + 1
    return Generated(people, made, steps, ends)


def event_count(m: Played) -> int:
    """MatchCreated, a SeatTaken a seat, MatchEnded and SeedRevealed."""
    return len(m.seats) + 3


def match_events(m: Played, players: Sequence[Registered]) -> list[Event]:
    """The events a server stores for `m`, but for its hands: the rated MatchCreated, each
    seat taken by its registered player, the end and the revealed seed."""
    seats, partnerships = TABLES[m.pool]
    seed = m.match_id.encode().hex().ljust(64, "0")[:64]
    out: list[Event] = [
        MatchCreated(
            m.match_id, seats, partnerships, make_rules(seats, partnerships), "0" * 64,
            m.match_id, seed, rated=True,
        )
    ]  # fmt: skip
    holders = []
    for seat, p in enumerate(m.seats):
        who = players[p]
        out.append(SeatTaken(seat, who.name, "", player=who.player_id, bot=who.bot))
        holders.append((who.player_id, who.name, who.bot))
    # As the rules end a rated match: the end names its seat holders.
    if m.reason == "forfeit":
        out.append(
            MatchEnded(
                MatchEndReason.FORFEIT, None, m.scores, None, "", m.forfeited_side,
                ForfeitCause.RESIGNED, holders=tuple(holders),
            )
        )  # fmt: skip
    else:
        winner = m.places.index(1)
        out.append(
            MatchEnded(MatchEndReason.TARGET, winner, m.scores, None, "", holders=tuple(holders))
        )
    out.append(SeedRevealed(seed))
    return out


def seed_events(url: str, made: Generated, keys: LogKeys) -> int:
    """Write every match's events, in the order of `made.steps`, with one COPY. Returns the
    events written."""
    meta = EventMetadata("bench", None, "bergen-rules/1", {})
    writing = (keys.writing, keys.writing_key)
    at = datetime.now(UTC)
    pending: dict[int, list[Any]] = {}
    count = 0
    with psycopg.connect(url) as conn, conn.cursor() as cur:
        with cur.copy(
            "COPY events (stream_id, seq, type, schema_version, payload, metadata, command_id,"
            " prev_hash, hash, salt, recorded_at, key_id, mac) FROM STDIN"
        ) as copy:
            for k, e in made.steps:
                m = made.matches[k]
                if e == 0:
                    events = [NewEvent(*codec.encode(x)) for x in match_events(m, made.players)]
                    pending[k] = build_rows(m.match_id, 0, events, meta, GENESIS_HASH, at, writing)
                r = pending[k][e]
                if e + 1 == event_count(m):
                    del pending[k]
                copy.write_row(
                    (m.match_id, r.seq, r.event.type, r.event.schema_version, r.payload_json,
                     r.metadata_json, r.command_id, r.prev_hash, r.hash, r.salt, at, r.key_id,
                     r.mac)
                )  # fmt: skip
                count += 1
        conn.commit()
    return count


# --- the fold against openskill -------------------------------------------------------------


EndKey = tuple[str, tuple[tuple[str, ...], ...], tuple[int, ...]]
"""A rated match as the reference loop takes it: pool, each side's player ids, places."""


def reference_ends(made: Generated) -> list[EndKey]:
    out = []
    for k in made.ends:
        m = made.matches[k]
        sides = tuple(tuple(made.players[m.seats[s]].player_id for s in side) for side in m.sides)
        out.append((m.pool, sides, m.places))
    return out


def openskill_loop(ends: Sequence[EndKey]) -> dict[str, dict[str, Any]]:
    """Every player's openskill rating in every pool after `ends`, one `rate` a match."""
    from openskill.models import PlackettLuce

    model = PlackettLuce()
    pools: dict[str, dict[str, Any]] = {pool: {} for pool in POOLS}
    for pool, sides, places in ends:
        held = pools[pool]
        teams = [[held[p] if p in held else model.rating() for p in side] for side in sides]
        for side, rated in zip(sides, model.rate(teams, ranks=list(places)), strict=True):
            for p, r in zip(side, rated, strict=True):
                held[p] = r
    return pools


def rebuild(url: str, keys: LogKeys) -> harness.Timing:
    """The ratings emptied (TRUNCATE, untimed), then the projection's rebuild from position 0
    in this process, timed: reading the rows, checking, decoding, folding and writing the
    ratings' tables once."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"TRUNCATE {', '.join(RATING_TABLES)}")
        conn.execute("UPDATE projection_positions SET position = 0 WHERE name = %s", [RATINGS])
    store = open_store(url, log_keys=keys)
    try:
        projection = RatingsProjection(store)
        gc.collect()
        watch = harness.Stopwatch()
        projection.catch_up()
        took = watch.read()
        head = store.head_position()
        if store.ratings().position(RATINGS) != head:
            raise RuntimeError(f"the rebuild stopped short of position {head}")
    finally:
        store.close()
    return took


def reference(ends: Sequence[EndKey]) -> tuple[harness.Timing, dict[str, dict[str, Any]]]:
    """The bare openskill loop over `ends`, timed."""
    gc.collect()
    watch = harness.Stopwatch()
    ratings = openskill_loop(ends)
    return watch.read(), ratings


def disagreement(url: str, ends: Sequence[EndKey], ratings: dict[str, dict[str, Any]]) -> float:
    """The largest difference between the ratings' tables and the reference's `ratings`
    (anything with `mu` and `sigma`, by pool and player), in `mu` or `sigma`, over every
    player and pool. Raises RuntimeError when a player who played is missing from either, or
    its count of rated matches in the tables differs."""
    counts: dict[tuple[str, str], int] = {}
    for pool, sides, _ in ends:
        for side in sides:
            for p in side:
                counts[pool, p] = counts.get((pool, p), 0) + 1
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT pool, player_id, mu, sigma, matches FROM player_ratings")
        held = {(r[0], r[1]): (r[2], r[3], r[4]) for r in rows}
    rated = {(pool, p) for pool, players in ratings.items() for p in players}
    if not held.keys() == counts.keys() == rated:
        raise RuntimeError(
            f"{len(counts)} players in pools played: the fold rated {len(held)} of them, the "
            f"reference {len(rated)}"
        )
    worst = 0.0
    for (pool, p), (mu, sigma, matches) in held.items():
        if matches != counts[pool, p]:
            raise RuntimeError(
                f"{p} in pool {pool}: {matches} rated matches, not {counts[pool, p]}"
            )
        theirs = ratings[pool][p]
        worst = max(worst, abs(mu - theirs.mu), abs(sigma - theirs.sigma))
    return worst


@dataclass
class Stage:
    name: str
    took: harness.Timing


def stages(url: str, keys: LogKeys, ends: Sequence[EndKey]) -> list[Stage]:
    """Each stage of the rebuild alone, over the same log: reading the rows in global order
    (the store's packed read of the types the ratings fold, a page at a time, as the rebuild
    reads them), checking the rows the fold checks (link and authenticator over each row's
    packed message), decoding them, and the update itself (`bergen.domain.ratings.rate`, the
    ratings in a dict)."""
    store = open_store(url, log_keys=keys)
    times = {"read": [0.0, 0.0], "check": [0.0, 0.0], "decode": [0.0, 0.0]}

    def timed(stage: str, started: tuple[float, float]) -> None:
        times[stage][0] += time.perf_counter() - started[0]
        times[stage][1] += time.process_time() - started[1]

    def now() -> tuple[float, float]:
        return time.perf_counter(), time.process_time()

    try:
        check = RowCheck(keys)
        after = 0
        gc.collect()
        while True:
            t = now()
            batch = store.read_all_packed(after, HELD_PAGE, RatingsProjection.types)
            timed("read", t)
            if not batch:
                break
            after = batch[-1].position
            folded = [e for e in batch if e.type in FOLDED_TYPES]
            t = now()
            for e in folded:
                if check.packed_refusal(e) is not None:
                    raise RuntimeError(f"{e.stream_id} seq {e.seq} does not check")
                check.folded(e)
            timed("check", t)
            t = now()
            for e in folded:
                if e.type in DECODED_TYPES:
                    parse_metadata(e.metadata)
                    codec.decode(e.type, e.schema_version, json.loads(e.payload))
            timed("decode", t)
    finally:
        store.close()
    matches = [RatedMatch(pool, sides, places) for pool, sides, places in ends]
    gc.collect()
    watch = harness.Stopwatch()
    recompute(matches)
    update = watch.read()
    out = [Stage(name, harness.Timing(*times[name])) for name in ("read", "check", "decode")]
    return [*out, Stage("update", update)]


def fold_lines(
    matches: int, runs: dict[str, list[harness.Timing]], worst: float, parts: list[Stage]
) -> list[Line]:
    """The fold's table: matches/s of the rebuild and of the bare loop, the rebuild's time
    against the loop's, the agreement, and each stage alone."""
    fold = harness.median(t.wall for t in runs[FOLD])
    loop = harness.median(t.wall for t in runs[OPENSKILL])
    cpu = harness.median(t.cpu for t in runs[FOLD])
    rate = matches / fold
    ratio = fold / loop
    lines = [
        Line(
            f"rebuild of {matches:,} rated matches, matches/s (median)",
            f"{rate:,.0f}/s",
            f"openskill: {matches / loop:,.0f}/s",
            None,
            f">= {RATE_GOAL:,.0f}/s",
            rate >= RATE_GOAL,
        ),
        Line(
            "rebuild's time against openskill's bare loop",
            f"{fold:.2f} s",
            f"{loop:.2f} s",
            ratio,
            f"<= {RATIO_GOAL:g}",
            ratio <= RATIO_GOAL,
        ),
        Line(
            "  the rebuild's own CPU, a match",
            f"{cpu / matches * 1e6:,.0f} µs",
            f"{harness.median(t.cpu for t in runs[OPENSKILL]) / matches * 1e6:,.0f} µs",
        ),
        Line(
            "largest difference in mu or sigma, every player and pool",
            f"{worst:.1e}",
            "",
            None,
            f"<= {TOLERANCE:g}",
            worst <= TOLERANCE,
        ),
    ]
    for s in parts:
        lines.append(
            Line(
                f"  stage alone: {STAGE_NAMES[s.name]}, a match",
                f"{s.took.wall / matches * 1e6:,.0f} µs",
                f"CPU {s.took.cpu / matches * 1e6:,.0f} µs",
            )
        )
    rest = fold - sum(s.took.wall for s in parts)
    lines.append(
        Line(
            "  the rest: the fold's own work, writing the tables",
            f"{rest / matches * 1e6:,.0f} µs",
            f"CPU {(cpu - sum(s.took.cpu for s in parts)) / matches * 1e6:,.0f} µs",
        )
    )
    return lines


def run_fold(
    admin_url: str, matches: int, players: int, rounds: int, at_once: int = 50
) -> list[Line]:
    say(f"fold: {matches:,} rated matches among {players:,} players, made from a seed")
    made = generate(matches, players, at_once=at_once)
    ends = reference_ends(made)
    keys = LogKeys.generate()
    with bench_database(admin_url) as url:
        watch = harness.Stopwatch()
        events = seed_events(url, made, keys)
        say(f"  stored {events:,} events in {watch.read().wall:.1f} s (one COPY)")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE events")
        theirs: dict[str, dict[str, Any]] = {}

        def measure(kind: str, r: int) -> harness.Timing:
            if kind == FOLD:
                took = rebuild(url, keys)
            else:
                took, ratings = reference(ends)
                theirs.update(ratings)
            say(f"  round {r + 1}: {kind}: {took.wall:.2f} s ({matches / took.wall:,.0f}/s), "
                f"CPU {took.cpu:.2f} s")  # fmt: skip
            return took

        runs = harness.rounds((FOLD, OPENSKILL), rounds, measure)
        worst = disagreement(url, ends, theirs)
        if worst > TOLERANCE:
            raise RuntimeError(f"the fold and openskill differ by {worst:g} (> {TOLERANCE:g})")
        say("  each stage alone")
        parts = stages(url, keys, ends)
    return fold_lines(matches, runs, worst, parts)


# --- the leaderboard ------------------------------------------------------------------------

BOARD_POOL = "2"
PAGE = 20
SHOWN_SHARE = 0.8
"""Of the board's players: not provisional, so on the board."""
FIRST, DEEP = "first page", "deep page"
OURS, WORK, ECHO, SQL = "bergen", "server's work", "echo", "SQL"
BOARD_SQL = (
    "SELECT player_id, pool, name, bot, mu, sigma, matches FROM player_ratings"
    " WHERE pool = %s AND shown = %s{after}"
    " ORDER BY rank_rating, rank_conservative, matches, player_id LIMIT %s::bigint"
)
"""The page's keyset query, as `bergen serve`'s store sends it."""
AFTER_SQL = " AND (rank_rating, rank_conservative, matches, player_id) > (%s::int, %s, %s::int, %s)"


def board_ratings(players: int, seed: int = 7) -> list[PlayerRating]:
    """`players` ratings in pool 2, made from `seed`: SHOWN_SHARE of them on the board."""
    rng = random.Random(seed)
    out = []
    for who in make_players(players, rng):
        if rng.random() < SHOWN_SHARE:
            rating = Rating(rng.gauss(25, 4), rng.uniform(1.5, 6.0), rng.randint(12, 400))
        else:
            rating = Rating(rng.gauss(25, 2), rng.uniform(6.01, SIGMA), rng.randint(1, 11))
        out.append(PlayerRating(who.player_id, BOARD_POOL, who.name, who.bot, rating))
    return out


def fill_board(url: str, ratings: Sequence[PlayerRating], keys: LogKeys) -> None:
    """Write `ratings` straight into the ratings' table with one COPY, each row sealed under
    `keys` as the server seals it (a row that is not would be found tampered with)."""
    seals = Seals(keys)
    with psycopg.connect(url) as conn, conn.cursor() as cur:
        with cur.copy(
            "COPY player_ratings (player_id, pool, name, bot, mu, sigma, matches, shown,"
            " rank_rating, rank_conservative, key_id, mac) FROM STDIN"
        ) as copy:
            for r in ratings:
                g = r.rating
                values = (
                    r.player_id, r.pool, r.name, bool(r.bot), float(g.mu), float(g.sigma),
                    int(g.matches), not g.provisional, -int(g.display), -float(g.conservative),
                )  # fmt: skip
                copy.write_row((*values, *seal_rating(seals, values)))
        conn.commit()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE player_ratings")


def deep_token(ratings: Sequence[PlayerRating], rank: int) -> tuple[str, BoardKey]:
    """The server's token of the page after rank `rank` (its entry's key), and that key."""
    shown = sorted(board_key(r.player_id, r.rating) for r in ratings if not r.rating.provisional)
    if not 0 < rank < len(shown):
        raise ValueError(f"the board has {len(shown)} players: no page after rank {rank}")
    key = shown[rank - 1]
    return board_token(rank, key), key


def board_request(kind: str, token: str) -> pb.ListLeaderboardRequest:
    if kind == FIRST:
        return pb.ListLeaderboardRequest(pool=pb.RATING_POOL_TWO, page_size=PAGE)
    return pb.ListLeaderboardRequest(pool=pb.RATING_POOL_TWO, page_size=PAGE, page_token=token)


def time_calls(call: Callable[[], object], count: int) -> list[float]:
    """Each of `count` calls' time in ms."""
    out = []
    for _ in range(count):
        t = time.perf_counter()
        call()
        out.append((time.perf_counter() - t) * 1000)
    return out


def run_board(admin_url: str, players: int, deep_rank: int, calls: int, rounds: int) -> list[Line]:
    say(f"board: {players:,} players in pool 2, {SHOWN_SHARE:.0%} of them on the board")
    ratings = board_ratings(players)
    token, key = deep_token(ratings, deep_rank)
    with (
        bench_database(admin_url) as url,
        tempfile.TemporaryDirectory() as folder,
        ExitStack() as stack,
    ):
        # The server runs in `folder`, where it finds the log key made here.
        fill_board(url, ratings, LogKeys.load_or_create(Path(folder) / DEFAULT_LOG_KEY_FILE))
        running = stack.enter_context(servers(url, Path(folder), [OURS]))
        board = leaderboard_stub(stack.enter_context(open_channel(running[OURS].target)))
        first = board(board_request(FIRST, token), timeout=CALL_TIMEOUT)
        deep = board(board_request(DEEP, token), timeout=CALL_TIMEOUT)
        if len(first.entries) != PAGE or first.entries[0].rank != 1:
            raise RuntimeError(f"the first page is not the board's first {PAGE}")
        if not deep.entries or deep.entries[0].rank != deep_rank + 1:
            raise RuntimeError(f"the deep page does not start at rank {deep_rank + 1}")
        answer = Path(folder) / "answer.bin"
        answer.write_bytes(first.SerializeToString())
        echo_target = stack.enter_context(echo_server(answer, Path(folder)))
        echo = leaderboard_stub(stack.enter_context(open_channel(echo_target)))
        conn = stack.enter_context(psycopg.connect(url, autocommit=True))
        store = open_store(url)
        stack.callback(store.close)
        queries = RatingQueries(store, RatingsProjection(store))
        sql = {
            FIRST: (BOARD_SQL.format(after=""), [BOARD_POOL, True, PAGE + 1]),
            DEEP: (BOARD_SQL.format(after=AFTER_SQL), [BOARD_POOL, True, *key, PAGE + 1]),
        }

        def one(who: str, kind: str) -> Callable[[], object]:
            page_token = token if kind == DEEP else ""
            if who == SQL:
                statement, args = sql[kind]
                return lambda: conn.execute(statement, args).fetchall()
            if who == WORK:
                return lambda: queries.leaderboard(BOARD_POOL, PAGE, page_token)
            stub = board if who == OURS else echo
            request = board_request(kind, token)
            return lambda: stub(request, timeout=CALL_TIMEOUT)

        contenders = [(w, k) for w in (OURS, WORK, ECHO, SQL) for k in (FIRST, DEEP)]
        per_round = max(2, calls // rounds)
        times = harness.rounds(
            contenders,
            rounds,
            lambda c, _: time_calls(one(*c), per_round),
            warmup=lambda c: time_calls(one(*c), 20),
        )
    return board_lines(players, deep_rank, times)


def leaderboard_stub(channel: grpc.Channel) -> Any:
    return channel.unary_unary(
        f"{SERVICE}ListLeaderboard",
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=pb.ListLeaderboardResponse.FromString,
    )


@contextmanager
def echo_server(answer: Path, folder: Path) -> Iterator[str]:
    """`bench._ref_server --kind echo` answering ListLeaderboard with `answer`'s bytes."""
    port_file = folder / "echo.port"
    command = [sys.executable, "-m", "bench._ref_server", "--kind", "echo",
               "--answer", str(answer), "--port-file", str(port_file)]  # fmt: skip
    proc = launch_server("echo", command, folder)
    try:
        port = wait_for_port("echo", proc, port_file, folder / "echo.log")
        yield f"127.0.0.1:{port}"
    finally:
        stop_server(proc)


def round_percentile(rounds: Sequence[Sequence[float]], q: int) -> float:
    """The median over the rounds of each round's q-th percentile: one round's spell of load
    on a shared machine does not make the figure alone."""
    return harness.median(harness.percentile(r, q) for r in rounds)


def board_lines(
    players: int, deep_rank: int, times: dict[tuple[str, str], list[list[float]]]
) -> list[Line]:
    lines = []
    for kind in (FIRST, DEEP):
        what = f"from rank {deep_rank + 1:,}" if kind == DEEP else "from rank 1"
        for q in (50, 99):
            mine, work, echo, sql = (
                round_percentile(times[who, kind], q) for who in (OURS, WORK, ECHO, SQL)
            )
            goal = q == 99
            lines.append(
                Line(
                    f"ListLeaderboard {kind} ({what}) of {players:,} players, p{q}",
                    f"{mine:.2f} ms",
                    f"echo {echo:.2f}; SQL {sql:.2f}",
                    mine / echo,
                    f"< {PAGE_GOAL_MS:g} ms" if goal else "",
                    mine < PAGE_GOAL_MS if goal else None,
                )
            )
            lines.append(
                Line(
                    f"  of which the server's work (catch-up, query, rows), p{q}", f"{work:.2f} ms"
                )
            )
    return lines


# --- from a match's end to the new rating ---------------------------------------------------

FRESH_PLAYERS = 8
VISIBLE_SQL = (
    "SELECT 1 FROM events WHERE stream_id = %s AND type = 'MatchEnded'"
    " AND tx_id < pg_snapshot_xmin(pg_current_snapshot())::text::bigint"
)
"""A match's end, when the commit-safe global order shows it (the store's `read_all`)."""
TARGET_FRESH = 10
"""The fresh part's matches' target: a hand or two."""
FRESH_DEADLINE_S = 60.0
POLL_S = 0.001
"""Between two GetPlayer calls while the new rating is not shown yet."""


@dataclass
class Freshness:
    plays: list[float]
    """Every Play's round trip, ms."""
    shown: list[float]
    """From sending a match's last Play to the GetPlayer answer that shows its rating, ms."""
    after_answer: list[float]
    """The same from the last Play's answer."""
    visible: list[float]
    """From the last Play's answer until its end is in the commit-safe global order, ms."""
    polls: list[int]
    """GetPlayer calls until it showed the rating, a match."""


class RatedClient:
    """Plays rated two-seat matches with a target of TARGET_FRESH between registered players,
    both seats, each play one of the legal plays its seat's view offers."""

    def __init__(self, channel: grpc.Channel, rng: random.Random, url: str) -> None:
        self._db = psycopg.connect(url, autocommit=True)

        def unary(name: str, response: Any) -> Any:
            return channel.unary_unary(
                SERVICE + name,
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=response.FromString,
            )

        self._create = unary("CreateMatch", pb.CreateMatchResponse)
        self._join = unary("JoinMatch", pb.JoinMatchResponse)
        self._get = unary("GetMatch", pb.GetMatchResponse)
        self._play = unary("Play", pb.PlayResponse)
        self._register = unary("RegisterPlayer", pb.RegisterPlayerResponse)
        self._player = unary("GetPlayer", pb.GetPlayerResponse)
        self._rng = rng
        self.players = [
            self._register(pb.RegisterPlayerRequest(name=f"bench {i} {rng.randrange(10**6)}"),
                           timeout=CALL_TIMEOUT)
            for i in range(FRESH_PLAYERS)
        ]  # fmt: skip

    def close(self) -> None:
        self._db.close()

    def visible(self, match_id: str) -> bool:
        """Whether the match's end is in the commit-safe global order the fold reads: its
        transaction older than every one still running on the database's cluster."""
        row = self._db.execute(VISIBLE_SQL, [match_id]).fetchone()
        return row is not None

    def rated(self, player_id: str) -> int:
        """The player's rated matches in pool 2, as GetPlayer shows them."""
        answer = self._player(pb.GetPlayerRequest(player_id=player_id), timeout=CALL_TIMEOUT)
        return int(next(r.rated_matches for r in answer.ratings if r.pool == pb.RATING_POOL_TWO))

    def match(self, tally: Freshness) -> bool:
        """Play one rated match to its end, each Play timed, then poll GetPlayer for the
        first seat's player until it shows the match. False for a match that ended before
        its first Play."""
        a, b = self._rng.sample(self.players, 2)
        created = self._create(
            pb.CreateMatchRequest(seats=2, rated=True, options=pb.RuleOptions(target=TARGET_FRESH)),
            timeout=CALL_TIMEOUT,
        )
        tokens = [
            self._join(
                pb.JoinMatchRequest(match_id=created.match_id, player_token=p.player_token),
                timeout=CALL_TIMEOUT,
            ).seat_token
            for p in (a, b)
        ]
        before = self.rated(a.player_id)
        view = self._get(
            pb.GetMatchRequest(match_id=created.match_id), metadata=bearer(tokens[0]),
            timeout=CALL_TIMEOUT,
        ).view  # fmt: skip
        if view.phase == pb.PHASE_ENDED:
            return False  # the lead, made as the last seat was taken, reached the target
        while True:
            seat = view.turn
            if not view.HasField("viewer_seat") or view.viewer_seat != seat:
                view = self._get(
                    pb.GetMatchRequest(match_id=created.match_id), metadata=bearer(tokens[seat]),
                    timeout=CALL_TIMEOUT,
                ).view  # fmt: skip
            choice = self._rng.choice(view.legal_plays)
            request = pb.PlayRequest(
                match_id=created.match_id, tile=choice.tile, end=choice.end,
                expected_version=view.version,
            )  # fmt: skip
            sent = time.perf_counter()
            view = self._play(request, metadata=bearer(tokens[seat]), timeout=CALL_TIMEOUT).view
            answered = time.perf_counter()
            tally.plays.append((answered - sent) * 1000)
            if view.phase == pb.PHASE_ENDED:
                break
        polls = 0
        seen: float | None = None
        deadline = time.monotonic() + FRESH_DEADLINE_S
        while True:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"GetPlayer did not show match {created.match_id} within {FRESH_DEADLINE_S} s"
                )
            if seen is None and self.visible(created.match_id):
                seen = time.perf_counter()
            polls += 1
            if self.rated(a.player_id) != before:
                break
            time.sleep(POLL_S)
        now = time.perf_counter()
        tally.shown.append((now - sent) * 1000)
        tally.after_answer.append((now - answered) * 1000)
        tally.visible.append(((now if seen is None else seen) - answered) * 1000)
        tally.polls.append(polls)
        return True


def run_fresh(admin_url: str, matches: int) -> list[Line]:
    say(f"fresh: {matches:,} rated two-seat matches, target {TARGET_FRESH}, played to the end")
    tally = Freshness([], [], [], [], [])
    with (
        bench_database(admin_url) as url,
        tempfile.TemporaryDirectory() as folder,
        servers(url, Path(folder), [OURS]) as running,
    ):
        channel = open_channel(running[OURS].target)
        client = RatedClient(channel, random.Random(11), url)
        client.match(Freshness([], [], [], [], []))  # warm-up
        while len(tally.shown) < matches:
            client.match(tally)
        client.close()
        channel.close()
    return fresh_lines(tally)


def fresh_lines(tally: Freshness) -> list[Line]:
    lines = []
    for q in (50, 99):
        shown = harness.percentile(tally.shown, q)
        play = harness.percentile(tally.plays, q)
        goal = q == 99
        lines.append(
            Line(
                f"a rated match's last Play sent to its rating in GetPlayer, p{q}",
                f"{shown:.1f} ms",
                f"Play round trip {play:.1f} ms",
                shown / play,
                f"< {FRESH_GOAL_MS:g} ms" if goal else "",
                shown < FRESH_GOAL_MS if goal else None,
            )
        )
    for q in (50, 99):
        lines.append(
            Line(
                f"  after the Play's answer: in the commit-safe order, shown, p{q}",
                f"{harness.percentile(tally.visible, q):.1f}, "
                f"{harness.percentile(tally.after_answer, q):.1f} ms",
                f"GetPlayer calls: {harness.percentile(tally.polls, q):.0f}",
            )
        )
    return lines


# --- the run ---------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.ratings_bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    harness.add_database_url(parser)
    quick_or = harness.quick_or
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument(
        "--matches", type=int, default=quick_or(100_000, 300), help="rated matches folded"
    )
    parser.add_argument(
        "--players", type=int, default=quick_or(5_000, 40), help="the fold's players"
    )
    parser.add_argument("--open", type=int, default=50, help="the fold's matches in play at once")
    parser.add_argument(
        "--rounds", type=int, default=quick_or(3, 1), help="of each part's contenders in turn"
    )
    parser.add_argument(
        "--board-players",
        type=int,
        default=quick_or(100_000, 500),
        help="players' ratings on the leaderboard's pool",
    )
    parser.add_argument(
        "--deep-rank",
        type=int,
        default=quick_or(70_000, 300),
        help="the rank after which the deep page starts",
    )
    parser.add_argument(
        "--calls", type=int, default=quick_or(1500, 60), help="pages timed a kind and server"
    )
    parser.add_argument(
        "--fresh-matches",
        type=int,
        default=quick_or(200, 4),
        help="rated matches played to their end",
    )
    args = parser.parse_args(argv)
    say(f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f} at the start")
    lines: list[Line] = []
    if FOLD in args.parts:
        lines += run_fold(args.database_url, args.matches, args.players, args.rounds, args.open)
    if BOARD in args.parts:
        lines += run_board(
            args.database_url, args.board_players, args.deep_rank, args.calls, args.rounds
        )
    if FRESH in args.parts:
        lines += run_fresh(args.database_url, args.fresh_matches)
    say(f"load average {os.getloadavg()[0]:.1f} at the end")
    SERVICE_TABLE.print(lines)
    print(harness.goals_line(lines))
    return ExitStatus.OK


if __name__ == "__main__":
    sys.exit(main())
