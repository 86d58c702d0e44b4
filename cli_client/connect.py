"""The one way the command line reaches a server: the address (`--server`, else
`BERGEN_SERVER`, else 127.0.0.1:50051), TLS (`--tls`, `--ca`, and a client certificate for
mutual TLS), the channel with its credentials and options, the seat token as metadata, and the
one mapping from a failed call's gRPC status to an exit status.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

import grpc
from google.protobuf.message import DecodeError
from google.rpc import error_details_pb2, status_pb2

from bergen.api.exit_status import ExitStatus

from .usage import Failed, report

DEFAULT_SERVER = "127.0.0.1:50051"
SERVER_ENV = "BERGEN_SERVER"
TLS_ENV = "BERGEN_TLS"
CA_ENV = "BERGEN_CA"
CLIENT_CERT_ENV = "BERGEN_CLIENT_CERT"
CLIENT_KEY_ENV = "BERGEN_CLIENT_KEY"
MAX_RECEIVE_BYTES = 256 * 1024 * 1024
"""An answer may be large (a long match's audit log); gRPC's default 4 MiB would not do."""

_CODES: dict[grpc.StatusCode, ExitStatus] = {
    grpc.StatusCode.INVALID_ARGUMENT: ExitStatus.USAGE,
    grpc.StatusCode.NOT_FOUND: ExitStatus.NOT_FOUND,
    grpc.StatusCode.UNAUTHENTICATED: ExitStatus.REFUSED,
    grpc.StatusCode.PERMISSION_DENIED: ExitStatus.REFUSED,
    grpc.StatusCode.FAILED_PRECONDITION: ExitStatus.REFUSED,
    # A player's name someone holds already (NAME_TAKEN).
    grpc.StatusCode.ALREADY_EXISTS: ExitStatus.REFUSED,
    grpc.StatusCode.UNAVAILABLE: ExitStatus.UNREACHABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED: ExitStatus.UNREACHABLE,
    # The server refuses to serve what does not check (LOG_TAMPERED): the same fault as a
    # record that `bergen verify` rejects.
    grpc.StatusCode.DATA_LOSS: ExitStatus.INVALID,
}


def code_of(error: grpc.RpcError) -> grpc.StatusCode | None:
    """The failed call's status code (a blocking call's or an asyncio one's); None for an
    error that is no call's."""
    if isinstance(error, (grpc.Call, grpc.aio.AioRpcError)):
        code: grpc.StatusCode = error.code()
        return code
    return None


def error_info(error: grpc.RpcError) -> error_details_pb2.ErrorInfo | None:
    """A refusal's ErrorInfo detail (its reason, `NAME_TAKEN` say, and metadata), from a
    blocking call's error or an asyncio one's; None without one."""
    if not isinstance(error, (grpc.Call, grpc.aio.AioRpcError)):
        return None
    # The rich status grpc_status reads (`rpc_status.from_call`), read here from the trailing
    # metadata both kinds of call give.
    for key, value in error.trailing_metadata() or ():
        if key != DETAILS_KEY or not isinstance(value, bytes):
            continue
        try:
            status = status_pb2.Status.FromString(value)
        except DecodeError:
            return None
        for detail in status.details:
            info = error_details_pb2.ErrorInfo()
            if detail.Unpack(info):
                return info
    return None


DETAILS_KEY = "grpc-status-details-bin"
"""The trailing metadata key of a call's rich status (google.rpc.Status)."""


def exit_status_of(error: grpc.RpcError) -> ExitStatus:
    """The exit status that reports a failed call; ERROR for a status with no meaning of its
    own here."""
    code = code_of(error)
    return ExitStatus.ERROR if code is None else _CODES.get(code, ExitStatus.ERROR)


def reason_of(error: grpc.RpcError) -> str:
    """The refusal's stable reason (its ErrorInfo's, `MATCH_NOT_FOUND` say), else the status
    code's name (`UNAVAILABLE`), else `ERROR`."""
    info = error_info(error)
    if info is not None and info.reason:
        return info.reason
    code = code_of(error)
    return code.name if code is not None else "ERROR"


def describe_error(error: grpc.RpcError) -> str:
    """`no match 6f1c... (MATCH_NOT_FOUND)`: the server's words and the reason, as the
    sentence and reason of an error line (`usage.error_line`)."""
    if not isinstance(error, grpc.Call):
        return f"{error} (ERROR)"
    details = error.details() or "the server gave no detail"
    return f"{details} ({reason_of(error)})"


def details_of(error: grpc.RpcError) -> str:
    """The server's words of a failed call (or the client library's, when it never got an
    answer)."""
    if isinstance(error, grpc.Call):
        return error.details() or "the server gave no detail"
    return str(error)


def failure_of(error: grpc.RpcError | Failed) -> Failed:
    """The one mapping of what stops a command to what it reports: a failed call becomes its
    server's words, the exit status of its gRPC status (`exit_status_of`) and its reason
    (`reason_of`); a `Failed` (a seat that failed included) is its own report."""
    if isinstance(error, Failed):
        return error
    return Failed(details_of(error), exit_status_of(error), reason_of(error))


def fail_call(command: str, error: grpc.RpcError) -> ExitStatus:
    """Print a failed call's error line for `command` (`bergen play: no match 6f1c...
    (MATCH_NOT_FOUND)`) on standard error; returns the exit status that reports it."""
    return report(command, failure_of(error))


def server_address(text: str) -> str:
    """`text` if it is HOST:PORT. Raises argparse.ArgumentTypeError otherwise."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return text


def add_server_option(parser: argparse.ArgumentParser) -> None:
    """`--server HOST:PORT`, defaulting to $BERGEN_SERVER, else DEFAULT_SERVER, and the TLS
    options: `--tls`, `--ca FILE`, `--client-cert FILE`, `--client-key FILE` (each defaulting
    to its environment variable). `endpoint_of` reads them.

    A malformed $BERGEN_SERVER is reported as a usage error when the command runs (argparse
    checks a string default with the option's type)."""
    parser.add_argument(
        "--server",
        type=server_address,
        default=os.environ.get(SERVER_ENV) or DEFAULT_SERVER,
        metavar="HOST:PORT",
        help=f"the server (default: ${SERVER_ENV}, else {DEFAULT_SERVER})",
    )
    parser.add_argument(
        "--tls",
        action="store_true",
        default=os.environ.get(TLS_ENV, "") not in ("", "0"),
        help=f"speak TLS, trusting the system's CAs (or ${TLS_ENV}=1; --ca implies it)",
    )
    parser.add_argument(
        "--ca",
        default=os.environ.get(CA_ENV) or None,
        metavar="FILE",
        help=f"speak TLS, trusting only the CA certificates of FILE (PEM; default: ${CA_ENV})",
    )
    parser.add_argument(
        "--client-cert",
        default=os.environ.get(CLIENT_CERT_ENV) or None,
        metavar="FILE",
        help="for mutual TLS: this client's certificate (PEM; default: "
        f"${CLIENT_CERT_ENV}); needs --client-key",
    )
    parser.add_argument(
        "--client-key",
        default=os.environ.get(CLIENT_KEY_ENV) or None,
        metavar="FILE",
        help=f"the private key of --client-cert (PEM; default: ${CLIENT_KEY_ENV})",
    )


@dataclass(frozen=True)
class Endpoint:
    """A server and how to speak to it: plaintext, or TLS with the CAs to trust (None: the
    system's) and a client certificate and key for mutual TLS."""

    address: str
    tls: bool = False
    ca: bytes | None = None
    client_cert: bytes | None = None
    client_key: bytes | None = None

    def __str__(self) -> str:
        return self.address

    def credentials(self) -> grpc.ChannelCredentials | None:
        """The channel's TLS credentials, None for plaintext."""
        if not self.tls:
            return None
        return grpc.ssl_channel_credentials(
            root_certificates=self.ca,
            private_key=self.client_key,
            certificate_chain=self.client_cert,
        )


class BadConnectionOption(ValueError):
    """A TLS option that cannot be used: a file that cannot be read or is not PEM, or a
    client certificate without its key."""


def _pem(option: str, path: str, marker: bytes) -> bytes:
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise BadConnectionOption(f"{option} {path}: {e.strerror or e}") from None
    if marker not in data:
        raise BadConnectionOption(f"{option} {path}: no PEM {marker.decode()} in it")
    return data


def endpoint_of(args: argparse.Namespace) -> Endpoint:
    """The server the options of `add_server_option` name, with the TLS files read. A CA file
    or a client certificate implies TLS. Raises BadConnectionOption."""
    cert, key = args.client_cert, args.client_key
    if (cert is None) != (key is None):
        raise BadConnectionOption("--client-cert and --client-key go together: give both")
    return Endpoint(
        args.server,
        tls=bool(args.tls or args.ca or cert),
        ca=None if args.ca is None else _pem("--ca", args.ca, b"CERTIFICATE"),
        client_cert=None if cert is None else _pem("--client-cert", cert, b"CERTIFICATE"),
        client_key=None if key is None else _pem("--client-key", key, b"PRIVATE KEY"),
    )


def open_channel(target: Endpoint | str) -> grpc.Channel:
    """A channel to `target` (a bare address is plaintext). Raises ValueError for a target grpc
    cannot parse."""
    endpoint = target if isinstance(target, Endpoint) else Endpoint(target)
    options = [("grpc.max_receive_message_length", MAX_RECEIVE_BYTES)]
    credentials = endpoint.credentials()
    if credentials is None:
        return grpc.insecure_channel(endpoint.address, options=options)
    return grpc.secure_channel(endpoint.address, credentials, options=options)


def bearer(token: str | None) -> tuple[tuple[str, str], ...]:
    """The metadata that presents a seat token (none for a spectator)."""
    return () if token is None else (("authorization", f"Bearer {token}"),)
