"""Workflow definitions: JSON or YAML text in, a validated DAG out, or one
`InvalidArgument` naming every problem found (duplicate or invalid keys,
unknown dependencies, cycles, conditions that do not parse, unknown task
types, fields of the wrong type). Nothing here proposes anything."""

from __future__ import annotations

import difflib
import json
import math
import re
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cortex.errors import InvalidArgument
from cortex.spec import (
    DEFAULT_MAX_SPEC_BYTES,
    EXECUTOR_TYPES,
    TaskSpec,
    describe_validation_error,
    runnable_problems,
)
from cortex.state.workflow_rules import MAX_CONTEXT_BYTES, find_cycle
from cortex.state.workflow_transitions import MAX_KEY_CHARS, MAX_NAME_CHARS, MAX_WORKFLOW_TASKS
from cortex.workflows.sandbox import MAX_CONDITION_CHARS, ConditionSandbox

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
    tasks: dict[str, _TaskModel]
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
) -> WorkflowDefinition:
    """Checks a loaded definition; raises one InvalidArgument listing every
    problem. Conditions are compiled (never run) in `sandbox`; without one
    they are not syntax-checked."""
    try:
        model = _WorkflowModel.model_validate(data)
    except ValidationError as err:
        raise InvalidArgument(
            f"invalid workflow definition: {describe_validation_error(err, '')}"
        ) from None
    problems: list[str] = []
    if not model.name.strip() or len(model.name) > MAX_NAME_CHARS:
        problems.append(f"name: must be 1 to {MAX_NAME_CHARS} characters")
    if not model.tasks:
        problems.append("tasks: a workflow needs at least one task")
    if len(model.tasks) > MAX_WORKFLOW_TASKS:
        problems.append(f"tasks: {len(model.tasks)} tasks, over the limit of {MAX_WORKFLOW_TASKS}")
    context_size = len(json.dumps(model.context))
    if context_size > MAX_CONTEXT_BYTES:
        problems.append(f"context: {context_size} bytes, over the limit of {MAX_CONTEXT_BYTES}")
    tasks = []
    for key, task in model.tasks.items():
        spec = _task_spec(key, task, max_spec_bytes, problems)
        _check_dependencies(key, task, model.tasks, problems)
        if task.condition is not None and not task.condition.strip():
            problems.append(f"tasks.{key}.condition: is empty (leave it out to run on success)")
        if spec is not None:
            tasks.append(TaskDefinition(key, spec, task.depends_on, task.condition or None))
    cycle = find_cycle({key: task.depends_on for key, task in model.tasks.items()})
    if cycle:
        problems.append(
            f"tasks: dependency cycle {' -> '.join(cycle)} (each task depends on the next)"
        )
    problems += _condition_problems(model.tasks, sandbox)
    if problems:
        shown = "; ".join(problems[:MAX_PROBLEMS_SHOWN])
        more = len(problems) - MAX_PROBLEMS_SHOWN
        raise InvalidArgument(
            f"invalid workflow definition: {shown}" + (f"; and {more} more" if more > 0 else "")
        )
    return WorkflowDefinition(model.name, tasks, model.context)


def _task_spec(
    key: str, task: _TaskModel, max_spec_bytes: int, problems: list[str]
) -> TaskSpec | None:
    where = f"tasks.{key}"
    if not KEY_PATTERN.fullmatch(key) or len(key) > MAX_KEY_CHARS:
        problems.append(
            f"tasks: invalid key {key!r} (letters, digits, '_', '-' and '.', not starting"
            f" with '-' or '.', at most {MAX_KEY_CHARS} characters)"
        )
        return None
    spec = dict(task.spec)
    spec_type = spec.get("type")
    if task.type is not None and spec_type is not None and spec_type != task.type:
        problems.append(f"{where}: type {task.type!r} and spec.type {spec_type!r} disagree")
        return None
    kind = task.type or spec_type or "shell"
    if kind not in EXECUTOR_TYPES:
        problems.append(
            f"{where}.type: unknown task type {kind!r} (known: {', '.join(EXECUTOR_TYPES)})"
        )
        return None
    spec["type"] = kind
    for name, spec_names in _SPEC_FIELDS:
        value = getattr(task, "retry_policy" if name == "retryPolicy" else name)
        if value is None:
            continue
        if any(n in spec for n in spec_names):
            problems.append(f"{where}: {name} is given both on the task and in its spec")
            return None
        spec[name] = value
    size = len(json.dumps(spec))
    if size > max_spec_bytes:
        problems.append(f"{where}.spec: {size} bytes, over the limit of {max_spec_bytes}")
        return None
    try:
        parsed = TaskSpec.model_validate(spec)
    except ValidationError as err:
        problems.append(describe_validation_error(err, f"{where}.spec."))
        return None
    unrunnable = runnable_problems(parsed)
    if unrunnable:
        problems += [f"{where}.spec.{problem}" for problem in unrunnable]
        return None
    return parsed


def _check_dependencies(
    key: str, task: _TaskModel, tasks: dict[str, _TaskModel], problems: list[str]
) -> None:
    seen: set[str] = set()
    for dependency in task.depends_on:
        if dependency in seen:
            problems.append(f"tasks.{key}.dependsOn: lists {dependency!r} twice")
        seen.add(dependency)
        if dependency not in tasks:
            close = difflib.get_close_matches(dependency, list(tasks), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(f"tasks.{key}.dependsOn: unknown task {dependency!r}{hint}")


def _condition_problems(
    tasks: dict[str, _TaskModel], sandbox: ConditionSandbox | None
) -> list[str]:
    conditions: dict[str, list[str]] = {}
    problems = []
    for key, task in tasks.items():
        condition = task.condition
        if condition is None or not condition.strip():
            continue
        if len(condition) > MAX_CONDITION_CHARS:
            problems.append(
                f"tasks.{key}.condition: {len(condition)} characters, over the limit of"
                f" {MAX_CONDITION_CHARS}"
            )
            continue
        conditions.setdefault(condition, []).append(key)
    if sandbox is None or not conditions:
        return problems
    unique = list(conditions)
    for condition, error in zip(unique, sandbox.check_syntax_many(unique), strict=True):
        if error is not None:
            problems += [f"tasks.{key}.condition: does not parse: {error}"
                         for key in conditions[condition]]  # fmt: skip
    return problems


def parse_definition(
    text: str,
    fmt: str = "",
    sandbox: ConditionSandbox | None = None,
    max_spec_bytes: int = DEFAULT_MAX_SPEC_BYTES,
) -> WorkflowDefinition:
    """Text to a validated definition (see `load_document`, `validate_definition`)."""
    return validate_definition(load_document(text, fmt), sandbox, max_spec_bytes)
