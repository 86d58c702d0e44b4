"""Players that go on through a failover: each Play sent with a command id of its own, sent
again with the same id while it fails with a passing error, every acknowledgement counted on
the client side (`Tally`), and what a process prints read as it comes (`Output`)."""

from __future__ import annotations

import random
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO

import grpc
import psycopg
from e2e.client import Client, bearer

from bergen.v1 import bergen_pb2 as pb

PLAY_TIMEOUT_S = 1.0
PATIENCE_S = 120.0
"""How long a player sends a call again while it fails with a passing error."""
WAIT_S = 180.0
"""The deadline of each wait for work (Plays acknowledged, bots' matches finished): a loaded
machine is slow, never this slow."""
_AGAIN = (
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.UNKNOWN,
)


@dataclass
class Tally:
    lock: threading.Lock = field(default_factory=threading.Lock)
    acked: dict[str, tuple[str, float, bool]] = field(default_factory=dict)
    """command id -> (match id, when acknowledged, whether answered as a replay)."""
    last_sent: dict[str, float] = field(default_factory=dict)
    """command id -> when the send that was acknowledged began."""
    resent: int = 0
    timed_out: int = 0
    """Plays whose deadline passed (their outcome unknown until sent again)."""
    errors: list[str] = field(default_factory=list)

    def count(self, what: str) -> int:
        with self.lock:
            if what == "acked":
                return len(self.acked)
            if what == "replayed":
                return sum(1 for _, _, r in self.acked.values() if r)
            value: int = getattr(self, what)
            return value


class Output:
    """The lines a process prints, each with the time it was read, read by a thread of its
    own as they come (the pipe never fills)."""

    def __init__(self, pipe: IO[str]) -> None:
        self.lines: list[tuple[float, str]] = []
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self._thread.start()

    def _read(self, pipe: IO[str]) -> None:
        for line in pipe:
            with self._changed:
                self.lines.append((time.monotonic(), line))
                self._changed.notify_all()

    def since(self, at: float, needle: str) -> list[str]:
        with self._changed:
            return [line for t, line in self.lines if t > at and needle in line]

    def text(self) -> str:
        with self._changed:
            return "".join(line for _, line in self.lines)

    def finish(self, timeout: float = 30) -> None:
        """Wait for the end of the output (the process has exited)."""
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the output did not end with the process"


def until(
    condition: Callable[[], bool],
    what: str,
    state: Callable[[], str] = lambda: "",
    timeout: float = WAIT_S,
) -> None:
    """Wait until `condition()` holds. Raises AssertionError saying `what` did not happen
    (and `state()`, what did)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g} s: {what} ({state()})")
        time.sleep(0.05)


def again(call: object, on_timeout: Callable[[], None] | None = None) -> object:
    """`call()` until it answers without a transient error, for up to PATIENCE_S;
    `on_timeout()` after each call whose deadline passed."""
    give_up = time.monotonic() + PATIENCE_S
    while True:
        try:
            return call()  # type: ignore[operator]
        except grpc.RpcError as e:
            code = e.code() if isinstance(e, grpc.Call) else None
            if code == grpc.StatusCode.DEADLINE_EXCEEDED and on_timeout is not None:
                on_timeout()
            if code not in _AGAIN or time.monotonic() > give_up:
                raise
            time.sleep(0.05)


def player(target: str, seed: int, stop: threading.Event, tally: Tally) -> None:
    rng = random.Random(seed)

    def timed_out() -> None:
        with tally.lock:
            tally.timed_out += 1

    with Client(target) as c:
        try:
            while not stop.is_set():
                created = again(lambda: c.create(2, name=f"failover-{seed}"))
                match_id: str = created.match_id  # type: ignore[attr-defined]
                tokens: dict[int, str] = {}
                for i in range(2):
                    # The seat token made here: a join sent again after a lost answer gets
                    # the same seat.
                    join = pb.JoinMatchRequest(
                        match_id=match_id,
                        name=f"p{seed}-{i}",
                        client_seed=f"s{i}",
                        seat_token="bgs_" + secrets.token_urlsafe(32),
                    )
                    joined = again(
                        lambda join=join: c.stub.JoinMatch(join, timeout=PLAY_TIMEOUT_S * 5)
                    )
                    tokens[joined.seat] = join.seat_token  # type: ignore[attr-defined]
                while not stop.is_set():
                    public = again(lambda m=match_id: c.view(m))
                    if public.phase == pb.PHASE_ENDED:  # type: ignore[attr-defined]
                        break
                    seat = public.turn  # type: ignore[attr-defined]
                    mine = again(lambda m=match_id, t=tokens[seat]: c.view(m, t))
                    choice = rng.choice(list(mine.legal_plays))  # type: ignore[attr-defined]
                    command_id = f"fo-{seed}-{rng.getrandbits(64):016x}"
                    request = pb.PlayRequest(
                        match_id=match_id, tile=choice.tile, end=choice.end, command_id=command_id
                    )
                    sent = 0
                    began = 0.0

                    def play(
                        request: pb.PlayRequest = request, token: str = tokens[seat]
                    ) -> pb.PlayResponse:
                        nonlocal sent, began
                        sent += 1
                        began = time.monotonic()
                        reply: pb.PlayResponse = c.stub.Play(
                            request, metadata=bearer(token), timeout=PLAY_TIMEOUT_S
                        )
                        return reply

                    reply = again(play, timed_out)
                    with tally.lock:
                        tally.acked[command_id] = (
                            match_id,
                            time.monotonic(),
                            reply.replayed,  # type: ignore[attr-defined]
                        )
                        tally.last_sent[command_id] = began
                        tally.resent += sent - 1
        except Exception as e:
            with tally.lock:
                tally.errors.append(f"player {seed}: {e!r}")


def assert_each_acknowledged_play_stored_once(url: str, tally: Tally) -> None:
    """The database at `url` (the new primary) holds every Play `tally` saw acknowledged,
    once, in its match, as one run of events, and no Play no client was told of."""
    with psycopg.connect(url, autocommit=True) as conn:
        # An append records its command id in the column on its first event (and in every
        # event's metadata): one row per command applied, whose first event is the play.
        rows = conn.execute(
            "SELECT command_id, stream_id, count(*), min(type) FROM events"
            " WHERE command_id LIKE 'fo-%' GROUP BY 1, 2"
        ).fetchall()
        runs = conn.execute(
            "SELECT metadata->>'command_id', count(*), max(seq) - min(seq) + 1 FROM events"
            " WHERE metadata->>'command_id' LIKE 'fo-%' GROUP BY 1"
        ).fetchall()
    stored = {r[0]: (r[1], r[2]) for r in rows}
    lost = sorted(set(tally.acked) - set(stored))
    assert not lost, f"{len(lost)} acknowledged Plays are not stored: {lost[:5]}"
    doubled = {k: v for k, v in stored.items() if v[1] != 1}
    assert not doubled, f"Plays stored more than once: {doubled}"
    assert {r[3] for r in rows} == {"TilePlayed"}
    split = [r for r in runs if r[1] != r[2]]
    assert not split, f"a command's events are not one run (applied twice?): {split[:5]}"
    unacknowledged = sorted(set(stored) - set(tally.acked))
    assert not unacknowledged, f"stored Plays no client was told of: {unacknowledged[:5]}"
    for command_id, (match_id, _, _) in tally.acked.items():
        assert stored[command_id][0] == match_id
