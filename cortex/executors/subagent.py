"""Runs an AI agent CLI on a task's prompt: the node's `subagent_command`
(e.g. `claude -p`) gets the prompt on stdin and in `$CORTEX_PROMPT_FILE`,
the workflow context in `$CORTEX_CONTEXT_FILE`; its output streams like a
shell command's. When the last line it prints is a JSON object with a
`context` object, that object updates the workflow context."""

from __future__ import annotations

import json
import os
import shutil
import threading
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cortex.executors.base import Execution, ExecutionResult, ExecutorSettings
from cortex.executors.process import run_process
from cortex.workflows.context import MAX_CONTEXT_UPDATE_BYTES

PROMPT_FILE = "prompt.txt"


class SubagentOptions(BaseModel):
    """Options of the `subagent` executor."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    # What the agent is asked to do.
    prompt: str = Field(min_length=1, max_length=512 * 1024)
    # Whether the agent's final `{"context": {...}}` line updates the
    # workflow context (the prompt says what it may put there).
    context_update: bool = Field(True, alias="contextUpdate", strict=True)

    @field_validator("prompt")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("is blank")
        return value


def final_context(stdout: bytes) -> dict[str, Any] | None:
    """The `context` object of the last non-empty line of `stdout`, when that
    line is a JSON object holding one (and it is not too large)."""
    for raw in reversed(stdout.splitlines()):
        line = raw.strip()
        if not line:
            continue
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):
            return None
        context = value.get("context") if isinstance(value, dict) else None
        if not isinstance(context, dict) or not context:
            return None
        if len(json.dumps(context)) > MAX_CONTEXT_UPDATE_BYTES:
            return None
        return context
    return None


class SubagentExecutor:
    name = "subagent"
    uses_work_dir = True
    options_model = SubagentOptions

    def __init__(self, settings: ExecutorSettings) -> None:
        self._command = list(settings.subagent_command)
        self._environment = settings.environment

    def fingerprint(self) -> dict[str, str] | None:
        """Nothing without a configured command that is on PATH."""
        if not self._command or shutil.which(self._command[0]) is None:
            return None
        return {"subagent.command": os.path.basename(self._command[0])}

    def run(self, execution: Execution, cancel: threading.Event) -> ExecutionResult:
        options = SubagentOptions.model_validate(execution.spec.options)
        if not self._command:
            return ExecutionResult(
                exit_code=-1, error="this node has no subagent_command configured"
            )
        os.makedirs(execution.work_dir, exist_ok=True)
        prompt_file = os.path.join(execution.work_dir, PROMPT_FILE)
        with open(prompt_file, "w") as out:
            out.write(options.prompt)
        spec = execution.spec
        env = {
            **self._environment.inherited(os.environ),
            **spec.env,
            **execution.env,
            "CORTEX_PROMPT_FILE": prompt_file,
        }
        cwd = spec.cwd or execution.work_dir
        result = run_process(self._command, env, cwd, execution, cancel, stdin_path=prompt_file)
        if result.succeeded and options.context_update:
            result.context_update = final_context(result.stdout)
        return result

    def recover(
        self, execution: Execution, handle: dict[str, Any], cancel: threading.Event
    ) -> ExecutionResult:
        raise LookupError("an agent CLI's process does not outlive its node process")
