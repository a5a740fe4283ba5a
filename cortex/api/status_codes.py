"""Cortex errors as gRPC status codes, mapped once for every servicer of the
node: `maps_errors` (and `maps_stream_errors` for server streams) end a call
that raised with the status its error's kind maps to, or INTERNAL, logged,
for a bug."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import grpc

from cortex.api.channels import RETRY_AFTER_HEADER
from cortex.errors import (
    AlreadyExists,
    CortexError,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
    for_error,
)

log = logging.getLogger(__name__)

STATUS_FOR_ERROR: dict[type[CortexError], grpc.StatusCode] = {
    InvalidArgument: grpc.StatusCode.INVALID_ARGUMENT,
    NotFound: grpc.StatusCode.NOT_FOUND,
    FailedPrecondition: grpc.StatusCode.FAILED_PRECONDITION,
    AlreadyExists: grpc.StatusCode.ALREADY_EXISTS,
    Unavailable: grpc.StatusCode.UNAVAILABLE,
    Unauthenticated: grpc.StatusCode.UNAUTHENTICATED,
    ResourceExhausted: grpc.StatusCode.RESOURCE_EXHAUSTED,
}

Handler = TypeVar("Handler", bound=Callable[..., Any])


def status_for(err: CortexError) -> grpc.StatusCode:
    return for_error(err, STATUS_FOR_ERROR, grpc.StatusCode.INTERNAL)


def _abort(err: Exception, method: str, context: grpc.ServicerContext) -> None:
    """Ends the call with the status for a Cortex error, or INTERNAL for a bug."""
    if isinstance(err, ResourceExhausted):
        # A node busy further on (a relay's source): the caller's retry hint.
        context.set_trailing_metadata(
            ((RETRY_AFTER_HEADER, str(int(max(err.retry_after_s, 0.1) * 1000))),)
        )
    if isinstance(err, CortexError):
        context.abort(status_for(err), str(err))
    log.exception("%s failed", method)
    context.abort(grpc.StatusCode.INTERNAL, f"internal error in {method}; see node log")


def maps_errors(method: Handler) -> Handler:
    @functools.wraps(method)
    def wrapper(self: Any, request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return method(self, request, context)
        except Exception as err:
            _abort(err, method.__name__, context)

    return wrapper  # type: ignore[return-value]


def maps_stream_errors(method: Handler) -> Handler:
    """`maps_errors` for server streams: errors surface while iterating."""

    @functools.wraps(method)
    def wrapper(self: Any, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        try:
            yield from method(self, request, context)
        except Exception as err:
            _abort(err, method.__name__, context)

    return wrapper  # type: ignore[return-value]
