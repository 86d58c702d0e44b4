"""Translation between domain values and the `bergen.v1` messages. No rules here."""

from __future__ import annotations

from collections.abc import Mapping

from bergen.domain import events as ev
from bergen.domain.errors import InvalidArgument
from bergen.domain.rules import Rules
from bergen.domain.state import ENDED, PLAYING, SEATING
from bergen.domain.tiles import End, Tile
from bergen.domain.views import View
from bergen.v1 import bergen_pb2 as pb

PHASES: Mapping[str, int] = {
    SEATING: pb.PHASE_SEATING,
    PLAYING: pb.PHASE_PLAYING,
    ENDED: pb.PHASE_ENDED,
}
PHASE_NAMES: Mapping[int, str] = {v: k for k, v in PHASES.items()}
ENDS: Mapping[End | None, int] = {
    None: pb.END_UNSPECIFIED,
    End.LEFT: pb.END_LEFT,
    End.RIGHT: pb.END_RIGHT,
}


def tile_in(msg: pb.Tile, what: str = "tile") -> Tile:
    """Raises InvalidArgument for numbers outside 0..6."""
    if msg.low > 6 or msg.high > 6:
        raise InvalidArgument(f"{what}: numbers must be 0..6, got {msg.low}-{msg.high}")
    return Tile.of(msg.low, msg.high)


def end_in(value: int) -> End | None:
    """Raises InvalidArgument for an unknown enum number."""
    if value == pb.END_UNSPECIFIED:
        return None
    if value == pb.END_LEFT:
        return End.LEFT
    if value == pb.END_RIGHT:
        return End.RIGHT
    raise InvalidArgument(f"end must be END_LEFT or END_RIGHT, got {value}")


def tile_out(t: Tile) -> pb.Tile:
    return pb.Tile(low=t.low, high=t.high)


def rules_out(r: Rules) -> pb.Rules:
    return pb.Rules(
        preset=r.preset,
        lead=r.lead,
        draw=r.draw,
        double_bonus=r.double_bonus,
        domino_points=r.domino_points,
        blocked=r.blocked,
        endgame_reduction=r.endgame_reduction,
        match_end=r.match_end,
        target=r.target,
    )


def options_in(msg: pb.RuleOptions) -> dict[str, object]:
    """The options set in a RuleOptions message."""
    names = (
        "lead",
        "draw",
        "double_bonus",
        "domino_points",
        "blocked",
        "endgame_reduction",
        "match_end",
        "target",
    )
    return {n: getattr(msg, n) for n in names if msg.HasField(n)}


def result_out(r: ev.MatchEnded) -> pb.Result:
    msg = pb.Result(reason=r.reason, scores=list(r.scores), note=r.note)
    if r.winner_side is not None:
        msg.winner_side = r.winner_side
    if r.resigned_seat is not None:
        msg.resigned_seat = r.resigned_seat
    return msg


def view_out(v: View) -> pb.MatchView:
    msg = pb.MatchView(
        match_id=v.match_id,
        name=v.name,
        phase=PHASES[v.phase],  # type: ignore[arg-type]
        rules=rules_out(v.rules),
        partnerships=v.partnerships,
        commitment=v.commitment,
        server_seed=v.server_seed or "",
        hand_number=v.hand,
        my_tiles=[tile_out(t) for t in v.tiles],
        boneyard_size=v.boneyard_size,
        drawable=v.drawable,
        line=[pb.LineTile(left=a, right=b) for a, b in v.line],
        scores=list(v.scores),
        legal_plays=[pb.LegalPlay(tile=tile_out(t), end=ENDS[e]) for t, e in v.legal_plays],  # type: ignore[arg-type]
        version=v.version,
    )
    for seat, name in enumerate(v.players):
        msg.seats.append(
            pb.SeatInfo(
                seat=seat,
                name=name or "",
                taken=name is not None,
                tile_count=v.hand_sizes[seat],
                side=seat % 2 if v.partnerships else seat,
            )
        )
    if v.seat is not None:
        msg.viewer_seat = v.seat
    if v.revealed_hands is not None:
        msg.revealed_hands.extend(pb.Hand(tiles=[tile_out(t) for t in h]) for h in v.revealed_hands)
    if v.ends is not None:
        msg.ends.CopyFrom(
            pb.Ends(left=v.ends[0], right=v.ends[1], left_double=v.ends[2], right_double=v.ends[3])
        )
    if v.turn is not None:
        msg.turn = v.turn
    if v.must_play is not None:
        msg.must_play.CopyFrom(tile_out(v.must_play))
    if v.result is not None:
        msg.result.CopyFrom(result_out(v.result))
    return msg


def event_out(seq: int, e: ev.Event) -> pb.Event:
    """One event (already redacted for its viewer) as a message; hidden tiles are absent."""
    msg = pb.Event(seq=seq)
    if isinstance(e, ev.MatchCreated):
        msg.match_created.CopyFrom(
            pb.MatchCreated(
                match_id=e.match_id,
                seats=e.seats,
                partnerships=e.partnerships,
                rules=rules_out(e.rules),
                commitment=e.commitment,
                name=e.name,
            )
        )
    elif isinstance(e, ev.SeatTaken):
        msg.seat_taken.CopyFrom(pb.SeatTaken(seat=e.seat, name=e.name, client_seed=e.client_seed))
    elif isinstance(e, ev.Dealt):
        hands = [
            pb.DealtHand(tiles=[tile_out(t) for t in h if t is not None], count=len(h))
            for h in e.hands
        ]
        msg.dealt.CopyFrom(
            pb.Dealt(
                hand=e.hand,
                attempt=e.attempt,
                hands=hands,
                boneyard=[tile_out(t) for t in e.boneyard if t is not None],
                boneyard_size=len(e.boneyard),
            )
        )
    elif isinstance(e, ev.DealVoided):
        msg.deal_voided.CopyFrom(pb.DealVoided(hand=e.hand, attempt=e.attempt))
    elif isinstance(e, ev.TilePlayed):
        msg.tile_played.CopyFrom(
            pb.TilePlayed(hand=e.hand, seat=e.seat, tile=tile_out(e.tile), end=ENDS[e.end])  # type: ignore[arg-type]
        )
    elif isinstance(e, ev.TileDrawn):
        drawn = pb.TileDrawn(hand=e.hand, seat=e.seat)
        if e.tile is not None:
            drawn.tile.CopyFrom(tile_out(e.tile))
        msg.tile_drawn.CopyFrom(drawn)
    elif isinstance(e, ev.Passed):
        msg.passed.CopyFrom(pb.Passed(hand=e.hand, seat=e.seat))
    elif isinstance(e, ev.PointsScored):
        scored = pb.PointsScored(
            hand=e.hand, side=e.side, points=e.points, reason=e.reason, base=e.base
        )
        if e.seat is not None:
            scored.seat = e.seat
        msg.points_scored.CopyFrom(scored)
    elif isinstance(e, ev.HandEnded):
        ended = pb.HandEnded(hand=e.hand, reason=e.reason, points=e.points, scores=list(e.scores))
        if e.side is not None:
            ended.side = e.side
        msg.hand_ended.CopyFrom(ended)
    elif isinstance(e, ev.MatchEnded):
        msg.match_ended.CopyFrom(pb.MatchEnded(result=result_out(e)))
    elif isinstance(e, ev.SeedRevealed):
        msg.seed_revealed.CopyFrom(pb.SeedRevealed(server_seed=e.server_seed))
    return msg
