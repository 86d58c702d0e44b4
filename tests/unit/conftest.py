"""Fixtures of the unit tests."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from .support import Deal, install_deals


@pytest.fixture
def crafted_deals(
    monkeypatch: pytest.MonkeyPatch,
) -> Callable[[Mapping[tuple[int, int], Deal]], Any]:
    """`crafted_deals({(hand, attempt): (hands, boneyard), ...})` makes the engine deal those;
    any other (hand, attempt) gets the real fair deal. Returns the (hand, attempt) asked for."""

    def install(deals: Mapping[tuple[int, int], Deal]) -> list[tuple]:
        return install_deals(monkeypatch, deals)

    return install
