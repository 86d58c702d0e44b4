"""Text a person typed (a name, a note, a reason): checked once, with one message each."""

from __future__ import annotations

import unicodedata

from .errors import InvalidArgument


def check_text(value: object, what: str, limit: int, *, empty: bool = True) -> str:
    """`value`, a text of at most `limit` characters that a person can read: no control or
    invisible characters, not blank unless `empty`. Raises InvalidArgument (TEXT_TOO_LONG,
    TEXT_BLANK, CONTROL_CHARACTER, INVISIBLE_CHARACTER) naming `what`."""
    if not isinstance(value, str):
        raise InvalidArgument(f"{what} must be text, got {type(value).__name__}", field=what)
    if len(value) > limit:
        raise InvalidArgument(
            f"{what} is longer than {limit} characters", reason="TEXT_TOO_LONG", field=what
        )
    if value.isascii() and value.isprintable() and (empty or value.strip(" ")):
        # Printable ASCII is letters, digits, punctuation, symbols and the space (Zs): no
        # control or invisible character, and visible unless it is all spaces.
        return value
    if not empty and not any(
        not c.isspace() and unicodedata.category(c) not in ("Cf", "Zs") for c in value
    ):
        raise InvalidArgument(
            f"{what} must have a visible character", reason="TEXT_BLANK", field=what
        )
    if any(unicodedata.category(c) in ("Cc", "Cs") for c in value):
        raise InvalidArgument(
            f"{what} must not contain control characters",
            reason="CONTROL_CHARACTER",
            field=what,
        )
    for i, c in enumerate(value):
        if unicodedata.category(c) in _INVISIBLE:
            # A bidi override or a zero-width character makes a name that reads as another
            # (or reverses what follows it on an opponent's screen).
            raise InvalidArgument(
                f"{what} must not contain invisible or format characters (U+{ord(c):04X} at {i})",
                reason="INVISIBLE_CHARACTER",
                field=what,
            )
    return value


_INVISIBLE = frozenset({"Cf", "Co", "Cn", "Zl", "Zp"})
"""Unicode categories refused in text besides controls (Cc) and surrogates (Cs): format
(bidi overrides, zero-width), private use, unassigned, line and paragraph separators.
Ordinary spaces (Zs) are kept."""
