"""Submit-time checks of a workflow's conditions: each compiles, and each
names only tasks upstream of its own. A condition sees (as `parent`) only
those, so naming any other task could only ever read `undefined` there; the
names are read from the condition's tokens (`condition_names`)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence

from cortex.state.workflow_rules import strongly_connected
from cortex.workflows.condition_names import ParentReference, parent_references
from cortex.workflows.sandbox import MAX_CONDITION_CHARS, ConditionSandbox

# What every JavaScript object has: `parent.hasOwnProperty(...)` names no task.
_OBJECT_MEMBERS = frozenset(
    {"constructor", "hasOwnProperty", "isPrototypeOf", "propertyIsEnumerable",
     "toLocaleString", "toString", "valueOf", "__proto__", "__defineGetter__",
     "__defineSetter__", "__lookupGetter__", "__lookupSetter__"}
)  # fmt: skip


def close_match(name: str, keys: Iterable[str]) -> str:
    """A "did you mean" hint for a name that is not a task, or nothing."""
    close = difflib.get_close_matches(name, list(keys), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def condition_problems(
    tasks: Mapping[str, tuple[Sequence[str], str | None]], sandbox: ConditionSandbox | None
) -> list[str]:
    """For tasks given as key -> (dependencies, condition): the conditions
    that are too long or do not compile (in `sandbox`, when there is one),
    then those that name a task that is not upstream of theirs."""
    conditions: dict[str, list[str]] = {}
    problems = []
    for key, (_, condition) in tasks.items():
        if condition is None or not condition.strip():
            continue
        if len(condition) > MAX_CONDITION_CHARS:
            problems.append(
                f"tasks.{key}.condition: {len(condition)} characters, over the limit of"
                f" {MAX_CONDITION_CHARS}"
            )
            continue
        conditions.setdefault(condition, []).append(key)
    if sandbox is not None and conditions:
        unique = list(conditions)
        for condition, error in zip(unique, sandbox.check_syntax_many(unique), strict=True):
            if error is not None:
                problems += [f"tasks.{key}.condition: does not parse: {error}"
                             for key in conditions.pop(condition)]  # fmt: skip
    named = {c: refs for c in conditions if (refs := parent_references(c))}
    if named:
        upstream = _Upstream({key: depends_on for key, (depends_on, _) in tasks.items()})
        for condition, references in named.items():
            for key in conditions[condition]:
                problems += _reference_problems(key, references, upstream)
    return problems


class _Upstream:
    """Which tasks are upstream of which: each task's upstream tasks as the
    bits of one integer, built once per group of tasks that depend on each
    other (a cycle's tasks are all upstream of one another), dependencies
    first, so a workflow of 10,000 tasks in a chain costs a fraction of a
    second."""

    def __init__(self, depends_on: Mapping[str, Sequence[str]]) -> None:
        self.keys = list(depends_on)
        self._bit = {key: 1 << i for i, key in enumerate(self.keys)}
        self._above: dict[str, int] = {}
        for component in strongly_connected(depends_on):
            # Within a cycle, each member is a parent of another: all of
            # them end up in `above`.
            above = 0
            for key in component:
                for parent in depends_on[key]:
                    if parent in self._bit:
                        above |= self._above.get(parent, 0) | self._bit[parent]
            for key in component:
                self._above[key] = above

    def __contains__(self, key: str) -> bool:
        return key in self._bit

    def holds(self, key: str, other: str) -> bool:
        """Whether `other` is upstream of `key`."""
        return bool(self._above.get(key, 0) & self._bit.get(other, 0))

    def of(self, key: str) -> list[str]:
        """The tasks upstream of `key`, in definition order."""
        above = self._above.get(key, 0)
        return [k for k in self.keys if above & self._bit[k]]


def _reference_problems(
    key: str, references: list[ParentReference], upstream: _Upstream
) -> list[str]:
    """A condition sees (as `parent`) only the tasks upstream of its own:
    naming any other task is refused, since it could only ever read
    `undefined` there."""
    problems = []
    named: set[str] = set()
    for reference in references:
        name = reference.key
        if name in named or upstream.holds(key, name):
            continue
        named.add(name)
        exists = name in upstream
        if not exists and name in _OBJECT_MEMBERS:
            continue  # parent.hasOwnProperty(...) and the like
        where = f"tasks.{key}.condition: {reference.text}"
        if not exists:
            hint = _bracket_hint(name, upstream.keys) or close_match(name, upstream.keys)
            problems.append(f"{where} names no task of the workflow{hint}")
        else:
            hint = _bracket_hint(name, upstream.of(key)) or (
                f" (add {name!r} to tasks.{key}.dependsOn)"
            )
            problems.append(
                f"{where} names task {name!r}, which {key!r} does not depend on: a condition"
                f" sees only the tasks upstream of its own{hint}"
            )
    return problems


def _bracket_hint(name: str, keys: Iterable[str]) -> str:
    """For `parent.build` where `build.linux` (or `build-linux`) was meant."""
    dotted = sorted(k for k in keys if k.startswith((f"{name}.", f"{name}-")))
    return f" (write parent[{dotted[0]!r}] for a key with '.' or '-')" if dotted else ""
