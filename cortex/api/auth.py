"""Authentication for the gRPC listeners. The public API (CortexService)
takes a bearer token; the standard health and reflection services stay
open. Node-to-node calls carry the peer credential, derived from the
cluster secret: every call on the peer listener, and joining
(JoinService), which the public port serves too."""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Callable, Sequence
from typing import Any

import grpc

from cortex.errors import ConfigError

TOKEN_ENV = "CORTEX_API_TOKEN"
TOKEN_FILE_ENV = "CORTEX_API_TOKEN_FILE"
_SERVICE = "/cortex.v1.CortexService/"
PEER_AUTH_HEADER = "cortex-peer-auth"


def token_metadata(token: str | None) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {token}")] if token else []


def default_token() -> str | None:
    """$CORTEX_API_TOKEN, or what the file $CORTEX_API_TOKEN_FILE names holds
    (not both: ConfigError)."""
    from cortex.defaults import read_secret_file

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


def peer_token(secret: str) -> str:
    """The credential every node-to-node call carries: derived from the
    cluster secret (never the secret itself), the same on every node."""
    return hmac.new(secret.encode(), b"cortex peer listener v1", hashlib.sha256).hexdigest()


def peer_metadata(secret: str) -> tuple[tuple[str, str], ...]:
    return ((PEER_AUTH_HEADER, peer_token(secret)),)


def refusing_handler(
    handler: grpc.RpcMethodHandler, code: grpc.StatusCode, message: str
) -> grpc.RpcMethodHandler:
    """A handler of the same kind as `handler` that ends every call with
    `code` (so streaming calls, either way, are refused too)."""

    def deny(request: Any, context: grpc.ServicerContext) -> Any:
        context.abort(code, message)

    def deny_stream(request: Any, context: grpc.ServicerContext) -> Any:
        context.abort(code, message)
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


class TokenAuthInterceptor(grpc.ServerInterceptor):  # type: ignore[misc]
    """Refuses Cortex calls of every kind (unary or streaming either way)
    without `authorization: Bearer <token>`."""

    def __init__(self, token: str) -> None:
        self._expected = token.encode()

    def _allowed(self, details: grpc.HandlerCallDetails) -> bool:
        if not (details.method or "").startswith(_SERVICE):
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
        return refusing_handler(handler, grpc.StatusCode.UNAUTHENTICATED, message)


class PeerAuthInterceptor(grpc.ServerInterceptor):  # type: ignore[misc]
    """The gate of node-to-node calls: every call needs the peer credential
    (compared in constant time) — on the peer listener every call of every
    service; given `prefixes` (e.g. "/cortex.internal.v1.JoinService/"),
    only the calls of those services, others passing untouched."""

    def __init__(self, secret: str, prefixes: Sequence[str] | None = None) -> None:
        self._expected = peer_token(secret).encode()
        self._prefixes = None if prefixes is None else tuple(prefixes)

    def _allowed(self, details: grpc.HandlerCallDetails) -> bool:
        if self._prefixes is not None and not (details.method or "").startswith(self._prefixes):
            return True
        for key, value in details.invocation_metadata or ():
            if key == PEER_AUTH_HEADER:
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
        message = (
            f"{details.method} is a node-to-node call: it needs the peer credential of this "
            "cluster, derived from its secret (clients call cortex.v1.CortexService)"
        )
        return refusing_handler(handler, grpc.StatusCode.UNAUTHENTICATED, message)
