"""`bergen play` draws the line as it lies, each tile turned as laid, with the renderer
`bergen-replay` uses: plays on the left turn the tile so that its matching number touches the
line (1-3 played left of 1-1 reads `[3|1][1|1]`, not `[1|3][1|1]`)."""

from __future__ import annotations

import io
import itertools
import re

from rich.console import Console

from bergen.cli_client import terminal
from bergen.cli_client.narrate import Narrator, render_turn
from bergen.cli_client.render import render_frame, tell
from bergen.domain.commands import TakeSeat

from . import deals
from .support import Game, rules_for

LINE = re.compile(r"^line: (\S+)   ends (\d)\|(\d)$")


def _line_shown(game: Game, seat: int) -> tuple[str, str]:
    """The line and its ends as `bergen play` shows them to `seat` at its turn."""
    console = Console(file=io.StringIO(), highlight=False)
    lines = render_turn(game.s, seat, Narrator(console, seat, game.s))
    found = [m for m in (LINE.match(Console().render_str(x).plain) for x in lines) if m]
    assert len(found) == 1, lines
    return found[0].group(1), f"{found[0].group(2)}|{found[0].group(3)}"


def _line_replayed(game: Game) -> str:
    """The line of the replay's last step, as `bergen-replay --step` draws it."""
    story = tell(game.events)
    frame = render_frame(story, len(story.steps) - 1, story.steps)
    return next(t.plain.split("line  ", 1)[1] for t in frame if "line  " in t.plain)


def test_plays_at_both_ends_are_drawn_as_they_lie(crafted_deals) -> None:
    crafted_deals({(1, 1): deals.CASE3})
    g = Game(rules=rules_for(2)).start()  # seat 0 leads 1-1
    expected = [
        (1, "1-3", "left", "[3|1][1|1]", "3|1"),
        (0, "1-5", "right", "[3|1][1|1][1|5]", "3|5"),
        (1, "3-5", "left", "[5|3][3|1][1|1][1|5]", "5|5"),
    ]
    for seat, tile, at, line, ends in expected:
        g.play(seat, tile, at)
        to_play = g.s.turn
        assert to_play is not None
        shown, shown_ends = _line_shown(g, to_play)
        assert (shown, shown_ends) == (line, ends)
        assert shown == _line_replayed(g)


def test_every_tile_touches_its_neighbour_along_a_whole_hand() -> None:
    g = Game(rules=rules_for(2)).start()
    hand = g.s.hand
    while g.s.hand == hand and g.s.turn is not None and not g.s.hand_over:
        seat = g.s.turn
        plays = g.s.legal_plays(seat)
        if not plays:
            break
        tile, end = plays[-1]  # the right end when a tile fits both: both ends get tiles
        g.play(seat, str(tile), end.value)
        if g.s.hand != hand or g.s.hand_over or g.s.turn is None:
            break
        shown, ends = _line_shown(g, g.s.turn)
        pairs = re.findall(r"\[(\d)\|(\d)\]", shown)
        assert all(a[1] == b[0] for a, b in itertools.pairwise(pairs)), shown
        assert ends == f"{pairs[0][0]}|{pairs[-1][1]}"
        assert shown == _line_replayed(g)


def test_a_player_named_you_is_not_told_it_twice() -> None:
    def seated(name: str) -> Narrator:
        g = Game(rules=rules_for(2)).create()
        g.do(TakeSeat(name=name, client_seed="", seat=0))
        g.do(TakeSeat(name="bob", client_seed="", seat=1))
        return Narrator(Console(file=io.StringIO()), 0, g.s)

    assert seated("you").who(0) == "seat 1 (you)"
    assert seated("You").who(1) == "seat 2 (bob)"
    assert seated("ann").who(0) == "seat 1 (ann, you)"


def test_a_watcher_catching_up_is_shown_the_line_under_every_play(crafted_deals) -> None:
    """`bergen watch` that receives several plays at once (it started late, or the machine
    was busy) still prints the line as it lay after each of them, not only the last."""
    crafted_deals({(1, 1): deals.CASE3})
    g = Game(rules=rules_for(2)).start()
    for seat, tile, at in [(1, "1-3", "left"), (0, "1-5", "right"), (1, "3-5", "left")]:
        g.play(seat, tile, at)
    printed: list[str] = []
    narrator = Narrator(Console(file=io.StringIO()), None, out=printed.append, lines=terminal.PLAIN)
    for event in g.events:
        narrator.feed(event)
    narrator.flush()
    plain = [Console().render_str(x).plain for x in printed]
    shown = [m.group(1) for m in (LINE.match(p.strip()) for p in plain) if m]
    assert shown == ["[1|1]", "[3|1][1|1]", "[3|1][1|1][1|5]", "[5|3][3|1][1|1][1|5]"]
    # Each line comes right under the play it follows.
    for i, p in enumerate(plain):
        if LINE.match(p.strip()):
            assert " plays " in plain[i - 1] or " leads " in plain[i - 1], plain[i - 1]


def test_a_player_is_not_shown_the_line_under_each_play_twice() -> None:
    """Without `lines` (how `bergen play` narrates: the line comes with its turn), no line."""
    g = Game(rules=rules_for(2)).start()
    printed: list[str] = []
    narrator = Narrator(Console(file=io.StringIO()), 0, out=printed.append)
    for event in g.events:
        narrator.feed(event)
    narrator.flush()
    assert printed and not any("line: " in p for p in printed)
