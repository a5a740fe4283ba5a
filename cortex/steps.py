"""Long-running node logic written once and driven two ways.

A node's loops (the leader loops, the agent, heartbeats, registration) are
written as *steps*: generators that yield what they wait for and receive its
outcome. In a real node `drive` runs a step on a thread and really waits; the
deterministic simulator (`cortex.sim`) resumes the same generators from its
event loop, in simulated time. What a step may yield:

- `Sleep(seconds)`: resume after that long (or at once when the driver stops);
- a `concurrent.futures.Future`: resume with its result, or with its
  exception thrown into the step;
- `WaitSignal(signal, seconds)`: resume when the signal is set or the time has
  passed, with whether it was set (the signal is cleared).

Time comes from a `Clock`, never from `time` directly, so the simulator can
give each node its own."""

from __future__ import annotations

import functools
import heapq
import itertools
import logging
import queue
import threading
import time
from collections.abc import Generator
from concurrent.futures import Future, InvalidStateError
from concurrent.futures import wait as futures_wait
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

Step = Generator[Any, Any, T]


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds, for measuring intervals."""
        ...

    def time(self) -> float:
        """Seconds since the epoch (this node's wall clock)."""
        ...


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        return time.time()


SYSTEM_CLOCK = SystemClock()


def wall_ms(clock: Clock) -> int:
    return int(clock.time() * 1000)


class Signal:
    """A wake-up flag: set from any thread (or a state listener), consumed by
    the one step that waits on it."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        # Setting a set event changes nothing but still takes its lock and
        # notifies: apply sets signals after every batch, on the Raft thread.
        if not self._event.is_set():
            self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    def clear(self) -> None:
        self._event.clear()

    def wait(self, seconds: float) -> bool:
        """Blocks (real driver only) until set or `seconds` passed."""
        woken = self._event.wait(seconds)
        self._event.clear()
        return woken


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class WaitSignal:
    signal: Signal
    seconds: float


class Stopped(Exception):
    """Thrown into a step when its driver stops while it waits."""


def drive(step: Step[T], stop: threading.Event | None = None) -> T:
    """Runs `step` on this thread to its end, waiting for real. When `stop` is
    set, a pending wait ends and `Stopped` is thrown into the step (a wait
    for a signal at once if its owner sets the signal too, as they all do,
    else within `SIGNAL_STOP_CHECK_S`)."""
    stop = stop or threading.Event()
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            wait = step.send(value) if error is None else step.throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        value, error = None, None
        if stop.is_set():
            error = Stopped()
        elif isinstance(wait, Sleep):
            if stop.wait(max(wait.seconds, 0.0)):
                error = Stopped()
        elif isinstance(wait, WaitSignal):
            value = _wait_signal(wait, stop)
        elif isinstance(wait, Future):
            value, error = _wait_future(wait, stop)
        else:
            error = TypeError(f"a step yielded {type(wait).__name__}, not something to wait for")


# How often a real driver waiting for a signal looks at its stop event. The
# steps that wait for signals set them when stopped (every loop's `stop`
# does), so this only bounds a stop that did not: looking twice a second
# woke every idle loop's thread twice a second.
SIGNAL_STOP_CHECK_S = 5.0


def _wait_signal(wait: WaitSignal, stop: threading.Event) -> bool:
    deadline = time.monotonic() + max(wait.seconds, 0.0)
    while not stop.is_set():
        left = max(deadline - time.monotonic(), 0.0)
        if wait.signal.wait(min(left, SIGNAL_STOP_CHECK_S)):
            return True
        if time.monotonic() >= deadline:
            return False
    return False


def _wait_future(future: Future[Any], stop: threading.Event) -> tuple[Any, BaseException | None]:
    while not futures_wait([future], timeout=0.5).done:
        if stop.is_set():
            return None, Stopped()
    try:
        return future.result(), None
    except BaseException as err:
        return None, err


def gather(futures: list[Future[T]]) -> Future[list[T]]:
    """One future of every result in order; fails with the first failure.

    The futures' callbacks hold their outcomes, not the futures: a callback
    that held the list of futures would make a reference cycle of each one
    (future -> its callback -> the list -> future), freed only by the
    collector's rare full passes, so every batch of proposals would
    outlive its use by minutes."""
    combined: Future[list[T]] = Future()
    if not futures:
        combined.set_result([])
        return combined
    outcomes: list[tuple[Any, BaseException | None]] = [(None, None)] * len(futures)
    remaining = [len(futures)]
    lock = threading.Lock()

    def one_done(position: int, done: Future[T]) -> None:
        outcome = _outcome(done)
        with lock:
            outcomes[position] = outcome
            remaining[0] -= 1
            finished = remaining[0] == 0
        if not finished or combined.done():
            return
        try:
            for _, error in outcomes:
                if error is not None:
                    combined.set_exception(error)
                    return
            combined.set_result([value for value, _ in outcomes])
        except InvalidStateError:
            pass  # settled meanwhile by whoever holds it (a deadline)

    for position, future in enumerate(futures):
        future.add_done_callback(functools.partial(one_done, position))
    return combined


def completed(value: T) -> Future[T]:
    future: Future[T] = Future()
    future.set_result(value)
    return future


def start_thread(name: str, step: Step[Any], stop: threading.Event) -> threading.Thread:
    """Drives `step` on a new daemon thread until it ends or `stop` is set
    (ending by `stop` is not an error)."""

    def run() -> None:
        try:
            drive(step, stop)
        except Stopped:
            pass

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread


def _outcome(future: Future[Any]) -> tuple[Any, BaseException | None]:
    try:
        return future.result(), None
    except BaseException as err:
        return None, err


class _Parked:
    """A step waiting in a `StepRunner`; resumed once, by whichever comes
    first: what it waits for, or the runner stopping."""

    __slots__ = ("step", "resumed")

    def __init__(self, step: Step[Any]) -> None:
        self.step = step
        self.resumed = False


class StepRunner:
    """Drives many steps on a few shared threads instead of a thread each: a
    step runs on one of them until it yields, and is queued to run again once
    what it waited for is done. For steps that wait only on futures and
    sleeps, and never block between their yields (an agent's attempts, which
    wait on their launcher and their proposals): a thousand of them cost no
    thread each, and starting one costs no thread start.

    After `stop`, a waiting step has `Stopped` thrown into it at once, and
    one that yields again gets `Stopped` again, as `drive` does."""

    def __init__(self, name: str, threads: int = 2) -> None:
        self._name = name
        self._threads = threads
        self._ready: queue.SimpleQueue[tuple[Step[Any], Any, BaseException | None] | None] = (
            queue.SimpleQueue()
        )
        self._lock = threading.Lock()
        self._timers_changed = threading.Condition(self._lock)
        self._waiting: set[_Parked] = set()
        self._timers: list[tuple[float, int, _Parked]] = []
        self._order = itertools.count()
        self._started = False
        self._stopped = False

    def spawn(self, step: Step[Any]) -> None:
        """Runs `step` from its start on one of the runner's threads."""
        with self._lock:
            if self._stopped:
                step.close()  # never started, so it has nothing to clean up
                return
            self._start_threads_locked()
            self._ready.put((step, None, None))

    def start_here(self, step: Step[Any]) -> None:
        """Runs `step` from its start on the calling thread until it first
        waits, and on the runner's threads from there. For a caller that
        would hand the step over and go back to waiting: the hand-over
        woke one of the runner's threads for what the caller can do itself
        (and the step waited for that thread to be scheduled)."""
        with self._lock:
            if self._stopped:
                step.close()
                return
            self._start_threads_locked()
        self._advance(step, None, None)

    def _start_threads_locked(self) -> None:
        if self._started:
            return
        self._started = True
        for number in range(self._threads):
            name = f"{self._name}-{number}"
            threading.Thread(target=self._work, name=name, daemon=True).start()
        timers = f"{self._name}-timers"
        threading.Thread(target=self._run_timers, name=timers, daemon=True).start()

    def stop(self) -> None:
        """Throws `Stopped` into every waiting step; the threads end once
        the steps already queued have run. Queued under the lock, as every
        step is, so none is queued behind the threads' ends."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            for parked in list(self._waiting):
                self._resume_locked(parked, None, Stopped())
            self._timers.clear()
            self._timers_changed.notify_all()
            if self._started:
                for _ in range(self._threads):
                    self._ready.put(None)

    def _work(self) -> None:
        while True:
            item = self._ready.get()
            if item is None:
                return
            self._advance(*item)

    def _advance(self, step: Step[Any], value: Any, error: BaseException | None) -> None:
        """Runs `step` until it waits for something not yet done."""
        while True:
            try:
                wait = step.send(value) if error is None else step.throw(error)
            except (StopIteration, Stopped):
                return
            except BaseException:
                log.exception("step %s failed", getattr(step, "__name__", "?"))
                return
            value, error = None, None
            if self._stopped:
                error = Stopped()
            elif isinstance(wait, Future):
                if wait.done():
                    value, error = _outcome(wait)
                    continue
                parked = self._park(step)
                if parked is None:
                    error = Stopped()
                    continue
                wait.add_done_callback(functools.partial(self._resume_with, parked))
                return
            elif isinstance(wait, Sleep):
                if self._park(step, max(wait.seconds, 0.0)) is None:
                    error = Stopped()
                    continue
                return
            else:
                error = TypeError(
                    f"a step run by a StepRunner yielded {type(wait).__name__},"
                    " not a future or a sleep"
                )

    def _park(self, step: Step[Any], sleep_s: float | None = None) -> _Parked | None:
        """Keeps `step` until it is resumed; None when the runner stopped
        meanwhile (the caller throws `Stopped` into the step at once)."""
        with self._lock:
            if self._stopped:
                return None
            parked = _Parked(step)
            self._waiting.add(parked)
            if sleep_s is not None:
                item = (time.monotonic() + sleep_s, next(self._order), parked)
                heapq.heappush(self._timers, item)
                if self._timers[0] is item:
                    self._timers_changed.notify()
            return parked

    def _resume_with(self, parked: _Parked, done: Future[Any]) -> None:
        value, error = _outcome(done)
        with self._lock:
            self._resume_locked(parked, value, error)

    def _resume_locked(self, parked: _Parked, value: Any, error: BaseException | None) -> None:
        if parked.resumed:
            return
        parked.resumed = True
        self._waiting.discard(parked)
        self._ready.put((parked.step, value, error))

    def _run_timers(self) -> None:
        with self._lock:
            while not self._stopped:
                if not self._timers:
                    self._timers_changed.wait()
                    continue
                due, _, parked = self._timers[0]
                left = due - time.monotonic()
                if left > 0:
                    self._timers_changed.wait(left)
                    continue
                heapq.heappop(self._timers)
                self._resume_locked(parked, None, None)
