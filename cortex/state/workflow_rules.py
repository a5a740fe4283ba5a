"""Pure workflow rules shared by `apply` and the leader's workflow engine:
cycle detection, the default (condition-less) decision, and a workflow's
final state from its tasks' states. No SQL, no clock, no JS."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from cortex.state.transitions import TERMINAL_STATES

# `submitting`: a workflow sent in parts whose last part has not arrived.
WORKFLOW_STATES = ("submitting", "running", "completed", "failed", "cancelled")
WORKFLOW_TERMINAL_STATES = frozenset({"completed", "failed", "cancelled"})
# A workflow with a task in one of these states ends `failed`.
UNSUCCESSFUL_TASK_STATES = frozenset({"failed", "dead_letter", "cancelled"})
MAX_CONTEXT_BYTES = 1024 * 1024


def find_cycle(depends_on: Mapping[str, Sequence[str]]) -> list[str] | None:
    """A dependency cycle as the keys along it, first key repeated at the end
    (`[a, b, a]`: a depends on b, b on a), or None. Iterative depth-first
    search in the mapping's order, so the answer is deterministic."""
    done: set[str] = set()
    for root in depends_on:
        if root in done:
            continue
        path: list[str] = [root]
        on_path = {root}
        stack = [iter(depends_on.get(root, ()))]
        while stack:
            child = next(stack[-1], None)
            if child is None:
                stack.pop()
                done.add(path[-1])
                on_path.discard(path.pop())
                continue
            if child in on_path:
                return [*path[path.index(child) :], child]
            if child in done or child not in depends_on:
                continue
            path.append(child)
            on_path.add(child)
            stack.append(iter(depends_on.get(child, ())))
    return None


def default_verdict(dependency_states: Mapping[str, str]) -> tuple[bool, str]:
    """A task without a condition runs only when every dependency completed."""
    unfinished = [f"{key} {state}" for key, state in dependency_states.items()
                  if state != "completed"]  # fmt: skip
    if not unfinished:
        return True, "all dependencies completed"
    return False, f"dependency did not complete: {', '.join(unfinished)}"


def workflow_outcome(task_states: Iterable[tuple[str, str]]) -> tuple[str, str | None] | None:
    """`(state, error)` once every task is terminal, else None: `failed`
    (naming the tasks) when any task failed, was dead-lettered or cancelled,
    else `completed`."""
    unsuccessful = []
    for key, state in task_states:
        if state not in TERMINAL_STATES:
            return None
        if state in UNSUCCESSFUL_TASK_STATES:
            unsuccessful.append(f"{key} {state}")
    if unsuccessful:
        shown = ", ".join(unsuccessful[:10])
        more = f" and {len(unsuccessful) - 10} more" if len(unsuccessful) > 10 else ""
        return "failed", f"tasks did not succeed: {shown}{more}"
    return "completed", None
