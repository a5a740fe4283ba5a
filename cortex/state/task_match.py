"""Task listings' filters on labels and text (`StateReader.list_tasks`'s
`match`): a label's key, or its key and value; text in the id, the workflow
key, the command or a `key=value` label, matched literally."""

from __future__ import annotations

from dataclasses import dataclass

_LIKE_ESCAPE = "\\"
# A task's command as one string: an argv list joined with spaces, or the
# shell string as it is.
_COMMAND_TEXT = (
    "COALESCE((SELECT group_concat(value, ' ') FROM json_each(tasks.spec, '$.command')), '')"
)


@dataclass(frozen=True)
class TaskMatch:
    """Every condition given applies. `labels` are (key, value) pairs, a
    None value matching any value of the key; `text` matches part of the
    id, the workflow key, the command or a `key=value` label (ASCII letters
    in any case)."""

    labels: tuple[tuple[str, str | None], ...] = ()
    text: str = ""

    def clauses(self) -> tuple[list[str], list[object]]:
        clauses: list[str] = []
        params: list[object] = []
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
