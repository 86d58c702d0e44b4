"""Plain-text rendering of a match record, hand by hand."""

from __future__ import annotations

from typing import Any

from bergen.domain.scoring import place
from bergen.domain.tiles import Tile


def line_text(line: list[tuple[int, int]]) -> str:
    return "".join(f"[{a}|{b}]" for a, b in line)


def render_record(record: dict[str, Any]) -> str:
    """The record as text: each deal, each action with the line after it, each result."""
    names = [s["name"] for s in record["seats"]]
    out: list[str] = [
        f"match {record['match_id']}  ({record['rules']['preset']}, target "
        f"{record['rules']['target']})",
        "seats: " + ", ".join(f"{i}:{n}" for i, n in enumerate(names)),
    ]
    for hand in record["hands"]:
        out.append(f"\nhand {hand['number']}")
        for deal in hand["deals"]:
            tag = " (void: no double, dealt again)" if deal["void"] else ""
            out.append(f"  deal {deal['attempt']}{tag}")
            for seat, tiles in enumerate(deal["hands"]):
                out.append(f"    {names[seat]:>10}: {' '.join(tiles)}")
            out.append(f"    {'boneyard':>10}: {' '.join(deal['boneyard'])}")
        line: list[tuple[int, int]] = []
        ends: tuple[int, int, bool, bool] | None = None
        for action in hand["actions"]:
            who = names[action["seat"]]
            if action["act"] == "play":
                tile = Tile.parse(action["tile"])
                at_left = action["end"] == "left"
                new = place(ends, tile, at_left)
                if ends is None:
                    line = [(tile.low, tile.high)]
                elif at_left:
                    line.insert(0, (new[0], ends[0]))
                else:
                    line.append((ends[1], new[1]))
                ends = new
                where = "leads" if action["end"] is None else f"plays {action['end']:>5}"
                pts = f" +{action['points']}" if action["points"] else ""
                out.append(f"  {who:>10} {where} {action['tile']}{pts:4}  {line_text(line)}")
            elif action["act"] == "draw":
                out.append(f"  {who:>10} draws {action['tile']}")
            else:
                out.append(f"  {who:>10} passes")
        end = hand.get("end")
        if end:
            won = "nobody" if end["side"] is None else f"side {end['side']}"
            out.append(f"  hand ends: {end['reason']}, {won} +{end['points']}")
        out.append(f"  scores: {hand['scores']}")
    result = record["result"]
    winner = result["winner_side"]
    out.append(
        f"\nresult: {result['reason']}, "
        f"{'no winner' if winner is None else f'side {winner} wins'}, scores {result['scores']}"
    )
    return "\n".join(out)
