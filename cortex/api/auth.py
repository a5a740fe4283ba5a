"""Bearer-token authentication for the gRPC API. Node-to-node calls that carry
their own HMAC with the cluster secret (joining, resource reports) and the
standard health and reflection services stay open."""

from __future__ import annotations

import hmac
import os
from collections.abc import Callable
from typing import Any

import grpc

from cortex.errors import ConfigError

TOKEN_ENV = "CORTEX_API_TOKEN"
TOKEN_FILE_ENV = "CORTEX_API_TOKEN_FILE"
_SERVICE = "/cortex.v1.Cortex/"
_SELF_AUTHENTICATED = frozenset({"Heartbeat", "JoinCluster"})


def token_metadata(token: str | None) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {token}")] if token else []


def default_token() -> str | None:
    """$CORTEX_API_TOKEN, or what the file $CORTEX_API_TOKEN_FILE names holds
    (not both: ConfigError)."""
    from cortex.config import read_secret_file

    value = os.environ.get(TOKEN_ENV) or None
    path = os.environ.get(TOKEN_FILE_ENV) or None
    if value and path:
        raise ConfigError(f"{TOKEN_ENV} and {TOKEN_FILE_ENV} are both set; set one of them")
    return read_secret_file(path, TOKEN_FILE_ENV) if path else value


def bearer_token(value: str | bytes) -> bytes | None:
    """The token of an `Authorization: Bearer TOKEN` value; the scheme is
    case-insensitive (RFC 7235), as `bearer` or `BEARER` clients send it."""
    raw = value.encode() if isinstance(value, str) else value
    scheme, _, token = raw.strip().partition(b" ")
    if scheme.lower() != b"bearer":
        return None
    return token.strip() or None


class TokenAuthInterceptor(grpc.ServerInterceptor):  # type: ignore[misc]
    """Refuses Cortex calls of every kind (unary or streaming either way)
    without `authorization: Bearer <token>`."""

    def __init__(self, token: str) -> None:
        self._expected = token.encode()

    def _allowed(self, details: grpc.HandlerCallDetails) -> bool:
        method = details.method or ""
        if not method.startswith(_SERVICE) or method[len(_SERVICE) :] in _SELF_AUTHENTICATED:
            return True
        for key, value in details.invocation_metadata or ():
            if key == "authorization":
                given = bearer_token(value)
                return given is not None and hmac.compare_digest(given, self._expected)
        return False

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Any],
        details: grpc.HandlerCallDetails,
    ) -> Any:
        handler = continuation(details)
        if handler is None or self._allowed(details):
            return handler
        message = (
            f"missing or wrong API token for {details.method} "
            f"(set {TOKEN_ENV}, {TOKEN_FILE_ENV} or --token-file)"
        )

        def deny(request: Any, context: grpc.ServicerContext) -> Any:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

        def deny_stream(request: Any, context: grpc.ServicerContext) -> Any:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, message)
            yield  # pragma: no cover - abort raises

        kinds = {
            (False, False): (grpc.unary_unary_rpc_method_handler, deny),
            (False, True): (grpc.unary_stream_rpc_method_handler, deny_stream),
            (True, False): (grpc.stream_unary_rpc_method_handler, deny),
            (True, True): (grpc.stream_stream_rpc_method_handler, deny_stream),
        }
        make, behaviour = kinds[(handler.request_streaming, handler.response_streaming)]
        return make(
            behaviour,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
