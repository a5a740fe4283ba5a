"""The token interceptor on a real gRPC server: every kind of call (unary
or streaming, either way) needs the token, the bearer scheme is matched
without regard to case, and health and reflection stay open. The health
service answers `List` as well as `Check`. On a node's public server,
joining (JoinService) needs the peer credential instead of the token."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from cortex.api.admission import public_admission
from cortex.api.auth import TokenAuthInterceptor, bearer_token, peer_metadata, token_metadata
from cortex.api.server import HealthService, serve
from cortex.internal.v1 import peer_pb2 as peer_pb
from cortex.internal.v1 import peer_pb2_grpc as peer_grpc
from cortex.v1 import cortex_pb2 as pb
from cortex.v1 import cortex_pb2_grpc as pb_grpc
from tests.cluster import free_ports

TOKEN = "the-api-token-1234"
SECRET = "the-cluster-secret-5678"
SERVICE = "/cortex.v1.CortexService/"


def _echo_unary(request: bytes, context: grpc.ServicerContext) -> bytes:
    return request


def _echo_server_stream(request: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
    yield request
    yield request


def _join_client_stream(requests: Iterator[bytes], context: grpc.ServicerContext) -> bytes:
    return b"+".join(requests)


def _echo_bidi(requests: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
    yield from requests


@pytest.fixture
def server() -> Iterator[tuple[grpc.Channel, HealthService]]:
    """A server with one method of each kind under the Cortex service name
    (whose API has no client-streaming call yet), behind the interceptor."""
    from concurrent import futures

    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=4), interceptors=[TokenAuthInterceptor(TOKEN)]
    )
    handlers = {
        "Unary": grpc.unary_unary_rpc_method_handler(_echo_unary),
        "ServerStream": grpc.unary_stream_rpc_method_handler(_echo_server_stream),
        "ClientStream": grpc.stream_unary_rpc_method_handler(_join_client_stream),
        "Bidi": grpc.stream_stream_rpc_method_handler(_echo_bidi),
    }
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("cortex.v1.CortexService", handlers),)
    )
    health = HealthService()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    health.set("cortex.v1.CortexService", health_pb2.HealthCheckResponse.SERVING)
    port = free_ports(1)[0]
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield channel, health
    finally:
        channel.close()
        server.stop(None)


def call_every_kind(channel: grpc.Channel, header: str | None) -> list[object]:
    metadata = [("authorization", header)] if header is not None else None
    results: list[object] = []
    calls = [
        lambda: channel.unary_unary(SERVICE + "Unary")(b"a", metadata=metadata, timeout=5),
        lambda: list(
            channel.unary_stream(SERVICE + "ServerStream")(b"b", metadata=metadata, timeout=5)
        ),
        lambda: channel.stream_unary(SERVICE + "ClientStream")(
            iter([b"c", b"d"]), metadata=metadata, timeout=5
        ),
        lambda: list(
            channel.stream_stream(SERVICE + "Bidi")(
                iter([b"e", b"f"]), metadata=metadata, timeout=5
            )
        ),
    ]
    for call in calls:
        try:
            results.append(call())
        except grpc.RpcError as err:
            results.append(err.code())
    return results


@pytest.mark.parametrize("header", [None, "", "Bearer wrong-token", "Basic " + TOKEN, TOKEN])
def test_every_kind_of_call_is_refused_without_the_token(
    server: tuple[grpc.Channel, HealthService], header: str | None
) -> None:
    channel, _ = server
    assert call_every_kind(channel, header) == [grpc.StatusCode.UNAUTHENTICATED] * 4


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "bEaReR"])
def test_every_kind_of_call_goes_through_with_the_token(
    server: tuple[grpc.Channel, HealthService], scheme: str
) -> None:
    channel, _ = server
    assert call_every_kind(channel, f"{scheme} {TOKEN}") == [
        b"a",
        [b"b", b"b"],
        b"c+d",
        [b"e", b"f"],
    ]


def test_health_stays_open_and_lists_every_service(
    server: tuple[grpc.Channel, HealthService],
) -> None:
    channel, health = server
    stub = health_pb2_grpc.HealthStub(channel)
    check = stub.Check(health_pb2.HealthCheckRequest(service="cortex.v1.CortexService"), timeout=5)
    assert check.status == health_pb2.HealthCheckResponse.SERVING
    listed = stub.List(health_pb2.HealthListRequest(), timeout=5)
    assert {name: s.status for name, s in listed.statuses.items()} == {
        "": health_pb2.HealthCheckResponse.SERVING,
        "cortex.v1.CortexService": health_pb2.HealthCheckResponse.SERVING,
    }
    health.enter_graceful_shutdown()
    health.set("cortex.v1.CortexService", health_pb2.HealthCheckResponse.SERVING)  # ignored now
    listed = stub.List(health_pb2.HealthListRequest(), timeout=5)
    assert {s.status for s in listed.statuses.values()} == {
        health_pb2.HealthCheckResponse.NOT_SERVING
    }


@pytest.mark.parametrize(
    ("value", "token"),
    [
        ("Bearer abc", b"abc"),
        ("bearer abc", b"abc"),
        (b"BEARER  abc ", b"abc"),
        ("Bearer", None),
        ("Bearer ", None),
        ("Basic abc", None),
        ("abc", None),
    ],
)
def test_bearer_token_parsing(value: str | bytes, token: bytes | None) -> None:
    assert bearer_token(value) == token


class _Challenges(peer_grpc.JoinServiceServicer):
    def JoinChallenge(
        self, request: peer_pb.JoinChallengeRequest, context: grpc.ServicerContext
    ) -> peer_pb.JoinChallengeResponse:
        return peer_pb.JoinChallengeResponse(nonce="n", ttl_ms=1)


class _Status(pb_grpc.CortexServiceServicer):
    def GetClusterStatus(
        self, request: pb.GetClusterStatusRequest, context: grpc.ServicerContext
    ) -> pb.GetClusterStatusResponse:
        return pb.GetClusterStatusResponse(node_id="n1")


def test_joins_on_the_public_port_need_the_peer_credential_not_the_token() -> None:
    address = f"127.0.0.1:{free_ports(1)[0]}"
    server = serve(
        _Status(),
        address,
        public_admission("n1", 4, 2, 2),
        api_token=TOKEN,
        joins=_Challenges(),
        secret=SECRET,
    )
    channel = grpc.insecure_channel(address)
    joins = peer_grpc.JoinServiceStub(channel)
    cortex = pb_grpc.CortexServiceStub(channel)

    def code(call: Any, metadata: Any) -> object:
        try:
            call(metadata=metadata, timeout=5)
        except grpc.RpcError as err:
            return err.code()
        return "ok"

    def challenge(**kw: Any) -> Any:
        return joins.JoinChallenge(peer_pb.JoinChallengeRequest(), **kw)

    def status(**kw: Any) -> Any:
        return cortex.GetClusterStatus(pb.GetClusterStatusRequest(), **kw)

    try:
        assert code(challenge, peer_metadata(SECRET)) == "ok"
        for metadata in ((), token_metadata(TOKEN), peer_metadata("another-secret-of-length")):
            assert code(challenge, metadata) == grpc.StatusCode.UNAUTHENTICATED
        assert code(status, token_metadata(TOKEN)) == "ok"
        assert code(status, peer_metadata(SECRET)) == grpc.StatusCode.UNAUTHENTICATED
        # Joining is not part of the public service.
        with pytest.raises(grpc.RpcError) as missing:
            channel.unary_unary("/cortex.v1.CortexService/JoinChallenge")(
                b"", metadata=token_metadata(TOKEN), timeout=5
            )
        assert missing.value.code() == grpc.StatusCode.UNIMPLEMENTED
    finally:
        channel.close()
        server.stop(None)
