"""Clocks in the clients (RULES.md section 11): the `--clock` options of the commands that
create matches, the match time a client can tell from what the server sent it, the clocks as
words, and how long a bot may think.

A client never reads the server's clock. Every match time the server sends (an action's
`at_ms`, a view's `server_at_ms`) had passed on the server when it arrived, so the greatest
of them, moved on by the local time since it arrived, is a reading that is never ahead of the
server's and behind it by no more than that message's latency. A running clock is counted
down from it: `falls_at_ms - now`.
"""

from __future__ import annotations

import argparse
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from bergen.domain.describe import clock_words
from bergen.domain.errors import InvalidOptions
from bergen.domain.rules import CLOCK_CHOICES, make_rules
from bergen.domain.state import State
from bergen.v1 import bergen_pb2 as pb

LOW_TIME_MS = 10_000
"""Under this much time left, the terminal client warns its player."""
SAFETY_MS = 300
"""Time a bot keeps out of any thinking: the event's way to it, the play's way back, and the
wait for the rest of a command's events."""
THINK_SHARE = 0.1
"""At most this share of a bot's time left (less SAFETY_MS) goes to one decision."""
MIN_THINK_S = 0.05
"""A budget below this is no time to sample worlds in: the bot plays greedy at once."""

_CLOCK = re.compile(r"(\d{1,6})\+(\d{1,6})")
_FLAGS = {
    "clock": "--clock",
    "clock_initial": "--clock",
    "clock_increment": "--clock",
    "on_timeout": "--on-timeout",
    "timeouts_to_forfeit": "--timeouts-to-forfeit",
}


# ----- the options -----------------------------------------------------------------------


def parse_clock(text: str) -> dict[str, object]:
    """`60+2` (INITIAL+INCREMENT, whole seconds) as rule options. Raises ValueError for
    anything else."""
    m = _CLOCK.fullmatch(text.strip())
    if m is None:
        raise ValueError(
            f"--clock is INITIAL+INCREMENT in whole seconds, like 60+2 or 300+0, not {text!r:.40}"
        )
    return {"clock": "fischer", "clock_initial": int(m[1]), "clock_increment": int(m[2])}


def add_clock_options(p: argparse.ArgumentParser, what: str = "the match") -> None:
    """--clock, --on-timeout and --timeouts-to-forfeit."""
    p.add_argument(
        "--clock",
        metavar="INITIAL+INCREMENT",
        help=f"play {what} on a Fischer clock: INITIAL seconds per seat, INCREMENT seconds "
        "added after each play (e.g. 60+2, 300+0); without it, no clock",
    )
    p.add_argument(
        "--on-timeout",
        choices=CLOCK_CHOICES["on_timeout"],
        help="with --clock: what a seat's timeout does (default autoplay: the server plays "
        "for it; forfeit: its side loses)",
    )
    p.add_argument(
        "--timeouts-to-forfeit",
        type=int,
        metavar="N",
        help="with --clock: timeouts of a seat in a row that forfeit its side (default 3)",
    )


def clock_options(
    args: argparse.Namespace, seats: int, partnerships: bool, preset: str
) -> dict[str, object]:
    """The rule options the clock flags ask for (none without --clock), checked as the
    server will check them. Raises ValueError with a message naming the flag."""
    extra = {
        name: value
        for name, value in (
            ("on_timeout", args.on_timeout),
            ("timeouts_to_forfeit", args.timeouts_to_forfeit),
        )
        if value is not None
    }
    if args.clock is None:
        if extra:
            raise ValueError(f"{_FLAGS[next(iter(extra))]} needs --clock")
        return {}
    options = {**parse_clock(args.clock), **extra}
    try:
        make_rules(seats, partnerships, preset, options)
    except InvalidOptions as e:
        flag = _FLAGS.get(str(e.metadata.get("option", "")), "--clock")
        raise ValueError(f"{flag}: {e}") from None
    return options


# ----- the match time ----------------------------------------------------------------------


class MatchClock:
    """The match time now (ms since the first deal), as far as this client can tell: see the
    module's docstring. Thread-safe; `local` is the local time source, in seconds."""

    def __init__(self, local: Callable[[], float] = time.monotonic) -> None:
        self.local = local
        self._lock = threading.Lock()
        self._offset: float | None = None
        """max(match ms seen - local ms when seen)."""

    def saw(self, at_ms: int) -> None:
        """Match time `at_ms` has passed on the server by now."""
        offset = at_ms - self.local() * 1000.0
        with self._lock:
            if self._offset is None or offset > self._offset:
                self._offset = offset

    def saw_event(self, event: object) -> None:
        """An event arrived: its `at_ms`, when it has one, has passed."""
        at = getattr(event, "at_ms", None)
        if isinstance(at, int):
            self.saw(at)

    def saw_view(self, v: pb.MatchView) -> None:
        """A view arrived: the match time it was made at has passed (`server_at_ms`, else
        the `at_ms` of its last action). A view of a match not dealt yet tells nothing."""
        if not v.clocks or v.phase == pb.PHASE_SEATING:
            return
        # A server that predates server_at_ms leaves it 0: the last action's time then.
        self.saw(max(v.server_at_ms, v.at_ms))

    def now_ms(self) -> int | None:
        """The match time now, or None before anything was seen."""
        with self._lock:
            offset = self._offset
        if offset is None:
            return None
        return int(offset + self.local() * 1000.0)

    def left_ms(self, state: State, seat: int) -> int | None:
        """`seat`'s time left now (a running clock counted down), None without clocks."""
        if not state.clocked:
            return None
        now = self.now_ms()
        return state.clock_left(seat, state.at_ms if now is None else max(now, state.at_ms))


# ----- in words ---------------------------------------------------------------------------


def clocks_markup(state: State, clock: MatchClock, viewer: int | None, names: Sequence[str]) -> str:
    """Every seat's clock as console markup: `clocks: ann 1:02.3 · ▶ bob 41.2 s`, the
    running one marked, the viewer's in red under LOW_TIME_MS. Empty without clocks."""
    if not state.clocked:
        return ""
    parts = []
    for seat in range(state.seats):
        left = clock.left_ms(state, seat)
        assert left is not None
        name = names[seat] if seat < len(names) else f"seat {seat + 1}"
        runs = state.running == seat
        words = f"{'▶ ' if runs else ''}{name} {clock_words(left)}"
        if seat == viewer and left < LOW_TIME_MS and state.running == seat:
            words = f"[bold red]{words} (under {LOW_TIME_MS // 1000} s!)[/]"
        elif runs:
            words = f"[bold]{words}[/]"
        parts.append(words)
    return "clocks: " + " · ".join(parts)


# ----- thinking on a clock ----------------------------------------------------------------


def think_budget_s(left_ms: int, cap_s: float) -> float | None:
    """Seconds a bot may spend on one decision with `left_ms` on its clock: THINK_SHARE of
    what is left after SAFETY_MS, at most `cap_s`; None when that is under MIN_THINK_S
    (no time to think: play at once)."""
    budget = min(cap_s, (left_ms - SAFETY_MS) / 1000.0 * THINK_SHARE)
    return budget if budget >= MIN_THINK_S else None


def options_words(options: Mapping[str, object]) -> str:
    """`60+2` for the clock options, empty without a clock."""
    if not options:
        return ""
    return f"{options['clock_initial']}+{options['clock_increment']}"


__all__ = [
    "LOW_TIME_MS",
    "MatchClock",
    "add_clock_options",
    "clock_options",
    "clocks_markup",
    "parse_clock",
    "think_budget_s",
]
