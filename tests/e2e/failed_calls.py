"""A failed gRPC call as a stub raises it (`grpc.RpcError` and `grpc.Call`), with a status
code, the server's words and, when given, the reason of its rich status (ErrorInfo)."""

from __future__ import annotations

import grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

from bergen.cli_client.connect import DETAILS_KEY


class FailedCall(grpc.RpcError, grpc.Call):  # type: ignore[misc]
    """A failed call: `code`, `details`, and `reason` in its trailing metadata when given."""

    def __init__(self, code: grpc.StatusCode, details: str = "why", reason: str = "") -> None:
        self._code = code
        self._details = details
        self._reason = reason

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def initial_metadata(self) -> None: ...

    def trailing_metadata(self) -> tuple[tuple[str, bytes], ...]:
        if not self._reason:
            return ()
        detail = any_pb2.Any()
        detail.Pack(error_details_pb2.ErrorInfo(reason=self._reason, domain="bergen"))
        status = status_pb2.Status(
            code=self._code.value[0], message=self._details, details=[detail]
        )
        return ((DETAILS_KEY, status.SerializeToString()),)

    def is_active(self) -> bool:
        return False

    def time_remaining(self) -> None: ...

    def cancel(self) -> bool:
        return False

    def add_callback(self, callback: object) -> bool:
        return False
