"""The clock options of RULES.md section 9: values, ranges, and recorded only with a clock."""

from __future__ import annotations

import pytest

from bergen.domain.errors import InvalidOptions
from bergen.domain.rules import CLOCK_OPTIONS, Rules, make_rules

CLOCKED = {"clock": "fischer"}


def test_the_defaults_are_those_of_the_rule_book():
    rules = make_rules(2, False, "standard", CLOCKED)
    assert (
        rules.clock,
        rules.clock_initial,
        rules.clock_increment,
        rules.on_timeout,
        rules.timeouts_to_forfeit,
    ) == ("fischer", 120, 5, "autoplay", 3)
    assert make_rules(2, False).clock == "none"


def test_without_a_clock_no_clock_option_is_recorded():
    rules = make_rules(3, False, "eastern")
    assert not rules.clocked
    assert not set(CLOCK_OPTIONS) & set(rules.as_dict())


def test_with_a_clock_every_clock_option_is_recorded_and_read_back():
    rules = make_rules(
        4,
        True,
        "american",
        {
            "clock": "fischer",
            "clock_initial": "60",
            "clock_increment": 2,
            "on_timeout": "forfeit",
            "timeouts_to_forfeit": "1",
        },
    )
    recorded = rules.as_dict()
    assert {k: recorded[k] for k in CLOCK_OPTIONS} == {
        "clock": "fischer",
        "clock_initial": 60,
        "clock_increment": 2,
        "on_timeout": "forfeit",
        "timeouts_to_forfeit": 1,
    }
    assert Rules.from_dict(recorded) == rules


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("clock_initial", 1),
        ("clock_initial", 86400),
        ("clock_increment", 0),
        ("clock_increment", 3600),
        ("timeouts_to_forfeit", 1),
        ("timeouts_to_forfeit", 99),
        ("on_timeout", "forfeit"),
    ],
)
def test_the_bounds_of_each_range_are_allowed(option, value):
    assert getattr(make_rules(2, False, None, {**CLOCKED, option: value}), option) == value


@pytest.mark.parametrize(
    ("option", "value", "reason"),
    [
        ("clock", "byoyomi", "INVALID_OPTIONS"),
        ("clock", True, "INVALID_OPTIONS"),
        ("clock_initial", 0, "OPTION_OUT_OF_RANGE"),
        ("clock_initial", 86401, "OPTION_OUT_OF_RANGE"),
        ("clock_initial", 1.5, "OPTION_OUT_OF_RANGE"),
        ("clock_initial", True, "OPTION_OUT_OF_RANGE"),
        ("clock_increment", -1, "OPTION_OUT_OF_RANGE"),
        ("clock_increment", 3601, "OPTION_OUT_OF_RANGE"),
        ("timeouts_to_forfeit", 0, "OPTION_OUT_OF_RANGE"),
        ("timeouts_to_forfeit", 100, "OPTION_OUT_OF_RANGE"),
        ("on_timeout", "pass", "INVALID_OPTIONS"),
    ],
)
def test_a_clock_option_out_of_its_values_is_refused_naming_it(option, value, reason):
    with pytest.raises(InvalidOptions) as info:
        make_rules(2, False, None, {**CLOCKED, option: value})
    assert info.value.reason == reason
    assert info.value.metadata["option"] == option
    assert option in str(info.value)


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("clock_initial", 60),
        ("clock_increment", 0),
        ("on_timeout", "forfeit"),
        ("timeouts_to_forfeit", 1),
    ],
)
def test_a_clock_option_without_a_clock_is_refused_not_dropped(option, value):
    with pytest.raises(InvalidOptions) as info:
        make_rules(2, False, None, {option: value})
    assert info.value.reason == "CLOCK_OPTION_WITHOUT_CLOCK"
    assert info.value.metadata["option"] == option


def test_a_record_has_all_clock_options_or_none():
    recorded = make_rules(2, False, "standard", CLOCKED).as_dict()
    del recorded["on_timeout"]
    with pytest.raises(InvalidOptions, match="on_timeout"):
        Rules.from_dict(recorded)
    plain = make_rules(2, False).as_dict()
    assert Rules.from_dict(plain) == make_rules(2, False)
