"""The latest resource report of every node, held in memory on every node
(reports are not Raft entries)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from cortex.scheduler.model import NodeResources
from cortex.steps import SYSTEM_CLOCK, Clock


@dataclass(frozen=True)
class NodeReport:
    node_id: str
    resources: NodeResources
    capabilities: dict[str, str] = field(default_factory=dict)
    running_tasks: int = 0
    received_at: float = 0.0  # the board's clock.monotonic() on this node
    sent_at_ms: int = 0  # the sender's clock


class ResourceBoard:
    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock
        self._reports: dict[str, NodeReport] = {}
        self._lock = threading.Lock()

    def record(
        self,
        node_id: str,
        resources: NodeResources,
        capabilities: dict[str, str],
        running_tasks: int,
        sent_at_ms: int = 0,
    ) -> None:
        """Takes the report; whether a received one may be taken at all is
        the HeartbeatGuard's to say, before."""
        report = NodeReport(
            node_id,
            resources,
            dict(capabilities),
            running_tasks,
            self._clock.monotonic(),
            sent_at_ms,
        )
        with self._lock:
            self._reports[node_id] = report

    def get(self, node_id: str) -> NodeReport | None:
        with self._lock:
            return self._reports.get(node_id)

    def all(self) -> dict[str, NodeReport]:
        with self._lock:
            return dict(self._reports)

    def age_s(self, report: NodeReport) -> float:
        """How long ago this board took the report."""
        return self._clock.monotonic() - report.received_at
