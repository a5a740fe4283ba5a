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
its time slice ends.

`cortex node start` switches before it starts any thread (a thread starts
under its creator's policy), and only from the default policy: a node
started under another (`chrt --idle`, a real-time one) keeps it, and
`sched_batch: false` keeps the default. Tasks run under the policy the node
was started with: an attempt's thread switches back before its executor
runs (`for_tasks`), so the processes it starts inherit that one."""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)

# Whether this process left the default policy for SCHED_BATCH.
_switched = False


def use_batch_policy() -> bool:
    """Puts the calling thread, and every thread it starts from now on,
    under SCHED_BATCH when it runs under the default policy; whether it did."""
    global _switched
    batch = getattr(os, "SCHED_BATCH", None)
    if batch is None:
        return False
    try:
        if os.sched_getscheduler(0) != os.SCHED_OTHER:
            return False
        os.sched_setscheduler(0, batch, os.sched_param(0))
    except OSError as err:
        log.info("keeping the default CPU scheduling policy: %s", err)
        return False
    _switched = True
    return True


def for_tasks() -> None:
    """Puts the calling thread back under the default policy when this
    process left it, so the processes the thread starts for a task run
    under the policy the node was started with."""
    if not _switched:
        return
    try:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    except OSError as err:
        log.warning("an attempt's thread stays under SCHED_BATCH: %s", err)
