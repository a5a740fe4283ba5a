"""Runs a task's command as a subprocess in its own process group, so a
timeout or a cancel kills everything it started. The command sees a scrubbed
environment (see `TaskEnvironment`), never the node's secrets."""

from __future__ import annotations

import os
import threading
from typing import Any

from cortex.executors.base import Execution, ExecutionResult, ExecutorSettings
from cortex.executors.process import command_argv, run_process
from cortex.spec import ShellOptions


class ShellExecutor:
    name = "shell"
    uses_work_dir = True
    options_model = ShellOptions

    def __init__(self, settings: ExecutorSettings | None = None) -> None:
        self.environment = (settings or ExecutorSettings()).environment

    def fingerprint(self) -> dict[str, str] | None:
        return {}

    def run(self, execution: Execution, cancel: threading.Event) -> ExecutionResult:
        spec = execution.spec
        assert spec.command is not None
        os.makedirs(execution.work_dir, exist_ok=True)
        env = {**self.environment.inherited(os.environ), **spec.env, **execution.env}
        return run_process(command_argv(spec.command), env, spec.cwd or None, execution, cancel)

    def recover(
        self, execution: Execution, handle: dict[str, Any], cancel: threading.Event
    ) -> ExecutionResult:
        raise LookupError("a shell command's process does not outlive its node process")
