"""Finds the executors installed with this node: each is an entry point of
the group `cortex.executors` (name: the task type; value: `module:Class`),
the built-in ones included, so a separate package adds an executor the same
way. A node runs those its configuration names (default: all) whose
fingerprint says this node can run them; the others are left out, each with
its reason, and the node starts regardless."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from pydantic import BaseModel

from cortex.executors.base import Executor, ExecutorSettings
from cortex.spec import TASK_TYPE_PATTERN

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "cortex.executors"
# A fingerprint that has not answered by then counts as "cannot run here".
# The node's start waits this long at most, and only for a slow fingerprint.
FINGERPRINT_TIMEOUT_S = 10.0
# The capability that says why a type is left out on a node (`cortex
# executors list` shows it): `executors.unavailable.<type>`.
UNAVAILABLE_PREFIX = "executors.unavailable."


def executor_entry_points() -> dict[str, EntryPoint]:
    """The installed executors' entry points by task type; of two naming one
    type, the first found wins (the other is logged)."""
    found: dict[str, EntryPoint] = {}
    for point in entry_points(group=ENTRY_POINT_GROUP):
        kept = found.get(point.name)
        if kept is None:
            found[point.name] = point
        elif kept.value != point.value:
            log.warning("executor %s: %s is installed too and ignored (using %s)",
                        point.name, point.value, kept.value)  # fmt: skip
    return found


def executor_types() -> list[str]:
    """The task types installed executors run (nothing is imported)."""
    return sorted(executor_entry_points())


@dataclass
class NodeExecutors:
    """What a node can run: its usable executors by type, the capabilities
    their fingerprints advertise, the options schema of every executor that
    loaded (usable here or not: a spec is checked wherever it enters), and
    why each other type is left out."""

    usable: dict[str, Executor] = field(default_factory=dict)
    capabilities: dict[str, str] = field(default_factory=dict)
    options: dict[str, type[BaseModel]] = field(default_factory=dict)
    left_out: dict[str, str] = field(default_factory=dict)
    # Left out because their fingerprint found nothing or failed: looked at
    # again by `retry`, so a runtime that comes up after the node (or was too
    # busy to answer at its start) is used once it answers.
    waiting: dict[str, Executor] = field(default_factory=dict)

    def left_out_capabilities(self) -> dict[str, str]:
        """The reasons as capabilities, so every node's are seen cluster-wide."""
        return {f"{UNAVAILABLE_PREFIX}{name}": why for name, why in sorted(self.left_out.items())}

    def retry(self, timeout_s: float = FINGERPRINT_TIMEOUT_S) -> list[str]:
        """Fingerprints the waiting executors again: each that now finds what
        it needs becomes usable, with its capabilities and without its reason
        to be left out. Returns their names. `usable` is changed in place
        (the agent reads it); the capabilities are replaced whole, never
        seen half changed."""
        if not self.waiting:
            return []
        found = {
            name: result
            for name, result in sorted(_fingerprints(dict(self.waiting), timeout_s).items())
            if isinstance(result, dict)
        }
        if not found:
            return []
        capabilities = dict(self.capabilities)
        for result in found.values():
            capabilities.update(_capabilities_of(result))
        self.capabilities = capabilities
        self.left_out = {name: why for name, why in self.left_out.items() if name not in found}
        for name in found:
            self.usable[name] = self.waiting.pop(name)
            log.info("executor %s is usable now: its fingerprint found what it needs", name)
        return list(found)


def _capabilities_of(fingerprint: dict[str, Any]) -> dict[str, str]:
    return {key: str(value) for key, value in fingerprint.items()}


def _describe(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def load_executor_class(name: str, point: EntryPoint) -> type[Any]:
    """The class an entry point names, checked to run `name` tasks and to
    declare its options; raises ValueError (or the import's error) otherwise."""
    if not TASK_TYPE_PATTERN.fullmatch(name):
        raise ValueError(
            f"{name!r} is not a task type (lowercase letters, digits and '_', "
            "starting with a letter)"
        )
    cls = point.load()
    declared = getattr(cls, "name", None)
    if declared != name:
        raise ValueError(f"{point.value} runs tasks of type {declared!r}, not {name!r}")
    model = getattr(cls, "options_model", None)
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise ValueError(f"{point.value} has no options_model (a pydantic model)")
    return cls  # type: ignore[no-any-return]


def _fingerprints(
    executors: dict[str, Executor], timeout_s: float
) -> dict[str, dict[str, str] | None | BaseException]:
    """Every executor's fingerprint, taken at once; one that has not
    answered within `timeout_s` is missing from the result."""
    results: dict[str, dict[str, str] | None | BaseException] = {}
    lock = threading.Lock()

    def take(name: str, executor: Executor) -> None:
        try:
            value: dict[str, str] | None | BaseException = executor.fingerprint()
        except Exception as err:
            value = err
        with lock:
            results[name] = value

    threads = [
        threading.Thread(target=take, args=item, name=f"fingerprint-{item[0]}", daemon=True)
        for item in executors.items()
    ]
    for thread in threads:
        thread.start()
    # One deadline for all: a slow fingerprint does not extend the others' wait.
    deadline = time.monotonic() + timeout_s
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    with lock:
        return dict(results)


def load_executors(
    settings: ExecutorSettings,
    names: Iterable[str] | None = None,
    fingerprint_timeout_s: float = FINGERPRINT_TIMEOUT_S,
) -> NodeExecutors:
    """The executors of `names` (None: every installed one): loaded,
    constructed with `settings` and fingerprinted. Never raises for a
    plugin's fault: a plugin that fails is left out, saying why."""
    points = executor_entry_points()
    wanted = sorted(points) if names is None else list(dict.fromkeys(names))
    found = NodeExecutors()
    constructed: dict[str, Executor] = {}
    for name in wanted:
        point = points.get(name)
        if point is None:
            found.left_out[name] = "not installed on this node"
            continue
        try:
            cls = load_executor_class(name, point)
        except Exception as err:
            found.left_out[name] = f"failed to load {point.value}: {_describe(err)}"
            continue
        found.options[name] = cls.options_model
        try:
            constructed[name] = cls(settings)
        except Exception as err:
            found.left_out[name] = f"failed to start {point.value}: {_describe(err)}"
    fingerprints = _fingerprints(constructed, fingerprint_timeout_s)
    for name, executor in constructed.items():
        if name not in fingerprints:
            found.left_out[name] = f"its fingerprint did not answer within {fingerprint_timeout_s}s"
            continue
        result = fingerprints[name]
        if isinstance(result, BaseException):
            found.left_out[name] = f"its fingerprint failed: {_describe(result)}"
            found.waiting[name] = executor
        elif result is None:
            found.left_out[name] = (
                "not available here (its fingerprint found nothing to run it with)"
            )
            found.waiting[name] = executor
        else:
            found.usable[name] = executor
            found.capabilities.update(_capabilities_of(result))
    for name, why in sorted(found.left_out.items()):
        log.log(
            logging.INFO if why.startswith("not available") else logging.WARNING,
            "executor %s left out: %s", name, why,
        )  # fmt: skip
    return found
