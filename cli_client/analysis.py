"""`bergen-replay MATCH --analyse`: every decision of a finished match judged, in parallel.

The judging is the domain's (`bergen.domain.analysis`); here: how many worlds a decision
gets from the budget, the decisions spread over the machine's cores, and the words and the
JSON of the result. The worlds a decision gets depend only on the match and the budget (a
nominal cost of a playout, never the machine's speed), so the same seed and budget give the
same analysis anywhere; the budget is the time that takes at the nominal cost, on one core.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

from bergen.domain.analysis import (
    Decision,
    Judgement,
    MatchAnalysis,
    WinModel,
    decisions_at,
    judge,
    summary,
)
from bergen.domain.events import Dealt, Event, MatchCreated
from bergen.domain.openhands import Shortfall, shortfall
from bergen.domain.rules import Rules

ENGINE = "bergen-analysis/1"
"""The engine's name and version: an analysis is the same for the same engine, seed and
budget."""
DEFAULT_BUDGET_S = 20.0
NOMINAL_PLAYOUT_S = 0.0005
"""What one option played out in one world is taken to cost, to turn a budget into worlds."""
MIN_WORLDS = 16
MAX_WORLDS = 2_000


@dataclass(frozen=True, slots=True)
class Analysed:
    """A match's analysis and how it was made."""

    analysis: MatchAnalysis
    seed: str
    budget_s: float
    worlds: int
    """Worlds sampled for each decision."""
    pars: tuple[Shortfall, ...] | None
    """Each hand against its open-hands par; None with more than two sides (not solved)."""
    seqs: tuple[int, ...] = ()
    """The seq of each judged decision's play in the match's stream (from 1)."""


def worlds_for(found: Sequence[Decision], budget_s: float) -> int:
    """Worlds a decision gets: the budget spread over every option of every decision at the
    nominal cost, within MIN_WORLDS and MAX_WORLDS."""
    options = sum(len(k.state.legal_plays(k.seat)) for k, _ in found if k.state is not None)
    if options == 0:
        return MIN_WORLDS
    return max(MIN_WORLDS, min(MAX_WORLDS, int(budget_s / (options * NOMINAL_PLAYOUT_S))))


def analyse_match(
    events: Sequence[Event],
    seed: str,
    budget_s: float,
    workers: int | None = None,
    seats: Sequence[int] | None = None,
) -> Analysed:
    """Judge every decision of `seats` (default: all) in a whole match (its events, nothing
    hidden), `workers` processes at once (default: one a core). Raises ValueError when the
    events are not a whole match's."""
    created = next((e for e in events if isinstance(e, MatchCreated)), None)
    if created is None:
        raise ValueError("a match's events start with its creation")
    located = decisions_at(events, seats)
    found = [(k, chosen) for _, k, chosen in located]
    worlds = worlds_for(found, budget_s)
    two_sides = created.partnerships or created.seats == 2
    hands = sorted({e.hand for e in events if isinstance(e, Dealt)}) if two_sides else []
    fit = (created.rules, created.seats, created.partnerships, seed)
    jobs = [(k, chosen, worlds, seed) for k, chosen in found]
    workers = workers or os.cpu_count() or 1
    if workers <= 1 or len(found) + len(hands) < 2:
        _fit(*fit)
        judged = [_judge(job) for job in jobs]
        pars = [shortfall(events, hand) for hand in hands]
    else:
        # Processes of their own, started afresh (a gateway's threads are not forked), each
        # fitting the same win model from the seed.
        with ProcessPoolExecutor(
            max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
            initializer=_fit, initargs=fit,
        ) as pool:  # fmt: skip
            solving = [pool.submit(shortfall, list(events), hand) for hand in hands]
            judged = list(pool.map(_judge, jobs, chunksize=max(1, len(jobs) // (4 * workers))))
            pars = [f.result() for f in solving]
    return Analysed(
        summary(judged, created.seats),
        seed,
        budget_s,
        worlds,
        tuple(pars) if two_sides else None,
        tuple(i + 1 for i, _, _ in located),
    )


_model: WinModel | None = None
"""This process's win model (`_fit`)."""


def _fit(rules: Rules, seats: int, partnerships: bool, seed: str) -> None:
    global _model
    _model = WinModel.fitted(rules, seats, partnerships, seed=seed)


def _judge(job: tuple[Any, Any, int, str]) -> Judgement:
    k, chosen, worlds, seed = job
    assert _model is not None
    return judge(k, _model, chosen, worlds, seed)


# ----- words and JSON ---------------------------------------------------------------------


def _tile_end(option: Any) -> str:
    return f"{option.tile} {option.end.value}"


def _percent(x: float) -> str:
    return f"{100 * x:.0f}%"


def lines(analysed: Analysed, names: Sequence[str], hand: int | None = None) -> list[str]:
    """The analysis in words: each marked decision, then each seat's accuracy (seats from
    1)."""
    a = analysed.analysis
    out = [
        f"Analysis ({ENGINE}, seed {analysed.seed!r}, budget {analysed.budget_s:g} s: "
        f"{analysed.worlds} worlds a decision, {len(a.decisions)} decisions judged)"
    ]
    shown = [d for d in a.decisions if hand is None or d.hand == hand]
    marked = [d for d in shown if d.mark is not None]
    for d in marked:
        chosen = d.options[d.chosen if d.chosen is not None else d.best]
        best = d.options[d.best]
        assert d.loss is not None and chosen.win is not None and best.win is not None
        article = "an" if (d.mark or "")[:1] in ("a", "e", "i", "o", "u") else "a"
        out.append(
            f"  hand {d.hand}, seat {d.seat + 1} ({names[d.seat]}): {_tile_end(chosen)} is "
            f"{article} {d.mark}, losing {d.loss.mean:.1f} points of winning chance "
            f"({_percent(chosen.win.mean)} against {_percent(best.win.mean)} for "
            f"{_tile_end(best)})"
        )
    if not marked:
        out.append("  no decision marked")
    for seat, acc in enumerate(a.accuracy):
        said = "no decision to judge" if acc is None else f"{acc:.1f}"
        out.append(f"  seat {seat + 1} ({names[seat]}): accuracy {said}")
    if analysed.pars is None:
        out.append("  open-hands par: solved for two sides only (two seats, or partnerships)")
        return out
    out.append("  open-hands par (side 1's points minus side 2's, perfect play, every tile seen):")
    for sf in analysed.pars:
        if hand is not None and sf.hand != hand:
            continue
        out.append(
            f"    hand {sf.hand}: par {sf.par:+d}, played {sf.played:+d}; given away: "
            f"side 1 {sf.loss[0]}, side 2 {sf.loss[1]}"
        )
    return out


def _estimate(e: Any) -> dict[str, float] | None:
    return None if e is None else {"mean": e.mean, "low": e.low, "high": e.high}


def as_json(analysed: Analysed) -> dict[str, Any]:
    """The analysis for --json: seats and sides from 0, chances from 0 to 1, losses in points
    of winning chance out of 100; `pars` each hand's open-hands par and what it gave (side
    0's points minus side 1's) and each side's points given away (null: more than two
    sides); each decision's `seq`, its play's place in the match's stream (from 1)."""
    a = analysed.analysis
    pars = None
    if analysed.pars is not None:
        pars = [
            {"hand": sf.hand, "par": sf.par, "played": sf.played, "loss": list(sf.loss)}
            for sf in analysed.pars
        ]
    return {
        "engine": ENGINE,
        "pars": pars,
        "seed": analysed.seed,
        "budget_s": analysed.budget_s,
        "worlds": analysed.worlds,
        "accuracy": list(a.accuracy),
        "decisions": [
            {
                "seq": seq,
                "seat": d.seat,
                "hand": d.hand,
                "chosen": d.chosen,
                "best": d.best,
                "mark": d.mark,
                "loss": _estimate(d.loss),
                "options": [
                    {
                        "tile": str(o.tile),
                        "end": o.end.value,
                        "win": _estimate(o.win),
                        "points": _estimate(o.points),
                    }
                    for o in d.options
                ],
            }
            for d, seq in zip(a.decisions, analysed.seqs, strict=True)
        ],
    }
