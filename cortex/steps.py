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

import threading
import time
from collections.abc import Generator
from concurrent.futures import Future, InvalidStateError
from concurrent.futures import wait as futures_wait
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

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
    set, a pending wait ends and `Stopped` is thrown into the step."""
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


def _wait_signal(wait: WaitSignal, stop: threading.Event) -> bool:
    deadline = time.monotonic() + max(wait.seconds, 0.0)
    while not stop.is_set():
        if wait.signal.wait(min(max(deadline - time.monotonic(), 0.0), 0.5)):
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
    """One future of every result in order; fails with the first failure."""
    combined: Future[list[T]] = Future()
    if not futures:
        combined.set_result([])
        return combined
    remaining = [len(futures)]
    lock = threading.Lock()

    def one_done(_: Future[T]) -> None:
        with lock:
            remaining[0] -= 1
            finished = remaining[0] == 0
        if not finished or combined.done():
            return
        try:
            for future in futures:
                error = future.exception()
                if error is not None:
                    combined.set_exception(error)
                    return
            combined.set_result([future.result() for future in futures])
        except InvalidStateError:
            pass  # settled meanwhile by whoever holds it (a deadline)

    for future in futures:
        future.add_done_callback(one_done)
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
