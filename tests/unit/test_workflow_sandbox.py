"""The condition sandbox on real V8 in real worker processes: values,
errors, hostile code, the process memory cap, the scrubbed environment,
crashes and recovery, fair service across flows, and the syntax cache."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, wait

import pytest

from cortex.workflows.sandbox import ConditionSandbox
from cortex.workflows.sandbox_process import MIB, process_allowance
from tests.cluster import pid_alive, wait_until
from tests.hostile_conditions import EXFILTRATE, search_for

DATA = {
    "parent": {
        "build": {"exitCode": 0, "stdout": "3 tests, 0 failures\n", "stderr": "", "state": "completed",
                  "result": {"exitCode": 0, "stdoutTruncated": False}},
        "lint": {"exitCode": 2, "stdout": "", "stderr": "E1", "state": "failed", "result": None},
    },
    "workflow": {"context": {"version": "1.2", "count": 3}},
}  # fmt: skip
SECRETS = {
    "CORTEX_SECRET": "cluster-secret-7f3a9c51d2e8",
    "CORTEX_API_TOKEN": "api-token-b41e06a8c77d",
    "CORTEX_MCP_TOKEN": "mcp-token-5d90f2e13ab4",
}
ARRAY_BUFFER = "new Uint8Array(new ArrayBuffer(256 * 1024 * 1024)).fill(1).length > 0"


@pytest.fixture(scope="module")
def sandbox() -> Iterator[ConditionSandbox]:
    box = ConditionSandbox(workers=2)
    yield box
    box.close()


@pytest.mark.parametrize(
    ("condition", "value"),
    [
        ("parent.build.exitCode === 0", True),
        ("parent.lint.exitCode !== 0 && parent.lint.state === 'failed'", True),
        # stdout travels once, and the result shows the same string.
        ("parent.build.result.stdout.includes('0 failures')", True),
        ("parent.build.result.stdout === parent.build.stdout", True),
        ("parent.build.result.stdoutTruncated === false", True),
        ("workflow.context.version === '1.2'", True),
        ("workflow.context.count > 5", False),
        ("var n = workflow.context.count; n * 2 === 6", True),  # a script: last value decides
        ("let parent = 1; parent === 1", True),  # its own scope, as checked at submit
        ("this === globalThis", True),
    ],
)
def test_conditions_see_parents_and_context(sandbox, condition, value):
    outcome = sandbox.evaluate(condition, DATA)
    assert outcome.error is None, outcome
    assert outcome.value is value


@pytest.mark.parametrize(
    ("condition", "returned"),
    [
        ("'non-empty'", "a string"),
        ("1", "a number"),
        ("0", "a number"),
        ("10n", "a bigint"),
        ("Promise.resolve(true)", "a Promise"),
        ("(async () => true)()", "a Promise"),
        ("({ok: true})", "an object"),
        ("new Boolean(true)", "an object"),
        ("[true]", "an array"),
        ("() => true", "a function"),
        ("Symbol('x')", "a symbol"),
        ("null", "null"),
        ("undefined", "undefined"),
        ("while (false) {}", "undefined"),  # no completion value
    ],
)
def test_a_condition_must_come_to_a_boolean(sandbox, condition, returned):
    outcome = sandbox.evaluate(condition, DATA)
    assert outcome.value is None and outcome.error == "type", outcome
    assert outcome.describe() == f"condition returned {returned}, not a boolean"


@pytest.mark.parametrize(
    ("condition", "reason"),
    [
        ("throw new Error('x')", "condition threw Error: x"),
        ("throw new TypeError('bad input')", "condition threw TypeError: bad input"),
        ("throw 'boom'", 'condition threw "boom"'),
        ("parent.missing.stdout", "condition threw TypeError: Cannot read properties of undefined"),
        ("JSON.parse('{')", "condition threw SyntaxError: "),
        ("while(true){}", "condition timed out after 100 ms"),
        (ARRAY_BUFFER, "condition threw ReferenceError: Uint8Array is not defined"),
        ("'text'", "condition returned a string, not a boolean"),
    ],
)
def test_error_reasons_read_cleanly(sandbox, condition, reason):
    described = sandbox.evaluate(condition, DATA).describe()
    assert described.startswith(reason), described
    assert "undefined:" not in described and "<anonymous>" not in described


@pytest.mark.parametrize(
    ("condition", "error", "message"),
    [
        ("while(true){}", "timeout", "timed out after 100 ms"),
        # Over the memory cap, unless the clock runs out first on a busy machine.
        ("let a = []; while (true) a.push(new Array(1e6).fill(1))", "memory|timeout", ""),
        ("require('fs')", "threw", "ReferenceError: require is not defined"),
        ("process.exit()", "threw", "ReferenceError: process is not defined"),
        ("this.constructor.constructor('return process')()", "threw", "process is not defined"),
        (
            "globalThis.constructor.constructor('return require')()",
            "threw",
            "require is not defined",
        ),
        ("Promise.resolve().then(() => { while (true) {} }); true", "", ""),
    ],
)
def test_hostile_or_broken_conditions_fail_quickly_with_a_reason(
    sandbox, condition, error, message
):
    started = time.monotonic()
    outcome = sandbox.evaluate(condition, DATA)
    elapsed = time.monotonic() - started
    if error:
        assert outcome.value is None and outcome.error in error.split("|"), outcome
        assert message in outcome.describe()
    else:
        # A promise job left running does not outlive its isolate.
        assert outcome.value is True, outcome
        assert sandbox.evaluate("true", DATA).value is True
    # Decided in the 100 ms budget plus process overhead: never a hang.
    assert elapsed < 3.0, f"{condition!r} took {elapsed:.2f}s"


@pytest.mark.parametrize(
    "condition",
    [
        "return false",
        "return parent.build.exitCode === 0",
        "let parent = 1; parent === 1",
        "const workflow = 2; workflow === 2",
        "var workflow = 2; workflow === 2",
        "function f() { return true } f()",
        "'use strict'; true",
        "with ({a: true}) a",
        "let x = 1; let x = 2; true",
        "}); (function(){",
        "await 1",
        "yield 1",
        "arguments.length === 3",
        "class A {}; true",
        "import('fs')",
        "export const a = 1",
        "<!-- an HTML comment\ntrue",
        "function cortexSyntaxCheck() {}; true",
        "parent.build.exitCode ===",
    ],
)
def test_the_syntax_check_and_the_evaluation_agree(sandbox, condition):
    """What the check refuses fails the same way at run time, and what it
    accepts never fails to compile at run time."""
    error = sandbox.check_syntax(condition)
    outcome = sandbox.evaluate(condition, DATA)
    compiled = not outcome.describe().startswith("condition threw SyntaxError")
    assert (error is None) == compiled, (error, outcome)
    if error is not None:
        assert outcome.describe().startswith(f"condition threw {error.split(' (')[0]}")


def test_return_is_refused_at_submit_with_a_hint(sandbox):
    error = sandbox.check_syntax("return parent.build.exitCode === 0") or ""
    assert error.startswith("SyntaxError: Illegal return statement"), error
    assert "last value decides" in error


def test_no_host_objects_or_timers_are_reachable(sandbox):
    names = ["require", "process", "setTimeout", "clearTimeout", "console", "WebAssembly",
             "SharedArrayBuffer", "Atomics", "__timer_manager", "global", "module"]  # fmt: skip
    condition = f"{names!r}.every(n => typeof globalThis[n] === 'undefined')"
    assert sandbox.evaluate(condition, DATA).value is True


def test_every_evaluation_gets_a_fresh_context(sandbox):
    assert sandbox.evaluate("globalThis.leak = 42; true", DATA).value is True
    assert sandbox.evaluate("Object.prototype.polluted = 1; true", DATA).value is True
    assert sandbox.evaluate("JSON.stringify = () => 'forged'; false", DATA).value is False
    assert sandbox.evaluate(
        "typeof leak === 'undefined' && ({}).polluted === undefined && JSON.stringify(1) === '1'",
        DATA,
    ).value


def test_a_condition_cannot_forge_its_answer(sandbox):
    forgeries = [
        "String = () => 'T'; false",
        "Object.getPrototypeOf = () => Promise.prototype; false",
        "Array.isArray = () => true; Function.prototype.call = () => true; false",
    ]
    for condition in forgeries:
        assert sandbox.evaluate(condition, DATA).value is False, condition


def test_array_buffers_are_refused_and_other_workers_carry_on():
    box = ConditionSandbox(workers=2, max_workers=2)
    try:
        box.evaluate_many([("true", DATA)] * 2)
        before = set(box.processes)
        names = ["ArrayBuffer", "SharedArrayBuffer", "DataView", "Uint8Array", "Float64Array",
                 "BigInt64Array", "Uint8ClampedArray", "WebAssembly", "Atomics"]  # fmt: skip
        assert (
            box.evaluate(
                f"{names!r}.every(n => !(n in globalThis))"
                " && !Object.getOwnPropertyNames(globalThis).some(n => /Buffer|[0-9]Array$/.test(n))",
                DATA,
            ).value
            is True
        )
        for condition in (ARRAY_BUFFER, "new ArrayBuffer(1 << 28).byteLength > 0",
                          "new DataView(new ArrayBuffer(8)).byteLength === 8"):  # fmt: skip
            outcome = box.evaluate(condition, DATA)
            assert outcome.error == "threw" and "is not defined" in outcome.describe(), outcome
        assert set(box.processes) == before and box.restarts == 0
        outcomes = box.evaluate_many([("parent.build.exitCode === 0", DATA)] * 4)
        assert [o.value for o in outcomes] == [True] * 4
    finally:
        box.close()


def test_the_cap_covers_the_whole_process_and_a_worker_killed_by_it_is_replaced():
    # Intl objects keep their data outside the JS heap: with time enough, a
    # condition grows the process to its cap, and the process dies alone.
    box = ConditionSandbox(workers=2, max_workers=2, timeout_ms=10_000)
    try:
        box.evaluate_many([("true", DATA)] * 2)
        before = box.processes
        for pid in before:
            with open(f"/proc/{pid}/limits") as limits:
                line = next(line for line in limits if line.startswith("Max data size"))
            soft = line.split()[3]
            assert soft.isdigit(), line  # capped, not unlimited
            assert int(soft) < 2048 * MIB
        started = time.monotonic()
        outcome = box.evaluate(
            "let a = []; for (;;) a.push(new Intl.DateTimeFormat('en', {timeZone: 'UTC'})); true",
            DATA,
        )
        assert outcome.error in ("memory", "crash"), outcome
        assert time.monotonic() - started < 9.0  # the cap, not the clock, stopped it
        if outcome.error == "memory":
            assert outcome.describe() == "condition exceeded its 32 MiB memory limit"
        assert box.restarts == 1
        assert box.evaluate("parent.build.exitCode === 0", DATA).value is True
        assert sum(pid_alive(pid) for pid in before) == 1  # the other worker was untouched
    finally:
        box.close()


def test_process_allowance_leaves_room_for_the_heap_cap():
    assert process_allowance(32 * MIB) == 96 * MIB
    assert process_allowance(8 * MIB) > 8 * MIB


def test_workers_get_none_of_the_nodes_environment(monkeypatch):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    box = ConditionSandbox(workers=1, timeout_ms=2000)
    try:
        planted = {**DATA, "workflow": {"context": {"marker": "planted-marker-0c1d"}}}
        # The search finds what it can reach...
        assert box.evaluate(search_for(["planted-marker-0c1d"]), planted).value is True
        # ...and no secret or token, nor any other variable of the node.
        assert box.evaluate(search_for(list(SECRETS.values())), planted).value is False
        assert box.evaluate(search_for(["PATH=", "/usr/bin", "HOME"]), planted).value is False
        reason = box.evaluate(EXFILTRATE, planted).describe()
        assert reason.startswith("condition threw Error: env=ReferenceError"), reason
        assert not any(secret in reason for secret in SECRETS.values())
        for pid in box.processes:
            with open(f"/proc/{pid}/environ", "rb") as environ:
                assert environ.read() == b""
    finally:
        box.close()


def test_a_v8_fatal_error_kills_only_the_worker_which_is_replaced():
    box = ConditionSandbox(workers=1)
    try:
        # Array.prototype.fill on a huge sparse array runs in C++ without
        # interrupt checks until V8 aborts the process or the deadline passes.
        started = time.monotonic()
        outcome = box.evaluate("new Array(2**32 - 1).fill(0).length > 0", DATA)
        assert outcome.error in ("crash", "memory"), outcome
        assert time.monotonic() - started < 3.0
        assert box.restarts == 1
        assert box.evaluate("parent.build.exitCode === 0", DATA).value is True
    finally:
        box.close()


def test_conditions_evaluate_in_parallel_on_several_workers(sandbox):
    sandbox.evaluate("true", DATA)
    started = time.monotonic()
    outcomes = sandbox.evaluate_many([("while(true){}", DATA)] * 4)
    elapsed = time.monotonic() - started
    assert [o.error for o in outcomes] == ["timeout"] * 4
    # Each is cut off at 100 ms; even on a loaded machine the batch is quick.
    assert elapsed < 4.0, elapsed


def test_a_quick_condition_is_not_held_up_by_many_slow_ones():
    box = ConditionSandbox(workers=2, max_workers=2)
    events: list[str] = []
    lock = threading.Lock()

    def note(name: str) -> None:
        with lock:
            events.append(name)

    try:
        box.evaluate_many([("true", DATA)] * 2)  # both workers up
        slow = []
        for i in range(20):
            future = box.submit("while(true){}", DATA, f"slow-{i}")
            future.add_done_callback(lambda _, i=i: note(f"slow-{i}"))
            slow.append(future)
        wait(slow, return_when=FIRST_COMPLETED)  # now the slow condition's cost is known
        note("submitted")
        quick = box.submit("parent.build.exitCode === 0", DATA, "quick")
        quick.add_done_callback(lambda _: note("quick"))
        assert quick.result().value is True
        assert all(f.result().error == "timeout" for f in slow)
        # It waited for the evaluations the two workers held, not for the
        # backlog (first come, first served would put it last).
        waited_for = events.index("quick") - events.index("submitted") - 1
        assert waited_for <= 3, events
        assert len(events) - 1 - events.index("quick") >= 12, events
    finally:
        box.close()


def test_workers_are_added_on_demand_up_to_the_bound_and_retire_when_idle():
    box = ConditionSandbox(workers=1, max_workers=3, idle_exit_s=5.0)
    try:
        box.evaluate("true", DATA)
        assert len(box.processes) == 1
        outcomes = box.evaluate_many([("while(true){}", DATA)] * 6)
        assert [o.error for o in outcomes] == ["timeout"] * 6
        assert 1 < len(box.processes) <= 3
        wait_until(lambda: len(box.processes) == 1, 30, what="extra workers to retire")
        # The one that stays serves on (no new process).
        remaining = box.processes
        assert box.evaluate("true", DATA).value is True
        assert box.processes == remaining
    finally:
        box.close()


def test_a_cancelled_evaluation_leaves_its_queue():
    box = ConditionSandbox(workers=1, max_workers=1)
    try:
        blocker = box.submit("while(true){}", DATA, "a")
        queued = [box.submit("true", DATA, "b") for _ in range(5)]
        assert all(f.cancel() for f in queued)
        assert blocker.result().error == "timeout"
        assert box.evaluate("true", DATA).value is True
    finally:
        box.close()


def test_syntax_check_only_compiles(sandbox):
    started = time.monotonic()
    assert sandbox.check_syntax("while(true){}") is None
    assert sandbox.check_syntax("let a = []; while (true) a.push(1)") is None
    assert time.monotonic() - started < 2.0
    assert "SyntaxError" in (sandbox.check_syntax("parent.a.exitCode ===") or "")
    assert "SyntaxError" in (sandbox.check_syntax("}); (function(){") or "")
    assert sandbox.check_syntax_many(["1", "(", "2"]) == [None, sandbox.check_syntax("("), None]
    assert "longer than" in (sandbox.check_syntax("1;" * 5000) or "")


def test_syntax_checks_are_remembered_by_source():
    box = ConditionSandbox(workers=1)
    try:
        conditions = [f"parent.t{i}.exitCode === 0" for i in range(600)] + ["(("]
        first = box.check_syntax_many(conditions)
        assert box.compiled == len(conditions)
        assert first[:600] == [None] * 600 and "SyntaxError" in (first[600] or "")
        again = box.check_syntax_many(list(reversed(conditions)))
        assert again == list(reversed(first))
        assert box.compiled == len(conditions)  # nothing compiled twice
        box.check_syntax_many(["parent.new === 1"])
        assert box.compiled == len(conditions) + 1
    finally:
        box.close()


def test_parent_keys_are_data_not_prototypes(sandbox):
    data = {"parent": {"__proto__": {"state": "completed"}}, "workflow": {"context": {}}}
    assert sandbox.evaluate("Object.keys(parent).includes('__proto__')", data).value is True
    assert sandbox.evaluate("({}).state === undefined", data).value is True


def test_a_closed_sandbox_refuses_work():
    box = ConditionSandbox(workers=1)
    box.evaluate("true", DATA)
    box.close()
    with pytest.raises(Exception, match="shut down"):
        box.evaluate("true", DATA)
