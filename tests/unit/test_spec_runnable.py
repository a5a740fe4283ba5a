"""Checks made before a spec is proposed: executor options per type, NUL
bytes where a process cannot take them. Each error names the field, for a
task and for a task of a workflow alike; apply's own validation stays as
lenient as it was."""

from __future__ import annotations

from typing import Any

import pytest

from cortex.errors import InvalidArgument
from cortex.spec import TaskSpec, parse_task_spec, runnable_problems
from cortex.workflows.definition import parse_definition


def spec_error(data: dict[str, Any]) -> str:
    with pytest.raises(InvalidArgument) as caught:
        parse_task_spec(data)
    return str(caught.value)


@pytest.mark.parametrize(
    ("options", "field", "words"),
    [
        ({"duration_ms": "abc"}, "spec.options.duration_ms", "integer"),
        ({"duration_ms": "100"}, "spec.options.duration_ms", "integer"),
        ({"duration_ms": 1e300}, "spec.options.duration_ms", "less than or equal"),
        ({"duration_ms": float("inf")}, "spec", "options.duration_ms must be a finite number"),
        ({"duration_ms": 1.5}, "spec.options.duration_ms", "integer"),
        ({"duration_ms": -1}, "spec.options.duration_ms", "greater than or equal to 0"),
        ({"duration_ms": True}, "spec.options.duration_ms", "integer"),
        ({"duration_ms": None}, "spec.options.duration_ms", "integer"),
        ({"exit_code": 256}, "spec.options.exit_code", "255"),
        ({"exit_code": "x"}, "spec.options.exit_code", "integer"),
        ({"sleep": 5}, "spec.options.sleep", "unknown option of the noop executor"),
    ],
)
def test_bad_noop_options_are_refused_naming_the_option(
    options: dict[str, Any], field: str, words: str
) -> None:
    message = spec_error({"type": "noop", "options": options})
    assert message.startswith(f"{field}: "), message
    assert words in message


def test_good_noop_options_are_taken_as_integers() -> None:
    spec = parse_task_spec({"type": "noop", "options": {"duration_ms": 20.0, "exit_code": 3}})
    assert spec.options == {"duration_ms": 20.0, "exit_code": 3}
    assert runnable_problems(spec) == []
    assert parse_task_spec({"type": "noop"}).options == {}


def test_shell_takes_no_options() -> None:
    message = spec_error({"command": ["true"], "options": {"duration_ms": 5}})
    assert message.startswith("spec.options.duration_ms: unknown option of the shell executor")
    assert "known: none" in message


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"command": ["echo", "a\x00b"]}, "spec.command.1"),
        ({"command": "echo a\x00b"}, "spec.command"),
        ({"command": ["true"], "env": {"A": "x\x00y"}}, "spec.env.A"),
        ({"command": ["true"], "cwd": "/tmp\x00x"}, "spec.cwd"),
    ],
)
def test_nul_bytes_are_refused_where_no_process_could_take_them(
    data: dict[str, Any], field: str
) -> None:
    assert spec_error(data) == f"{field}: contains a NUL byte"


def test_every_problem_is_reported() -> None:
    message = spec_error(
        {"type": "noop", "command": ["a\x00"], "options": {"duration_ms": "x", "exit_code": -2}}
    )
    for field in ("spec.options.duration_ms", "spec.options.exit_code", "spec.command.0"):
        assert field in message


def test_apply_still_takes_what_it_took_before() -> None:
    """Apply validates with TaskSpec alone: an entry accepted by an earlier
    version must apply the same way now (the agent fails it instead)."""
    spec = TaskSpec.model_validate({"type": "noop", "options": {"duration_ms": "abc"}})
    assert runnable_problems(spec) == ["options.duration_ms: Input should be a valid integer"]


def test_workflow_tasks_get_the_same_checks() -> None:
    definition = """
name: bad-options
tasks:
  wait:
    type: noop
    spec: {options: {duration_ms: abc}}
  run:
    spec: {command: ["echo", "a\\0b"]}
    dependsOn: [wait]
"""
    with pytest.raises(InvalidArgument) as caught:
        parse_definition(definition, "yaml", None)
    message = str(caught.value)
    assert "tasks.wait.spec.options.duration_ms: Input should be a valid integer" in message
    assert "tasks.run.spec.command.1: contains a NUL byte" in message
