"""Generated task specs against both validators: the one apply runs
(`cortex.state.spec_rules.check_task_spec`, code of Cortex's own) and the
pydantic `TaskSpec` the API edge runs.

- In strict mode (JSON types, as apply sees them) the two accept and refuse
  the same specs, and when both accept, produce the same canonical dump
  (compared as JSON text, so 0 and 0.0 differ).
- Whatever the edge accepts in its usual lax mode, its dump (what it
  proposes) passes apply unchanged.

Specs mix valid values, values at and beyond each bound, wrong JSON types,
field names and camelCase aliases (and both at once), unknown fields, blank
commands, NaN and lone surrogates."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from cortex.spec import TaskSpec
from cortex.state import entries as e
from cortex.state.spec_rules import (
    SpecError,
    check_task_spec,
    first_problem,
    is_plain,
    plain_json_problem,
)

WRONG = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=3),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)
GOOD_TEXT = st.one_of(
    st.text(max_size=4), st.sampled_from(["", " ", "\t\u3000", "x", "\x00", "A=B", "é", "\x1c"])
)
ODD_TEXT = st.sampled_from(["\ud800", "a\udfff"])  # lone surrogates
TEXT = st.one_of(GOOD_TEXT, ODD_TEXT)
GOOD_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    GOOD_TEXT,
)
NOT_JSON = st.sampled_from([float("nan"), float("inf"), -float("inf"), "\ud800", "a\udfff"])
SCALARS = st.one_of(NOT_JSON, GOOD_SCALARS, st.floats(), TEXT)


def json_values(scalars: st.SearchStrategy[Any], keys: st.SearchStrategy[str]) -> Any:
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(keys, inner, max_size=3)
        ),
        max_leaves=6,
    )


def integers(low: int | None, high: int | None) -> tuple[Any, Any]:
    """(good, bad) values of an integer field."""
    edges = [v for bound in (low, high) if bound is not None for v in (bound - 1, bound + 1)]
    good = st.integers(low, high if high is not None else 10**25)
    bad = st.one_of(
        st.sampled_from(edges),
        st.sampled_from([10**30, -(10**30), 5.0, 1.5, "5", True, False]),
        WRONG,
    )
    return good, bad


def numbers(low: int, high: int | None, thousandths: bool) -> tuple[Any, Any]:
    """(good, bad) values of a number field."""
    top = high if high is not None else 10**6
    good = st.one_of(
        st.integers(low, top),
        st.integers(low * 1000, top * 1000).map(lambda n: n / 1000),
        st.just(-0.0) if low == 0 else st.just(float(low)),
    )
    if not thousandths:
        good = st.one_of(good, st.floats(min_value=low, max_value=1e300), st.just(2**1023))
    bad = st.one_of(
        st.integers(low * 10_000, top * 10_000).map(lambda n: n / 10_000),  # four decimals
        st.sampled_from([low - 1, top + 1, low - 0.001, 10**400, float("nan"), float("inf")]),
        st.sampled_from(["1", True]),
        WRONG,
    )
    return good, bad


def choice(*values: Any) -> tuple[Any, Any]:
    return st.sampled_from(values), WRONG


TEXT_LISTS = (st.lists(GOOD_TEXT, max_size=3), st.one_of(st.lists(SCALARS, max_size=2), WRONG))
TEXT_MAPS = (
    st.dictionaries(GOOD_TEXT, GOOD_TEXT, max_size=3),
    st.one_of(st.dictionaries(TEXT, SCALARS, min_size=1, max_size=2), WRONG),
)
COMMANDS = (
    st.one_of(
        st.sampled_from([["true"], "echo hi", ["sh", "-c", "exit 1"]]),
        st.text(min_size=1, max_size=4),
        st.lists(GOOD_TEXT, min_size=1, max_size=3),
    ),
    st.one_of(
        st.sampled_from([[], [""], ["", "x"], ["x", 1], 5, None, "", " ", "\t\u3000", "\x1c"]),
        st.text(" \t\n\x0b\x1c\x85\xa0\u2003\u3000\u200b\u180e", max_size=3),  # blank or not
        ODD_TEXT,
        WRONG,
    ),
)
ENV = (
    st.dictionaries(st.text("AB_x", min_size=1, max_size=3), GOOD_TEXT, max_size=3),
    st.one_of(st.dictionaries(GOOD_TEXT, GOOD_TEXT, min_size=1, max_size=2), TEXT_MAPS[1]),
)
OPTIONAL_TEXT = (st.one_of(st.none(), GOOD_TEXT), st.one_of(ODD_TEXT, WRONG))

# A field: name -> (alias or None, (good values, bad values)).
Fields = dict[str, tuple[str | None, tuple[Any, Any]]]


def rarely(draw: st.DrawFn, n: int) -> bool:
    """True about once in n + 1 draws (hypothesis favours the ends of a
    range, so the chosen value is in the middle)."""
    return bool(draw(st.integers(0, n)) == n // 2)


@st.composite
def objects(draw: st.DrawFn, fields: Fields) -> dict[str, Any]:
    """Each field absent or under its name or alias, now and then with a bad
    value, rarely under both; now and then an unknown field."""
    out: dict[str, Any] = {}
    for name, (alias, (good, bad)) in fields.items():
        if draw(st.integers(0, 2)) == 0:
            continue
        keys = [name, alias] if alias and rarely(draw, 40) else [name]
        if alias and len(keys) == 1 and draw(st.booleans()):
            keys = [alias]
        for key in keys:
            out[key] = draw(bad if rarely(draw, 2 * len(fields)) else good)
    if rarely(draw, 20):
        out[draw(st.sampled_from(["bogus", "Type", "retrypolicy", "timeoutms"]))] = 1
    return out


CONSTRAINT_FIELDS: Fields = {
    "requires_gpu": ("requiresGpu", choice(True, False)),
    "avoid_gaming": ("avoidGaming", choice(True, False)),
    "min_memory_mb": ("minMemoryMb", integers(0, None)),
    "min_disk_gb": ("minDiskGb", numbers(0, None, thousandths=False)),
    "node_labels": ("nodeLabels", TEXT_LISTS),
    "target_node": ("targetNode", OPTIONAL_TEXT),
    "requires_capabilities": ("requiresCapabilities", TEXT_MAPS),
    "allowed_nodes": ("allowedNodes", TEXT_LISTS),
    "forbidden_nodes": ("forbiddenNodes", TEXT_LISTS),
    "max_parallel_per_node": ("maxParallelPerNode", integers(0, None)),
}
RETRY_FIELDS: Fields = {
    "max_retries": ("maxRetries", integers(0, 100)),
    "backoff_ms": ("backoffMs", integers(0, 86_400_000)),
    "backoff_multiplier": ("backoffMultiplier", numbers(1, 100, thousandths=True)),
    "retryable": (None, choice(True, False)),
}
TIMEOUTS = integers(1, 7 * 86_400_000)
TASK_FIELDS: Fields = {
    "type": (
        None,
        (st.sampled_from(["shell", "noop", "docker"]), st.one_of(st.just("Docker"), WRONG)),
    ),
    "command": (None, COMMANDS),
    "env": (None, ENV),
    "cwd": (None, OPTIONAL_TEXT),
    "timeout_ms": ("timeoutMs", (st.one_of(st.none(), TIMEOUTS[0]), TIMEOUTS[1])),
    "priority": (None, integers(0, 10)),
    "constraints": (None, (objects(CONSTRAINT_FIELDS), WRONG)),
    "retry_policy": ("retryPolicy", (objects(RETRY_FIELDS), WRONG)),
    "labels": (None, TEXT_MAPS),
    "options": (
        None,
        (
            st.dictionaries(GOOD_TEXT, json_values(GOOD_SCALARS, GOOD_TEXT), max_size=3),
            st.one_of(st.dictionaries(TEXT, json_values(SCALARS, TEXT), min_size=1), WRONG),
        ),
    ),
}

specs = objects(TASK_FIELDS)


def pydantic_dump(data: Any, strict: bool) -> str | None:
    try:
        return canonical(TaskSpec.model_validate(data, strict=strict).model_dump(mode="json"))
    except ValidationError:
        return None


def apply_dump(data: Any) -> str | None:
    try:
        return canonical(check_task_spec(data))
    except SpecError:
        return None


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


@settings(deadline=None, max_examples=1500)
@given(specs)
def test_apply_rules_and_pydantic_agree_on_json_typed_specs(data: dict[str, Any]) -> None:
    assert apply_dump(data) == pydantic_dump(data, strict=True), data


@settings(deadline=None, max_examples=600)
@given(specs)
def test_what_the_edge_proposes_passes_apply_unchanged(data: dict[str, Any]) -> None:
    proposed = pydantic_dump(data, strict=False)
    if proposed is not None:
        assert apply_dump(json.loads(proposed)) == proposed, data


def outcome(data: Any, plain_json: bool) -> str:
    try:
        return canonical(check_task_spec(data, plain_json=plain_json))
    except SpecError as err:
        return f"refused: {err}"


@settings(deadline=None, max_examples=800)
@given(specs)
def test_a_batch_scanned_plain_needs_no_search_for_nan_or_surrogates(data: Any) -> None:
    """What apply decides with the batch scan's `plain` is what it decides
    searching every value: the scan never calls plain a batch that holds a
    NaN, an infinity or a lone surrogate."""
    batch = e.encode_batch([e.Entry.create(e.TaskSubmit("t1", data, None), "n1")])
    items, plain = e.decode_batch_scanned(batch)
    entry = items[0]
    if not isinstance(entry, e.Entry):  # beyond the decoder's limits
        assert not plain
        return
    decoded = entry.payload["spec"]
    if plain:
        assert outcome(decoded, plain_json=True) == outcome(decoded, plain_json=False), data
        assert plain_json_problem(decoded) is None


@pytest.mark.parametrize(
    "value",
    [float("nan"), float("inf"), -float("inf"), "\ud800", {"\udfff": 1}, [1e308 * 10], "é"],
)
def test_the_batch_scan_is_not_plain_where_json_is_not(value: Any) -> None:
    batch = e.encode_batch([e.Entry.create(e.TaskSubmit("t1", {"labels": value}, None), "n1")])
    assert e.decode_batch_scanned(batch)[1] is (value == "é")
    utf8 = json.dumps([{"x": value}], ensure_ascii=False).encode("utf-8", "surrogatepass")
    assert e.decode_batch_scanned(utf8)[1] is False


# JSON-like values with a problem now and then: NaN and infinities, lone
# surrogates in strings and in keys, beside ASCII and other text.
NOT_QUITE_JSON = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(),
        st.text(max_size=4),
        st.sampled_from(["\ud800", "a\udfffb", "é\udc00", "\U0001f600"]),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.one_of(st.text(max_size=3), st.sampled_from(["\udbff", "é"])), inner, max_size=4
        ),
    ),
    max_leaves=20,
)


@settings(deadline=None, max_examples=1500)
@given(NOT_QUITE_JSON)
def test_the_quick_plain_walk_agrees_with_the_walk_that_names_the_place(value: Any) -> None:
    """`plain_json_problem` walks once without paths (`is_plain`) and names
    the place only when that walk finds a problem: both walks must agree."""
    assert is_plain(value) is (first_problem(value) is None), ascii(value)
    assert plain_json_problem(value) == first_problem(value)
