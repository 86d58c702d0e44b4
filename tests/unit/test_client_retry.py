"""Which failed calls the command line sends again: a passing failure of the server, and a
command the server gave up on because others kept changing the same stream (CONTENDED),
which wrote nothing; never a refusal."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

from bergen.cli_client import client as client_module
from bergen.cli_client.client import Client, passing
from bergen.cli_client.connect import DETAILS_KEY


class Refused(grpc.RpcError, grpc.Call):  # type: ignore[misc]
    """A failed call as a stub raises it, with the server's reason in its rich status."""

    def __init__(self, code: grpc.StatusCode, reason: str = "") -> None:
        self._code = code
        self._reason = reason

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return "why"

    def initial_metadata(self) -> None: ...

    def trailing_metadata(self) -> tuple[tuple[str, bytes], ...]:
        if not self._reason:
            return ()
        detail = any_pb2.Any()
        detail.Pack(error_details_pb2.ErrorInfo(reason=self._reason, domain="bergen"))
        status = status_pb2.Status(code=self._code.value[0], message="why", details=[detail])
        return ((DETAILS_KEY, status.SerializeToString()),)

    def is_active(self) -> bool:
        return False

    def time_remaining(self) -> None: ...

    def cancel(self) -> bool:
        return False

    def add_callback(self, callback: object) -> bool:
        return False


@pytest.mark.parametrize(
    ("code", "reason", "again"),
    [
        (grpc.StatusCode.UNAVAILABLE, "", True),
        (grpc.StatusCode.ABORTED, "CONTENDED", True),
        (grpc.StatusCode.ABORTED, "STALE_VERSION", False),
        (grpc.StatusCode.ABORTED, "", False),
        (grpc.StatusCode.FAILED_PRECONDITION, "CONTENDED", False),
        (grpc.StatusCode.INVALID_ARGUMENT, "", False),
    ],
)
def test_a_call_is_sent_again_only_on_a_passing_failure_or_contention(
    code: grpc.StatusCode, reason: str, again: bool
) -> None:
    assert passing(Refused(code, reason)) is again


def test_a_contended_command_is_sent_again_until_it_is_answered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(client_module.time, "sleep", lambda _s: None)
    failures = [Refused(grpc.StatusCode.ABORTED, "CONTENDED")] * 3
    sent = []

    def call() -> str:
        sent.append(1)
        if failures:
            raise failures.pop()
        return "answered"

    with Client("127.0.0.1:9", retry_s=60.0) as client:
        assert client.again(call) == "answered"
    assert len(sent) == 4


def test_a_stale_command_is_not_sent_again() -> None:
    sent = []

    def call() -> str:
        sent.append(1)
        raise Refused(grpc.StatusCode.ABORTED, "STALE_VERSION")

    with Client("127.0.0.1:9", retry_s=60.0) as client, pytest.raises(grpc.RpcError):
        client.again(call)
    assert len(sent) == 1
