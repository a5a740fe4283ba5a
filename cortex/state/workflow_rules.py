"""Pure workflow rules shared by `apply` and the leader's workflow engine:
cycle detection, the default (condition-less) decision, and a workflow's
final state from its tasks' states. No SQL, no clock, no JS."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from cortex.state.task_states import TERMINAL_STATES

# `submitting`: a workflow sent in parts whose last part has not arrived.
WORKFLOW_STATES = ("submitting", "running", "completed", "failed", "cancelled")
WORKFLOW_TERMINAL_STATES = frozenset({"completed", "failed", "cancelled"})
# A workflow with a task in one of these states ends `failed`.
UNSUCCESSFUL_TASK_STATES = frozenset({"failed", "dead_letter", "cancelled"})
MAX_CONTEXT_BYTES = 1024 * 1024
# Of a task's reason quoted in its workflow's error.
MAX_NOTE_CHARS = 200


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


def find_cycles(depends_on: Mapping[str, Sequence[str]]) -> list[list[str]]:
    """One cycle (as `find_cycle` gives it) for each group of tasks that
    depend on each other in a circle, so every loop is named once; in the
    mapping's order."""
    cycles: list[list[str]] = []
    for group in _circular_groups(depends_on):
        members = set(group)
        cycle = find_cycle(
            {key: [d for d in depends_on.get(key, ()) if d in members] for key in group}
        )
        if cycle:
            cycles.append(cycle)
    return cycles


def _circular_groups(depends_on: Mapping[str, Sequence[str]]) -> list[list[str]]:
    """The groups of `strongly_connected` that hold a cycle (more than one
    key, or a key depending on itself), each in the mapping's order."""
    order = {key: i for i, key in enumerate(depends_on)}
    groups = [
        sorted(group, key=order.__getitem__)
        for group in strongly_connected(depends_on)
        if len(group) > 1 or group[0] in depends_on.get(group[0], ())
    ]
    return sorted(groups, key=lambda group: order[group[0]])


def strongly_connected(depends_on: Mapping[str, Sequence[str]]) -> list[list[str]]:
    """Every strongly connected component (Tarjan, without recursion), each
    after the components its keys depend on. Dependencies on keys outside
    the mapping are ignored."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in depends_on:
        if root in index:
            continue
        work = [(root, iter(depends_on.get(root, ())))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            key, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in depends_on:
                    continue
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(depends_on.get(child, ()))))
                elif child in on_stack:
                    low[key] = min(low[key], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[key])
            if low[key] == index[key]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == key:
                        break
                components.append(component)
    return components


def default_verdict(dependency_states: Mapping[str, str]) -> tuple[bool, str]:
    """A task without a condition runs only when every dependency completed."""
    unfinished = [f"{key} {state}" for key, state in dependency_states.items()
                  if state != "completed"]  # fmt: skip
    if not unfinished:
        return True, "all dependencies completed"
    return False, f"dependency did not complete: {', '.join(unfinished)}"


def workflow_outcome(
    task_states: Iterable[tuple[str, str]], notes: Mapping[str, str] | None = None
) -> tuple[str, str | None] | None:
    """`(state, error)` once every task is terminal, else None: `failed`
    (naming the tasks, each with its note if it has one) when any task
    failed, was dead-lettered or cancelled, else `completed`."""
    notes = notes or {}
    unsuccessful = []
    for key, state in task_states:
        if state not in TERMINAL_STATES:
            return None
        if state in UNSUCCESSFUL_TASK_STATES:
            note = notes.get(key)
            unsuccessful.append(f"{key} {state}" + (f" ({note[:MAX_NOTE_CHARS]})" if note else ""))
    if unsuccessful:
        shown = ", ".join(unsuccessful[:10])
        more = f" and {len(unsuccessful) - 10} more" if len(unsuccessful) > 10 else ""
        return "failed", f"tasks did not succeed: {shown}{more}"
    return "completed", None
