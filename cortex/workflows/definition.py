"""Workflow definitions: JSON or YAML text in, a validated DAG out, or one
`InvalidArgument` naming every problem found, each with its path (duplicate
or invalid keys, unknown dependencies, cycles, conditions that do not parse
or that name a task not upstream of theirs, unknown task types, fields of
the wrong type). Nothing here proposes anything."""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cortex.errors import InvalidArgument
from cortex.spec import (
    BUILTIN_TASK_TYPES,
    DEFAULT_MAX_SPEC_BYTES,
    TaskSpec,
    TaskTypes,
    runnable_problems,
    validation_problems,
)
from cortex.state.spec_rules import task_type_problem
from cortex.state.workflow_rules import MAX_CONTEXT_BYTES, find_cycles
from cortex.state.workflow_transitions import MAX_KEY_CHARS, MAX_NAME_CHARS, MAX_WORKFLOW_TASKS
from cortex.workflows.condition_checks import close_match, condition_problems
from cortex.workflows.sandbox import ConditionSandbox

MAX_DEFINITION_BYTES = 8 * 1024 * 1024
# YAML costs far more CPU per byte than JSON: even with libyaml's C parser,
# every value is resolved and built in Python. These limits hold the worst
# case measured (scripts/bench_yaml.py: densely packed small values, about
# 5 s per MB with libyaml, 20 s per MB without) to about a second of CPU per
# request, what a JSON definition at its 8 MiB limit costs; larger
# definitions go as JSON (the CLI converts them).
MAX_YAML_BYTES_LIBYAML = 256 * 1024
MAX_YAML_BYTES_PURE = 40 * 1024
# Values in a loaded document, counting YAML aliases at every use, so an
# alias bomb is refused before anything expands it.
MAX_DOCUMENT_VALUES = 500_000
MAX_PROBLEMS_SHOWN = 20
FORMATS = ("json", "yaml", "yml", "")
KEY_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
# Task-level fields that are spec fields too: (definition name, spec names).
_SPEC_FIELDS = (
    ("constraints", ("constraints",)),
    ("retryPolicy", ("retryPolicy", "retry_policy")),
    ("priority", ("priority",)),
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, strict=True)


class _TaskModel(_Strict):
    type: str | None = None
    spec: dict[str, Any] = Field(default_factory=dict)
    constraints: dict[str, Any] | None = None
    retry_policy: dict[str, Any] | None = Field(None, alias="retryPolicy")
    priority: int | None = None
    depends_on: list[str] = Field(default_factory=list, alias="dependsOn")
    condition: str | None = None
    description: str | None = None


class _WorkflowModel(_Strict):
    name: str
    # Each task is checked on its own (`_task_model`), so that one malformed
    # task does not hide the others' problems.
    tasks: dict[str, Any]
    context: dict[str, Any] = Field(default_factory=dict)
    description: str | None = None


@dataclass(frozen=True)
class TaskDefinition:
    key: str
    spec: TaskSpec
    depends_on: list[str]
    condition: str | None


@dataclass(frozen=True)
class WorkflowDefinition:
    name: str
    # In definition order.
    tasks: list[TaskDefinition]
    context: dict[str, Any]


# -- loading ----------------------------------------------------------------------


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(f"duplicate key {key!r}")
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


class _NoDuplicateKeys(yaml.constructor.SafeConstructor):
    """Refuses a mapping naming the same key twice (merge keys `<<` may
    still be overridden, as YAML intends)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:
                continue  # unhashable: SafeLoader reports it
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"found duplicate key {key!r}", key_node.start_mark,
                )  # fmt: skip
        return super().construct_mapping(node, deep)  # type: ignore[no-untyped-call]


class _PureYamlLoader(_NoDuplicateKeys, yaml.SafeLoader):
    pass


_CSafeLoader: Any = getattr(yaml, "CSafeLoader", None)
if _CSafeLoader is not None:

    class _CYamlLoader(_NoDuplicateKeys, _CSafeLoader):  # type: ignore[misc, valid-type]
        pass

    YAML_LOADER: type = _CYamlLoader
    MAX_YAML_BYTES = MAX_YAML_BYTES_LIBYAML
else:  # pragma: no cover - libyaml is missing
    YAML_LOADER = _PureYamlLoader
    MAX_YAML_BYTES = MAX_YAML_BYTES_PURE


def is_yaml(text: str, fmt: str = "") -> bool:
    """Whether `load_document` reads `text` as YAML (first, or at all)."""
    fmt = (fmt or "").strip().lower()
    return fmt in ("yaml", "yml") or (not fmt and not text.lstrip().startswith("{"))


def load_document(text: str, fmt: str = "", max_yaml_bytes: int = MAX_YAML_BYTES) -> dict[str, Any]:
    """Parses JSON or YAML (`fmt` empty: JSON when the text starts with `{`
    and parses as JSON, else YAML) into plain JSON-compatible data. YAML may
    be at most `max_yaml_bytes` long."""
    fmt = (fmt or "").strip().lower()
    if fmt not in FORMATS:
        raise InvalidArgument(f"format {fmt!r} is not json, yaml or empty (detect)")
    size = len(text.encode("utf-8", errors="replace"))
    if size > MAX_DEFINITION_BYTES:
        raise InvalidArgument(
            f"workflow definition is {size} bytes, over the limit of {MAX_DEFINITION_BYTES}"
        )
    if not text.strip():
        raise InvalidArgument("workflow definition is empty")
    data: Any
    if fmt == "json" or (not fmt and text.lstrip().startswith("{")):
        try:
            data = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
        except _DuplicateKey as err:
            raise InvalidArgument(f"workflow definition is not valid JSON: {err}") from None
        except ValueError as err:
            if fmt == "json":
                raise InvalidArgument(f"workflow definition is not valid JSON: {err}") from None
            try:
                data = _load_yaml(text, size, max_yaml_bytes)
            except InvalidArgument:
                # It looked like JSON, so the JSON error is the helpful one.
                raise InvalidArgument(f"workflow definition is not valid JSON: {err}") from None
        except RecursionError:
            raise InvalidArgument("workflow definition is nested too deeply") from None
    else:
        data = _load_yaml(text, size, max_yaml_bytes)
    if not isinstance(data, dict):
        raise InvalidArgument("workflow definition must be an object (a mapping of fields)")
    _check_plain(data)
    return data


def _load_yaml(text: str, size: int, max_bytes: int) -> Any:
    if size > max_bytes:
        raise InvalidArgument(
            f"workflow definition is {size} bytes of YAML, over the limit of {max_bytes} bytes"
            f" for YAML (send it as JSON, up to {MAX_DEFINITION_BYTES} bytes)"
        )
    try:
        return yaml.load(text, Loader=YAML_LOADER)  # noqa: S506 - a SafeLoader
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = err.problem or err.context or "malformed"
        raise InvalidArgument(f"workflow definition is not valid YAML: {problem}{where}") from None
    except yaml.YAMLError as err:
        raise InvalidArgument(f"workflow definition is not valid YAML: {err}") from None
    except RecursionError:
        raise InvalidArgument("workflow definition is nested too deeply") from None


def _check_plain(data: Any) -> None:
    """Only JSON types (string keys, finite numbers), at most
    MAX_DOCUMENT_VALUES values, aliases counted at every use."""
    count = 0
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        path, value = stack.pop()
        count += 1
        if count > MAX_DOCUMENT_VALUES:
            raise InvalidArgument(
                f"workflow definition holds over {MAX_DOCUMENT_VALUES} values (an alias bomb?)"
            )
        where = path or "definition"
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise InvalidArgument(
                        f"{where}: key {key!r} is not a string (quote it: YAML reads"
                        " on/off/yes/no as booleans and bare digits as numbers)"
                    )
                stack.append((f"{path}.{key}" if path else key, item))
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", item) for i, item in enumerate(value))
        elif isinstance(value, float) and not math.isfinite(value):
            raise InvalidArgument(f"{where}: {value} is not a JSON number")
        elif value is not None and not isinstance(value, str | int | float | bool):
            raise InvalidArgument(
                f"{where}: a {type(value).__name__} is not a JSON value (quote it)"
            )


# -- validation -------------------------------------------------------------------


def validate_definition(
    data: dict[str, Any],
    sandbox: ConditionSandbox | None,
    max_spec_bytes: int = DEFAULT_MAX_SPEC_BYTES,
    types: TaskTypes | None = None,
) -> WorkflowDefinition:
    """Checks a loaded definition; raises one InvalidArgument listing every
    problem, each with its path (`tasks.KEY.FIELD`). A task whose fields are
    malformed is still checked as far as it can be (its dependencies, its
    place in cycles, its condition). Conditions are compiled (never run) in
    `sandbox`, then checked to name only tasks upstream of theirs (see
    `condition_names`); without a sandbox they are not compiled. Task types
    and their options are checked as `parse_task_spec` checks them with
    `types`."""
    problems: list[str] = []
    name, raw_tasks, context = _workflow_fields(data, problems)
    if name is not None and (not name.strip() or len(name) > MAX_NAME_CHARS):
        problems.append(f"name: must be 1 to {MAX_NAME_CHARS} characters")
    if not raw_tasks and isinstance(data.get("tasks"), dict):
        problems.append("tasks: a workflow needs at least one task")
    if len(raw_tasks) > MAX_WORKFLOW_TASKS:
        problems.append(f"tasks: {len(raw_tasks)} tasks, over the limit of {MAX_WORKFLOW_TASKS}")
    context_size = len(json.dumps(context))
    if context_size > MAX_CONTEXT_BYTES:
        problems.append(f"context: {context_size} bytes, over the limit of {MAX_CONTEXT_BYTES}")
    tasks: dict[str, _TaskModel] = {}
    definitions = []
    for key, raw in raw_tasks.items():
        task, well_formed = _task_model(key, raw, problems)
        tasks[key] = task
        if not KEY_PATTERN.fullmatch(key) or len(key) > MAX_KEY_CHARS:
            problems.append(
                f"tasks: invalid key {key!r} (letters, digits, '_', '-' and '.', not starting"
                f" with '-' or '.', at most {MAX_KEY_CHARS} characters)"
            )
            well_formed = False
        spec = _task_spec(key, task, max_spec_bytes, problems, types) if well_formed else None
        _check_dependencies(key, task, raw_tasks, problems)
        if task.condition is not None and not task.condition.strip():
            problems.append(f"tasks.{key}.condition: is empty (leave it out to run on success)")
        if spec is not None:
            definitions.append(TaskDefinition(key, spec, task.depends_on, task.condition or None))
    for cycle in find_cycles({key: task.depends_on for key, task in tasks.items()}):
        problems.append(
            f"tasks: dependency cycle {' -> '.join(cycle)} (each task depends on the next)"
        )
    if len(tasks) <= MAX_WORKFLOW_TASKS:  # past it, refused anyway: spare the work
        conditions = {key: (task.depends_on, task.condition) for key, task in tasks.items()}
        problems += condition_problems(conditions, sandbox)
    if problems or name is None:
        count = f"{len(problems)} problems" if len(problems) > 1 else "1 problem"
        shown = "; ".join(problems[:MAX_PROBLEMS_SHOWN])
        more = len(problems) - MAX_PROBLEMS_SHOWN
        raise InvalidArgument(
            f"invalid workflow definition ({count}): {shown}"
            + (f"; and {more} more" if more > 0 else "")
        )
    return WorkflowDefinition(name, definitions, context)


def _workflow_fields(
    data: dict[str, Any], problems: list[str]
) -> tuple[str | None, dict[str, Any], dict[str, Any]]:
    """The name (None when missing or not a string: a problem then), the raw
    tasks and the context (each empty when not a mapping); problems with the
    workflow's own fields go to `problems`."""
    try:
        model = _WorkflowModel.model_validate(data)
    except ValidationError as err:
        problems += validation_problems(err, "")
        name, tasks, context = data.get("name"), data.get("tasks"), data.get("context")
        return (
            name if isinstance(name, str) else None,
            tasks if isinstance(tasks, dict) else {},
            context if isinstance(context, dict) else {},
        )
    return model.name, model.tasks, model.context


def _task_model(key: str, raw: Any, problems: list[str]) -> tuple[_TaskModel, bool]:
    """The task's fields, and whether they are all well formed. A malformed
    task keeps what can be read of its `dependsOn` and `condition`, so they
    are still checked."""
    if not isinstance(raw, dict):
        problems.append(f"tasks.{key}: Input should be a valid dictionary")
        return _TaskModel(), False
    try:
        return _TaskModel.model_validate(raw), True
    except ValidationError as err:
        problems += validation_problems(err, f"tasks.{key}.")
    fields = raw
    depends_on = fields.get("dependsOn", fields.get("depends_on"))
    condition = fields.get("condition")
    partial = _TaskModel.model_construct(
        depends_on=[d for d in depends_on if isinstance(d, str)]
        if isinstance(depends_on, list)
        else [],
        condition=condition if isinstance(condition, str) else None,
    )
    return partial, False


def _task_spec(
    key: str,
    task: _TaskModel,
    max_spec_bytes: int,
    problems: list[str],
    types: TaskTypes | None,
) -> TaskSpec | None:
    """The task's spec, or None after adding its problems (all of them: a
    problem with one field does not hide another's)."""
    where = f"tasks.{key}"
    found = len(problems)
    spec = dict(task.spec)
    spec_type = spec.get("type")
    if task.type is not None and spec_type is not None and spec_type != task.type:
        problems.append(f"{where}: type {task.type!r} and spec.type {spec_type!r} disagree")
    kind = task.type or spec_type or "shell"
    unknown = task_type_problem(kind) if isinstance(kind, str) else "must be a string"
    if unknown is None and types is not None:
        unknown = types.unknown_type(kind)
    if unknown is not None:
        problems.append(f"{where}.type: {unknown}")
        # The other fields are still checked, against a type that needs nothing.
        spec.pop("options", None)
        spec.pop("prompt", None)
    elif kind == "subagent" and "prompt" in spec:
        _move_prompt_to_options(spec, where, problems)
    spec["type"] = kind if unknown is None else "noop"
    for name, spec_names in _SPEC_FIELDS:
        value = getattr(task, "retry_policy" if name == "retryPolicy" else name)
        if value is None:
            continue
        if any(n in spec for n in spec_names):
            problems.append(f"{where}: {name} is given both on the task and in its spec")
            continue
        spec[name] = value
    size = len(json.dumps(spec))
    if size > max_spec_bytes:
        problems.append(f"{where}.spec: {size} bytes, over the limit of {max_spec_bytes}")
        return None
    try:
        parsed = TaskSpec.model_validate(spec)
    except ValidationError as err:
        problems += validation_problems(err, f"{where}.spec.")
        return None
    if unknown is None:
        model = (types or BUILTIN_TASK_TYPES).options.get(kind)
        problems += [f"{where}.spec.{problem}" for problem in runnable_problems(parsed, model)]
    return parsed if len(problems) == found else None


def _move_prompt_to_options(spec: dict[str, Any], where: str, problems: list[str]) -> None:
    """A subagent task may give its prompt beside its type (`spec: {prompt:
    ...}`), as the design's examples do: it is the `prompt` option."""
    prompt = spec.pop("prompt")
    options = spec.get("options")
    if not isinstance(options, dict):
        if options is None:
            spec["options"] = {"prompt": prompt}
        return  # not an object: reported as such
    if "prompt" in options:
        problems.append(f"{where}.spec: prompt is given both in spec and in spec.options")
        return
    spec["options"] = {**options, "prompt": prompt}


def _check_dependencies(
    key: str, task: _TaskModel, tasks: dict[str, Any], problems: list[str]
) -> None:
    seen: set[str] = set()
    for dependency in task.depends_on:
        if dependency in seen:
            problems.append(f"tasks.{key}.dependsOn: lists {dependency!r} twice")
        seen.add(dependency)
        if dependency not in tasks:
            problems.append(
                f"tasks.{key}.dependsOn: unknown task {dependency!r}{close_match(dependency, tasks)}"
            )


def definition_digest(definition: WorkflowDefinition) -> str:
    """A hash of what the workflow is (name, context, each task's canonical
    spec, dependencies and condition; task order aside): two submissions
    under one idempotency key must agree on it."""
    canonical = {
        "name": definition.name,
        "context": definition.context,
        "tasks": sorted(
            (task.key, task.spec.model_dump(mode="json"), list(task.depends_on), task.condition)
            for task in definition.tasks
        ),
    }
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def parse_definition(
    text: str,
    fmt: str = "",
    sandbox: ConditionSandbox | None = None,
    max_spec_bytes: int = DEFAULT_MAX_SPEC_BYTES,
    types: TaskTypes | None = None,
) -> WorkflowDefinition:
    """Text to a validated definition (see `load_document`, `validate_definition`)."""
    return validate_definition(load_document(text, fmt), sandbox, max_spec_bytes, types)
