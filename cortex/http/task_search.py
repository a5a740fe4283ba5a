"""Task listings filtered on labels and text, which the state's own listing
(`StateReader.list_tasks`) does not offer: the web API's tasks page uses
this only when asked for a label or `q`. Pages and their keys are the same
as that listing's (`cortex.state.paging`), newest first.

This query belongs beside the others in `cortex.state.queries`; it lives
here until that package takes it."""

from __future__ import annotations

from dataclasses import dataclass

from cortex.state.paging import PageKey, keyset, page_end, where
from cortex.state.queries import TaskPage, TaskView
from cortex.state.schema import ReadConnections

_LIKE_ESCAPE = "\\"
# A task's command as one string: an argv list joined with spaces, or the
# shell string as it is.
_COMMAND_TEXT = (
    "COALESCE((SELECT group_concat(value, ' ') FROM json_each(tasks.spec, '$.command')), '')"
)


@dataclass(frozen=True)
class TaskSearch:
    """Every condition given applies. `labels` are (key, value) pairs, a
    None value matching any value of the key; `text` matches part of the
    id, the workflow key, the command or a `key=value` label (ASCII letters
    in any case)."""

    states: tuple[str, ...] = ()
    workflow_id: str | None = None
    node: str | None = None
    labels: tuple[tuple[str, str | None], ...] = ()
    text: str = ""

    def clauses(self) -> tuple[list[str], list[object]]:
        clauses: list[str] = []
        params: list[object] = []
        if self.states:
            clauses.append(f"state IN ({','.join('?' * len(self.states))})")
            params.extend(self.states)
        for column, value in (("workflow_id", self.workflow_id), ("assigned_node", self.node)):
            if value:
                clauses.append(f"{column} = ?")
                params.append(value)
        for key, value in self.labels:
            if value is None:
                clauses.append("EXISTS (SELECT 1 FROM json_each(tasks.labels) WHERE key = ?)")
                params.append(key)
            else:
                clauses.append(
                    "EXISTS (SELECT 1 FROM json_each(tasks.labels) WHERE key = ? AND value = ?)"
                )
                params.extend((key, value))
        if self.text:
            pattern = f"%{_like_escaped(self.text)}%"
            like = f"LIKE ? ESCAPE '{_LIKE_ESCAPE}'"
            clauses.append(
                f"(id {like} OR COALESCE(workflow_key, '') {like} OR {_COMMAND_TEXT} {like}"
                " OR EXISTS (SELECT 1 FROM json_each(tasks.labels)"
                f" WHERE key || '=' || value {like}))"
            )
            params.extend([pattern] * 4)
        return clauses, params


def _like_escaped(text: str) -> str:
    for special in (_LIKE_ESCAPE, "%", "_"):
        text = text.replace(special, _LIKE_ESCAPE + special)
    return text


class TaskSearchReads:
    """Searches over a node's database, each thread on its own read-only
    connection."""

    def __init__(self, db_path: str) -> None:
        self._reads = ReadConnections(db_path)

    def list_tasks(self, search: TaskSearch, limit: int, after: PageKey | None) -> TaskPage:
        """A page of the matching tasks, newest first, continuing after `after`,
        and how many match in all."""
        clauses, params = search.clauses()
        beyond, page_params, order = keyset(after, newest_first=True)
        conn = self._reads.get()
        conn.execute("BEGIN")
        try:
            total = conn.execute(f"SELECT COUNT(*) FROM tasks {where(clauses)}", params).fetchone()
            rows = conn.execute(
                f"SELECT * FROM tasks {where([*clauses, beyond])} {order} LIMIT ?",
                (*params, *page_params, limit + 1),
            ).fetchall()
        finally:
            conn.execute("COMMIT")
        rows, next_key = page_end(rows, limit)
        return TaskPage([TaskView.from_row(row) for row in rows], next_key, int(total[0]))
