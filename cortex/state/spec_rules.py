"""The task spec rules `apply` enforces, in code this project controls.

`check_task_spec(data)` accepts what the API edge's pydantic `TaskSpec`
(cortex/spec.py) accepts in strict mode: field names or their camelCase
aliases (not both), the same defaults, rules and ranges. It returns the same
canonical dict as `TaskSpec.model_dump(mode="json")`, which is what the edge
proposes, so an edge-validated spec always passes here unchanged. Types are
strict JSON types: an integer field refuses booleans, strings and floats; a
number field takes an integer or a float. Specs are plain JSON throughout:
no NaN or Infinity, no lone UTF-16 surrogates.

A refusal raises `SpecError` with a message written here, so the reason
recorded in replicated state reads the same on every node whatever library
versions it runs. tests/property/test_spec_rules_properties.py holds the
checker and the pydantic model to agreement on generated specs.

The rules are data: a `Model` is a tuple of `Field`s (name, alias, check,
default) plus rules over the whole object; a check takes the value and the
path it was found at and returns the canonical value or raises."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cortex.state.backoff import MAX_BACKOFF_MS, exact_thousandths
from cortex.state.reasons import quoted

# A task type names an executor, which nodes may or may not have installed:
# apply takes any well-formed name, so it reads the same on every node.
TASK_TYPE_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,63}")
MAX_TIMEOUT_MS = 7 * 86_400_000
MAX_RETRIES = 100
MAX_BACKOFF_MULTIPLIER = 100

# What counts as blank in a command string: the characters for which
# Python 3.11's `str.isspace()` is true, fixed here so the rule does not move
# with the Unicode tables of the Python a node runs.
WHITESPACE = frozenset(
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)


_SURROGATE = re.compile("[\ud800-\udfff]")


class SpecError(ValueError):
    """The spec breaks a rule; the message names the field as given."""


Check = Callable[[Any, str], Any]


def is_blank(text: str) -> bool:
    return all(char in WHITESPACE for char in text)


def plain_json_problem(value: Any) -> str | None:
    """The first place found where `value` is not plain JSON text, or None: a number that is NaN or infinite, or a string or key
    holding a lone surrogate. Walks without recursion, so depth cannot
    exhaust the stack. Almost every value is plain: it is first walked
    without building the paths a problem is named by."""
    return None if is_plain(value) else first_problem(value)


def first_problem(value: Any) -> str | None:
    """`plain_json_problem`'s walk with the paths it names problems by."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, where = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return f"{where or 'spec'} must be a finite number"
        if isinstance(item, str) and _SURROGATE.search(item):
            return f"{where or 'spec'} is not valid Unicode text"
        if isinstance(item, dict):
            for key, child in reversed(list(item.items())):
                if isinstance(key, str) and _SURROGATE.search(key):
                    return f"{where or 'spec'} has a key that is not valid Unicode text"
                stack.append((child, _path(where, str(key))))
        elif isinstance(item, list):
            stack.extend((child, f"{where}[{i}]") for i, child in reversed(list(enumerate(item))))
    return None


def is_plain(value: Any) -> bool:
    """Whether `plain_json_problem` finds nothing, without naming where."""
    search = _SURROGATE.search
    stack = [value]
    pop, push, extend = stack.pop, stack.append, stack.extend
    while stack:
        item = pop()
        if isinstance(item, str):
            # An ASCII string (flagged by CPython, no scan) has no surrogate.
            if not item.isascii() and search(item):
                return False
        elif isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, str) and not key.isascii() and search(key):
                    return False
                push(child)
        elif isinstance(item, list):
            extend(item)
        elif isinstance(item, float) and not math.isfinite(item):
            return False
    return True


# -- checks of one value -----------------------------------------------------------


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def integer(ge: int | None = None, gt: int | None = None, le: int | None = None) -> Check:
    def check(value: Any, where: str) -> int:
        if not _is_int(value):
            raise SpecError(f"{where} must be an integer")
        _check_range(value, where, ge, gt, le)
        return int(value)

    return check


def number(ge: int, le: int | None = None, thousandths: bool = False) -> Check:
    """A float field: an integer or a float, returned as a float. With
    `thousandths`, at most three decimals."""

    def check(value: Any, where: str) -> float:
        if not (_is_int(value) or isinstance(value, float)):
            raise SpecError(f"{where} must be a number")
        if isinstance(value, float) and not math.isfinite(value):
            raise SpecError(f"{where} must be a finite number")
        _check_range(value, where, ge, None, le)
        try:
            result = float(value)  # an int converts exactly rounded, or overflows
        except OverflowError:
            raise SpecError(f"{where} is too large") from None
        if thousandths and exact_thousandths(result) is None:
            raise SpecError(f"{where} must have at most 3 decimal places")
        return result

    return check


def _check_range(
    value: int | float, where: str, ge: int | None, gt: int | None, le: int | None
) -> None:
    if ge is not None and value < ge:
        if le is not None:
            raise SpecError(f"{where} must be between {ge} and {le}")
        raise SpecError(f"{where} must be at least {ge}")
    if gt is not None and value <= gt:
        raise SpecError(f"{where} must be greater than {gt}")
    if le is not None and value > le:
        if ge is not None:
            raise SpecError(f"{where} must be between {ge} and {le}")
        raise SpecError(f"{where} must be at most {le}")


def boolean(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise SpecError(f"{where} must be true or false")
    return value


def text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise SpecError(f"{where} must be a string")
    return value


def optional(check: Check) -> Check:
    def check_optional(value: Any, where: str) -> Any:
        return None if value is None else check(value, where)

    return check_optional


def task_type_problem(value: str) -> str | None:
    """What is wrong with a task type's name, or None."""
    if TASK_TYPE_PATTERN.fullmatch(value) is None:
        return "must be 1 to 64 lowercase letters, digits or underscores, starting with a letter"
    return None


def named(problem_of: Callable[[str], str | None]) -> Check:
    """A string that `problem_of` finds nothing wrong with (a name or key)."""

    def check(value: Any, where: str) -> str:
        if not isinstance(value, str):
            raise SpecError(f"{where} must be a string")
        problem = problem_of(value)
        if problem:
            raise SpecError(f"{where} {problem}")
        return value

    return check


def text_list(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise SpecError(f"{where} must be a list of strings")
    return list(value)


def text_map(key_rule: Callable[[str], str | None] | None = None) -> Check:
    """A JSON object of strings; `key_rule` returns what is wrong with a key."""

    def check(value: Any, where: str) -> dict[str, str]:
        if not isinstance(value, dict):
            raise SpecError(f"{where} must be an object of strings")
        for key, item in value.items():
            if not isinstance(key, str) or not isinstance(item, str):
                raise SpecError(f"{where} must be an object of strings")
            problem = key_rule(key) if key_rule else None
            if problem:
                raise SpecError(f"{where}: {problem}")
        return dict(value)

    return check


def json_object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
        raise SpecError(f"{where} must be an object")
    return dict(value)


def command(value: Any, where: str) -> list[str] | str | None:
    """An argv list whose first item is not empty, or a string that is not
    blank (run through `/bin/sh -c`), or nothing."""
    if value is None:
        return None
    if isinstance(value, str):
        if is_blank(value):
            raise SpecError(f"{where} is empty")
        return value
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise SpecError(f"{where} must be a list of strings or a string")
    if not value or not value[0]:
        raise SpecError(f"{where} is empty")
    return list(value)


# A concurrency or fairness key: ASCII letters, digits and `._:@/-`,
# starting with a letter or digit, at most 128 characters.
KEY_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/-]{0,127}")


def key_problem(key: str) -> str | None:
    """What is wrong with a concurrency, fairness or limit key, or None."""
    if not isinstance(key, str) or KEY_PATTERN.fullmatch(key) is None:
        return "must be 1 to 128 ASCII letters, digits or ._:@/- starting with a letter or digit"
    return None


def env_name_problem(name: str) -> str | None:
    if not name or "=" in name or "\x00" in name:
        return f"invalid environment variable name {quoted(name)}"
    return None


# -- objects ---------------------------------------------------------------------


@dataclass(frozen=True)
class Field:
    name: str
    check: Check
    default: Callable[[], Any]
    alias: str | None = None

    @functools.cached_property
    def keys(self) -> tuple[str, ...]:
        return (self.name, self.alias) if self.alias else (self.name,)


# Paths kept per model, one set per place it is checked under.
_PATHS_KEPT = 16


@dataclass(frozen=True)
class Model:
    """A JSON object of known fields, each given by its name or its alias;
    `rules` then look at the whole canonical object."""

    fields: tuple[Field, ...]
    rules: tuple[Callable[[dict[str, Any]], str | None], ...] = ()

    @functools.cached_property
    def known(self) -> frozenset[str]:
        return frozenset(key for f in self.fields for key in f.keys)

    @functools.cached_property
    def names(self) -> frozenset[str]:
        return frozenset(f.name for f in self.fields)

    @functools.cached_property
    def _paths(self) -> dict[str, tuple[tuple[Field, str], ...]]:
        return {}

    def _at(self, where: str) -> tuple[tuple[Field, str], ...]:
        """Each field with its path under `where`, made once per `where`
        (a model is checked under a handful of them)."""
        paths = self._paths.get(where)
        if paths is None:
            paths = tuple((f, _path(where, f.name)) for f in self.fields)
            if len(self._paths) < _PATHS_KEPT:
                self._paths[where] = paths
        return paths

    def __call__(self, value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise SpecError(f"{where or 'spec'} must be an object")
        if value.keys() <= self.names:
            # Field names only (what the edge proposes): no alias to look for.
            out = {
                f.name: f.check(value[f.name], at) if f.name in value else f.default()
                for f, at in self._at(where)
            }
            return self._ruled(out)
        unknown = sorted(str(key) for key in value if key not in self.known)
        if unknown:
            raise SpecError(f"{_path(where, unknown[0])} is not a known field")
        out = {}
        for f in self.fields:
            given = [key for key in f.keys if key in value]
            if len(given) == 2:
                raise SpecError(f"{_path(where, f.alias or '')} is given twice, also as {f.name}")
            if given:
                out[f.name] = f.check(value[given[0]], _path(where, given[0]))
            else:
                out[f.name] = f.default()
        return self._ruled(out)

    def _ruled(self, out: dict[str, Any]) -> dict[str, Any]:
        for rule in self.rules:
            problem = rule(out)
            if problem:
                raise SpecError(problem)
        return out


def _path(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _shell_needs_command(spec: dict[str, Any]) -> str | None:
    if spec["type"] == "shell" and spec["command"] is None:
        return "a shell task needs a command"
    return None


CONSTRAINTS = Model(
    (
        Field("requires_gpu", boolean, lambda: False, "requiresGpu"),
        Field("avoid_gaming", boolean, lambda: False, "avoidGaming"),
        Field("min_memory_mb", integer(ge=0), lambda: 0, "minMemoryMb"),
        Field("min_disk_gb", number(ge=0), lambda: 0.0, "minDiskGb"),
        Field("node_labels", text_list, list, "nodeLabels"),
        Field("target_node", optional(text), lambda: None, "targetNode"),
        Field("requires_capabilities", text_map(), dict, "requiresCapabilities"),
        Field("allowed_nodes", text_list, list, "allowedNodes"),
        Field("forbidden_nodes", text_list, list, "forbiddenNodes"),
        Field("max_parallel_per_node", integer(ge=0), lambda: 0, "maxParallelPerNode"),
    )
)

RETRY_POLICY = Model(
    (
        Field("max_retries", integer(ge=0, le=MAX_RETRIES), lambda: 3, "maxRetries"),
        Field("backoff_ms", integer(ge=0, le=MAX_BACKOFF_MS), lambda: 1000, "backoffMs"),
        Field(
            "backoff_multiplier",
            number(ge=1, le=MAX_BACKOFF_MULTIPLIER, thousandths=True),
            lambda: 2.0,
            "backoffMultiplier",
        ),
        Field("retryable", boolean, lambda: True),
    )
)

TASK_SPEC = Model(
    (
        Field("type", named(task_type_problem), lambda: "shell"),
        Field("command", command, lambda: None),
        Field("env", text_map(env_name_problem), dict),
        Field("cwd", optional(text), lambda: None),
        Field("timeout_ms", optional(integer(gt=0, le=MAX_TIMEOUT_MS)), lambda: None, "timeoutMs"),
        Field("priority", integer(ge=0, le=10), lambda: 5),
        Field("constraints", CONSTRAINTS, lambda: CONSTRAINTS({}, "constraints")),
        Field("retry_policy", RETRY_POLICY, lambda: RETRY_POLICY({}, "retryPolicy"), "retryPolicy"),
        Field("labels", text_map(), dict),
        Field("options", json_object, dict),
        Field("concurrency_key", optional(named(key_problem)), lambda: None, "concurrencyKey"),
        Field("fairness_key", optional(named(key_problem)), lambda: None, "fairnessKey"),
    ),
    rules=(_shell_needs_command,),
)


def check_task_spec(data: Any, plain_json: bool = False) -> dict[str, Any]:
    """The canonical form of a task spec (snake_case names, every default
    filled), or `SpecError` naming the first problem. `plain_json`: the
    caller knows the data holds no NaN, infinity or lone surrogate (it scanned
    the JSON text it came from), so it is not searched for them."""
    problem = None if plain_json else plain_json_problem(data)
    if problem:
        raise SpecError(problem)
    return TASK_SPEC(data, "")
