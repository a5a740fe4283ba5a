"""The task operations every interface offers (gRPC, MCP, CLI): validate,
propose, read. Interfaces translate; the rules live here."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

from cortex.errors import (
    AlreadyExists,
    CortexError,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    Unavailable,
    UnknownId,
)
from cortex.id_prefixes import resolve_prefix
from cortex.membership.board import ResourceBoard
from cortex.raft.proposer import Proposer
from cortex.refusals import refusal_error
from cortex.requests import MAX_SUBMIT_BATCH, check_id, check_idempotency_key, check_states
from cortex.scheduler import explain
from cortex.scheduler.limits import LimitGate
from cortex.scheduler.loop import build_candidates, limit_gate, pending
from cortex.scheduler.model import Candidate
from cortex.spec import TaskTypes, parse_task_spec
from cortex.state import entries as e
from cortex.state.applied_rows import AppliedRows
from cortex.state.canonical import dump
from cortex.state.machine import StateMachine
from cortex.state.paging import CreatedWindow, PageKey
from cortex.state.queries import EventView, NodeView, StateReader, TaskPage, TaskView
from cortex.state.task_match import TaskMatch
from cortex.state.task_states import TERMINAL_STATES
from cortex.state.traceparent import TraceParent
from cortex.state.transitions import same_spec
from cortex.tracing import NO_TRACING, Span, Tracer
from cortex.tracing.spans import TASK_CREATED

TASK_STATES = (
    "pending", "queued", "assigned", "running", "completed",
    "failed", "cancelled", "skipped", "dead_letter",
)  # fmt: skip


@dataclass(frozen=True)
class SubmitOutcome:
    task_id: str
    created: bool
    # The Raft index the task's submission committed at (the first one's,
    # when the idempotency key matched an earlier submission).
    raft_index: int
    task: TaskView


@dataclass(frozen=True)
class BulkOutcome:
    """What a bulk change did to one task: `acted`, or not, with the refusal
    in `error` (empty when the task was left as it was: nothing to do)."""

    task_id: str
    acted: bool
    error: str = ""


@dataclass(frozen=True)
class TaskWrite:
    """A task as a write left it, and the Raft index the write committed at."""

    task: TaskView
    raft_index: int


@dataclass(frozen=True)
class DeadLetterRetry(TaskWrite):
    """A dead letter queued again: its fresh retry budget (the retries it may
    spend before it is dead-lettered again; its retry count starts from 0),
    and for a workflow task its workflow's state when retried and whether it
    rejoined the workflow (False: it runs on its own, and the workflow stays
    as it ended)."""

    retry_budget: int = 0
    workflow_state: str | None = None
    rejoined_workflow: bool = False


# How long the nodes read to explain why a task is pending may be reused.
CANDIDATES_MAX_AGE_S = 0.25


@dataclass(frozen=True)
class _NodesRead:
    """The nodes as the scheduler saw them at an applied index, and the
    verdicts judged against them so far, by task type and constraints."""

    index: int
    at: float  # time.monotonic() of the read
    candidates: list[Candidate]
    judged: dict[tuple[str, str], list[str]]

    @functools.cached_property
    def by_id(self) -> dict[str, Candidate]:
        return {node.id: node for node in self.candidates}


def _not_started(node_id: str, node: Candidate | None, running: dict[str, int] | None) -> list[str]:
    """Why a task assigned to `node_id` has not started there: the node is
    not taking tasks, or runs as many as it has slots (`running`, read when
    it holds more); nothing when it is about to start."""
    if node is None:
        return []
    if node.status in ("offline", "draining"):
        return [f"assigned to {node_id}, which is {node.status}: it will run elsewhere"]
    if running is not None and node.max_tasks and running.get(node_id, 0) >= node.max_tasks:
        return [f"waiting for a free slot on {node_id} (all {node.max_tasks} are running tasks)"]
    return []


def _end_submit_span(span: Span, result: dict[str, Any]) -> None:
    if result.get("ok"):
        span.end(attributes={TASK_CREATED: bool(result["created"])})
    else:
        span.end(error=str(result.get("reason", "rejected")))


def _resubmitted(
    key: str, spec: dict[str, Any], task: TaskView | None
) -> SubmitOutcome | CortexError | None:
    """The outcome of submitting `spec` again under `key`, which names
    `task` (None: the key is new, or its task was purged)."""
    if task is None:
        return None
    if not same_spec(task.spec, spec):
        return AlreadyExists(
            f"idempotency key {key!r} is already used by task {task.id},"
            " submitted with a different spec"
        )
    return SubmitOutcome(task.id, False, task.submit_index, task)


class TaskOperations:
    def __init__(
        self,
        node_id: str,
        proposer: Proposer,
        machine: StateMachine,
        reader: StateReader,
        board: ResourceBoard,
        reachable: Callable[[NodeView], bool],
        max_spec_bytes: int,
        propose_timeout_s: float,
        tracer: Tracer = NO_TRACING,
        task_types: TaskTypes | None = None,
    ) -> None:
        self.node_id = node_id
        self._task_types = task_types
        self._proposer = proposer
        self._machine = machine
        self._reader = reader
        self._board = board
        self._reachable = reachable
        self._max_spec_bytes = max_spec_bytes
        self._timeout = propose_timeout_s
        self._tracer = tracer
        self._nodes_read: _NodesRead | None = None
        # Submitted tasks as apply left them, read on the applying thread.
        self._applied = AppliedRows(machine)

    def submit(
        self,
        spec: dict[str, Any],
        idempotency_key: str | None = None,
        traceparent: str | None = None,
    ) -> SubmitOutcome:
        """A key already used with the same spec gives that task back; with a
        different spec, AlreadyExists naming it. Apply decides the same way,
        so two submitters racing with one key cannot both win. The task
        keeps the submission's trace context, in the trace `traceparent`
        (the client's W3C header; a malformed one is ignored) or a new one."""
        check_idempotency_key(idempotency_key)
        canonical = parse_task_spec(spec, self._max_spec_bytes, self._task_types).model_dump(
            mode="json"
        )
        known = self._known_submission(idempotency_key, canonical) if idempotency_key else None
        if isinstance(known, CortexError):
            raise known
        if known is not None:
            return known
        task_id = e.new_id()
        span = self._tracer.submit_task(TraceParent.parse(traceparent), task_id, canonical["type"])
        try:
            entry = e.Entry.create(
                e.TaskSubmit(task_id, canonical, idempotency_key or None,
                             traceparent=span.traceparent),
                self.node_id,
            )  # fmt: skip
            with self._applied.awaiting([task_id]) as applied:
                result = self._proposer.propose_one(entry, self._timeout)
            if not result.get("ok"):
                raise refusal_error(result, "task rejected")
        except CortexError as err:
            span.end(error=str(err))
            raise
        _end_submit_span(span, result)
        task = applied.get(result["task_id"]) or self._reader.get_task(result["task_id"])
        outcome = self._accepted(task, result)
        if isinstance(outcome, CortexError):
            raise outcome
        return outcome

    def submit_many(
        self, items: list[tuple[dict[str, Any], str | None]], traceparent: str | None = None
    ) -> list[SubmitOutcome | CortexError]:
        """`submit` for many (spec, idempotency key) pairs at once, in order.
        Every item is checked first and one bad item refuses them all
        (InvalidArgument naming `tasks[i]`), so nothing is half submitted.
        The rest are proposed together and each succeeds or is refused on its
        own: an outcome, or the error `submit` would have raised for it.
        Each task's submission is a span of its own in the trace `traceparent`."""
        if not 1 <= len(items) <= MAX_SUBMIT_BATCH:
            raise InvalidArgument(
                f"tasks must hold 1 to {MAX_SUBMIT_BATCH} tasks (got {len(items)})"
            )
        canonical: list[dict[str, Any]] = []
        for number, (spec, key) in enumerate(items):
            try:
                check_idempotency_key(key)
                canonical.append(
                    parse_task_spec(spec, self._max_spec_bytes, self._task_types).model_dump(
                        mode="json"
                    )
                )
            except InvalidArgument as err:
                raise InvalidArgument(f"tasks[{number}].{err}") from None
        outcomes: list[SubmitOutcome | CortexError | None] = [None] * len(items)
        proposed: list[tuple[int, e.Entry]] = []
        new_ids: list[str] = []
        spans: list[Span] = []
        incoming = TraceParent.parse(traceparent)
        # The keys already in use and their tasks, read in two queries
        # rather than two per key.
        used = self._reader.tasks_by_idempotency_keys(key for _, key in items if key)
        used_tasks = {task.id: task for task in self._reader.get_tasks(used.values())}
        for number, ((_, key), spec) in enumerate(zip(items, canonical, strict=True)):
            known = _resubmitted(key, spec, used_tasks.get(used[key])) if key in used else None
            if known is not None:
                outcomes[number] = known
            else:
                task_id = e.new_id()
                span = self._tracer.submit_task(incoming, task_id, spec["type"])
                spans.append(span)
                task = e.TaskSubmit(task_id, spec, key or None, traceparent=span.traceparent)
                proposed.append((number, e.Entry.create(task, self.node_id)))
                new_ids.append(task_id)
        if proposed:
            try:
                with self._applied.awaiting(new_ids) as applied:
                    results = self._commit_together(
                        [entry for _, entry in proposed],
                        "the submissions were not all committed within {timeout}; they may still"
                        " be applied: retry with the same idempotency keys",
                    )
            except Unavailable as late:
                for span in spans:
                    span.end(error=str(late))
                raise
            tasks = self._accepted_tasks(results, applied)
            for (number, _), result, span in zip(proposed, results, spans, strict=True):
                _end_submit_span(span, result)
                outcomes[number] = (
                    self._accepted(tasks.get(result["task_id"]), result)
                    if result.get("ok")
                    else refusal_error(result, f"tasks[{number}] rejected")
                )
        return [outcome for outcome in outcomes if outcome is not None]

    def _accepted_tasks(
        self, results: list[dict[str, Any]], applied: dict[str, TaskView]
    ) -> dict[str, TaskView]:
        """The tasks accepted submissions name, as applied here: those the
        applying thread read (`applied`), the rest read together."""
        ids = {result["task_id"] for result in results if result.get("ok")}
        tasks = {task_id: applied[task_id] for task_id in ids & applied.keys()}
        tasks.update((task.id, task) for task in self._reader.get_tasks(ids - applied.keys()))
        return tasks

    @staticmethod
    def _accepted(task: TaskView | None, result: dict[str, Any]) -> SubmitOutcome | CortexError:
        """The outcome of an accepted submission whose task, read back after
        apply, is `task`."""
        if task is None:  # an earlier submission's task, purged since
            return NotFound(f"no task with id {result['task_id']} (purged)")
        return SubmitOutcome(task.id, bool(result["created"]), task.submit_index, task)

    def _commit_together(self, entries: list[e.Entry], if_late: str) -> list[dict[str, Any]]:
        """Proposes `entries` together and waits until each is applied on this
        node; Unavailable saying `if_late` (its `{timeout}` filled in) when
        they are not all applied within the propose timeout."""
        future = self._proposer.submit_all(entries, request=True)
        try:
            return future.result(timeout=self._timeout + 1.0)
        except FutureTimeout:
            raise Unavailable(if_late.format(timeout=f"{self._timeout:.0f}s")) from None

    def _known_submission(
        self, key: str, spec: dict[str, Any]
    ) -> SubmitOutcome | CortexError | None:
        """The task an idempotency key already names: the outcome of submitting
        `spec` under it again, or None when the key is new."""
        known = self._reader.task_by_idempotency_key(key)
        return _resubmitted(key, spec, self._reader.get_task(known) if known is not None else None)

    def _committed(self, entry: e.Entry, task_id: str) -> TaskWrite:
        """The task after `entry` was applied, with the index it was applied
        at (this node's applied index should its events be gone)."""
        index = self._reader.entry_index(entry.id, task_id)
        return TaskWrite(self.get(task_id), index or self._machine.applied_index)

    def get(self, task_id: str) -> TaskView:
        """The task with this id, or with the one id this unique prefix starts."""
        check_id(task_id, "task_id")
        task = self._reader.get_task(task_id)
        if task is None:
            full_id = resolve_prefix("task", task_id, self._reader.task_ids_with_prefix)
            task = self._reader.get_task(full_id)
        if task is None:
            raise UnknownId(f"no task with id {task_id}")
        return task

    def resolve_id(self, task_id: str) -> str:
        """The full id of the task an id or unique prefix names."""
        return self.get(task_id).id

    def events(self, task_id: str) -> list[EventView]:
        return self._reader.task_events(task_id)

    def pending_reasons(self, task: TaskView, assigned: bool = True) -> list[str]:
        """Why a queued task is not placed, or (with `assigned`) why a task
        assigned to a node has not started there, judged from this node's view."""
        return self.pending_reasons_all([task], assigned)[0]

    def pending_reasons_all(self, tasks: list[TaskView], assigned: bool = True) -> list[list[str]]:
        """`pending_reasons` of each task, the nodes read once, and the nodes'
        fit judged once per task type and constraints (all it depends on).
        A submission's answer leaves `assigned` out: its task was just placed."""
        now_ms = int(time.time() * 1000)
        read: _NodesRead | None = None
        gate: LimitGate | None = None
        running: dict[str, int] | None = None
        reasons: list[list[str]] = []
        for task in tasks:
            if task.state == "assigned" and assigned and task.node:
                read = read or self._read_nodes()
                node = read.by_id.get(task.node)
                if node is not None and node.max_tasks and node.active_tasks > node.max_tasks:
                    # It holds tasks beyond its slots: are they all taken?
                    running = self._reader.running_counts_by_node() if running is None else running
                reasons.append(_not_started(task.node, node, running))
                continue
            if task.state != "queued":
                reasons.append([])
                continue
            if task.concurrency_key is not None:
                gate = gate or limit_gate(self._reader, now_ms)
                held = gate.held(task.concurrency_key)
                if held is not None:
                    reasons.append([held])
                    continue
            if task.scheduled_after > now_ms:
                reasons.append([f"backing off until {task.scheduled_after} (ms since epoch)"])
            else:
                kind = (task.type, dump(task.spec.get("constraints") or {}))
                read = read or self._read_nodes()
                verdict = read.judged.get(kind)
                if verdict is None:
                    verdict = read.judged[kind] = explain(pending(task), read.candidates)
                reasons.append(list(verdict))
        return reasons

    def _read_nodes(self) -> _NodesRead:
        """The nodes as the scheduler sees them, and what was judged against
        them so far (all a verdict depends on is the task's type and
        constraints), read once per applied index (the submissions one entry
        settled are all answered from one read, each kind of task judged
        once) and at most `CANDIDATES_MAX_AGE_S` ago (resource reports and
        reachability change between entries)."""
        index, now = self._machine.applied_index, time.monotonic()
        last = self._nodes_read
        if last is not None and last.index == index and now - last.at < CANDIDATES_MAX_AGE_S:
            return last
        candidates = build_candidates(self._reader, self._board, self._reachable)
        self._nodes_read = _NodesRead(index, now, candidates, {})
        return self._nodes_read

    def wait(self, task_id: str, timeout_s: float) -> TaskView:
        """Returns the task once terminal, or as it is when the timeout ends."""
        deadline = time.monotonic() + timeout_s
        task = self.get(task_id)
        while task.state not in TERMINAL_STATES:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            self._machine.wait_applied(self._machine.applied_index + 1, min(remaining, 0.5))
            task = self.get(task.id)
        return task

    def list_tasks(
        self,
        states: list[str] | None = None,
        task_type: str | None = None,
        workflow_id: str | None = None,
        node: str | None = None,
        limit: int = 100,
        after: PageKey | None = None,
        newest_first: bool = True,
        created: CreatedWindow | None = None,
        match: TaskMatch | None = None,
    ) -> TaskPage:
        check_states(states, TASK_STATES, "task")
        return self._reader.list_tasks(
            states, task_type, workflow_id, node, limit, after, newest_first, created, match
        )

    def cancel(self, task_id: str, reason: str = "") -> TaskWrite:
        task = self.get(task_id)
        task_id = task.id
        if task.state in TERMINAL_STATES:
            raise FailedPrecondition(f"task {task_id} is already {task.state}")
        entry = e.Entry.create(
            e.TaskCancel(task_id, reason or "cancelled by request"), self.node_id
        )
        result = self._proposer.propose_one(entry, self._timeout)
        written = self._committed(entry, task_id)
        if not result.get("ok") and written.task.state != "cancelled":
            raise refusal_error(result, f"task {task_id} could not be cancelled")
        return written

    def cancel_many(self, task_ids: list[str], reason: str = "") -> list[BulkOutcome]:
        """`cancel` for many tasks (full ids), proposed together: each is
        cancelled, left as it is (already terminal), or refused on its own."""
        return self._act_on_many(
            task_ids,
            lambda task: None if task.state in TERMINAL_STATES else e.TaskCancel(
                task.id, reason or "cancelled by request"),
        )  # fmt: skip

    def retry_dead_letter_many(self, task_ids: list[str]) -> list[BulkOutcome]:
        """`retry_dead_letter` for many tasks (full ids), proposed together;
        tasks no longer dead letters are left as they are."""
        return self._act_on_many(
            task_ids,
            lambda task: (
                e.TaskRetry(task.id, task.attempt, "retried from the dead-letter queue")
                if task.state == "dead_letter"
                else None
            ),
        )

    def _act_on_many(
        self, task_ids: list[str], payload_for: Callable[[TaskView], e.Payload | None]
    ) -> list[BulkOutcome]:
        outcomes: dict[str, BulkOutcome] = {}
        proposed: list[tuple[str, e.Entry]] = []
        for task_id in task_ids:
            task = self._reader.get_task(task_id)
            payload = payload_for(task) if task is not None else None
            if task is None:
                outcomes[task_id] = BulkOutcome(task_id, False, f"no task with id {task_id}")
            elif payload is None:
                outcomes[task_id] = BulkOutcome(task_id, False)
            else:
                proposed.append((task_id, e.Entry.create(payload, self.node_id)))
        for start in range(0, len(proposed), MAX_SUBMIT_BATCH):
            chunk = proposed[start : start + MAX_SUBMIT_BATCH]
            results = self._commit_together(
                [entry for _, entry in chunk],
                "the changes were not all committed within {timeout}; they may still be applied:"
                " list the tasks again before repeating",
            )
            for (task_id, _), result in zip(chunk, results, strict=True):
                ok = bool(result.get("ok"))
                error = "" if ok else str(refusal_error(result, f"task {task_id}"))
                outcomes[task_id] = BulkOutcome(task_id, ok, error)
        return [outcomes[task_id] for task_id in task_ids]

    def list_dead_letter(
        self,
        limit: int = 100,
        after: PageKey | None = None,
        newest_first: bool = True,
        created: CreatedWindow | None = None,
    ) -> TaskPage:
        return self.list_tasks(
            ["dead_letter"], limit=limit, after=after, newest_first=newest_first, created=created
        )

    def retry_dead_letter(self, task_id: str) -> DeadLetterRetry:
        """Queues a dead letter again with a fresh retry budget; a workflow
        task rejoins its running workflow or, once the workflow has failed,
        runs on its own (`cortex.state.dead_letters`)."""
        task = self.get(task_id)
        task_id = task.id
        if task.state != "dead_letter":
            raise FailedPrecondition(f"task {task_id} is {task.state}, not dead_letter")
        entry = e.Entry.create(
            e.TaskRetry(task_id, task.attempt, "retried from the dead-letter queue"), self.node_id
        )
        result = self._proposer.propose_one(entry, self._timeout)
        if not result.get("ok"):
            raise refusal_error(result, f"task {task_id} could not be retried")
        written = self._committed(entry, task_id)
        return DeadLetterRetry(
            written.task,
            written.raft_index,
            retry_budget=int(result.get("retry_budget", 0)),
            workflow_state=result.get("workflow_state"),
            rejoined_workflow=bool(result.get("rejoined", False)),
        )
