"""A workflow definition with several problems is refused once, with every
problem listed by its path: a malformed task does not hide the others, nor
its own dependencies, cycles or condition."""

from __future__ import annotations

from typing import Any

import pytest

from cortex.errors import InvalidArgument
from cortex.spec import BUILTIN_TASK_TYPES
from cortex.workflows.definition import MAX_PROBLEMS_SHOWN, validate_definition


def _problems(data: dict[str, Any]) -> list[str]:
    with pytest.raises(InvalidArgument) as info:
        # As a node with only the built-in executors checks it.
        validate_definition(data, None, types=BUILTIN_TASK_TYPES)
    message = str(info.value)
    head, _, listed = message.partition("): ")
    assert head.startswith("invalid workflow definition ("), message
    return listed.split("; ")


def test_every_problem_of_every_kind_is_reported_at_once():
    problems = _problems(
        {
            "name": "w",
            "tasks": {
                "a": {"spec": {"command": "x"}, "dependsOn": "b"},
                "b": {"spec": {"command": "x", "bogus": 1}, "dependsOn": ["zz"]},
                "c": {"type": "weird", "retryPolicy": {"maxRetries": -2}},
                "d": {"spec": {"command": "x"}, "dependsOn": ["e"], "extra": 1},
                "e": {"type": "noop", "priority": 50, "dependsOn": ["d"]},
                "f": {"type": "noop", "dependsOn": ["b"], "condition": "parent.c.exitCode === 0"},
            },
        }
    )
    assert problems == [
        "tasks.a.dependsOn: Input should be a valid list",
        "tasks.b.spec.bogus: Extra inputs are not permitted",
        "tasks.b.dependsOn: unknown task 'zz'",
        "tasks.c.type: unknown task type 'weird' (known: shell, noop)",
        "tasks.c.spec.retryPolicy.maxRetries: Input should be greater than or equal to 0",
        "tasks.d.extra: Extra inputs are not permitted",
        "tasks.e.spec.priority: Input should be less than or equal to 10",
        "tasks: dependency cycle d -> e -> d (each task depends on the next)",
        "tasks.f.condition: parent.c names task 'c', which 'f' does not depend on: a condition"
        " sees only the tasks upstream of its own (add 'c' to tasks.f.dependsOn)",
    ]


def test_the_message_counts_the_problems():
    with pytest.raises(InvalidArgument, match=r"^invalid workflow definition \(1 problem\): "):
        validate_definition({"name": "w", "tasks": {"a": {"spec": {}}}}, None)
    with pytest.raises(InvalidArgument, match=r"\(2 problems\): name: Field required; tasks: a"):
        validate_definition({"tasks": {}}, None)


def test_workflow_level_and_task_level_problems_together():
    problems = _problems(
        {"name": "", "bogus": 1, "context": [1], "tasks": {"a b": {"type": "noop"}, "c": 5}}
    )
    assert problems == [
        "context: Input should be a valid dictionary",
        "bogus: Extra inputs are not permitted",
        "name: must be 1 to 200 characters",
        "tasks: invalid key 'a b' (letters, digits, '_', '-' and '.', not starting with '-' or"
        " '.', at most 128 characters)",
        "tasks.c: Input should be a valid dictionary",
    ]


def test_a_task_with_several_spec_problems_reports_each():
    problems = _problems(
        {
            "name": "w",
            "tasks": {
                "a": {
                    "type": "shell",
                    "priority": 3,
                    "spec": {"type": "noop", "priority": 4, "timeoutMs": -1},
                }
            },
        }
    )
    assert problems == [
        "tasks.a: type 'shell' and spec.type 'noop' disagree",
        "tasks.a: priority is given both on the task and in its spec",
        "tasks.a.spec.timeoutMs: Input should be greater than 0",
    ]


def test_each_separate_cycle_is_named():
    tasks = {
        "a": {"type": "noop", "dependsOn": ["b"]},
        "b": {"type": "noop", "dependsOn": ["a"]},
        "c": {"type": "noop", "dependsOn": ["c"]},
        "d": {"type": "noop", "dependsOn": ["e"]},
        "e": {"type": "noop", "dependsOn": ["f", "a"]},
        "f": {"type": "noop", "dependsOn": ["d"]},
        "g": {"type": "noop", "dependsOn": ["a"]},
    }
    cycles = [p for p in _problems({"name": "w", "tasks": tasks}) if "cycle" in p]
    assert cycles == [
        "tasks: dependency cycle a -> b -> a (each task depends on the next)",
        "tasks: dependency cycle c -> c (each task depends on the next)",
        "tasks: dependency cycle d -> e -> f -> d (each task depends on the next)",
    ]


def test_past_the_limit_the_rest_are_counted():
    tasks = {f"t{i}": {"type": "noop", "dependsOn": [f"missing{i}"]} for i in range(25)}
    with pytest.raises(InvalidArgument) as info:
        validate_definition({"name": "w", "tasks": tasks}, None)
    message = str(info.value)
    assert message.startswith("invalid workflow definition (25 problems): ")
    assert message.count("unknown task") == MAX_PROBLEMS_SHOWN
    assert message.endswith("; and 5 more")


def test_a_valid_definition_passes():
    definition = validate_definition(
        {
            "name": "w",
            "tasks": {
                "build": {"spec": {"command": "make"}},
                "test": {"type": "noop", "dependsOn": ["build"]},
                "deploy": {
                    "type": "noop",
                    "dependsOn": ["test"],
                    "condition": "parent.build.exitCode === 0 && parent['test'].state === 'completed'",
                },
            },
        },
        None,
    )
    assert [t.key for t in definition.tasks] == ["build", "test", "deploy"]
