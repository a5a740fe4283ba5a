"""What a condition sees: `{parent: {KEY: {exitCode, stdout, stderr, state,
result}}, workflow: {context}}` for every task upstream of it, at most
`max_bytes` of JSON.

Each parent's stdout and stderr are in the input once (the sandbox shows the
same strings as `result.stdout` / `result.stderr`). When they do not all fit,
the budget is shared evenly: short outputs stay whole, long ones keep their
end (where summaries usually are) behind a marker saying how much was cut.
Context updates in parents' results are dropped first when the rest alone is
over the limit (they are in `workflow.context` already). A fan-in of
thousands of tasks can still come out somewhat over the limit: each parent
keeps its exit code, state and markers."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Mapping
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


def fit(data: dict[str, Any], max_bytes: int) -> None:
    """Cuts the parents' outputs (and, if need be, context updates) in place
    until `data` is about `max_bytes` of JSON or less."""
    parents: dict[str, dict[str, Any]] = data["parent"]
    outputs = [(view, name) for view in parents.values() for name in OUTPUT_FIELDS if view[name]]
    texts = [view[name] for view, name in outputs]
    sizes = [json_size(text) - 2 for text in texts]  # without the quotes
    for view, name in outputs:
        view[name] = ""
    rest = json_size(data)
    if rest > max_bytes - sum(sizes):
        if rest > max_bytes:
            for view in parents.values():
                result = view["result"]
                if result and result.get("contextUpdate") is not None:
                    result["contextUpdate"] = None
                    result["contextUpdateCut"] = True
            rest = json_size(data)
        budget = max(0, max_bytes - rest)
        order = sorted(range(len(outputs)), key=sizes.__getitem__)
        for position, index in enumerate(order):
            share = budget // (len(order) - position)
            if sizes[index] > share:
                texts[index] = _tail(texts[index], share)
            budget -= json_size(texts[index]) - 2
    for (view, name), text in zip(outputs, texts, strict=True):
        view[name] = text


def _tail(text: str, allowed: int) -> str:
    """The end of `text` behind a cut marker, at most `allowed` bytes of JSON
    beyond its quotes when the marker fits in that (else the marker alone)."""
    ratio = (json_size(text) - 2) / len(text)
    keep = int((allowed - len(cut_marker(len(text)))) / ratio)
    while keep > 0:
        tail = text[len(text) - keep :]
        candidate = cut_marker(len(text) - keep) + tail
        excess = json_size(candidate) - 2 - allowed
        if excess <= 0:
            return candidate
        keep -= max(1, int(excess / ratio))
    return cut_marker(len(text))
