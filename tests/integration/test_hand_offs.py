"""Hand-offs (a seat, or a tournament player's place, carried to another device) on a real
store of each backend, through two applications on one database standing for two replicas:
a code made on one is claimed once on either; claims and offers at once spend a code once and
stop at the cap; codes expire; only a place's own token offers it, while its match or
tournament goes on; the store keeps neither a code nor a token; a code outlives a key
rotation; and no hand-off is listed as a match."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from conftest import Backend

from bergen.domain.errors import (
    BergenError,
    InvalidArgument,
    MatchNotInProgress,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    RuleViolation,
    Unauthenticated,
)
from bergen.domain.handoff import ENTRANT, MAX_OUTSTANDING, SEAT, SPENT_OR_UNKNOWN, TTL_MS, Holder
from bergen.domain.tournament_pairing import SWISS, Settings
from bergen.server.app import Application, build_application
from bergen.server.app import Settings as AppSettings
from bergen.server.feed import EventFeed
from bergen.server.handoffs import new_code
from bergen.server.identity import Caller
from bergen.server.keys import LogKeys
from bergen.server.store import EventStore, open_store

ORGANISER = "bgo_" + "Zq8w-Xv3_Tn7Ry1Lp5Ks9Jd2Hf6Gb4Mc0Na8Ue3"
PARCEL = b"sealed by the gateway \x00\xff"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_800_000_000_000

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def keys() -> LogKeys:
    return LogKeys.generate()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def stores(backend: Backend, keys: LogKeys) -> Iterator[list[EventStore]]:
    opened = [open_store(backend.url, log_keys=keys) for _ in range(2)]
    yield opened
    for s in opened:
        s.close()


@pytest.fixture
def replicas(stores: list[EventStore], keys: LogKeys, clock: FakeClock) -> list[Application]:
    settings = AppSettings(organiser_token=ORGANISER)
    return [build_application(s, EventFeed(s), settings, keys, clock=clock) for s in stores]


def seated(app: Application) -> tuple[str, list[str]]:
    """A two-seat match in play and its seats' tokens."""
    state = app.commands.create_match(Caller(), 2, False, "standard", {}, "hand-offs")
    tokens = [app.commands.join_match(state.match_id, None, n, "")[1] for n in ("Ada", "Bo")]
    return state.match_id, tokens


def reason_of(call: Callable[[], Any]) -> tuple[type[BergenError], str, str]:
    try:
        call()
    except BergenError as e:
        return type(e), e.reason, e.message
    raise AssertionError("not refused")


def test_a_code_made_on_one_replica_is_claimed_once_on_either(
    replicas: list[Application],
) -> None:
    a, b = replicas
    match_id, tokens = seated(a)
    made = a.hand_offs.offer_seat(Caller(tokens[1]), match_id, PARCEL)
    assert len(made.code) == 40
    got = b.hand_offs.claim(made.code)
    assert got.holder == Holder(SEAT, match_id, 1)
    assert got.parcel == PARCEL
    spent = reason_of(lambda: a.hand_offs.claim(made.code))
    assert spent[:2] == (NotFound, SPENT_OR_UNKNOWN)
    assert reason_of(lambda: b.hand_offs.claim(made.code)) == spent
    # Never given: a code of this seat's shape, and one of no holder at all.
    assert reason_of(lambda: b.hand_offs.claim(new_code(got.holder))) == spent
    assert reason_of(lambda: b.hand_offs.claim(new_code(Holder(SEAT, "x", 0)))) == spent
    bad = reason_of(lambda: b.hand_offs.claim(made.code[:-1] + "!"))
    assert bad[:2] == (InvalidArgument, "INVALID_HAND_OFF_CODE")
    assert made.code[:20] not in bad[2]


def test_claims_at_once_on_two_replicas_spend_a_code_once(replicas: list[Application]) -> None:
    a, _ = replicas
    match_id, tokens = seated(a)
    for _round in range(3):
        code = a.hand_offs.offer_seat(Caller(tokens[0]), match_id, PARCEL).code
        got = at_once(8, lambda i, code=code: replicas[i % 2].hand_offs.claim(code))
        wins = [g for g in got if not isinstance(g, BergenError)]
        losses = [g for g in got if isinstance(g, BergenError)]
        assert len(wins) == 1, got
        assert {(type(e), e.reason) for e in losses} == {(NotFound, SPENT_OR_UNKNOWN)}, losses


def test_offers_at_once_stop_at_the_cap_even_for_a_new_holder(
    replicas: list[Application],
) -> None:
    a, _ = replicas
    match_id, tokens = seated(a)

    def offer(i: int) -> Any:
        return replicas[i % 2].hand_offs.offer_seat(Caller(tokens[0]), match_id, PARCEL)

    got = at_once(MAX_OUTSTANDING + 5, offer)
    made = [g for g in got if not isinstance(g, BergenError)]
    refused = [g for g in got if isinstance(g, BergenError)]
    assert len(made) == MAX_OUTSTANDING, got
    assert {(type(e), e.reason) for e in refused} == {(ResourceExhausted, "TOO_MANY_HAND_OFFS")}
    # A code spent frees a place; the other seat has its own.
    replicas[1].hand_offs.claim(made[0].code)
    offer(0)
    replicas[0].hand_offs.offer_seat(Caller(tokens[1]), match_id, PARCEL)


def test_a_code_expires_after_ten_minutes(replicas: list[Application], clock: FakeClock) -> None:
    a, b = replicas
    match_id, tokens = seated(a)
    early = a.hand_offs.offer_seat(Caller(tokens[0]), match_id, PARCEL)
    late = a.hand_offs.offer_seat(Caller(tokens[0]), match_id, PARCEL)
    assert early.expires_ms == clock.now + TTL_MS
    clock.now += TTL_MS - 1
    assert b.hand_offs.claim(early.code).parcel == PARCEL
    clock.now += 1
    assert reason_of(lambda: b.hand_offs.claim(late.code))[:2] == (NotFound, SPENT_OR_UNKNOWN)
    # Expired codes hold no place.
    for _ in range(MAX_OUTSTANDING):
        a.hand_offs.offer_seat(Caller(tokens[0]), match_id, PARCEL)


def test_only_the_seats_token_offers_it_while_its_match_goes_on(
    replicas: list[Application],
) -> None:
    a, _ = replicas
    match_id, tokens = seated(a)
    other_id, others = seated(a)
    offer = a.hand_offs.offer_seat
    assert reason_of(lambda: offer(Caller(), match_id, PARCEL))[:2] == (
        Unauthenticated,
        "SEAT_TOKEN_REQUIRED",
    )
    assert reason_of(lambda: offer(Caller(others[0]), match_id, PARCEL))[:2] == (
        PermissionDenied,
        "NOT_A_SEAT_OF_THIS_MATCH",
    )
    for parcel in (b"", b"x" * 1025):
        assert reason_of(lambda p=parcel: offer(Caller(tokens[0]), match_id, p))[:2] == (
            InvalidArgument,
            "INVALID_PARCEL",
        )
    a.commands.resign(Caller(tokens[0]), match_id, None)
    assert reason_of(lambda: offer(Caller(tokens[1]), match_id, PARCEL))[:2] == (
        MatchNotInProgress,
        "MATCH_ENDED",
    )
    assert offer(Caller(others[1]), other_id, PARCEL).code


def test_a_tournament_player_hands_off_its_place(replicas: list[Application]) -> None:
    a, b = replicas
    org = Caller(ORGANISER)
    settings = Settings(format=SWISS, seats=2, rules={"preset": "standard"}, rounds=1)
    tid = a.tournaments.create(org, settings, "cup").state.tournament_id
    tokens = [a.tournaments.register(tid, (n,), n)[1][0] for n in ("Ann", "Bo")]
    made = a.hand_offs.offer_entrant(Caller(tokens[1]), tid, PARCEL)
    got = b.hand_offs.claim(made.code)
    assert (got.holder, got.parcel) == (Holder(ENTRANT, tid, 2, 0), PARCEL)
    offer = b.hand_offs.offer_entrant
    assert reason_of(lambda: offer(Caller(), tid, PARCEL))[:2] == (
        Unauthenticated,
        "TOKEN_REQUIRED",
    )
    _, seat_tokens = seated(a)
    assert reason_of(lambda: offer(Caller(seat_tokens[0]), tid, PARCEL))[:2] == (
        PermissionDenied,
        "NOT_A_PLAYER_OF_THIS_TOURNAMENT",
    )
    a.tournaments.cancel(org, tid, "rained off")
    assert reason_of(lambda: offer(Caller(tokens[0]), tid, PARCEL))[:2] == (
        RuleViolation,
        "TOURNAMENT_CANCELLED",
    )


def test_the_store_keeps_neither_a_code_nor_a_token(
    replicas: list[Application], stores: list[EventStore]
) -> None:
    a, b = replicas
    match_id, tokens = seated(a)
    codes = [a.hand_offs.offer_seat(Caller(t), match_id, PARCEL).code for t in tokens]
    b.hand_offs.claim(codes[0])
    # The global order shows a write once every older transaction in the cluster has ended:
    # another database's long one can hold it back for a moment.
    deadline = time.monotonic() + 30
    while True:
        rows = stores[0].read_all(0, 10_000)
        streams = {r.stream_id for r in rows if r.stream_id.startswith("handoff-")}
        if len(streams) == 2 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert len(streams) == 2  # one a seat
    text = json.dumps([[r.payload, dict(r.metadata.extra), r.metadata.actor] for r in rows])
    for secret in codes + tokens:
        assert secret not in text
        assert secret[-20:] not in text


def test_a_code_made_before_a_key_rotation_is_claimed_after_it(
    backend: Backend, keys: LogKeys, replicas: list[Application], clock: FakeClock
) -> None:
    a, _ = replicas
    match_id, tokens = seated(a)
    code = a.hand_offs.offer_seat(Caller(tokens[0]), match_id, PARCEL).code
    held = {i: keys.key(i) for i in keys.ids}
    rotated = LogKeys(
        {**{i: k for i, k in held.items() if k is not None}, "k2": b"\x07" * 32}, "k2"
    )
    store = open_store(backend.url, log_keys=rotated)
    try:
        after = build_application(store, EventFeed(store), AppSettings(), rotated, clock=clock)
        assert after.hand_offs.claim(code).parcel == PARCEL
        fresh = after.hand_offs.offer_seat(Caller(tokens[0]), match_id, PARCEL).code
        assert after.hand_offs.claim(fresh).parcel == PARCEL
    finally:
        store.close()


def test_no_hand_off_is_listed_as_a_match(replicas: list[Application]) -> None:
    a, b = replicas
    match_id, tokens = seated(a)
    b.hand_offs.claim(a.hand_offs.offer_seat(Caller(tokens[0]), match_id, PARCEL).code)
    deadline = time.monotonic() + 30  # the listing shows the match within moments
    while not (rows := b.queries.list_matches(None, "", 100, "")[0]):
        assert time.monotonic() < deadline, "the match was never listed"
        time.sleep(0.05)
    assert [r.match_id for r in rows] == [match_id]


def at_once(n: int, call: Callable[[int], Any]) -> list[Any]:
    """`call(i)` for i in range(n), in n threads let go together: each result or error."""
    barrier = threading.Barrier(n)
    results: list[Any] = [None] * n

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = call(i)
        except BergenError as e:
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results
