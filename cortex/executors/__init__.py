"""Executors: the interface and the built-in `shell` and `noop` types."""

from cortex.executors.base import Execution, ExecutionResult, Executor
from cortex.executors.noop import NoopExecutor
from cortex.executors.shell import ShellExecutor, kill_process_group

BUILTIN_EXECUTORS: dict[str, Executor] = {"shell": ShellExecutor(), "noop": NoopExecutor()}

__all__ = [
    "BUILTIN_EXECUTORS",
    "Execution",
    "ExecutionResult",
    "Executor",
    "NoopExecutor",
    "ShellExecutor",
    "kill_process_group",
]
