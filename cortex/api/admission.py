"""Admission control for a gRPC listener. Every call holds one of the
server's threads for as long as it runs, and a call that finds none free
waits in a queue where nobody sees it. So a listener takes at most as many
calls as it has threads for, and answers the rest at once with
RESOURCE_EXHAUSTED and a retry hint in the trailing metadata: never a queued
call. Long-held calls (server streams, `GetTaskResult` with `wait`) also
count against their own, smaller, limits, so they cannot take every thread
from short calls."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc

from cortex.api.auth import refusing_handler
from cortex.api.channels import RETRY_AFTER_HEADER
from cortex.errors import ResourceExhausted

# Trailing metadata of a refusal, besides the retry hint: which limit was
# hit (requests, streams or waits).
BUSY_HEADER = "cortex-busy"

REQUESTS = "requests"
STREAMS = "streams"
WAITS = "waits"


class Slots:
    """A count of calls in progress with a limit; taking never blocks."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._in_use = 0

    @property
    def in_use(self) -> int:
        with self._lock:
            return self._in_use

    def take(self) -> bool:
        """Takes a slot, if one is free."""
        with self._lock:
            if self._in_use >= self.limit:
                return False
            self._in_use += 1
            return True

    def give_back(self) -> None:
        with self._lock:
            self._in_use = max(self._in_use - 1, 0)


@dataclass(frozen=True)
class Limit:
    slots: Slots
    # How a refusal describes `n` calls in progress, e.g. "56 requests in flight".
    describe: Callable[[int], str]
    config_key: str
    advice: str
    retry_after_s: float


class Admission:
    """The limits of one listener: an overall one (optional) and one per kind
    of long-held call. `enter` takes a slot of each that applies or raises
    ResourceExhausted, taking none."""

    def __init__(self, node_id: str, limits: dict[str, Limit]) -> None:
        self._node_id = node_id
        self.limits = limits
        self._lock = threading.Lock()
        # Calls refused so far, by the limit they hit.
        self.refused: dict[str, int] = dict.fromkeys(limits, 0)

    def enter(self, kind: str) -> Callable[[], None]:
        """Admits a call of `kind`; returns what releases it."""
        taken: list[Slots] = []
        for name in dict.fromkeys((kind, REQUESTS)):
            limit = self.limits.get(name)
            if limit is None:
                continue
            if not limit.slots.take():
                for slots in taken:
                    slots.give_back()
                with self._lock:
                    self.refused[name] += 1
                raise ResourceExhausted(
                    f"node {self._node_id} busy: {limit.describe(limit.slots.limit)} "
                    f"(config key {limit.config_key}); {limit.advice}",
                    limit.retry_after_s,
                    name,
                )
            taken.append(limit.slots)

        def release() -> None:
            # list.pop is atomic: a second call gives nothing back twice.
            while taken:
                try:
                    slots = taken.pop()
                except IndexError:
                    return
                slots.give_back()

        return release

    @property
    def capacity(self) -> int:
        """The most calls admitted at once."""
        overall = self.limits.get(REQUESTS)
        if overall is not None:
            return overall.slots.limit
        return sum(limit.slots.limit for limit in self.limits.values())

    def in_use(self, kind: str) -> int:
        limit = self.limits.get(kind)
        return limit.slots.in_use if limit else 0


def public_admission(
    node_id: str, max_inflight_requests: int, max_streams: int, max_waits: int
) -> Admission:
    """The public listener's limits: every client call, and within them
    server streams and waits."""
    return Admission(
        node_id,
        {
            REQUESTS: Limit(
                Slots(max_inflight_requests),
                lambda n: f"{n} requests in flight",
                "max_inflight_requests",
                "retry",
                0.2,
            ),
            STREAMS: Limit(
                Slots(max_streams),
                lambda n: f"{n} output and event streams open",
                "max_streams",
                "retry later or ask another node",
                1.0,
            ),
            WAITS: Limit(
                Slots(max_waits),
                lambda n: f"{n} calls waiting for a task result",
                "max_waits",
                "retry later, or poll without wait",
                1.0,
            ),
        },
    )


def peer_admission(node_id: str, max_streams: int) -> Admission:
    """The peer listener's limits: output streams relayed to other nodes;
    short calls (heartbeats) are left to the threads kept beyond them."""
    return Admission(
        node_id,
        {
            STREAMS: Limit(
                Slots(max_streams),
                lambda n: f"{n} output streams relayed to other nodes",
                "max_streams",
                "retry later",
                1.0,
            )
        },
    )


def call_kind(method: str, request: Any, response_streaming: bool) -> str:
    """Which limit a call counts against besides the overall one."""
    if response_streaming:
        return STREAMS
    if method.endswith("/GetTaskResult") and getattr(request, "wait", False):
        return WAITS
    return REQUESTS


def _refuse(context: grpc.ServicerContext, busy: ResourceExhausted) -> None:
    context.set_trailing_metadata(
        (
            (RETRY_AFTER_HEADER, str(int(busy.retry_after_s * 1000))),
            (BUSY_HEADER, busy.limit),
        )
    )
    context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(busy))


class AdmissionInterceptor(grpc.ServerInterceptor):  # type: ignore[misc]
    """Applies an Admission to the methods of the services named by
    `prefixes` (e.g. "/cortex.v1.CortexService/"); others (health,
    reflection, joins) pass untouched. Admission happens in the call's own thread, once the
    request is read: a call gRPC never hands a thread cannot leak a slot."""

    def __init__(self, admission: Admission, prefixes: tuple[str, ...]) -> None:
        self._admission = admission
        self._prefixes = prefixes

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Any],
        details: grpc.HandlerCallDetails,
    ) -> Any:
        handler = continuation(details)
        method = details.method or ""
        if handler is None or not method.startswith(self._prefixes):
            return handler
        if handler.request_streaming:
            # No Cortex call streams requests; refused, so none escapes the limits.
            return refusing_handler(
                handler, grpc.StatusCode.UNIMPLEMENTED, f"{method} is not served here"
            )
        admission = self._admission
        if handler.response_streaming:
            behaviour = handler.unary_stream

            def stream(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
                kind = call_kind(method, request, True)
                try:
                    release = admission.enter(kind)
                except ResourceExhausted as busy:
                    _refuse(context, busy)
                try:
                    yield from behaviour(request, context)
                finally:
                    release()

            return grpc.unary_stream_rpc_method_handler(
                stream,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        unary = handler.unary_unary

        def call(request: Any, context: grpc.ServicerContext) -> Any:
            kind = call_kind(method, request, False)
            try:
                release = admission.enter(kind)
            except ResourceExhausted as busy:
                _refuse(context, busy)
            try:
                return unary(request, context)
            finally:
                release()

        return grpc.unary_unary_rpc_method_handler(
            call,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
