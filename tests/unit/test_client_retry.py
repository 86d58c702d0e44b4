"""Which failed calls the command line sends again: a passing failure of the server, and a
command the server gave up on because others kept changing the same stream (CONTENDED),
which wrote nothing; never a refusal."""

from __future__ import annotations

import grpc
import pytest
from e2e.failed_calls import FailedCall

from bergen.cli_client import client as client_module
from bergen.cli_client.client import Client, passing


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
    assert passing(FailedCall(code, reason=reason)) is again


def test_a_contended_command_is_sent_again_until_it_is_answered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(client_module.time, "sleep", lambda _s: None)
    failures = [FailedCall(grpc.StatusCode.ABORTED, reason="CONTENDED")] * 3
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
        raise FailedCall(grpc.StatusCode.ABORTED, reason="STALE_VERSION")

    with Client("127.0.0.1:9", retry_s=60.0) as client, pytest.raises(grpc.RpcError):
        client.again(call)
    assert len(sent) == 1
