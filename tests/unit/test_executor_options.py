"""Each executor declares the schema of its options; a spec is checked
against it where it enters (any node that has the executor), so a malformed
spec is refused before it is queued, with an error naming the field. A type
no executor here knows is taken only when some node of the cluster runs it."""

from __future__ import annotations

from typing import Any

import pytest

from cortex.errors import InvalidArgument
from cortex.executors import ExecutorSettings, load_executors
from cortex.spec import TaskTypes, parse_task_spec
from cortex.workflows.definition import validate_definition

INSTALLED = load_executors(ExecutorSettings(), fingerprint_timeout_s=2.0)


def node_types(*elsewhere: str) -> TaskTypes:
    """A node with every installed executor, in a cluster whose other nodes
    run `elsewhere` too."""
    return TaskTypes(INSTALLED.options, lambda: set(elsewhere))


def refusal(spec: dict[str, Any], types: TaskTypes | None = None) -> str:
    with pytest.raises(InvalidArgument) as info:
        parse_task_spec(spec, types=types or node_types())
    return str(info.value)


def test_every_built_in_type_has_an_options_schema() -> None:
    assert {"shell", "noop", "container", "subagent", "k8s_job"} <= set(INSTALLED.options)


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ({"type": "container", "command": ["true"]}, "spec.options.image: Field required"),
        ({"type": "container", "options": {"image": "x", "memoryMb": 0}}, "spec.options.memoryMb:"),
        ({"type": "container", "options": {"image": "x", "cpus": -1}}, "spec.options.cpus:"),
        ({"type": "container", "options": {"image": "x", "mounts": [{"target": "/d"}]}},
         "spec.options.mounts.0.source: Field required"),
        ({"type": "container", "options": {"image": "x", "network": "wide"}},
         "spec.options.network:"),
        ({"type": "container", "options": {"image": "x", "memory": 5}},
         "spec.options.memory: unknown option of the container executor (known: image, "),
        ({"type": "subagent"}, "spec.options.prompt: Field required"),
        ({"type": "subagent", "options": {"prompt": "  "}}, "spec.options.prompt: is blank"),
        ({"type": "subagent", "options": {"prompt": 5}}, "spec.options.prompt:"),
        ({"type": "k8s_job", "command": ["true"]}, "spec.options.image: Field required"),
        ({"type": "k8s_job", "options": {"image": "x", "backoffLimit": -1}},
         "spec.options.backoffLimit:"),
        ({"type": "noop", "options": {"exit_code": 300}}, "spec.options.exit_code:"),
        ({"type": "shell", "command": "true", "options": {"image": "x"}},
         "spec.options.image: unknown option of the shell executor (known: none)"),
    ],
)  # fmt: skip
def test_malformed_options_are_refused_naming_the_field(spec: dict[str, Any], problem: str) -> None:
    assert refusal(spec).startswith(problem), refusal(spec)


def test_well_formed_specs_of_every_type_are_taken() -> None:
    for spec in (
        {"type": "container", "command": ["echo", "hi"],
         "options": {"image": "localhost/cortex-test:1", "memoryMb": 64, "cpus": 0.5,
                     "mounts": [{"source": "/srv/data", "target": "/data"}]}},
        {"type": "subagent", "options": {"prompt": "Send a failure notification"}},
        {"type": "k8s_job", "command": ["echo", "hi"],
         "options": {"image": "busybox", "resources": {"cpu": "500m", "memory": "128Mi"}}},
    ):  # fmt: skip
        assert parse_task_spec(spec, types=node_types()).type == spec["type"]


def test_a_type_only_another_node_runs_is_taken_its_options_unchecked_here() -> None:
    spec = {"type": "gpu_batch", "options": {"anything": [1, 2]}}
    assert parse_task_spec(spec, types=node_types("gpu_batch")).options == {"anything": [1, 2]}
    message = refusal(spec, node_types("other_type"))
    assert message.startswith("spec.type: unknown task type 'gpu_batch' (known: ")
    assert "other_type" in message and "container" in message and "subagent" in message


def test_a_type_name_must_be_well_formed_wherever_it_is_checked() -> None:
    assert refusal({"type": "Container", "command": "x"}).startswith(
        "spec.type: must be 1 to 64 lowercase letters"
    )
    with pytest.raises(InvalidArgument, match="spec.type: must be 1 to 64"):
        parse_task_spec({"type": "a" * 65})


def test_without_a_node_s_types_only_the_built_in_options_are_checked() -> None:
    # A client checking a file before sending it does not know the cluster.
    assert parse_task_spec({"type": "container", "options": {}}).options == {}
    with pytest.raises(InvalidArgument, match="spec.options.bogus: unknown option of the noop"):
        parse_task_spec({"type": "noop", "options": {"bogus": 1}})


def test_workflow_tasks_are_checked_the_same_way() -> None:
    definition = {
        "name": "w",
        "tasks": {
            "build": {"type": "container", "spec": {"command": "make", "options": {}}},
            "notify": {"type": "subagent", "spec": {"prompt": ""}, "dependsOn": ["build"]},
            "other": {"type": "nope"},
        },
    }
    with pytest.raises(InvalidArgument) as info:
        validate_definition(definition, None, types=node_types())
    message = str(info.value)
    assert "tasks.build.spec.options.image: Field required" in message
    assert "tasks.notify.spec.options.prompt: String should have at least 1 character" in message
    assert "tasks.other.type: unknown task type 'nope' (known: " in message


def test_a_subagent_prompt_beside_its_type_is_its_prompt_option() -> None:
    seed = {
        "name": "notify",
        "tasks": {
            "build": {"type": "shell", "spec": {"command": "exit 1"}},
            "notify-failure": {
                "type": "subagent",
                "spec": {"prompt": "Send a failure notification"},
                "dependsOn": ["build"],
                "condition": "parent.build.exitCode !== 0",
            },
        },
    }
    definition = validate_definition(seed, None, types=node_types())
    notify = definition.tasks[1].spec
    assert notify.type == "subagent"
    assert notify.options == {"prompt": "Send a failure notification"}
    twice = {"type": "subagent", "spec": {"prompt": "a", "options": {"prompt": "b"}}}
    with pytest.raises(InvalidArgument, match="prompt is given both in spec and in spec.options"):
        validate_definition({"name": "w", "tasks": {"n": twice}}, None, types=node_types())
