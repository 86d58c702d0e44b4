"""Rule options and presets (RULES.md section 9) as one validated, frozen value."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from .errors import InvalidOptions, shown

RULES_VERSION = "bergen-rules/1"
"""Names this rule book; recorded with every event so a later reader knows what applied."""

CHOICES: dict[str, tuple[object, ...]] = {
    "lead": ("lowest_double", "highest_double", "lowest_double_else_lowest_tile"),
    "draw": ("until_fits", "one_then_pass"),
    "double_bonus": (0, 2),
    "domino_points": (2, 1, 5),
    "blocked": ("german", "american", "eastern", "pips"),
    "endgame_reduction": ("on", "off"),
    "match_end": ("instant", "end_of_hand"),
}
"""Each option's values, default first."""

CLOCK_CHOICES: dict[str, tuple[str, ...]] = {
    "clock": ("none", "fischer"),
    "on_timeout": ("autoplay", "forfeit"),
}
"""The clock options that are words (RULES.md sections 9 and 11), default first."""

CLOCK_RANGES: dict[str, tuple[int, int, int]] = {
    "clock_initial": (120, 1, 86400),
    "clock_increment": (5, 0, 3600),
    "timeouts_to_forfeit": (3, 1, 99),
}
"""The clock options that are numbers: (default, lowest, highest)."""

CLOCK_OPTIONS: tuple[str, ...] = (
    "clock",
    "clock_initial",
    "clock_increment",
    "on_timeout",
    "timeouts_to_forfeit",
)
"""Recorded only for a clocked match (`clock` is not `none`)."""

OPTION_NAMES: tuple[str, ...] = (*CHOICES, "target", *CLOCK_OPTIONS)

PRESETS: dict[str, dict[str, object]] = {
    "standard": {},
    "american": {"blocked": "american"},
    "pips": {"blocked": "pips"},
    "eastern": {
        "lead": "lowest_double_else_lowest_tile",
        "draw": "one_then_pass",
        "double_bonus": 2,
        "blocked": "eastern",
        "endgame_reduction": "off",
    },
}

MAX_TARGET = 1000
_INT_OPTIONS = ("double_bonus", "domino_points", "target", *CLOCK_RANGES)


@dataclass(frozen=True, slots=True)
class Rules:
    """Every option a match is played with, and the preset it started from."""

    preset: str = "standard"
    lead: str = "lowest_double"
    draw: str = "until_fits"
    double_bonus: int = 0
    domino_points: int = 2
    blocked: str = "german"
    endgame_reduction: str = "on"
    match_end: str = "instant"
    target: int = 15
    clock: str = "none"
    clock_initial: int = 120
    clock_increment: int = 5
    on_timeout: str = "autoplay"
    timeouts_to_forfeit: int = 3

    def __post_init__(self) -> None:
        if not isinstance(self.preset, str) or (
            self.preset not in PRESETS and self.preset != "custom"
        ):
            raise InvalidOptions(
                f"unknown preset {shown(self.preset)}; presets are {', '.join(PRESETS)} "
                "(or custom)",
                reason="UNKNOWN_PRESET",
            )
        for name, allowed in CHOICES.items():
            value = getattr(self, name)
            # Exact types: a bool or a float equal to an allowed number is not that number.
            if not any(type(value) is type(a) and value == a for a in allowed):
                raise InvalidOptions(
                    f"option {name} must be one of {', '.join(map(str, allowed))}, "
                    f"got {shown(value)}",
                    option=name,
                )
        if (
            isinstance(self.target, bool)
            or not isinstance(self.target, int)
            or not 0 < self.target <= MAX_TARGET
        ):
            raise InvalidOptions(
                f"option target must be 1..{MAX_TARGET}, got {shown(self.target)}",
                option="target",
            )
        self._check_clock()

    def _check_clock(self) -> None:
        for name, words in CLOCK_CHOICES.items():
            value = getattr(self, name)
            if type(value) is not str or value not in words:
                raise InvalidOptions(
                    f"option {name} must be one of {', '.join(words)}, got {shown(value)}",
                    option=name,
                )
        for name, (_, low, high) in CLOCK_RANGES.items():
            value = getattr(self, name)
            if type(value) is not int or not low <= value <= high:
                raise InvalidOptions(
                    f"option {name} must be a whole number {low}..{high}, got {shown(value)}",
                    reason="OPTION_OUT_OF_RANGE",
                    option=name,
                )
        if self.clock == "none":
            changed = [n for n in CLOCK_OPTIONS[1:] if getattr(self, n) != _CLOCK_DEFAULTS[n]]
            if changed:
                # Not recorded without a clock: accepting them would drop them silently.
                raise InvalidOptions(
                    f"option {changed[0]} needs a clock; set clock to fischer",
                    reason="CLOCK_OPTION_WITHOUT_CLOCK",
                    option=changed[0],
                )

    @property
    def clocked(self) -> bool:
        """Whether seats play on a clock (RULES.md section 11)."""
        return self.clock != "none"

    def as_dict(self) -> dict[str, object]:
        """The `rules` object of RECORD.md: the clock options only for a clocked match."""
        names = _ALL_FIELDS if self.clock != "none" else _PLAIN_FIELDS
        return {name: getattr(self, name) for name in names}

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> Rules:
        """Read back `as_dict()`. Raises InvalidOptions on unknown or missing keys (the clock
        options are all present or all absent)."""
        if not isinstance(data, Mapping):
            raise InvalidOptions(f"rules must be an object, got {type(data).__name__}")
        expected = set(_PLAIN_FIELDS)
        if any(name in data for name in CLOCK_OPTIONS):
            expected |= set(CLOCK_OPTIONS)
        unknown = set(data) - expected
        missing = expected - set(data)
        if unknown or missing:
            raise InvalidOptions(
                f"rules: unknown {shown(sorted(unknown))} / missing {sorted(missing)}"
                if unknown and missing
                else f"rules: unknown options {shown(sorted(unknown))}"
                if unknown
                else f"rules: missing options {sorted(missing)}"
            )
        return Rules(**dict(data))


_ALL_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Rules))
_PLAIN_FIELDS: tuple[str, ...] = tuple(n for n in _ALL_FIELDS if n not in CLOCK_OPTIONS)
_CLOCK_DEFAULTS: dict[str, object] = {
    "on_timeout": CLOCK_CHOICES["on_timeout"][0],
    **{name: default for name, (default, _, _) in CLOCK_RANGES.items()},
}


def default_target(seats: int, partnerships: bool) -> int:
    """RULES.md section 7: 15 with two seats or two partnerships, 10 otherwise."""
    return 15 if seats == 2 or partnerships else 10


def _coerce(name: str, value: object) -> object:
    if name in _INT_OPTIONS and isinstance(value, str):
        text = value.strip()
        if text.lstrip("-").isdigit():
            return int(text)
    return value


def make_rules(
    seats: int,
    partnerships: bool,
    preset: str | None = None,
    options: Mapping[str, object] | None = None,
) -> Rules:
    """Build the rules for a match: a preset (default `standard`) with explicit overrides.

    With no preset the result is named `custom`. Numbers may be given as decimal strings.
    Raises InvalidOptions for an unknown preset or option, a bad value, or a seat count
    or partnership setting the rules cannot play.
    """
    if isinstance(seats, bool) or not isinstance(seats, int) or not 2 <= seats <= 4:
        raise InvalidOptions(
            f"a match has 2, 3 or 4 seats, got {shown(seats)}", reason="INVALID_SEATS"
        )
    if partnerships and seats != 4:
        raise InvalidOptions(f"partnerships need 4 seats, got {seats}")
    options = dict(options or {})
    unknown = sorted(set(options) - set(OPTION_NAMES))
    if unknown:
        raise InvalidOptions(
            f"unknown option(s) {shown(', '.join(unknown))}; options are {', '.join(OPTION_NAMES)}",
            reason="UNKNOWN_OPTION",
        )
    name = "custom" if preset is None or preset == "" else preset
    if name not in PRESETS and name != "custom":
        raise InvalidOptions(
            f"unknown preset {shown(name)}; presets are {', '.join(PRESETS)}",
            reason="UNKNOWN_PRESET",
        )
    values: dict[str, object] = {"target": default_target(seats, partnerships)}
    values.update(PRESETS.get(name, {}))
    values.update({k: _coerce(k, v) for k, v in options.items()})
    return Rules(preset=name, **values)  # type: ignore[arg-type]
