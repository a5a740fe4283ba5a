"""`cortex_thread_cpu_seconds_total{thread}`: the CPU time (user and
system) the node's process spent in each kind of thread, so where a busy
node's CPU goes (the Raft thread applying entries, the API's gRPC threads,
the agent, the scheduler) shows on a dashboard and in `bench_core.py`
without attaching a profiler.

Read at scrape time from `/proc/self/task/<tid>/stat` for every live
Python thread (`threading.enumerate`). Threads of one kind share a label:
`grpc_3` and `grpc_7` are both `grpc`, an unnamed `Thread-4 (_serve)`
is `_serve`; the Raft thread (applying entries included) is `raft`. A
thread that ended keeps what it had when last seen, so each series only
grows (the little it spent between that scrape and its end is not
counted). Threads Python did not start (the
gRPC core's own) are not listed. Nothing is served where `/proc` is
missing. Several nodes sharing a process (tests) share its threads.

`cortex_thread_context_switches_total{thread, switch}` counts, the same
way, how often threads of each kind gave up the CPU: `voluntary` when a
thread waited (for a lock, the GIL, a queue, I/O), `involuntary` when the
kernel took the CPU from it. Every hand-off of work from one thread to
another costs a voluntary switch and the wake-up that ends it, which on a
virtual machine can cost tens of microseconds of CPU
(`scripts/bench_handoff.py` measures it), so switches per task tell how much
of a task's CPU goes to passing it between threads."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator

from prometheus_client.metrics_core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

_TASKS = "/proc/self/task"
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# "Thread-12 (_serve)" -> "_serve"; "grpc_3", "agent-steps-0" -> "grpc", "agent-steps".
_UNNAMED = re.compile(r"Thread-\d+ \((?P<target>.+)\)")
_NUMBERED = re.compile(r"[-_]\d+$")


def thread_kind(name: str) -> str:
    """The label a thread's CPU is counted under."""
    unnamed = _UNNAMED.fullmatch(name)
    if unnamed:
        return unnamed.group("target")
    return _NUMBERED.sub("", name) or name


def thread_cpu_seconds(native_id: int) -> float | None:
    """User plus system CPU seconds of one thread of this process, or None
    when it cannot be read (it ended, or there is no `/proc`)."""
    try:
        with open(f"{_TASKS}/{native_id}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # After the command name: state is field 3, utime 14 and stime 15.
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def thread_switches(native_id: int) -> tuple[int, int] | None:
    """How often one thread of this process gave up the CPU, voluntarily
    and not, or None when it cannot be read."""
    counts: dict[bytes, int] = {}
    try:
        with open(f"{_TASKS}/{native_id}/status", "rb") as status:
            for line in status:
                name, _, value = line.partition(b":")
                if name.endswith(b"ctxt_switches"):
                    counts[name] = int(value)
    except (OSError, ValueError):
        return None
    voluntary = counts.get(b"voluntary_ctxt_switches")
    involuntary = counts.get(b"nonvoluntary_ctxt_switches")
    if voluntary is None or involuntary is None:
        return None
    return voluntary, involuntary


# A live thread: its native id and kind.
_Key = tuple[int, str]
# What is counted of a thread: CPU seconds, voluntary and involuntary switches.
_Reading = tuple[float, int, int]
_NONE: _Reading = (0.0, 0, 0)


def _add(total: _Reading, more: _Reading) -> _Reading:
    return (total[0] + more[0], total[1] + more[1], total[2] + more[2])


def _read(native_id: int) -> _Reading | None:
    seconds = thread_cpu_seconds(native_id)
    switches = thread_switches(native_id)
    if seconds is None or switches is None:
        return None
    return (seconds, *switches)


class ThreadCpuCollector(Collector):
    """Keeps each thread's last reading so an ended thread's CPU and
    switches stay in its kind's totals."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: dict[_Key, _Reading] = {}
        self._ended: dict[str, _Reading] = {}

    def totals(self) -> dict[str, float]:
        """CPU seconds by thread kind, as served."""
        return {kind: reading[0] for kind, reading in self._readings().items()}

    def _readings(self) -> dict[str, _Reading]:
        current: dict[_Key, _Reading] = {}
        for thread in threading.enumerate():
            native_id = thread.native_id
            reading = _read(native_id) if native_id is not None else None
            if native_id is not None and reading is not None:
                current[(native_id, thread_kind(thread.name))] = reading
        with self._lock:
            for key, reading in self._live.items():
                # Ended, or its id taken by a new thread (which starts lower).
                if current.get(key, (-1.0, 0, 0))[0] < reading[0]:
                    self._ended[key[1]] = _add(self._ended.get(key[1], _NONE), reading)
            self._live = current
            totals = dict(self._ended)
        for (_, kind), reading in current.items():
            totals[kind] = _add(totals.get(kind, _NONE), reading)
        return totals

    def collect(self) -> Iterator[Metric]:
        if not os.path.isdir(_TASKS):
            return
        cpu = CounterMetricFamily(
            "cortex_thread_cpu_seconds",
            "CPU seconds (user and system) this node's process spent in each kind of"
            " thread (threads started by Python; ended ones as last seen).",
            labels=["thread"],
        )
        switches = CounterMetricFamily(
            "cortex_thread_context_switches",
            "Times threads of each kind gave up the CPU: voluntary (waiting for a lock,"
            " the GIL, a queue or I/O) or involuntary (preempted).",
            labels=["thread", "switch"],
        )
        for kind, (seconds, voluntary, involuntary) in sorted(self._readings().items()):
            cpu.add_metric([kind], seconds)
            switches.add_metric([kind, "voluntary"], voluntary)
            switches.add_metric([kind, "involuntary"], involuntary)
        yield cpu
        yield switches
