"""`bergen watch`: follow a live match from the terminal, as any spectator may see it.

Each action is printed as it happens (who played what, the points and why, draws and passes,
each hand's end), the line as it lies after each play; under them a line redrawn in place
shows the hand, on a clock every seat's time counting down, and the scores. It ends with the
result and how to replay the match. No token is needed or sent: no tile of any hand shows
until the match ends.
"""

from __future__ import annotations

import argparse
import json
import signal
import time
from typing import Any

import grpc
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from bergen.api.exit_status import ExitStatus
from bergen.api.helptext import HelpFormatter
from bergen.domain.describe import describe
from bergen.domain.events import Dealt, Event
from bergen.domain.state import SEATING, State, fold

from . import terminal
from .client import Client, Unreachable
from .connect import add_server_option, fail_call
from .narrate import Narrator, clocks_line
from .render import result_json
from .seat import BotFailed, SeatLink
from .usage import examples, fail, seat_label

COMMAND = "watch"
WAIT_S = 0.2
END_WAIT_S = 5.0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "watch",
        help="follow a live match as a spectator",
        description=(__doc__ or "").split("\n\n", 1)[1],
        epilog=examples(
            "bergen watch MATCH                  # follow it to its end",
            "bergen watch MATCH --json | jq .    # one JSON object per event, then the result",
        ),
        formatter_class=HelpFormatter,
    )
    p.add_argument("match_id", metavar="MATCH", help="the match to follow")
    add_server_option(p)
    p.add_argument(
        "--json",
        action="store_true",
        help="one JSON object a line: each event (seq, hand, kind, text), then the match's "
        "outcome (match_id, phase, result; seats and sides from 0, as the API counts)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    signal.signal(signal.SIGINT, signal.default_int_handler)
    console = Console(highlight=False, soft_wrap=True)
    live = terminal.LiveLine(console, console.is_terminal and not args.json)
    look = terminal.detect_look(console, plain=False)
    quiet = Console(stderr=True, highlight=False, soft_wrap=True)

    def notice(text: str) -> None:
        if args.json:
            quiet.print(escape(text))
        else:
            live.print(f"[dim]{escape(text)}[/]")

    with Client(args.endpoint, notice=notice) as client:
        try:
            client.wait_ready()
        except Unreachable as e:
            return fail(COMMAND, str(e), ExitStatus.UNREACHABLE)
        link = SeatLink(client, args.match_id, None, None)
        narrator: Narrator | None = None
        try:
            history = link.load()
            if args.json:
                link.on_event = lambda seq, event: print(
                    json.dumps(_event_json(seq, event)), flush=True
                )
                for seq, event in enumerate(history, start=1):
                    print(json.dumps(_event_json(seq, event)))
            else:
                start = _current_hand(history)
                narrator = Narrator(
                    console, None, fold(history[:start]), out=live.print, lines=look
                )
                for line in _header(link.state):
                    live.print(line)
                for event in history[start:]:
                    narrator.feed(event)
                link.on_event = narrator.on_event
            link.follow()
            _follow(link, live, narrator)
            live.done()
            if narrator is None:
                print(json.dumps(_outcome(link)))
            else:
                narrator.flush()
                result = link.state.result
                if result is not None and not narrator.ended:
                    live.print(narrator.result(result))
                console.print(
                    f"match [bold]{escape(link.match_id)}[/] is over; "
                    f"replay it: [bold]bergen-replay {escape(link.match_id)}[/]"
                )
            return ExitStatus.SUCCESS
        except grpc.RpcError as e:
            live.done()
            return fail_call(COMMAND, e)
        except BotFailed as e:
            live.done()
            # The stream a spectator follows failed: named so, not as a seat's failure.
            return fail(COMMAND, e.sentence, e.status, "STREAM_FAILED")
        except KeyboardInterrupt:
            live.done()
            return ExitStatus.INTERRUPTED
        finally:
            link.close()


def _current_hand(history: list[Event]) -> int:
    """Where the hand in play starts (its deal) in `history`; its end before the first deal
    (a match still seating is told from its state alone)."""
    starts = [i for i, e in enumerate(history) if isinstance(e, Dealt)]
    return starts[-1] if starts else len(history)


def _header(state: State) -> list[str]:
    """Who plays, under which rules, and where the match stands."""
    rules = state.rules
    seats = ", ".join(
        f"{seat_label(s)} {escape(p.name) if p is not None else '(free)'}"
        for s, p in enumerate(state.players)
    )
    lines = [
        f"[bold]match {escape(state.match_id)}[/]"
        + (f" “{escape(state.name)}”" if state.name else "")
        + f": {rules.preset}, target {rules.target}, {state.seats} seats"
        + (" in partnerships" if state.partnerships else ""),
        f"seats: {seats}",
    ]
    if state.phase == SEATING:
        free = sum(p is None for p in state.players)
        lines.append(f"waiting for {free} more player(s) to join")
    return lines


def _status(link: SeatLink) -> Text:
    """The live line, short enough for a narrow terminal: the hand, the scores, the clocks
    (the line itself, which grows to 28 tiles, is printed after each play)."""
    state = link.state
    parts = [f"hand {state.hand}"] if state.hand else []
    if state.clocked:
        # First, where a narrow terminal cuts nothing: they change every tenth of a second.
        parts.append(clocks_line(state, None, link.clock))
    names = [p.name if p is not None else seat_label(s) for s, p in enumerate(state.players)]
    scores = ", ".join(
        f"{escape('+'.join(names[s] for s in seats))} {state.scores[side]}"
        for side, seats in enumerate(state.sides)
    )
    parts.append(f"scores {scores}")
    return Text.from_markup(" · ".join(parts))


def _follow(link: SeatLink, live: terminal.LiveLine, narrator: Narrator | None = None) -> None:
    """Fold the stream until the match ends, keeping the live line current and, with a
    `narrator`, printing each play (and the line under it) as soon as it is seen rather than
    when the next event comes. Raises BotFailed (the stream failed for good), grpc.RpcError."""
    shown: tuple[tuple[int, int], ...] = ()
    while not link.ended:
        if link.stream_ended:
            link.resync()
            if not link.ended:
                raise BotFailed("the event stream ended before the match", ExitStatus.ERROR)
            break
        link.wait(WAIT_S)
        if link.k.state is None:
            continue
        state = link.state
        if narrator is not None and state.line != shown:
            narrator.flush()
        shown = state.line
        if live.enabled:
            live.show(_status(link))
    deadline = time.monotonic() + END_WAIT_S
    while not link.stream_ended and time.monotonic() < deadline:
        link.wait(WAIT_S)
    live.show(None)


def _event_json(seq: int, event: Event) -> dict[str, Any]:
    return {
        "seq": seq,
        "hand": getattr(event, "hand", None),
        "kind": type(event).__name__,
        "text": describe(event),
    }


def _outcome(link: SeatLink) -> dict[str, Any]:
    state = link.state
    result = state.result
    return {
        "match_id": link.match_id,
        "phase": str(state.phase),
        "scores": list(state.scores),
        "result": result_json(result),
    }


__all__ = ["add_parser", "run"]
