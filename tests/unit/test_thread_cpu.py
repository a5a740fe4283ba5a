"""`cortex_thread_cpu_seconds_total{thread}`: CPU by kind of thread, read
from /proc for this very process."""

from __future__ import annotations

import os
import threading
import time

import pytest

from cortex.http.thread_cpu import ThreadCpuCollector, thread_cpu_seconds, thread_kind

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
    (family,) = ThreadCpuCollector().collect()
    assert family.name == "cortex_thread_cpu_seconds"
    assert family.type == "counter"
    kinds = {sample.labels["thread"] for sample in family.samples}
    assert threading.current_thread().name in kinds
    assert all(sample.name == "cortex_thread_cpu_seconds_total" for sample in family.samples)
    assert all(sample.value >= 0 for sample in family.samples)
