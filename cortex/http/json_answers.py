"""The JSON answers of the HTTP listener (the web API, login): a status, a
body and extra headers, and the one place Cortex errors become HTTP
statuses with `{"error": "..."}` bodies."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from cortex.errors import (
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

HTTP_STATUS_FOR_ERROR: dict[type[CortexError], HTTPStatus] = {
    InvalidArgument: HTTPStatus.BAD_REQUEST,
    Unauthenticated: HTTPStatus.UNAUTHORIZED,
    NotFound: HTTPStatus.NOT_FOUND,
    FailedPrecondition: HTTPStatus.CONFLICT,
    ResourceExhausted: HTTPStatus.TOO_MANY_REQUESTS,
    Unavailable: HTTPStatus.SERVICE_UNAVAILABLE,
}


@dataclass(frozen=True)
class ApiAnswer:
    status: HTTPStatus
    # Sent as JSON; nothing is sent for 204 No Content.
    body: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)


def error_answer(err: Exception, path: str, method: str = "GET") -> ApiAnswer:
    """The answer for an error: its status and `{"error": ...}`, with
    `parameter` when it names one (`cortex.http.api_requests.BadParameter`);
    500 for anything but a Cortex error, which is logged."""
    if not isinstance(err, CortexError):
        log.error("%s %s failed", method, path, exc_info=err)
        return ApiAnswer(
            HTTPStatus.INTERNAL_SERVER_ERROR,
            {"error": f"internal error serving {path}; see the node log"},
        )
    status = for_error(err, HTTP_STATUS_FOR_ERROR, HTTPStatus.INTERNAL_SERVER_ERROR)
    body: dict[str, Any] = {"error": str(err)}
    parameter = getattr(err, "parameter", None)
    if isinstance(parameter, str):
        body["parameter"] = parameter
    headers = {}
    if isinstance(err, ResourceExhausted):
        headers["Retry-After"] = str(max(int(err.retry_after_s + 0.999), 1))
    return ApiAnswer(status, body, headers)
