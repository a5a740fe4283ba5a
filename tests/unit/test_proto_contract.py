"""What is generated from proto/ matches it: the gRPC code in cortex/v1 and
cortex/internal/v1, and the public descriptor set with comments that
reflection serves (public files only). The accepted contract image that
`buf breaking` compares against (in .ci/run) holds the public package only.
When one of these fails, run `bash scripts/gen_proto.sh`."""

from __future__ import annotations

from collections.abc import Iterable
from importlib import resources
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2
from grpc_tools import protoc

from cortex.api import reflection
from cortex.internal.v1 import peer_pb2
from cortex.v1 import cortex_pb2

ROOT = Path(__file__).resolve().parents[2]
PROTO = ROOT / "proto"
ACCEPTED_IMAGE = PROTO / "cortex-v1-accepted.binpb"
REGENERATE = "out of date with proto/: run `bash scripts/gen_proto.sh` and commit the result"


def _compile(out: Path, files: list[Path], *flags: str) -> descriptor_pb2.FileDescriptorSet:
    include = resources.files("grpc_tools") / "_proto"
    status = protoc.main(
        [
            "protoc",
            f"-I{PROTO}",
            f"-I{include}",
            f"--descriptor_set_out={out}",
            *flags,
            *(str(file) for file in files),
        ]
    )
    assert status == 0, f"protoc failed on {files}"
    return descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())


def _public_files() -> list[Path]:
    return sorted((PROTO / "cortex" / "v1").glob("*.proto"))


def _committed_descriptor_set() -> descriptor_pb2.FileDescriptorSet:
    data = resources.files("cortex.v1").joinpath(reflection.DESCRIPTOR_SET).read_bytes()
    return descriptor_pb2.FileDescriptorSet.FromString(data)


def test_the_descriptor_set_matches_the_proto(tmp_path: Path) -> None:
    """The contract's own files are compared whole; the well-known types it
    imports only by name (their comments come with grpcio-tools' version)."""
    fresh = _compile(
        tmp_path / "set.binpb", _public_files(), "--include_imports", "--include_source_info"
    )
    committed = _committed_descriptor_set()
    stale = f"cortex/v1/{reflection.DESCRIPTOR_SET} is {REGENERATE}"
    assert [file.name for file in committed.file] == [file.name for file in fresh.file], stale
    ours = [file for file in fresh.file if file.package == "cortex.v1"]
    assert [file for file in committed.file if file.package == "cortex.v1"] == ours, stale


def test_the_descriptor_set_holds_public_files_with_comments() -> None:
    files = {file.name: file for file in _committed_descriptor_set().file}
    assert {file.package for file in files.values()} == {"cortex.v1", "google.protobuf"}
    contract = files["cortex/v1/cortex.proto"]
    comments = [location.leading_comments for location in contract.source_code_info.location]
    assert any("Validates a task spec and proposes it." in text for text in comments)


@pytest.mark.parametrize("module", [cortex_pb2, peer_pb2], ids=lambda module: module.__name__)
def test_the_generated_code_matches_the_proto(tmp_path: Path, module: object) -> None:
    descriptor = module.DESCRIPTOR  # type: ignore[attr-defined]
    fresh = _compile(tmp_path / "set.binpb", [PROTO / descriptor.name])
    (expected,) = fresh.file
    _clear_json_names(expected.message_type)  # the Python generator leaves them out
    generated = descriptor_pb2.FileDescriptorProto.FromString(descriptor.serialized_pb)
    assert generated == expected, f"{descriptor.name}'s Python code is {REGENERATE}"


def _clear_json_names(messages: Iterable[descriptor_pb2.DescriptorProto]) -> None:
    for message in messages:
        for field in message.field:
            field.ClearField("json_name")
        _clear_json_names(message.nested_type)


def test_the_accepted_contract_is_the_public_package_only() -> None:
    """The image `buf breaking` compares against in .ci/run (a buf image reads
    as a FileDescriptorSet; buf's own fields stay unknown). It changes only
    with `bash scripts/gen_proto.sh --accept-contract`, so it is not compared
    with the proto here: that is buf's job."""
    image = descriptor_pb2.FileDescriptorSet.FromString(ACCEPTED_IMAGE.read_bytes())
    names = {file.name for file in image.file}
    assert "cortex/v1/cortex.proto" in names
    assert not [name for name in names if name.startswith("cortex/internal/")]
