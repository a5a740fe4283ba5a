"""`cortex_thread_cpu_seconds_total{thread}`: CPU by kind of thread, and
`cortex_thread_context_switches_total{thread, switch}`, read from /proc for
this very process."""

from __future__ import annotations

import os
import queue
import threading
import time

import pytest

from cortex.http.thread_cpu import (
    ThreadCpuCollector,
    thread_cpu_seconds,
    thread_kind,
    thread_switches,
)

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs /proc")

BURN_S = 0.1


def test_threads_of_one_kind_share_a_label() -> None:
    assert thread_kind("grpc_3") == "grpc"
    assert thread_kind("peer_12") == "peer"
    assert thread_kind("agent-steps-0") == "agent-steps"
    assert thread_kind("Thread-7 (_serve)") == "_serve"
    assert thread_kind("raft") == "raft"
    assert thread_kind("agent-steps-timers") == "agent-steps-timers"
    assert thread_kind("MainThread") == "MainThread"


def _burner(name: str, release: threading.Event) -> tuple[threading.Thread, threading.Event]:
    """A thread that spends BURN_S of CPU, says so, then waits for `release`."""
    burnt = threading.Event()

    def burn() -> None:
        began = time.thread_time()
        while time.thread_time() - began < BURN_S:
            pass
        burnt.set()
        release.wait(30)

    thread = threading.Thread(target=burn, name=name, daemon=True)
    thread.start()
    return thread, burnt


def test_a_busy_thread_is_counted_under_its_kind_and_kept_after_it_ends() -> None:
    collector = ThreadCpuCollector()
    release = threading.Event()
    first, first_burnt = _burner("burner_1", release)
    second, second_burnt = _burner("burner_2", release)
    assert first_burnt.wait(30) and second_burnt.wait(30)
    native_id = first.native_id
    assert native_id is not None
    own = thread_cpu_seconds(native_id)
    # /proc counts in clock ticks: allow one tick short of what was spent.
    assert own is not None and own >= BURN_S - 0.011
    while_running = collector.totals()
    assert while_running["burner"] >= 2 * (BURN_S - 0.011)
    release.set()
    first.join(30)
    second.join(30)
    after = collector.totals()
    # Ended, their CPU stays: the counter never goes down.
    assert after["burner"] >= while_running["burner"]
    assert collector.totals()["burner"] == after["burner"]


def test_it_serves_a_counter_labelled_by_thread() -> None:
    family, _ = ThreadCpuCollector().collect()
    assert family.name == "cortex_thread_cpu_seconds"
    assert family.type == "counter"
    kinds = {sample.labels["thread"] for sample in family.samples}
    assert threading.current_thread().name in kinds
    assert all(sample.name == "cortex_thread_cpu_seconds_total" for sample in family.samples)
    assert all(sample.value >= 0 for sample in family.samples)


HANDOFFS = 200


def _switches(collector: ThreadCpuCollector, kind: str) -> dict[str, float]:
    _, family = collector.collect()
    return {s.labels["switch"]: s.value for s in family.samples if s.labels["thread"] == kind}


def _wait_until_asleep(native_id: int) -> None:
    """Polls, with a deadline, until the thread is blocked in the kernel
    (state S): it gave up the CPU, one voluntary switch."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open(f"/proc/self/task/{native_id}/stat", "rb") as stat:
            if stat.read().rpartition(b")")[2].split()[0] == b"S":
                return
        time.sleep(0.0002)
    raise AssertionError(f"thread {native_id} never waited")


def test_a_thread_waiting_for_work_counts_a_voluntary_switch_per_wait() -> None:
    collector = ThreadCpuCollector()
    work: queue.SimpleQueue[int | None] = queue.SimpleQueue()
    done: queue.SimpleQueue[int] = queue.SimpleQueue()

    def serve() -> None:
        while (item := work.get()) is not None:
            done.put(item)

    server = threading.Thread(target=serve, name="handoff_1", daemon=True)
    server.start()
    assert server.native_id is not None
    before = thread_switches(server.native_id)
    assert before is not None
    # Each item is handed over only after the last came back and the server
    # is asleep (on a loaded machine it may still be on its way to the
    # queue, preempted, and find the next item there without waiting).
    for number in range(HANDOFFS):
        _wait_until_asleep(server.native_id)
        work.put(number)
        assert done.get(timeout=30) == number
    after = thread_switches(server.native_id)
    assert after is not None and after[0] - before[0] >= HANDOFFS
    served = _switches(collector, "handoff")
    assert set(served) == {"voluntary", "involuntary"}
    assert served["voluntary"] >= HANDOFFS
    work.put(None)
    server.join(30)
    # Ended, its switches stay counted.
    assert _switches(collector, "handoff")["voluntary"] >= served["voluntary"]
