"""Executors: the interface and the built-in `shell` and `noop` types."""

from collections.abc import Iterable

from cortex.executors.base import Execution, ExecutionResult, Executor
from cortex.executors.environment import TaskEnvironment, secret_values
from cortex.executors.noop import NoopExecutor
from cortex.executors.shell import ShellExecutor, kill_process_group

BUILTIN_EXECUTORS: dict[str, Executor] = {"shell": ShellExecutor(), "noop": NoopExecutor()}


def build_executors(names: Iterable[str], environment: TaskEnvironment) -> dict[str, Executor]:
    """A node's executors by type; shell tasks inherit `environment`."""
    available: dict[str, Executor] = {
        "shell": ShellExecutor(environment),
        "noop": NoopExecutor(),
    }
    return {name: available[name] for name in names}


__all__ = [
    "BUILTIN_EXECUTORS",
    "Execution",
    "ExecutionResult",
    "Executor",
    "NoopExecutor",
    "ShellExecutor",
    "TaskEnvironment",
    "build_executors",
    "kill_process_group",
    "secret_values",
]
