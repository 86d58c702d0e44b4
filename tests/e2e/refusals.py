"""What every refusal of the server must carry, checked in one place: a status other than
INTERNAL or UNKNOWN, a message of at most 512 bytes that says why, and a
`google.rpc.ErrorInfo` with a reason a client can branch on."""

from __future__ import annotations

from dataclasses import dataclass

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

MAX_MESSAGE_BYTES = 512
DOMAIN = "bergen.v1"


@dataclass(frozen=True)
class Refusal:
    code: grpc.StatusCode
    message: str
    reason: str
    metadata: dict[str, str]
    retry_after_s: float | None


def refusal(error: grpc.RpcError, what: str = "the call") -> Refusal:
    """The refusal `error` carries, checked. Raises AssertionError when it is INTERNAL or
    UNKNOWN, its message is empty or longer than 512 bytes, or it has no ErrorInfo of
    this server's domain with a reason."""
    code: grpc.StatusCode = error.code()  # type: ignore[attr-defined]
    message: str = error.details() or ""  # type: ignore[attr-defined]
    assert code not in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN), (
        f"{what} answered {code.name}: {message[:200]}"
    )
    assert message, f"{what}: a refusal says why ({code.name})"
    size = len(message.encode("utf-8"))
    assert size <= MAX_MESSAGE_BYTES, f"{what}: a {size}-byte message: {message[:200]}..."
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    assert status is not None, f"{what}: {code.name} without details: {message}"
    info, retry = None, None
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
        elif detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            retry = error_details_pb2.RetryInfo()
            detail.Unpack(retry)
    assert info is not None, f"{what}: {code.name} without an ErrorInfo: {message}"
    assert info.reason and info.domain == DOMAIN, f"{what}: ErrorInfo {info}"
    return Refusal(
        code,
        message,
        info.reason,
        dict(info.metadata),
        None if retry is None else retry.retry_delay.ToTimedelta().total_seconds(),
    )
