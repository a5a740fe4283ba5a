"""The web API's requests, read from query strings into typed values. Each
parameter is checked once, here: an unknown, repeated or bad one is refused
with `BadParameter` naming it (answered 400). An empty value is the same as
no value, as an HTML form sends every field."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from cortex.errors import InvalidArgument
from cortex.requests import DEFAULT_PAGE_SIZE, MAX_ID_CHARS, MAX_PAGE_SIZE
from cortex.state.workflow_rules import WORKFLOW_STATES
from cortex.task_operations import TASK_STATES

MAX_TEXT_CHARS = 256
MAX_QUERY_FIELDS = 64
# Offsets are byte positions in an attempt's output (int64 in the contract).
MAX_OFFSET = 2**63 - 1
MAX_ATTEMPT = 2**31 - 1
OUTPUT_STREAMS = ("stdout", "stderr")
# The most tasks one bulk change acts on: a filter matching more is narrowed first.
MAX_BULK_TASKS = 10_000
# Bodies of the API's POSTs are small JSON objects.
MAX_BODY_BYTES = 64 * 1024


class BadParameter(InvalidArgument):
    """A query parameter the API refuses; the message starts with its name."""

    def __init__(self, parameter: str, problem: str) -> None:
        super().__init__(f"{parameter}: {problem}")
        self.parameter = parameter


class QueryParams:
    """A query string's parameters, only those in `allowed`."""

    def __init__(self, query: str, allowed: tuple[str, ...]) -> None:
        try:
            pairs = parse_qsl(
                query, keep_blank_values=True, errors="strict", max_num_fields=MAX_QUERY_FIELDS
            )
        except ValueError as err:  # bad UTF-8 in an escape, or too many fields
            raise BadParameter("query", f"cannot be read: {err}") from None
        self._values: dict[str, list[str]] = {}
        for name, value in pairs:
            if name not in allowed:
                known = ", ".join(allowed) if allowed else "none"
                raise BadParameter(name, f"unknown parameter (known: {known})")
            self._values.setdefault(name, []).append(value)

    def text(self, name: str, max_chars: int) -> str:
        """The one value of `name` ("" when absent or empty)."""
        values = [v for v in self._values.get(name, []) if v]
        if len(values) > 1:
            raise BadParameter(name, "given more than once")
        value = values[0] if values else ""
        if len(value) > max_chars:
            raise BadParameter(name, f"longer than {max_chars} characters")
        return value

    def texts(self, name: str, max_chars: int, split: bool = True) -> list[str]:
        """Every value of `name`, repeated or (with `split`) comma-separated,
        empty ones dropped."""
        found = []
        for value in self._values.get(name, []):
            for item in value.split(",") if split else [value]:
                item = item.strip() if split else item
                if len(item) > max_chars:
                    raise BadParameter(name, f"longer than {max_chars} characters")
                if item:
                    found.append(item)
        return found

    def choices(self, name: str, known: tuple[str, ...]) -> tuple[str, ...]:
        """The values of `name`, each one of `known`, without repeats."""
        values = self.texts(name, max(len(choice) for choice in known))
        for value in values:
            if value not in known:
                raise BadParameter(name, f"unknown value {value!r} (known: {', '.join(known)})")
        return tuple(dict.fromkeys(values))

    def whole_number(self, name: str, low: int, high: int, default: int) -> int:
        text = self.text(name, 20)
        if not text:
            return default
        if not text.isascii() or not text.isdigit():
            raise BadParameter(name, f"must be a whole number from {low} to {high}, not {text!r}")
        value = int(text)
        if not low <= value <= high:
            raise BadParameter(name, f"must be from {low} to {high}, not {value}")
        return value


@dataclass(frozen=True)
class LabelFilter:
    """`key` with this value, or with any value when `value` is None."""

    key: str
    value: str | None

    @classmethod
    def parse(cls, text: str) -> LabelFilter:
        key, equals, value = text.partition("=")
        if not key:
            raise BadParameter("label", f"must be KEY or KEY=VALUE, not {text!r}")
        return cls(key, value if equals else None)


@dataclass(frozen=True)
class TaskListRequest:
    """`GET /api/v1/tasks`: newest first, every filter applied together."""

    states: tuple[str, ...] = ()
    node: str = ""
    workflow: str = ""
    labels: tuple[LabelFilter, ...] = ()
    text: str = ""
    page_token: str = ""
    page_size: int = DEFAULT_PAGE_SIZE

    FILTERS = ("state", "node", "workflow", "label", "q")
    PARAMETERS = (*FILTERS, "page_token", "page_size")

    @classmethod
    def from_query(cls, query: str, paged: bool = True) -> TaskListRequest:
        """The listing a query asks for; without `paged`, only its filters
        are taken (a bulk change acts on every match)."""
        params = QueryParams(query, cls.PARAMETERS if paged else cls.FILTERS)
        return cls(
            states=params.choices("state", TASK_STATES),
            node=params.text("node", MAX_ID_CHARS),
            workflow=params.text("workflow", MAX_ID_CHARS),
            # Labels are not split on commas: a value may hold one.
            labels=tuple(
                LabelFilter.parse(value)
                for value in params.texts("label", MAX_TEXT_CHARS, split=False)
            ),
            text=params.text("q", MAX_TEXT_CHARS),
            page_token=params.text("page_token", 4096),
            page_size=params.whole_number("page_size", 1, MAX_PAGE_SIZE, DEFAULT_PAGE_SIZE),
        )


@dataclass(frozen=True)
class BulkRequest:
    """`POST /api/v1/tasks/cancel|retry?FILTERS`, body `{"expected": N}`:
    change every task the filters match, which must be no more than the N
    the user confirmed."""

    filters: TaskListRequest
    expected: int

    @classmethod
    def parse(cls, query: str, body: bytes) -> BulkRequest:
        fields = json_body(body, ("expected",))
        expected = fields.get("expected")
        if isinstance(expected, bool) or not isinstance(expected, int):
            raise BadParameter("expected", "required: the number of tasks the change was"
                               " confirmed for, a whole number")  # fmt: skip
        if not 0 <= expected <= MAX_BULK_TASKS:
            raise BadParameter("expected", f"must be from 0 to {MAX_BULK_TASKS}, not {expected}")
        return cls(TaskListRequest.from_query(query, paged=False), expected)


@dataclass(frozen=True)
class DrainRequest:
    """`POST /api/v1/nodes/{id}/drain`, body `{}` or `{"deadline_s": N}`."""

    deadline_s: int = 0

    @classmethod
    def parse(cls, body: bytes) -> DrainRequest:
        deadline = json_body(body, ("deadline_s",)).get("deadline_s", 0)
        if isinstance(deadline, bool) or not isinstance(deadline, int) or deadline < 0:
            raise BadParameter("deadline_s", f"must be a whole number of seconds, not {deadline!r}")
        return cls(deadline)


def json_body(body: bytes, allowed: tuple[str, ...]) -> dict[str, Any]:
    """A request body: empty, or a JSON object of only `allowed` fields."""
    if not body.strip():
        return {}
    try:
        value = json.loads(body)
    except (UnicodeDecodeError, ValueError) as err:
        raise BadParameter("body", f"not JSON: {err}") from None
    if not isinstance(value, dict):
        raise BadParameter("body", "must be a JSON object")
    for name in value:
        if name not in allowed:
            known = ", ".join(allowed) if allowed else "none"
            raise BadParameter(str(name)[:64], f"unknown field (known: {known})")
    return value


@dataclass(frozen=True)
class WorkflowListRequest:
    """`GET /api/v1/workflows`: newest first."""

    states: tuple[str, ...] = ()
    page_token: str = ""
    page_size: int = DEFAULT_PAGE_SIZE

    PARAMETERS = ("state", "page_token", "page_size")

    @classmethod
    def from_query(cls, query: str) -> WorkflowListRequest:
        params = QueryParams(query, cls.PARAMETERS)
        return cls(
            states=params.choices("state", WORKFLOW_STATES),
            page_token=params.text("page_token", 4096),
            page_size=params.whole_number("page_size", 1, MAX_PAGE_SIZE, DEFAULT_PAGE_SIZE),
        )


@dataclass(frozen=True)
class OutputRequest:
    """`GET /api/v1/tasks/{id}/output`: an attempt's output (0: the latest)
    from a byte offset in its combined output, one stream or both (None)."""

    stream: str | None = None
    offset: int = 0
    attempt: int = 0

    PARAMETERS = ("stream", "offset", "attempt")

    @classmethod
    def from_query(cls, query: str) -> OutputRequest:
        params = QueryParams(query, cls.PARAMETERS)
        stream = params.text("stream", 16)
        if stream and stream not in OUTPUT_STREAMS:
            raise BadParameter("stream", f"must be stdout or stderr, not {stream!r}")
        return cls(
            stream=stream or None,
            offset=params.whole_number("offset", 0, MAX_OFFSET, 0),
            attempt=params.whole_number("attempt", 0, MAX_ATTEMPT, 0),
        )


def path_id(value: str, name: str) -> str:
    """An id taken from the path (already percent-decoded)."""
    if len(value) > MAX_ID_CHARS:
        raise BadParameter(name, f"longer than {MAX_ID_CHARS} characters")
    return value
