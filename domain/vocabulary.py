"""The closed sets of words of the rules: a match's phases, why points are scored, why a hand
or a match ends, and the kinds of step a match is told in.

Each is a StrEnum whose values are the words stored in event payloads and written in match
records (RECORD.md), so a member equals, hashes and serialises as its word: stored events,
records and test vectors read the same as before these types existed.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TypeVar

from .errors import CorruptRecord


class Phase(StrEnum):
    """Where a match is: seats being taken, hands being played, or over."""

    SEATING = "seating"
    PLAYING = "playing"
    ENDED = "ended"


class PointsReason(StrEnum):
    """Why a side scored (RULES.md sections 4 to 6)."""

    DOUBLE_HEADER = "double_header"
    TRIPLE_HEADER = "triple_header"
    DOUBLE_BONUS = "double_bonus"
    DOMINO = "domino"
    """A seat went out."""
    BLOCKED = "blocked"

    @property
    def by_play(self) -> bool:
        """Scored by the play just made (a header or the double bonus), not by the hand's end."""
        return self in HEADER_REASONS


HEADER_REASONS = frozenset(
    {PointsReason.DOUBLE_HEADER, PointsReason.TRIPLE_HEADER, PointsReason.DOUBLE_BONUS}
)


class HandEndReason(StrEnum):
    """Why a hand ended."""

    DOMINO = "domino"
    """A seat went out."""
    BLOCKED = "blocked"
    MATCH_OVER = "match_over"
    """The target was reached during the hand, which stopped there."""


class MatchEndReason(StrEnum):
    """Why a match ended: a side reached the target, a side forfeited (RULES.md section 11:
    a timeout, or a seat resigned), or it was abandoned by the organiser (the free-text why is
    the MatchEnded event's `note`; matches recorded before resignation was a forfeit have a
    resignation as `abandoned` with a `resigned_seat`)."""

    TARGET = "target"
    ABANDONED = "abandoned"
    FORFEIT = "forfeit"


class ForfeitCause(StrEnum):
    """Why a side forfeited (RULES.md section 11)."""

    TIMEOUT = "timeout"
    RESIGNED = "resigned"


class StepKind(StrEnum):
    """The kinds of step a match is told in. `play`, `draw` and `pass` are also the `act` of
    a record's actions (the lead is a `play` with no end there)."""

    DEAL = "deal"
    LEAD = "lead"
    PLAY = "play"
    DRAW = "draw"
    PASS = "pass"
    HAND_END = "hand_end"
    MATCH_END = "match_end"
    TIMEOUT = "timeout"


ACTIONS = frozenset({StepKind.LEAD, StepKind.PLAY, StepKind.DRAW, StepKind.PASS})
"""The steps a seat takes (chosen or forced)."""

W = TypeVar("W", bound=StrEnum)


def word(kind: type[W], value: object) -> W:
    """The member of `kind` whose word is `value`.

    Raises CorruptRecord, listing the words allowed, for anything else."""
    if isinstance(value, str):
        try:
            return kind(value)
        except ValueError:
            pass
    allowed = ", ".join(m.value for m in kind)
    raise CorruptRecord(f"expected a {kind.__name__} ({allowed}), got {value!r:.60}")
