"""The node-local agent: runs the attempts the log assigns to this node,
reports their outcome through Raft, and kills attempts the log took away.
It runs at most `max_running` at once (the node's `max_tasks`); the ones
beyond wait here, assigned, best first, and start as attempts end here
(the node's `prefetch_tasks`: `cortex.scheduler.placement`).

Its reconcile loop and each attempt are steps (`cortex.steps`), started by
`spawn` and waiting for the attempt's launcher (`cortex.agent.launcher`)
and for their proposals. In a real node the loop has a thread of its own
and the attempts share a `StepRunner`'s few threads; in a simulated node the
simulator runs both."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from cortex.agent.launcher import ExecutionLauncher, ThreadLauncher, describe_exception
from cortex.agent.waiting import WaitingAttempts
from cortex.errors import CortexError
from cortex.executors import Execution, ExecutionResult, Executor, load_handle
from cortex.output import OutputHub
from cortex.raft.proposer import EntrySubmitter
from cortex.spec import describe_validation_error, runnable_problems, stored_task_spec
from cortex.state import entries as e
from cortex.state.queries import StateReader, TaskView
from cortex.state.transitions import TaskChange, last_changes
from cortex.steps import (
    SYSTEM_CLOCK,
    Clock,
    Signal,
    Sleep,
    Step,
    StepRunner,
    Stopped,
    WaitSignal,
    start_thread,
    wall_ms,
)
from cortex.tracing import NO_TRACING, Tracer
from cortex.tracing.spans import PROCESS_EXIT_CODE
from cortex.workflows.context import initial_context, read_context_update

log = logging.getLogger(__name__)

RECONCILE_INTERVAL_S = 0.5
# Attempts one applied batch assigns here that its listener reads on the
# applying thread (`read_applied`): a few, as a lightly loaded node gets,
# whose start comes sooner for it. A bulk round's are read by the loop: a
# task's row costs ~30 us to read and make a view of on either thread
# (`scripts/bench_core.py --stages`), and the applying thread is the one
# every node's work waits for.
MOST_READ_AT_APPLY = 4
# How long an attempt runs before its start is reported on its own: one that
# ends sooner reports its start with its outcome, in one entry instead of two
# (a quick attempt's two reports seldom left together by chance). The start
# keeps the time the attempt began either way.
START_REPORT_HOLD_S = 0.01
# In an attempt's work dir: what its executor needs to recover it.
HANDLE_FILE = "handle.json"
LOST_REASON = "node restarted during the attempt"


@dataclass
class RunningAttempt:
    task_id: str
    attempt: int
    cancel: threading.Event
    # Set when the log no longer wants this attempt: its outcome is not reported.
    superseded: bool = False
    # Set once the attempt has ended here and its outcome is being reported.
    finished: bool = False
    # When it began (ms since the epoch), while its start is not yet reported.
    unreported_start: int | None = None


def _claim_start(running: RunningAttempt) -> int | None:
    """The attempt's unreported start, which from now on is reported; the
    caller holds the agent's start lock."""
    started_at, running.unreported_start = running.unreported_start, None
    return started_at


def _span_result(result: ExecutionResult) -> dict[str, int]:
    return {PROCESS_EXIT_CODE: result.exit_code}


def attempt_idempotency_key(task: TaskView) -> str:
    """Stable per (task, attempt, spec), so an executor can de-duplicate side effects."""
    material = f"{task.id}|{task.attempt}|{json.dumps(task.spec, sort_keys=True)}"
    return hashlib.sha256(material.encode()).hexdigest()


class Agent:
    """`output` is where the default launcher sends attempts' output; a
    given `launcher` handles output itself. `spawn` starts a step on its own
    (by default: the loop on a daemon thread, attempts on the agent's
    `StepRunner`, until the agent stops)."""

    def __init__(
        self,
        node_id: str,
        proposer: EntrySubmitter,
        reader: StateReader,
        executors: dict[str, Executor],
        data_dir: str,
        is_ready: Callable[[], bool],
        kill_grace_s: float = 5.0,
        output: OutputHub | None = None,
        clock: Clock = SYSTEM_CLOCK,
        spawn: Callable[[Step[Any]], None] | None = None,
        launcher: ExecutionLauncher | None = None,
        tracer: Tracer = NO_TRACING,
        max_running: int = 0,
        read_applied: Callable[[list[str]], list[TaskView]] | None = None,
    ) -> None:
        self._node_id = node_id
        # Attempts run at once at most (0: no limit); attempts assigned here
        # beyond it wait for one to end.
        self._max_running = max_running
        self._waiting = WaitingAttempts(node_id)
        # Set when an attempt ends while others wait: the loop starts them.
        self._slot_freed = False
        # Whether the log has this node draining, as the last full pass read
        # it (every NODE_STATUS entry brings one: its listener call has no
        # task changes).
        self._draining = False
        self._tracer = tracer
        self._proposer = proposer
        self._reader = reader
        self._executors = executors
        self._data_dir = data_dir
        self._is_ready = is_ready
        self._kill_grace_s = kill_grace_s
        self._clock = clock
        self._steps: StepRunner | None = None
        if spawn is None:
            self._steps = StepRunner("agent-steps")
            spawn = self._steps.spawn
        self._spawn = spawn
        # Attempts start on the thread that finds them (the loop's, in a
        # real node) until they first wait for their launcher.
        self._start_step = self._steps.start_here if self._steps is not None else spawn
        self._launcher = launcher or ThreadLauncher(output)
        self._running: dict[str, RunningAttempt] = {}
        self._lock = threading.Lock()
        self._wake = Signal()
        # The attempts applied entries assigned here since the loop last
        # looked, for it to start without reading every attempt of this node;
        # None when the loop should look at them all.
        self._fresh: list[tuple[str, int]] | None = []
        # With `read_applied` (`StateMachine.tasks_as_applied`), the listener
        # reads the attempts a batch assigns here as the batch left them, on
        # the writer's connection with its pages in hand, ahead of the loop
        # (`WaitingAttempts.read_ahead`), which then reads none of them itself.
        self._read_applied = read_applied
        # Set when an attempt begins with its start held back (see above).
        self._held_starts = Signal()
        # Taking a held start and proposing it happen under this lock, so an
        # outcome that finds its start taken is proposed after that start.
        self._start_lock = threading.Lock()
        self._stop = threading.Event()
        # Attempts this process started, and those it found running from an
        # earlier process and reported lost: kept while the log still has them
        # assigned here.
        self._started: set[tuple[str, int]] = set()
        self._reported_lost: set[tuple[str, int]] = set()

    def start(self) -> None:
        if self._steps is None:
            self._spawn(self.main())
            self._spawn(self._report_starts())
        else:
            start_thread("agent-main", self.main(), self._stop)
            start_thread("agent-starts", self._report_starts(), self._stop)

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._held_starts.set()
        with self._lock:
            for running in self._running.values():
                running.superseded = True
                running.cancel.set()
        if self._steps is not None:
            self._steps.stop()

    @property
    def running_count(self) -> int:
        with self._lock:
            return len(self._running)

    @property
    def waiting_count(self) -> int:
        """Attempts assigned here that wait for a slot."""
        return len(self._waiting)

    def on_change(self, index: int, changes: list[TaskChange]) -> None:
        """State listener (Raft thread): wake on new work, cancel lost work.
        Whose an attempt is is judged from each task's last change in the
        entry: one entry may submit a task and place it here (queued, then
        assigned), and the reconcile loop may have started the attempt
        between the entry's commit and this call."""
        fresh = [
            (c.task_id, c.attempt)
            for c in changes
            if c.node == self._node_id and c.state == "assigned"
        ]
        lasts = last_changes(changes)
        self._waiting.drop_moved(lasts)
        if changes:
            self._waiting.read_ahead(self._read_fresh(fresh))
        else:
            self._waiting.forget_read_ahead()
        with self._lock:
            if not changes:
                self._fresh = None
            elif fresh and self._fresh is not None:
                self._fresh.extend(fresh)
            for change in lasts:
                running = self._running.get(change.task_id)
                if running is None:
                    continue
                still_ours = (
                    change.node == self._node_id
                    and change.attempt == running.attempt
                    and change.state in ("assigned", "running")
                )
                if not still_ours:
                    running.superseded = True
                    running.cancel.set()
        if fresh or not changes:
            self._wake.set()

    def _read_fresh(self, fresh: list[tuple[str, int]]) -> list[TaskView]:
        """The attempts among `fresh` still assigned here as the applied batch
        left them, read on the applying thread (`read_applied`); none when
        there are many (the loop reads those), while the node is not ready
        (its next pass reads every attempt), or when the read fails."""
        if self._read_applied is None or not fresh or len(fresh) > MOST_READ_AT_APPLY:
            return []
        if not self._is_ready():
            return []
        try:
            rows = self._read_applied([task_id for task_id, _ in fresh])
        except Exception:
            # The listener must still cancel what the batch took away: the
            # loop reads these itself.
            log.exception("reading the attempts assigned here at apply failed")
            return []
        assigned = set(fresh)
        return [
            row
            for row in rows
            if row.node == self._node_id
            and row.state == "assigned"
            and (row.id, row.attempt) in assigned
        ]

    def main(self) -> Step[None]:
        """The reconcile loop: every interval, and when a state it cannot
        follow change by change is loaded (a snapshot), looks at every attempt
        assigned here, starts those not started and stops those no longer
        this node's; woken by new assignments, starts just those."""
        while not self._stop.is_set():
            woken = yield WaitSignal(self._wake, RECONCILE_INTERVAL_S)
            with self._lock:
                fresh, self._fresh = self._fresh, []
                freed, self._slot_freed = self._slot_freed, False
            if self._stop.is_set() or not self._is_ready():
                with self._lock:
                    self._fresh = None  # the next pass looks at every attempt
                self._waiting.forget_read_ahead()
                continue
            try:
                if woken and fresh is not None and (fresh or freed):
                    self._start_fresh(fresh)
                else:
                    self._reconcile()
            except Exception:
                log.exception("agent reconcile failed")

    def _not_started(self, attempts: list[tuple[str, int]]) -> list[str]:
        """The tasks of `attempts` not started by this process (running, or
        ended and reporting while the caller read them): an attempt must never
        run twice."""
        with self._lock:
            running = {r.task_id: r.attempt for r in self._running.values()}
        return list(
            dict.fromkeys(
                task_id
                for task_id, attempt in attempts
                if running.get(task_id) != attempt and (task_id, attempt) not in self._started
            )
        )

    def _start_fresh(self, fresh: list[tuple[str, int]]) -> None:
        """Starts the attempts just assigned here, read as they are now, and
        those waiting for the slots come free since: one the log has moved on
        from is left to the next full pass."""
        new = self._not_started(fresh)
        if new:
            self._start_read(new, None)
        self._fill_slots()

    def _reconcile(self) -> None:
        own = self._reader.node(self._node_id)
        self._draining = own is not None and own.status == "draining"
        mine = self._reader.attempts_on_node(self._node_id, ("assigned", "running"))
        held = {(a.task_id, a.attempt) for a in mine}
        self._stop_lost_attempts(held)
        self._started &= held
        self._reported_lost &= held
        self._waiting.keep_only(held)
        # Only the attempts not started here already are read whole.
        new = self._not_started([(a.task_id, a.attempt) for a in mine])
        if new:
            self._start_read(new, held)
        self._fill_slots()

    def _free_slots(self) -> int | None:
        """Attempts that may start now (None: any number): an attempt holds
        its slot until it ends here, not until its outcome is in the log."""
        if not self._max_running:
            return None
        with self._lock:
            busy = sum(1 for r in self._running.values() if not r.finished)
        return max(self._max_running - busy, 0)

    def _fill_slots(self) -> None:
        """Starts waiting attempts, best first, while slots are free; none
        while this node drains: the leader moves them elsewhere without
        spending an attempt, and one started here would stay."""
        if self._draining:
            return
        for task in self._waiting.take(self._free_slots()):
            if (task.id, task.attempt) not in self._started:
                self._start(task)

    def _start_read(self, task_ids: list[str], held: set[tuple[str, int]] | None) -> None:
        """Reads the tasks; recovers or reports lost the attempts among them
        that are this node's and not started by this process, and adds those
        never begun to the waiting ones (`_fill_slots` starts them); with
        `held`, only those among it (what an earlier read found assigned
        here)."""
        with self._waiting.reading(task_ids) as ahead:
            unread = [task_id for task_id in task_ids if task_id not in ahead]
            for task in [*ahead.values(), *(self._reader.get_tasks(unread) if unread else [])]:
                attempt = (task.id, task.attempt)
                if (
                    (held is not None and attempt not in held)
                    or task.node != self._node_id
                    or task.state not in ("assigned", "running")
                    or attempt in self._started
                ):
                    continue  # moved on since the first read: the next pass sees it
                # Not started by this process: one an earlier process started may
                # have left a handle to recover it by (and so never runs twice).
                handle = self._saved_handle(task) if attempt not in self._reported_lost else None
                if handle is not None:
                    self._start(task, handle)  # its process runs already: no slot to wait for
                elif task.state == "assigned":
                    self._waiting.add(task)
                elif attempt not in self._reported_lost:
                    # Running here, but not started by this process: it died with
                    # an earlier one. Looked at on every pass, not only the first:
                    # a node catching up may apply the start after its first pass.
                    self._reported_lost.add(attempt)
                    self._spawn(self._report_lost(task))

    def _stop_lost_attempts(self, still_mine: set[tuple[str, int]]) -> None:
        """Kills attempts the log gave to another node or ended while this node
        was not listening (e.g. it was paused, or caught up from a snapshot)."""
        with self._lock:
            lost = [
                r
                for r in self._running.values()
                if not r.finished and (r.task_id, r.attempt) not in still_mine
            ]
        for running in lost:
            current = self._reader.get_task(running.task_id)
            state = current.state if current is not None else "gone"
            same_attempt = (
                current is not None
                and current.attempt == running.attempt
                and current.node == self._node_id
            )
            # The log already holds this attempt's outcome, or ended it on
            # request: expected, unlike an attempt given to another node.
            if same_attempt and state in ("completed", "failed", "dead_letter"):
                level = logging.DEBUG
            elif same_attempt and state == "cancelled":
                level = logging.INFO
            else:
                level = logging.WARNING
            log.log(level, "task %s attempt %d is no longer this node's (%s); killing it",
                    running.task_id, running.attempt, state)  # fmt: skip
            running.superseded = True
            running.cancel.set()

    def _work_dir(self, task: TaskView) -> str:
        return os.path.join(self._data_dir, "attempts", task.id, str(task.attempt))

    def _saved_handle(self, task: TaskView) -> dict[str, Any] | None:
        """The handle the attempt's executor saved, if it has one. An
        executor without a work dir has nowhere to keep one (its attempts'
        `handle_file` is empty), so its attempts start without a failed open
        (a system call, the interpreter lock let go and won back)."""
        executor = self._executors.get(task.type)
        if executor is None or not executor.uses_work_dir:
            return None
        return load_handle(os.path.join(self._work_dir(task), HANDLE_FILE))

    def _start(self, task: TaskView, handle: dict[str, Any] | None = None) -> None:
        """Runs the attempt, or with `handle` recovers it."""
        running = RunningAttempt(task.id, task.attempt, threading.Event())
        self._started.add((task.id, task.attempt))
        with self._lock:
            previous = self._running.get(task.id)
            if previous is not None:
                previous.superseded = True
                previous.cancel.set()
            self._running[task.id] = running
        self._start_step(self._execute(task, running, handle))

    def _execute(
        self, task: TaskView, running: RunningAttempt, handle: dict[str, Any] | None = None
    ) -> Step[None]:
        """One attempt, from TASK_STARTED to its report, in a span of its own;
        with `handle`, one recovered after this node restarted (reported lost
        when it cannot be)."""
        span = self._tracer.attempt(task.traceparent, task.id, task.attempt, task.type)
        try:
            try:
                result = yield from self._run_attempt(task, running, span.traceparent, handle)
            except Stopped:
                span.end(error=f"{self._node_id} stopped during the attempt")
                raise
            except LookupError as err:
                if handle is None:
                    raise
                self._ended(running)
                why = f"{LOST_REASON} (not recovered: {describe_exception(err)})"
                span.end(error=why)
                log.warning("task %s attempt %d: %s", task.id, task.attempt, why)
                if not running.superseded:
                    yield from self._report(
                        task, e.TaskFailed(task.id, task.attempt, self._node_id, why)
                    )
                return
            except Exception as err:
                # Whatever went wrong, the attempt ends here and is reported:
                # a task must never stay `running` with nobody running it.
                log.exception("task %s attempt %d could not run", task.id, task.attempt)
                problem = describe_exception(err)
                result = ExecutionResult(
                    exit_code=-1, error=f"the attempt could not run on {self._node_id}: {problem}"
                )
            self._ended(running)
            outcome = self._outcome(task, result, self._take_start(running))
            if running.superseded:
                span.end(error="taken away from this node", attributes=_span_result(result))
                log.info(
                    "task %s attempt %d was taken away; outcome not reported", task.id, task.attempt
                )
                return
            failed = outcome.reason if isinstance(outcome, e.TaskFailed) else None
            span.end(error=failed, attributes=_span_result(result))
            yield from self._report(task, outcome)
        finally:
            with self._lock:
                if self._running.get(task.id) is running:
                    del self._running[task.id]

    def _ended(self, running: RunningAttempt) -> None:
        """The attempt ended here: its slot is free for a waiting one now,
        before its outcome reaches the log."""
        running.finished = True
        if self._waiting:
            with self._lock:
                self._slot_freed = True
            self._wake.set()

    def _outcome(
        self, task: TaskView, result: ExecutionResult, started_at: int | None
    ) -> e.Payload:
        """The attempt's report; `started_at` when its start is reported with it."""
        if result.succeeded:
            return e.TaskComplete(
                task.id, task.attempt, self._node_id, result.to_dict(), started_at
            )
        reason = result.error or (
            "cancelled" if result.cancelled else f"exit code {result.exit_code}"
        )
        if result.permanent:
            reason += " (a permanent error: not retried)"
        return e.TaskFailed(
            task.id, task.attempt, self._node_id, reason, result.to_dict(), result.permanent,
            started_at,
        )  # fmt: skip

    def _run_attempt(
        self,
        task: TaskView,
        running: RunningAttempt,
        traceparent: str | None,
        handle: dict[str, Any] | None,
    ) -> Step[ExecutionResult]:
        try:
            spec = stored_task_spec(task.spec)
        except ValidationError as err:
            return ExecutionResult(
                exit_code=-1,
                error=f"invalid spec: {describe_validation_error(err)}",
                permanent=True,
            )
        executor = self._executors.get(spec.type)
        if executor is None:
            return ExecutionResult(
                exit_code=-1, error=f"no {spec.type} executor on {self._node_id}"
            )
        unrunnable = runnable_problems(spec, executor.options_model)
        if unrunnable:
            # Accepted where it entered without these checks (an older node,
            # or one without this executor): it can never run.
            return ExecutionResult(
                exit_code=-1, error=f"invalid spec: {'; '.join(unrunnable)}", permanent=True
            )
        work_dir = self._work_dir(task)
        context_file = os.path.join(work_dir, "context.json")
        context_in = initial_context(self._reader, task)
        # A recovered attempt's context file is as the task left it.
        if executor.uses_work_dir and handle is None:
            os.makedirs(work_dir, exist_ok=True)
            with open(context_file, "w") as out:
                out.write(context_in)
        execution = Execution(
            task_id=task.id,
            attempt=task.attempt,
            spec=spec,
            work_dir=work_dir,
            env={
                "CORTEX_TASK_ID": task.id,
                "CORTEX_ATTEMPT": str(task.attempt),
                "CORTEX_IDEMPOTENCY_KEY": attempt_idempotency_key(task),
                "CORTEX_CONTEXT_FILE": context_file,
                "CORTEX_NODE_ID": self._node_id,
                # The attempt's trace context, so the task's own spans join
                # its trace (W3C Trace Context in the environment).
                **({"TRACEPARENT": traceparent} if traceparent else {}),
                **(
                    {
                        "CORTEX_WORKFLOW_ID": task.workflow_id,
                        "CORTEX_TASK_KEY": task.workflow_key or "",
                    }
                    if task.workflow_id
                    else {}
                ),
            },
            kill_grace_s=self._kill_grace_s,
            handle_file=os.path.join(work_dir, HANDLE_FILE) if executor.uses_work_dir else "",
        )
        if task.state == "assigned":
            with self._start_lock:
                running.unreported_start = wall_ms(self._clock)
            self._held_starts.set()
        if handle is None:
            log.debug("task %s attempt %d starting", task.id, task.attempt)
            result = yield self._launcher.launch(executor, execution, running.cancel)
        else:
            log.info("task %s attempt %d: recovering it after a restart", task.id, task.attempt)
            result = yield self._launcher.launch(executor, execution, running.cancel, handle=handle)
        if not (task.workflow_id and result.succeeded):
            result.context_update = None
        elif executor.uses_work_dir:
            # What the task left in its context file, then what its
            # executor reported (a subagent's final JSON) over it.
            written = read_context_update(context_file, context_in)
            result.context_update = {**(written or {}), **(result.context_update or {})} or None
        return result

    def _take_start(self, running: RunningAttempt) -> int | None:
        """The attempt's start, if not reported yet, for the one report that
        carries it (`_report_starts` or the outcome, whichever comes first)."""
        with self._start_lock:
            return _claim_start(running)

    def _report_starts(self) -> Step[None]:
        """Reports the start of every attempt still running
        `START_REPORT_HOLD_S` after it began (TASK_STARTED, at the time it
        began); one that ended sooner reported its start with its outcome."""
        while not self._stop.is_set():
            yield WaitSignal(self._held_starts, RECONCILE_INTERVAL_S)
            with self._lock:
                held = [r for r in self._running.values() if r.unreported_start is not None]
            if not held or self._stop.is_set():
                continue
            # Attempts that begin meanwhile set the signal again: the next round.
            yield Sleep(START_REPORT_HOLD_S)
            for running in held:
                with self._start_lock:
                    started_at = _claim_start(running)
                    if started_at is None or running.superseded:
                        continue
                    self._proposer.submit(
                        e.Entry.create(
                            e.TaskStarted(running.task_id, running.attempt, self._node_id),
                            self._node_id,
                            ts=started_at,
                        )
                    )

    def _report_lost(self, task: TaskView) -> Step[None]:
        log.warning("task %s attempt %d was running when this node stopped", task.id, task.attempt)
        yield from self._report(
            task, e.TaskFailed(task.id, task.attempt, self._node_id, LOST_REASON)
        )

    def _report(self, task: TaskView, payload: e.Payload) -> Step[None]:
        """Retries until the log takes the report or the attempt is no longer
        this node's (fencing would reject it anyway)."""
        delay = 0.1
        while not self._stop.is_set():
            entry = e.Entry.create(payload, self._node_id, ts=wall_ms(self._clock))
            try:
                yield self._proposer.submit_all([entry])
                return
            except CortexError as err:
                log.warning("report for task %s not committed yet: %s", task.id, err)
            current = self._reader.get_task(task.id)
            if current is None or current.attempt != task.attempt or current.node != self._node_id:
                return
            if current.state not in ("assigned", "running"):
                return
            yield Sleep(delay)
            delay = min(delay * 2, 2.0)
