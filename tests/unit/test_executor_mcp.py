"""MCP's submit_task and create_schedule take any executor type and its
options; the node, which knows the cluster's executors, checks them."""

from __future__ import annotations

from cortex.api.convert import struct_dict
from cortex.mcp.arguments import argument_problems
from cortex.mcp.server import _task_spec
from tests.unit.test_mcp_schemas import SCHEMAS, _property


def test_the_tools_take_a_type_and_its_options() -> None:
    for tool in ("submit_task", "create_schedule"):
        assert _property(tool, "options")["type"] == "object"
        assert "container" in _property(tool, "type")["description"]
    arguments = {"type": "container", "command": "echo hi", "options": {"image": "alpine:3"}}
    assert argument_problems(SCHEMAS["submit_task"], arguments) == []
    assert argument_problems(SCHEMAS["submit_task"], {**arguments, "options": [1]})


def test_the_options_reach_the_spec() -> None:
    spec = _task_spec(
        "echo hi", "container", None, None, None, None, None, None,
        options={"image": "alpine:3", "memoryMb": 64},
    )  # fmt: skip
    assert spec.type == "container" and spec.shell == "echo hi"
    assert struct_dict(spec.options) == {"image": "alpine:3", "memoryMb": 64}
