"""Bearer-token authentication for the gRPC API. Node-to-node calls that carry
their own HMAC with the cluster secret (joining, resource reports) and the
standard health and reflection services stay open."""

from __future__ import annotations

import hmac
import os
from collections.abc import Callable
from typing import Any

import grpc

TOKEN_ENV = "CORTEX_API_TOKEN"
_SERVICE = "/cortex.v1.Cortex/"
_SELF_AUTHENTICATED = frozenset({"Heartbeat", "JoinCluster"})


def token_metadata(token: str | None) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {token}")] if token else []


def default_token() -> str | None:
    return os.environ.get(TOKEN_ENV) or None


class TokenAuthInterceptor(grpc.ServerInterceptor):  # type: ignore[misc]
    """Refuses Cortex calls without `authorization: Bearer <token>`."""

    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()

    def _allowed(self, details: grpc.HandlerCallDetails) -> bool:
        method = details.method or ""
        if not method.startswith(_SERVICE) or method[len(_SERVICE) :] in _SELF_AUTHENTICATED:
            return True
        for key, value in details.invocation_metadata or ():
            if key == "authorization":
                given = value.encode() if isinstance(value, str) else value
                return hmac.compare_digest(given, self._expected)
        return False

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Any],
        details: grpc.HandlerCallDetails,
    ) -> Any:
        handler = continuation(details)
        if handler is None or self._allowed(details):
            return handler
        message = f"missing or wrong API token for {details.method} (set {TOKEN_ENV} or --token)"

        def deny(request: Any, context: grpc.ServicerContext) -> Any:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

        def deny_stream(request: Any, context: grpc.ServicerContext) -> Any:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, message)
            yield  # pragma: no cover - abort raises

        kinds = {
            (False, False): grpc.unary_unary_rpc_method_handler,
            (False, True): grpc.unary_stream_rpc_method_handler,
        }
        make = kinds.get((handler.request_streaming, handler.response_streaming))
        if make is None:
            return handler
        return make(
            deny_stream if handler.response_streaming else deny,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
