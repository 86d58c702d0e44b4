"""Clocks in the clients (RULES.md section 11), with a fake local time: the match time a
client tells from what the server sent, the countdown it shows, how long a bot may think, the
live line, and what the terminal client and the replay say of timeouts and forfeits.

The match is the worked case of section 11: `clock_initial` 10, `clock_increment` 2; seat 0
leads 1-1 at 0, seat 1 plays 1-3 at 1000, so seat 0's clock (10 s) runs from 1000 and falls
at 11000.
"""

from __future__ import annotations

import argparse
import io
import random

import pytest
from rich.console import Console
from rich.text import Text

from bergen.cli_client import clocks
from bergen.cli_client import seat as seat_loop
from bergen.cli_client.clocks import MatchClock, clock_options, clocks_markup, think_budget_s
from bergen.cli_client.narrate import Narrator
from bergen.cli_client.render import render_frame, render_story, tell
from bergen.cli_client.terminal import LiveLine
from bergen.domain.commands import Play, Timeout
from bergen.domain.montecarlo import Knowledge, Settings, knowledge
from bergen.domain.state import State, fold
from bergen.domain.tiles import End
from bergen.domain.vocabulary import StepKind
from bergen.v1 import bergen_pb2 as pb

from . import deals
from .support import Game, T, rules_for


class FakeTime:
    """A local clock that moves only when told (seconds)."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def worked(crafted_deals) -> Game:
    crafted_deals({(1, 1): deals.CASE3})
    rules = rules_for(
        2, clock="fischer", clock_initial=10, clock_increment=2, timeouts_to_forfeit=2
    )
    g = Game(2, rules=rules).start()
    g.do(Play(1, T("1-3"), End.LEFT, at_ms=1000))
    return g


def seen_at(at_ms: int, local: FakeTime) -> MatchClock:
    clock = MatchClock(local)
    clock.saw(at_ms)
    return clock


# ----- the match time ----------------------------------------------------------------------


def test_the_match_time_moves_on_with_the_local_time_from_the_latest_sighting():
    local = FakeTime(100.0)
    clock = MatchClock(local)
    assert clock.now_ms() is None
    clock.saw(1000)
    local.now = 102.5
    assert clock.now_ms() == 3500
    # An older time seen later (an event replayed, a stale view) tells less: it is ignored.
    clock.saw(2000)
    assert clock.now_ms() == 3500
    # A fresher one (less latency behind it) moves the reading on.
    clock.saw(3600)
    local.now = 103.0
    assert clock.now_ms() == 4100


def test_a_view_tells_its_server_time_and_a_view_before_the_deal_tells_nothing():
    local = FakeTime()
    clock = MatchClock(local)
    clock.saw_view(pb.MatchView(phase=pb.PHASE_SEATING, clocks=[pb.SeatClock(left_ms=10_000)]))
    assert clock.now_ms() is None
    clock.saw_view(pb.MatchView(phase=pb.PHASE_PLAYING, at_ms=1000))  # no clocks: no time
    assert clock.now_ms() is None
    clock.saw_view(
        pb.MatchView(phase=pb.PHASE_PLAYING, at_ms=1000, clocks=[pb.SeatClock(running=True)])
    )
    assert clock.now_ms() == 1000
    clock.saw_view(
        pb.MatchView(phase=pb.PHASE_PLAYING, at_ms=1000, server_at_ms=1700, clocks=[pb.SeatClock()])
    )
    assert clock.now_ms() == 1700


def test_the_running_clock_counts_down_and_stops_at_zero(worked):
    state = worked.s
    local = FakeTime(100.0)
    clock = seen_at(1000, local)
    assert clock.left_ms(state, 0) == 10_000
    local.now = 103.5
    assert clock.left_ms(state, 0) == 6500
    assert clock.left_ms(state, 1) == 11_000  # not running: as of its play
    local.now = 120.0
    assert clock.left_ms(state, 0) == 0


def test_before_any_time_is_seen_the_clock_reads_as_of_the_last_action(worked):
    assert MatchClock(FakeTime()).left_ms(worked.s, 0) == 10_000


def test_no_clock_no_reading(crafted_deals):
    crafted_deals({(1, 1): deals.CASE3})
    g = Game(2).start()
    assert MatchClock(FakeTime()).left_ms(g.s, 0) is None
    assert clocks_markup(g.s, MatchClock(FakeTime()), 0, ["you", "bob"]) == ""


# ----- the countdown shown -------------------------------------------------------------------


def test_the_clocks_line_marks_the_running_clock_and_warns_the_viewer_under_10_s(worked):
    local = FakeTime(100.0)
    clock = seen_at(1000, local)
    local.now = 100.5
    line = clocks_markup(worked.s, clock, 0, ["you", "bob"])
    assert Text.from_markup(line).plain == "clocks: ▶ you 9.5 s (under 10 s!) · bob 11.0 s"
    assert "[bold red]" in line
    local.now = 100.0
    line = clocks_markup(worked.s, clock, 0, ["you", "bob"])
    assert Text.from_markup(line).plain == "clocks: ▶ you 10.0 s · bob 11.0 s"
    assert "[bold red]" not in line
    # Another seat's low clock is no warning to this viewer.
    assert "[bold red]" not in clocks_markup(worked.s, clock, 1, ["ann", "you"])


def test_the_clocks_line_counts_down_as_the_local_time_passes(worked):
    local = FakeTime(100.0)
    clock = seen_at(1000, local)
    shown = []
    for step in range(4):
        local.now = 100.0 + step
        shown.append(Text.from_markup(clocks_markup(worked.s, clock, 1, ["ann", "you"])).plain)
    assert shown == [f"clocks: ▶ ann {s}.0 s · you 11.0 s" for s in (10, 9, 8, 7)]


# ----- the options ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "initial", "increment"), [("60+2", 60, 2), ("300+0", 300, 0), (" 1+0 ", 1, 0)]
)
def test_a_clock_is_initial_plus_increment(text, initial, increment):
    assert clocks.parse_clock(text) == {
        "clock": "fischer",
        "clock_initial": initial,
        "clock_increment": increment,
    }


@pytest.mark.parametrize(
    "text", ["60", "60+", "+2", "a+b", "60+2+1", "-1+2", "1.5+0", "", "60 + 2"]
)
def test_anything_else_is_refused_with_the_form_to_use(text):
    with pytest.raises(ValueError, match=r"--clock is INITIAL\+INCREMENT in whole seconds"):
        clocks.parse_clock(text)


def args(clock=None, on_timeout=None, timeouts_to_forfeit=None) -> argparse.Namespace:
    return argparse.Namespace(
        clock=clock, on_timeout=on_timeout, timeouts_to_forfeit=timeouts_to_forfeit
    )


def test_the_clock_options_are_checked_as_the_server_checks_them():
    assert clock_options(args(), 2, False, "standard") == {}
    assert clock_options(args("60+2", "forfeit", 2), 2, False, "standard") == {
        "clock": "fischer",
        "clock_initial": 60,
        "clock_increment": 2,
        "on_timeout": "forfeit",
        "timeouts_to_forfeit": 2,
    }
    with pytest.raises(ValueError, match=r"^--clock: option clock_initial .* 1\.\.86400"):
        clock_options(args("0+2"), 2, False, "standard")
    with pytest.raises(ValueError, match=r"^--timeouts-to-forfeit: option timeouts_to_forfeit"):
        clock_options(args("60+2", timeouts_to_forfeit=100), 2, False, "standard")
    with pytest.raises(ValueError, match=r"^--timeouts-to-forfeit needs --clock$"):
        clock_options(args(timeouts_to_forfeit=2), 2, False, "standard")


# ----- how long a bot thinks ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("left_ms", "budget"),
    [(600_000, 0.9), (5300, 0.5), (2300, 0.2), (1000, 0.07), (800, 0.05), (799, None), (0, None)],
)
def test_a_bot_thinks_for_a_small_share_of_its_time_and_not_at_all_when_short(left_ms, budget):
    got = think_budget_s(left_ms, 0.9)
    if budget is None:
        assert got is None
    else:
        assert got == pytest.approx(budget)


@pytest.mark.parametrize("left_ms", [0, 300, 801, 1500, 4000, 10_000, 100_000, 10**8])
@pytest.mark.parametrize("cap", [0.05, 0.3, 0.9])
def test_a_budget_never_risks_the_clock(left_ms, cap):
    got = think_budget_s(left_ms, cap)
    if got is not None:
        assert got <= cap
        assert got * 1000 <= (left_ms - clocks.SAFETY_MS) * clocks.THINK_SHARE + 1e-9


def test_a_monte_carlo_bot_on_a_clock_thinks_within_its_budget(worked, monkeypatch):
    calls: list[tuple[Knowledge, Settings]] = []

    def recorded(k: Knowledge, rng: random.Random, settings: Settings) -> tuple:
        calls.append((k, settings))
        return k.state.legal_plays(k.seat)[0]  # type: ignore[union-attr]

    monkeypatch.setattr(seat_loop, "montecarlo_play", recorded)
    k = knowledge(worked.events, 0)
    local = FakeTime(100.0)
    clock = seen_at(1000, local)
    decide = seat_loop.seat_decider("montecarlo", Settings(budget_s=0.9), clock)
    local.now = 104.0  # 6 s left
    assert decide(k, random.Random(1)) == (T("1-5"), End.RIGHT)
    (seen, settings), = calls  # fmt: skip
    assert settings.budget_s == pytest.approx((6000 - clocks.SAFETY_MS) / 1000 * 0.1)
    assert settings.min_samples == 1
    # The policy is given the seat's knowledge as it is (the playouts drop the clocks).
    assert seen is k
    # With under a second left the bot plays greedy at once, sampling nothing.
    local.now = 110.3
    assert decide(k, random.Random(1)) == (T("1-5"), End.RIGHT)
    assert len(calls) == 1


def test_an_ismcts_bot_on_a_clock_thinks_within_its_budget(worked, monkeypatch):
    calls: list[Settings] = []

    def recorded(k: Knowledge, rng: random.Random, settings: Settings) -> tuple:
        calls.append(settings)
        return k.state.legal_plays(k.seat)[0]  # type: ignore[union-attr]

    monkeypatch.setattr(seat_loop, "ismcts_play", recorded)
    k = knowledge(worked.events, 0)
    local = FakeTime(100.0)
    decide = seat_loop.seat_decider("ismcts", Settings(budget_s=0.9), seen_at(1000, local))
    local.now = 104.0  # 6 s left
    assert decide(k, random.Random(1)) == (T("1-5"), End.RIGHT)
    assert calls[0].budget_s == pytest.approx((6000 - clocks.SAFETY_MS) / 1000 * 0.1)
    local.now = 110.3  # under a second left: greedy at once
    assert decide(k, random.Random(1)) == (T("1-5"), End.RIGHT)
    assert len(calls) == 1


@pytest.mark.parametrize("policy", ["montecarlo", "ismcts"])
def test_a_searching_bot_on_a_clock_plays_a_legal_play(worked, policy):
    k = knowledge(worked.events, 0)
    decide = seat_loop.seat_decider(policy, Settings(budget_s=0.05), seen_at(1000, FakeTime()))
    assert decide(k, random.Random(3)) in k.state.legal_plays(0)  # type: ignore[union-attr]


# ----- the live line -----------------------------------------------------------------------


def console(width: int = 40) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=width, color_system=None, soft_wrap=True), out


def test_the_live_line_is_rewritten_in_place_under_the_lines_printed():
    c, out = console()
    live = LiveLine(c, enabled=True)
    live.show(Text("clocks: ann 9.9 s"))
    live.show(Text("clocks: ann 9.8 s"))
    live.print("ann plays 1-5 right")
    live.done()
    assert out.getvalue() == (
        "clocks: ann 9.9 s"
        "\r\x1b[2Kclocks: ann 9.8 s"
        "\r\x1b[2Kann plays 1-5 right\n"
        "clocks: ann 9.8 s"
        "\r\x1b[2K"
    )


def test_the_live_line_never_wraps_and_is_not_drawn_off_a_terminal():
    c, out = console(width=20)
    LiveLine(c, enabled=True).show(Text("x" * 50))
    assert out.getvalue() == "x" * 19
    c, out = console()
    live = LiveLine(c, enabled=False)
    live.show(Text("clocks"))
    live.print("a line")
    live.done()
    assert out.getvalue() == "a line\n"


# ----- what the terminal client says ------------------------------------------------------------


def narrated(events, seat: int, state: State | None = None) -> list[str]:
    said: list[str] = []
    narrator = Narrator(Console(file=io.StringIO()), seat, state, out=said.append)
    for e in events:
        narrator.feed(e)
    narrator.flush()
    return [Text.from_markup(s).plain for s in said]


def test_the_player_is_told_a_timeout_played_for_them_and_that_they_forfeit(worked):
    before = len(worked.events)
    worked.do(Timeout(0, 11_000))
    seat1 = worked.s.legal_plays(1)[0]
    worked.do(Play(1, seat1[0], seat1[1], at_ms=12_000))
    worked.do(Timeout(0, 14_000))
    state = fold(worked.events[:before])
    mine = narrated(worked.events[before:], 0, state)
    assert mine[0] == "seat 1 (p0, you) runs out of time (11.0 s into the match)"
    assert mine[1] == (
        "seat 1 (p0, you) plays 1-5 right automatically "
        "(your time ran out: the server played this for you)"
    )
    assert mine[-2].startswith(
        "match over: you forfeit: seat 1 (p0, you) forfeits (out of time); seat 2 (p1) wins"
    )
    theirs = narrated(worked.events[before:], 1, state)
    assert "the server played this for you" not in theirs[1]
    assert theirs[-2].startswith("match over: you win: seat 1 (p0) forfeits (out of time)")


# ----- the replay ---------------------------------------------------------------------------


def test_the_replay_gives_each_play_its_time_left_and_marks_the_timeouts(worked):
    worked.do(Play(0, T("1-5"), at_ms=4500))  # the worked case: 8.5 s left
    worked.do(Timeout(1, worked.s.due_at_ms or 0))
    story = tell(worked.events)
    rows = [t.plain for t in render_story(story)]
    assert "clock 10+2 (a timeout plays for the seat; 2 in a row forfeit)" in rows[0]
    played = [r for r in rows if r.startswith("    3  p0 plays 1-5 right")]
    assert len(played) == 1 and played[0].endswith("clock 8.5 s")
    timeout = next(i for i, r in enumerate(rows) if "timeout:" in r)
    assert rows[timeout] == "       timeout: p1 runs out of time (15.5 s into the match)"
    assert "    4  p1 plays" in rows[timeout + 1] and "automatically" in rows[timeout + 1]
    actions = story.hands[0].actions
    assert [a.kind for a in actions][3:5] == [StepKind.TIMEOUT, StepKind.PLAY]
    # Seat 0 then draws (forced): the actions are numbered on past the timeout.
    assert [a.number for a in actions] == [1, 2, 3, 0, 4, 5, 6, 7, 8]
    frame = [t.plain for t in render_frame(story, len(story.steps) - 1, story.steps)]
    assert any(r.startswith("  p0 ") and "clock 8.5 s   <- to play" in r for r in frame)
    assert any(r.startswith("  p1 ") and r.endswith("clock 2.0 s") for r in frame)


def test_a_prompt_opened_after_the_stream_moved_the_match_on_gives_way_at_once(monkeypatch):
    """The stream may deliver a timeout (and the match's end) between the turn's lines and
    the prompt: the prompt gives way at once for those events to be folded, instead of
    counting a clock that no longer runs down to 0.0 s and waiting for a key."""
    import threading
    from contextlib import contextmanager
    from types import SimpleNamespace

    from bergen.cli_client import terminal

    @contextmanager
    def no_terminal():
        yield -1

    monkeypatch.setattr(terminal, "raw_keys", no_terminal)
    monkeypatch.setattr(terminal, "read_char", lambda fd, timeout: None)  # no key, ever
    link = SimpleNamespace(
        seat=0,
        seq=40,  # folded
        streamed=43,  # delivered already: a timeout, the forfeit and the match's end
        stream_ended=False,
        state=None,
        clock=SimpleNamespace(left_ms=lambda state, seat: 0),
    )
    live = LiveLine(Console(file=io.StringIO()), enabled=True)
    answer: list[int | None] = []
    asking = threading.Thread(target=lambda: answer.append(seat_loop.ask_on_clock(live, link, 2)))
    asking.daemon = True
    asking.start()
    asking.join(timeout=60)
    assert not asking.is_alive(), "the prompt kept waiting for a key"
    assert answer == [None]

    link.streamed = 40  # all folded: the prompt waits for the player, until the stream moves
    answer.clear()
    asking = threading.Thread(target=lambda: answer.append(seat_loop.ask_on_clock(live, link, 2)))
    asking.daemon = True
    asking.start()
    asking.join(timeout=0.3)
    assert asking.is_alive()
    link.streamed = 41
    asking.join(timeout=60)
    assert not asking.is_alive(), "the prompt did not give way when the stream moved"
    assert answer == [None]
