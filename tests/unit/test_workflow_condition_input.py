"""The input a condition sees, capped: outputs once, cut to fit with a marker
keeping their ends, the budget shared evenly; and what a real condition
sees of it in V8."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cortex.config import load_config
from cortex.errors import ConfigError
from cortex.workflows.condition_input import (
    DEFAULT_MAX_BYTES,
    SHORT_CUT_MARKER,
    condition_input,
    cut_marker,
    json_size,
)
from cortex.workflows.decisions import TaskNode
from cortex.workflows.sandbox import ConditionSandbox

KIB = 1024


def _fan_in(
    outputs: dict[str, tuple[str, str]], **extra
) -> tuple[dict[str, TaskNode], dict[str, str]]:
    nodes = {
        key: TaskNode(key, f"t-{key}", "completed",
                      result={"exit_code": 0, "stdout": out, "stderr": err, "stdout_truncated": False,
                              **extra})
        for key, (out, err) in outputs.items()
    }  # fmt: skip
    nodes["join"] = TaskNode("join", "t-join", "pending", tuple(outputs), "true")
    return nodes, {k: n.state for k, n in nodes.items()}


def _input(outputs: dict[str, tuple[str, str]], max_bytes: int, context=None, **extra):
    nodes, states = _fan_in(outputs, **extra)
    return condition_input(nodes["join"], nodes, states, context or {}, max_bytes)


def test_small_inputs_are_whole_with_each_output_once():
    data = _input({"a": ("out-a\n", "err-a"), "b": ("", "")}, DEFAULT_MAX_BYTES)
    assert data["parent"]["a"]["stdout"] == "out-a\n" and data["parent"]["a"]["stderr"] == "err-a"
    assert data["parent"]["a"]["result"] == {"exitCode": 0, "stdoutTruncated": False}
    text = json.dumps(data)
    assert text.count("out-a") == 1 and text.count("err-a") == 1
    assert "characters cut" not in text


def test_a_wide_fan_in_is_capped_and_shares_the_budget_evenly():
    big = "x" * 64 * KIB + "SUMMARY: 0 failures\n"
    outputs = {f"p{i}": (big, "warning\n" * 8 * KIB) for i in range(200)}
    outputs["small"] = ("tiny output\n", "")
    data = _input(outputs, 256 * KIB)
    assert json_size(data) <= 256 * KIB
    views = data["parent"]
    # Short outputs stay whole; long ones keep their end behind a marker.
    assert views["small"]["stdout"] == "tiny output\n"
    for key in (f"p{i}" for i in range(200)):
        out = views[key]["stdout"]
        match = re.match(r"\.\.\.\[(\d+) characters cut to fit the condition input limit\]\n", out)
        assert match, out[:80]
        assert big.endswith(out[match.end() :])
        assert int(match.group(1)) + len(out) - match.end() == len(big)
    lengths = {len(views[f"p{i}"]["stdout"]) for i in range(200)}
    assert max(lengths) - min(lengths) < 50  # an even share each


def test_without_a_cap_the_same_fan_in_would_be_huge():
    big = "x" * 64 * KIB
    outputs = {f"p{i}": (big, big) for i in range(50)}
    whole = _input(outputs, 10**9)
    capped = _input(outputs, DEFAULT_MAX_BYTES)
    assert json_size(whole) > 6 * 1024 * KIB
    assert json_size(capped) <= DEFAULT_MAX_BYTES


def test_escaped_characters_count_as_sent():
    tricky = 'é"\\\n\x01' * 20_000  # each character several bytes in JSON
    data = _input({"a": (tricky, tricky)}, 64 * KIB)
    assert json_size(data) <= 64 * KIB
    assert data["parent"]["a"]["stdout"].endswith(tricky[-500:])


def test_context_updates_go_first_when_the_rest_alone_is_over():
    update = {"blob": "y" * 40 * KIB}
    outputs = {f"p{i}": ("out\n", "") for i in range(10)}
    data = _input(outputs, 64 * KIB, context={"kept": 1}, context_update=update)
    assert json_size(data) <= 64 * KIB
    assert data["workflow"]["context"] == {"kept": 1}
    for view in data["parent"].values():
        assert view["result"]["contextUpdate"] is None and view["result"]["contextUpdateCut"]
        assert view["stdout"] == "out\n"


def test_a_cut_marker_says_how_much_went():
    assert cut_marker(1234).startswith("...[1234 characters cut")


@pytest.fixture(scope="module")
def sandbox():
    box = ConditionSandbox(workers=1)
    yield box
    box.close()


def test_a_condition_sees_the_capped_input_and_the_result_fields(sandbox):
    big = "x" * 300 * KIB + "0 failures\n"
    data = _input({"build": (big, "err")}, 128 * KIB)
    checks = {
        "parent.build.stdout.endsWith('0 failures\\n')": True,
        "parent.build.stdout.startsWith('...[')": True,
        "parent.build.result.stdout === parent.build.stdout": True,
        "parent.build.result.stderr === 'err'": True,
        "parent.build.result.exitCode === 0 && parent.build.exitCode === 0": True,
    }
    for condition, value in checks.items():
        outcome = sandbox.evaluate(condition, data)
        assert outcome.value is value, (condition, outcome)


@settings(max_examples=200, deadline=None)
@given(
    outputs=st.lists(
        st.tuples(st.text(max_size=3000), st.text(alphabet='ab\n"\\é\x01😀', max_size=3000)),
        min_size=1,
        max_size=12,
    ),
    max_bytes=st.integers(min_value=200, max_value=40_000),
)
def test_fitted_inputs_stay_under_the_cap_and_keep_the_ends(outputs, max_bytes):
    named = {f"p{i}": pair for i, pair in enumerate(outputs)}
    assume(json_size(_input({k: ("", "") for k in named}, 10**9)) <= max_bytes)
    data = _input(named, max_bytes)
    whole = _input(named, 10**9)
    assert json_size(data) <= max_bytes
    if json_size(whole) <= max_bytes:
        assert data == whole
    for key, (out, err) in named.items():
        for name, original in (("stdout", out), ("stderr", err)):
            got = data["parent"][key][name]
            match = re.match(
                r"\.\.\.\[(\d+) characters cut to fit the condition input limit\]\n", got
            )
            if got in (SHORT_CUT_MARKER, "") and got != original:
                continue  # no room for more than that
            if match is None:
                assert got == original
            else:
                kept = got[match.end() :]
                assert original.endswith(kept) and int(match.group(1)) == len(original) - len(kept)


def test_the_input_cap_and_worker_bound_are_node_config_keys(tmp_path):
    assert load_config(environ={}).condition_input_max_bytes == DEFAULT_MAX_BYTES
    assert load_config(environ={}).condition_workers_max == 4
    path = tmp_path / "node.yaml"
    path.write_text("condition_input_max_bytes: 512KiB\ncondition_workers_max: 8\n")
    config = load_config(str(path), environ={})
    assert (config.condition_input_max_bytes, config.condition_workers_max) == (512 * KIB, 8)
    config = load_config(environ={"CORTEX_CONDITION_INPUT_MAX_BYTES": "2MiB"})
    assert config.condition_input_max_bytes == 2048 * KIB
    with pytest.raises(ConfigError, match="condition_input_max_bytes .*CORTEX_CONDITION_INPUT_MAX"):
        load_config(environ={"CORTEX_CONDITION_INPUT_MAX_BYTES": "64MiB"})
    with pytest.raises(ConfigError, match="condition_workers_max"):
        load_config(flags={"condition_workers_max": 0}, environ={})
