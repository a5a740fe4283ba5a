"""Every interval, samples this node's resources and reports them to every
node of the cluster on its peer listener (itself directly), so any node — in
particular whichever is leader — can schedule and explain from current
figures. Each report carries this process's boot id and a sequence number,
signed with the rest; the receiving end checks all three (signature, then
cortex.membership.freshness) before it takes the report.

The sender is a step (`cortex.steps`): it sends to every node at once
without waiting (each call is a future), and takes note of the outcomes as
they arrive; a node whose last report is still on its way is skipped."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import logging
import secrets
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import asdict, replace
from typing import Any, Protocol

from cortex.errors import CortexError, FailedPrecondition, TlsError, Unauthenticated
from cortex.membership.board import ResourceBoard
from cortex.membership.freshness import HeartbeatGuard, StaleHeartbeat
from cortex.membership.peer_calls import Heartbeat, PeerCalls
from cortex.scheduler.model import NodeResources
from cortex.state.queries import StateReader
from cortex.steps import SYSTEM_CLOCK, Clock, Sleep, Step, start_thread, wall_ms

log = logging.getLogger(__name__)

# Until every node it knows has taken a report from it, a starting node
# reports this often instead of every interval (for at most FIRST_REPORTS_MAX
# beats), so the leader does not place its first tasks knowing nothing of
# the nodes that are up.
FIRST_REPORTS_INTERVAL_S = 0.2
FIRST_REPORTS_MAX = 25


def _signed_resources(resources: NodeResources) -> dict[str, Any]:
    """The resources as a proof covers them: every measure a float, as it
    travels (a double), so a declared 4 and the 4.0 a receiver reads back
    sign alike."""

    def as_float(value: Any) -> Any:
        if isinstance(value, dict):
            return {name: as_float(item) for name, item in value.items()}
        if isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        return value

    return {name: as_float(value) for name, value in asdict(resources).items()}


def heartbeat_proof(secret: str, heartbeat: Heartbeat) -> str:
    """HMAC over everything a heartbeat says but its proof, so a captured one
    cannot be altered (its boot id, number and time included)."""
    body = json.dumps(
        [
            heartbeat.node_id, heartbeat.boot_id, heartbeat.seq, heartbeat.sent_at_ms,
            heartbeat.running_tasks, sorted(heartbeat.capabilities.items()),
            _signed_resources(heartbeat.resources),
        ],
        sort_keys=True,
        separators=(",", ":"),
        default=sorted,  # the frozenset of declared fields
    )  # fmt: skip
    message = b"heartbeat|" + body.encode()
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signed_heartbeat(
    secret: str,
    node_id: str,
    boot_id: str,
    seq: int,
    sent_at_ms: int,
    resources: NodeResources,
    capabilities: dict[str, str],
    running_tasks: int,
) -> Heartbeat:
    heartbeat = Heartbeat(
        node_id, boot_id, seq, sent_at_ms, resources, dict(capabilities), running_tasks
    )
    return replace(heartbeat, proof=heartbeat_proof(secret, heartbeat))


class HeartbeatReceiver:
    """Takes other nodes' reports onto the board: signed with the secret, and
    neither a replay nor stale. Refusals are logged once per sender until
    one of its reports is taken again."""

    def __init__(
        self, secret: str, board: ResourceBoard, window_s: float, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self._secret = secret
        self._board = board
        self.guard = HeartbeatGuard(window_s, clock)
        self._refusing: set[str] = set()
        self._lock = threading.Lock()

    def receive(self, heartbeat: Heartbeat) -> None:
        """Raises Unauthenticated (not signed with the secret) or StaleHeartbeat."""
        expected = heartbeat_proof(self._secret, heartbeat)
        proof = heartbeat.proof
        if not proof or not hmac.compare_digest(expected, proof):
            raise Unauthenticated("heartbeat refused: not signed with this cluster's secret")
        node_id = heartbeat.node_id
        try:
            self.guard.admit(node_id, heartbeat.boot_id, heartbeat.seq, heartbeat.sent_at_ms)
        except StaleHeartbeat as err:
            with self._lock:
                first = node_id not in self._refusing
                self._refusing.add(node_id)
            if first:
                log.warning("refusing heartbeats: %s", err)
            raise
        with self._lock:
            self._refusing.discard(node_id)
        self._board.record(
            node_id,
            heartbeat.resources,
            heartbeat.capabilities,
            heartbeat.running_tasks,
            heartbeat.sent_at_ms,
        )


class Sampler(Protocol):
    """This node's resources now: `cortex.membership.metrics.ResourceSampler`
    measures them; a simulated node makes them up."""

    def sample(self) -> NodeResources: ...


class HeartbeatSender:
    def __init__(
        self,
        node_id: str,
        secret: str,
        sampler: Sampler,
        board: ResourceBoard,
        reader: StateReader,
        running_tasks: Callable[[], int],
        capabilities: dict[str, str],
        peers: PeerCalls,
        interval_s: float = 2.0,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._node_id = node_id
        self._secret = secret
        self._sampler = sampler
        self._board = board
        self._reader = reader
        self._running_tasks = running_tasks
        self._capabilities = capabilities
        self._peers = peers
        self._interval_s = interval_s
        self._clock = clock
        self.boot_id = secrets.token_hex(16)
        self._seq = itertools.count(1)
        self._in_flight: set[str] = set()
        # Nodes that have taken a report from this process.
        self._reached: set[str] = set()
        # Nodes refusing this node's reports (TLS, stale), warned about once
        # until one is taken again.
        self._refused: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def start(self) -> None:
        start_thread("heartbeat", self.main(), self._stop)

    def set_capabilities(self, capabilities: dict[str, str]) -> None:
        """What the next reports advertise (an executor usable since the start)."""
        self._capabilities = dict(capabilities)

    def stop(self) -> None:
        self._stop.set()

    def main(self) -> Step[None]:
        """Reports every interval (more often at first, while some node has
        taken none); outcomes are taken as they arrive."""
        quick_beats = FIRST_REPORTS_MAX
        while not self._stop.is_set():
            try:
                self.beat()
            except Exception:
                log.exception("heartbeat failed")
            if quick_beats and not self.reached_all():
                quick_beats -= 1
                yield Sleep(min(FIRST_REPORTS_INTERVAL_S, self._interval_s))
            else:
                quick_beats = 0
                yield Sleep(self._interval_s)

    def reached_all(self) -> bool:
        """Whether this node is registered and every other node it sends to
        has taken a report from this process."""
        nodes = self._reader.nodes()
        if not any(node.id == self._node_id for node in nodes):
            return False
        with self._lock:
            return all(
                node.peer_address in self._reached
                for node in nodes
                if node.id != self._node_id and node.status != "offline"
            )

    def beat(self) -> list[Future[None]]:
        """Samples, records and sends one report to every node not still
        busy with the last one; returns the calls sent."""
        resources = self._sampler.sample()
        running = self._running_tasks()
        self._board.record(self._node_id, resources, self._capabilities, running)
        heartbeat = signed_heartbeat(
            self._secret, self._node_id, self.boot_id, next(self._seq),
            wall_ms(self._clock), resources, self._capabilities, running,
        )  # fmt: skip
        sent = []
        for node in self._reader.nodes():
            # A node that has not announced its peer listener yet is skipped.
            if node.id == self._node_id or node.status == "offline" or not node.peer_address:
                continue
            with self._lock:
                if node.peer_address in self._in_flight:
                    continue
                self._in_flight.add(node.peer_address)
            sent.append(self._send(node.peer_address, heartbeat))
        return sent

    def _send(self, address: str, heartbeat: Heartbeat) -> Future[None]:
        try:
            call = self._peers.heartbeat(address, heartbeat, max(self._interval_s, 1.0))
        except Exception as err:
            # A PeerCalls that raises instead of failing its future.
            call = Future()
            call.set_exception(err)
        call.add_done_callback(lambda done: self._delivered(address, done))
        return call

    def _delivered(self, address: str, call: Future[None]) -> None:
        """Takes note of one call's outcome (on whatever thread it ends)."""
        try:
            err = CortexError("the call was cancelled") if call.cancelled() else call.exception()
            if err is None:
                with self._lock:
                    self._refused.discard(address)
                    self._reached.add(address)
                return
            if isinstance(err, TlsError | FailedPrecondition | Unauthenticated):
                with self._lock:
                    first = address not in self._refused
                    self._refused.add(address)
                if first:
                    log.warning("heartbeats to %s are refused: %s", address, err)
            if isinstance(err, CortexError):
                log.debug("heartbeat to %s not sent: %s", address, err)
            else:
                log.error("heartbeat to %s failed", address, exc_info=err)
        finally:
            with self._lock:
                self._in_flight.discard(address)
