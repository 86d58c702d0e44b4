"""Reading a WatchMatch stream on the client: a batched message's events come out one at a
time, in order, exactly as one-event messages do."""

from __future__ import annotations

import random

from bergen.api.convert import event_in, event_out
from bergen.cli_client.client import watch_events
from bergen.domain import make_rules, random_policy
from bergen.domain.dealing import SEED_BYTES
from bergen.domain.simulation import play_match
from bergen.v1 import bergen_pb2 as pb


def test_batched_and_single_event_messages_read_as_the_same_items() -> None:
    rng = random.Random(3)
    events, _ = play_match(
        "w", make_rules(2, False, "standard"), 2, False, rng.randbytes(SEED_BYTES),
        [random_policy, random_policy], rng,
    )  # fmt: skip
    out = [event_out(seq, e) for seq, e in enumerate(events, start=1)]
    view = pb.MatchView(match_id="w", version=0)
    single = [pb.WatchMatchResponse(view=view)] + [pb.WatchMatchResponse(event=e) for e in out]
    batched = [pb.WatchMatchResponse(view=view)]
    i = 0
    while i < len(out):
        n = rng.randint(1, 5)
        batched.append(pb.WatchMatchResponse(events=out[i : i + n]))
        i += n
    expected = [view, *(event_in(e) for e in out)]
    assert [seq for seq, _ in expected[1:]] == list(range(1, len(events) + 1))
    assert list(watch_events(iter(single))) == expected  # type: ignore[arg-type]
    assert list(watch_events(iter(batched))) == expected  # type: ignore[arg-type]
    assert len(batched) < len(single)
