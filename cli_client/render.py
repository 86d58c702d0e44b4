"""A match as text, hand by hand, built by folding its events.

`tell(events)` folds a stream (whole, or redacted for a viewer: hidden tiles are None) one
event at a time and keeps the state after each moment worth showing: a deal, an action with
the points it scored, the end of a hand, the end of the match. `render_story` lays that out
as a listing, `render_frame` as one screen of `bergen-replay --step`, `story_json` as JSON.
Neither knows a rule: the line, the ends, the scores and every legal play come from the
folded states and the domain's views, and the words from the domain's `describe`; only the
layout, the names and the colours are chosen here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.text import Text

from bergen.domain.audit import replay_record
from bergen.domain.describe import (
    VOID_WORDS,
    Phrase,
    SeatRef,
    clock_words,
    hand_end_words,
    join,
    phrase,
    points_words,
    result_words,
    seat_number,
    side_number,
    step_kind,
)
from bergen.domain.errors import CorruptRecord
from bergen.domain.events import (
    Dealt,
    DealVoided,
    Event,
    HandEnded,
    MatchEnded,
    Passed,
    PointsScored,
    TileDrawn,
    TilePlayed,
    TimedOut,
)
from bergen.domain.rules import Rules
from bergen.domain.state import ENDED, SEATING, State, evolve
from bergen.domain.tiles import RESERVE, End, Tile
from bergen.domain.views import view
from bergen.domain.vocabulary import ACTIONS, HEADER_REASONS, Phase, StepKind

from .terminal import PLAIN, Look


@dataclass(slots=True)
class Scored:
    """Points as scored, and the side's total right after them."""

    event: PointsScored
    total: int


@dataclass(slots=True)
class Step:
    """One moment of a match worth showing, and the state right after it (after the points
    it caused, for a play)."""

    kind: StepKind
    hand: int
    event: Event
    state: State
    number: int = 0
    """The action's place in its hand, from 1 (as RECORD.md and the verifier count); 0 for
    a timeout, which is no action of the record."""
    void: bool = False
    """For a deal: void, dealt again."""
    points: list[Scored] = field(default_factory=list)
    laid_by: tuple[int, ...] = ()
    """The seat that laid each tile of `state.line`."""
    before: State | None = None
    """The state before the step (for a hand's end: before its last points)."""


@dataclass(slots=True)
class HandStory:
    number: int
    deals: list[Step] = field(default_factory=list)
    actions: list[Step] = field(default_factory=list)
    end: Step | None = None


@dataclass(slots=True)
class Story:
    """A match as far as its events go, as the viewer of those events knows it."""

    final: State
    hands: list[HandStory]
    steps: list[Step]
    result: MatchEnded | None

    def hand(self, number: int) -> HandStory | None:
        for h in self.hands:
            if h.number == number:
                return h
        return None


def tell(events: Sequence[Event]) -> Story:
    """Fold `events`, keeping the state after each deal, action, hand end and match end.

    Raises CorruptRecord for a stream that does not fold.
    """
    state: State | None = None
    hands: list[HandStory] = []
    steps: list[Step] = []
    current: HandStory | None = None
    last_action: Step | None = None
    laid_by: tuple[int, ...] = ()
    end_points: list[Scored] = []
    before_end: State | None = None
    result: MatchEnded | None = None
    for e in events:
        previous = state
        state = evolve(state, e)
        if isinstance(e, Dealt):
            if current is None or current.number != e.hand:
                current = HandStory(e.hand)
                hands.append(current)
            step = Step(StepKind.DEAL, e.hand, e, state, before=previous)
            current.deals.append(step)
            steps.append(step)
            last_action, laid_by, end_points, before_end = None, (), [], None
        elif isinstance(e, DealVoided):
            if current is not None and current.deals:
                current.deals[-1].void = True
        elif isinstance(e, TimedOut):
            if current is None:
                raise CorruptRecord("a timeout before any deal")
            step = Step(StepKind.TIMEOUT, e.hand, e, state, laid_by=laid_by, before=previous)
            current.actions.append(step)
            steps.append(step)
        elif isinstance(e, TilePlayed | TileDrawn | Passed):
            if current is None:
                raise CorruptRecord(f"{type(e).__name__} before any deal")
            if isinstance(e, TilePlayed):
                if e.end is None:
                    laid_by = (e.seat,)
                elif e.end is End.LEFT:
                    laid_by = (e.seat, *laid_by)
                else:
                    laid_by = (*laid_by, e.seat)
            kind = step_kind(e)
            assert kind is not None
            last_action = Step(
                kind,
                e.hand,
                e,
                state,
                number=sum(a.kind in ACTIONS for a in current.actions) + 1,
                laid_by=laid_by,
                before=previous,
            )
            current.actions.append(last_action)
            steps.append(last_action)
        elif isinstance(e, PointsScored):
            scored = Scored(e, state.scores[e.side])
            if e.reason in HEADER_REASONS and last_action is not None:
                last_action.points.append(scored)
                last_action.state = state
            else:
                if not end_points:
                    before_end = previous
                end_points.append(scored)
        elif isinstance(e, HandEnded):
            step = Step(
                StepKind.HAND_END,
                e.hand,
                e,
                state,
                points=end_points,
                laid_by=laid_by,
                before=before_end or previous,
            )
            if current is not None:
                current.end = step
            steps.append(step)
            end_points = []
        elif isinstance(e, MatchEnded):
            result = e
            steps.append(
                Step(StepKind.MATCH_END, state.hand, e, state, laid_by=laid_by, before=previous)
            )
        elif steps:
            # SeedRevealed and the like change nothing shown, but later steps see them.
            steps[-1].state = state
    if state is None:
        raise CorruptRecord("an empty stream holds no match")
    return Story(state, hands, steps, result)


# ----- words ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Names:
    """How seats and sides are called."""

    seats: tuple[str, ...]
    sides: tuple[tuple[int, ...], ...]
    partnerships: bool

    @staticmethod
    def of(state: State) -> Names:
        seats = tuple(
            p.name if p is not None and p.name else seat_number(i)
            for i, p in enumerate(state.players)
        )
        return Names(seats, state.sides, state.partnerships)

    @property
    def width(self) -> int:
        return min(max(len("boneyard"), *(len(n) for n in self.seats)), 16)

    def side_of(self, seat: int) -> int:
        for side, members in enumerate(self.sides):
            if seat in members:
                return side
        return seat

    def side(self, side: int) -> str:
        if side >= len(self.sides):
            return side_number(side)
        members = [self.seats[s] for s in self.sides[side] if s < len(self.seats)]
        if self.partnerships:
            return f"{side_number(side)} ({' & '.join(members)})"
        return members[0] if members else side_number(side)


def _words(text: Text, words: Phrase, names: Names, look: Look) -> Text:
    """Append the domain's words to `text`, each seat and side by name in its side's colour."""
    for w in words:
        if isinstance(w, SeatRef):
            _seat(text, names, look, w.seat)
        elif isinstance(w, str):
            text.append(w)
        else:
            _side(text, names, look, w.side)
    return text


def _seat(text: Text, names: Names, look: Look, seat: int, pad: bool = False) -> None:
    name = names.seats[seat] if seat < len(names.seats) else seat_number(seat)
    if pad:
        name = name[: names.width].ljust(names.width)
    text.append(name, look.side_style(names.side_of(seat)))


def _side(text: Text, names: Names, look: Look, side: int) -> None:
    text.append(names.side(side), look.side_style(side))


def _tiles(tiles: Sequence[Tile | None], look: Look) -> Text:
    """Known tiles as `a-b`; unknown ones as a count."""
    known = [str(t) for t in tiles if t is not None]
    hidden = sum(t is None for t in tiles)
    text = Text(" ".join(known))
    if hidden:
        if known:
            text.append(" + ")
        text.append(look.hidden(hidden), look.style("dim"))
    if not tiles:
        text.append("none", look.style("dim"))
    return text


def line_text(
    line: Sequence[tuple[int, int]],
    look: Look = PLAIN,
    laid_by: Sequence[int] = (),
    names: Names | None = None,
    fresh: int | None = None,
) -> Text:
    """The line as laid, left to right; each tile in the colour of the side that laid it,
    the tile at index `fresh` (the one just played) underlined."""
    text = Text()
    for i, (a, b) in enumerate(line):
        if look.unicode and i:
            text.append(" ")
        style = ""
        if names is not None and i < len(laid_by):
            style = look.side_style(names.side_of(laid_by[i]))
        if i == fresh and look.colour:
            style = f"{style} underline".strip()
        text.append(look.line_tile(a, b), style)
    return text


def points_text(scored: Scored, names: Names, look: Look) -> Text:
    """`+2 double header (3 cut to 2 near the target) → bob 11`."""
    p = scored.event
    words = points_words(p)
    cut = words.find(" (")
    text = Text()
    text.append(words if cut < 0 else words[:cut], look.style("bold green"))
    if cut >= 0:
        text.append(words[cut:], look.style("yellow"))
    text.append(" → ")
    _side(text, names, look, p.side)
    text.append(f" {scored.total}")
    return text


def clock_rules_words(rules: Rules) -> str:
    """`clock 60+2 (a timeout plays for the seat; 3 in a row forfeit)`; empty without a
    clock."""
    if not rules.clocked:
        return ""
    if rules.on_timeout == "forfeit":
        what = "a timeout forfeits"
    else:
        what = f"a timeout plays for the seat; {rules.timeouts_to_forfeit} in a row forfeit"
    return f"clock {rules.clock_initial}+{rules.clock_increment} ({what})"


def clock_text(ms: int, look: Look) -> Text:
    """A clock's time left: `⏱ 8.5 s`, plain `clock 8.5 s`."""
    return Text(f"{'⏱ ' if look.unicode else 'clock '}{clock_words(ms)}", look.style("dim"))


def timeout_text(step: Step, names: Names, look: Look) -> Text:
    """`ann runs out of time (12.0 s into the match)`, marked."""
    text = Text("timeout: ", look.style("bold red"))
    return _words(text, phrase(step.event), names, look)


def action_text(step: Step, names: Names, look: Look) -> Text:
    """`bob plays 3-5 left`, `ann draws a tile`, ... without the number or the line."""
    return _words(Text(), phrase(step.event), names, look)


def hand_end_text(step: Step, names: Names, look: Look) -> list[Text]:
    """How the hand ended and what it scored."""
    e = step.event
    assert isinstance(e, HandEnded)
    out: list[Text] = [_words(Text(), hand_end_words(e), names, look)]
    for scored in step.points:
        out.append(Text("  ").append_text(points_text(scored, names, look)))
    left = step.state.hands
    if left and any(left):
        rest = Text("left in hands: ")
        for seat, tiles in enumerate(left):
            if seat:
                rest.append(" · ")
            _seat(rest, names, look, seat)
            rest.append(" ")
            rest.append_text(_tiles(tiles, look))
        out.append(rest)
    return out


def scores_text(scores: Sequence[int], names: Names, look: Look) -> Text:
    text = Text()
    for side, score in enumerate(scores):
        if side:
            text.append(" · ")
        _side(text, names, look, side)
        text.append(f" {score}", look.style("bold"))
    return text


def result_text(result: MatchEnded, names: Names, look: Look) -> Text:
    text = _words(Text(style=look.style("bold")), result_words(result), names, look)
    text.append(": ", "")
    text.append_text(scores_text(result.scores, names, look))
    return text


def status_text(story: Story, names: Names, look: Look) -> Text:
    """Where the match stands: its result, or who is to play."""
    s = story.final
    if story.result is not None:
        return Text("result: ", look.style("bold")).append_text(
            result_text(story.result, names, look)
        )
    if s.phase == SEATING:
        taken = sum(p is not None for p in s.players)
        return Text(f"waiting for players: {taken} of {s.seats} seats taken")
    text = Text(f"live, hand {s.hand}: ", look.style("bold"))
    if s.turn is not None:
        _seat(text, names, look, s.turn)
        text.append(" to play; ")
    text.append_text(scores_text(s.scores, names, look))
    return text


def header_text(story: Story, names: Names, look: Look) -> list[Text]:
    s = story.final
    rules = s.rules
    title = Text("match ", look.style("bold"))
    title.append(s.match_id, look.style("bold"))
    if s.name:
        title.append(f"  “{s.name}”")
    title.append(
        f"  {rules.preset}, target {rules.target}, {s.seats} seats"
        f"{' in partnerships' if s.partnerships else ''}"
    )
    if rules.clocked:
        title.append(f", {clock_rules_words(rules)}")
    seats = Text("seats: ")
    for seat in range(s.seats):
        if seat:
            seats.append(", ")
        seats.append(f"{seat + 1} ")
        _seat(seats, names, look, seat)
    if s.partnerships:
        seats.append(f"; sides: {names.side(0)}, {names.side(1)}")
    return [title, seats, status_text(story, names, look)]


# ----- the listing ------------------------------------------------------------------------


def render_story(
    story: Story, look: Look = PLAIN, only_hand: int | None = None, note: str = ""
) -> list[Text]:
    """The match as lines of text: the header, then each hand (or only `only_hand`)."""
    names = Names.of(story.final)
    out = header_text(story, names, look)
    if note:
        out.append(Text(note, look.style("dim")))
    for hand in story.hands:
        if only_hand is not None and hand.number != only_hand:
            continue
        out.append(Text())
        last = hand is story.hands[-1]
        out.extend(_hand_lines(hand, names, look, ended=last and story.result is not None))
    if only_hand is None and story.result is not None and story.hands:
        out.append(Text())
        out.append(Text("result: ", look.style("bold")).append_text(
            result_text(story.result, names, look)
        ))  # fmt: skip
    return out


def _hand_lines(hand: HandStory, names: Names, look: Look, ended: bool = False) -> list[Text]:
    out = [Text(f"hand {hand.number}", look.style("bold underline"))]
    for deal in hand.deals:
        e = deal.event
        assert isinstance(e, Dealt)
        head = Text(f"  deal {e.attempt}", look.style("bold"))
        if deal.void:
            head.append(f": {VOID_WORDS}", look.style("yellow"))
        out.append(head)
        for seat, tiles in enumerate(e.hands):
            row = Text("    ")
            _seat(row, names, look, seat, pad=True)
            row.append("  ")
            row.append_text(_tiles(tiles, look))
            out.append(row)
        out.append(Text("    ").append_text(_boneyard(e.boneyard, names, look)))
    for step in hand.actions:
        if step.kind == StepKind.TIMEOUT:
            out.append(Text("       ").append_text(timeout_text(step, names, look)))
            continue
        row = Text(f"  {step.number:>3}  ")
        words = action_text(step, names, look)
        row.append_text(words)
        if step.kind in (StepKind.LEAD, StepKind.PLAY):
            # A clocked match's plays may say "automatically": room for it.
            wide = names.width + (33 if step.state.clocked else 19)
            row.append(" " * max(1, wide - len(words.plain)))
            fresh = 0 if isinstance(step.event, TilePlayed) and step.event.end is End.LEFT else -1
            row.append_text(
                line_text(step.state.line, look, step.laid_by, names, fresh % len(step.state.line))
            )
            if isinstance(step.event, TilePlayed) and step.event.clock_ms is not None:
                row.append("   ").append_text(clock_text(step.event.clock_ms, look))
        elif step.kind == StepKind.DRAW:
            row.append(f"  ({step.state.drawable} left to draw)", look.style("dim"))
        out.append(row)
        for scored in step.points:
            out.append(Text("         ").append_text(points_text(scored, names, look)))
    if hand.end is not None:
        for t in hand_end_text(hand.end, names, look):
            out.append(Text("  ").append_text(t))
        e = hand.end.event
        assert isinstance(e, HandEnded)
        out.append(
            Text(f"  scores after hand {hand.number}: ").append_text(
                scores_text(e.scores, names, look)
            )
        )
    elif hand.actions or hand.deals:
        last = (hand.actions or hand.deals)[-1].state
        if ended or last.phase == ENDED:
            out.append(Text("  the match ended during this hand", look.style("dim")))
        elif last.turn is not None:
            row = Text("  in play: ")
            _seat(row, names, look, last.turn)
            row.append(" to play")
            out.append(row)
    return out


def _boneyard(boneyard: Sequence[Tile | None], names: Names, look: Look) -> Text:
    text = Text("boneyard".ljust(names.width), look.style("dim"))
    text.append("  ")
    if boneyard and all(t is not None for t in boneyard):
        drawable = [str(t) for t in boneyard[:-RESERVE]]
        reserve = [str(t) for t in boneyard[-RESERVE:]]
        text.append(" ".join(drawable))
        text.append("  reserve ", look.style("dim"))
        text.append(" ".join(reserve))
    else:
        text.append_text(_tiles(boneyard, look))
    return text


# ----- one screen of --step ---------------------------------------------------------------


def render_frame(
    story: Story, index: int, steps: Sequence[Step], look: Look = PLAIN, note: str = ""
) -> list[Text]:
    """Step `index` of `steps` as one screen: the hands as known then, the line, the last
    action and its points, and the scores."""
    step = steps[index]
    s = step.state
    names = Names.of(story.final)
    out: list[Text] = []
    title = Text(f"match {s.match_id}", look.style("bold"))
    title.append(f"  hand {step.hand}, deal {s.attempt}  ·  step {index + 1} of {len(steps)}")
    out.append(title)
    if note:
        out.append(Text(note, look.style("dim")))
    out.append(Text("scores: ").append_text(scores_text(s.scores, names, look)).append(
        f"   (target {s.rules.target})"
    ))  # fmt: skip
    out.append(Text())
    shown = [_tiles(tiles, look) for tiles in s.hands]
    width = max((t.cell_len for t in shown), default=0)
    for seat, tiles in enumerate(shown):
        row = Text("  ")
        _seat(row, names, look, seat, pad=True)
        row.append("  ")
        row.append_text(tiles)
        if s.clocked:
            # Each seat's time left as of this step, in one column.
            row.append(" " * (width - tiles.cell_len + 3))
            row.append_text(clock_text(s.clocks[seat], look))
        if s.turn == seat and not s.hand_over:
            row.append("   ◀ to play" if look.unicode else "   <- to play", look.style("bold"))
        out.append(row)
    out.append(
        Text("  ")
        .append_text(_boneyard(s.boneyard, names, look))
        .append(f"   ({s.drawable} left to draw)", look.style("dim"))
    )
    out.append(Text())
    fresh = None
    if step.kind in (StepKind.LEAD, StepKind.PLAY) and isinstance(step.event, TilePlayed):
        fresh = 0 if step.event.end is End.LEFT else len(s.line) - 1
    if s.line:
        out.append(
            Text("  line  ").append_text(line_text(s.line, look, step.laid_by, names, fresh))
        )
        if s.ends is not None:
            left, right, ld, rd = s.ends
            out.append(Text(f"  ends  {left}{'*' if ld else ''} | {right}{'*' if rd else ''}", ""))
    else:
        out.append(Text("  line  (empty)", look.style("dim")))
    out.append(Text())
    out.extend(_what_happened(step, names, look))
    hint = _options(s, names, look)
    if hint is not None:
        out.append(hint)
    out.append(Text())
    keys = (
        "→ n space: forward   ← p: back   ] [: next/previous hand   g G: first/last   q: quit"
        if look.unicode
        else "right n space: forward   left p: back   ] [: next/previous hand   "
        "g G: first/last   q: quit"
    )
    out.append(Text(keys, look.style("dim")))
    return out


def _what_happened(step: Step, names: Names, look: Look) -> list[Text]:
    e = step.event
    if step.kind == StepKind.DEAL:
        text = _words(Text(style=look.style("bold")), phrase(e), names, look)
        if step.void:
            text.append(f": {VOID_WORDS}", look.style("yellow"))
        return [text]
    if step.kind == StepKind.TIMEOUT:
        return [Text("     ").append_text(timeout_text(step, names, look))]
    if step.kind in ACTIONS:
        text = Text(f"{step.number:>3}  ").append_text(action_text(step, names, look))
        out = [text]
        out.extend(Text("     ").append_text(points_text(p, names, look)) for p in step.points)
        return out
    if step.kind == StepKind.HAND_END:
        out = [Text(f"end of hand {step.hand}: ", look.style("bold"))]
        lines = hand_end_text(step, names, look)
        out[0].append_text(lines[0])
        out.extend(Text("  ").append_text(t) for t in lines[1:])
        return out
    assert isinstance(e, MatchEnded)
    return [Text("match over: ", look.style("bold")).append_text(result_text(e, names, look))]


def _options(s: State, names: Names, look: Look) -> Text | None:
    """The legal plays of the seat to play, when its tiles are known (from its view)."""
    if s.turn is None or s.hand_over or s.phase != Phase.PLAYING:
        return None
    if any(t is None for t in s.hands[s.turn]):
        return None
    plays = view(s, s.turn).legal_plays
    text = Text("     ")
    _seat(text, names, look, s.turn)
    if not plays:
        text.append(" has nothing that fits")
        return text
    text.append(" may play ")
    text.append(", ".join(f"{t} {end.value}" for t, end in plays))
    return text


# ----- JSON -------------------------------------------------------------------------------

STORY_FORMAT = "bergen-replay/1"


def story_json(story: Story, only_hand: int | None = None, note: str = "") -> dict[str, Any]:
    """The story as JSON (the README's `bergen-replay --json`): the match, then each step
    (of `only_hand`, or all) with its words, its seat and tile, the points it scored, the
    line and the scores after it; hidden tiles are null."""
    s = story.final
    names = Names.of(s)
    steps = [_step_json(step, names) for step in story.steps]
    result = story.result
    return {
        "format": STORY_FORMAT,
        "match_id": s.match_id,
        "name": s.name,
        "rules": s.rules.as_dict(),
        "seats": [p.name if p is not None else None for p in s.players],
        "sides": [list(side) for side in s.sides],
        "phase": str(s.phase),
        "note": note,
        "steps": [
            j
            for j, step in zip(steps, story.steps, strict=True)
            if only_hand is None or step.hand == only_hand
        ],
        "result": result_json(result),
    }


def result_json(result: MatchEnded | None) -> dict[str, Any] | None:
    """How a match ended, as every command's --json gives it: seats and sides from 0, as
    the API counts; None before the end."""
    if result is None:
        return None
    return {
        "reason": str(result.reason),
        "winner_side": result.winner_side,
        "scores": list(result.scores),
        "resigned_seat": result.resigned_seat,
        "note": result.note,
        "forfeited_side": result.forfeited_side,
        "cause": None if result.cause is None else str(result.cause),
        "at_ms": result.at_ms,
    }


def _tile_json(t: Tile | None) -> str | None:
    return None if t is None else str(t)


def _step_json(step: Step, names: Names) -> dict[str, Any]:
    e = step.event
    seat = getattr(e, "seat", None)
    tile = getattr(e, "tile", None)
    end = getattr(e, "end", None)
    out: dict[str, Any] = {
        "kind": str(step.kind),
        "hand": step.hand,
        "number": step.number if step.kind in ACTIONS else None,
        "text": join(phrase(e), lambda n: names.seats[n], names.side),
        "seat": seat if step.kind in ACTIONS or step.kind == StepKind.TIMEOUT else None,
        "tile": _tile_json(tile) if step.kind in ACTIONS else None,
        "end": end.value if isinstance(end, End) else None,
        "points": [
            {
                "side": p.event.side,
                "points": p.event.points,
                "base": p.event.base,
                "reason": str(p.event.reason),
                "text": points_words(p.event),
                "total": p.total,
            }
            for p in step.points
        ],
        "line": [[a, b] for a, b in step.state.line],
        "scores": list(step.state.scores),
    }
    at_ms = getattr(e, "at_ms", None)
    if at_ms is not None and step.kind != StepKind.MATCH_END:
        # A clocked match's times: the action's, and after a play the seat's time left.
        out["at_ms"] = at_ms
        if isinstance(e, TilePlayed):
            out["clock_ms"] = e.clock_ms
            out["auto"] = e.auto
    if isinstance(e, Dealt):
        out["attempt"] = e.attempt
        out["void"] = step.void
        out["hands"] = [[_tile_json(t) for t in h] for h in e.hands]
        out["boneyard"] = [_tile_json(t) for t in e.boneyard]
    return out


# ----- records ----------------------------------------------------------------------------


def render_record(record: dict[str, Any]) -> str:
    """A RECORD.md record as plain text, hand by hand (the record replayed through the
    rules, then told as `bergen-replay` tells a match). Raises CorruptRecord for a record
    that does not check."""
    verdict = replay_record(record)
    if not verdict.ok:
        raise CorruptRecord(verdict.line())
    return "\n".join(t.plain for t in render_story(tell(verdict.events)))
