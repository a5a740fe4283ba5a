"""Starts a node's public gRPC server: cortex.v1.CortexService, joining
(cortex.internal.v1.JoinService, with the peer credential), health and
reflection, with admission control (cortex.api.admission) on CortexService
calls."""

from __future__ import annotations

import threading
from concurrent import futures
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from cortex.api import reflection
from cortex.api.admission import Admission, AdmissionInterceptor
from cortex.api.auth import PeerAuthInterceptor, TokenAuthInterceptor
from cortex.api.join_server import JOIN_SERVICE_PREFIX
from cortex.api.tls import ServerTls
from cortex.errors import ConfigError
from cortex.internal.v1 import peer_pb2_grpc
from cortex.v1 import cortex_pb2, cortex_pb2_grpc

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
CORTEX_SERVICE = "cortex.v1.CortexService"
CORTEX_SERVICE_PREFIX = f"/{CORTEX_SERVICE}/"
# Threads beyond the admission limit: health checks, reflection, joins, and
# refusing calls beyond the limit at once.
SPARE_THREADS = 8


class HealthService(health.HealthServicer):  # type: ignore[misc]
    """The standard health service with `List` too (grpcio-health-checking
    declares it but answers UNIMPLEMENTED, logging a traceback per call)."""

    def __init__(self) -> None:
        super().__init__()
        self._statuses: dict[str, Any] = {"": health_pb2.HealthCheckResponse.SERVING}
        self._statuses_lock = threading.Lock()
        self._frozen = False

    def set(self, service: str, status: Any) -> None:
        # Recorded before the base class takes its own lock: it calls back
        # into `set` while holding it during a graceful shutdown.
        with self._statuses_lock:
            if not self._frozen:
                self._statuses[service] = status
        super().set(service, status)

    def enter_graceful_shutdown(self) -> None:
        super().enter_graceful_shutdown()
        with self._statuses_lock:
            self._frozen = True

    def List(self, request: Any, context: grpc.ServicerContext) -> Any:
        """Every service's status, as `Check` reports each."""
        with self._statuses_lock:
            statuses = dict(self._statuses)
        return health_pb2.HealthListResponse(
            statuses={
                name: health_pb2.HealthCheckResponse(status=status)
                for name, status in statuses.items()
            }
        )


def serve(
    servicer: cortex_pb2_grpc.CortexServiceServicer,
    address: str,
    admission: Admission,
    api_token: str | None = None,
    tls: ServerTls | None = None,
    joins: peer_pb2_grpc.JoinServiceServicer | None = None,
    secret: str | None = None,
) -> grpc.Server:
    """Serves over TLS with `tls`, in plain text without it. The server has a
    thread for every call `admission` lets in and a few spare; a call that
    finds no thread is refused at once by gRPC, never queued. `joins`, when
    given, is served to callers holding the peer credential of `secret`."""
    threads = admission.capacity + SPARE_THREADS
    interceptors: list[grpc.ServerInterceptor] = [
        AdmissionInterceptor(admission, (CORTEX_SERVICE_PREFIX,))
    ]
    if api_token:
        # Outermost: a call without the token is refused before it counts.
        interceptors.insert(0, TokenAuthInterceptor(api_token))
    if joins is not None:
        if not secret:
            raise ValueError("serving joins needs the cluster secret")
        interceptors.insert(0, PeerAuthInterceptor(secret, (JOIN_SERVICE_PREFIX,)))
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="grpc"),
        interceptors=interceptors,
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.so_reuseport", 0),
        ],
        maximum_concurrent_rpcs=threads,
    )
    cortex_pb2_grpc.add_CortexServiceServicer_to_server(servicer, server)
    if joins is not None:
        peer_pb2_grpc.add_JoinServiceServicer_to_server(joins, server)
    health_servicer = HealthService()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    health_servicer.set(CORTEX_SERVICE, health_pb2.HealthCheckResponse.SERVING)
    enable_reflection(server)
    try:
        if tls is None:
            port = server.add_insecure_port(address)
        else:
            port = server.add_secure_port(address, tls.credentials())
    except RuntimeError as err:
        raise ConfigError(f"config key grpc: cannot listen on {address}: {err}") from None
    if port == 0:
        raise ConfigError(f"config key grpc: cannot listen on {address} (in use?)")
    server.start()
    return server


# -- reflection -----------------------------------------------------------------


def enable_reflection(server: grpc.Server) -> None:
    """Reflection (v1 and v1alpha) of the public service and health, with
    the proto's comments; never JoinService, though it is served here."""
    reflection.add_reflection_to_server(
        server,
        (
            cortex_pb2.DESCRIPTOR.services_by_name["CortexService"].full_name,
            health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
        ),
    )
