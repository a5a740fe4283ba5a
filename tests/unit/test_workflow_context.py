"""The agent's side of workflow context: what a task leaves in
`$CORTEX_CONTEXT_FILE` becomes its result's `context_update`."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from cortex.executors import ShellExecutor
from cortex.executors.base import Execution
from cortex.spec import TaskSpec
from cortex.workflows.context import MAX_CONTEXT_UPDATE_BYTES, read_context_update

BEFORE = json.dumps({"version": "1.0", "keep": [1, 2]}, separators=(",", ":"))


def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "context.json"
    path.write_text(text)
    return str(path)


def test_only_added_or_changed_keys_are_the_update(tmp_path):
    after = {"version": "1.2", "keep": [1, 2], "new": {"x": 1}}
    path = _write(tmp_path, json.dumps(after))
    assert read_context_update(path, BEFORE) == {"version": "1.2", "new": {"x": 1}}


def test_a_file_left_alone_or_overwritten_with_a_subset_is_no_update(tmp_path):
    assert read_context_update(_write(tmp_path, BEFORE), BEFORE) is None
    assert read_context_update(_write(tmp_path, '{"keep": [1, 2]}'), BEFORE) is None


def test_anything_but_a_json_object_is_ignored(tmp_path):
    for text in ("[1, 2]", "not json", "42", ""):
        assert read_context_update(_write(tmp_path, text), BEFORE) is None
    assert read_context_update(str(tmp_path / "missing.json"), BEFORE) is None


def test_an_oversized_update_is_ignored(tmp_path):
    big = json.dumps({"blob": "x" * (MAX_CONTEXT_UPDATE_BYTES + 1)})
    assert read_context_update(_write(tmp_path, big), "{}") is None


def test_a_real_shell_task_reads_the_context_and_writes_an_update(tmp_path):
    path = _write(tmp_path, BEFORE)
    command = (
        'grep -q \'"version":"1.0"\' "$CORTEX_CONTEXT_FILE" || exit 3; '
        'printf \'{"version": "1.2", "by": "%s"}\' "$CORTEX_TASK_ID" > "$CORTEX_CONTEXT_FILE"'
    )
    execution = Execution(
        task_id="t1", attempt=1, spec=TaskSpec(command=command), work_dir=str(tmp_path),
        env={"CORTEX_CONTEXT_FILE": path, "CORTEX_TASK_ID": "t1"},
    )  # fmt: skip
    result = ShellExecutor().run(execution, threading.Event())
    assert result.exit_code == 0, result.stderr
    result.context_update = read_context_update(path, BEFORE)
    assert result.to_dict()["context_update"] == {"version": "1.2", "by": "t1"}
