"""The kernel's scheduling policy for a node's own threads (Linux).

A node's threads hand work to one another all the time: a gRPC thread to
the proposer, the Raft thread to the request waiting for its entry, the
agent to an attempt's thread. Each hand-off wakes a thread, and under the
default policy (SCHED_OTHER) a woken thread may preempt the one running on
its CPU, often the very thread that woke it, which still holds the
interpreter lock the woken one needs first: the woken thread blocks at once
and the waker waits to be switched back in. SCHED_BATCH, the kernel's
policy for non-interactive work, gives a thread the same share of the CPU
but no preemption when it wakes, so the waker runs on until it blocks or
its time slice ends. With 3 nodes and 32 clients on 2 CPUs
(`scripts/bench_core.py --tasks 3000 --concurrency 32`, runs taken in turns
with `--sched-batch` and without), a task cost 6-7 involuntary context
switches instead of 14 and the cluster made a median 7% more tasks a
second (13 of 18 pairs); one client (`--concurrency 1`) 6% more, its
submit-to-running p50 2-3 ms instead of 3; the batch (`--mode batch`)
nothing measurable.

But a thread that does not preempt on waking does not preempt other
processes either: with four CPU-bound processes beside the cluster (under
either policy), one client's tasks started after 10-12 ms (p50; p99 30-41)
instead of 3-5 (p99 12-21), and half as many a second. A node whose
machine runs its tasks, or anything else busy, answers late. So it is
switched on only by `sched_batch: true` (`--sched-batch`), for machines
where nothing else keeps the CPUs busy, such as voters kept from tasks
(`cortex node cordon`).

`cortex node start` switches before it starts any thread (a thread starts
under its creator's policy), for as long as the node runs, and only from
the default policy: a node started under another (`chrt --idle`, a
real-time one) keeps it. Tasks run under the policy the node was started
with: an attempt's thread switches back before its executor runs
(`for_tasks`), so the processes it starts inherit that one."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)

# Whether this process left the default policy for SCHED_BATCH.
_switched = False


@contextmanager
def batch_policy(enabled: bool = True) -> Iterator[bool]:
    """Within the block, the calling thread and every thread it starts run
    under SCHED_BATCH, when `enabled` and the thread runs under the default
    policy; the calling thread gets the default back at the end (a node run
    in-process leaves its caller as it was). Gives whether it switched."""
    global _switched
    switched = enabled and _switch(getattr(os, "SCHED_BATCH", None))
    _switched = _switched or switched
    try:
        yield switched
    finally:
        if switched:
            _switched = False
            _switch(os.SCHED_OTHER)


def _switch(policy: int | None) -> bool:
    """Puts the calling thread under `policy`; whether it did. Another
    policy than the default is taken only from the default: one the
    operator chose is kept."""
    if policy is None:
        return False
    try:
        if policy != os.SCHED_OTHER and os.sched_getscheduler(0) != os.SCHED_OTHER:
            return False
        os.sched_setscheduler(0, policy, os.sched_param(0))
    except OSError as err:
        log.info("keeping this thread's CPU scheduling policy: %s", err)
        return False
    return True


def for_tasks() -> None:
    """Puts the calling thread back under the default policy when this
    process left it, so the processes the thread starts for a task run
    under the policy the node was started with."""
    if _switched and not _switch(os.SCHED_OTHER):
        log.warning("an attempt's thread stays under SCHED_BATCH")
