"""The public servicer over a real StateMachine, without a cluster: reads go
through the real operations and conversions, called with a stand-in for the
gRPC call context that turns an abort into an exception the test can
inspect."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import grpc

from cortex.api.consistency import ReadGate
from cortex.api.peer_client import PeerClient
from cortex.api.servicer import CortexServicer
from cortex.limit_operations import LimitOperations
from cortex.membership.board import ResourceBoard
from cortex.output import OutputHub, StreamingService
from cortex.schedules.operations import ScheduleOperations
from cortex.state import entries as e
from cortex.steps import completed
from cortex.task_operations import TaskOperations
from cortex.tracing import NO_TRACING, Tracer
from cortex.workflows.operations import WorkflowOperations
from tests.workflow_sim import WorkflowLog


class Aborted(Exception):
    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


class CallContext:
    """Stands in for grpc.ServicerContext."""

    def __init__(self, metadata: tuple[tuple[str, str], ...] = ()) -> None:
        self.headers: list[Any] = []
        self.metadata = metadata

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self.metadata

    def abort(self, code: grpc.StatusCode, message: str) -> None:
        raise Aborted(code, message)

    def time_remaining(self) -> float | None:
        return None

    def is_active(self) -> bool:
        return True

    def add_callback(self, callback: Callable[[], None]) -> bool:
        return True

    def set_trailing_metadata(self, metadata: Any) -> None:
        pass

    def send_initial_metadata(self, metadata: Any) -> None:
        self.headers.append(metadata)


class NoLeader:
    """The Raft view of a node that knows no leader."""

    is_leader = False
    leader_address = None
    raftCommitIndex = 0


class AppliesAtOnce:
    """The proposer the operations see: each entry, as proposed (its id
    kept), applied at the next index at once, like a committed entry on a
    one-node cluster."""

    def __init__(self, log: WorkflowLog) -> None:
        self._log = log

    def check_writable(self) -> None:
        pass

    def propose_one(self, entry: e.Entry, timeout: float = 10.0) -> dict[str, Any]:
        self._log.index += 1
        data = e.encode_batch([entry])
        self._log.batches.append((self._log.index, data))
        results = self._log.machine.apply_batch(self._log.index, data)
        assert results is not None
        return results[0]

    def submit_all(
        self, entries: list[e.Entry], request: bool = False
    ) -> Future[list[dict[str, Any]]]:
        """The entries as one batch, applied at the next index at once."""
        self._log.index += 1
        data = e.encode_batch(entries)
        self._log.batches.append((self._log.index, data))
        results = self._log.machine.apply_batch(self._log.index, data)
        assert results is not None
        return completed(results)


class ApiState:
    """A state machine fed by hand, and the servicer reading it."""

    def __init__(self, root: Path, tracer: Tracer = NO_TRACING) -> None:
        self.log = WorkflowLog(root / "state.db")
        machine, reader = self.log.machine, self.log.reader
        proposer: Any = AppliesAtOnce(self.log)
        tasks = TaskOperations(
            "n1", proposer, machine, reader, ResourceBoard(), lambda node: True, 1 << 20, 5.0,
            tracer=tracer,
        )  # fmt: skip
        self.workflows = WorkflowOperations("n1", proposer, machine, reader, 5.0, tracer=tracer)
        self.schedules = ScheduleOperations(
            "n1", proposer, reader, 5.0, 1 << 20, self.workflows.sandbox
        )
        limits = LimitOperations("n1", proposer, reader, 5.0)
        # One node that applies each entry as it is proposed: everything
        # committed is applied, so its read index is its applied index.
        reads = ReadGate("n1", machine, NoLeader(), lambda _: machine.applied_index, 1.0)
        self.peers = PeerClient("n1", "a-cluster-secret-of-some-length")
        self.streaming = StreamingService(
            "n1", machine.path, reader, OutputHub(root / "attempts"), self.peers
        )
        machine.add_listener(self.streaming.on_change)
        nobody: Any = None  # node administration and cluster status: not read here
        self.servicer = CortexServicer(
            tasks, self.workflows, nobody, nobody, reads, self.streaming,
            schedules=self.schedules, limits=limits,
        )  # fmt: skip

    def call(self, method: str, request: Any, metadata: tuple[tuple[str, str], ...] = ()) -> Any:
        return getattr(self.servicer, method)(request, CallContext(metadata))

    def stream(self, method: str, request: Any) -> list[Any]:
        return list(getattr(self.servicer, method)(request, CallContext()))

    def close(self) -> None:
        self.streaming.stop()
        self.peers.close()
        self.workflows.close()
        self.log.close()
