"""A stand-in game server for the web tests: it serves views a test crafts (a tournament with
interventions and a cancellation, a match ended by a resignation) through the real gateway,
for what a real server does not make yet or cannot be brought to quickly."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass, field

import grpc

from bergen.v1 import bergen_pb2 as pb
from bergen.v1 import bergen_pb2_grpc as rpc


@dataclass
class Crafted:
    matches: dict[str, tuple[pb.MatchView, list[pb.Event]]] = field(default_factory=dict)
    tournaments: dict[str, pb.TournamentView] = field(default_factory=dict)


class FakeService(rpc.BergenServiceServicer):
    """The read RPCs a spectator's gateway calls, answered from `crafted`; an ended match's
    or tournament's stream sends its view and ends, as a real server's does."""

    def __init__(self, crafted: Crafted) -> None:
        self.crafted = crafted

    def _match(
        self, match_id: str, context: grpc.ServicerContext
    ) -> tuple[pb.MatchView, list[pb.Event]]:
        found = self.crafted.matches.get(match_id)
        if found is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no match {match_id}")
        return found

    def _tournament(self, tid: str, context: grpc.ServicerContext) -> pb.TournamentView:
        found = self.crafted.tournaments.get(tid)
        if found is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no tournament {tid}")
        return found

    def GetMatch(
        self, req: pb.GetMatchRequest, context: grpc.ServicerContext
    ) -> pb.GetMatchResponse:
        return pb.GetMatchResponse(view=self._match(req.match_id, context)[0])

    def WatchMatch(
        self, req: pb.WatchMatchRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.WatchMatchResponse]:
        yield pb.WatchMatchResponse(view=self._match(req.match_id, context)[0])

    def GetReplay(
        self, req: pb.GetReplayRequest, context: grpc.ServicerContext
    ) -> pb.GetReplayResponse:
        view, events = self._match(req.match_id, context)
        return pb.GetReplayResponse(
            events=[e for e in events if e.seq > req.after_seq],
            complete=view.phase == pb.PHASE_ENDED,
        )

    def ListMatches(
        self, req: pb.ListMatchesRequest, context: grpc.ServicerContext
    ) -> pb.ListMatchesResponse:
        out = pb.ListMatchesResponse()
        for view, _ in self.crafted.matches.values():
            if req.phase not in (pb.PHASE_UNSPECIFIED, view.phase):
                continue
            out.matches.add(
                match_id=view.match_id,
                name=view.name,
                phase=view.phase,
                seat_count=len(view.seats),
                partnerships=view.partnerships,
                preset=view.rules.preset,
                players=[s.name for s in view.seats],
                scores=view.scores,
                version=view.version,
                hand=view.hand_number,
                created_at={"seconds": 1_800_000_000},
                started_at={"seconds": 1_800_000_060},
            )
        return out

    def ListTournaments(
        self, req: pb.ListTournamentsRequest, context: grpc.ServicerContext
    ) -> pb.ListTournamentsResponse:
        return pb.ListTournamentsResponse()

    def GetTournament(
        self, req: pb.GetTournamentRequest, context: grpc.ServicerContext
    ) -> pb.GetTournamentResponse:
        return pb.GetTournamentResponse(tournament=self._tournament(req.tournament_id, context))

    def WatchTournament(
        self, req: pb.WatchTournamentRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.WatchTournamentResponse]:
        view = self._tournament(req.tournament_id, context)
        yield pb.WatchTournamentResponse(tournament=view)
        while view.phase != pb.TOURNAMENT_PHASE_ENDED and context.is_active():
            threading.Event().wait(0.1)


def serve(crafted: Crafted) -> tuple[grpc.Server, str]:
    """A started fake server of `crafted`, and its address."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    rpc.add_BergenServiceServicer_to_server(FakeService(crafted), server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, f"127.0.0.1:{port}"
