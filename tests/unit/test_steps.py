"""The real driver of steps (`cortex.steps.drive`): what a step yields is
waited for on this thread and its outcome sent (or thrown) back in; a stop
ends any wait by throwing `Stopped` into the step. And `gather`, one future
for many, as the node's loops wait for their proposals."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from typing import Any

import pytest

from cortex.steps import (
    SYSTEM_CLOCK,
    Signal,
    Sleep,
    Step,
    Stopped,
    WaitSignal,
    completed,
    drive,
    gather,
    start_thread,
    wall_ms,
)
from tests.steps_by_hand import FakeClock


def later(seconds: float, action: Any) -> threading.Timer:
    timer = threading.Timer(seconds, action)
    timer.daemon = True
    timer.start()
    return timer


# ------------------------------------------------------------------ drive


def test_a_step_returns_its_value_after_its_sleeps() -> None:
    def step() -> Step[str]:
        yield Sleep(0.05)
        yield Sleep(0)
        yield Sleep(-1)  # nothing to wait for
        return "slept"

    started = time.monotonic()
    assert drive(step()) == "slept"
    assert time.monotonic() - started >= 0.05


def test_a_future_sends_its_result_in_and_throws_its_exception_in() -> None:
    pending: Future[int] = Future()

    def step() -> Step[tuple[int, int, str]]:
        first = yield completed(1)
        second = yield pending  # completed from another thread while waiting
        try:
            yield _failed(ValueError("no such thing"))
        except ValueError as err:
            return first, second, str(err)
        raise AssertionError("the failure was not thrown in")

    later(0.05, lambda: pending.set_result(2))
    assert drive(step()) == (1, 2, "no such thing")


def test_an_exception_the_step_does_not_catch_ends_drive() -> None:
    def step() -> Step[None]:
        yield _failed(KeyError("gone"))

    with pytest.raises(KeyError, match="gone"):
        drive(step())


def test_something_that_cannot_be_waited_for_is_a_type_error_in_the_step() -> None:
    def step() -> Step[str]:
        try:
            yield 42
        except TypeError as err:
            return str(err)
        return "accepted"

    assert drive(step()) == "a step yielded int, not something to wait for"


def test_a_signal_wakes_the_step_and_is_consumed() -> None:
    signal = Signal()

    def step() -> Step[list[bool]]:
        outcomes = []
        outcomes.append((yield WaitSignal(signal, 10)))  # already set
        outcomes.append((yield WaitSignal(signal, 0.05)))  # consumed: times out
        later(0.05, signal.set)
        outcomes.append((yield WaitSignal(signal, 30)))  # set while waiting
        return outcomes

    signal.set()
    started = time.monotonic()
    assert drive(step()) == [True, False, True]
    assert not signal.is_set()
    assert time.monotonic() - started < 10


@pytest.mark.parametrize(
    "wait",
    [Sleep(60), Future(), WaitSignal(Signal(), 60)],
    ids=["sleep", "future", "signal"],
)
def test_a_stop_ends_any_wait_with_stopped_in_the_step(wait: Any) -> None:
    stop = threading.Event()
    cleaned_up = threading.Event()

    def step() -> Step[None]:
        try:
            while True:  # a signal's wait ends with False; the next yield is refused
                yield wait
        finally:
            cleaned_up.set()

    later(0.05, stop.set)
    started = time.monotonic()
    with pytest.raises(Stopped):
        drive(step(), stop)
    assert cleaned_up.is_set()
    assert time.monotonic() - started < 30


def test_a_step_may_catch_stopped_and_end_on_its_own_terms() -> None:
    stop = threading.Event()
    stop.set()

    def step() -> Step[str]:
        try:
            yield Sleep(60)
        except Stopped:
            return "stopped cleanly"
        return "slept"

    assert drive(step(), stop) == "stopped cleanly"


def test_start_thread_ends_quietly_when_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    uncaught: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: uncaught.append(args.exc_value))
    stop = threading.Event()
    ran = threading.Event()

    def step() -> Step[None]:
        ran.set()
        while True:
            yield Sleep(60)

    thread = start_thread("test-step", step(), stop)
    assert thread.daemon and thread.name == "test-step"
    assert ran.wait(10)
    stop.set()
    thread.join(10)
    assert not thread.is_alive()
    assert uncaught == []


# ------------------------------------------------------------------ gather


def test_gather_gives_every_result_in_order_once_all_are_done() -> None:
    first: Future[str] = Future()
    second: Future[str] = Future()
    combined = gather([first, second, completed("c")])
    second.set_result("b")
    assert not combined.done()
    first.set_result("a")
    assert combined.result(0) == ["a", "b", "c"]
    assert gather([]).result(0) == []


def test_gather_fails_with_the_first_failure_in_order() -> None:
    futures: list[Future[str]] = [Future() for _ in range(3)]
    combined = gather(futures)
    futures[2].set_exception(KeyError("third"))
    futures[1].set_exception(ValueError("second"))
    assert not combined.done()  # the first is still pending
    futures[0].set_result("first")
    with pytest.raises(ValueError, match="second"):
        combined.result(0)


def test_gather_leaves_alone_an_outcome_set_by_whoever_holds_it() -> None:
    """A proposal's deadline may fail the combined future first."""
    inner: Future[int] = Future()
    combined = gather([inner])
    combined.set_exception(TimeoutError("deadline"))
    inner.set_result(1)  # no error from the late callback
    with pytest.raises(TimeoutError):
        combined.result(0)


# ------------------------------------------------------------------ clocks


def test_wall_ms_reads_the_clock_it_is_given() -> None:
    assert wall_ms(FakeClock(wall_s=1.2345)) == 1234
    before = int(time.time() * 1000)
    assert before <= wall_ms(SYSTEM_CLOCK) <= int(time.time() * 1000)


def _failed(error: BaseException) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_exception(error)
    return future
