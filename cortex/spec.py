"""Typed task specifications as submitted by clients, validated before any
entry is proposed. Its messages go to clients only: inside `apply` the same
rules are enforced by `cortex.state.spec_rules`, whose messages this project
writes (tests/property/test_spec_rules_properties.py keeps the two in
agreement)."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from cortex.errors import InvalidArgument
from cortex.state.backoff import (
    MAX_BACKOFF_MS,
    backoff_delay_ms,
    exact_thousandths,
    nearest_thousandths,
)
from cortex.state.spec_rules import (
    TASK_TYPE_PATTERN,
    is_blank,
    key_problem,
    plain_json_problem,
    task_type_problem,
)

__all__ = [
    "BUILTIN_TASK_TYPES",
    "DEFAULT_MAX_SPEC_BYTES",
    "MAX_BACKOFF_MS",
    "TASK_TYPE_PATTERN",
    "Constraints",
    "RetryPolicy",
    "TaskSpec",
    "TaskTypes",
    "describe_validation_error",
    "parse_task_spec",
    "stored_task_spec",
    "validation_problems",
]

DEFAULT_MAX_SPEC_BYTES = 1024 * 1024
MAX_TIMEOUT_MS = 7 * 86_400_000


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class RetryPolicy(_Strict):
    max_retries: int = Field(3, alias="maxRetries", ge=0, le=100)
    backoff_ms: int = Field(1000, alias="backoffMs", ge=0, le=MAX_BACKOFF_MS)
    backoff_multiplier: float = Field(
        2.0, alias="backoffMultiplier", ge=1.0, le=100.0, allow_inf_nan=False
    )
    retryable: bool = True

    @field_validator("backoff_multiplier")
    @classmethod
    def _three_decimals(cls, value: float) -> float:
        # Apply computes back-off in whole thousandths (cortex.state.backoff).
        if exact_thousandths(value) is None:
            raise ValueError(f"backoffMultiplier {value} has more than 3 decimal places")
        return value

    def delay_ms(self, retry_number: int) -> int:
        """Back-off before retry number `retry_number` (1-based): 1x, 2x, 4x ...,
        capped at a day; the integer arithmetic apply uses."""
        return backoff_delay_ms(
            self.backoff_ms, nearest_thousandths(self.backoff_multiplier), retry_number
        )


class Constraints(_Strict):
    requires_gpu: bool = Field(False, alias="requiresGpu")
    avoid_gaming: bool = Field(False, alias="avoidGaming")
    min_memory_mb: int = Field(0, alias="minMemoryMb", ge=0)
    min_disk_gb: float = Field(0, alias="minDiskGb", ge=0, allow_inf_nan=False)
    node_labels: list[str] = Field(default_factory=list, alias="nodeLabels")
    target_node: str | None = Field(None, alias="targetNode")
    requires_capabilities: dict[str, str] = Field(
        default_factory=dict, alias="requiresCapabilities"
    )
    allowed_nodes: list[str] = Field(default_factory=list, alias="allowedNodes")
    forbidden_nodes: list[str] = Field(default_factory=list, alias="forbiddenNodes")
    max_parallel_per_node: int = Field(0, alias="maxParallelPerNode", ge=0)


class TaskSpec(_Strict):
    """What to run and where it may run. `command` is an argv list, or a
    string run through `/bin/sh -c`. `type` names the executor that runs it
    (`shell`, `noop`, or one a plugin adds); `options` are that executor's."""

    type: str = "shell"
    command: list[str] | str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    timeout_ms: int | None = Field(None, alias="timeoutMs", gt=0, le=MAX_TIMEOUT_MS)
    priority: int = Field(5, ge=0, le=10)
    constraints: Constraints = Field(default_factory=Constraints)
    retry_policy: RetryPolicy = Field(default_factory=RetryPolicy, alias="retryPolicy")
    labels: dict[str, str] = Field(default_factory=dict)
    options: dict[str, Any] = Field(default_factory=dict)
    # At most `max-running` tasks of this key run at once, started no faster
    # than its rate (`cortex limit set`); None: no limit applies.
    concurrency_key: str | None = Field(None, alias="concurrencyKey")
    # Shares placements with other keys by weight; None: the submitting
    # client's token name, or "default".
    fairness_key: str | None = Field(None, alias="fairnessKey")

    @model_validator(mode="before")
    @classmethod
    def _plain_json(cls, data: Any, info: ValidationInfo) -> Any:
        """NaN, Infinity and lone surrogates anywhere (options included) are
        refused: they are not JSON, and apply refuses them too. A spec read
        back from the replicated state is not walked again
        (`stored_task_spec`)."""
        if info.context is _STORED:
            return data
        problem = plain_json_problem(data) if isinstance(data, dict) else None
        if problem:
            raise ValueError(problem)
        return data

    @field_validator("type")
    @classmethod
    def _type_name(cls, value: str) -> str:
        problem = task_type_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("command")
    @classmethod
    def _command_not_empty(cls, value: list[str] | str | None) -> list[str] | str | None:
        if value is None:
            return value
        if isinstance(value, str):
            if is_blank(value):
                raise ValueError("command is empty")
        elif not value or not value[0]:
            raise ValueError("command is empty")
        return value

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not name or "=" in name or "\x00" in name:
                raise ValueError(f"invalid environment variable name {name!r}")
        return value

    @field_validator("concurrency_key", "fairness_key")
    @classmethod
    def _key_names(cls, value: str | None) -> str | None:
        problem = key_problem(value) if value is not None else None
        if problem:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _command_required_for_shell(self) -> TaskSpec:
        if self.type == "shell" and self.command is None:
            raise ValueError("a shell task needs a command")
        return self


def validation_problems(err: ValidationError, prefix: str = "") -> list[str]:
    """One readable line per problem, each naming the offending field."""
    lines = []
    for problem in err.errors():
        where = prefix + ".".join(str(part) for part in problem["loc"])
        message = problem["msg"].removeprefix("Value error, ")
        lines.append(f"{where.rstrip('.') or 'spec'}: {message}")
    return lines


def describe_validation_error(err: ValidationError, prefix: str = "") -> str:
    """`validation_problems` on one line."""
    return "; ".join(validation_problems(err, prefix))


# -- checks made before a spec is proposed -------------------------------------
#
# Apply validates specs with `TaskSpec` alone, and must keep accepting every
# spec it accepted before; the stricter checks below run where a spec enters
# (the API, workflow definitions) and again on the node about to run it.


def _whole_number(value: Any) -> Any:
    """JSON has one number type: 20.0 is accepted as 20, 1.5 is not."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class NoopOptions(_Strict):
    """Options of the `noop` executor: how long it waits, and the exit code it ends with."""

    duration_ms: int = Field(0, ge=0, le=MAX_TIMEOUT_MS, strict=True)
    exit_code: int = Field(0, ge=0, le=255, strict=True)

    @field_validator("duration_ms", "exit_code", mode="before")
    @classmethod
    def _integral(cls, value: Any) -> Any:
        return _whole_number(value)


class ShellOptions(_Strict):
    """The `shell` executor takes no options: its settings are spec fields."""


@dataclass(frozen=True)
class TaskTypes:
    """The task types a node takes where a spec enters: those of the
    executors installed here, whose options it checks, and those some node
    of the cluster runs (`cluster`, read only for a type not installed
    here; its options are checked by the node about to run it)."""

    options: Mapping[str, type[BaseModel]]
    cluster: Callable[[], Collection[str]] = tuple

    def unknown_type(self, name: str) -> str | None:
        """Why a task of type `name` is refused here, or None."""
        if name in self.options:
            return None
        elsewhere = self.cluster()
        if name in elsewhere:
            return None
        known = [*self.options, *sorted(set(elsewhere) - set(self.options))]
        return f"unknown task type {name!r} (known: {', '.join(known)})"


# The executors every node has: what a spec's options are checked against
# where nothing more is known (a client checking a file before sending it).
BUILTIN_TASK_TYPES = TaskTypes({"shell": ShellOptions, "noop": NoopOptions})


def option_problems(spec: TaskSpec, model: type[BaseModel]) -> list[str]:
    """What is wrong with the spec's `options` as `model` (its executor's
    options schema) sees them, each naming the option."""
    try:
        model.model_validate(spec.options)
    except ValidationError as err:
        known = ", ".join(f.alias or name for name, f in model.model_fields.items()) or "none"
        problems = []
        for problem in err.errors():
            where = "options." + ".".join(str(part) for part in problem["loc"])
            message = problem["msg"].removeprefix("Value error, ")
            if problem["type"] == "extra_forbidden":
                message = f"unknown option of the {spec.type} executor (known: {known})"
            problems.append(f"{where.rstrip('.')}: {message}")
        return problems
    return []


def _nul_problems(spec: TaskSpec) -> list[str]:
    """A NUL byte cannot reach a process's argv, environment or path: such a
    task could never start anywhere."""
    problems = []
    if isinstance(spec.command, str):
        if "\x00" in spec.command:
            problems.append("command: contains a NUL byte")
    elif spec.command is not None:
        problems += [
            f"command.{i}: contains a NUL byte"
            for i, arg in enumerate(spec.command)
            if "\x00" in arg
        ]
    problems += [f"env.{name}: contains a NUL byte" for name, v in spec.env.items() if "\x00" in v]
    if spec.cwd is not None and "\x00" in spec.cwd:
        problems.append("cwd: contains a NUL byte")
    return problems


def _label_problems(spec: TaskSpec) -> list[str]:
    """A required label with no key (`""`, `"=v"`): no node has one."""
    return [
        f"constraints.nodeLabels.{i}: a label needs a key (`key` or `key=value`), not {label!r}"
        for i, label in enumerate(spec.constraints.node_labels)
        if not label.partition("=")[0].strip()
    ]


def runnable_problems(spec: TaskSpec, options_model: type[BaseModel] | None = None) -> list[str]:
    """What keeps a valid spec from ever running: options its executor
    (`options_model`; default: the built-in executor of its type, if any)
    does not take or of the wrong kind, NUL bytes in argv, env or cwd, a
    required label without a key. Each problem names its field (relative to
    the spec)."""
    model = options_model or BUILTIN_TASK_TYPES.options.get(spec.type)
    options = option_problems(spec, model) if model is not None else []
    return options + _nul_problems(spec) + _label_problems(spec)


# The validation context of a spec read back from the replicated state.
_STORED: dict[str, bool] = {"stored": True}


def stored_task_spec(data: dict[str, Any]) -> TaskSpec:
    """A task's spec as the replicated state holds it, validated as a
    model. Apply stored it only once it found it plain JSON (no NaN,
    infinity or lone surrogate, `check_task_spec`), and its canonical text
    reads back as the same values, so the walk looking for them (about half
    of what the validation takes) is not made again; every other rule is
    checked as for a spec submitted. Raises `ValidationError`."""
    return TaskSpec.model_validate(data, context=_STORED)


def parse_task_spec(
    data: dict[str, Any],
    max_bytes: int = DEFAULT_MAX_SPEC_BYTES,
    types: TaskTypes | None = None,
) -> TaskSpec:
    """Validates a spec given as plain data; raises InvalidArgument naming the
    field at fault, or the size limit. With `types` (a node's), a type no
    node runs is refused and options are checked by the executor installed
    here; without, only the built-in executors' options are checked."""
    size = len(json.dumps(data, default=str))
    if size > max_bytes:
        raise InvalidArgument(f"task spec is {size} bytes, over the limit of {max_bytes} bytes")
    try:
        spec = TaskSpec.model_validate(data)
    except ValidationError as err:
        raise InvalidArgument(describe_validation_error(err, "spec.")) from None
    unknown = types.unknown_type(spec.type) if types is not None else None
    problems = [f"type: {unknown}"] if unknown else []
    model = (types or BUILTIN_TASK_TYPES).options.get(spec.type)
    problems += runnable_problems(spec, model)
    if problems:
        raise InvalidArgument("; ".join(f"spec.{problem}" for problem in problems))
    return spec
