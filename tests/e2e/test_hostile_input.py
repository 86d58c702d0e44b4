"""Hostile input: every RPC of the service, as the descriptor lists them (so a new RPC is
covered without a change here), is sent a battery of hostile requests by a real server
process: control characters, trailing newlines, deep nesting, unknown enum numbers,
extreme numbers, fields as large as the size limit allows and larger, random and truncated
bytes, and wrong tokens. (test_bad_input.py fuzzes the same RPCs with hypothesis, under the
same checks.)

Every answer is OK or a refusal that `refusals.refusal` accepts: never INTERNAL or UNKNOWN,
a message of at most 512 bytes, an ErrorInfo with a reason. Afterwards the server is still
SERVING, logged no traceback and no error, and every stored match still folds.
"""

from __future__ import annotations

import base64
import random
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from bergen.server.bootstrap import MAX_REQUEST_BYTES
from bergen.v1 import bergen_pb2 as pb

from .conftest import ORGANISER_TOKEN
from .refusals import Refusal, refusal
from .servers import ServerFarm
from .test_bad_input import (
    NOTHING_TO_REFUSE,
    RPCS,
    SERVICE,
    World,
    make_world,
    still_healthy_and_every_match_folds,
)

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

Code = grpc.StatusCode
Metadata = tuple[tuple[str, str], ...]
CALL_TIMEOUT_S = 10.0
CLIENT_ERRORS = {
    Code.INVALID_ARGUMENT,
    Code.NOT_FOUND,
    Code.ALREADY_EXISTS,
    Code.UNAUTHENTICATED,
    Code.PERMISSION_DENIED,
    Code.FAILED_PRECONDITION,
    Code.OUT_OF_RANGE,  # a tree size past the newest checkpoint (GetConsistencyProof)
}


@pytest.fixture(scope="module")
def world(module_farm: ServerFarm, module_sqlite_url: str) -> Iterator[World]:
    yield from make_world(module_farm.start(module_sqlite_url, organiser_token=ORGANISER_TOKEN))


def send(world: World, rpc: str, data: bytes, md: Metadata = ()) -> Refusal | None:
    """Send raw request bytes to `rpc`; None when answered OK, else the refusal (checked)."""
    method = SERVICE.methods_by_name[rpc]
    path = f"/{SERVICE.full_name}/{rpc}"
    try:
        if method.server_streaming:
            stream = world.channel.unary_stream(path)(data, metadata=md, timeout=CALL_TIMEOUT_S)
            next(stream, None)  # the first message is the view; enough to know it answered
            stream.cancel()
        else:
            world.channel.unary_unary(path)(data, metadata=md, timeout=CALL_TIMEOUT_S)
    except grpc.RpcError as e:
        if method.server_streaming and e.code() == Code.CANCELLED:  # type: ignore[attr-defined]
            return None
        return refusal(e, f"{rpc}({data[:60]!r}...)")
    return None


def client_error_or_ok(got: Refusal | None, rpc: str, request: Message) -> None:
    if got is None or got.code in CLIENT_ERRORS:
        return
    # ABORTED is right only for a Play whose expected_version is stale.
    stale = rpc == "Play" and request.HasField("expected_version")  # type: ignore[attr-defined]
    assert got.code == Code.ABORTED and stale, f"{rpc}: {got}"


def request_class(rpc: str) -> Any:
    return message_factory.GetMessageClass(SERVICE.methods_by_name[rpc].input_type)


def base_request(world: World, rpc: str) -> Message:
    """A plausible request: an existing match's id where there is a match_id field."""
    request = request_class(rpc)()
    if "match_id" in request.DESCRIPTOR.fields_by_name:
        request.match_id = world.match_ids[-1]
    return request  # type: ignore[no-any-return]


# hostile values -----------------------------------------------------------------------


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode()


HOSTILE_TEXT = [
    "\n",
    "\x00",
    "a\x00b",
    "\x1b[2J\x07\x08",
    "\r\n",
    "\u202eevil\u202c",
    "\ufeff",
    "\u200b",
    "\U0010ffff",
    " " * 100,
    "[" * 30_000,
    '{"a":' * 10_000,
    _b64("[" * 30_000),
    _b64('{"before":' * 4_000),
    _b64('{"before": 1e999999}'),
    "%s%n%x" * 100,
    "../../../../etc/passwd",
    "'; DROP TABLE events; --",
]


def text_values(world: World, f: FieldDescriptor) -> list[str]:
    values = list(HOSTILE_TEXT)
    if f.name == "match_id":
        values += [
            f"{world.match_ids[0]}\n",
            f"\n{world.match_ids[0]}",
            f"{world.match_ids[0]}\x00",
            f"{world.match_ids[0]} ",
            world.match_ids[0].upper(),
        ]
    if f.name == "page_token":
        values += [t + "\n" for t in world.page_tokens]
    return values


def field_values(world: World, f: FieldDescriptor) -> list[Any]:
    t = f.type
    if t == FieldDescriptor.TYPE_STRING:
        return text_values(world, f)
    if t == FieldDescriptor.TYPE_ENUM:
        top = max(v.number for v in f.enum_type.values)
        return [top + 1, 99, -1, 2**31 - 1, -(2**31)]
    if t in (FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_FIXED32):
        return [2**32 - 1, 2**31]
    if t in (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64):
        return [2**64 - 1, 2**63]
    if t in (FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_SINT32):
        return [-(2**31), 2**31 - 1]
    if t in (FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_SINT64):
        return [-(2**63), 2**63 - 1]
    if t == FieldDescriptor.TYPE_BOOL:
        return [True]
    if t == FieldDescriptor.TYPE_BYTES:
        return [b"\x00" * 100, bytes(range(256))]
    if t in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return [float("nan"), float("inf"), -0.0]
    return []


def hostile_requests(world: World, rpc: str) -> Iterator[Message]:
    """The base request with one field (or one field of a submessage) set hostile at a time."""

    def variants(descriptor: Descriptor, depth: int) -> Iterator[tuple[list[str], Any]]:
        for f in descriptor.fields:
            if f.message_type is not None:
                if depth < 2:
                    for path, value in variants(f.message_type, depth + 1):
                        yield [f.name, *path], value
                continue
            for value in field_values(world, f):
                yield [f.name], value

    for path, value in variants(request_class(rpc).DESCRIPTOR, 0):
        request = base_request(world, rpc)
        target: Any = request
        for name in path[:-1]:
            if target.DESCRIPTOR.fields_by_name[name].is_repeated:
                # A list of submessages (WatchMatches' follows): one, of an existing match.
                target = getattr(target, name).add()
                if "match_id" in target.DESCRIPTOR.fields_by_name:
                    target.match_id = world.match_ids[-1]
            else:
                target = getattr(target, name)
        f = target.DESCRIPTOR.fields_by_name[path[-1]]
        if f.is_repeated:
            getattr(target, path[-1]).append(value)
        else:
            setattr(target, path[-1], value)
        yield request


def hostile_bytes(world: World, rpc: str) -> Iterator[bytes]:
    rng = random.Random(f"hostile {rpc}")
    good = base_request(world, rpc).SerializeToString()
    yield b"\x00"
    yield b"\xff" * 16
    yield b"\x0a\xff\xff\xff\xff\x0f"  # a length past the end
    yield b"\x0a\x02\xc3\x28"  # field 1 as invalid UTF-8
    yield b"\x0b" * 10_000  # groups nested ten thousand deep
    yield b"\x0b" * 90 + b"\x0c" * 90
    for f in request_class(rpc).DESCRIPTOR.fields:
        # Length-delimited fields nested deep under each field number the message has.
        inner = b""
        for depth in range(1, 1001):
            inner = _varint(f.number << 3 | 2) + _varint(len(inner)) + inner
            if depth in (1, 2, 8, 64, 1000):
                yield inner
    for _ in range(30):
        yield rng.randbytes(rng.randrange(1, 300))
    for cut in range(len(good)):
        yield good[:cut] + bytes([rng.randrange(256)])


# the tests --------------------------------------------------------------------------------


@pytest.mark.parametrize("rpc", RPCS)
def test_hostile_field_values_are_answered_ok_or_refused_cleanly(world: World, rpc: str) -> None:
    refused: set[str] = set()
    for request in hostile_requests(world, rpc):
        got = send(world, rpc, request.SerializeToString())
        client_error_or_ok(got, rpc, request)
        if got is not None:
            refused.add(got.reason)
    if request_class(rpc).DESCRIPTOR.fields and rpc not in NOTHING_TO_REFUSE:
        assert refused, f"{rpc}: nothing was refused, so nothing was tested"
    still_healthy_and_every_match_folds(world)


@pytest.mark.parametrize("rpc", RPCS)
def test_hostile_bytes_are_answered_ok_or_refused_cleanly(world: World, rpc: str) -> None:
    reasons: set[str] = set()
    for data in hostile_bytes(world, rpc):
        got = send(world, rpc, data)
        assert got is None or got.code in CLIENT_ERRORS, f"{rpc}({data[:40]!r}): {got}"
        if got is not None:
            reasons.add(got.reason)
    assert "MALFORMED_REQUEST" in reasons
    still_healthy_and_every_match_folds(world)


@pytest.mark.parametrize("rpc", RPCS)
def test_requests_up_to_the_size_limit_are_read_and_larger_ones_refused_with_a_reason(
    world: World, rpc: str
) -> None:
    # An unknown field (number 1000) of the exact size wanted: every message has room.
    def of_size(size: int) -> bytes:
        head = base_request(world, rpc).SerializeToString()
        for pad in range(size, 0, -1):
            data = head + _unknown_field(1000, pad)
            if len(data) == size:
                return data
        raise AssertionError(size)

    at_limit = send(world, rpc, of_size(MAX_REQUEST_BYTES))
    assert at_limit is None or at_limit.code in CLIENT_ERRORS
    over = send(world, rpc, of_size(MAX_REQUEST_BYTES + 1))
    assert over is not None and (over.code, over.reason) == (
        Code.RESOURCE_EXHAUSTED,
        "REQUEST_TOO_LARGE",
    )
    # Known string fields as large as the limit allows: a message of at most 512 bytes back.
    for f in request_class(rpc).DESCRIPTOR.fields:
        if f.type == FieldDescriptor.TYPE_STRING:
            request = base_request(world, rpc)
            if f.is_repeated:
                getattr(request, f.name).append("p" * (MAX_REQUEST_BYTES - 200))
            else:
                setattr(request, f.name, "p" * (MAX_REQUEST_BYTES - 200))
            got = send(world, rpc, request.SerializeToString())
            client_error_or_ok(got, rpc, request)
    still_healthy_and_every_match_folds(world)


def _unknown_field(number: int, total: int) -> bytes:
    """A length-delimited unknown field of `total` bytes in all (when it can be)."""
    tag = _varint(number << 3 | 2)
    body = max(0, total - len(tag) - 3)
    return tag + _varint(body) + b"u" * body


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


WRONG_AUTHORIZATION = [
    "Bearer",
    "Bearer ",
    "bearer x",
    "Basic dXNlcjpwYXNz",
    "Bearer " + "t" * 4000,
    "Bearer bgs_" + "A" * 43,
    f"Bearer {ORGANISER_TOKEN}x",
    f"Bearer  {ORGANISER_TOKEN}",
    "Bearer a b c",
]


@pytest.mark.parametrize("rpc", RPCS)
def test_wrong_tokens_are_answered_ok_or_refused_cleanly(world: World, rpc: str) -> None:
    request = base_request(world, rpc)
    data = request.SerializeToString()
    cases: list[Metadata] = [(("authorization", value),) for value in WRONG_AUTHORIZATION]
    cases.append((("authorization", f"Bearer {world.tokens[0]}"),) * 2)
    # A seat token of one match presented for another.
    cases.append((("authorization", f"Bearer {world.tokens[0]}"),))
    for md in cases:
        got = send(world, rpc, data, md)
        client_error_or_ok(got, rpc, request)
    still_healthy_and_every_match_folds(world)


MATCH_ID_RPCS = [
    rpc for rpc in RPCS if "match_id" in SERVICE.methods_by_name[rpc].input_type.fields_by_name
]


@pytest.mark.parametrize("rpc", MATCH_ID_RPCS)
def test_a_match_id_with_a_trailing_newline_is_invalid_argument(world: World, rpc: str) -> None:
    for match_id in world.match_ids:
        request = base_request(world, rpc)
        request.match_id = match_id + "\n"  # type: ignore[attr-defined]
        got = send(world, rpc, request.SerializeToString())
        assert got is not None and (got.code, got.reason) == (
            Code.INVALID_ARGUMENT,
            "INVALID_MATCH_ID",
        ), got


@pytest.mark.parametrize(
    "token",
    ["[" * 50_000, _b64("[" * 40_000), _b64('{"a":' * 9_000), _b64("[" * 900 + "]" * 900)],
    ids=["brackets", "base64 brackets", "base64 objects", "base64 balanced"],
)
def test_a_deeply_nested_page_token_is_invalid_argument(world: World, token: str) -> None:
    got = send(world, "ListMatches", pb.ListMatchesRequest(page_token=token).SerializeToString())
    assert got is not None and got.code == Code.INVALID_ARGUMENT, got
    still_healthy_and_every_match_folds(world)
