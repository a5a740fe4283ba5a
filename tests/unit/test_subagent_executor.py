"""The subagent executor runs the node's agent CLI on a task's prompt (on
stdin and in $CORTEX_PROMPT_FILE), streams its output like a shell command's,
and takes a final `{"context": {...}}` line as the workflow context update.
The agent here is a stand-in script: a real process reading its stdin."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

from cortex.executors import Execution, ExecutorSettings
from cortex.executors.subagent import SubagentExecutor, final_context
from cortex.spec import TaskSpec

AGENT = """
import json, os, sys
prompt = sys.stdin.read()
print("thinking about:", prompt)
print("context file:", open(os.environ["CORTEX_CONTEXT_FILE"]).read())
print("prompt file says:", open(os.environ["CORTEX_PROMPT_FILE"]).read())
print("working in:", os.getcwd())
if "sleep" in prompt:
    import time; time.sleep(60)
sys.stdout.flush()
print("a warning", file=sys.stderr)
print(json.dumps({"context": {"notified": True, "channel": "ops"}}))
sys.exit(3 if "EXIT3" in prompt else 0)
"""


class Sink:
    def __init__(self) -> None:
        self.chunks: list[tuple[str, bytes]] = []

    def write(self, stream: str, data: bytes) -> None:
        self.chunks.append((stream, data))

    def text(self, stream: str) -> str:
        return b"".join(d for s, d in self.chunks if s == stream).decode()


def agent(tmp_path: Path) -> SubagentExecutor:
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    return SubagentExecutor(ExecutorSettings(subagent_command=(sys.executable, str(script))))


def execution(tmp_path: Path, prompt: str, sink: Sink, **spec: object) -> Execution:
    work_dir = tmp_path / "attempt"
    work_dir.mkdir(exist_ok=True)
    context_file = work_dir / "context.json"
    context_file.write_text('{"build": "failed"}')
    return Execution(
        "t-1", 1, TaskSpec.model_validate({"type": "subagent", "options": {"prompt": prompt},
                                           **spec}),
        str(work_dir), env={"CORTEX_CONTEXT_FILE": str(context_file)}, output=sink,
        kill_grace_s=0.5,
    )  # fmt: skip


def test_the_agent_gets_the_prompt_and_the_context_and_its_json_updates_the_context(
    tmp_path: Path,
) -> None:
    sink = Sink()
    result = agent(tmp_path).run(
        execution(tmp_path, "Send a failure notification", sink), threading.Event()
    )
    assert result.exit_code == 0 and result.succeeded
    out = sink.text("stdout")
    assert "thinking about: Send a failure notification" in out
    assert 'context file: {"build": "failed"}' in out
    assert "prompt file says: Send a failure notification" in out
    assert f"working in: {tmp_path / 'attempt'}" in out
    assert sink.text("stderr") == "a warning\n"
    assert result.context_update == {"notified": True, "channel": "ops"}
    assert result.stdout.decode() == out  # the tail, while it is short


def test_a_failing_agent_updates_nothing(tmp_path: Path) -> None:
    result = agent(tmp_path).run(execution(tmp_path, "EXIT3 please", Sink()), threading.Event())
    assert result.exit_code == 3 and result.context_update is None


def test_the_context_update_can_be_turned_off(tmp_path: Path) -> None:
    run = execution(tmp_path, "hello", Sink())
    spec = TaskSpec.model_validate(
        {"type": "subagent", "options": {"prompt": "hello", "contextUpdate": False}}
    )
    result = agent(tmp_path).run(
        Execution(run.task_id, 1, spec, run.work_dir, run.env, output=run.output),
        threading.Event(),
    )
    assert result.succeeded and result.context_update is None


def test_a_cancel_kills_the_agent(tmp_path: Path) -> None:
    cancel = threading.Event()
    sink = Sink()
    timer = threading.Timer(0.5, cancel.set)
    timer.start()
    started = time.monotonic()
    result = agent(tmp_path).run(execution(tmp_path, "sleep on it", sink), cancel)
    assert result.cancelled and not result.succeeded
    assert time.monotonic() - started < 10


def test_a_timeout_stops_the_agent(tmp_path: Path) -> None:
    result = agent(tmp_path).run(
        execution(tmp_path, "sleep on it", Sink(), timeoutMs=500), threading.Event()
    )
    assert result.timed_out and result.error == "timed out after 500 ms"


def test_only_a_node_with_an_agent_command_advertises_subagent(tmp_path: Path) -> None:
    assert SubagentExecutor(ExecutorSettings()).fingerprint() is None
    assert (
        SubagentExecutor(ExecutorSettings(subagent_command=("no-such-cli",))).fingerprint() is None
    )
    assert agent(tmp_path).fingerprint() == {"subagent.command": Path(sys.executable).name}


def test_the_final_line_must_be_a_json_object_with_a_context_object() -> None:
    assert final_context(b'log\n{"context": {"a": 1}}\n\n') == {"a": 1}
    assert final_context(b'{"context": {"a": 1}}\nlast words\n') is None
    assert final_context(b'{"context": [1]}\n') is None
    assert final_context(b'{"result": {"a": 1}}\n') is None
    assert final_context(b"") is None
    assert final_context(json.dumps({"context": {"big": "x" * 300_000}}).encode()) is None
