"""The tools' input schemas as agents read them: strict at every level,
every number bounded, the bounds those of the task spec model, the request
limits and the wire; and the checker that holds calls to them, on plain
data. No node is involved: the server points at a closed port."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import anyio
import pytest
from pydantic import BaseModel, Field

from cortex.bounds import INT32_MAX, INT64_MAX, spec_bounds, wire_range, with_wire_bounds
from cortex.mcp import build_server
from cortex.mcp.arguments import argument_problems, unsupported_keywords
from cortex.requests import MAX_ID_CHARS, MAX_PAGE_SIZE, MAX_WAIT_MS
from cortex.spec import Constraints, RetryPolicy, TaskSpec
from cortex.v1 import cortex_pb2 as pb

NOWHERE = "127.0.0.1:1"


def _schemas() -> dict[str, dict[str, Any]]:
    server = build_server(NOWHERE, tls=False)

    async def listed() -> dict[str, dict[str, Any]]:
        return {tool.name: tool.input_schema for tool in await server.list_tools()}

    return anyio.run(listed)


SCHEMAS = _schemas()


def _resolve(root: Mapping[str, Any], schema: Mapping[str, Any]) -> Mapping[str, Any]:
    if "$ref" in schema:
        return root["$defs"][schema["$ref"].removeprefix("#/$defs/")]
    return schema


def _nodes(
    root: Mapping[str, Any], schema: Mapping[str, Any], path: str
) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every subschema that describes a value, with where it is."""
    schema = _resolve(root, schema)
    yield path, schema
    for part in schema.get("anyOf", []):
        yield from _nodes(root, part, path)
    for name, part in schema.get("properties", {}).items():
        yield from _nodes(root, part, f"{path}.{name}")
    if isinstance(schema.get("items"), Mapping):
        yield from _nodes(root, schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), Mapping):
        yield from _nodes(root, schema["additionalProperties"], f"{path}{{}}")


def _property(tool: str, *path: str) -> Mapping[str, Any]:
    """The typed (non-null) subschema at `path` of a tool's arguments."""
    root = SCHEMAS[tool]
    schema: Mapping[str, Any] = root
    for name in path:
        schema = _resolve(root, schema["properties"][name])
        typed = [p for p in schema.get("anyOf", []) if p.get("type") != "null"]
        if typed:
            schema = _resolve(root, typed[0])
    return schema


@pytest.mark.parametrize("tool", sorted(SCHEMAS))
def test_every_object_refuses_unknown_properties(tool: str):
    for where, schema in _nodes(SCHEMAS[tool], SCHEMAS[tool], tool):
        if "properties" in schema:
            assert schema.get("additionalProperties") is False, where


@pytest.mark.parametrize("tool", sorted(SCHEMAS))
def test_every_number_is_bounded_on_both_sides(tool: str):
    numbers = 0
    for where, schema in _nodes(SCHEMAS[tool], SCHEMAS[tool], tool):
        if schema.get("type") in ("integer", "number"):
            numbers += 1
            assert "minimum" in schema or "exclusiveMinimum" in schema, where
            assert "maximum" in schema or "exclusiveMaximum" in schema, where
    assert numbers or tool in {
        "cancel_task", "get_workflow_status", "retry_dead_letter_task", "submit_workflow",
        "list_schedules", "get_schedule", "pause_schedule", "resume_schedule", "delete_schedule",
        "trigger_schedule", "list_limits", "delete_limit",
    }  # fmt: skip


@pytest.mark.parametrize("tool", sorted(SCHEMAS))
def test_the_checker_knows_every_keyword_the_schemas_use(tool: str):
    assert unsupported_keywords(SCHEMAS[tool]) == set()


def test_bounds_come_from_the_spec_the_request_limits_and_the_wire():
    def bounds(schema: Mapping[str, Any]) -> tuple[Any, Any]:
        low = schema.get("minimum", schema.get("exclusiveMinimum"))
        return low, schema.get("maximum", schema.get("exclusiveMaximum"))

    for field in ("timeout_ms", "priority"):
        wanted = spec_bounds(TaskSpec, field)
        low, high = bounds(_property("submit_task", field))
        assert low == wanted.get("ge", wanted.get("gt")) and high == wanted["le"]
    for alias, field in (("maxRetries", "max_retries"), ("backoffMs", "backoff_ms"),
                         ("backoffMultiplier", "backoff_multiplier")):  # fmt: skip
        wanted = spec_bounds(RetryPolicy, field)
        assert bounds(_property("submit_task", "retry_policy", alias)) == (
            wanted["ge"],
            wanted["le"],
        )
    # The spec leaves these open above: the wire's range closes them.
    assert bounds(_property("submit_task", "constraints", "minMemoryMb")) == (0, INT64_MAX)
    assert bounds(_property("submit_task", "constraints", "maxParallelPerNode")) == (0, INT32_MAX)
    assert (
        bounds(_property("submit_task", "constraints", "minDiskGb"))[1]
        == wire_range(pb.Constraints, "min_disk_gb")[1]
    )
    assert bounds(_property("stream_task_output", "from_offset")) == (0, INT64_MAX)
    assert bounds(_property("stream_task_output", "attempt")) == (0, INT32_MAX)
    assert bounds(_property("list_tasks", "limit")) == (1, MAX_PAGE_SIZE)
    assert bounds(_property("get_task_result", "timeout_s"))[1] == MAX_WAIT_MS / 1000
    assert _property("get_task_result", "task_id")["maxLength"] == MAX_ID_CHARS
    # Executors are plugins: the node checks the type's name and whether it runs it.
    task_type = _property("submit_task", "type")
    assert "enum" not in task_type and "shell" in task_type["description"]
    assert task_type["maxLength"] == 64
    assert "dead_letter" in _property("list_tasks", "states")["items"]["enum"]


def test_wire_bounds_close_only_what_the_model_leaves_open():
    class Open(BaseModel):
        min_memory_mb: int = Field(0, ge=5)
        max_parallel_per_node: int = 0
        min_disk_gb: float = Field(0, le=9.5)

    bounded = with_wire_bounds(Open, pb.Constraints)
    assert spec_bounds(bounded, "min_memory_mb") == {"ge": 5, "le": INT64_MAX}
    assert spec_bounds(bounded, "max_parallel_per_node") == {"ge": -(2**31), "le": INT32_MAX}
    lowest_double = wire_range(pb.Constraints, "min_disk_gb")[0]
    assert spec_bounds(bounded, "min_disk_gb") == {"ge": lowest_double, "le": 9.5}
    assert bounded(min_memory_mb=6).model_dump(exclude_unset=True) == {"min_memory_mb": 6}
    # The spec's own models keep their names, aliases and defaults.
    constraints = with_wire_bounds(Constraints, pb.Constraints)
    assert constraints.model_validate({"minMemoryMb": 7}).model_dump(exclude_unset=True) == {
        "min_memory_mb": 7
    }


@pytest.mark.parametrize(
    ("tool", "arguments", "problem"),
    [
        ("submit_task", {"command": "true", "timeout_ms": 2**70},
         "timeout_ms: must be between 1 and 604800000 (got 1180591620717411303424)"),
        ("submit_task", {"command": "true", "retry_policy": {"maxRetries": "many"}},
         'retry_policy.maxRetries: must be an integer (got "many")'),
        ("submit_task", {"command": "true", "retry_policy": {"max_retries": 1}},
         "retry_policy.max_retries: unknown key; did you mean maxRetries?"),
        ("submit_task", {"command": "true", "colour": "blue"}, "colour: unknown argument (known: "),
        ("submit_task", {"command": ["echo", 5]}, "command.1: must be a string (got 5)"),
        ("submit_task", {"command": True}, "command: must be an array of strings or a string"),
        ("submit_task", {"command": "a\ud800"},
         "command: must be valid text (a lone surrogate \\ud800 at position 1)"),
        ("submit_task", {"command": "true", "env": {"\udfff": "x"}},
         "env.\\udfff: the name must be valid text"),
        ("submit_task", {"command": "true", "priority": True}, "priority: must be an integer"),
        ("submit_task", {"command": "true", "wait_timeout_s": math.inf},
         "wait_timeout_s: must be a finite number (got Infinity)"),
        ("submit_task", {"command": "true", "constraints": {"minDiskGb": math.nan}},
         "constraints.minDiskGb: must be a finite number (got NaN)"),
        ("submit_task", {"command": "true", "type": ""}, 'type: must not be empty (got "")'),
        ("submit_workflow", {"definition": {"tasks": {"a": {"spec": [math.nan]}}}},
         "definition.tasks.a.spec.0: must be a finite number (got NaN)"),
        ("submit_workflow", {}, "definition: missing (a required argument)"),
        ("get_task_result", {"task_id": ""}, 'task_id: must not be empty (got "")'),
        ("list_tasks", {"states": ["sleeping"]}, 'states.0: must be one of "pending"'),
        ("list_tasks", {"limit": 1001}, "limit: must be between 1 and 1000 (got 1001)"),
        ("list_tasks", {"limit": "5"}, 'limit: must be an integer (got "5")'),
        ("drain_node_tasks", {"node_id": "n2", "deadline_s": 0},
         "deadline_s: must be more than 0 and at most 2592000 (got 0)"),
        ("stream_task_output", {"task_id": "t", "from_offset": -1},
         "from_offset: must be between 0 and 9223372036854775807 (got -1)"),
    ],
)  # fmt: skip
def test_problems_name_the_argument_as_written(tool: str, arguments: dict[str, Any], problem: str):
    found = argument_problems(SCHEMAS[tool], arguments)
    assert any(line.startswith(problem) for line in found), found


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("submit_task", {"command": ["echo", "hi"], "timeout_ms": 604800000, "priority": 10,
                         "retry_policy": {"maxRetries": 0, "backoffMultiplier": 1.5},
                         "constraints": {"nodeLabels": ["zone=eu"], "targetNode": None,
                                         "minDiskGb": 0.5, "requiresCapabilities": {"a": "b"}},
                         "env": {"A": "1"}, "type": "noop", "wait_timeout_s": 600}),
        # JSON has one number type: 20.0 is an integer.
        ("list_tasks", {"states": ["running", "dead_letter"], "limit": 20.0, "type": "shell"}),
        ("submit_workflow", {"definition": {"name": "w", "tasks": {}, "anything": [1, "é"]}}),
        ("stream_task_output", {"task_id": "t", "from_offset": 2**63 - 1, "wait_s": 0}),
    ],
)  # fmt: skip
def test_arguments_within_the_schema_pass(tool: str, arguments: dict[str, Any]):
    assert argument_problems(SCHEMAS[tool], arguments) == []


def test_many_problems_are_all_named_up_to_a_limit():
    arguments = {f"extra{i}": i for i in range(15)}
    found = argument_problems(SCHEMAS["list_tasks"], arguments)
    assert len(found) == 11 and found[-1] == "and 5 more problems"
