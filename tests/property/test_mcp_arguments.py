"""Every tool refuses arguments its input schema forbids, before calling any
node, with a tool error naming the argument at fault.

Violations are generated from the schemas the server publishes: wrong JSON
types, numbers past each bound (huge integers such as 2**70, negative ones,
NaN and infinities), strings that are not valid text (lone surrogates),
empty or over-long strings, values outside an enum, unknown properties at
the top and in nested objects, missing required arguments. Each goes
through an in-process MCP client session to a server whose node address is
a closed port on 127.0.0.1: no cluster is used, and an answer saying the
node is unreachable would mean the call got past the checks. The client
sends NaN and infinity as null and cannot send keys holding lone
surrogates, so those arguments are given to the server's `call_tool`
directly, the same entry the session's requests reach."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import anyio
import anyio.from_thread
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError

from cortex.mcp import build_server
from tests.cluster import free_ports

Path = tuple[str | int, ...]
Violation = tuple[Path, Any]  # where the bad value is, and the value of that argument

NOT_JSON_TEXT = ["\ud800", "a\udfffb", "\udc80\udc80"]
NON_FINITE = [math.nan, math.inf, -math.inf]
UNKNOWN_NAMES = st.one_of(
    st.sampled_from(["colour", "timeoutMs", "max_retries", "task-id", "", "a.b"]),
    st.text(min_size=1, max_size=8),
    st.sampled_from(NOT_JSON_TEXT),
)
# One value of each JSON type, for arguments of another type; none is JSON
# text for a list or object (the SDK would take that as the list or object).
_BY_TYPE: dict[str, list[Any]] = {
    "null": [None],
    "boolean": [True, False],
    "integer": [0, -7, 2**70],
    "number": [1.5, -0.25],
    "string": ["many", ""],
    "array": [[], [1]],
    "object": [{}, {"k": 1}],
}


def _shown_path(path: Path) -> str:
    """How an error names a place: dotted, an empty name as "", anything
    not valid text escaped."""
    shown = [str(part).encode("utf-8", "backslashreplace").decode() or '""' for part in path]
    return ".".join(shown)


class _Violations:
    """Strategies for values that break one tool's schema."""

    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root

    def resolve(self, schema: Mapping[str, Any]) -> Mapping[str, Any]:
        while "$ref" in schema:
            schema = self.root["$defs"][schema["$ref"].removeprefix("#/$defs/")]
        return schema

    def branches(self, schema: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        schema = self.resolve(schema)
        return [self.resolve(part) for part in schema.get("anyOf", [schema])]

    def of(self, schema: Mapping[str, Any]) -> st.SearchStrategy[Violation]:
        """(path inside this value, the value) for a value `schema` refuses."""
        branches = self.branches(schema)
        allowed = {part.get("type") for part in branches}
        if "number" in allowed:
            allowed.add("integer")
        wrong = [
            value for kind, values in _BY_TYPE.items() if kind not in allowed for value in values
        ]
        options: list[st.SearchStrategy[Violation]] = []
        if wrong:
            options.append(st.tuples(st.just(()), st.sampled_from(wrong)))
        for part in branches:
            options.extend(self._within(part))
        return st.one_of(options)

    def _within(self, schema: Mapping[str, Any]) -> Iterator[st.SearchStrategy[Violation]]:
        """Values of the schema's own type that break its other rules."""
        kind = schema.get("type")
        here = st.just(())
        if kind in ("integer", "number"):
            yield st.tuples(here, st.sampled_from(self._out_of_range(schema) + NON_FINITE))
        elif kind == "string":
            bad = list(NOT_JSON_TEXT)
            if schema.get("minLength"):
                bad.append("")
            if "maxLength" in schema:
                bad.append("x" * (schema["maxLength"] + 1))
            if "enum" in schema:
                bad += ["not-a-choice", str(schema["enum"][0]).upper() + "!"]
            yield st.tuples(here, st.sampled_from(bad))
        elif kind == "array" and isinstance(schema.get("items"), Mapping):
            yield self.of(schema["items"]).map(lambda found: ((0, *found[0]), [found[1]]))
        elif kind == "object":
            yield from self.in_object(schema)

    def in_object(self, schema: Mapping[str, Any]) -> Iterator[st.SearchStrategy[Violation]]:
        """Objects with a property that breaks its schema, or one not allowed."""
        properties: Mapping[str, Any] = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for name, part in properties.items():
            yield self.of(part).map(lambda found, name=name: ((name, *found[0]), {name: found[1]}))
        if extra is False:
            unknown = UNKNOWN_NAMES.filter(lambda name: name not in properties)
            yield unknown.map(lambda name: ((name,), {name: 1}))
        elif isinstance(extra, Mapping) and extra:
            yield self.of(extra).map(lambda found: (("K", *found[0]), {"K": found[1]}))
        else:  # a free-form object: its values must still be plain JSON
            plain = st.sampled_from(NOT_JSON_TEXT + NON_FINITE)
            yield plain.map(lambda value: (("k",), {"k": value}))
        if extra is not False:
            yield st.sampled_from(NOT_JSON_TEXT).map(lambda name: ((name,), {name: "v"}))

    @staticmethod
    def _out_of_range(schema: Mapping[str, Any]) -> list[Any]:
        integer = schema.get("type") == "integer"
        values: list[Any] = [2**70, -(2**70)]
        for key in ("minimum", "exclusiveMinimum"):
            if key in schema:
                low = schema[key]
                values.append(low - 1 if integer else low - 0.5)
                if key == "exclusiveMinimum":
                    values.append(low)
        for key in ("maximum", "exclusiveMaximum"):
            if key in schema:
                high = schema[key]
                # Past the highest double too: an integer compares exactly.
                values.append(int(high) * 2 + 1 if high > 2**60 else high + 1)
                if key == "exclusiveMaximum":
                    values.append(high)
        return [value for value in values if _breaks(schema, value)]


def _breaks(schema: Mapping[str, Any], value: Any) -> bool:
    return (
        value < schema.get("minimum", -math.inf)
        or value > schema.get("maximum", math.inf)
        or value <= schema.get("exclusiveMinimum", -math.inf)
        or value >= schema.get("exclusiveMaximum", math.inf)
    )


def _valid_arguments(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The required arguments, each with a value the schema accepts."""
    return {name: "x" for name in schema.get("required", [])}


def _is_text(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _client_carries(value: Any) -> bool:
    """Whether the MCP client sends `value` unchanged: no NaN or infinity
    (it sends null), no key that is not valid text (it cannot encode it)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_client_carries(item) for item in value)
    if isinstance(value, dict):
        return all(_is_text(key) and _client_carries(item) for key, item in value.items())
    return True


@pytest.fixture(scope="module")
def session() -> Iterator[tuple[Any, Any, Any]]:
    """An MCP client session to a server whose node is a closed port,
    driven from synchronous test code."""
    (port,) = free_ports(1)
    server = build_server(f"127.0.0.1:{port}", timeout_s=5, tls=False)
    with anyio.from_thread.start_blocking_portal() as portal:
        with portal.wrap_async_context_manager(Client(server)) as client:
            tools = portal.call(client.list_tools).tools
            schemas = {tool.name: tool.input_schema for tool in tools}
            yield portal, client, (server, schemas)


def _call(session: tuple[Any, Any, Any], name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
    """(is an error, its text) of a call, through the session when the
    client can carry the arguments, else to the server directly."""
    portal, client, (server, _) = session
    if _client_carries(arguments):
        result = portal.call(client.call_tool, name, arguments)
        return result.is_error, result.content[0].text
    try:
        result = portal.call(server.call_tool, name, arguments)
    except UnexpectedToolError as err:  # a crash, not a refusal
        raise AssertionError(f"{name} crashed on {arguments!r}") from err
    except ToolError as err:
        return True, str(err)
    return bool(result.is_error), result.content[0].text


def _tools_and_violations(schemas: Mapping[str, Any]) -> st.SearchStrategy[tuple[str, Violation]]:
    by_tool = []
    for name, schema in sorted(schemas.items()):
        violations = st.one_of(list(_Violations(schema).in_object(schema)))
        missing = [st.just(((required,), None)) for required in schema.get("required", [])]
        by_tool.append(st.tuples(st.just(name), st.one_of(violations, *missing)))
    return st.one_of(by_tool)


@pytest.fixture(scope="module")
def violations(session: tuple[Any, Any, Any]) -> st.SearchStrategy[tuple[str, Violation]]:
    """The strategy, built once: built for each example (and validated by
    hypothesis at each first draw), it cost about fifty times what the call
    under test does."""
    _, _, (_, schemas) = session
    return _tools_and_violations(schemas)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_arguments_the_schema_forbids_get_a_tool_error_naming_them_no_cluster(
    session: tuple[Any, Any, Any],
    violations: st.SearchStrategy[tuple[str, Violation]],
    data: st.DataObject,
):
    _, _, (_, schemas) = session
    name, (path, value) = data.draw(violations, label="violation")
    arguments = _valid_arguments(schemas[name])
    if value is None and path[0] in arguments and len(path) == 1:
        del arguments[path[0]]  # a required argument left out
    else:
        arguments.update(value)
    is_error, text = _call(session, name, arguments)
    assert is_error, (name, arguments, text)
    named = _shown_path(path)
    assert text.startswith(f"{named}: ") or f"; {named}: " in text, (name, arguments, text)
    assert "Error executing tool" not in text
    # Refused before any call: the node's closed port was never tried.
    assert "unavailable" not in text and "cannot reach" not in text
    text.encode("utf-8")  # an error is valid text, whatever the arguments held


def test_the_session_serves_on_after_every_kind_of_bad_call(session: tuple[Any, Any, Any]):
    portal, client, _ = session
    bad_calls = [
        ("submit_task", {"command": "true", "timeout_ms": 2**70}),
        ("submit_task", {"command": "true", "retry_policy": {"maxRetries": "many"}}),
        ("submit_task", {"command": "true", "bogus": 1}),
        ("no_such_tool", {}),
        ("stream_task_output", {"task_id": "t", "from_offset": 2**64}),
    ]
    for name, arguments in bad_calls:
        assert portal.call(client.call_tool, name, arguments).is_error
    assert len(portal.call(client.list_tools).tools) == 22
    # A valid call goes on to the node, which is not there.
    reached = portal.call(client.call_tool, "list_tasks", {})
    assert reached.is_error and reached.content[0].text.startswith("unavailable: ")


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("submit_task", {"command": "true", "timeout_ms": 2**70},
         "timeout_ms: must be between 1 and 604800000 (got 1180591620717411303424)"),
        ("submit_task", {"command": "true", "retry_policy": {"maxRetries": "many"}},
         'retry_policy.maxRetries: must be an integer (got "many")'),
        ("submit_task", {"command": "true", "retries": 3},
         "retries: unknown argument (known: command, type, env, cwd, timeout_ms, priority, "
         "constraints, retry_policy, concurrency_key, fairness_key, options, idempotency_key, "
         "wait, wait_timeout_s)"),
        ("submit_task", {"command": "true", "constraints": {"gpu": True}},
         "constraints.gpu: unknown key (known: requiresGpu, avoidGaming,"),
        ("get_task_result", {"task_id": "t", "verbose": True}, "verbose: unknown argument"),
        # A rule of the spec model the schema cannot state, still named.
        ("submit_task", {"command": "true", "retry_policy": {"backoffMultiplier": 1.0005}},
         "retry_policy.backoffMultiplier: backoffMultiplier 1.0005 has more than 3 decimal places"),
    ],
)  # fmt: skip
def test_named_examples_no_cluster(
    session: tuple[Any, Any, Any], name: str, arguments: dict[str, Any], expected: str
):
    is_error, text = _call(session, name, arguments)
    assert is_error and text.startswith(expected), text
