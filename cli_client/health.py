"""`bergen health`: ask a server's standard gRPC health service whether it serves.

For container health checks and scripts: one call, one line, and the exit status says it all
(0 serving, 4 answering but not serving, 5 not answering in time).
"""

from __future__ import annotations

import argparse
import json

import grpc
from grpc_health.v1 import health_pb2

from bergen.api.exit_status import ExitStatus
from bergen.api.helptext import HelpFormatter

from .connect import (
    Endpoint,
    add_server_option,
    describe_error,
    details_of,
    exit_status_of,
    open_channel,
    reason_of,
)
from .usage import examples, fail

SERVICE = "bergen.v1.BergenService"
CHECK_METHOD = "/grpc.health.v1.Health/Check"
DEFAULT_TIMEOUT_S = 5.0


def _timeout(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not 0 < value <= 600:
        raise argparse.ArgumentTypeError(f"expected 0 < seconds <= 600, got {text!r}")
    return value


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "health",
        help="ask a server's gRPC health service whether it serves",
        description="Ask the server's standard gRPC health service whether it serves, as "
        "a load balancer or a supervisor does. Exit 0 when it does, 4 when it answers that it "
        "does not (it is shutting down) or does not know the service, 5 when it does not "
        "answer in time.",
        epilog=examples(
            "bergen health                          # the server of this machine",
            "bergen health --server db1:50051 --service game --json",
        ),
        formatter_class=HelpFormatter,
    )
    add_server_option(p)
    p.add_argument(
        "--service",
        default="",
        metavar="NAME",
        help="the service to ask about: `game` for the game service alone (default: the "
        "server as a whole)",
    )
    p.add_argument(
        "--timeout",
        type=_timeout,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"how long to wait for the answer (default {DEFAULT_TIMEOUT_S:g})",
    )
    p.add_argument("--json", action="store_true", help="print the answer as one JSON object")
    p.set_defaults(func=run)


def check(endpoint: Endpoint, service: str, timeout_s: float) -> str:
    """The serving status's name (`SERVING`, `NOT_SERVING`...). Raises grpc.RpcError when the
    call fails (NOT_FOUND for a service the server does not know)."""
    with open_channel(endpoint) as channel:
        # The method itself: the typing stubs of grpc_health's HealthStub name no methods.
        call = channel.unary_unary(
            CHECK_METHOD,
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString,
        )
        answer: health_pb2.HealthCheckResponse = call(
            health_pb2.HealthCheckRequest(service=service), timeout=timeout_s
        )
    return health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status)


def run(args: argparse.Namespace) -> int:
    endpoint: Endpoint = args.endpoint
    service = SERVICE if args.service == "game" else args.service
    what = args.service or "server"
    try:
        status = check(endpoint, service, args.timeout)
    except grpc.RpcError as e:
        exit_status = exit_status_of(e)
        words = details_of(e)
        if exit_status is ExitStatus.NOT_FOUND:
            exit_status = ExitStatus.REFUSED  # no such service: not a match that is missing
            words = "the server knows no such service"
        if args.json:
            _print_json(endpoint, service, None, exit_status, describe_error(e))
        return fail("health", f"{endpoint} {what}: {words}", exit_status, reason_of(e))
    exit_status = ExitStatus.SUCCESS if status == "SERVING" else ExitStatus.REFUSED
    if args.json:
        _print_json(endpoint, service, status, exit_status, None)
    else:
        print(f"{endpoint} {what}: {status}")
    return exit_status


def _print_json(
    endpoint: Endpoint, service: str, status: str | None, exit_status: ExitStatus, error: str | None
) -> None:
    out = {
        "server": str(endpoint),
        "service": service,
        "status": status,
        "ok": exit_status is ExitStatus.SUCCESS,
        "exit_status": int(exit_status),
        "error": error,
    }
    print(json.dumps(out))
