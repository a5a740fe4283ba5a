"""The threads attempts run on (`cortex.agent.launcher.Workers`): no job
ever waits for a thread, however many run at once, and a thread idle after
one job takes the next instead of a new thread starting."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

from cortex.agent.launcher import Workers
from tests.cluster import wait_until


def live_threads(name: str) -> int:
    return sum(1 for thread in threading.enumerate() if thread.name == name)


def test_jobs_at_once_each_get_a_thread_of_their_own() -> None:
    workers = Workers("test-attempt-a", idle_s=0.2)
    release = threading.Event()
    running = threading.Semaphore(0)

    def job() -> None:
        running.release()
        release.wait(10)

    for _ in range(20):
        workers.run(job)
    # All twenty run together: none waits for another to end.
    for _ in range(20):
        assert running.acquire(timeout=10)
    assert live_threads("test-attempt-a") == 20
    release.set()
    wait_until(lambda: live_threads("test-attempt-a") == 0, 10, 0.02, "idle threads to end")


def test_one_job_after_another_reuses_one_thread() -> None:
    workers = Workers("test-attempt-b", idle_s=10)
    threads: list[int] = []
    for _ in range(50):
        done = threading.Event()

        def job(done: threading.Event = done) -> None:
            threads.append(threading.get_ident())
            done.set()

        workers.run(job)
        assert done.wait(10)
        # The thread counts itself idle just after its job: wait for that.
        wait_until(lambda: workers._idle == 1, 10, 0.001, "the thread to wait for a job")
    assert len(set(threads)) == 1
    assert live_threads("test-attempt-b") == 1


class TimesOutAsAJobArrives:
    """The job queue of a thread whose idle wait times out at the moment a
    job is handed to it."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._arrived = threading.Event()

    def put(self, job: Callable[[], None]) -> None:
        self._jobs.put(job)
        self._arrived.set()

    def get(self, timeout: float) -> Callable[[], None]:
        self._arrived.wait(10)
        raise queue.Empty

    def get_nowait(self) -> Callable[[], None]:
        return self._jobs.get_nowait()


def test_a_job_handed_to_a_thread_as_its_idle_time_ends_still_runs() -> None:
    workers = Workers("test-attempt-c", idle_s=10)
    workers._jobs = TimesOutAsAJobArrives()  # type: ignore[assignment]
    first, second = threading.Event(), threading.Event()
    workers.run(first.set)
    assert first.wait(10)
    wait_until(lambda: workers._idle == 1, 10, 0.001, "the thread to wait for a job")
    workers.run(second.set)
    assert second.wait(10), "the job was lost"
    wait_until(lambda: live_threads("test-attempt-c") == 0, 10, 0.02, "the thread to end")
