"""`bergen export` reads ExportRecords' pages, and one record a call from a server without it."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from bergen.api.exit_status import ExitStatus
from bergen.cli_client import export
from bergen.v1 import bergen_pb2 as pb


class Unimplemented(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNIMPLEMENTED

    def details(self) -> str:
        return "Method not found!"


class Unavailable(Unimplemented):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return "the database does not answer"


class Stub:
    """ExportRecords' pages (or an error), and the listing's."""

    def __init__(self, pages: list[pb.ExportRecordsResponse] | Exception) -> None:
        self.pages = pages
        self.asked: list[str] = []

    def ExportRecords(self, request: pb.ExportRecordsRequest, timeout: float) -> Any:
        self.asked.append(request.page_token)
        if isinstance(self.pages, Exception):
            raise self.pages
        return self.pages[int(request.page_token or "0")]

    def ListMatches(self, request: pb.ListMatchesRequest, timeout: float) -> Any:
        assert request.phase == pb.PHASE_ENDED
        if not request.page_token:
            return pb.ListMatchesResponse(
                matches=[pb.MatchSummary(match_id="a"), pb.MatchSummary(match_id="b")],
                next_page_token="next",
            )
        return pb.ListMatchesResponse(matches=[pb.MatchSummary(match_id="b")])


def test_the_pages_are_read_in_turn_with_the_refused_asked_for_alone() -> None:
    stub = Stub(
        [
            pb.ExportRecordsResponse(records_json=["r1", "r2"], next_page_token="1"),
            pb.ExportRecordsResponse(records_json=["r3"], refused_match_ids=["x"]),
        ]
    )
    got = list(export._served(stub, "here"))
    assert got == [(None, "r1"), (None, "r2"), (None, "r3"), ("x", None)]
    assert stub.asked == ["", "1"]


def test_a_server_without_export_records_is_asked_a_record_a_call() -> None:
    got = list(export._served(Stub(Unimplemented()), "here"))
    assert got == [("a", None), ("b", None)]  # each listed once, however often it is listed


def test_any_other_failure_stops_the_export_with_its_status() -> None:
    with pytest.raises(export.Stopped) as caught:
        list(export._served(Stub(Unavailable()), "here"))
    assert caught.value.status == ExitStatus.ERROR
    assert "the records of the finished matches" in caught.value.message
