"""A tournament as people read it in the terminal: what `bergen tournament show` draws and
what `bergen tournament watch` says of each change, both from the view the server answers.

Every entrant is named with its number (`Ann (#3)`; `Ann & Bob (#3)` for a pair). The
standings rank the entrants still in the tournament; a withdrawn entrant is listed after
them, unranked, with the round it withdrew after and who withdrew it (its figures are the
record's: TOURNAMENT.md counts its results and its forfeits). The record's own ranks, every
entrant included, are in `show --json`. Sides are numbered from 1.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence

from bergen.v1 import bergen_pb2 as pb

from .usage import side_label

PHASES = {
    pb.TOURNAMENT_PHASE_REGISTRATION: "registration",
    pb.TOURNAMENT_PHASE_REVEAL: "revealing seeds",
    pb.TOURNAMENT_PHASE_RUNNING: "running",
    pb.TOURNAMENT_PHASE_ENDED: "ended",
}
REASONS = {
    pb.MATCH_END_REASON_TARGET: "target",
    pb.MATCH_END_REASON_ABANDONED: "abandoned",
    pb.MATCH_END_REASON_FORFEIT: "forfeit",
}
WHO = {
    pb.ACTOR_ENTRANT: "the entrant",
    pb.ACTOR_ORGANISER: "the organiser",
    pb.ACTOR_SERVER: "the server",
}
GRID_MAX_ENTRANTS = 24
"""Past this many entrants the entrant-by-entrant crosstable is left out: too wide to read."""


# ----- names and marks -------------------------------------------------------------------


def names_of(view: pb.TournamentView) -> dict[int, str]:
    """Each entrant's players, as `Ann & Bob`."""
    return {e.entrant: " & ".join(e.players) for e in view.entrants}


def label(view: pb.TournamentView, entrant: int, names: dict[int, str] | None = None) -> str:
    """`Ann (#3)`: the entrant's players and its number."""
    name = (names if names is not None else names_of(view)).get(entrant, "?")
    return f"{name} (#{entrant})"


def withdrawn(view: pb.TournamentView) -> dict[int, pb.TournamentEntrant]:
    """The withdrawn entrants, by number."""
    return {e.entrant: e for e in view.entrants if e.HasField("withdrawn_after_round")}


def withdrawal_text(e: pb.TournamentEntrant) -> str:
    """`withdrawn after round 2 by the organiser`, `withdrew before round 1`."""
    after = e.withdrawn_after_round
    when = "before round 1" if after == 0 else f"after round {after}"
    by = WHO.get(e.withdrawn_by)
    if e.withdrawn_by == pb.ACTOR_ENTRANT:
        return f"withdrew {when}"
    if by is None:
        return f"withdrawn {when}"
    return f"withdrawn {when} by {by}" + (" (no seed revealed)" if by == "the server" else "")


def reveal_line(view: pb.TournamentView, now_ms: int | None = None) -> str | None:
    """While the entrants reveal their seeds: how many have, and when round 1 is paired at
    the latest (`revealed 3 of 4 seeds; round 1 at the latest in 42 s`); None otherwise."""
    if view.phase != pb.TOURNAMENT_PHASE_REVEAL:
        return None
    still = [e for e in view.entrants if not e.HasField("withdrawn_after_round")]
    shown = sum(e.revealed for e in still)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    left = max(0, (view.reveal_deadline_ms - now + 999) // 1000)
    return (
        f"revealed {shown} of {len(still)} seeds; round 1 when all have, or in {left} s at the "
        "latest (entrants still silent then are withdrawn)"
    )


def _quoted(note: str) -> str:
    return f': "{note}"' if note else ""


def intervention_text(view: pb.TournamentView, i: pb.TournamentIntervention) -> str:
    """One intervention as a sentence: who did what, where, and why."""
    by = WHO.get(i.by, "someone")
    names = names_of(view)
    where = f"round {i.round}" if i.round else "before round 1"
    if i.action == pb.INTERVENTION_ACTION_WITHDRAW and i.round:
        where = f"after round {i.round}"
    if i.HasField("table"):
        where += f" table {i.table}"
    entrant = label(view, i.entrant, names) if i.HasField("entrant") else "?"
    if i.action == pb.INTERVENTION_ACTION_WITHDRAW:
        what = f"{by} withdrew {entrant}"
    elif i.action == pb.INTERVENTION_ACTION_ABANDON:
        what = f"{by} abandoned the match"
    elif i.action == pb.INTERVENTION_ACTION_FORFEIT:
        side = _side_of(view, i.round, i.table, i.entrant)
        what = f"{by} forfeited {entrant}" + (f", {side_label(side)}" if side is not None else "")
    elif i.action == pb.INTERVENTION_ACTION_START_ROUND:
        what = f"{by} started the round by hand"
    elif i.action == pb.INTERVENTION_ACTION_CANCEL:
        return f"{by} cancelled the tournament{_quoted(i.note)}"
    else:
        what = f"{by} intervened"
    return f"{where}: {what}{_quoted(i.note)}"


def _side_of(view: pb.TournamentView, rnd: int, table: int, entrant: int) -> int | None:
    for r in view.rounds:
        if r.round == rnd:
            for t in r.tables:
                if t.table == table and entrant in t.sides:
                    return list(t.sides).index(entrant)
    return None


def ranked(view: pb.TournamentView) -> list[tuple[int, pb.TournamentStanding]]:
    """The standings of the entrants still in, each with its place among them."""
    gone = withdrawn(view)
    active = [s for s in view.standings if s.entrant not in gone]
    return list(enumerate(active, start=1))


def _figures(s: pb.TournamentStanding) -> tuple[str, int, str, int]:
    return s.match_points, s.margin, s.buchholz, s.wins


def winner_line(view: pb.TournamentView) -> str | None:
    """Who won an ended tournament: the first of the standings among the entrants still in,
    or the first place they share (equal in every figure, only the seeding rank between
    them); that it was cancelled; None before the end."""
    if view.phase != pb.TOURNAMENT_PHASE_ENDED:
        return None
    if view.cancelled:
        note = next(
            (i.note for i in view.interventions if i.action == pb.INTERVENTION_ACTION_CANCEL), ""
        )
        return "cancelled before its start" + _quoted(note)
    places = ranked(view)
    if not places:
        return "ended with nobody ranked"
    first = places[0][1]
    tied = [s for _, s in places if _figures(s) == _figures(first)]
    names = names_of(view)
    points = f"{first.match_points} match point{'' if first.match_points == '1' else 's'}"
    if len(tied) == 1:
        return f"winner: {label(view, first.entrant, names)}, {points}"
    who = ", ".join(label(view, s.entrant, names) for s in tied[:-1])
    return (
        f"shared first place: {who} and {label(view, tied[-1].entrant, names)}, "
        f"{points} each (equal in every figure)"
    )


# ----- show ------------------------------------------------------------------------------


def table_text(rows: Sequence[Sequence[str]], right: Sequence[bool]) -> list[str]:
    """Rows (the first the heading) in aligned columns; `right` aligns a column right."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [
            cell.rjust(w) if r else cell.ljust(w)
            for cell, w, r in zip(row, widths, right, strict=True)
        ]
        lines.append("  ".join(cells).rstrip())
    return lines


def _order(view: pb.TournamentView) -> list[int]:
    """The entrants as the standings present them: those still in, then the withdrawn."""
    gone = withdrawn(view)
    if not view.standings:
        return [e.entrant for e in view.entrants]
    return [s.entrant for _, s in ranked(view)] + [
        s.entrant for s in view.standings if s.entrant in gone
    ]


def standings_lines(view: pb.TournamentView, mark: int | None = None) -> list[str]:
    """Place among the entrants still in, then the withdrawn ones unranked with their mark;
    with `mark`, that entrant's row starred (a player's own) and every other indented."""
    names = names_of(view)
    gone = withdrawn(view)

    def row(place: str, s: pb.TournamentStanding) -> list[str]:
        return [place, str(s.entrant), names.get(s.entrant, "?"), s.match_points,
                f"{s.margin:+d}", s.buchholz, str(s.wins)]  # fmt: skip

    active = ranked(view)
    left = [s for s in view.standings if s.entrant in gone]
    rows = [["Rank", "Entrant", "Players", "MP", "Margin", "Buchholz", "Wins"]]
    rows += [row(str(place), s) for place, s in active] + [row("-", s) for s in left]
    lines = table_text(rows, [True, True, False, True, True, True, True])
    out = lines[: 1 + len(active)]
    if left:
        out += ["", "Withdrawn (not ranked)"]
        marks = [withdrawal_text(gone[s.entrant]) for s in left]
        rest = lines[1 + len(active) :]
        out += [f"{line}  {why}" for line, why in zip(rest, marks, strict=True)]
    if mark is None:
        return out
    order = _order(view)
    starred = 1 + order.index(mark) if mark in order else -1
    if starred > len(active):
        starred += 2  # past the blank line and the heading of the withdrawn
    return [("* " if i == starred else "  ") + line for i, line in enumerate(out)]


def crosstable_cell(entrant: int, rnd: pb.TournamentRound) -> str:
    """What `entrant` did in round `rnd`: `bye`, `-` (not paired), or its opponents and its
    match points (`v3 1`, `v2,4 1/2`), `*` while its match is in play, `ff` for a forfeit."""
    if entrant in rnd.byes:
        return "bye"
    for t in rnd.tables:
        if entrant not in t.sides:
            continue
        side = list(t.sides).index(entrant)
        opponents = ",".join(str(e) for e in t.sides if e != entrant)
        if not t.HasField("result"):
            return f"v{opponents} *"
        r = t.result
        ff = " ff" if r.HasField("forfeited_side") and r.forfeited_side == side else ""
        return f"v{opponents} {r.match_points[side]}{ff}"
    return "-"


def _entrant_cell(entrant: int, gone: dict[int, pb.TournamentEntrant]) -> str:
    return f"{entrant} (withdrawn)" if entrant in gone else str(entrant)


def crosstable_lines(view: pb.TournamentView) -> list[str]:
    """Round by round: a row per entrant in standings order, a column per round."""
    gone = withdrawn(view)
    heading = ["Entrant", *(f"R{r.round}" for r in view.rounds), "MP"]
    points = {s.entrant: s.match_points for s in view.standings}
    rows: list[list[str]] = [heading]
    for e in _order(view):
        cells = [crosstable_cell(e, r) for r in view.rounds]
        rows.append([_entrant_cell(e, gone), *cells, points.get(e, "")])
    return table_text(rows, [True, *(False for _ in view.rounds), True])


def grid_lines(view: pb.TournamentView) -> list[str]:
    """Entrant by entrant, at two-sided tables: a row and a column per entrant in standings
    order, numbered by that order; a cell holds the row's match points against the column's
    entrant in each of their meetings, in round order (`1`, `1/2 0`), `*` for a meeting in
    play, `.` before they meet, `x` on the diagonal. Empty at tables of more than two sides
    or past GRID_MAX_ENTRANTS entrants."""
    two_sided = view.settings.seats == 2 or (
        view.settings.partnerships and view.settings.seats == 4
    )
    order = _order(view)
    if not two_sided or not order or len(order) > GRID_MAX_ENTRANTS:
        return []
    gone = withdrawn(view)
    met: dict[tuple[int, int], list[str]] = {}
    for rnd in view.rounds:
        for t in rnd.tables:
            if len(t.sides) != 2:
                continue
            for side, (e, other) in enumerate((tuple(t.sides), tuple(reversed(t.sides)))):
                cell = t.result.match_points[side] if t.HasField("result") else "*"
                met.setdefault((e, other), []).append(cell)
    number = {e: i + 1 for i, e in enumerate(order)}
    points = {s.entrant: s.match_points for s in view.standings}
    rows: list[list[str]] = [["#", "Entrant", *(str(number[e]) for e in order), "MP"]]
    for e in order:
        cells = ["x" if e == other else " ".join(met.get((e, other), [])) or "." for other in order]
        rows.append([str(number[e]), _entrant_cell(e, gone), *cells, points.get(e, "")])
    return table_text(rows, [True, True, *(True for _ in order), True])


def result_text(r: pb.TableResult) -> str:
    """`ended 15-2 (target), match points 1 0`; a forfeit names its side."""
    scores = "-".join(str(s) for s in r.scores)
    points = " ".join(r.match_points)
    reason = REASONS.get(r.reason, "ended")
    if r.HasField("forfeited_side"):
        reason += f" of {side_label(r.forfeited_side)}"
    return f"ended {scores} ({reason}), match points {points}"


def sides_text(view: pb.TournamentView, t: pb.TournamentTable) -> str:
    names = names_of(view)
    return " v ".join(label(view, e, names) for e in t.sides)


def tables_lines(view: pb.TournamentView, rnd: pb.TournamentRound) -> list[str]:
    names = names_of(view)
    lines = [f"  bye: {label(view, e, names)}" for e in rnd.byes]
    for t in rnd.tables:
        if t.HasField("result"):
            state = result_text(t.result)
        elif not t.match_id:
            state = "not played"
        else:
            scores = "-".join(str(s) for s in t.live_scores) or "0-0"
            state = f"in play {scores}"
        where = f" [{t.match_id}]" if t.match_id else ""
        lines.append(f"  table {t.table}: {sides_text(view, t)}: {state}{where}")
    return lines


def format_name(settings: pb.TournamentSettings) -> str:
    if settings.format == pb.TOURNAMENT_FORMAT_SWISS:
        return f"Swiss, {settings.rounds} rounds"
    return "double round robin" if settings.double_round_robin else "round robin"


def render(view: pb.TournamentView) -> str:
    """The tournament as `show` prints it."""
    s = view.settings
    table = f"{s.seats}-seat tables" + (" in partnerships" if s.partnerships else "")
    phase = "cancelled" if view.cancelled else PHASES.get(view.phase, "?")
    out = [
        f"Tournament {view.tournament_id}" + (f" {view.name!r}" if view.name else ""),
        f"  {format_name(s)}, {table}; {phase}, "
        f"round {view.round} of {view.total_rounds}; {len(view.entrants)} entrants",
        f"  commitment {view.commitment}",
    ]
    if view.tournament_seed:
        out.append(f"  seed {view.tournament_seed}")
    revealing = reveal_line(view)
    if revealing is not None:
        out.append(f"  {revealing}")
    ending = winner_line(view)
    if ending is not None:
        out.append(f"  {ending[0].upper()}{ending[1:]}")
    if view.standings:
        out += ["", "Standings", *standings_lines(view)]
    elif view.entrants:
        names = names_of(view)
        gone = withdrawn(view)
        revealed = {e.entrant: e.revealed for e in view.entrants}
        out += ["", "Entrants"]
        for e in sorted(names):
            mark = f"  {withdrawal_text(gone[e])}" if e in gone else ""
            if view.phase == pb.TOURNAMENT_PHASE_REVEAL and e not in gone:
                mark = "  revealed" if revealed.get(e) else "  not revealed yet"
            out.append(f"  {e} {names[e]}{mark}")
    if view.interventions:
        out += ["", "Interventions"]
        out += [f"  {intervention_text(view, i)}" for i in view.interventions]
    if view.rounds:
        out += ["", "Crosstable", *crosstable_lines(view)]
        grid = grid_lines(view)
        if grid:
            out += ["", "Crosstable, entrant by entrant", *grid]
        current = view.rounds[-1]
        out += ["", f"Round {current.round}", *tables_lines(view, current)]
    return "\n".join(out)


# ----- watch -----------------------------------------------------------------------------


def standings_line(view: pb.TournamentView) -> str:
    names = names_of(view)
    ranks = ", ".join(
        f"{place}. {label(view, s.entrant, names)} {s.match_points} MP" for place, s in ranked(view)
    )
    return f"standings: {ranks}"


def changes(before: pb.TournamentView | None, after: pb.TournamentView) -> Iterator[str]:
    """The lines `watch` prints for the step from `before` to `after`."""
    names = names_of(after)
    if before is None:
        yield (
            f"tournament {after.tournament_id}: {PHASES.get(after.phase, '?')}, "
            f"round {after.round} of {after.total_rounds}, {len(after.entrants)} entrants"
        )
    if after.phase == pb.TOURNAMENT_PHASE_REVEAL and (
        before is None or before.phase != pb.TOURNAMENT_PHASE_REVEAL
    ):
        yield "registration closed: the entrants reveal their seeds"
    known = set() if before is None else {e.entrant for e in before.entrants}
    was_shown = set() if before is None else {e.entrant for e in before.entrants if e.revealed}
    was_gone = set() if before is None else set(withdrawn(before))
    for e in after.entrants:
        if before is not None and e.entrant not in known:
            yield f"{label(after, e.entrant, names)} registered"
        if (
            e.HasField("withdrawn_after_round")
            and e.entrant not in was_gone
            and e.withdrawn_by == pb.ACTOR_ENTRANT
        ):
            yield f"{label(after, e.entrant, names)} {withdrawal_text(e)}"
        if (
            before is not None
            and pb.TOURNAMENT_PHASE_REVEAL in (before.phase, after.phase)
            and e.revealed
            and e.entrant not in was_shown
        ):
            yield f"{label(after, e.entrant, names)} revealed its seed"
    told = 0 if before is None else len(before.interventions)
    for i in after.interventions[told:]:
        if i.action != pb.INTERVENTION_ACTION_CANCEL:
            yield intervention_text(after, i)
    old_rounds = {} if before is None else {r.round: r for r in before.rounds}
    for rnd in after.rounds:
        old = old_rounds.get(rnd.round)
        if old is None:
            yield f"round {rnd.round} started: {len(rnd.tables)} tables"
            for bye in rnd.byes:
                yield f"  bye: {label(after, bye, names)}"
            for t in rnd.tables:
                yield f"  table {t.table}: {sides_text(after, t)}"
        done = set() if old is None else {t.table for t in old.tables if t.HasField("result")}
        for t in rnd.tables:
            if t.HasField("result") and t.table not in done:
                yield (
                    f"round {rnd.round} table {t.table} {result_text(t.result)}: "
                    f"{sides_text(after, t)}"
                )
    if after.standings and (before is None or list(before.standings) != list(after.standings)):
        yield standings_line(after)
    if after.phase == pb.TOURNAMENT_PHASE_ENDED and (
        before is None or before.phase != pb.TOURNAMENT_PHASE_ENDED
    ):
        yield "tournament ended"
        line = winner_line(after)
        if line is not None:
            yield line


__all__ = [
    "changes",
    "crosstable_lines",
    "grid_lines",
    "intervention_text",
    "label",
    "names_of",
    "render",
    "reveal_line",
    "standings_lines",
    "winner_line",
    "withdrawal_text",
]
