"""The task spec rules apply enforces (cortex/state/spec_rules.py): canonical
output equal to the edge's pydantic dump, strict JSON types, messages written
by Cortex, and the edge refusing what apply would refuse.
tests/property/test_spec_rules_properties.py checks agreement on generated
specs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cortex.errors import InvalidArgument
from cortex.spec import TaskSpec, parse_task_spec
from cortex.state.spec_rules import WHITESPACE, SpecError, check_task_spec, is_blank


def canonical(value: Any) -> str:
    """JSON text, so 0 and 0.0 (equal in Python) tell apart."""
    return json.dumps(value, sort_keys=True)


def refusal(data: Any) -> str:
    with pytest.raises(SpecError) as caught:
        check_task_spec(data)
    return str(caught.value)


FULL = {
    "type": "shell",
    "command": ["echo", "hi"],
    "env": {"A": "1"},
    "cwd": "/tmp",
    "timeoutMs": 5000,
    "priority": 9,
    "constraints": {
        "requiresGpu": True,
        "avoid_gaming": True,
        "minMemoryMb": 512,
        "minDiskGb": 2,
        "nodeLabels": ["fast"],
        "targetNode": "n1",
        "requiresCapabilities": {"arch": "arm64"},
        "allowedNodes": ["n1", "n2"],
        "forbidden_nodes": ["n3"],
        "maxParallelPerNode": 2,
    },
    "retry_policy": {"maxRetries": 5, "backoff_ms": 250, "backoffMultiplier": 1.5},
    "labels": {"team": "a"},
    "options": {"nested": [1, 2.5, {"x": None}], "flag": True},
}


@pytest.mark.parametrize(
    "data",
    [
        {"command": ["true"]},
        {"type": "noop"},
        {"command": "echo hi", "retryPolicy": {"backoffMultiplier": 3}},
        FULL,
    ],
    ids=["minimal", "noop", "int-multiplier", "full"],
)
def test_canonical_form_equals_the_pydantic_dump(data: dict[str, Any]) -> None:
    expected = TaskSpec.model_validate(data, strict=True).model_dump(mode="json")
    assert canonical(check_task_spec(data)) == canonical(expected)
    # What the edge proposes passes apply unchanged.
    assert canonical(check_task_spec(expected)) == canonical(expected)


def test_defaults_are_filled_with_their_json_types() -> None:
    spec = check_task_spec({"type": "noop"})
    assert spec["priority"] == 5 and spec["timeout_ms"] is None and spec["command"] is None
    assert spec["retry_policy"] == {
        "max_retries": 3,
        "backoff_ms": 1000,
        "backoff_multiplier": 2.0,
        "retryable": True,
    }
    assert isinstance(spec["retry_policy"]["backoff_multiplier"], float)
    assert isinstance(spec["constraints"]["min_disk_gb"], float)
    # A number field given an integer holds a float, as in pydantic's dump.
    given = check_task_spec({"type": "noop", "constraints": {"minDiskGb": 3}})
    assert canonical(given["constraints"]["min_disk_gb"]) == "3.0"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"command": ["x"], "timeoutMs": 0}, "timeoutMs must be greater than 0"),
        ({"command": ["x"], "timeout_ms": 7 * 86_400_000 + 1}, "timeout_ms must be at most 604800000"),
        ({"command": ["x"], "priority": 11}, "priority must be between 0 and 10"),
        ({"command": ["x"], "priority": True}, "priority must be an integer"),
        ({"command": ["x"], "priority": "5"}, "priority must be an integer"),
        ({"command": ["x"], "priority": 5.0}, "priority must be an integer"),
        ({"command": ["x"], "constraints": {"minDiskGb": True}}, "constraints.minDiskGb must be a number"),
        ({"command": ["x"], "constraints": {"minDiskGb": "1"}}, "constraints.minDiskGb must be a number"),
        ({"command": ["x"], "constraints": {"min_disk_gb": 10**400}}, "constraints.min_disk_gb is too large"),
        ({"command": ["x"], "constraints": None}, "constraints must be an object"),
        ({"command": ["x"], "constraints": {"gpu": True}}, "constraints.gpu is not a known field"),
        ({"command": ["x"], "retryPolicy": {"maxRetries": -1}}, "retryPolicy.maxRetries must be between 0 and 100"),
        ({"command": ["x"], "retryPolicy": {"backoffMultiplier": 0.5}}, "retryPolicy.backoffMultiplier must be between 1 and 100"),
        ({"command": ["x"], "retryPolicy": {"backoffMultiplier": 1.2345}},
         "retryPolicy.backoffMultiplier must have at most 3 decimal places"),
        ({"command": ["x"], "retryPolicy": {"retryable": 1}}, "retryPolicy.retryable must be true or false"),
        ({"command": ["x"], "timeoutMs": 5, "timeout_ms": 5}, "timeoutMs is given twice, also as timeout_ms"),
        ({"command": ["x"], "bogus": 1}, "bogus is not a known field"),
        ({"command": ""}, "command is empty"),
        ({"command": " \t\u3000"}, "command is empty"),
        ({"command": []}, "command is empty"),
        ({"command": ["", "x"]}, "command is empty"),
        ({"command": ["x", 1]}, "command must be a list of strings or a string"),
        ({"type": "Docker", "command": ["x"]},
         "type must be 1 to 64 lowercase letters, digits or underscores, starting with a letter"),
        ({"type": "shell"}, "a shell task needs a command"),
        ({}, "a shell task needs a command"),
        ({"command": ["x"], "env": {"A=B": "1"}}, 'env: invalid environment variable name "A=B"'),
        ({"command": ["x"], "env": {"A": 1}}, "env must be an object of strings"),
        ({"command": ["x"], "labels": ["a"]}, "labels must be an object of strings"),
        ({"command": ["x"], "options": {"a": [1, float("nan")]}}, "options.a[1] must be a finite number"),
        ({"command": ["x"], "constraints": {"minDiskGb": float("inf")}}, "constraints.minDiskGb must be a finite number"),
        ({"command": ["x"], "cwd": "\ud800"}, "cwd is not valid Unicode text"),
        ({"command": ["x"], "options": {"\udc00": 1}}, "options has a key that is not valid Unicode text"),
        (["command"], "spec must be an object"),
    ],
)  # fmt: skip
def test_refusals_name_the_field_in_words_of_their_own(data: Any, message: str) -> None:
    assert refusal(data) == message
    # The edge refuses the same input (with pydantic's words).
    with pytest.raises(ValueError):
        TaskSpec.model_validate(data, strict=True)


def test_multipliers_with_up_to_three_decimals_are_kept_as_given() -> None:
    for value in (1.0, 1.001, 1.1, 1.5, 2.675, 99.999, 100.0):
        spec = check_task_spec({"type": "noop", "retryPolicy": {"backoffMultiplier": value}})
        assert spec["retry_policy"]["backoff_multiplier"] == value


def test_blank_is_a_fixed_set_of_characters() -> None:
    assert is_blank("") and is_blank(" \n\t\u2003")
    assert not is_blank(" x ")
    # Fixed from Python's own definition when it was written; the rule does not
    # follow a later Python's Unicode tables.
    assert all(char.isspace() for char in WHITESPACE)


# ---------------------------------------------------------------- the edge


def spec_error(data: dict[str, Any]) -> str:
    with pytest.raises(InvalidArgument) as caught:
        parse_task_spec(data)
    return str(caught.value)


def test_edge_refuses_a_multiplier_with_more_than_three_decimals() -> None:
    message = spec_error({"command": ["x"], "retryPolicy": {"backoffMultiplier": 1.0005}})
    assert message == (
        "spec.retryPolicy.backoffMultiplier: backoffMultiplier 1.0005 has more than 3 decimal places"
    )
    assert parse_task_spec({"command": ["x"], "retryPolicy": {"backoffMultiplier": 1.25}})


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"command": ["x"], "options": {"a": float("nan")}}, "options.a must be a finite number"),
        ({"command": ["x"], "constraints": {"minDiskGb": float("inf")}}, "finite number"),
        ({"command": ["x"], "env": {"A": "\udfff"}}, "env.A is not valid Unicode text"),
    ],
)
def test_edge_refuses_what_is_not_plain_json(data: dict[str, Any], words: str) -> None:
    assert words in spec_error(data)
