"""`cortex.cpu_policy.batch_policy`: SCHED_BATCH for the calling thread and
the threads it starts within the block, only from the default policy, and
the default back at the end, an error or not. Each case runs on a thread of
its own, so the test process keeps its policy."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import pytest

from cortex import cpu_policy

pytestmark = pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="Linux scheduling policies")


def _on_a_thread(starting: int, body: Callable[[], Any]) -> Any:
    """`body`'s result on a new thread started under the `starting` policy."""
    out: dict[str, Any] = {}

    def run() -> None:
        os.sched_setscheduler(0, starting, os.sched_param(0))
        try:
            out["result"] = body()
        except BaseException as err:  # handed to the test's thread
            out["error"] = err

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if "error" in out:
        raise out["error"]
    return out["result"]


def _policy_of_a_thread_started_now() -> int:
    seen: list[int] = []
    child = threading.Thread(target=lambda: seen.append(os.sched_getscheduler(0)))
    child.start()
    child.join()
    return seen[0]


def test_the_block_and_the_threads_it_starts_run_batch_then_the_default_is_back() -> None:
    def body() -> tuple[bool, int, int, int]:
        with cpu_policy.batch_policy() as switched:
            inside = os.sched_getscheduler(0)
            started = _policy_of_a_thread_started_now()
        return switched, inside, started, os.sched_getscheduler(0)

    assert _on_a_thread(os.SCHED_OTHER, body) == (
        True, os.SCHED_BATCH, os.SCHED_BATCH, os.SCHED_OTHER,
    )  # fmt: skip


def test_an_error_in_the_block_still_gives_the_default_back() -> None:
    def body() -> int:
        with pytest.raises(RuntimeError), cpu_policy.batch_policy():
            raise RuntimeError("the node did not start")
        return os.sched_getscheduler(0)

    assert _on_a_thread(os.SCHED_OTHER, body) == os.SCHED_OTHER


@pytest.mark.parametrize(("starting", "enabled"), [(os.SCHED_IDLE, True), (os.SCHED_OTHER, False)])
def test_another_policy_or_switched_off_is_kept(starting: int, enabled: bool) -> None:
    def body() -> tuple[bool, int, int]:
        with cpu_policy.batch_policy(enabled) as switched:
            inside = os.sched_getscheduler(0)
        return switched, inside, os.sched_getscheduler(0)

    assert _on_a_thread(starting, body) == (False, starting, starting)


@pytest.mark.parametrize(
    ("starting", "for_tasks"),
    [(os.SCHED_OTHER, os.SCHED_OTHER), (os.SCHED_BATCH, os.SCHED_BATCH)],
)
def test_an_attempts_thread_gets_the_policy_the_node_started_under(
    starting: int, for_tasks: int
) -> None:
    """Switched from the default, an attempt's thread goes back to it; a
    node started under SCHED_BATCH by its operator (not switched) keeps it."""

    def body() -> int:
        seen: list[int] = []

        def attempt() -> None:
            cpu_policy.for_tasks()
            seen.append(os.sched_getscheduler(0))

        with cpu_policy.batch_policy():
            worker = threading.Thread(target=attempt)
            worker.start()
            worker.join()
        return seen[0]

    assert _on_a_thread(starting, body) == for_tasks
