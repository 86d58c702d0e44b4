"""Who is calling, and what that allows: a seat's token, the organiser's token, or nobody.

Both sides of the application use it: commands to act for a seat or as the organiser,
queries to choose whose eyes a match is shown through.
"""

from __future__ import annotations

from dataclasses import dataclass

from bergen.domain.errors import PermissionDenied, Unauthenticated

from . import auth
from .keys import LogKeys
from .matches import Match


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is calling: a bearer token or nobody."""

    token: str | None = None


class Identity:
    """Checks callers' tokens against the organiser's and against a match's seats, and
    seals the token of a seat being taken (`seat_tokens`) under the log keys."""

    def __init__(self, organiser_token: str | None, log_keys: LogKeys | None = None) -> None:
        self._organiser_hash = auth.token_hash(organiser_token) if organiser_token else None
        self.seat_tokens = auth.SeatTokens(log_keys)

    def is_organiser(self, caller: Caller) -> bool:
        return (
            caller.token is not None
            and self._organiser_hash is not None
            and auth.matches(caller.token, self._organiser_hash)
        )

    def require_organiser(self, caller: Caller, what: str) -> None:
        """Raises Unauthenticated without a token, PermissionDenied for another token (or
        any, on a server with no organiser token: NO_ORGANISER)."""
        if caller.token is None:
            raise Unauthenticated(f"{what} needs the organiser token")
        if self._organiser_hash is None:
            raise PermissionDenied(
                f"{what} needs the organiser token, and this server has none (it was started "
                "with --no-organiser)",
                reason="NO_ORGANISER",
            )
        if not self.is_organiser(caller):
            raise PermissionDenied(
                f"{what} needs the organiser token; this token is not it",
                reason="NOT_THE_ORGANISER_TOKEN",
            )

    def is_creator(self, match: Match, caller: Caller) -> bool:
        """Whether the caller's token is the creator token `match` was created with."""
        sealed = match.creator_token
        return (
            caller.token is not None
            and sealed is not None
            and self.seat_tokens.matches(caller.token, sealed)
        )

    def seat_of(self, match: Match, caller: Caller) -> int | None:
        """The seat the caller's token holds in `match`; None for no token.

        Raises PermissionDenied for a token that holds no seat of this match.
        """
        if caller.token is None:
            return None
        for seat, sealed in enumerate(match.seat_tokens):
            if sealed is not None and self.seat_tokens.matches(caller.token, sealed):
                return seat
        raise PermissionDenied(
            f"the token holds no seat in match {match.state.match_id}",
            reason="NOT_A_SEAT_OF_THIS_MATCH",
        )

    def viewer(self, match: Match, caller: Caller) -> int | None:
        """A seat, or None for a spectator (the organiser included). Raises as `seat_of`."""
        if caller.token is not None and self.is_organiser(caller):
            return None
        return self.seat_of(match, caller)

    def require_seat(self, match: Match, caller: Caller) -> int:
        """The caller's seat. Raises Unauthenticated without a token, else as `seat_of`."""
        if caller.token is None:
            raise Unauthenticated(
                f"match {match.state.match_id}: send the seat token as 'authorization: Bearer'",
                reason="SEAT_TOKEN_REQUIRED",
            )
        seat = self.seat_of(match, caller)
        assert seat is not None
        return seat
