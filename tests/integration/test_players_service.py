"""Registering players through the application on both stores: spellings of one name
registered at once by two replicas (two stores on one database) write one player, and a
player's token is checked against its registration alone."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from conftest import Backend

from bergen.domain.errors import AlreadyExists, Unauthenticated
from bergen.server.app import Application, Settings, build_application
from bergen.server.feed import EventFeed
from bergen.server.keys import LogKeys
from bergen.server.players import player_stream
from bergen.server.store import EventStore, open_store

KEYS = LogKeys.generate()


@pytest.fixture
def replicas(backend: Backend) -> Iterator[list[tuple[EventStore, Application]]]:
    stores = [open_store(backend.url, log_keys=KEYS) for _ in range(2)]
    yield [(s, build_application(s, EventFeed(s), Settings(), KEYS)) for s in stores]
    for s in stores:
        s.close()


@pytest.mark.parametrize("round_", range(3))
def test_one_name_registered_at_once_on_two_replicas_is_one_player(
    replicas: list[tuple[EventStore, Application]], round_: int
) -> None:
    spellings = [f"Ann {round_}", f"\uff21NN {round_}", f"ann {round_}", f"A\u200bnn {round_}"]
    start = threading.Barrier(len(spellings))
    outcomes: list[object] = [None] * len(spellings)

    def register(i: int) -> None:
        app = replicas[i % 2][1]
        start.wait()
        try:
            outcomes[i] = app.players.register(spellings[i], False)
        except Exception as e:  # each outcome is checked below
            outcomes[i] = e

    threads = [threading.Thread(target=register, args=(i,)) for i in range(len(spellings))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert isinstance(outcomes[3], Exception)  # a zero width space is no letter
    won = [o for o in outcomes[:3] if isinstance(o, tuple)]
    assert len(won) == 1, outcomes
    assert all(isinstance(o, AlreadyExists) and o.reason == "NAME_TAKEN" for o in outcomes[:3]
               if not isinstance(o, tuple))  # fmt: skip
    player, token = won[0]  # type: ignore[misc]
    store = replicas[0][0]
    assert [e.type for e in store.read_stream(player_stream(player.player_id))] == [
        "PlayerRegistered"
    ]
    # Either replica knows the winner by its token, and no other secret for it.
    for _, app in replicas:
        assert app.players.authenticate(token) == player
        with pytest.raises(Unauthenticated):
            app.players.authenticate(token[:-1] + ("A" if token[-1] != "A" else "B"))


def test_the_stored_registration_holds_no_token_but_its_seal(
    replicas: list[tuple[EventStore, Application]],
) -> None:
    store, app = replicas[0]
    player, token = app.players.register("Dee", True)
    (row,) = store.read_stream(player_stream(player.player_id))
    assert row.payload == {"player_id": player.player_id, "name": "Dee", "bot": True}
    assert set(row.metadata.extra) >= {"player_token_hmac", "player_token_key"}
    secret = token[len("bgp_") + 22 :]
    assert all(secret not in v and token not in v for v in row.metadata.extra.values())
