"""Each workflow's run as one span, from its submission to its end, recorded
when it ends by the node that led when the end was applied: so once in the
normal case (a change of leader right then may lose it), whichever node took
the submission. Its times come from the replicated record and its span id
from the workflow's run context, chosen at submission: the span its tasks'
attempts and its condition evaluations already hang off."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from cortex.state.queries import StateReader
from cortex.state.task_states import TERMINAL_STATES
from cortex.state.transitions import TaskChange
from cortex.state.workflow_queries import WorkflowEnding
from cortex.steps import Signal, Step, WaitSignal, start_thread
from cortex.tracing import Tracer
from cortex.tracing.spans import RUN_WORKFLOW, WORKFLOW_ID, WORKFLOW_NAME, WORKFLOW_STATE

log = logging.getLogger(__name__)

_NS_PER_MS = 1_000_000


class WorkflowRunSpans:
    def __init__(
        self,
        tracer: Tracer,
        reader: StateReader,
        is_leader: Callable[[], bool],
        interval_s: float = 1.0,
    ) -> None:
        self._tracer = tracer
        self._reader = reader
        self._is_leader = is_leader
        self._interval_s = interval_s
        self._lock = threading.Lock()
        # Raft indexes applied while this node led that ended tasks (and so
        # perhaps workflows), and the last index applied.
        self._led: set[int] = set()
        self._seen = 0
        # The index a snapshot brought the state to, if one did since the
        # last round: the audit log read so far is gone.
        self._restored: int | None = None
        self._wake = Signal()
        self._stop = threading.Event()

    def on_change(self, index: int, changes: list[TaskChange]) -> None:
        """State listener (Raft thread): notes the indexes that may have ended
        workflows while this node leads."""
        with self._lock:
            self._seen = index
            if not changes:
                self._restored = index
                self._led.clear()
            elif any(c.state in TERMINAL_STATES for c in changes) and self._is_leader():
                self._led.add(index)
                self._wake.set()

    def start(self) -> None:
        start_thread("workflow-spans", self.main(), self._stop)

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def main(self) -> Step[None]:
        cursor = self._reader.last_event_seq()
        while not self._stop.is_set():
            yield WaitSignal(self._wake, self._interval_s)
            try:
                cursor = self.round(cursor)
            except Exception:
                log.exception("workflow spans not recorded")

    def round(self, cursor: int) -> int:
        """Records the runs that ended at indexes this node led, in the
        events after position `cursor`; returns the position read up to."""
        with self._lock:
            led, self._led = self._led, set()
            bound, restored, self._restored = self._seen, self._restored, None
        if restored is not None:
            cursor = self._reader.last_event_seq(restored)
        endings, cursor = self._reader.workflow_endings(cursor, bound)
        for ending in endings:
            if ending.raft_index in led:
                self._record(ending)
        return cursor

    def _record(self, ending: WorkflowEnding) -> None:
        workflow = self._reader.get_workflow(ending.workflow_id, with_tasks=False)
        if workflow is None:
            return  # purged meanwhile
        self._tracer.record(
            RUN_WORKFLOW,
            workflow.traceparent,
            workflow.created_at * _NS_PER_MS,
            ending.ts * _NS_PER_MS,
            {
                WORKFLOW_ID: workflow.id,
                WORKFLOW_NAME: workflow.name,
                WORKFLOW_STATE: ending.state,
            },
            error=(workflow.error or "failed") if ending.state == "failed" else None,
            context=workflow.run_traceparent,
        )
