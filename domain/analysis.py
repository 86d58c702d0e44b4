"""The analysis of a match: each decision valued from what its seat knew then.

A seat's decision (a play with more than one legal option) is valued by sampling the worlds
the seat cannot tell apart (`montecarlo.Sampler`: every hidden tile placed consistently with
its own tiles and everything public) and playing each legal option out to the end of the
hand in each world, every seat then playing greedy (`montecarlo.play_out`). An option's value
in a world is:

- the side's **chance of winning the match**: 1 or 0 when the match ends in the playout,
  else the win model's chance from the scores the hand leaves (`WinModel`);
- the side's **points** for the rest of the hand.

Each option's values are averaged over the same worlds with the same random numbers (common
random numbers: the difference between two options is measured on identical worlds), with a
95 % confidence interval. The best option has the highest chance (then the most points); what
the chosen option lost is the paired difference to it. A loss is marked (`MARKS`, Lichess's
thresholds in points of winning chance) only when its interval excludes no loss at all.
A forced decision (one legal option) is never judged. The same seed and samples give the same
analysis.

The win model between hands is fitted, for the match's rules, on simulated hands: the points
each side scored in each (in order, with what they were scored for), played greedy by every
seat from a seed. From a score, a match is the sequence of its hands; the chance of each
side winning from each score is the average, over the simulated hands, of where that hand
leaves it (the match won or lost in it, or the chance from the score after it), the near-
target reduction (RULES.md section 5) applied to each score as it would be.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from .commands import CreateMatch, Play, TakeSeat
from .engine import execute
from .events import Event, HandEnded, MatchCreated, MatchEnded, PointsScored, TilePlayed
from .montecarlo import Knowledge, Sampler, learn, play_out
from .policies import greedy_policy
from .rules import Rules
from .state import PLAYING
from .tiles import End, Tile
from .views import redact_event, view

MARKS = ((15.0, "blunder"), (10.0, "mistake"), (5.0, "inaccuracy"))
"""A decision's mark by the winning chance it lost, in points out of 100 (Lichess's)."""
Z95 = 1.959963984540054
"""The normal quantile of a two-sided 95 % interval."""
MODEL_HANDS = 1_000
"""Simulated hands a win model is fitted on."""
_FAR = 1_000
"""The largest target: the hands are played far from it (the match that reaches it ends,
and the next is started), so no score is reduced and no hand cut short."""


@dataclass(frozen=True, slots=True)
class Estimate:
    """A mean over sampled worlds and its 95 % confidence interval."""

    mean: float
    low: float
    high: float


def estimate(values: Sequence[float]) -> Estimate:
    """The mean of `values` and its normal 95 % interval (the mean alone for one value)."""
    n = len(values)
    mean = math.fsum(values) / n
    if n < 2:
        return Estimate(mean, mean, mean)
    var = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    half = Z95 * math.sqrt(var / n)
    return Estimate(mean, mean - half, mean + half)


# --- the win model between hands -------------------------------------------------------------

Hand = tuple[tuple[int, int, bool], ...]
"""A simulated hand: each score in order, (side, points before any reduction, scored by the
play rather than the hand's end)."""


def simulated_hands(
    rules: Rules, seats: int, partnerships: bool, count: int, seed: str
) -> list[Hand]:
    """`count` hands of `rules` played greedy by every seat from `seed`, far from any target,
    each also with its sides' numbers turned round (the sides are alike but for their
    numbers: what one side scored in a hand, each other could have): `count` hands in all,
    rounded up to a multiple of the sides."""
    sides = 2 if partnerships else seats
    far = replace(rules, target=_FAR, match_end="instant")
    rng = random.Random(f"bergen-analysis-hands|{seed}")
    played: list[Hand] = []
    wanted = -(-count // sides)
    match = 0
    while len(played) < wanted:
        match += 1
        server_seed = hashlib.sha256(f"{seed}|{match}".encode()).digest()
        played += _hands_of_one_match(
            far, seats, partnerships, server_seed, rng, wanted - len(played)
        )
    return [
        tuple(((side + turn) % sides, points, by_play) for side, points, by_play in hand)
        for hand in played
        for turn in range(sides)
    ]


def _hands_of_one_match(
    rules: Rules,
    seats: int,
    partnerships: bool,
    server_seed: bytes,
    rng: random.Random,
    wanted: int,
) -> list[Hand]:
    _, state = execute(None, CreateMatch("analysis", seats, partnerships, rules, server_seed, ""))
    for seat in range(seats):
        _, state = execute(state, TakeSeat(name=f"seat{seat}", client_seed="", seat=seat))
    hands: list[Hand] = []
    scores: list[tuple[int, int, bool]] = []
    while len(hands) < wanted and state.phase == PLAYING:
        assert state.turn is not None
        seat = state.turn
        tile, end = greedy_policy(view(state, seat), rng)
        new, state = execute(state, Play(seat=seat, tile=tile, end=end))
        for e in new:
            if isinstance(e, PointsScored):
                scores.append((e.side, e.base, e.reason.by_play))
            elif isinstance(e, HandEnded):
                hands.append(tuple(scores))
                scores = []
    return hands


def _reduced(rules: Rules, points: int, by_play: bool, need: int) -> int:
    """What a score of `points` (before reduction) gives a side `need` points short."""
    if not by_play or rules.endgame_reduction != "on":
        return points
    if need <= 2:
        return 1
    if need == 3:
        return min(points, 2)
    return points


class WinModel:
    """Each side's chance of winning a match of `rules` from its scores between hands, fitted
    on `hands` (`simulated_hands`): exact over those hands, for the scores asked and those
    they lead to (memoized)."""

    def __init__(self, rules: Rules, sides: int, hands: Sequence[Hand]) -> None:
        if not hands:
            raise ValueError("a win model needs simulated hands")
        self.rules = rules
        self.sides = sides
        self._hands = list(hands)
        self._memo: dict[tuple[int, ...], tuple[float, ...]] = {}

    @classmethod
    def fitted(
        cls, rules: Rules, seats: int, partnerships: bool, count: int = MODEL_HANDS, seed: str = ""
    ) -> WinModel:
        sides = 2 if partnerships else seats
        return cls(rules, sides, simulated_hands(rules, seats, partnerships, count, seed))

    def chances(self, scores: Sequence[int]) -> tuple[float, ...]:
        """Each side's chance of winning from `scores` (the start of a hand). Raises
        ValueError for scores of another number of sides."""
        if len(scores) != self.sides:
            raise ValueError(f"{len(scores)} scores for {self.sides} sides")
        key = _tied_at_target(tuple(scores), self.rules.target)
        done = self._decided(key)
        if done is not None:
            return done
        return self._solve(key)

    def _decided(self, scores: tuple[int, ...]) -> tuple[float, ...] | None:
        """The chances from `scores` when the match is over there: None while it is not (no
        side at the target, or, ending at a hand's end, sides tied at the top)."""
        if max(scores) < self.rules.target:
            return None
        top = max(scores)
        leaders = [i for i, s in enumerate(scores) if s == top]
        if len(leaders) > 1:
            return None  # end_of_hand, tied at the top: another hand is played
        return tuple(1.0 if i == leaders[0] else 0.0 for i in range(len(scores)))

    def _solve(self, start: tuple[int, ...]) -> tuple[float, ...]:
        # Iterative depth-first evaluation: a state's value needs those its hands lead to,
        # each with a higher total (or itself, for a hand that scores nothing).
        stack = [start]
        while stack:
            state = stack[-1]
            if state in self._memo:
                stack.pop()
                continue
            pending = []
            for hand in self._hands:
                after, _ = self._play(state, hand)
                if after is not None and after != state and after not in self._memo:
                    pending.append(after)
            if pending:
                stack.extend(dict.fromkeys(pending))
                continue
            stack.pop()
            self._memo[state] = self._value(state)
        return self._memo[start]

    def _play(
        self, scores: tuple[int, ...], hand: Hand
    ) -> tuple[tuple[int, ...] | None, int | None]:
        """The scores after `hand` from `scores` and None, or None and the side that won the
        match in it."""
        rules, target = self.rules, self.rules.target
        now = list(scores)
        for side, points, by_play in hand:
            now[side] += _reduced(rules, points, by_play, target - now[side])
            if rules.match_end == "instant" and now[side] >= target:
                return None, side
        after = tuple(now)
        done = self._decided(after)
        if done is not None:
            return None, done.index(1.0)
        return _tied_at_target(after, target), None

    def _value(self, state: tuple[int, ...]) -> tuple[float, ...]:
        sides = self.sides
        totals = [0.0] * sides
        stay = 0
        for hand in self._hands:
            after, winner = self._play(state, hand)
            if winner is not None:
                totals[winner] += 1.0
            elif after == state:
                stay += 1  # nothing scored: the same state again
            else:
                assert after is not None
                chances = self._memo[after]
                for i in range(sides):
                    totals[i] += chances[i]
        n = len(self._hands) - stay
        if n == 0:
            return tuple(1.0 / sides for _ in range(sides))  # no hand ever scores
        return tuple(t / n for t in totals)


def _tied_at_target(scores: tuple[int, ...], target: int) -> tuple[int, ...]:
    """Sides tied at the top past the target (a match ending at a hand's end plays on) with
    every score moved down alike until the leaders stand at the target: what decides the
    match from there is who leads after a hand, so the differences are kept and the states
    stay finite (a side behind is then counted nearer the near-target reduction than it is,
    a small approximation)."""
    over = max(scores) - target
    if over <= 0:
        return scores
    return tuple(s - over for s in scores)


# --- a decision --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Option:
    """One legal option, valued over the sampled worlds: the side's chance of winning the
    match (0 to 1) and its points for the rest of the hand (None for a forced decision,
    which is not valued)."""

    tile: Tile
    end: End
    win: Estimate | None
    points: Estimate | None


@dataclass(frozen=True, slots=True)
class Judgement:
    """A decision analysed: the options (best first is not implied; `best` indexes them), the
    one chosen, and what it lost against the best in winning chance (points out of 100),
    paired on the same worlds; `mark` per MARKS, None when not marked."""

    seat: int
    hand: int
    options: tuple[Option, ...]
    best: int
    chosen: int | None
    loss: Estimate | None
    mark: str | None
    samples: int

    @property
    def forced(self) -> bool:
        return len(self.options) == 1


def _rng(seed: str, *parts: object) -> random.Random:
    return random.Random("|".join(["bergen-analysis", seed, *map(str, parts)]))


def judge(
    k: Knowledge,
    model: WinModel,
    chosen: tuple[Tile, End] | None = None,
    samples: int = 64,
    seed: str = "",
) -> Judgement:
    """The analysis of seat `k.seat`'s decision in the state of `k` (which must be its turn),
    from its knowledge alone. Raises ValueError when it is not the seat's turn or its
    knowledge does not add up."""
    s = k.state
    if s is None or s.phase != PLAYING or s.turn != k.seat:
        raise ValueError(f"it is not seat {k.seat}'s turn to play")
    legal = s.legal_plays(k.seat)
    if not legal:
        raise ValueError(f"seat {k.seat} has no legal play")
    me = s.side_of(k.seat)
    chosen_at = None if chosen is None else legal.index(chosen) if chosen in legal else None
    if chosen is not None and chosen_at is None:
        raise ValueError(f"{chosen[0]} at the {chosen[1]} end is not a legal play here")
    if len(legal) == 1:
        t, e = legal[0]
        return Judgement(k.seat, s.hand, (Option(t, e, None, None),), 0, chosen_at, None, None, 0)
    sampler = Sampler(k)
    worlds_rng = _rng(seed, s.match_id, s.hand, len(s.line), k.seat)
    wins: list[list[float]] = [[] for _ in legal]
    points: list[list[float]] = [[] for _ in legal]
    for w in range(samples):
        world = sampler.world(worlds_rng)
        for i, (t, e) in enumerate(legal):
            outcome = play_out(world, k.seat, t, e, _rng(seed, "world", w))
            points[i].append(float(outcome.gained[me]))
            if outcome.winner is not None:
                wins[i].append(1.0 if outcome.winner == me else 0.0)
            else:
                after = [a + b for a, b in zip(world.scores, outcome.gained, strict=True)]
                wins[i].append(model.chances(after)[me])
    options = tuple(
        Option(t, e, estimate(wins[i]), estimate(points[i])) for i, (t, e) in enumerate(legal)
    )
    means = [(math.fsum(wins[i]), math.fsum(points[i])) for i in range(len(legal))]
    best = max(range(len(options)), key=lambda i: means[i])
    loss = mark = None
    if chosen_at is not None:
        loss = estimate([100.0 * (b - c) for b, c in zip(wins[best], wins[chosen_at], strict=True)])
        mark = mark_of(loss)
    return Judgement(k.seat, s.hand, options, best, chosen_at, loss, mark, samples)


def mark_of(loss: Estimate) -> str | None:
    """The mark of a loss in winning chance (points out of 100): the worst threshold of
    MARKS its mean reaches, and only when its interval excludes no loss."""
    if not loss.low > 0.0:
        return None
    for threshold, name in MARKS:
        if loss.mean >= threshold:
            return name
    return None


def accuracy(loss: float) -> float:
    """A decision's accuracy (0 to 100) from the winning chance it lost (points out of 100):
    Lichess's curve, 103.1668 exp(-0.04354 loss) - 3.1669, within 0 to 100."""
    return max(0.0, min(100.0, 103.1668100711649 * math.exp(-0.04354415386753951 * loss)
                        - 3.166924740191411))  # fmt: skip


# --- a match ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MatchAnalysis:
    """Every judged decision of a match, in order, and each seat's accuracy (the mean of its
    judged decisions' accuracies; None for a seat with none)."""

    decisions: tuple[Judgement, ...]
    accuracy: tuple[float | None, ...]


Decision = tuple[Knowledge, tuple[Tile, End]]
"""A decision to judge: what its seat knew then, and the play it chose."""


def decisions(events: Iterable[Event], seats: Sequence[int] | None = None) -> list[Decision]:
    """The plays of `seats` (default: all) in a whole match's events that were decisions:
    each with what its seat knew then (the fold of its redacted stream up to it) and what it
    chose. Forced plays (the lead, a single legal play) and the plays a timeout made are
    left out. Raises ValueError when the events are not a match's."""
    return [(k, chosen) for _, k, chosen in decisions_at(events, seats)]


def decisions_at(
    events: Iterable[Event], seats: Sequence[int] | None = None
) -> list[tuple[int, Knowledge, tuple[Tile, End]]]:
    """`decisions`, each with the index of its play in `events`."""
    knowing: list[Knowledge] = []
    found: list[tuple[int, Knowledge, tuple[Tile, End]]] = []
    for index, event in enumerate(events):
        if not knowing:
            if not isinstance(event, MatchCreated):
                raise ValueError("a match's events start with its creation")
            knowing = [Knowledge(s, None) for s in range(event.seats)]
        if (
            isinstance(event, TilePlayed)
            and event.end is not None
            and not event.auto
            and (seats is None or event.seat in seats)
        ):
            k = knowing[event.seat]
            if k.state is not None and len(k.state.legal_plays(event.seat)) > 1:
                found.append((index, k, (event.tile, event.end)))
        knowing = [learn(k, redact_event(event, k.seat)) for k in knowing]
        if isinstance(event, MatchEnded):
            break
    return found


def summary(judged: Sequence[Judgement], seats: int) -> MatchAnalysis:
    """The match's analysis from its judged decisions, in order: each seat's accuracy."""
    by_seat: dict[int, list[float]] = {}
    for d in judged:
        if d.loss is not None:
            by_seat.setdefault(d.seat, []).append(accuracy(max(0.0, d.loss.mean)))
    return MatchAnalysis(
        tuple(judged),
        tuple(
            math.fsum(by_seat[s]) / len(by_seat[s]) if s in by_seat else None for s in range(seats)
        ),
    )


def analyse(
    events: Iterable[Event],
    model: WinModel,
    samples: int = 64,
    seed: str = "",
    seats: Sequence[int] | None = None,
) -> MatchAnalysis:
    """Judge every decision of `seats` (default: all) in a whole match's events from what
    its seat knew then (`decisions`, `judge`). Raises ValueError when the events are not a
    match's."""
    events = list(events)
    found = decisions(events, seats)
    count = next(e.seats for e in events if isinstance(e, MatchCreated))
    return summary([judge(k, model, chosen, samples, seed) for k, chosen in found], count)


__all__ = [
    "MARKS",
    "Decision",
    "Estimate",
    "Judgement",
    "MatchAnalysis",
    "Option",
    "WinModel",
    "accuracy",
    "analyse",
    "decisions",
    "decisions_at",
    "estimate",
    "judge",
    "mark_of",
    "simulated_hands",
    "summary",
]
