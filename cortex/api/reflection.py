"""Server reflection for the public gRPC server, under both protocol names:
`grpc.reflection.v1` and the older `grpc.reflection.v1alpha` that many
clients still ask for. Answers come from the public contract's descriptor
set, built with its source info by scripts/gen_proto.sh, so the files served
carry the proto's comments and `grpcurl describe` shows them. Only public
files are known here: nothing of cortex.internal.v1 is listed or described,
whatever else the server serves."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources

import grpc
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import FileDescriptor
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2

V1_SERVICE_NAME = "grpc.reflection.v1.ServerReflection"
V1ALPHA_SERVICE_NAME = "grpc.reflection.v1alpha.ServerReflection"
SERVICE_NAMES = (V1_SERVICE_NAME, V1ALPHA_SERVICE_NAME)
# The public contract with comments and imports, in the cortex.v1 package.
DESCRIPTOR_SET = "cortex_descriptor.binpb"
_V1_FILE_NAME = "grpc/reflection/v1/reflection.proto"
_V1_PACKAGE = "grpc.reflection.v1"


@dataclass(frozen=True)
class DescriptorCatalog:
    """The files reflection may serve, serialized, and where each symbol and
    extension is declared."""

    files: Mapping[str, bytes]
    dependencies: Mapping[str, tuple[str, ...]]
    symbols: Mapping[str, str]  # fully qualified name -> file name
    messages: frozenset[str]
    services: frozenset[str]
    extensions: Mapping[tuple[str, int], str]  # (extended message, number) -> file name

    @classmethod
    def of(cls, files: Iterable[descriptor_pb2.FileDescriptorProto]) -> DescriptorCatalog:
        """Indexes `files`; every file's imports must be among them."""
        index = _Index()
        serialized: dict[str, bytes] = {}
        dependencies: dict[str, tuple[str, ...]] = {}
        for file in files:
            serialized[file.name] = file.SerializeToString()
            dependencies[file.name] = tuple(file.dependency)
            index.add_file(file)
        for name, imports in dependencies.items():
            missing = [dependency for dependency in imports if dependency not in serialized]
            if missing:
                raise ValueError(
                    f"{name} imports {', '.join(missing)}, which is not in the catalog"
                )
        return cls(
            files=serialized,
            dependencies=dependencies,
            symbols=index.symbols,
            messages=frozenset(index.messages),
            services=frozenset(index.services),
            extensions=index.extensions,
        )

    def with_dependencies(self, name: str) -> list[bytes]:
        """The file `name` first, then everything it imports, directly or not."""
        order: dict[str, None] = {}
        pending = [name]
        while pending:
            current = pending.pop()
            if current not in order:
                order[current] = None
                pending.extend(reversed(self.dependencies[current]))
        return [self.files[file] for file in order]


class _Index:
    """Names declared in files, as protobuf's descriptor pool finds them: an
    enum's values sit beside the enum, not inside it."""

    def __init__(self) -> None:
        self.symbols: dict[str, str] = {}
        self.messages: set[str] = set()
        self.services: set[str] = set()
        self.extensions: dict[tuple[str, int], str] = {}

    def add_file(self, file: descriptor_pb2.FileDescriptorProto) -> None:
        scope = f"{file.package}." if file.package else ""
        for message in file.message_type:
            self._add_message(file.name, scope, message)
        for enum in file.enum_type:
            self._add_enum(file.name, scope, enum)
        for extension in file.extension:
            self._add_extension(file.name, scope, extension)
        for service in file.service:
            service_name = scope + service.name
            self.symbols[service_name] = file.name
            self.services.add(service_name)
            for method in service.method:
                self.symbols[f"{service_name}.{method.name}"] = file.name

    def _add_message(
        self, file_name: str, scope: str, message: descriptor_pb2.DescriptorProto
    ) -> None:
        name = scope + message.name
        self.symbols[name] = file_name
        self.messages.add(name)
        for member in (*message.field, *message.oneof_decl):
            self.symbols[f"{name}.{member.name}"] = file_name
        for nested in message.nested_type:
            self._add_message(file_name, f"{name}.", nested)
        for enum in message.enum_type:
            self._add_enum(file_name, f"{name}.", enum)
        for extension in message.extension:
            self._add_extension(file_name, f"{name}.", extension)

    def _add_enum(
        self, file_name: str, scope: str, enum: descriptor_pb2.EnumDescriptorProto
    ) -> None:
        self.symbols[scope + enum.name] = file_name
        for value in enum.value:
            self.symbols[scope + value.name] = file_name

    def _add_extension(
        self, file_name: str, scope: str, extension: descriptor_pb2.FieldDescriptorProto
    ) -> None:
        self.symbols[scope + extension.name] = file_name
        self.extensions[(extension.extendee.lstrip("."), extension.number)] = file_name


class ReflectionServicer:
    """Answers ServerReflectionInfo streams from a catalog, listing only
    `service_names`. v1 and v1alpha messages are the same on the wire, so
    one servicer with v1alpha's message classes serves both."""

    def __init__(self, catalog: DescriptorCatalog, service_names: Iterable[str]) -> None:
        self._catalog = catalog
        self._service_names = tuple(sorted(set(service_names)))

    def ServerReflectionInfo(
        self,
        request_iterator: Iterator[reflection_pb2.ServerReflectionRequest],
        context: grpc.ServicerContext,
    ) -> Iterator[reflection_pb2.ServerReflectionResponse]:
        for request in request_iterator:
            yield self.answer(request)

    def answer(
        self, request: reflection_pb2.ServerReflectionRequest
    ) -> reflection_pb2.ServerReflectionResponse:
        """The response to one request of the stream."""
        response = self._answer(request)
        response.valid_host = request.host
        response.original_request.CopyFrom(request)
        return response

    def _answer(
        self, request: reflection_pb2.ServerReflectionRequest
    ) -> reflection_pb2.ServerReflectionResponse:
        catalog = self._catalog
        kind = request.WhichOneof("message_request")
        if kind == "list_services":
            return reflection_pb2.ServerReflectionResponse(
                list_services_response=reflection_pb2.ListServiceResponse(
                    service=[
                        reflection_pb2.ServiceResponse(name=name) for name in self._service_names
                    ]
                )
            )
        if kind == "file_by_filename":
            name = request.file_by_filename
            if name not in catalog.files:
                return _error(grpc.StatusCode.NOT_FOUND, f"file not found: {name}")
            return _files(catalog.with_dependencies(name))
        if kind == "file_containing_symbol":
            symbol = request.file_containing_symbol
            file_name = catalog.symbols.get(symbol)
            if file_name is None:
                return _error(grpc.StatusCode.NOT_FOUND, f"symbol not found: {symbol}")
            return _files(catalog.with_dependencies(file_name))
        if kind == "file_containing_extension":
            wanted = request.file_containing_extension
            file_name = catalog.extensions.get((wanted.containing_type, wanted.extension_number))
            if file_name is None:
                return _error(
                    grpc.StatusCode.NOT_FOUND,
                    f"extension not found: {wanted.containing_type} "
                    f"field {wanted.extension_number}",
                )
            return _files(catalog.with_dependencies(file_name))
        if kind == "all_extension_numbers_of_type":
            type_name = request.all_extension_numbers_of_type
            if type_name not in catalog.messages:
                return _error(grpc.StatusCode.NOT_FOUND, f"message type not found: {type_name}")
            numbers = sorted(
                number for extended, number in catalog.extensions if extended == type_name
            )
            return reflection_pb2.ServerReflectionResponse(
                all_extension_numbers_response=reflection_pb2.ExtensionNumberResponse(
                    base_type_name=type_name, extension_number=numbers
                )
            )
        return _error(grpc.StatusCode.INVALID_ARGUMENT, "the request asks for nothing")


def _files(serialized: Sequence[bytes]) -> reflection_pb2.ServerReflectionResponse:
    return reflection_pb2.ServerReflectionResponse(
        file_descriptor_response=reflection_pb2.FileDescriptorResponse(
            file_descriptor_proto=serialized
        )
    )


def _error(code: grpc.StatusCode, message: str) -> reflection_pb2.ServerReflectionResponse:
    number: int = code.value[0]
    return reflection_pb2.ServerReflectionResponse(
        error_response=reflection_pb2.ErrorResponse(error_code=number, error_message=message)
    )


@functools.cache
def public_catalog() -> DescriptorCatalog:
    """The public contract (with comments), health and the two reflection
    protocols: everything the public server may describe."""
    contract = descriptor_pb2.FileDescriptorSet.FromString(
        resources.files("cortex.v1").joinpath(DESCRIPTOR_SET).read_bytes()
    )
    v1alpha = _file_proto(reflection_pb2.DESCRIPTOR)
    return DescriptorCatalog.of(
        [*contract.file, _file_proto(health_pb2.DESCRIPTOR), v1alpha, _as_v1(v1alpha)]
    )


def add_reflection_to_server(
    server: grpc.Server,
    service_names: Iterable[str],
    catalog: DescriptorCatalog | None = None,
) -> None:
    """Serves both reflection protocols on `server`, listing `service_names`
    and the reflection services. A name the catalog does not declare is
    refused with ValueError: reflection never lists what it cannot describe."""
    catalog = public_catalog() if catalog is None else catalog
    names = {*service_names, *SERVICE_NAMES}
    unknown = sorted(names - catalog.services)
    if unknown:
        raise ValueError(f"reflection cannot describe {', '.join(unknown)}")
    servicer = ReflectionServicer(catalog, names)
    method = grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        tuple(
            grpc.method_handlers_generic_handler(name, {"ServerReflectionInfo": method})
            for name in SERVICE_NAMES
        )
    )


def _file_proto(descriptor: FileDescriptor) -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto()
    descriptor.CopyToProto(proto)
    return proto


def _as_v1(v1alpha: descriptor_pb2.FileDescriptorProto) -> descriptor_pb2.FileDescriptorProto:
    """The v1 protocol's file: v1alpha's messages and service under the v1
    package, which is what v1 is (grpcio-reflection ships only v1alpha)."""
    v1 = descriptor_pb2.FileDescriptorProto()
    v1.CopyFrom(v1alpha)
    v1.name = _V1_FILE_NAME
    v1.package = _V1_PACKAGE
    v1.ClearField("options")
    old, new = f".{v1alpha.package}.", f".{_V1_PACKAGE}."

    def renamed(type_name: str) -> str:
        return new + type_name.removeprefix(old)

    def rename_fields(message: descriptor_pb2.DescriptorProto) -> None:
        for field in message.field:
            # Scalars have no type_name, and setting one, even empty, breaks them.
            if field.type_name.startswith(old):
                field.type_name = renamed(field.type_name)
        for nested in message.nested_type:
            rename_fields(nested)

    for message in v1.message_type:
        rename_fields(message)
    for service in v1.service:
        for method in service.method:
            method.input_type = renamed(method.input_type)
            method.output_type = renamed(method.output_type)
    return v1
