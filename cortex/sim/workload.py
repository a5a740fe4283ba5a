"""The seeded client workload, sent to any node as its API would propose it:
tasks (priorities, label constraints, retry policies, attempts that fail,
some to the dead-letter queue), workflows (fan-out and fan-in, failing
branches, JavaScript conditions, context updates; large ones in parts),
cancels, drains, cordons, a node's removal, retries from the dead-letter
queue and idempotency keys reused for another spec (refused). Clients
use idempotency keys and retry what failed; what a node acknowledged must
never be lost."""

from __future__ import annotations

import heapq
import json
import random
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from cortex.errors import CortexError
from cortex.raft.group import FAIL_REASON_NAMES
from cortex.sim.executor import CONTEXT_LABEL, FAIL_ATTEMPTS_LABEL
from cortex.sim.invariants import IDEMPOTENCY_KEYS_HOLD
from cortex.state import entries as e
from cortex.state.queries import StateReader
from cortex.workflows.definition import parse_definition
from cortex.workflows.operations import submit_payloads

if TYPE_CHECKING:
    from cortex.sim.harness import Simulation
    from cortex.sim.node import SimNode

# Mean gap between client operations, microseconds.
MEAN_GAP_US = 250_000
RETRY_AFTER_US = 500_000
_OPERATIONS = (
    ("task", 40),
    ("workflow", 10),
    ("cancel", 6),
    ("cancel_workflow", 2),
    ("drain", 2),
    ("cordon", 2),
    ("activate", 5),
    ("retry_dead_letter", 4),
    ("reuse_key", 1),
    ("remove_node", 1),
)
# Concurrency keys tasks may carry: one limited to 2 running, one to 10/s.
SIM_KEYS = ("key-limited", "key-rated")
SIM_SCHEDULE = "sch-sim"
# How long a removed node gets to apply its own removal before the Raft group
# lets it go (as `cortex node remove` does).
CATCH_UP_US = 5_000_000


class Workload:
    def __init__(self, sim: Simulation, rng: random.Random) -> None:
        self._sim = sim
        self._rng = rng
        self._queue: list[tuple[int, int, str, tuple[Any, ...]]] = []
        self._seq = 0
        self._pending: list[Future[Any]] = []
        self.acknowledged: dict[str, str] = {}  # task id -> idempotency key
        self.workflows: dict[str, str] = {}  # workflow id -> idempotency key
        self._numbers = 0
        self._last_attempt_us = -1
        self.submitted = 0
        self.removing: str | None = None  # the one node a run takes out

    # -- scheduling -----------------------------------------------------------------

    def _at(self, at_us: int, kind: str, *args: Any) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (at_us, self._seq, kind, args))

    def schedule(self, until_us: int) -> None:
        total = sum(weight for _, weight in _OPERATIONS)
        at = 0
        self._at(1, "limits")
        self._at(2, "create_schedule")
        while True:
            at += int(self._rng.expovariate(1 / MEAN_GAP_US)) + 1
            if at >= until_us:
                self.stand_down(until_us)
                return
            pick = self._rng.uniform(0, total)
            for kind, weight in _OPERATIONS:
                pick -= weight
                if pick <= 0:
                    self._at(at, kind)
                    break

    def next_at(self) -> int | None:
        return self._queue[0][0] if self._queue else None

    def attempted_after(self, at_us: int) -> bool:
        return self._last_attempt_us > at_us

    def in_flight(self) -> int:
        self._pending = [f for f in self._pending if not f.done()]
        return len(self._pending)

    def stand_down(self, at_us: int) -> None:
        """When clients stop, the operator makes every node schedulable again,
        so nothing waits for ever on a cordon or a drain, and deletes the
        schedule, so no new task comes after."""
        for node_id in sorted(self._sim.nodes):
            self._at(at_us, "activate_node", node_id)
        self._at(at_us, "delete_schedule")

    def _activate_node(self, node_id: str) -> None:
        """Asks until the leader's state has the node schedulable (or gone):
        another node's view may be stale, and an answer may be lost."""
        leader = self._leader()
        if leader is None or leader.reader is None or not self._settled(leader):
            self._retry("activate_node", node_id)
            return
        row = leader.reader.node(node_id, include_removed=True)
        if row is None or row.status in ("active", "offline", "removed"):
            return
        self._propose(e.NodeStatus(node_id, "active", "uncordoned by request"), f"active {node_id}")
        self._retry("activate_node", node_id)

    def _settled(self, leader: SimNode) -> bool:
        """Nothing is left that could still change a node's status: no client
        call in flight, and the leader applied its whole log."""
        group, journal = leader.group, leader.journal
        if self.in_flight() or group is None or journal is None:
            return False
        return group.raftCommitIndex >= journal.last_index and group.raftLastApplied >= (
            journal.last_index
        )

    def run_due(self) -> None:
        now = self._sim.clock.now_us
        while self._queue and self._queue[0][0] <= now:
            _, _, kind, args = heapq.heappop(self._queue)
            getattr(self, f"_{kind}")(*args)

    # -- helpers ----------------------------------------------------------------------

    def _next_number(self) -> int:
        self._numbers += 1
        return self._numbers

    def _node(self) -> SimNode | None:
        live = [n for n in self._sim.nodes.values() if n.running and not n.paused and n.proposer]
        return self._rng.choice(live) if live else None

    def _reader(self) -> StateReader | None:
        node = self._node()
        return node.reader if node is not None else None

    def _propose(
        self,
        payload: e.Payload,
        label: str,
        answered: Callable[[dict[str, Any] | None], None] | None = None,
    ) -> bool:
        """Sends `payload` to a random live node; `answered` gets the applied
        result, or None when the node could not take it or did not answer."""
        node = self._node()
        if node is None or node.proposer is None:
            if answered is not None:
                answered(None)
            return False
        self._sim.clock.current = node.id
        try:
            node.proposer.check_writable()
            entry = e.Entry.create(payload, node.id)
        except CortexError:
            if answered is not None:
                answered(None)
            return False
        finally:
            self._sim.clock.current = None
        future = node.proposer.submit(entry)
        self._pending.append(future)
        self._last_attempt_us = self._sim.clock.now_us
        self._sim.trace.add("propose", node.id, label)

        def done(finished: Future[dict[str, Any]]) -> None:
            try:
                result: dict[str, Any] | None = finished.result()
            except CortexError:
                result = None
            if answered is not None:
                answered(result)

        future.add_done_callback(done)
        return True

    def _retry(self, kind: str, *args: Any) -> None:
        self._at(self._sim.clock.now_us + RETRY_AFTER_US, kind, *args)

    # -- limits and a schedule ------------------------------------------------------

    def _limits(self) -> None:
        """Limits on the keys tasks may carry, and a weight; each asked
        again until applied (setting one again changes nothing)."""
        for payload in (
            e.LimitSet(SIM_KEYS[0], max_running=2),
            e.LimitSet(SIM_KEYS[1], rate_per_min=600, burst=2),
            e.WeightSet("tenant-b", 3),
        ):
            self._until_applied(payload, f"limit {payload}")

    def _until_applied(self, payload: e.Payload, label: str) -> None:
        def answered(result: dict[str, Any] | None) -> None:
            if result is None:
                self._at(self._sim.clock.now_us + RETRY_AFTER_US, "until_applied", payload, label)

        self._propose(payload, label, answered)

    def _create_schedule(self) -> None:
        rng = self._rng
        spec = {"type": "noop", "concurrencyKey": rng.choice([None, SIM_KEYS[0]])}
        create = e.ScheduleCreate(
            SIM_SCHEDULE, "sim", {"every_ms": rng.choice([1000, 2000])}, {"task": spec},
            rng.choice(["skip", "buffer_one", "allow_all", "cancel_previous"]),
            rng.choice([0, 3000, 60_000]),
        )  # fmt: skip
        self._until_applied(create, "create schedule")

    def _delete_schedule(self) -> None:
        def answered(result: dict[str, Any] | None) -> None:
            code = str((result or {}).get("reason", "")).split(":", 1)[0]
            if result is None or (not result.get("ok") and code != "unknown_schedule"):
                self._retry("delete_schedule")

        self._propose(e.ScheduleDelete(SIM_SCHEDULE), "delete schedule", answered)

    # -- tasks --------------------------------------------------------------------------

    def _task(self, key: str | None = None, task_id: str | None = None,
              spec: dict[str, Any] | None = None) -> None:  # fmt: skip
        if key is None or task_id is None or spec is None:
            number = self._next_number()
            key, task_id, spec = f"key-{number}", f"task-{number}", self._task_spec()
            self.submitted += 1

        def answered(result: dict[str, Any] | None) -> None:
            if result is None:
                self._retry("task", key, task_id, spec)
            elif result.get("ok"):
                self.acknowledged[str(result["task_id"])] = str(key)
                self._sim.trace.add("acknowledged", key, result["task_id"])

        self._propose(e.TaskSubmit(task_id, spec, idempotency_key=key), f"submit {key}", answered)

    def _task_spec(self) -> dict[str, Any]:
        rng = self._rng
        retries = rng.choice([0, 1, 2, 3])
        spec: dict[str, Any] = {
            "type": "noop",
            "priority": rng.randint(0, 10),
            "retryPolicy": {"maxRetries": retries, "backoffMs": rng.choice([100, 300, 1000])},
            "labels": {},
        }
        if rng.random() < 0.25:
            spec["constraints"] = {"nodeLabels": [f"zone={rng.choice('ab')}"]}
        key = rng.choice([None, None, *SIM_KEYS])
        if key is not None:
            spec["concurrencyKey"] = key
        spec["fairnessKey"] = rng.choice(["tenant-a", "tenant-b"])
        failures = rng.choice([0, 0, 0, 0, 1, 2, retries + 1])
        if failures:
            spec["labels"][FAIL_ATTEMPTS_LABEL] = str(failures)
        return spec

    def _reuse_key(self) -> None:
        """A client reusing an acknowledged task's idempotency key for a
        different spec: apply must refuse it (the first task stays the only
        one under that key)."""
        if not self.acknowledged:
            return
        task_id = self._rng.choice(sorted(self.acknowledged))
        key = self.acknowledged[task_id]
        spec = {"type": "noop", "priority": 10, "labels": {"reused": key}}

        def answered(result: dict[str, Any] | None) -> None:
            if result is None:
                return  # not taken, or no answer: a client would try again
            code = str(result.get("reason", "")).split(":", 1)[0]
            if result.get("ok") or code != "idempotency_conflict":
                self._sim.fail(
                    IDEMPOTENCY_KEYS_HOLD,
                    f"key {key} of task {task_id} reused with another spec: {result}",
                )

        number = self._next_number()
        self._propose(e.TaskSubmit(f"task-{number}", spec, idempotency_key=key),
                      f"reuse {key}", answered)  # fmt: skip

    def _cancel(self) -> None:
        if self.acknowledged:
            task_id = self._rng.choice(sorted(self.acknowledged))
            self._propose(e.TaskCancel(task_id, "simulated client"), f"cancel {task_id}")

    def _retry_dead_letter(self) -> None:
        reader = self._reader()
        if reader is None:
            return
        dead = reader.list_tasks(["dead_letter"], None, None, None, 50, None).tasks
        if dead:
            task = self._rng.choice(dead)
            self._propose(
                e.TaskRetry(task.id, task.attempt, "retried from the dead-letter queue"),
                f"retry {task.id}",
            )

    # -- workflows ----------------------------------------------------------------------

    def _workflow(self, key: str | None = None, text: str | None = None) -> None:
        if key is None or text is None:
            number = self._next_number()
            key, text = f"flow-{number}", json.dumps(self._definition(number))
        try:
            definition = parse_definition(text, "json", self._sim.sandbox)
        except CortexError as err:
            self._sim.trace.add("workflow-invalid", key, err)
            return
        reader = self._reader()
        if reader is None:
            self._retry("workflow", key, text)
            return
        workflow_id, first = str(uuid.UUID(int=self._rng.getrandbits(128), version=4)), 0
        known = reader.workflow_by_idempotency_key(key)
        if known is not None:
            view = reader.get_workflow(known, with_tasks=False)
            if view is None or view.state != "submitting":
                self.workflows[known] = key
                return
            workflow_id, first = known, view.parts
        payloads = submit_payloads(definition, workflow_id, key)
        self._send_parts(key, text, workflow_id, payloads, first)

    def _send_parts(
        self, key: str, text: str, workflow_id: str, payloads: list[e.Payload], number: int
    ) -> None:
        if number >= len(payloads):
            self.workflows[workflow_id] = key
            self._sim.trace.add("acknowledged", key, workflow_id)
            return

        def answered(result: dict[str, Any] | None) -> None:
            if result is None:
                self._retry("workflow", key, text)
            elif result.get("ok") and result["workflow_id"] != workflow_id:
                # The key is taken by an earlier try (its answer was lost):
                # carry on with that workflow, as the API does.
                self._retry("workflow", key, text)
            elif result.get("ok"):
                self._send_parts(key, text, workflow_id, payloads, number + 1)
            else:
                self._sim.trace.add("refused", key, result.get("reason"))

        self._propose(payloads[number], f"workflow {key} part {number}", answered)

    def _definition(self, number: int) -> dict[str, Any]:
        rng = self._rng
        width = rng.choice([2, 3, 5, 8] + ([120] if rng.random() < 0.03 else []))
        tasks: dict[str, Any] = {
            "start": {
                "type": "noop",
                "spec": {"labels": {CONTEXT_LABEL: json.dumps({"flag": rng.random() < 0.5})}},
            },  # fmt: skip
        }
        for i in range(width):
            retries = rng.choice([0, 1])
            failures = rng.choice([0, 0, 0, 1, retries + 1])
            labels = {FAIL_ATTEMPTS_LABEL: str(failures)} if failures else {}
            tasks[f"step{i}"] = {
                "type": "noop",
                "dependsOn": ["start"],
                "retryPolicy": {"maxRetries": retries, "backoffMs": 100},
                "spec": {"labels": labels},
            }
        steps = [f"step{i}" for i in range(width)]
        tasks["join"] = {"type": "noop", "dependsOn": steps}
        tasks["on_failure"] = {
            "type": "noop",
            "dependsOn": steps,
            "condition": " || ".join(f"parent.{s}.state !== 'completed'" for s in steps[:20]),
        }
        tasks["when_flag"] = {
            "type": "noop",
            "dependsOn": ["join"],
            "condition": "workflow.context.flag === true && parent.start.exitCode === 0",
        }
        tasks["after_flag"] = {"type": "noop", "dependsOn": ["when_flag"]}
        return {"name": f"sim-{number}", "tasks": tasks, "context": {"run": number}}

    def _cancel_workflow(self) -> None:
        if self.workflows:
            workflow_id = self._rng.choice(sorted(self.workflows))
            self._propose(e.WorkflowCancel(workflow_id, "simulated client"),
                          f"cancel workflow {workflow_id}")  # fmt: skip

    # -- nodes --------------------------------------------------------------------------

    def _set_status(self, status: str, reason: str, deadline_ms: int | None = None) -> None:
        node_id = self._rng.choice(sorted(self._sim.nodes))
        reader = self._reader()
        row = reader.node(node_id) if reader else None
        if row is None or row.status == "offline":
            return  # as the API refuses: an offline node becomes active when it returns
        payload = e.NodeStatus(node_id, status, reason, deadline_ms)
        self._propose(payload, f"{status} {node_id}")

    def _drain(self) -> None:
        deadline = self._sim.clock.wall_ms("") + self._rng.randint(500, 5000)
        self._set_status("draining", "drained by request", deadline)

    def _cordon(self) -> None:
        self._set_status("cordoned", "cordoned by request")

    def _activate(self) -> None:
        self._set_status("active", "uncordoned by request")

    # -- removing a node ----------------------------------------------------------

    def _leader(self) -> SimNode | None:
        return next(
            (n for n in self._sim.nodes.values()
             if n.running and not n.paused and n.group is not None and n.group.is_leader),
            None,
        )  # fmt: skip

    def _remove_node(self, target: str | None = None) -> None:
        """Takes one node out for good, in `cortex node remove`'s order: the
        removal is applied while the node is still a Raft member (it learns of
        it and stops), then the Raft group lets it go."""
        if target is None:
            if self.removing is not None:
                return
            leader = self._leader()
            if leader is None:
                return
            # Not the leader (it cannot remove itself), and not the last node
            # of its zone: tasks constrained to a zone could never run again.
            nodes = self._sim.nodes.values()
            candidates = sorted(
                n.id for n in nodes
                if n.id != leader.id
                and any(o.labels == n.labels for o in nodes if o.id != n.id)
            )  # fmt: skip
            if not candidates:
                return
            target = self.removing = self._rng.choice(candidates)

        def answered(result: dict[str, Any] | None) -> None:
            if result is None:
                self._retry("remove_node", target)
            else:  # removed now, or already (a retry after a lost answer)
                self._at(self._sim.clock.now_us + CATCH_UP_US, "remove_member", target)

        self._propose(e.NodeLeave(target, "removed by request"), f"remove {target}", answered)

    def _remove_member(self, target: str) -> None:
        """Asks the leader to let `target` go, and looks again later (an answer
        can be lost with a leader change), until it is out of the group."""
        leader = self._leader()
        removed = self._sim.nodes[target]
        if leader is not None and leader.group is not None:
            if removed.address not in leader.group.members:
                # Out of the group: whether or not it saw its removal (it was
                # down), nobody starts it again.
                removed.retired = True
                if removed.running:
                    removed.fail_stop("left the Raft group")
                return

            def finished(result: Any, error: int) -> None:
                self._sim.trace.add("member-removed", target, FAIL_REASON_NAMES.get(error, error))

            self._sim.clock.current = leader.id
            try:
                leader.group.removeNodeFromCluster(removed.address, callback=finished)
            finally:
                self._sim.clock.current = None
            self._sim.trace.add("propose", leader.id, f"remove member {target}")
        self._at(self._sim.clock.now_us + CATCH_UP_US, "remove_member", target)
