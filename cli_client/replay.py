"""`bergen-replay`: a match hand by hand, from the server or from a saved record.

Everything shown is built by folding the match's events (GetReplay, or the events the
verifier rebuilds from a record file) and the domain's views; the server hides what the
caller may not see while the match is live.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import grpc
from rich.console import Console
from rich.text import Text

from bergen.api.convert import event_in
from bergen.api.exit_status import ExitStatus, help_text
from bergen.api.helptext import HelpFormatter
from bergen.domain.audit import replay_record
from bergen.domain.errors import BergenError
from bergen.domain.events import Event
from bergen.domain.views import redact_stream
from bergen.v1 import bergen_pb2 as pb
from bergen.v1 import bergen_pb2_grpc as rpc

from . import terminal
from .analysis import DEFAULT_BUDGET_S, analyse_match, as_json
from .analysis import lines as analysis_lines
from .connect import (
    BadConnectionOption,
    Endpoint,
    add_server_option,
    bearer,
    code_of,
    endpoint_of,
    exit_status_of,
    open_channel,
    reason_of,
)
from .render import Story, render_frame, render_story, story_json, tell
from .usage import examples, seat_label

PROG = "bergen-replay"
CONNECT_TIMEOUT_S = 5.0
"""How long to wait for the server to answer at all before calling it unreachable."""
CALL_TIMEOUT_S = 30.0


JSON_HELP = """\
--json prints one object (format "bergen-replay/1"): match_id, name, rules, seats (names,
null for a free seat), sides, phase, origin (the server or the file), complete (nothing is
hidden), viewer_seat, note, result (reason, winner_side, scores, resigned_seat, note,
forfeited_side, cause, at_ms; null while live) and steps: each with kind (deal, lead, play,
draw, pass, timeout, hand_end, match_end), hand, number (an action's place in its hand),
text (the words of the listing), seat (for an action or a timeout), tile and end (for an
action), points (side, points, base, reason, text, total), and the line (pairs as laid, left
to right) and scores after it; a deal adds attempt, void, hands and boneyard; in a clocked
match an action or a timeout adds at_ms, and a play clock_ms (its seat's time left after it)
and auto (made by a timeout). A hidden tile is null."""


class Failure(Exception):
    """A reason to stop, with the exit status that says which."""

    def __init__(self, status: ExitStatus, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.reason = reason or status.name


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        raise Failure(ExitStatus.USAGE, message)


def _token(text: str) -> str:
    if not text or not all(33 <= ord(c) < 127 for c in text):
        raise argparse.ArgumentTypeError("a token is printable ASCII without spaces")
    return text


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog=PROG,
        description="Replay a Bergen match hand by hand: each deal, every action with the "
        "line after it, the points and why, the scores and the result; on a clock, each "
        "play's time left, the timeouts and the automatic plays.",
        epilog=JSON_HELP
        + "\n\nSeats and sides are numbered from 1 in what is printed; in --json, as in the "
        "API and the records, from 0.\n\n"
        + help_text()
        + "\n\n"
        + examples(
            "bergen-replay MATCH                 # the whole match, hand by hand",
            "bergen-replay MATCH --step          # one step at a time, with the arrow keys",
            "bergen-replay MATCH --seat 2        # only what seat 2 knew at each step",
            "bergen-replay --file records/MATCH.json --hand 3",
            "bergen-replay MATCH --record > MATCH.json   # the signed match record",
            "bergen-replay MATCH --analyse       # every decision judged, each seat's accuracy",
        ),
        formatter_class=HelpFormatter,
    )
    p.add_argument("match_id", nargs="?", metavar="MATCH", help="the match to replay")
    add_server_option(p)
    p.add_argument(
        "--token",
        type=_token,
        help="a seat token, to see the match as that seat may (default: $BERGEN_TOKEN); "
        "without one you are a spectator",
    )
    p.add_argument("--hand", type=int, metavar="N", help="only hand N")
    p.add_argument(
        "--seat",
        type=int,
        metavar="S",
        help="the match as seat S (from 1) saw it at each step: only what it knew then",
    )
    p.add_argument(
        "--step",
        action="store_true",
        help="step through the actions with the keyboard (right/n/space forward, "
        "left/p back, q quit)",
    )
    p.add_argument(
        "--record", action="store_true", help="print the match's signed record (JSON) and stop"
    )
    p.add_argument(
        "--file",
        metavar="RECORD",
        help="replay a saved match record (a path, or - for stdin), without a server",
    )
    p.add_argument(
        "--plain",
        action="store_true",
        help="plain text: [3|5] tiles, no colour (always so when output is not a terminal)",
    )
    p.add_argument("--json", action="store_true", help="print the match's steps as JSON")
    p.add_argument(
        "--analyse",
        action="store_true",
        help="judge every decision of a finished match from what its seat knew then: the "
        "chance of winning each option kept, the mistakes marked, each seat's accuracy "
        "(with --seat, that seat's decisions only)",
    )
    p.add_argument(
        "--budget",
        type=float,
        metavar="S",
        default=DEFAULT_BUDGET_S,
        help=f"the analysis's budget in seconds of one core at a nominal speed (default "
        f"{DEFAULT_BUDGET_S:g}); the same budget and seed give the same analysis anywhere",
    )
    p.add_argument(
        "--seed",
        default="0",
        metavar="TEXT",
        help="the analysis's seed (default 0): the worlds it samples",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run `bergen-replay`; returns its exit status."""
    try:
        return _run(argv)
    except Failure as f:
        _complain(f.message, f.reason)
        return f.status
    except BrokenPipeError:
        # The reader went away (`| head`): not an error of ours.
        _silence_stdout()
        return ExitStatus.SUCCESS
    except KeyboardInterrupt:
        return ExitStatus.ERROR


def _run(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help
        return int(e.code or 0)
    _check_combination(args)
    try:
        endpoint = endpoint_of(args)
    except BadConnectionOption as e:
        raise Failure(ExitStatus.USAGE, str(e)) from None
    if args.record:
        text = _fetch_record(endpoint, args.match_id, args.token)
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return ExitStatus.SUCCESS
    if args.file is not None:
        source = _from_file(args.file)
    else:
        source = _from_server(endpoint, args.match_id, args.token)
    story, note = _story(source, None if args.seat is None else args.seat - 1)
    if args.hand is not None and story.hand(args.hand) is None:
        numbers = [h.number for h in story.hands]
        have = f"hands 1 to {numbers[-1]}" if numbers else "no hand dealt yet"
        raise Failure(ExitStatus.USAGE, f"there is no hand {args.hand}: the match has {have}")
    console = Console(highlight=False, soft_wrap=True)
    look = terminal.detect_look(console, args.plain)
    analysed = _analysed(source, args) if args.analyse else None
    if args.json:
        shown = story_json(story, args.hand, note)
        shown.update(origin=source.origin, complete=source.complete, viewer_seat=source.viewer)
        if analysed is not None:
            shown["analysis"] = as_json(analysed)
        print(json.dumps(shown, ensure_ascii=False))
        return ExitStatus.SUCCESS
    if args.step:
        return _step(story, console, look, args.hand, note)
    shown_lines = render_story(story, look, args.hand, note)
    if analysed is not None:
        state = story.final
        names = [_name(state, s) for s in range(state.seats)]
        shown_lines += [Text(""), *(Text(x) for x in analysis_lines(analysed, names, args.hand))]
    _show(shown_lines, console, look)
    return ExitStatus.SUCCESS


def _analysed(source: Source, args: argparse.Namespace) -> Any:
    if not source.complete:
        raise Failure(
            ExitStatus.REFUSED,
            "the match has not ended: it is analysed once every hand can be shown",
        )
    seats = None if args.seat is None else [args.seat - 1]
    try:
        return analyse_match(source.events, args.seed, args.budget, seats=seats)
    except (ValueError, BergenError) as e:
        raise Failure(ExitStatus.ERROR, f"the match cannot be analysed: {e}") from None


def _check_combination(args: argparse.Namespace) -> None:
    if args.file is not None and args.match_id is not None:
        raise Failure(ExitStatus.USAGE, "give a match id or --file, not both")
    if args.file is None and args.match_id is None:
        raise Failure(ExitStatus.USAGE, "give a match id, or --file RECORD to work offline")
    if args.file is not None and args.record:
        raise Failure(ExitStatus.USAGE, "--record fetches a record from the server; --file "
                      "already is one")  # fmt: skip
    if args.file is not None and args.token is not None:
        raise Failure(ExitStatus.USAGE, "--token is for the server; --file works offline")
    if args.file is None and args.token is None and os.environ.get("BERGEN_TOKEN"):
        try:
            args.token = _token(os.environ["BERGEN_TOKEN"])
        except argparse.ArgumentTypeError as e:
            raise Failure(ExitStatus.USAGE, f"BERGEN_TOKEN: {e}") from None
    if args.record and (args.hand is not None or args.seat is not None or args.step):
        raise Failure(ExitStatus.USAGE, "--record prints the whole record: it takes no "
                      "--hand, --seat or --step")  # fmt: skip
    if args.hand is not None and args.hand < 1:
        raise Failure(ExitStatus.USAGE, "--hand counts from 1")
    if args.seat is not None and args.seat < 1:
        raise Failure(ExitStatus.USAGE, "--seat counts from 1")
    if args.analyse and (args.step or args.record):
        raise Failure(ExitStatus.USAGE, "--analyse shows the whole match: it takes no --step "
                      "or --record")  # fmt: skip
    if not 0 < args.budget <= 3600:
        raise Failure(ExitStatus.USAGE, "--budget is more than 0 and at most 3600 seconds")
    if args.json and (args.step or args.record):
        raise Failure(ExitStatus.USAGE, "--json prints the steps: it takes no --step or --record")
    if args.step and not terminal.is_interactive():
        raise Failure(
            ExitStatus.USAGE,
            "--step reads keys from a terminal: run it in one, without redirecting its "
            "input or output",
        )


# ----- where the events come from ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Source:
    """A match's events as the caller may see them."""

    events: list[Event]
    viewer: int | None
    """The caller's seat (its token's), None for a spectator."""
    complete: bool
    """Nothing is hidden: the match has ended."""
    origin: str


def refusal(e: grpc.RpcError, server: str, match_id: str) -> Failure:
    """The failure of a call: its exit status (`connect.exit_status_of`), in words."""
    status = exit_status_of(e)
    code = code_of(e)
    reason = reason_of(e)
    details = (e.details() if isinstance(e, grpc.Call) else None) or ""
    if status == ExitStatus.NOT_FOUND:
        return Failure(status, f"no match {match_id} on {server}", reason)
    if code == grpc.StatusCode.FAILED_PRECONDITION:
        return Failure(status, f"the server refused: {details}", reason)
    if status == ExitStatus.REFUSED:
        return Failure(status, f"the server refused the token: {details}", reason)
    if status == ExitStatus.UNREACHABLE:
        return Failure(
            status,
            f"cannot reach a server at {server} ({details}); start one with `bergen serve`, "
            "or give --server HOST:PORT",
            reason,
        )
    if status == ExitStatus.USAGE:
        return Failure(status, f"the server refused the request: {details}", reason)
    return Failure(status, f"the server says: {details}", reason)


def _from_server(endpoint: Endpoint, match_id: str, token: str | None) -> Source:
    server = endpoint.address
    metadata = bearer(token)
    with open_channel(endpoint) as channel:
        stub = rpc.BergenServiceStub(channel)  # type: ignore[no-untyped-call]
        try:
            # The first call has a short deadline: a server that does not answer it is
            # unreachable (a refused connection fails at once).
            seen = stub.GetMatch(
                pb.GetMatchRequest(match_id=match_id), metadata=metadata, timeout=CONNECT_TIMEOUT_S
            )
            reply = stub.GetReplay(
                pb.GetReplayRequest(match_id=match_id), metadata=metadata, timeout=CALL_TIMEOUT_S
            )
        except grpc.RpcError as e:
            raise refusal(e, server, match_id) from None
    try:
        pairs = [event_in(m) for m in reply.events]
    except BergenError as e:
        raise Failure(
            ExitStatus.ERROR, f"the server sent an event this client cannot read: {e}"
        ) from None
    seqs = [seq for seq, _ in pairs]
    if seqs != list(range(1, len(seqs) + 1)):
        raise Failure(ExitStatus.ERROR, "the server sent the match's events out of order")
    viewer = seen.view.viewer_seat if seen.view.HasField("viewer_seat") else None
    return Source([e for _, e in pairs], viewer, reply.complete, server)


def _fetch_record(endpoint: Endpoint, match_id: str, token: str | None) -> str:
    server = endpoint.address
    metadata = bearer(token)
    with open_channel(endpoint) as channel:
        stub = rpc.BergenServiceStub(channel)  # type: ignore[no-untyped-call]
        try:
            stub.GetMatch(
                pb.GetMatchRequest(match_id=match_id), metadata=metadata, timeout=CONNECT_TIMEOUT_S
            )
            reply = stub.GetRecord(
                pb.GetRecordRequest(match_id=match_id),
                metadata=metadata,
                timeout=CALL_TIMEOUT_S,
            )
        except grpc.RpcError as e:
            if code_of(e) == grpc.StatusCode.FAILED_PRECONDITION:
                raise Failure(
                    ExitStatus.REFUSED,
                    f"match {match_id} has not ended: its record would reveal every hand, "
                    "so there is none yet (replay it without --record)",
                ) from None
            raise refusal(e, server, match_id) from None
    return str(reply.record_json)


def _from_file(path: str) -> Source:
    name = "stdin" if path == "-" else path
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise Failure(ExitStatus.USAGE, f"{name}: no such file") from None
    except OSError as e:
        raise Failure(ExitStatus.USAGE, f"{name}: cannot read it: {e}") from None
    except UnicodeDecodeError as e:
        raise Failure(ExitStatus.INVALID, f"{name}: not UTF-8 text: {e}") from None
    try:
        record: Any = json.loads(text)
    except json.JSONDecodeError as e:
        raise Failure(
            ExitStatus.INVALID,
            f"{name}: not JSON (line {e.lineno}, column {e.colno}: {e.msg})",
        ) from None
    except RecursionError:
        raise Failure(ExitStatus.INVALID, f"{name}: not a match record (nested too deep)") from None
    try:
        verdict = replay_record(record)
    except (BergenError, ValueError, TypeError, KeyError, IndexError, RecursionError) as e:
        raise Failure(ExitStatus.INVALID, f"{name}: not a valid match record: {e}") from None
    if not verdict.ok:
        where = f" at {verdict.where}" if verdict.where else ""
        raise Failure(
            ExitStatus.INVALID, f"{name}: the record does not check{where}: {verdict.why}"
        )
    return Source(list(verdict.events), None, True, name)


def _story(source: Source, seat: int | None) -> tuple[Story, str]:
    """The story to tell, and a note saying whose knowledge it shows."""
    try:
        whole = tell(source.events)
    except BergenError as e:
        raise Failure(ExitStatus.ERROR, f"the match's events do not fold: {e}") from None
    state = whole.final
    if seat is None:
        if source.complete:
            return whole, ""
        if source.viewer is None:
            return whole, (
                "live: shown as a spectator may see it; every hand is revealed when the match ends"
            )
        return whole, (
            f"live: shown as {seat_label(source.viewer)} ({_name(state, source.viewer)}) may see it"
        )
    if seat >= state.seats:
        raise Failure(
            ExitStatus.USAGE,
            f"there is no {seat_label(seat)}: the match has seats 1 to {state.seats}",
        )
    # What the seat knew at each step, even after the end.
    story = tell(redact_stream(source.events, seat, ended=False))
    note = f"as {seat_label(seat)} ({_name(state, seat)}) saw it: only what it knew at each step"
    if not source.complete and source.viewer != seat:
        who = "a spectator" if source.viewer is None else seat_label(source.viewer)
        note += f", limited to what you ({who}) may see while the match is live"
    return story, note


def _name(state: Any, seat: int) -> str:
    player = state.players[seat]
    return player.name if player is not None else "empty"


# ----- output -----------------------------------------------------------------------------


def _show(lines: list[Text], console: Console, look: terminal.Look) -> None:
    if look == terminal.PLAIN:
        sys.stdout.write("".join(t.plain + "\n" for t in lines))
        sys.stdout.flush()
        return
    for t in lines:
        console.print(t)


def _step(
    story: Story, console: Console, look: terminal.Look, only_hand: int | None, note: str
) -> int:
    steps = [s for s in story.steps if only_hand is None or s.hand == only_hand]
    if not steps:
        _show(render_story(story, look, only_hand, note), console, look)
        _complain("nothing to step through yet: no hand has been dealt", "NOTHING_DEALT")
        return ExitStatus.SUCCESS
    index = 0
    try:
        with terminal.raw_keys() as fd:
            console.show_cursor(False)
            while True:
                console.clear()
                _show(render_frame(story, index, steps, look, note), console, look)
                key = terminal.read_key(fd)
                if key == terminal.QUIT:
                    break
                index = _move(steps, index, key)
    except KeyboardInterrupt:
        pass
    finally:
        console.show_cursor(True)
    return ExitStatus.SUCCESS


def _move(steps: Sequence[Any], index: int, key: str | None) -> int:
    last = len(steps) - 1
    hand = steps[index].hand
    if key == terminal.FORWARD:
        return min(index + 1, last)
    if key == terminal.BACK:
        return max(index - 1, 0)
    if key == terminal.FIRST:
        return 0
    if key == terminal.LAST:
        return last
    if key == terminal.NEXT_HAND:
        return next((i for i in range(index, last + 1) if steps[i].hand > hand), last)
    if key == terminal.PREVIOUS_HAND:
        start = next(i for i in range(last + 1) if steps[i].hand == hand)
        if start < index:
            return start
        before = steps[start - 1].hand if start else hand
        return next(i for i in range(last + 1) if steps[i].hand == before)
    return index


def _complain(message: str, reason: str = "ERROR") -> None:
    sys.stderr.write(f"{PROG}: {message} ({reason})\n")
    sys.stderr.flush()


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass


if __name__ == "__main__":
    sys.exit(main())
