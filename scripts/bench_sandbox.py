"""Condition sandbox figures: what a worker process needs and may use (the
RLIMIT_DATA cap measured at start), whether heap exhaustion stays a clean
error under that cap, the cost of an evaluation and of syntax checks (a
fresh isolate per condition versus batches, and the cache), the condition
input cap on a wide fan-in, and how long a quick condition waits behind a
backlog of slow ones from other workflows.

    python scripts/bench_sandbox.py [--rounds 5] [--slow 150]
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import FIRST_COMPLETED, wait

from cortex.workflows.condition_input import DEFAULT_MAX_BYTES, condition_input, json_size
from cortex.workflows.decisions import TaskNode
from cortex.workflows.sandbox import DEFAULT_MAX_MEMORY, ConditionSandbox
from cortex.workflows.sandbox_process import MIB, SandboxProcess, process_allowance

DATA = {"parent": {"build": {"exitCode": 0, "stdout": "ok\n", "stderr": "", "state": "completed",
                             "result": {"exitCode": 0}}},
        "workflow": {"context": {"version": "1.2"}}}  # fmt: skip
HEAP_BOMBS = {
    "objects": "let a = []; while (true) a.push({n: a.length});",
    "arrays": "let a = []; while (true) a.push(new Array(1e6).fill(1));",
    "strings": "let s = []; while (true) s.push('x'.repeat(1e5) + s.length);",
}


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def worker_memory() -> None:
    started = time.monotonic()
    process = SandboxProcess(DEFAULT_MAX_MEMORY)
    took = time.monotonic() - started
    allowance = process_allowance(DEFAULT_MAX_MEMORY)
    baseline = process.memory_limit - allowance
    print("worker process")
    print(f"  start (Python, V8, warm-up isolate):  {_ms(took)}")
    print(f"  writable memory V8 needs at start:    {baseline / MIB:.0f} MiB (VmData)")
    print(f"  cap (RLIMIT_DATA):                    {process.memory_limit / MIB:.0f} MiB"
          f" = start + {allowance / MIB:.0f} MiB for a {DEFAULT_MAX_MEMORY / MIB:.0f} MiB heap")  # fmt: skip
    with open(f"/proc/{process.pid}/status") as status:
        rss = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    print(f"  resident when idle:                   {rss / 1024:.0f} MiB (most of VmData is"
          " V8's code range, reserved writable but never touched)")  # fmt: skip
    process.kill()


def heap_exhaustion(rounds: int) -> None:
    print("heap exhaustion under the process cap (outcomes; a clean memory error is the aim)")
    box = ConditionSandbox(workers=1, max_workers=1, timeout_ms=3000)
    try:
        box.evaluate("true", DATA)
        for name, condition in HEAP_BOMBS.items():
            kinds: dict[str, int] = {}
            for _ in range(rounds):
                kind = box.evaluate(condition, DATA).error or "value"
                kinds[kind] = kinds.get(kind, 0) + 1
            print(f"  {name:8} {kinds}")
        print(f"  worker processes replaced: {box.restarts}")
    finally:
        box.close()


def evaluation_cost(rounds: int) -> None:
    box = ConditionSandbox(workers=2, max_workers=2)
    try:
        box.evaluate_many([("true", DATA)] * 2)
        latencies = []
        for _ in range(50 * rounds):
            started = time.monotonic()
            box.evaluate("parent.build.exitCode === 0", DATA)
            latencies.append(time.monotonic() - started)
        started = time.monotonic()
        box.evaluate_many([("parent.build.exitCode === 0", DATA)] * 200)
        rate = 200 / (time.monotonic() - started)
        latencies.sort()
        print("evaluation (fresh isolate each, prepared while idle)")
        print(f"  latency p50 {_ms(statistics.median(latencies))},"
              f" p95 {_ms(latencies[int(len(latencies) * 0.95)])}")  # fmt: skip
        print(f"  throughput on 2 workers: {rate:.0f} evaluations/s")
    finally:
        box.close()


def syntax_checks(count: int) -> None:
    from py_mini_racer import MiniRacer

    conditions = [f"parent.t{i}.exitCode === 0 && workflow.context.n > {i}" for i in range(count)]
    sample = conditions[:200]
    started = time.monotonic()
    for condition in sample:
        with MiniRacer() as racer:
            racer.eval(f"new Function('parent', 'workflow', {condition!r}); 1")
    per_fresh = (time.monotonic() - started) / len(sample)
    box = ConditionSandbox(workers=2)
    try:
        box.check_syntax("1")
        started = time.monotonic()
        box.check_syntax_many(conditions)
        batched = time.monotonic() - started
        started = time.monotonic()
        box.check_syntax_many(conditions)
        cached = time.monotonic() - started
    finally:
        box.close()
    print(f"syntax check of {count} distinct conditions")
    print(f"  a fresh isolate each (before):  {per_fresh * count:.2f} s ({_ms(per_fresh)} each)")
    print(f"  batches sharing an isolate:     {batched:.2f} s")
    print(f"  again, remembered by source:    {cached * 1000:.1f} ms")


def input_cap() -> None:
    output = "x" * 64 * 1024
    result = {"exit_code": 0, "stdout": output, "stderr": output, "stdout_truncated": True}
    parents = {f"p{i}": TaskNode(f"p{i}", f"t{i}", "completed", result=result) for i in range(500)}
    join = TaskNode("join", "tj", "pending", tuple(parents), "true")
    nodes = {**parents, "join": join}
    states = {key: node.state for key, node in nodes.items()}
    uncapped = 2 * (500 * 2 * len(output))  # stdout and stderr, each twice, before
    started = time.monotonic()
    data = condition_input(join, nodes, states, {}, DEFAULT_MAX_BYTES)
    took = time.monotonic() - started
    print("condition input of a 500-task fan-in, 64 KiB stdout and stderr each")
    print(f"  before (outputs twice, whole): {uncapped / MIB:.0f} MiB of JSON")
    print(f"  now: {json_size(data) / MIB:.2f} MiB (cap {DEFAULT_MAX_BYTES / MIB:.0f} MiB),"
          f" built in {_ms(took)}")  # fmt: skip


def fairness(slow: int) -> None:
    box = ConditionSandbox()
    try:
        box.evaluate_many([("true", DATA)] * 2)
        started = time.monotonic()
        futures = [box.submit("while(true){}", DATA, f"slow-{i}") for i in range(slow)]
        wait(futures, return_when=FIRST_COMPLETED)
        asked = time.monotonic()
        quick = box.submit("parent.build.exitCode === 0", DATA, "quick")
        quick.result()
        waited = time.monotonic() - asked
        for future in futures:
            future.result()
        drained = time.monotonic() - started
        print(
            f"fairness: {slow} slow conditions (100 ms each) from {slow} workflows, then a quick one"
        )
        print(f"  the quick one waited {_ms(waited)}; the backlog took {drained:.2f} s"
              f" on up to {box.max_workers} workers (first come, first served: the quick one"
              f" would have waited about that long)")  # fmt: skip
    finally:
        box.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--slow", type=int, default=150)
    parser.add_argument("--conditions", type=int, default=10_000)
    args = parser.parse_args()
    worker_memory()
    heap_exhaustion(args.rounds)
    evaluation_cost(args.rounds)
    syntax_checks(args.conditions)
    input_cap()
    fairness(args.slow)


if __name__ == "__main__":
    main()
