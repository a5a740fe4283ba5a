"""Executors: the interface, discovery through the `cortex.executors` entry
points, and the built-in `shell` and `noop` types."""

from cortex.executors.base import (
    Execution,
    ExecutionResult,
    Executor,
    ExecutorSettings,
    OutputSink,
    TailBuffer,
    load_handle,
)
from cortex.executors.discovery import (
    ENTRY_POINT_GROUP,
    NodeExecutors,
    executor_types,
    load_executors,
)
from cortex.executors.environment import TaskEnvironment, secret_values
from cortex.executors.noop import NoopExecutor
from cortex.executors.process import kill_process_group
from cortex.executors.shell import ShellExecutor

# The executors every node has, without discovery (the simulator's nodes).
BUILTIN_EXECUTORS: dict[str, Executor] = {
    "shell": ShellExecutor(ExecutorSettings()),
    "noop": NoopExecutor(ExecutorSettings()),
}

__all__ = [
    "BUILTIN_EXECUTORS",
    "ENTRY_POINT_GROUP",
    "Execution",
    "ExecutionResult",
    "Executor",
    "ExecutorSettings",
    "NodeExecutors",
    "NoopExecutor",
    "OutputSink",
    "ShellExecutor",
    "TailBuffer",
    "TaskEnvironment",
    "executor_types",
    "kill_process_group",
    "load_executors",
    "load_handle",
    "secret_values",
]
