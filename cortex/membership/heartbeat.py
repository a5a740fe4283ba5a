"""Every interval, samples this node's resources and reports them to every
node of the cluster over gRPC (itself directly), so any node — in particular
whichever is leader — can schedule and explain from current figures."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict

import grpc

from cortex.api.channels import connect_error, open_channel
from cortex.api.tls import ClientTls
from cortex.errors import TlsError
from cortex.membership.board import ResourceBoard
from cortex.membership.metrics import ResourceSampler
from cortex.scheduler.model import NodeResources
from cortex.state.queries import StateReader
from cortex.v1 import cortex_pb2 as pb
from cortex.v1 import cortex_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)


def heartbeat_proof(
    secret: str,
    node_id: str,
    sent_at_ms: int,
    resources: NodeResources,
    capabilities: dict[str, str],
    running_tasks: int,
) -> str:
    """HMAC over everything a heartbeat reports, so a captured one cannot be
    altered; receivers also refuse one not newer than the last they took."""
    body = json.dumps(
        [node_id, sent_at_ms, running_tasks, sorted(capabilities.items()), asdict(resources)],
        sort_keys=True,
        separators=(",", ":"),
        default=sorted,  # the frozenset of declared fields
    )
    message = b"heartbeat|" + body.encode()
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


class HeartbeatSender:
    def __init__(
        self,
        node_id: str,
        secret: str,
        sampler: ResourceSampler,
        board: ResourceBoard,
        reader: StateReader,
        running_tasks: Callable[[], int],
        capabilities: dict[str, str],
        interval_s: float = 2.0,
        tls: ClientTls | None = None,
    ) -> None:
        self._node_id = node_id
        self._secret = secret
        self._sampler = sampler
        self._board = board
        self._reader = reader
        self._running_tasks = running_tasks
        self._capabilities = capabilities
        self._interval_s = interval_s
        self._tls = tls
        self._stubs: dict[str, tuple[grpc.Channel, pb_grpc.CortexStub]] = {}
        self._in_flight: set[str] = set()
        # Nodes a TLS handshake failed with, warned about once until one works.
        self._tls_failed: set[str] = set()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="heartbeat")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._pool.shutdown(wait=False, cancel_futures=True)
        for channel, _ in self._stubs.values():
            channel.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.beat()
            except Exception:
                log.exception("heartbeat failed")
            self._stop.wait(self._interval_s)

    def beat(self) -> None:
        from cortex.api.convert import resources_from_proto, resources_to_proto

        resources = self._sampler.sample()
        running = self._running_tasks()
        self._board.record(self._node_id, resources, self._capabilities, running)
        sent_at = int(time.time() * 1000)
        request = pb.HeartbeatRequest(
            node_id=self._node_id,
            resources=resources_to_proto(resources),
            capabilities=self._capabilities,
            running_tasks=running,
            sent_at_ms=sent_at,
        )
        # Signed as the receiver will read it back from the message.
        request.proof = heartbeat_proof(
            self._secret, self._node_id, sent_at, resources_from_proto(request.resources),
            self._capabilities, running,
        )  # fmt: skip
        for node in self._reader.nodes():
            if node.id == self._node_id or node.status == "offline":
                continue
            with self._lock:
                if node.grpc_address in self._in_flight:
                    continue
                self._in_flight.add(node.grpc_address)
            self._pool.submit(self._send, node.grpc_address, request)

    def _send(self, address: str, request: pb.HeartbeatRequest) -> None:
        try:
            if address not in self._stubs:
                channel = open_channel(address, self._tls)
                self._stubs[address] = (channel, pb_grpc.CortexStub(channel))
            self._stubs[address][1].Heartbeat(request, timeout=max(self._interval_s, 1.0))
            with self._lock:
                self._tls_failed.discard(address)
        except grpc.RpcError as err:
            failed = connect_error(address, err.details() or "", self._tls)
            if isinstance(failed, TlsError):
                with self._lock:
                    first = address not in self._tls_failed
                    self._tls_failed.add(address)
                if first:
                    log.warning("heartbeats to %s fail: %s", address, failed)
            log.debug("heartbeat to %s failed: %s", address, err.code())
        finally:
            with self._lock:
                self._in_flight.discard(address)
