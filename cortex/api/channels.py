"""The one place gRPC channels to nodes are opened: over TLS when the caller
has TLS settings, in plain text otherwise. A connection that fails becomes
an error naming the likely cause, a TLS mismatch included."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import grpc

from cortex.api.tls import TLS_CA_ENV, TLS_CERT_ENV, TLS_KEY_ENV, TLS_SERVER_NAME_ENV, ClientTls
from cortex.errors import (
    AlreadyExists,
    CortexError,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
    TlsError,
    Unauthenticated,
    Unavailable,
)

_VERIFY_REASON = re.compile(r"CERTIFICATE_VERIFY_FAILED:\s*([^:]+)")
# Trailing metadata of a call refused by a busy node (cortex.api.admission).
RETRY_AFTER_HEADER = "cortex-retry-after-ms"
# Request metadata carrying the caller's trace context (W3C Trace Context).
TRACEPARENT_HEADER = "traceparent"
_GRPC_CONCURRENCY_REFUSAL = "Concurrent RPC limit exceeded!"
GRPC_REFUSAL_RETRY_S = 0.2

_STATUS_BY_NUMBER = {status.value[0]: status for status in grpc.StatusCode}
_ERROR_FOR_STATUS: dict[grpc.StatusCode, type[CortexError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.DEADLINE_EXCEEDED: Unavailable,
}


def status_code(number: int) -> grpc.StatusCode:
    """The status a code's number stands for (UNKNOWN for none)."""
    return _STATUS_BY_NUMBER.get(number, grpc.StatusCode.UNKNOWN)


def error_for_status(status: grpc.StatusCode, detail: str) -> CortexError:
    """The Cortex exception a node's refusal with `status` stands for."""
    return _ERROR_FOR_STATUS.get(status, CortexError)(detail)


def open_channel(
    address: str, tls: ClientTls | None, options: Sequence[tuple[str, Any]] = ()
) -> grpc.Channel:
    """A channel to `address`: TLS with `tls`, plain text when it is None."""
    if tls is None:
        return grpc.insecure_channel(address, options=list(options))
    return grpc.secure_channel(address, tls.credentials(), options=[*options, *tls.options()])


def connect_error(address: str, detail: str, tls: ClientTls | None) -> CortexError | None:
    """The error for an UNAVAILABLE call that never connected to `address`;
    None when `detail` is not gRPC's own "failed to connect" (a node's answer
    may quote one from a call it made further on)."""
    lowered = detail.lower()
    if not lowered.startswith("failed to connect"):
        return None
    if tls is None:
        if "socket closed" in lowered:
            return Unavailable(
                f"cannot reach a Cortex node at {address}: it closed the connection, as a node "
                f"serving TLS does to a plain-text client; if it uses TLS, pass --tls-ca or set "
                f"{TLS_CA_ENV} ({detail})"
            )
        return Unavailable(f"cannot reach a Cortex node at {address} ({detail})")
    if "certificate_verify_failed" in lowered:
        match = _VERIFY_REASON.search(detail)
        reason = match.group(1).strip() if match else detail
        return TlsError(
            f"the TLS certificate of the node at {address} is not trusted by {tls.ca_source} "
            f"({reason}); {TLS_CA_ENV} (--tls-ca) must be the CA that signed it"
        )
    if "hostname verification" in lowered:
        host = tls.server_name or address.rpartition(":")[0]
        return TlsError(
            f"the TLS certificate of the node at {address} does not name {host}; set "
            f"{TLS_SERVER_NAME_ENV} to a name it holds, or reissue it for this address"
        )
    if "wrong_version_number" in lowered:
        return TlsError(
            f"the node at {address} does not serve TLS; connect without {TLS_CA_ENV} "
            "(--tls-ca), or start the node with --tls-cert and --tls-key"
        )
    if "socket closed" in lowered or "handshake" in lowered:
        hint = (
            f"the node may not accept this client's certificate ({TLS_CERT_ENV})"
            if tls.cert_pem
            else f"if the node requires client certificates, set {TLS_CERT_ENV} and {TLS_KEY_ENV}"
        )
        return TlsError(f"the TLS handshake with the node at {address} failed: {hint} ({detail})")
    return Unavailable(f"cannot reach a Cortex node at {address} ({detail})")


def retry_after_s(err: grpc.RpcError) -> float | None:
    """The retry hint of a call a busy node refused; None for any other error
    (RESOURCE_EXHAUSTED also means a message too large, which no retry fixes)."""
    if err.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
        return None
    trailing = getattr(err, "trailing_metadata", None)
    for key, value in (trailing() if trailing else None) or ():
        if key == RETRY_AFTER_HEADER:
            try:
                return max(int(value), 0) / 1000
            except ValueError:
                return None
    # gRPC's own refusal when every thread of the server is taken (a node's
    # limits keep this rare): no hint, but just as safe to retry.
    if err.details() == _GRPC_CONCURRENCY_REFUSAL:
        return GRPC_REFUSAL_RETRY_S
    return None


def rpc_error(address: str, err: grpc.RpcError, tls: ClientTls | None) -> CortexError:
    """The Cortex exception for a failed call to `address`, with the node's
    message; one that never connected says why, naming TLS when a handshake
    is the likely cause."""
    code = err.code()
    detail = err.details() or str(code)
    if code == grpc.StatusCode.UNAVAILABLE:
        failed = connect_error(address, detail, tls)
        if failed is not None:
            return failed
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        hint = retry_after_s(err)
        if hint is not None:
            return ResourceExhausted(detail, hint)
    return error_for_status(code, detail)
