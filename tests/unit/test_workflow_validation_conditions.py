"""A condition may name only tasks upstream of its own: `parent.KEY` (and
the other literal forms) is read from the condition's tokens at submit, and
naming an unknown task or one the task does not depend on is refused. Forms
that cannot be resolved without running the condition are accepted."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from cortex.errors import InvalidArgument
from cortex.workflows.condition_names import ParentReference, parent_references
from cortex.workflows.definition import validate_definition
from cortex.workflows.sandbox import ConditionSandbox


@pytest.mark.parametrize(
    ("condition", "named"),
    [
        ("parent.build.exitCode === 0", [("build", "parent.build")]),
        ("parent?.build?.state", [("build", "parent?.build")]),
        ("parent['notify-failure'].state", [("notify-failure", "parent['notify-failure']")]),
        ('parent["a.b"]', [("a.b", 'parent["a.b"]')]),
        ("parent?.[`x`]", [("x", "parent?.[`x`]")]),
        ("parent .\n  spaced", [("spaced", "parent .\n  spaced")]),
        ("`${parent.inner.stdout}` !== ''", [("inner", "parent.inner")]),
        ("\\u0070arent.escaped", [("escaped", "\\u0070arent.escaped")]),
        ("parent['\\x62']", [("b", "parent['\\x62']")]),
        ("a / parent.b / 2 > 1", [("b", "parent.b")]),
        ("/parent.no/.test(parent.yes.stdout)", [("yes", "parent.yes")]),
        # Not references: properties named parent, strings, comments, regexes.
        ("workflow.context.parent.x", []),
        ("x?.parent.y", []),
        ("'parent.a' + \"parent.b\" + `parent.c`", []),
        ("// parent.a\n/* parent.b */ true", []),
        ("/parent.a/.test('x')", []),
        ("({parent: 1}).parent", []),
        # Not resolvable without running: accepted, and seen only upstream at run time.
        ("parent[workflow.context.key].exitCode === 0", []),
        ("Object.values(parent).every(p => p.exitCode === 0)", []),
        ("const {build} = parent; build.exitCode === 0", []),
        ("parent[`${'a'}`]", []),
    ],
)
def test_references_are_read_from_the_tokens(condition, named):
    found = parent_references(condition)
    assert found == [ParentReference(key, text) for key, text in named]


def test_unreadable_tokens_give_none():
    assert parent_references("'unterminated") is None
    assert parent_references("`${parent.a`") is None
    assert parent_references("/* never closed") is None


@pytest.fixture(scope="module")
def sandbox() -> Iterator[ConditionSandbox]:
    box = ConditionSandbox()
    yield box
    box.close()


def _definition(condition: str, depends_on: list[str] | None = None) -> dict[str, Any]:
    return {
        "name": "w",
        "tasks": {
            "build": {"type": "noop"},
            "build.linux": {"type": "noop"},
            "test": {"type": "noop", "dependsOn": ["build"]},
            "lint": {"type": "noop"},
            "deploy": {
                "type": "noop",
                "dependsOn": ["test"] if depends_on is None else depends_on,
                "condition": condition,
            },
        },
    }


def _refusal(condition: str, sandbox: ConditionSandbox, **kwargs: Any) -> str:
    with pytest.raises(InvalidArgument) as info:
        validate_definition(_definition(condition, **kwargs), sandbox)
    return str(info.value)


def test_an_unknown_task_is_refused_naming_it_and_the_condition(sandbox):
    message = _refusal("parent.biuld.exitCode === 0", sandbox)
    assert message == (
        "invalid workflow definition (1 problem): tasks.deploy.condition: parent.biuld names no"
        " task of the workflow (did you mean 'build'?)"
    )


def test_a_task_that_is_not_upstream_is_refused(sandbox):
    message = _refusal("parent.lint.state === 'completed'", sandbox)
    assert message.endswith(
        "tasks.deploy.condition: parent.lint names task 'lint', which 'deploy' does not depend"
        " on: a condition sees only the tasks upstream of its own (add 'lint' to"
        " tasks.deploy.dependsOn)"
    )


def test_a_key_with_a_dot_needs_brackets(sandbox):
    message = _refusal(
        "parent.build.linux.state === 'completed'", sandbox, depends_on=["build.linux"]
    )
    assert message.endswith(
        "parent.build names task 'build', which 'deploy' does not depend on: a condition sees"
        " only the tasks upstream of its own (write parent['build.linux'] for a key with '.' or"
        " '-')"
    )
    data = _definition("parent.bad.state", depends_on=["bad-key"])
    data["tasks"]["bad-key"] = {"type": "noop"}
    with pytest.raises(InvalidArgument, match=r"names no task of the workflow \(write parent\["):
        validate_definition(data, sandbox)
    accepted = _definition("parent['build.linux'].state === 'completed'", ["build.linux"])
    validate_definition(accepted, sandbox)


def test_every_wrong_name_of_every_condition_is_listed(sandbox):
    data = _definition("parent.lint.exitCode === 0 || parent.nope || parent.lint.state")
    data["tasks"]["lint"]["condition"] = "parent.deploy.state === 'completed'"
    with pytest.raises(InvalidArgument) as info:
        validate_definition(data, sandbox)
    message = str(info.value)
    assert "(3 problems)" in message
    assert "tasks.lint.condition: parent.deploy names task 'deploy'" in message
    assert "tasks.deploy.condition: parent.lint names task 'lint'" in message
    assert "tasks.deploy.condition: parent.nope names no task of the workflow" in message


@pytest.mark.parametrize(
    "condition",
    [
        "parent.test.exitCode === 0",
        "parent.build.exitCode === 0",  # upstream through test: seen as well
        "parent.hasOwnProperty('lint') === false",
        "Object.keys(parent).length === 2",
        "parent[workflow.context.which] === undefined",
        "workflow.context.parent === undefined",
    ],
)
def test_upstream_names_and_unresolvable_forms_are_accepted(sandbox, condition):
    validate_definition(_definition(condition), sandbox)


def test_a_condition_that_does_not_parse_reports_only_that(sandbox):
    message = _refusal("parent.nope.exitCode ===", sandbox)
    assert "does not parse: SyntaxError" in message and "names no task" not in message


def test_without_a_sandbox_names_are_still_checked():
    with pytest.raises(InvalidArgument, match="parent.nope names no task"):
        validate_definition(_definition("parent.nope.state"), None)
