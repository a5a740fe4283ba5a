"""Server reflection on a real gRPC server, through both protocols
(grpc.reflection.v1 and v1alpha): it lists only the public services, though
an internal one (JoinService) is served on the same port; the files it
serves carry the proto's comments and resolve in a client's descriptor pool;
names it does not know, internal ones included, get NOT_FOUND."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_health.v1 import health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

from cortex.api import reflection
from cortex.api.server import HealthService, enable_reflection
from cortex.internal.v1 import peer_pb2_grpc
from cortex.v1 import cortex_pb2_grpc

PUBLIC_SERVICES = [
    "cortex.v1.CortexService",
    "grpc.health.v1.Health",
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
]
# SourceCodeInfo path of CortexService.SubmitTask: service 0, method 0.
SUBMIT_TASK_PATH = [6, 0, 2, 0]
NOT_FOUND = grpc.StatusCode.NOT_FOUND.value[0]
INVALID_ARGUMENT = grpc.StatusCode.INVALID_ARGUMENT.value[0]


@pytest.fixture(scope="module")
def channel() -> Iterator[grpc.Channel]:
    """The public server's services, registered as cortex.api.server does,
    JoinService included, on 127.0.0.1."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    cortex_pb2_grpc.add_CortexServiceServicer_to_server(
        cortex_pb2_grpc.CortexServiceServicer(), server
    )
    peer_pb2_grpc.add_JoinServiceServicer_to_server(peer_pb2_grpc.JoinServiceServicer(), server)
    health_pb2_grpc.add_HealthServicer_to_server(HealthService(), server)
    enable_reflection(server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield channel
    finally:
        server.stop(None)


def _ask(
    channel: grpc.Channel, service: str, *requests: reflection_pb2.ServerReflectionRequest
) -> list[reflection_pb2.ServerReflectionResponse]:
    """One reflection stream carrying `requests`; v1 is asked with v1alpha's
    message classes (the two are the same on the wire)."""
    if service == reflection.V1ALPHA_SERVICE_NAME:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        return list(stub.ServerReflectionInfo(iter(requests), timeout=10))
    call = channel.stream_stream(
        f"/{service}/ServerReflectionInfo",
        request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
        response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
    )
    return list(call(iter(requests), timeout=10))


def _files(
    response: reflection_pb2.ServerReflectionResponse,
) -> list[descriptor_pb2.FileDescriptorProto]:
    assert response.WhichOneof("message_response") == "file_descriptor_response", response
    return [
        descriptor_pb2.FileDescriptorProto.FromString(data)
        for data in response.file_descriptor_response.file_descriptor_proto
    ]


def _comment(file: descriptor_pb2.FileDescriptorProto, path: list[int]) -> str:
    for location in file.source_code_info.location:
        if list(location.path) == path:
            return location.leading_comments
    return ""


versions = pytest.mark.parametrize("service", reflection.SERVICE_NAMES)


@versions
def test_lists_the_public_services_only(channel: grpc.Channel, service: str) -> None:
    (response,) = _ask(channel, service, reflection_pb2.ServerReflectionRequest(list_services=""))
    names = [entry.name for entry in response.list_services_response.service]
    assert names == PUBLIC_SERVICES
    assert not [name for name in names if "internal" in name]


@versions
def test_describes_the_service_with_its_comments(channel: grpc.Channel, service: str) -> None:
    (response,) = _ask(
        channel,
        service,
        reflection_pb2.ServerReflectionRequest(file_containing_symbol="cortex.v1.CortexService"),
    )
    files = _files(response)
    assert [file.name for file in files] == [
        "cortex/v1/cortex.proto",
        "google/protobuf/duration.proto",
        "google/protobuf/struct.proto",
        "google/protobuf/timestamp.proto",
    ]
    contract = files[0]
    assert contract.service[0].method[0].name == "SubmitTask"
    assert "Validates a task spec and proposes it." in _comment(contract, SUBMIT_TASK_PATH)
    assert "The public contract of a Cortex node." in _comment(contract, [6, 0])


@versions
def test_finds_every_kind_of_symbol(channel: grpc.Channel, service: str) -> None:
    symbols = [
        "cortex.v1.CortexService.SubmitTask",  # a method
        "cortex.v1.Task",  # a message
        "cortex.v1.Task.spec",  # a field
        "cortex.v1.Event.change",  # a oneof
        "cortex.v1.TaskState",  # an enum
        "cortex.v1.TASK_STATE_QUEUED",  # an enum value, beside its enum
    ]
    responses = _ask(
        channel,
        service,
        *(reflection_pb2.ServerReflectionRequest(file_containing_symbol=s) for s in symbols),
    )
    assert [response.original_request.file_containing_symbol for response in responses] == symbols
    assert {_files(response)[0].name for response in responses} == {"cortex/v1/cortex.proto"}


@versions
def test_never_describes_the_internal_package(channel: grpc.Channel, service: str) -> None:
    requests = [
        reflection_pb2.ServerReflectionRequest(
            file_containing_symbol="cortex.internal.v1.JoinService"
        ),
        reflection_pb2.ServerReflectionRequest(
            file_containing_symbol="cortex.internal.v1.HeartbeatRequest"
        ),
        reflection_pb2.ServerReflectionRequest(file_by_filename="cortex/internal/v1/peer.proto"),
    ]
    for response in _ask(channel, service, *requests):
        assert response.error_response.error_code == NOT_FOUND
        assert "not found" in response.error_response.error_message


@versions
def test_answers_files_by_name(channel: grpc.Channel, service: str) -> None:
    found, health, missing = _ask(
        channel,
        service,
        reflection_pb2.ServerReflectionRequest(file_by_filename="google/protobuf/struct.proto"),
        reflection_pb2.ServerReflectionRequest(
            file_containing_symbol="grpc.health.v1.Health.Check"
        ),
        reflection_pb2.ServerReflectionRequest(file_by_filename="no/such.proto"),
    )
    assert [file.name for file in _files(found)] == ["google/protobuf/struct.proto"]
    assert [file.package for file in _files(health)] == ["grpc.health.v1"]
    assert missing.error_response.error_code == NOT_FOUND
    assert missing.error_response.error_message == "file not found: no/such.proto"
    assert missing.original_request.file_by_filename == "no/such.proto"


@versions
def test_extensions_and_empty_requests(channel: grpc.Channel, service: str) -> None:
    numbers, unknown_type, extension, empty = _ask(
        channel,
        service,
        reflection_pb2.ServerReflectionRequest(all_extension_numbers_of_type="cortex.v1.Task"),
        reflection_pb2.ServerReflectionRequest(all_extension_numbers_of_type="cortex.v1.Nope"),
        reflection_pb2.ServerReflectionRequest(
            file_containing_extension=reflection_pb2.ExtensionRequest(
                containing_type="cortex.v1.Task", extension_number=100
            )
        ),
        reflection_pb2.ServerReflectionRequest(host="example"),
    )
    assert numbers.all_extension_numbers_response.base_type_name == "cortex.v1.Task"
    assert list(numbers.all_extension_numbers_response.extension_number) == []
    assert unknown_type.error_response.error_code == NOT_FOUND
    assert extension.error_response.error_code == NOT_FOUND
    assert empty.error_response.error_code == INVALID_ARGUMENT
    assert empty.valid_host == "example"


@versions
def test_the_reflection_services_describe_themselves(channel: grpc.Channel, service: str) -> None:
    (response,) = _ask(
        channel, service, reflection_pb2.ServerReflectionRequest(file_containing_symbol=service)
    )
    (file,) = _files(response)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    method = pool.FindServiceByName(service).methods_by_name["ServerReflectionInfo"]
    assert method.input_type.full_name == service.rsplit(".", 1)[0] + ".ServerReflectionRequest"


def test_a_client_descriptor_pool_resolves_the_contract(channel: grpc.Channel) -> None:
    """grpcio-reflection's own client (v1alpha) builds a pool from what the
    server sends, imports included, and keeps the comments."""
    database = ProtoReflectionDescriptorDatabase(channel)
    pool = descriptor_pool.DescriptorPool(database)
    method = pool.FindMethodByName("cortex.v1.CortexService.StreamTaskOutput")
    assert method.output_type.fields_by_name["data"].message_type.name == "OutputData"
    assert method.input_type.fields_by_name["read_options"].message_type.name == "ReadOptions"
    proto = database.FindFileContainingSymbol("cortex.v1.CortexService")
    assert "Validates a task spec" in _comment(proto, SUBMIT_TASK_PATH)
    assert list(database.get_services()) == PUBLIC_SERVICES


def test_refuses_to_list_what_it_cannot_describe() -> None:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    with pytest.raises(ValueError, match="cortex.internal.v1.JoinService"):
        reflection.add_reflection_to_server(server, ["cortex.internal.v1.JoinService"])


def test_the_catalog_holds_public_files_only() -> None:
    catalog = reflection.public_catalog()
    packages = {
        descriptor_pb2.FileDescriptorProto.FromString(data).package
        for data in catalog.files.values()
    }
    assert packages == {
        "cortex.v1",
        "google.protobuf",
        "grpc.health.v1",
        "grpc.reflection.v1",
        "grpc.reflection.v1alpha",
    }
