"""The error a caller gets when `apply` refused its proposal: the reason's
code (cortex/state/reasons.py) picks the error type, so the gRPC status, MCP
tool error and CLI message follow; the message keeps the whole reason
("code: text") after what was being done."""

from __future__ import annotations

from typing import Any

from cortex.errors import (
    AlreadyExists,
    CortexError,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
)
from cortex.state import reasons as r

_ERROR_FOR_CODE: dict[str, type[CortexError]] = {
    r.INVALID_ENTRY: InvalidArgument,
    r.INVALID_PAYLOAD: InvalidArgument,
    r.INVALID_SPEC: InvalidArgument,
    r.INVALID_WORKFLOW: InvalidArgument,
    r.UNKNOWN_TASK: NotFound,
    r.UNKNOWN_NODE: NotFound,
    r.UNKNOWN_WORKFLOW: NotFound,
    r.DUPLICATE_ID: FailedPrecondition,
    r.STALE_REPORT: FailedPrecondition,
    r.ILLEGAL_TRANSITION: FailedPrecondition,
    r.IDEMPOTENCY_CONFLICT: AlreadyExists,
    r.LIMIT_REACHED: FailedPrecondition,
    r.UNKNOWN_SCHEDULE: NotFound,
    r.INVALID_SCHEDULE: InvalidArgument,
    r.NAME_TAKEN: AlreadyExists,
}


def refusal_error(result: dict[str, Any], doing: str) -> CortexError:
    """`doing` says what failed ("task t1 could not be cancelled"). A reason
    without a known code is a plain `CortexError`, reported as an internal
    error."""
    reason = str(result.get("reason") or "refused")
    return _ERROR_FOR_CODE.get(r.reason_code(reason), CortexError)(f"{doing}: {reason}")
