"""The workflow context as a task sees it: `$CORTEX_CONTEXT_FILE` starts out
holding the workflow's current context; what the task leaves there, when it
is a JSON object, becomes the `context_update` of its result (only the
top-level keys it added or changed, so concurrent branches do not undo each
other's updates)."""

from __future__ import annotations

import json
import logging
from typing import Any

from cortex.state.queries import StateReader, TaskView

log = logging.getLogger(__name__)

MAX_CONTEXT_UPDATE_BYTES = 256 * 1024


def initial_context(reader: StateReader, task: TaskView) -> str:
    """What the context file holds when the attempt starts."""
    if not task.workflow_id:
        return "{}"
    return reader.workflow_context_text(task.workflow_id) or "{}"


def read_context_update(path: str, written: str) -> dict[str, Any] | None:
    """The keys the task added or changed in the context file, or None when
    it left the file alone, removed it, or wrote something that is not a
    JSON object (logged) or is too large (logged)."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_CONTEXT_UPDATE_BYTES * 4 + 1)
    except OSError:
        return None
    if len(raw) > MAX_CONTEXT_UPDATE_BYTES * 4:
        log.warning("context file %s is over %d bytes; ignored", path, MAX_CONTEXT_UPDATE_BYTES * 4)
        return None
    try:
        after = json.loads(raw)
        before = json.loads(written)
    except (ValueError, RecursionError):
        log.warning("context file %s does not hold JSON; ignored", path)
        return None
    if not isinstance(after, dict) or not isinstance(before, dict):
        log.warning("context file %s does not hold a JSON object; ignored", path)
        return None
    update = {
        key: value for key, value in after.items() if key not in before or before[key] != value
    }
    if not update:
        return None
    if len(json.dumps(update)) > MAX_CONTEXT_UPDATE_BYTES:
        log.warning(
            "context update in %s is over %d bytes; ignored", path, MAX_CONTEXT_UPDATE_BYTES
        )
        return None
    return update
