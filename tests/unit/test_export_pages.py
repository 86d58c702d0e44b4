"""`bergen export` reads ExportRecords' pages, and one record a call from a server without it."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bergen.api.exit_status import ExitStatus
from bergen.api.signing import RecordSigner
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


def test_the_pages_are_read_ahead_and_the_reading_stops_with_the_export() -> None:
    stub = Stub(
        [
            pb.ExportRecordsResponse(records_json=[f"r{i}"], next_page_token=str(i + 1))
            for i in range(50)
        ]
    )
    pages = export._served(stub, "here")
    assert next(pages) == (None, "r0")
    pages.close()
    time.sleep(0.3)
    asked = len(stub.asked)
    time.sleep(0.3)
    assert len(stub.asked) == asked <= export.PAGES_AHEAD + 2  # none asked for since


# --- the whole export over many pages: checked by the worker processes, written ------------

SIGNER = RecordSigner(Ed25519PrivateKey.from_private_bytes(bytes(range(32))))
RECORDS = 260  # three pages: the first checked by the export's own process, then the workers
ENDED = datetime(2026, 12, 1, tzinfo=UTC)


def served_record(k: int) -> str:
    record = {
        "format": "bergen-match-record/1",
        "match_id": f"019b76da-a800-7206-93eb-{k:012x}",
        "hands": [{"actions": []}] * (1 + k % 3),
        "result": {"reason": "target", "winner_side": k % 2, "scores": [15, k % 15]},
        "log": {"events": 10 + k, "head": f"{k:064x}"},
    }
    return SIGNER.sign_served(record)[1]


class Server(Stub):
    """ExportRecords' pages of the records served, failing at `fail_at` (a page's number)."""

    def __init__(self, texts: list[str], fail_at: int | None = None) -> None:
        pages = [
            pb.ExportRecordsResponse(
                records_json=texts[i : i + export.PAGE_SIZE],
                next_page_token=str(i // export.PAGE_SIZE + 1)
                if i + export.PAGE_SIZE < len(texts)
                else "",
            )
            for i in range(0, len(texts), export.PAGE_SIZE)
        ]
        super().__init__(pages)
        self.fail_at = fail_at

    def ExportRecords(self, request: pb.ExportRecordsRequest, timeout: float) -> Any:
        if self.fail_at is not None and int(request.page_token or "0") == self.fail_at:
            raise Unavailable()
        return super().ExportRecords(request, timeout)

    def GetServerInfo(self, request: Any, timeout: float) -> Any:
        return pb.GetServerInfoResponse(
            signature_algorithm="ed25519",
            public_key=SIGNER.public_key,
            record_format="bergen-match-record/1",
        )

    def GetAuditLog(self, request: pb.GetAuditLogRequest, timeout: float) -> Any:
        event = pb.AuditEvent(seq=1)
        event.recorded_at.FromDatetime(ENDED)
        return pb.GetAuditLogResponse(match_id=request.match_id, events=[event])


def test_a_page_that_fails_after_others_stops_the_export_with_its_status() -> None:
    got: list[Any] = []
    with pytest.raises(export.Stopped) as caught:
        got.extend(export._served(Server(["r1", "r2"] * export.PAGE_SIZE, fail_at=1), "here"))
    assert got == [(None, t) for t in ["r1", "r2"] * (export.PAGE_SIZE // 2)]  # the first page
    assert caught.value.status == ExitStatus.ERROR
    assert "the records of the finished matches" in caught.value.message


@pytest.fixture
def trusting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(export, "trust", lambda server, key: None)


@pytest.mark.usefixtures("trusting")
def test_many_pages_are_checked_by_the_workers_and_a_tampered_record_is_refused(
    tmp_path: Path,
) -> None:
    texts = [served_record(k) for k in range(RECORDS)]
    tampered = RECORDS - 7  # on the last page: checked by a worker
    texts[tampered] = texts[tampered].replace('"scores":[15,', '"scores":[16,', 1)
    written, listed, rejected = export.export(Server(texts), "here", tmp_path, None)
    bad = f"019b76da-a800-7206-93eb-{tampered:012x}"
    assert len(written) == listed == RECORDS - 1 and bad not in written
    assert len(rejected) == 1 and rejected[0].startswith(bad) and "signature" in rejected[0]
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    for entry in manifest["matches"]:
        data = (tmp_path / entry["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"]
        assert data == texts[int(entry["match_id"][-12:], 16)].encode() + b"\n"
        assert entry["hands"] == 1 + int(entry["match_id"][-12:], 16) % 3
    assert not (tmp_path / f"{bad}.json").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no file half made


@pytest.mark.usefixtures("trusting")
def test_a_page_that_fails_midway_stops_the_export_and_lists_nothing(tmp_path: Path) -> None:
    texts = [served_record(k) for k in range(RECORDS)]
    with pytest.raises(export.Stopped) as caught:
        export.export(Server(texts, fail_at=2), "here", tmp_path, None)
    assert caught.value.status == ExitStatus.ERROR
    assert "the records of the finished matches" in caught.value.message
    assert not (tmp_path / "manifest.json").exists()
    again, listed, rejected = export.export(Server(texts), "here", tmp_path, None)
    assert listed == len(again) == RECORDS and not rejected  # the next run makes it whole


def test_workers_that_cannot_start_leave_every_record_to_the_export_itself() -> None:
    class Broken:
        def submit(self, *args: Any) -> Any:
            raise OSError("no processes left")

    started = threading.Event()
    export._start_workers(Broken(), 2, started)  # type: ignore[arg-type]
    assert not started.is_set()
