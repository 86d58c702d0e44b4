"""What every command says to a person, in one shape.

- An error is one line on standard error: `bergen <command>: <sentence> (<REASON>)`, the
  reason a stable UPPER_SNAKE word: the server's own (`MATCH_NOT_FOUND`) for a refused call,
  else one of this client's (`USAGE`, `UNREACHABLE`, or a more precise word).
- Every command's help ends with EXAMPLES (`examples`).
- Seats and sides are numbered from 1 for people (`seat_label`, `side_label`); the API and
  the records count from 0.
"""

from __future__ import annotations

import sys
from typing import TextIO

from bergen.api.exit_status import ExitStatus
from bergen.api.helptext import error_line, examples


class Failed(Exception):
    """A command cannot go on: `sentence` says why, `reason` names it, `status` is the exit
    status to report."""

    def __init__(self, sentence: str, status: ExitStatus, reason: str | None = None) -> None:
        super().__init__(sentence)
        self.sentence = sentence
        self.status = status
        self.reason = reason or status.name

    def __str__(self) -> str:
        return f"{self.sentence} ({self.reason})"


def fail(
    command: str,
    sentence: str,
    status: ExitStatus,
    reason: str | None = None,
    out: TextIO | None = None,
) -> ExitStatus:
    """Print the error line of `command` on standard error; returns `status` to exit with.
    `reason` defaults to the status's name (`USAGE`)."""
    print(error_line(command, sentence, reason or status.name), file=out or sys.stderr)
    return status


def report(command: str, failure: Failed, out: TextIO | None = None) -> ExitStatus:
    """`fail` for a `Failed`."""
    return fail(command, failure.sentence, failure.status, failure.reason, out)


def seat_label(seat: int) -> str:
    """Seat index 0 as people read it: `seat 1`."""
    return f"seat {seat + 1}"


def side_label(side: int) -> str:
    """Side index 0 as people read it: `side 1`."""
    return f"side {side + 1}"


__all__ = ["Failed", "error_line", "examples", "fail", "report", "seat_label", "side_label"]
