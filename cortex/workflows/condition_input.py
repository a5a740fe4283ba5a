"""What a condition sees: `{parent: {KEY: {exitCode, stdout, stderr, state,
result}}, workflow: {context}}` for every task upstream of it, at most
`max_bytes` of JSON.

Each parent's stdout and stderr are in the input once (the sandbox shows the
same strings as `result.stdout` / `result.stderr`). When they do not all fit,
the budget is shared evenly: short outputs stay whole, long ones keep their
end (where summaries usually are) behind a marker saying how much was cut.
Context updates in parents' results are dropped first when the rest alone is
over the limit (they are in `workflow.context` already). Only a fan-in of
thousands of tasks can come out over the limit: each parent keeps its exit
code and state."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Mapping
from json.encoder import encode_basestring_ascii  # type: ignore[attr-defined]
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cortex.workflows.decisions import TaskNode

DEFAULT_MAX_BYTES = 1024 * 1024
OUTPUT_FIELDS = ("stdout", "stderr")
_RESULT_NAMES = {
    "exit_code": "exitCode",
    "stdout_truncated": "stdoutTruncated",
    "stderr_truncated": "stderrTruncated",
    "timed_out": "timedOut",
    "context_update": "contextUpdate",
}


# Where the full marker does not fit an output's share (thousands of parents).
SHORT_CUT_MARKER = "...[cut]"


def cut_marker(characters: int) -> str:
    """What starts an output cut to fit: how many characters went."""
    return f"...[{characters} characters cut to fit the condition input limit]\n"


def parent_view(node: TaskNode, state: str) -> dict[str, Any]:
    """What a condition sees of one upstream task; its result's fields in
    camelCase, without stdout/stderr (they are the view's own)."""
    result = node.result or {}
    return {
        "exitCode": result.get("exit_code"),
        "stdout": result.get("stdout", ""),
        "stderr": result.get("stderr", ""),
        "state": state,
        "result": {_RESULT_NAMES.get(k, k): v for k, v in result.items() if k not in OUTPUT_FIELDS}
        if node.result
        else None,
    }


def upstream(node: TaskNode, nodes: Mapping[str, TaskNode]) -> list[str]:
    """Every task `node` depends on, directly or through others: direct
    dependencies first (in their listed order), then theirs."""
    seen: dict[str, None] = {}
    frontier = deque(node.depends_on)
    while frontier:
        key = frontier.popleft()
        if key in seen or key not in nodes:
            continue
        seen[key] = None
        frontier.extend(nodes[key].depends_on)
    return list(seen)


def condition_input(
    node: TaskNode,
    nodes: Mapping[str, TaskNode],
    states: Mapping[str, str],
    context: dict[str, Any],
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> dict[str, Any]:
    """The input for `node`'s condition, fitted into `max_bytes`."""
    parents = {key: parent_view(nodes[key], states[key]) for key in upstream(node, nodes)}
    data = {"parent": parents, "workflow": {"context": context}}
    fit(data, max_bytes)
    return data


def json_size(value: Any) -> int:
    """Bytes of `value` as the sandbox sends it."""
    return len(json.dumps(value, separators=(",", ":")))


def _text_size(text: str) -> int:
    """Bytes of `text` in JSON, without its quotes."""
    return len(encode_basestring_ascii(text)) - 2


def fit(data: dict[str, Any], max_bytes: int) -> None:
    """Cuts the parents' outputs (and, if need be, context updates) in place
    until `data` is about `max_bytes` of JSON or less. An output is measured
    only when it might fit its share (its length is a lower bound of its
    size), so a wide fan-in of large outputs costs about `max_bytes` of work."""
    parents: dict[str, dict[str, Any]] = data["parent"]
    outputs = [(view, name) for view in parents.values() for name in OUTPUT_FIELDS if view[name]]
    texts = [view[name] for view, name in outputs]
    for view, name in outputs:
        view[name] = ""
    rest = json_size(data)
    if rest + sum(map(len, texts)) > max_bytes or rest + sum(map(_text_size, texts)) > max_bytes:
        if rest > max_bytes:
            for view in parents.values():
                result = view["result"]
                if result and result.get("contextUpdate") is not None:
                    result["contextUpdate"] = None
                    result["contextUpdateCut"] = True
            rest = json_size(data)
        budget = max(0, max_bytes - rest)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for position, index in enumerate(order):
            share = budget // (len(order) - position)
            text = texts[index]
            if len(text) > share or _text_size(text) > share:
                texts[index] = _tail(text, share)
            budget -= _text_size(texts[index])
    for (view, name), text in zip(outputs, texts, strict=True):
        view[name] = text


def _tail(text: str, allowed: int) -> str:
    """The end of `text` behind a cut marker, at most `allowed` bytes of JSON
    (without quotes): else the marker alone, a short one, or nothing."""
    keep = min(allowed - _text_size(cut_marker(len(text))), len(text) - 1)
    for _ in range(32):
        if keep <= 0:
            break
        marker_size = _text_size(cut_marker(len(text) - keep))
        tail_size = _text_size(text[len(text) - keep :])
        if marker_size + tail_size <= allowed:
            return cut_marker(len(text) - keep) + text[len(text) - keep :]
        keep = min(int((allowed - marker_size) * keep / tail_size), keep - 1)
    for marker in (cut_marker(len(text)), SHORT_CUT_MARKER):
        if _text_size(marker) <= allowed:
            return marker
    return ""
