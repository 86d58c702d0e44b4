"""`bergen-replay --analyse`: every decision of a finished match judged from what its seat
knew, each seat's accuracy and each hand's open-hands par, in words and in JSON, the same
for the same seed and budget; refused for a match not ended."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bergen.api.exit_status import ExitStatus
from bergen.domain.analysis import decisions
from bergen.domain.events import Dealt
from bergen.domain.openhands import shortfall

from .replay_support import find_match, run_replay


def saved(tmp_path: Path, seats: int = 2, partnerships: bool = False) -> tuple[Path, list[Any]]:
    events, record = find_match(lambda _: True, seats=seats, partnerships=partnerships)
    path = tmp_path / f"match-{seats}.json"
    path.write_text(json.dumps(record))
    return path, events


def analysed(path: Path, *args: str) -> dict[str, Any]:
    result = run_replay("--file", str(path), "--analyse", "--json", "--budget", "1", *args)
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    analysis: dict[str, Any] = shown["analysis"]
    return analysis


def test_every_decision_is_judged_with_a_par_for_each_hand(tmp_path: Path) -> None:
    path, events = saved(tmp_path)
    a = analysed(path, "--seed", "7")
    assert a["engine"] == "bergen-analysis/1" and a["seed"] == "7"
    found = decisions(events)
    assert len(a["decisions"]) == len(found) > 0
    for d, (k, chosen) in zip(a["decisions"], found, strict=True):
        assert d["seat"] == k.seat and d["hand"] == (k.state.hand if k.state else None)
        option = d["options"][d["chosen"]]
        assert (option["tile"], option["end"]) == (str(chosen[0]), chosen[1].value)
        assert d["mark"] in (None, "inaccuracy", "mistake", "blunder")
        assert d["loss"]["low"] <= d["loss"]["mean"] <= d["loss"]["high"]
        assert all(0.0 <= o["win"]["mean"] <= 1.0 for o in d["options"])
    assert len(a["accuracy"]) == 2
    assert all(x is None or 0 <= x <= 100 for x in a["accuracy"])
    hands = sorted({e.hand for e in events if isinstance(e, Dealt)})
    assert [p["hand"] for p in a["pars"]] == hands
    for p in a["pars"]:
        sf = shortfall(events, p["hand"])
        assert (p["par"], p["played"], p["loss"]) == (sf.par, sf.played, list(sf.loss))


def test_the_same_seed_and_budget_give_the_same_analysis(tmp_path: Path) -> None:
    path, _ = saved(tmp_path)
    assert analysed(path, "--seed", "x") == analysed(path, "--seed", "x")


def test_the_words_mark_the_mistakes_and_give_each_seats_accuracy(tmp_path: Path) -> None:
    path, _ = saved(tmp_path)
    result = run_replay("--file", str(path), "--analyse", "--budget", "1", "--plain")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "Analysis (bergen-analysis/1" in text
    assert "seat 1 (greedy0): accuracy" in text and "seat 2 (random1): accuracy" in text
    assert "open-hands par" in text and "hand 1: par" in text


def test_three_seats_are_judged_without_a_par(tmp_path: Path) -> None:
    path, _ = saved(tmp_path, seats=3)
    a = analysed(path)
    assert a["pars"] is None and len(a["accuracy"]) == 3 and a["decisions"]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--budget", "0"), "--budget"),
        (("--step",), "--analyse"),
    ],
)
def test_a_bad_analysis_request_is_refused(
    tmp_path: Path, args: tuple[str, ...], words: str
) -> None:
    path, _ = saved(tmp_path)
    result = run_replay("--file", str(path), "--analyse", *args)
    assert result.returncode == ExitStatus.USAGE, result.stderr
    assert words in result.stderr
