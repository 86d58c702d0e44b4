"""Named exit statuses of the command-line tools."""

from __future__ import annotations

from enum import IntEnum


class ExitStatus(IntEnum):
    SUCCESS = 0
    ERROR = 1
    USAGE = 2
    NOT_FOUND = 3
    REFUSED = 4
    UNREACHABLE = 5
    INVALID = 6
