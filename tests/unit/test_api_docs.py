"""docs/api.md is what scripts/gen_api_docs.py makes of the committed
descriptor set: regenerated here in memory and compared. It documents every
RPC, message and enum of cortex.v1 with its comment, and nothing of
cortex.internal.v1."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from google.protobuf import descriptor_pb2

from cortex.v1 import cortex_pb2
from tests.script_modules import load_script

ROOT = Path(__file__).resolve().parents[2]
API_DOCS = ROOT / "docs" / "api.md"


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    return load_script("gen_api_docs")


@pytest.fixture(scope="module")
def docs(generator: ModuleType) -> str:
    rendered: str = generator.render_api_docs(generator.DESCRIPTOR_SET.read_bytes())
    return rendered


def test_the_committed_docs_are_current(docs: str) -> None:
    committed = API_DOCS.read_text(encoding="utf-8") if API_DOCS.exists() else ""
    assert committed == docs, (
        "docs/api.md differs from what the proto's comments give: run "
        "`python scripts/gen_api_docs.py` (or `bash scripts/gen_proto.sh`) and commit it"
    )


def test_every_public_element_is_documented(docs: str) -> None:
    file = cortex_pb2.DESCRIPTOR
    for service in file.services_by_name.values():
        assert f"### {service.name}\n" in docs
        for method in service.methods:
            assert f"| `{method.name}` |" in docs
    for name in [*file.message_types_by_name, *file.enum_types_by_name]:
        assert f"### {name}\n" in docs
    for enum in file.enum_types_by_name.values():
        for value in enum.values:
            assert f"| `{value.name}` | {value.number} |" in docs


def test_rows_carry_types_and_comments(docs: str) -> None:
    assert (
        "| `SubmitTask` | [SubmitTaskRequest](#submittaskrequest) | "
        "[SubmitTaskResponse](#submittaskresponse) | Validates a task spec and proposes it. "
    ) in docs
    assert "| stream [StreamTaskOutputResponse](#streamtaskoutputresponse) |" in docs
    assert "| `env` | 4 | `map<string, string>` |" in docs
    assert "| `max_retries` | 1 | optional `int32` |" in docs
    assert "| `states` | 1 | repeated [TaskState](#taskstate) |" in docs
    assert "| `task_change` | 7 | [TaskStateChange](#taskstatechange) (oneof `change`) |" in docs
    assert "google.protobuf/#duration)" in docs


def test_the_internal_package_stays_out(docs: str) -> None:
    for name in ("cortex.internal", "PeerService", "JoinService", "HeartbeatRequest"):
        assert name not in docs


def test_comments_become_markdown(generator: ModuleType) -> None:
    """Paragraphs stay apart, and a `|` cannot break a table row."""
    file = descriptor_pb2.FileDescriptorProto(name="cortex/v1/x.proto", package="cortex.v1")
    message = file.message_type.add(name="Pair")
    message.field.add(name="left", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING)
    comments = {
        (4, 0): " First paragraph,\n wrapped.\n\n Second paragraph.\n",
        (4, 0, 2, 0): " a | b\n\n c\n",
    }
    for path, text in comments.items():
        file.source_code_info.location.add(path=path, leading_comments=text)
    rendered = generator.render_api_docs(
        descriptor_pb2.FileDescriptorSet(file=[file]).SerializeToString()
    )
    assert "### Pair\n\nFirst paragraph, wrapped.\n\nSecond paragraph.\n" in rendered
    assert "| `left` | 1 | `string` | a \\| b<br><br>c |" in rendered
