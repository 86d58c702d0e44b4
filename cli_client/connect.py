"""The one way the command line reaches a server: the address (`--server`, else
`BERGEN_SERVER`, else 127.0.0.1:50051), the channel with its credentials and options, the
seat token as metadata, and the one mapping from a failed call's gRPC status to an exit status.
"""

from __future__ import annotations

import argparse
import os

import grpc

from bergen.api.exit_status import ExitStatus

DEFAULT_SERVER = "127.0.0.1:50051"
SERVER_ENV = "BERGEN_SERVER"
MAX_RECEIVE_BYTES = 256 * 1024 * 1024
"""An answer may be large (a long match's audit log); gRPC's default 4 MiB would not do."""

_CODES: dict[grpc.StatusCode, ExitStatus] = {
    grpc.StatusCode.INVALID_ARGUMENT: ExitStatus.USAGE,
    grpc.StatusCode.NOT_FOUND: ExitStatus.NOT_FOUND,
    grpc.StatusCode.UNAUTHENTICATED: ExitStatus.REFUSED,
    grpc.StatusCode.PERMISSION_DENIED: ExitStatus.REFUSED,
    grpc.StatusCode.FAILED_PRECONDITION: ExitStatus.REFUSED,
    grpc.StatusCode.UNAVAILABLE: ExitStatus.UNREACHABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED: ExitStatus.UNREACHABLE,
}


def code_of(error: grpc.RpcError) -> grpc.StatusCode | None:
    return error.code() if isinstance(error, grpc.Call) else None


def exit_status_of(error: grpc.RpcError) -> ExitStatus:
    """The exit status that reports a failed call; ERROR for a status with no meaning of its
    own here."""
    code = code_of(error)
    return ExitStatus.ERROR if code is None else _CODES.get(code, ExitStatus.ERROR)


def describe_error(error: grpc.RpcError) -> str:
    """`not_found: no match 6f1c...`: the status and the server's words."""
    code = code_of(error)
    if code is None or not isinstance(error, grpc.Call):
        return str(error)
    return f"{code.name.lower()}: {error.details() or 'no detail'}"


def server_address(text: str) -> str:
    """`text` if it is HOST:PORT. Raises argparse.ArgumentTypeError otherwise."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return text


def add_server_option(parser: argparse.ArgumentParser) -> None:
    """`--server HOST:PORT`, defaulting to $BERGEN_SERVER, else DEFAULT_SERVER.

    A malformed $BERGEN_SERVER is reported as a usage error when the command runs (argparse
    checks a string default with the option's type)."""
    parser.add_argument(
        "--server",
        type=server_address,
        default=os.environ.get(SERVER_ENV) or DEFAULT_SERVER,
        metavar="HOST:PORT",
        help=f"the server (default: ${SERVER_ENV}, else {DEFAULT_SERVER})",
    )


def open_channel(target: str) -> grpc.Channel:
    """A channel to `target`: plaintext, as the server offers no TLS. Raises ValueError for a
    target grpc cannot parse."""
    return grpc.insecure_channel(
        target, options=[("grpc.max_receive_message_length", MAX_RECEIVE_BYTES)]
    )


def bearer(token: str | None) -> tuple[tuple[str, str], ...]:
    """The metadata that presents a seat token (none for a spectator)."""
    return () if token is None else (("authorization", f"Bearer {token}"),)
