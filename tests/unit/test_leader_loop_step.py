"""`LeaderLoop.main()` driven by hand: it waits for a wake-up or the
interval, runs rounds only as the leader and while they say more is
waiting, hands back control while a round waits for its proposals, and
survives a failed round; a stop ends it."""

from __future__ import annotations

import logging
from concurrent.futures import Future
from typing import Any

import pytest

from cortex.errors import Unavailable
from cortex.raft.leader_loop import FOLLOWER_WAIT_S, LeaderContext, LeaderLoop
from cortex.steps import Step, Stopped, WaitSignal
from tests.steps_by_hand import FakeClock, Stepper


class CountingLoop(LeaderLoop):
    """Each round waits for one future the test completes; `more` says how
    many rounds report more work after it."""

    def __init__(self, leading: list[bool], more: int = 0) -> None:
        context = LeaderContext("n1", lambda: leading[0], None, None, FakeClock())  # type: ignore[arg-type]
        super().__init__("counting", context, interval_s=0.25)
        self.more = more
        self.rounds = 0
        self.follower_calls = 0
        self.pending: list[Future[Any]] = []
        self.fail_with: BaseException | None = None

    def on_follower(self) -> None:
        self.follower_calls += 1

    def work(self) -> Step[bool]:
        self.rounds += 1
        if self.fail_with is not None:
            raise self.fail_with
        future: Future[Any] = Future()
        self.pending.append(future)
        yield future
        if self.more:
            self.more -= 1
            return True
        return False


def test_a_follower_only_waits_and_calls_on_follower() -> None:
    """A follower waits long (its role changing wakes it); the leader its
    interval."""
    leading = [False]
    loop = CountingLoop(leading)
    stepper = Stepper(loop.main())
    assert stepper.waiting == WaitSignal(loop._wake, FOLLOWER_WAIT_S)
    stepper.resume(False)
    stepper.resume(True)
    assert (loop.follower_calls, loop.rounds) == (2, 0)
    assert stepper.waiting == WaitSignal(loop._wake, FOLLOWER_WAIT_S)
    leading[0] = True
    stepper.resume(True)
    loop.pending[0].set_result(None)
    stepper.settle()
    assert stepper.waiting == WaitSignal(loop._wake, 0.25)


def test_a_leader_deposed_and_leading_again_before_it_woke_forgets_first() -> None:
    """Lost and won again before the loop woke: `on_follower` runs once,
    then the new leader's round."""
    leading = [True]
    loop = CountingLoop(leading)
    stepper = Stepper(loop.main())
    loop.role_changed(False)
    loop.role_changed(True)
    stepper.resume(True)
    assert (loop.follower_calls, loop.rounds) == (1, 1)
    loop.pending[0].set_result(None)
    stepper.settle()
    stepper.resume(True)
    assert (loop.follower_calls, loop.rounds) == (1, 2)


def test_a_change_of_role_wakes_the_loop_whatever_the_role() -> None:
    """`wake` rouses only the leader's loop; `role_changed` either."""
    leading = [False]
    loop = CountingLoop(leading)
    loop.wake()
    assert not loop._wake.is_set()
    loop.role_changed(False)
    assert loop._wake.is_set()
    loop._wake.clear()
    leading[0] = True
    loop.role_changed(True)
    assert loop._wake.is_set()


def test_the_leader_runs_rounds_back_to_back_while_more_is_waiting() -> None:
    loop = CountingLoop(leading=[True], more=2)
    stepper = Stepper(loop.main())
    stepper.resume(True)
    for number in range(3):
        # Suspended on the round's future: nothing blocks.
        assert stepper.waiting is loop.pending[number]
        loop.pending[number].set_result(None)
        stepper.settle()
    assert loop.rounds == 3
    assert isinstance(stepper.waiting, WaitSignal)


def test_losing_leadership_ends_the_rounds() -> None:
    leading = [True]
    loop = CountingLoop(leading, more=5)
    stepper = Stepper(loop.main())
    stepper.resume(True)
    leading[0] = False
    loop.pending[0].set_result(None)
    stepper.settle()
    assert loop.rounds == 1 and isinstance(stepper.waiting, WaitSignal)


def test_a_failed_round_is_logged_and_the_loop_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    loop = CountingLoop(leading=[True])
    stepper = Stepper(loop.main())
    stepper.resume(True)
    with caplog.at_level(logging.WARNING):
        stepper.throw(Unavailable("no quorum"))  # the proposal failed
    assert "counting round did not complete: no quorum" in caplog.text
    loop.fail_with = RuntimeError("a bug")
    with caplog.at_level(logging.ERROR):
        stepper.resume(True)
    assert "counting failed" in caplog.text
    assert not stepper.done and isinstance(stepper.waiting, WaitSignal)


def test_stop_ends_the_loop_and_stopped_passes_through() -> None:
    loop = CountingLoop(leading=[True])
    stepper = Stepper(loop.main())
    loop.stop()
    stepper.resume(True)
    assert stepper.done

    other = CountingLoop(leading=[True])
    running = Stepper(other.main())
    running.resume(True)  # waiting for its round's proposal
    with pytest.raises(Stopped):
        running.throw(Stopped())


def test_wake_sets_the_signal_the_loop_waits_on_only_on_the_leader() -> None:
    leading = [False]
    loop = CountingLoop(leading=leading)
    stepper = Stepper(loop.main())
    loop.wake()  # a follower's loop only waits for its interval
    assert not stepper.waiting.signal.is_set()
    leading[0] = True
    loop.wake()
    assert stepper.waiting.signal.is_set()
