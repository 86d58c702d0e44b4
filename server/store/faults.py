"""Storage faults become StorageUnavailable at the adapter, never a raw driver exception."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from bergen.domain.errors import StorageUnavailable

P = ParamSpec("P")
R = TypeVar("R")

Classify = Callable[[BaseException], "str | None"]
"""What went wrong, in a few words, when the exception is a storage fault; else None."""


def unavailable(what: str) -> StorageUnavailable:
    """The error for a fault described as `what` (the driver's text stays in the cause)."""
    return StorageUnavailable(f"event store unavailable: {what}; try again later")


def guard(classify: Classify) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A decorator raising StorageUnavailable (from the driver's error) for each exception
    that `classify` names a storage fault; other exceptions pass unchanged."""

    def decorate(method: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(method)
        def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return method(*args, **kwargs)
            except Exception as e:
                what = classify(e)
                if what is None:
                    raise
                raise unavailable(what) from e

        return guarded

    return decorate
