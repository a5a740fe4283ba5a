"""Parsing and validating workflow definitions: every problem is an
InvalidArgument naming it. Conditions are syntax-checked in real V8."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from cortex.cli.workflows import read_definition
from cortex.errors import InvalidArgument
from cortex.spec import BUILTIN_TASK_TYPES
from cortex.workflows import definition
from cortex.workflows.definition import (
    MAX_DEFINITION_BYTES,
    MAX_YAML_BYTES,
    load_document,
    parse_definition,
)
from cortex.workflows.sandbox import ConditionSandbox

EXAMPLES = Path(__file__).resolve().parents[2] / "configs" / "workflows"


@pytest.fixture(scope="module")
def sandbox() -> Iterator[ConditionSandbox]:
    box = ConditionSandbox()
    yield box
    box.close()


def _yaml(tasks: str, extra: str = "") -> str:
    return f"name: wf\n{extra}tasks:\n{tasks}"


def _error(text: str, sandbox: ConditionSandbox | None = None, fmt: str = "") -> str:
    with pytest.raises(InvalidArgument) as info:
        # As a node with only the built-in executors checks it.
        parse_definition(text, fmt, sandbox, types=BUILTIN_TASK_TYPES)
    return str(info.value)


def test_a_valid_definition_keeps_order_and_folds_task_fields_into_the_spec(sandbox):
    text = json.dumps(
        {
            "name": "deploy",
            "context": {"env": "staging"},
            "tasks": {
                "build": {
                    "type": "shell",
                    "spec": {"command": "make"},
                    "constraints": {"nodeLabels": ["server"]},
                    "retryPolicy": {"maxRetries": 0},
                    "priority": 9,
                },
                "ship": {
                    "type": "noop",
                    "dependsOn": ["build"],
                    "condition": "parent.build.exitCode === 0",
                },
                "audit": {"spec": {"command": ["echo", "ok"]}},
            },
        }
    )
    definition = parse_definition(text, "json", sandbox)
    assert definition.name == "deploy" and definition.context == {"env": "staging"}
    assert [t.key for t in definition.tasks] == ["build", "ship", "audit"]
    build, ship, audit = definition.tasks
    assert build.spec.type == "shell" and build.spec.priority == 9
    assert build.spec.constraints.node_labels == ["server"]
    assert build.spec.retry_policy.max_retries == 0
    assert ship.spec.type == "noop" and ship.depends_on == ["build"]
    assert ship.condition == "parent.build.exitCode === 0"
    assert audit.spec.type == "shell" and audit.condition is None


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.iterdir()))
def test_the_shipped_examples_are_valid(name, sandbox):
    definition = parse_definition((EXAMPLES / name).read_text(), "", sandbox)
    assert definition.tasks


def test_duplicate_keys_are_refused_in_json_and_yaml():
    text = '{"name": "wf", "tasks": {"a": {"spec": {"command": "x"}}, "a": {"spec": {"command": "y"}}}}'
    assert "duplicate key 'a'" in _error(text, fmt="json")
    assert "duplicate key 'a'" in _error(text)  # detected format
    yaml_text = _yaml("  a:\n    spec: {command: x}\n  a:\n    spec: {command: y}\n")
    message = _error(yaml_text, fmt="yaml")
    assert "duplicate key 'a'" in message and "line 5" in message
    assert "duplicate key 'command'" in _error(_yaml("  a:\n    spec: {command: x, command: y}\n"))


def test_yaml_merge_keys_may_be_overridden():
    text = _yaml(
        "  a: &base\n    spec: {command: x}\n    priority: 3\n"
        "  b:\n    <<: *base\n    priority: 7\n"
    )
    definition = parse_definition(text)
    assert [t.spec.priority for t in definition.tasks] == [3, 7]


def test_a_cycle_is_named_in_order():
    text = _yaml(
        "  a: {spec: {command: x}, dependsOn: [c]}\n"
        "  b: {spec: {command: x}, dependsOn: [a]}\n"
        "  c: {spec: {command: x}, dependsOn: [b]}\n"
        "  d: {spec: {command: x}}\n"
    )
    assert "dependency cycle a -> c -> b -> a" in _error(text)
    assert "dependency cycle a -> a" in _error(_yaml("  a: {spec: {command: x}, dependsOn: [a]}\n"))


def test_unknown_and_repeated_dependencies_are_named():
    message = _error(
        _yaml(
            "  build: {spec: {command: x}}\n"
            "  deploy: {spec: {command: x}, dependsOn: [biuld, build, build]}\n"
        )
    )
    assert "tasks.deploy.dependsOn: unknown task 'biuld' (did you mean 'build'?)" in message
    assert "tasks.deploy.dependsOn: lists 'build' twice" in message


@pytest.mark.parametrize("key", ["a b", "-lead", ".dot", "x" * 129, "é"])
def test_invalid_keys_are_refused(key):
    text = json.dumps({"name": "wf", "tasks": {key: {"spec": {"command": "x"}}}})
    assert f"invalid key {key!r}" in _error(text)


def test_yaml_booleans_and_numbers_as_keys_are_refused():
    assert "key True is not a string" in _error(_yaml("  on: {spec: {command: x}}\n"))
    assert "key 1 is not a string" in _error(_yaml("  1: {spec: {command: x}}\n"))


def test_a_condition_that_does_not_parse_is_refused_without_running(sandbox):
    text = _yaml(
        "  a: {spec: {command: x}}\n"
        "  b: {spec: {command: x}, dependsOn: [a], condition: 'parent.a.exitCode ==='}\n"
        "  c: {spec: {command: x}, dependsOn: [a], condition: '}); while(1){}; (function(){'}\n"
        "  d: {spec: {command: x}, dependsOn: [a], condition: 'while(true){}'}\n"
    )
    message = _error(text, sandbox)
    assert "tasks.b.condition: does not parse: SyntaxError" in message
    assert "tasks.c.condition: does not parse: SyntaxError" in message
    # An endless loop parses; compiling it must not run it.
    assert "tasks.d" not in message


def test_an_empty_condition_is_refused():
    text = _yaml("  a: {spec: {command: x}}\n  b: {spec: {command: x}, condition: '  '}\n")
    assert "tasks.b.condition: is empty" in _error(text)


def test_unknown_task_types_are_named():
    message = _error(_yaml("  a: {type: subagent, spec: {prompt: hi}}\n"))
    assert "tasks.a.type: unknown task type 'subagent' (known: shell, noop)" in message
    message = _error(_yaml("  a: {spec: {type: k8s_job}}\n"))
    assert "unknown task type 'k8s_job'" in message


@pytest.mark.parametrize(
    ("tasks", "expected"),
    [
        (
            "  a: {spec: {command: x}, dependsOn: a}\n",
            "tasks.a.dependsOn: Input should be a valid list",
        ),
        (
            "  a: {spec: {command: x}, priority: high}\n",
            "tasks.a.priority: Input should be a valid integer",
        ),
        (
            "  a: {spec: {command: x}, condition: 5}\n",
            "tasks.a.condition: Input should be a valid string",
        ),
        (
            "  a: {spec: {command: x}, depends_on: [], dependson: [b]}\n",
            "tasks.a.dependson: Extra inputs",
        ),
        ("  a: {spec: {command: x, timeoutMs: -1}}\n", "tasks.a.spec.timeoutMs"),
        ("  a: {spec: {}}\n", "tasks.a.spec: a shell task needs a command"),
        ("  a: {spec: {command: x}, priority: 3, spec: {command: x}}\n", "duplicate key 'spec'"),
        ("  a: {type: shell, spec: {type: noop}}\n", "type 'shell' and spec.type 'noop' disagree"),
        ("  a: {priority: 3, spec: {command: x, priority: 4}}\n", "priority is given both"),
        ("  a: [1, 2]\n", "tasks.a: Input should be a valid dictionary"),
    ],
)
def test_bad_field_types_name_the_field(tasks, expected):
    assert expected in _error(_yaml(tasks))


def test_workflow_level_problems():
    assert "name: Field required" in _error("tasks: {a: {spec: {command: x}}}\n")
    assert "tasks: a workflow needs at least one task" in _error("name: wf\ntasks: {}\n")
    assert "context: Input should be a valid dictionary" in _error(
        _yaml("  a: {spec: {command: x}}\n", extra="context: [1]\n")
    )
    assert "must be an object" in _error("[1, 2]")
    assert "is empty" in _error("   ")
    assert "format 'toml'" in _error("name: wf", fmt="toml")


def test_syntax_errors_in_the_text_say_where():
    assert "not valid JSON" in _error('{"name": "wf", "tasks": {', fmt="json")
    assert "not valid JSON" in _error('{"name": "wf", "tasks": {')  # looked like JSON
    assert "line 2" in _error("name: [\n", fmt="yaml")
    nan = '{"name": "wf", "tasks": {}, "context": {"x": NaN}}'
    assert "not a JSON number" in _error(nan, fmt="json")


def test_an_alias_bomb_is_refused_before_it_expands():
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x","x"]']
    for previous, name in zip("abcdefg", "bcdefgh", strict=True):
        lines.append(f"{name}: &{name} [{','.join([f'*{previous}'] * 10)}]")
    assert "alias bomb" in _error("\n".join(lines) + "\n")


def test_yaml_dates_are_not_silently_turned_into_objects():
    assert "a date is not a JSON value" in _error(
        _yaml("  a: {spec: {command: x}}\n", extra="context: {day: 2024-01-01}\n")
    )


def test_every_problem_is_reported_at_once(sandbox):
    message = _error(
        _yaml(
            "  a: {type: subagent}\n"
            "  b: {spec: {command: x}, dependsOn: [zzz]}\n"
            "  c: {spec: {command: x}, condition: '((('}\n"
        ),
        sandbox,
    )
    assert "unknown task type" in message and "unknown task 'zzz'" in message
    assert "tasks.c.condition: does not parse" in message


def test_load_document_returns_plain_data():
    assert load_document('{"name": "wf", "tasks": {}}') == {"name": "wf", "tasks": {}}
    assert load_document("name: wf\ntasks: {}\n", "yml") == {"name": "wf", "tasks": {}}


def _big_yaml(min_bytes: int) -> str:
    lines, i = [], 0
    while sum(map(len, lines)) < min_bytes:
        lines.append(
            f"  t{i}: {{type: noop, dependsOn: [t{i - 1}]}}\n" if i else "  t0: {type: noop}\n"
        )
        i += 1
    return _yaml("".join(lines))


def test_yaml_is_limited_to_what_loads_in_its_cpu_budget_with_a_clear_error():
    text = _big_yaml(MAX_YAML_BYTES + 1)
    message = _error(text)
    assert f"over the limit of {MAX_YAML_BYTES} bytes for YAML" in message
    assert f"send it as JSON, up to {MAX_DEFINITION_BYTES} bytes" in message
    assert message == _error(text, fmt="yaml")
    # The same definition as JSON is fine, and so is YAML just under the limit.
    as_json = json.dumps(load_document(text, max_yaml_bytes=MAX_DEFINITION_BYTES))
    assert len(as_json) > MAX_YAML_BYTES
    assert len(parse_definition(as_json).tasks) == len(parse_definition(as_json, "json").tasks)
    under = _big_yaml(MAX_YAML_BYTES - 200)
    assert len(under.encode()) <= MAX_YAML_BYTES
    assert parse_definition(under).tasks


def test_yaml_loads_with_libyaml_when_present_and_keeps_its_checks(monkeypatch):
    if yaml.__with_libyaml__:
        assert issubclass(definition.YAML_LOADER, yaml.CSafeLoader)
        assert MAX_YAML_BYTES == definition.MAX_YAML_BYTES_LIBYAML
    duplicate = _yaml("  a:\n    spec: {command: x}\n  a:\n    spec: {command: y}\n")
    for loader in {definition.YAML_LOADER, definition._PureYamlLoader}:
        monkeypatch.setattr(definition, "YAML_LOADER", loader)
        message = _error(duplicate, fmt="yaml")
        assert "duplicate key 'a'" in message and "line 5" in message, loader
        assert "date is not a JSON value" in _error(
            _yaml("  a: {spec: {command: x}}\n", extra="context: {day: 2024-01-01}\n")
        )
        assert "line 2" in _error("name: [\n", fmt="yaml")


def test_the_cli_sends_large_yaml_as_json(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_text(_big_yaml(MAX_YAML_BYTES + 1))
    text, fmt = read_definition(argparse.Namespace(file=str(big), format=None, set=[]))
    assert fmt == "json" and json.loads(text)["tasks"]["t0"] == {"type": "noop"}
    small = tmp_path / "small.yaml"
    small.write_text(_yaml("  a: {type: noop}\n"))
    assert read_definition(argparse.Namespace(file=str(small), format=None, set=[])) == (
        small.read_text(), "yaml",
    )  # fmt: skip
