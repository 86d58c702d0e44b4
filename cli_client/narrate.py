"""What is shown of a match as it happens: each event in the domain's words (`Narrator`), the
line as it lies, every seat's clock, and what a seat sees before it chooses (`render_turn`).
`bergen play`, `bergen play --tournament` and `bergen watch` print through it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from rich.console import Console
from rich.markup import escape

from bergen.domain.describe import (
    Phrase,
    clock_words,
    draws_words,
    join,
    phrase,
    points_words,
    result_words,
)
from bergen.domain.events import (
    Dealt,
    Event,
    HandEnded,
    MatchCreated,
    MatchEnded,
    PointsScored,
    TileDrawn,
    TilePlayed,
    TimedOut,
)
from bergen.domain.state import State, evolve
from bergen.domain.tiles import Tile
from bergen.domain.vocabulary import MatchEndReason, PointsReason

from . import terminal
from .clocks import LOW_TIME_MS, MatchClock, clocks_markup
from .render import line_text
from .usage import seat_label, side_label


class Narrator:
    """Prints each event as it happens (in the domain's words, `describe`), one line per
    action: a play and the points it made on one line, a run of draws on one; with `lines`,
    the line as it lies after each play under it. Thread-safe; `flush()` prints a line held
    back. `seat` is the player's, None for a spectator."""

    def __init__(
        self,
        console: Console,
        seat: int | None,
        state: State | None = None,
        out: Callable[[str], None] | None = None,
        lines: terminal.Look | None = None,
    ) -> None:
        self.console = console
        self.out = out or console.print
        """Prints a line of console markup (above the live line, when there is one)."""
        self.seat = seat
        self.state = state
        """The fold of what was narrated: names and sides."""
        self.ended = False
        """Whether the end of the match was printed."""
        self.pending: str | None = None
        """The last play's line, held back for the points it makes."""
        self.lines = lines
        """How to draw the line under each play; None: not drawn."""
        self.pending_draws: tuple[int, list[Tile | None]] | None = None
        self.lock = threading.RLock()

    def who(self, seat: int) -> str:
        name = None
        if self.state is not None and seat < len(self.state.players):
            p = self.state.players[seat]
            name = p.name if p is not None else None
        # "seat 1 (ann, you)"; a player who called itself "you" is not told so twice.
        you = ", you" if seat == self.seat and (name or "").casefold() != "you" else ""
        return f"{seat_label(seat)} ({escape(name or '?')}{you})"

    def name(self, seat: int) -> str:
        """The seat's player's name (`you` for the player's own), console markup."""
        if seat == self.seat:
            return "you"
        p = self.state.players[seat] if self.state is not None else None
        return escape(p.name) if p is not None and p.name else seat_label(seat)

    def side_name(self, side: int) -> str:
        if self.state is None:
            return side_label(side)
        seats = self.state.sides[side]
        if len(seats) == 1:
            return self.who(seats[0])
        return f"{side_label(side)} ({' and '.join(self.name(s) for s in seats)})"

    def words(self, words: Phrase) -> str:
        """The domain's words as console markup, each seat and side named."""
        marked = tuple(escape(w) if isinstance(w, str) else w for w in words)
        return join(marked, self.who, self.side_name)

    def flush(self) -> None:
        with self.lock:
            self._flush_draws()
            self._flush_play()

    def _flush_play(self) -> None:
        """Print the play held back and, with `lines`, the line as it lies after it (the
        state folded so far: any later event flushes the play before it is folded)."""
        if self.pending is None:
            return
        self.out(self.pending)
        self.pending = None
        if self.lines is not None and self.state is not None and self.state.ends is not None:
            self.out("  " + line_markup(self.state, self.lines))

    def _flush_draws(self) -> None:
        if self.pending_draws is None:
            return
        seat, tiles = self.pending_draws
        self.pending_draws = None
        self.out(f"{self.who(seat)} {escape(draws_words(tiles))}")

    def on_event(self, _seq: int, event: Event) -> None:
        """`feed`, as a stream's listener (`SeatLink.on_event`) calls it."""
        self.feed(event)

    def feed(self, event: Event) -> None:
        """Print `event` (events come in order, after those of the starting state)."""
        with self.lock:
            self._say(event)
            self.state = evolve(self.state, event)
            if isinstance(event, MatchEnded):
                self.flush()
                self.ended = True

    def _say(self, event: Event) -> None:
        if isinstance(event, PointsScored) and event.seat is not None and self.pending:
            if event.reason == PointsReason.DOMINO:
                self._flush_play()
                self.out(f"  {self.words(phrase(event))}")
            else:
                self.pending += f" [bold green]{escape(points_words(event))}[/]"
            return
        if isinstance(event, TileDrawn):
            if self.pending_draws is not None and self.pending_draws[0] != event.seat:
                self._flush_draws()
            self._flush_play()
            if self.pending_draws is None:
                self.pending_draws = (event.seat, [])
            self.pending_draws[1].append(event.tile)
            return
        self.flush()
        line = self.describe(event)
        if isinstance(event, TilePlayed):
            if event.auto and event.seat == self.seat:
                line += " [bold red](your time ran out: the server played this for you)[/]"
            self.pending = line
        elif line:
            self.out(line)

    def describe(self, event: Event) -> str:
        if isinstance(event, MatchCreated):
            return ""  # the match was announced when created or joined
        if isinstance(event, Dealt):
            dealt = f"[bold]{self.words(phrase(event))}[/]"
            if self.seat is None or self.seat >= len(event.hands):
                return dealt
            tiles = " ".join(str(t) for t in event.hands[self.seat] if t is not None)
            return f"{dealt}; your tiles: {tiles}"
        if isinstance(event, PointsScored):
            return f"  {self.words(phrase(event))}"
        if isinstance(event, HandEnded):
            return f"[bold]{self.words(phrase(event))}[/]; scores {self.scores(event.scores)}"
        if isinstance(event, MatchEnded):
            return self.result(event)
        if isinstance(event, TimedOut) and event.seat == self.seat:
            return f"[bold red]{self.words(phrase(event))}[/]"
        return self.words(phrase(event))

    def scores(self, scores: tuple[int, ...]) -> str:
        if self.state is None:
            return "-".join(map(str, scores))
        return ", ".join(f"{self.side_name(i)} {s}" for i, s in enumerate(scores))

    def result(self, event: MatchEnded) -> str:
        scores = self.scores(event.scores)
        won = event.winner_side
        mine = (
            self.state.side_of(self.seat)
            if self.state is not None and self.seat is not None
            else None
        )
        if event.reason == MatchEndReason.FORFEIT:
            # Who forfeited and why (out of time, or resigned), and who won.
            words = self.words(result_words(event))
            if event.forfeited_side == mine:
                verdict = f"[bold red]you forfeit[/]: {words}"
            elif won is not None and won == mine:
                verdict = f"[bold green]you win[/]: {words}"
            else:
                verdict = f"[bold]{words}[/]"
        elif won is not None and mine == won:
            verdict = "[bold green]you win[/]"
        elif won is not None:
            verdict = f"[bold red]{self.words(result_words(event))}[/]"
        else:
            verdict = self.words(result_words(event))
        return f"[bold]match over[/]: {verdict}; final scores {scores}"


def seat_names(state: State, seat: int | None) -> list[str]:
    """Each seat's name for the clocks line, `you` for `seat`."""
    names = []
    for s, p in enumerate(state.players):
        names.append("you" if s == seat else escape(p.name if p is not None else seat_label(s)))
    return names


def clocks_line(state: State, seat: int | None, clock: MatchClock) -> str:
    """Every seat's clock now (console markup); empty without clocks."""
    return clocks_markup(state, clock, seat, seat_names(state, seat))


def line_markup(state: State, look: terminal.Look = terminal.PLAIN) -> str:
    """The line as it lies, left to right, each tile turned as laid (`[3|1][1|1][1|4]`), as
    `bergen-replay` draws it; with its open ends. Console markup; empty before the lead."""
    if state.ends is None:
        return ""
    left, right = state.ends[0], state.ends[1]
    return f"line: {line_text(state.line, look).markup}   ends {left}|{right}"


def render_turn(
    state: State,
    seat: int,
    narrator: Narrator,
    clock: MatchClock | None = None,
    look: terminal.Look = terminal.PLAIN,
) -> list[str]:
    """What the seat sees before choosing: scores, the line, the others, its tiles, and its
    legal plays numbered from 1; on a clock, every seat's time left, and a warning under
    LOW_TIME_MS of the seat's own."""
    lines = [
        f"[bold]hand {state.hand}[/] · scores {narrator.scores(state.scores)} "
        f"(target {state.rules.target}) · boneyard {len(state.boneyard)} "
        f"({state.drawable} drawable)",
    ]
    if clock is not None and state.clocked:
        lines.append(clocks_line(state, seat, clock))
        left = clock.left_ms(state, seat)
        if left is not None and left < LOW_TIME_MS:
            lines.append(low_time_warning(left))
    if state.ends is not None:
        lines.append(line_markup(state, look))
    others = [
        f"{narrator.who(s)} {len(h)} tile{'s' if len(h) != 1 else ''}"
        for s, h in enumerate(state.hands)
        if s != seat
    ]
    lines.append("others: " + ", ".join(others))
    mine = sorted(t for t in state.hands[seat] if t is not None)
    lines.append("your tiles: " + escape(" ".join(f"[{t.low}|{t.high}]" for t in mine)))
    if state.must_play is not None:
        lines.append(f"you drew {state.must_play} and must play it")
    lines.append("your plays:")
    for i, (t, e) in enumerate(state.legal_plays(seat), start=1):
        lines.append(f"  {i}) {t} {e.value}")
    return lines


def low_time_warning(left_ms: int) -> str:
    return (
        f"[bold red]under {LOW_TIME_MS // 1000} s left on your clock "
        f"({clock_words(left_ms)}): choose now[/]"
    )


__all__ = [
    "Narrator",
    "clocks_line",
    "line_markup",
    "low_time_warning",
    "render_turn",
    "seat_names",
]
