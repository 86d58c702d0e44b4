"""The named errors of Bergen, one small hierarchy under `BergenError`.

Each layer raises its own kind: malformed input is `InvalidArgument`, existence is
`NotFound`, identity is `Unauthenticated` / `PermissionDenied`, a rule broken now is
`RuleViolation`, a lost optimistic race is `ConcurrencyConflict`. The gRPC edge maps each
kind to one status code.
"""

from __future__ import annotations


class BergenError(Exception):
    """Base of every error this product raises on purpose."""


class InvalidArgument(BergenError):
    """The input is malformed, whatever the state of the match."""


class InvalidOptions(InvalidArgument):
    """Unknown, ill-typed or inconsistent rule options."""


class CorruptRecord(InvalidArgument):
    """A stored event or a match record cannot be decoded."""


class NotFound(BergenError):
    """The thing named does not exist."""


class Unauthenticated(BergenError):
    """No credential, or a malformed one."""


class PermissionDenied(BergenError):
    """A valid credential that does not allow this action."""


class RuleViolation(BergenError):
    """The command breaks a rule of Bergen in the match's present state."""


class MatchNotInProgress(RuleViolation):
    """The match is not in the phase the command needs."""


class SeatUnavailable(RuleViolation):
    """The seat asked for is taken, or every seat is."""


class NotYourTurn(RuleViolation):
    """A seat acted while another seat is to play."""


class IllegalPlay(RuleViolation):
    """The tile is not held, does not fit, or another tile must be played."""


class ConcurrencyConflict(BergenError):
    """The stream moved on since the caller read it; nothing was written."""


class StorageUnavailable(BergenError):
    """The event store cannot be reached or written now (database down, disk full, read-only
    file); nothing was written, and the same command may be sent again."""
