"""Bad input: hypothesis sends malformed and random requests to every RPC of a real server.

Each is answered OK or with a client error (INVALID_ARGUMENT, NOT_FOUND, UNAUTHENTICATED,
PERMISSION_DENIED, FAILED_PRECONDITION; ABORTED only for a stale expected_version), never
INTERNAL, UNKNOWN or a dropped connection, and every refusal carries a short message and an
ErrorInfo with its reason (`refusals.refusal`). Afterwards the server still answers health
checks and every stored match still folds and verifies.
"""

from __future__ import annotations

import secrets
import string
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
from google.protobuf import message_factory
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError, Message
from grpc_health.v1 import health_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bergen.v1 import bergen_pb2 as pb

from .client import Client, Table, seat_everyone
from .conftest import ORGANISER_TOKEN
from .refusals import refusal
from .servers import ServerFarm, ServerProcess
from .truth import check_every_match

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

Code = grpc.StatusCode
CLIENT_ERRORS = {
    Code.INVALID_ARGUMENT,
    Code.NOT_FOUND,
    Code.ALREADY_EXISTS,
    Code.UNAUTHENTICATED,
    Code.PERMISSION_DENIED,
    Code.FAILED_PRECONDITION,
    Code.OUT_OF_RANGE,  # a tree size past the newest checkpoint (GetConsistencyProof)
}
NOTHING_TO_REFUSE = {
    # Any consistency_from is answered: below the tree's size with the proof from it, else
    # without one (a witness shown a smaller tree must get the checkpoint to show it).
    "GetCheckpoint",
}
"""RPCs whose fields take any value: no refusal to look for."""
EXAMPLES = 200
CALL_TIMEOUT_S = 10.0

SERVICE = pb.DESCRIPTOR.services_by_name["BergenService"]
RPCS = sorted(SERVICE.methods_by_name)
"""Every RPC of the service, as the .proto has it: a new one is covered without a change here."""


@dataclass
class World:
    """A server with matches in every phase, and the ids and tokens the strategies may use."""

    server: ServerProcess
    channel: grpc.Channel
    match_ids: list[str]
    tokens: list[str]
    page_tokens: list[str]
    checked: dict[str, int] = field(default_factory=dict)
    """Each stream checked so far (gap-free, verifying, folding), at the version it had."""


@pytest.fixture(scope="module")
def world(module_farm: ServerFarm, module_sqlite_url: str) -> Iterator[World]:
    yield from make_world(module_farm.start(module_sqlite_url, organiser_token=ORGANISER_TOKEN))


def make_world(server: ServerProcess) -> Iterator[World]:
    """A world on `server` (given the organiser token), for as long as the generator lives."""
    with Client(server.target) as client:
        seating = client.create(4, preset="pips")
        half = [client.join(seating.match_id, f"early {i}") for i in range(2)]
        playing: list[Table] = [seat_everyone(client, n) for n in (2, 3, 4)]
        ended = seat_everyone(client, 2)
        client.abandon(ended.match_id, ORGANISER_TOKEN, "done")
        page = client.stub.ListMatches(pb.ListMatchesRequest(page_size=1))
    channel = grpc.insecure_channel(server.target)
    yield World(
        server,
        channel,
        [seating.match_id, ended.match_id, *(t.match_id for t in playing)],
        [j.seat_token for j in half]
        + [t for table in [*playing, ended] for t in table.tokens]
        + [ORGANISER_TOKEN],
        [page.next_page_token],
    )
    channel.close()


# strategies -----------------------------------------------------------------------------

UINT32 = st.one_of(st.integers(0, 8), st.integers(0, 2**32 - 1))
UINT64 = st.one_of(st.integers(0, 200), st.integers(0, 2**64 - 1))
ENUM = st.one_of(st.integers(0, 4), st.integers(-(2**31), 2**31 - 1))
TEXT = st.one_of(
    st.text(max_size=30),
    st.text(max_size=3000),
    st.text(alphabet=string.printable, min_size=60, max_size=10_000),
    st.sampled_from(["", " ", "\x00", "\u200b", "standard", "custom", "a" * 101, "é" * 300]),
)
PRINTABLE = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=300)


def match_ids(world: World) -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(world.match_ids),
        st.uuids().map(str),
        TEXT,
        st.sampled_from(world.match_ids).map(str.upper),
        st.sampled_from(world.match_ids).map(lambda m: m + " "),
    )


def metadata(world: World) -> st.SearchStrategy[tuple[tuple[str, str], ...]]:
    token = st.one_of(
        st.sampled_from(world.tokens),
        st.just("bgs_" + secrets.token_urlsafe(32)),
        PRINTABLE,
    )
    value = st.one_of(token.map(lambda t: f"Bearer {t}"), PRINTABLE)
    return st.one_of(
        st.just(()),
        value.map(lambda v: (("authorization", v),)),
        st.lists(value, min_size=2, max_size=3).map(
            lambda vs: tuple(("authorization", v) for v in vs)
        ),
    )


def tiles() -> st.SearchStrategy[pb.Tile]:
    small = st.integers(0, 7)
    return st.builds(pb.Tile, low=st.one_of(small, UINT32), high=st.one_of(small, UINT32))


def optional(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy)


def messages(world: World, descriptor: Any, depth: int = 0) -> st.SearchStrategy[Message]:
    """Messages of `descriptor`'s type with random values in every field (each optional
    field and submessage present or not), from the descriptor alone."""
    kind = message_factory.GetMessageClass(descriptor)
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for f in descriptor.fields:
        value = field_values(world, f, depth)
        if f.is_repeated:
            value = st.lists(value, max_size=3)
        if f.message_type is not None or f.has_presence:
            value = optional(value)
        fields[f.name] = value

    @st.composite
    def build(draw: st.DrawFn) -> Message:
        values = {name: draw(strategy) for name, strategy in fields.items()}
        return kind(**{k: v for k, v in values.items() if v is not None})

    return build()


def field_values(world: World, f: Any, depth: int) -> st.SearchStrategy[Any]:
    t = f.type
    if f.message_type is not None:
        if f.message_type.full_name == "bergen.v1.Tile":
            return tiles()
        if depth > 2:
            return st.none()
        return messages(world, f.message_type, depth + 1)
    if t == FieldDescriptor.TYPE_STRING:
        if f.name == "match_id":
            return match_ids(world)
        if f.name == "page_token":
            return page_tokens(world)
        return TEXT
    if t == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if t == FieldDescriptor.TYPE_ENUM:
        return st.one_of(st.sampled_from([v.number for v in f.enum_type.values]), ENUM)
    if t in (FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_FIXED32):
        return st.one_of(st.sampled_from([0, 1, 2, 3, 4, 5, 15]), UINT32)
    if t in (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64):
        return UINT64
    if t in (
        FieldDescriptor.TYPE_INT32,
        FieldDescriptor.TYPE_SINT32,
        FieldDescriptor.TYPE_SFIXED32,
    ):
        return st.integers(-(2**31), 2**31 - 1)
    if t in (
        FieldDescriptor.TYPE_INT64,
        FieldDescriptor.TYPE_SINT64,
        FieldDescriptor.TYPE_SFIXED64,
    ):
        return st.integers(-(2**63), 2**63 - 1)
    if t == FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=200)
    if t in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return st.floats(allow_nan=True, width=32)
    raise AssertionError(f"no strategy for field {f.full_name}")


def page_tokens(world: World) -> st.SearchStrategy[str]:
    return st.one_of(
        TEXT,
        st.sampled_from(world.page_tokens),
        st.binary(max_size=60).map(_b64),
        st.sampled_from(
            ['{"before": 1e999}', '{"before": "x"}', "[1]", "null", '{"before": -1}', "{}"]
        ).map(lambda s: _b64(s.encode())),
    )


def requests(world: World, rpc: str) -> st.SearchStrategy[Message]:
    """Random field values for `rpc`'s request message."""
    return messages(world, SERVICE.methods_by_name[rpc].input_type)


def _b64(data: bytes) -> str:
    import base64

    return base64.urlsafe_b64encode(data).decode()


def raw_requests(world: World, rpc: str) -> st.SearchStrategy[bytes]:
    """Bytes that are mostly not a valid message: random, or a valid one with bytes changed."""

    @st.composite
    def mutated(draw: st.DrawFn) -> bytes:
        data = bytearray(draw(requests(world, rpc)).SerializeToString())
        for _ in range(draw(st.integers(1, 4))):
            if not data:
                break
            i = draw(st.integers(0, len(data) - 1))
            data[i] = draw(st.integers(0, 255))
        if draw(st.booleans()):
            data = data[: draw(st.integers(0, len(data)))]
        return bytes(data)

    return st.one_of(st.binary(max_size=2000), mutated())


# the calls --------------------------------------------------------------------------------


def call(world: World, rpc: str, data: bytes, md: tuple[tuple[str, str], ...]) -> Code:
    """Send raw request bytes; returns the status (OK on success)."""
    path = f"/{SERVICE.full_name}/{rpc}"
    try:
        if SERVICE.methods_by_name[rpc].server_streaming:
            stream = world.channel.unary_stream(path)(data, metadata=md, timeout=CALL_TIMEOUT_S)
            next(stream, None)  # the first message is the view; enough to know it answered
            stream.cancel()
        else:
            world.channel.unary_unary(path)(data, metadata=md, timeout=CALL_TIMEOUT_S)
    except grpc.RpcError as e:
        streaming = SERVICE.methods_by_name[rpc].server_streaming
        if streaming and e.code() == Code.CANCELLED:  # type: ignore[attr-defined]
            return Code.OK
        code = refusal(e, rpc).code
        assert code in CLIENT_ERRORS or _stale(rpc, data, code), (
            f"{rpc} answered {code.name}: {e.details()}"  # type: ignore[attr-defined]
        )
        return code
    return Code.OK


def _stale(rpc: str, data: bytes, code: Code) -> bool:
    """ABORTED is right only for a Play whose expected_version is stale."""
    if code != Code.ABORTED or rpc != "Play":
        return False
    try:
        request = pb.PlayRequest.FromString(data)
    except DecodeError:
        return False
    return request.HasField("expected_version")


def still_healthy_and_every_match_folds(world: World) -> None:
    assert world.server.health() == health_pb2.HealthCheckResponse.SERVING
    assert world.server.health(SERVICE.full_name) == health_pb2.HealthCheckResponse.SERVING
    check_every_match(world.server.database, world.checked)
    assert set(world.match_ids) <= set(world.checked)
    log = world.server.log()
    assert "Traceback" not in log and " ERROR " not in log, world.server.log_tail()


HYPOTHESIS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.parametrize("rpc", RPCS)
def test_random_field_values_are_answered_ok_or_with_a_client_error(world: World, rpc: str) -> None:
    seen: set[Code] = set()

    @HYPOTHESIS
    @given(request=requests(world, rpc), md=metadata(world))
    def send(request: Message, md: tuple[tuple[str, str], ...]) -> None:
        seen.add(call(world, rpc, request.SerializeToString(), md))

    send()
    if SERVICE.methods_by_name[rpc].input_type.fields and rpc not in NOTHING_TO_REFUSE:
        assert seen - {Code.OK}, f"{rpc}: no request was refused, so nothing was tested"
    still_healthy_and_every_match_folds(world)


@pytest.mark.parametrize("rpc", RPCS)
def test_malformed_request_bytes_are_answered_ok_or_with_a_client_error(
    world: World, rpc: str
) -> None:
    seen: set[Code] = set()

    @HYPOTHESIS
    @given(data=raw_requests(world, rpc), md=metadata(world))
    def send(data: bytes, md: tuple[tuple[str, str], ...]) -> None:
        seen.add(call(world, rpc, data, md))

    send()
    assert Code.INVALID_ARGUMENT in seen or Code.UNAUTHENTICATED in seen, seen
    still_healthy_and_every_match_folds(world)


@pytest.mark.parametrize("rpc", RPCS)
def test_a_request_that_is_not_a_message_at_all_is_invalid_argument(world: World, rpc: str) -> None:
    # A field tag of 0 is never valid protobuf.
    assert call(world, rpc, b"\x00\x01\x02", ()) == Code.INVALID_ARGUMENT
