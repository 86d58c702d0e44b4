"""Messages of the API back into domain values, so clients fold events like the server."""

from __future__ import annotations

from bergen.domain import events as ev
from bergen.domain.errors import CorruptRecord
from bergen.domain.rules import Rules
from bergen.domain.tiles import End, Tile
from bergen.v1 import bergen_pb2 as pb

_ENDS = {pb.END_UNSPECIFIED: None, pb.END_LEFT: End.LEFT, pb.END_RIGHT: End.RIGHT}


def tile_in(msg: pb.Tile) -> Tile:
    return Tile.of(msg.low, msg.high)


def rules_in(msg: pb.Rules) -> Rules:
    return Rules(
        preset=msg.preset,
        lead=msg.lead,
        draw=msg.draw,
        double_bonus=msg.double_bonus,
        domino_points=msg.domino_points,
        blocked=msg.blocked,
        endgame_reduction=msg.endgame_reduction,
        match_end=msg.match_end,
        target=msg.target,
    )


def result_in(msg: pb.Result) -> ev.MatchEnded:
    return ev.MatchEnded(
        reason=msg.reason,
        winner_side=msg.winner_side if msg.HasField("winner_side") else None,
        scores=tuple(msg.scores),
        resigned_seat=msg.resigned_seat if msg.HasField("resigned_seat") else None,
        note=msg.note,
    )


def event_in(msg: pb.Event) -> tuple[int, ev.Event]:
    """(seq, event); tiles the server hid are None. Raises CorruptRecord for an empty or
    malformed event."""
    kind = msg.WhichOneof("body")
    if kind == "match_created":
        m = msg.match_created
        return msg.seq, ev.MatchCreated(
            m.match_id, m.seats, m.partnerships, rules_in(m.rules), m.commitment, m.name, None
        )
    if kind == "seat_taken":
        s = msg.seat_taken
        return msg.seq, ev.SeatTaken(s.seat, s.name, s.client_seed)
    if kind == "dealt":
        d = msg.dealt
        hands = tuple(
            tuple(tile_in(t) for t in h.tiles) if h.tiles else (None,) * h.count for h in d.hands
        )
        boneyard = (
            tuple(tile_in(t) for t in d.boneyard) if d.boneyard else (None,) * d.boneyard_size
        )
        return msg.seq, ev.Dealt(d.hand, d.attempt, hands, boneyard)
    if kind == "deal_voided":
        return msg.seq, ev.DealVoided(msg.deal_voided.hand, msg.deal_voided.attempt)
    if kind == "tile_played":
        p = msg.tile_played
        return msg.seq, ev.TilePlayed(p.hand, p.seat, tile_in(p.tile), _ENDS[p.end])
    if kind == "tile_drawn":
        t = msg.tile_drawn
        return msg.seq, ev.TileDrawn(
            t.hand, t.seat, tile_in(t.tile) if t.HasField("tile") else None
        )
    if kind == "passed":
        return msg.seq, ev.Passed(msg.passed.hand, msg.passed.seat)
    if kind == "points_scored":
        p2 = msg.points_scored
        return msg.seq, ev.PointsScored(
            p2.hand,
            p2.side,
            p2.points,
            p2.reason,
            p2.base,
            p2.seat if p2.HasField("seat") else None,
        )
    if kind == "hand_ended":
        h2 = msg.hand_ended
        return msg.seq, ev.HandEnded(
            h2.hand,
            h2.reason,
            h2.side if h2.HasField("side") else None,
            h2.points,
            tuple(h2.scores),
        )
    if kind == "match_ended":
        return msg.seq, result_in(msg.match_ended.result)
    if kind == "seed_revealed":
        return msg.seq, ev.SeedRevealed(msg.seed_revealed.server_seed)
    raise CorruptRecord(f"event {msg.seq} has no body")
