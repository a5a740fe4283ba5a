"""The real driver of steps (`cortex.steps.drive`): what a step yields is
waited for on this thread and its outcome sent (or thrown) back in; a stop
ends any wait by throwing `Stopped` into the step. And `gather`, one future
for many, as the node's loops wait for their proposals."""

from __future__ import annotations

import gc
import threading
import time
import weakref
from concurrent.futures import CancelledError, Future
from typing import Any

import pytest

from cortex.steps import (
    SYSTEM_CLOCK,
    Signal,
    Sleep,
    Step,
    StepRunner,
    Stopped,
    WaitSignal,
    completed,
    drive,
    gather,
    start_thread,
    wall_ms,
)
from tests.cluster import wait_until
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


class CountingSignal(Signal):
    def __init__(self) -> None:
        super().__init__()
        self.waits = 0

    def wait(self, seconds: float) -> bool:
        self.waits += 1
        return super().wait(seconds)


def test_a_wait_for_a_signal_sleeps_through_to_its_end() -> None:
    """A thread waiting 1.2 s for a signal that never comes wakes once, at
    the end, not every half second to look at its stop event."""
    signal = CountingSignal()

    def step() -> Step[bool]:
        return (yield WaitSignal(signal, 1.2))

    assert drive(step(), threading.Event()) is False
    assert signal.waits == 1


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


# ------------------------------------------------------------------ StepRunner


@pytest.fixture
def runner() -> Any:
    runner = StepRunner("test-steps")
    yield runner
    runner.stop()


def test_a_runner_sends_results_and_throws_exceptions_in_as_drive_does(runner: StepRunner) -> None:
    first: Future[str] = Future()
    second: Future[str] = Future()
    seen: list[Any] = []
    done = threading.Event()

    def step() -> Step[None]:
        seen.append((yield first))
        try:
            yield second
        except KeyError as err:
            seen.append(err.args)
        seen.append((yield completed("at once")))
        yield Sleep(0.01)
        seen.append("slept")
        done.set()

    runner.spawn(step())
    later(0.02, lambda: first.set_result("one"))
    later(0.04, lambda: second.set_exception(KeyError("two")))
    assert done.wait(10)
    assert seen == ["one", ("two",), "at once", "slept"]


def test_a_thousand_waiting_steps_share_the_runners_few_threads(runner: StepRunner) -> None:
    before = threading.active_count()
    gate: Future[int] = Future()
    results: list[int] = []
    lock = threading.Lock()

    def step(number: int) -> Step[None]:
        value = yield gate
        with lock:
            results.append(value + number)

    for number in range(1000):
        runner.spawn(step(number))
    # Two workers and the timer thread, however many steps wait.
    assert threading.active_count() <= before + 3
    gate.set_result(1)
    wait_until(lambda: len(results) == 1000, 10, 0.01, "every step resumed")
    assert sorted(results) == list(range(1, 1001))


@pytest.mark.parametrize("wait", [Sleep(60), Future()], ids=["sleep", "future"])
def test_stopping_a_runner_throws_stopped_into_every_waiting_step(wait: Any) -> None:
    runner = StepRunner("test-steps")
    cleaned_up: list[int] = []
    again: list[str] = []

    def step(number: int) -> Step[None]:
        try:
            yield wait
        except Stopped:
            try:
                yield Sleep(60)  # a step that waits again is stopped again
            except Stopped:
                again.append("stopped again")
            raise
        finally:
            cleaned_up.append(number)

    for number in range(5):
        runner.spawn(step(number))
    started = time.monotonic()
    wait_until(lambda: len(runner._waiting) == 5, 10, 0.01, "every step waiting")
    runner.stop()
    wait_until(lambda: len(cleaned_up) == 5, 10, 0.01, "every step stopped")
    assert sorted(cleaned_up) == list(range(5)) and again == ["stopped again"] * 5
    assert time.monotonic() - started < 30
    if isinstance(wait, Future):
        wait.set_result("too late")  # resumes nothing: each step ended once


@pytest.mark.parametrize("start", ["spawn", "start_here"])
def test_a_step_spawned_on_a_stopped_runner_never_runs(start: str) -> None:
    runner = StepRunner("test-stopped-steps")
    ran: list[str] = []

    def step() -> Step[None]:
        ran.append("ran")
        yield Sleep(0)

    runner.stop()
    getattr(runner, start)(step())
    assert ran == []
    assert not any(t.name.startswith("test-stopped-steps") for t in threading.enumerate())


def test_a_step_started_here_runs_here_until_it_first_waits(runner: StepRunner) -> None:
    """`start_here`: the calling thread runs the step up to its first wait
    (a future already done does not count), a runner thread the rest."""
    pending: Future[str] = Future()
    threads: list[str] = []
    done = threading.Event()

    def step() -> Step[None]:
        threads.append(threading.current_thread().name)
        yield completed("done already")
        threads.append(threading.current_thread().name)
        yield pending
        threads.append(threading.current_thread().name)
        done.set()

    caller = threading.current_thread().name
    runner.start_here(step())
    assert threads == [caller, caller]  # before start_here returned
    pending.set_result("later")
    assert done.wait(10)
    assert threads[2].startswith("test-steps-")


def test_a_runner_throws_a_type_error_for_what_it_cannot_wait_for(runner: StepRunner) -> None:
    errors: list[str] = []
    done = threading.Event()

    def step() -> Step[None]:
        try:
            yield WaitSignal(Signal(), 60)
        except TypeError as err:
            errors.append(str(err))
        done.set()

    runner.spawn(step())
    assert done.wait(10)
    assert errors == ["a step run by a StepRunner yielded WaitSignal, not a future or a sleep"]


def test_a_step_that_raises_is_logged_and_the_runner_goes_on(
    runner: StepRunner, caplog: pytest.LogCaptureFixture
) -> None:
    done = threading.Event()

    def failing() -> Step[None]:
        yield completed(None)
        raise RuntimeError("step broke")

    def fine() -> Step[None]:
        yield Sleep(0)
        done.set()

    runner.spawn(failing())
    runner.spawn(fine())
    assert done.wait(10)
    wait_until(lambda: "step broke" in caplog.text, 10, 0.01, "the failure logged")


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


def test_gather_frees_each_future_without_the_cycle_collector() -> None:
    """A settled future is freed by reference counting alone once nothing
    else holds it, though the combined one lives on: its callback does not
    hold it (a cycle through the list of futures kept every proposal until
    a full collection)."""
    gc.disable()
    try:
        inner: Future[int] = Future()
        combined = gather([inner, completed(2)])
        inner.set_result(1)
        freed = weakref.ref(inner)
        del inner
        assert freed() is None
        assert combined.result(0) == [1, 2]
    finally:
        gc.enable()


def test_gather_fails_with_the_cancellation_of_a_cancelled_future() -> None:
    inner: Future[int] = Future()
    combined = gather([inner])
    inner.cancel()
    with pytest.raises(CancelledError):
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
