"""The retention loop driven by hand: its cutoff is the loop's clock minus
the retention period, and it proposes purges back to back (each a future
the step waits on) while old rows remain."""

from __future__ import annotations

from cortex.raft.leader_loop import LeaderContext
from cortex.retention_loop import RetentionLoop
from cortex.state import entries as e
from cortex.steps import WaitSignal, wall_ms
from tests.steps_by_hand import FakeClock, HeldProposer, Stepper
from tests.workflow_sim import WorkflowLog

RETENTION_S = 60.0


def test_purges_follow_the_loops_clock_back_to_back(log: WorkflowLog) -> None:
    for number in range(3):
        task_id = f"t-{number}"
        assert log.one(e.TaskSubmit(task_id, {"type": "noop"}))["ok"]
        log.complete(task_id)
    finished_ms = log.ts
    # Within the retention period by the loop's clock (the real one is
    # decades past it).
    clock = FakeClock(wall_s=finished_ms / 1000 + RETENTION_S - 1)
    proposer = HeldProposer(log)
    loop = RetentionLoop(
        LeaderContext("n1", lambda: True, proposer, log.reader, clock),
        RETENTION_S,
        batch_size=2,
    )
    stepper = Stepper(loop.main())
    stepper.resume(False)
    assert proposer.held == [] and isinstance(stepper.waiting, WaitSignal)

    clock.advance(2)
    stepper.resume(False)
    purges = 0
    while proposer.held:
        (purge,) = proposer.payloads()
        assert purge == e.TasksPurge(wall_ms(clock) - int(RETENTION_S * 1000), 2)
        assert proposer.held[0][0][0].ts == wall_ms(clock)
        assert stepper.waiting is proposer.held[0][1]
        proposer.apply_next()
        stepper.settle()
        purges += 1
        assert purges <= 5
    assert purges >= 2  # three tasks, two per purge
    assert isinstance(stepper.waiting, WaitSignal)
    assert log.reader.counts_by_state().get("completed", 0) == 0
