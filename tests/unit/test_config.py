"""`bergen serve`'s settings are one frozen `Config`, read from the flags and the environment
in one place (`Config.from_args_and_env`) and checked there."""

from __future__ import annotations

import dataclasses
import json

import pytest

from bergen.api.exit_status import ExitStatus
from bergen.server.config import Config, ConfigError
from bergen.server.limits import Limits
from bergen.server.main import main

TOKEN = "bgo_" + "Zq8w-Xv3_Tn7Ry1Lp5Ks9Jd2Hf6Gb4Mc0Na8Ue3"


def test_no_flags_and_an_empty_environment_are_the_defaults() -> None:
    assert Config.from_args_and_env([], {}) == Config()


def test_the_environment_gives_what_no_flag_does() -> None:
    config = Config.from_args_and_env(
        [],
        {
            "BERGEN_LISTEN": "127.0.0.1:0",
            "BERGEN_DATABASE_URL": "sqlite:///x.db",
            "BERGEN_MAX_WATCHERS": "7",
            "BERGEN_WORKERS": "3",
            "BERGEN_ORGANISER_TOKEN": TOKEN,
            "BERGEN_LOG_LEVEL": "DEBUG",
            "BERGEN_LOG_FORMAT": "json",
            "OTEL_TRACES_EXPORTER": "console",
        },
    )
    assert (config.listen, config.database_url) == ("127.0.0.1:0", "sqlite:///x.db")
    assert (config.max_watchers, config.workers) == (7, 3)
    assert (config.organiser_token, config.log_level, config.log_format) == (
        TOKEN,
        "DEBUG",
        "json",
    )
    assert config.trace


def test_a_flag_beats_the_environment() -> None:
    config = Config.from_args_and_env(
        ["--max-watchers", "9", "--create-rate", "4", "--no-migrate", "--limit-loopback"],
        {"BERGEN_MAX_WATCHERS": "7"},
    )
    assert config.max_watchers == 9
    assert config.limits == Limits(creates_per_minute=4, limit_loopback=True)
    assert not config.migrate


def test_a_bad_setting_is_refused_saying_which() -> None:
    with pytest.raises(ConfigError, match="BERGEN_LOG_FORMAT 'xml': text or json"):
        Config.from_args_and_env([], {"BERGEN_LOG_FORMAT": "xml"})
    with pytest.raises(ConfigError, match="--metrics 'nowhere': not HOST:PORT"):
        Config.from_args_and_env(["--metrics", "nowhere"], {})
    with pytest.raises(ConfigError, match="max_watchers must be at least 1, not 0"):
        Config(max_watchers=0)


def test_a_bad_number_in_the_environment_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        Config.from_args_and_env([], {"BERGEN_MAX_WATCHERS": "many"})
    assert exited.value.code == ExitStatus.USAGE
    assert "not a whole number: 'many'" in capsys.readouterr().err


def test_main_refuses_a_bad_setting_in_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BERGEN_LOG_FORMAT", "xml")
    assert main(["--listen", "127.0.0.1:0"]) == ExitStatus.USAGE
    assert capsys.readouterr().err == (
        "bergen serve: BERGEN_LOG_FORMAT 'xml': text or json (USAGE)\n"
    )


def test_the_config_is_frozen_and_never_shows_the_token() -> None:
    config = Config(organiser_token=TOKEN)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.listen = "0.0.0.0:1"  # type: ignore[misc]
    assert TOKEN not in repr(config)


def test_a_worker_gets_the_config_but_the_token_from_its_environment() -> None:
    config = Config(
        listen="127.0.0.1:0",
        organiser_token=TOKEN,
        limits=Limits(joins_per_minute=3),
        worker_index=1,
        worker_count=2,
    )
    spec = json.loads(json.dumps(config.to_spec()))
    assert TOKEN not in json.dumps(spec)
    assert Config.from_spec(spec, {"BERGEN_ORGANISER_TOKEN": TOKEN}) == config
    assert Config.from_spec(spec, {}).organiser_token is None
