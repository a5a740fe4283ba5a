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
missing. Several nodes sharing a process (tests) share its threads."""

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


# A live thread: its native id and kind.
_Key = tuple[int, str]


class ThreadCpuCollector(Collector):
    """Keeps each thread's last reading so an ended thread's CPU stays in
    its kind's total."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: dict[_Key, float] = {}
        self._ended: dict[str, float] = {}

    def totals(self) -> dict[str, float]:
        """CPU seconds by thread kind, as served."""
        current: dict[_Key, float] = {}
        for thread in threading.enumerate():
            native_id = thread.native_id
            seconds = thread_cpu_seconds(native_id) if native_id is not None else None
            if native_id is not None and seconds is not None:
                current[(native_id, thread_kind(thread.name))] = seconds
        with self._lock:
            for key, seconds in self._live.items():
                # Ended, or its id taken by a new thread (which starts lower).
                if current.get(key, -1.0) < seconds:
                    self._ended[key[1]] = self._ended.get(key[1], 0.0) + seconds
            self._live = current
            totals = dict(self._ended)
        for (_, kind), seconds in current.items():
            totals[kind] = totals.get(kind, 0.0) + seconds
        return totals

    def collect(self) -> Iterator[Metric]:
        if not os.path.isdir(_TASKS):
            return
        family = CounterMetricFamily(
            "cortex_thread_cpu_seconds",
            "CPU seconds (user and system) this node's process spent in each kind of"
            " thread (threads started by Python; ended ones as last seen).",
            labels=["thread"],
        )
        for kind, seconds in sorted(self.totals().items()):
            family.add_metric([kind], seconds)
        yield family
