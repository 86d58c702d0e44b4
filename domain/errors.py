"""The named errors of Bergen, one small hierarchy under `BergenError`.

Each layer raises its own kind: malformed input is `InvalidArgument`, existence is
`NotFound` (or `AlreadyExists`), identity is `Unauthenticated` / `PermissionDenied`, a rule
broken now is `RuleViolation`, a lost optimistic race is `ConcurrencyConflict`, a store that
cannot be reached or written is `StorageUnavailable`.

Every error says how a client sees it, so that the gRPC edge needs no table of classes:

- `status`: the gRPC status code's name (`"FAILED_PRECONDITION"`), a class attribute. The
  domain imports no gRPC, so it is a name; the edge looks the code up by it.
- `reason`: a stable UPPER_SNAKE word a client may branch on (`"NOT_YOUR_TURN"`), sent as
  the `reason` of a `google.rpc.ErrorInfo`. Each class has a default; a raise site that knows
  better gives its own with the `reason=` keyword.
- `metadata`: what identifies the case (match id, seat, seq...), sent as the ErrorInfo's
  metadata. Given as further keywords; None values are left out.

    raise IllegalPlay(
        f"match {m}, hand {h}: {tile} fits neither end", reason="TILE_DOES_NOT_FIT",
        match_id=m, seat=seat,
    )

The message is for people; keep it short and never echo a long input whole (`shown`).
A reason, once published, keeps its meaning: add a new one rather than change an old one.
"""

from __future__ import annotations

from typing import Any, ClassVar

MetadataValue = str | int | bool | None

SHOWN_CHARS = 40
"""How much of a caller's value an error message repeats."""


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """`repr(value)` cut to about `limit` characters, so an error never echoes a long input."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters)"


class BergenError(Exception):
    """Base of every error this product raises on purpose.

    `status` is a gRPC status code name and `reason` a stable machine-readable word (class
    defaults; `reason=` overrides per raise); keyword `metadata` identifies the case.
    """

    status: ClassVar[str] = "INTERNAL"
    default_reason: ClassVar[str] = "INTERNAL"

    def __init__(self, message: str = "", *, reason: str | None = None, **metadata: MetadataValue):
        super().__init__(message)
        self.reason: str = reason or self.default_reason
        self.metadata: dict[str, str] = {
            k: str(v).lower() if isinstance(v, bool) else str(v)
            for k, v in metadata.items()
            if v is not None
        }

    @property
    def message(self) -> str:
        """The human message, as given."""
        return str(self.args[0]) if self.args else ""

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword arguments are not in `args`: rebuild with them when pickled (a worker
        # process sends its error back to the parent this way).
        return (_rebuild, (type(self), self.message, self.reason, self.metadata))


def _rebuild(
    kind: type[BergenError], message: str, reason: str, metadata: dict[str, str]
) -> BergenError:
    error = kind(message, reason=reason)
    error.metadata = dict(metadata)
    return error


class InvalidArgument(BergenError):
    """The input is malformed, whatever the state of the match."""

    status = "INVALID_ARGUMENT"
    default_reason = "INVALID_ARGUMENT"


class InvalidOptions(InvalidArgument):
    """Unknown, ill-typed or inconsistent rule options."""

    default_reason = "INVALID_OPTIONS"


class CorruptRecord(InvalidArgument):
    """A stored event or a match record cannot be decoded."""

    status = "DATA_LOSS"
    default_reason = "CORRUPT_RECORD"


class LogTampered(CorruptRecord):
    """A stored event's authenticator or hash chain does not verify: the row was written or
    changed by someone other than a server holding the log key. The match is not folded."""

    default_reason = "LOG_TAMPERED"


class LogRolledBack(CorruptRecord):
    """The log is not a consistent extension of the newest checkpoint this server signed:
    events it committed to are gone or changed (the database was rolled back or edited).
    The server serves nothing of it; the metadata names the sizes."""

    default_reason = "LOG_ROLLED_BACK"


class OutOfRange(BergenError):
    """A size or position past what exists yet (a tree size larger than any signed)."""

    status = "OUT_OF_RANGE"
    default_reason = "OUT_OF_RANGE"


class Unimplemented(BergenError):
    """What this server was configured not to offer (a transparency log, say)."""

    status = "UNIMPLEMENTED"
    default_reason = "UNIMPLEMENTED"


class NotFound(BergenError):
    """The thing named does not exist."""

    status = "NOT_FOUND"
    default_reason = "NOT_FOUND"


class AlreadyExists(BergenError):
    """The thing to be made exists already (a player's name is taken)."""

    status = "ALREADY_EXISTS"
    default_reason = "ALREADY_EXISTS"


class Unauthenticated(BergenError):
    """No credential, or a malformed one."""

    status = "UNAUTHENTICATED"
    default_reason = "UNAUTHENTICATED"


class PermissionDenied(BergenError):
    """A valid credential that does not allow this action."""

    status = "PERMISSION_DENIED"
    default_reason = "PERMISSION_DENIED"


class RuleViolation(BergenError):
    """The command breaks a rule of Bergen in the match's present state."""

    status = "FAILED_PRECONDITION"
    default_reason = "RULE_VIOLATION"


class MatchNotInProgress(RuleViolation):
    """The match is not in the phase the command needs."""

    default_reason = "MATCH_NOT_IN_PROGRESS"


class SeatUnavailable(RuleViolation):
    """The seat asked for is taken, or every seat is."""

    default_reason = "SEAT_TAKEN"


class NotYourTurn(RuleViolation):
    """A seat acted while another seat is to play."""

    default_reason = "NOT_YOUR_TURN"


class IllegalPlay(RuleViolation):
    """The tile is not held, does not fit, or another tile must be played."""

    default_reason = "ILLEGAL_PLAY"


class ClockViolation(RuleViolation):
    """A command of a clocked match that its time does not allow (RULES.md section 11): an
    action once the running clock has fallen (`CLOCK_EXPIRED`: the timeout comes first), a
    timeout before it has (`CLOCK_NOT_EXPIRED`), of a seat whose clock does not run
    (`CLOCK_NOT_RUNNING`), or in a match without clocks (`NO_CLOCK`)."""

    default_reason = "CLOCK_EXPIRED"


class MatchArchived(BergenError):
    """The match ended and was archived by the operator: its events before its end were
    removed from the server's store after its signed record was written to the operator's
    archive, where it is verified and replayed. Nothing of it is served any more."""

    status = "FAILED_PRECONDITION"
    default_reason = "MATCH_ARCHIVED"


class ConcurrencyConflict(BergenError):
    """The stream moved on since the caller read it; nothing was written."""

    status = "ABORTED"
    default_reason = "STALE_VERSION"


class StorageUnavailable(BergenError):
    """The event store cannot be reached or written now (database down, disk full, read-only
    file); nothing was written, and the same command may be sent again."""

    status = "UNAVAILABLE"
    default_reason = "STORAGE_UNAVAILABLE"


class ResourceExhausted(BergenError):
    """A limit of this server is reached (open watch streams, say); nothing was done."""

    status = "RESOURCE_EXHAUSTED"
    default_reason = "RESOURCE_EXHAUSTED"


class DeadlineExceeded(BergenError):
    """The caller's deadline passed before the work was done; nothing was written."""

    status = "DEADLINE_EXCEEDED"
    default_reason = "DEADLINE_EXCEEDED"


STATUSES = frozenset(
    {
        "INVALID_ARGUMENT",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "UNAUTHENTICATED",
        "PERMISSION_DENIED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "UNAVAILABLE",
        "RESOURCE_EXHAUSTED",
        "DEADLINE_EXCEEDED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "DATA_LOSS",
        "INTERNAL",
    }
)
"""Every `status` an error here may carry (names of gRPC status codes)."""
