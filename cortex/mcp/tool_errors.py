"""What a failed call tells the agent: the node's message behind a short
prefix saying what kind of failure it is (`not found: no task with id
abc`), never a traceback and never the SDK's bare "Error executing tool"."""

from __future__ import annotations

import grpc
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError

from cortex.errors import (
    AlreadyExists,
    ConfigError,
    CortexError,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
    TlsError,
    Unauthenticated,
    Unavailable,
)
from cortex.mcp.arguments import argument_path, readable

__all__ = ["cortex_tool_error", "error_prefix", "validation_text"]

# Most specific first: a TlsError is an Unavailable too.
_PREFIXES: tuple[tuple[type[CortexError], str], ...] = (
    (TlsError, "unavailable (TLS)"),
    (InvalidArgument, "invalid argument"),
    (AlreadyExists, "already exists"),
    (NotFound, "not found"),
    (FailedPrecondition, "failed precondition"),
    (Unavailable, "unavailable"),
    (Unauthenticated, "unauthenticated"),
    (ResourceExhausted, "resource exhausted"),
    (ConfigError, "configuration error"),
)


def error_prefix(err: CortexError) -> str:
    """`not found`, `invalid argument`, ...: the kind of failure; for a gRPC
    status no Cortex error stands for (ALREADY_EXISTS, INTERNAL ...), the
    status itself in words."""
    for kind, prefix in _PREFIXES:
        if isinstance(err, kind):
            return prefix
    # The client raises its errors while handling the gRPC one.
    status = err.__context__
    if isinstance(status, grpc.RpcError) and isinstance(status, grpc.Call):
        return str(status.code().name).lower().replace("_", " ")
    return "error"


def cortex_tool_error(err: CortexError) -> ToolError:
    """The tool error for a failed call: `<kind>: <the node's message>`."""
    text = f"{error_prefix(err)}: {err}"
    if isinstance(err, ResourceExhausted) and err.retry_after_s:
        text += f" (retry after {err.retry_after_s:g} s)"
    return ToolError(readable(text))


def validation_text(err: ValidationError, prefix: tuple[str | int, ...] = ()) -> str:
    """One line per problem pydantic found, each naming the argument."""
    lines = []
    for problem in err.errors():
        where = argument_path([*prefix, *problem["loc"]]) or "arguments"
        lines.append(f"{where}: {problem['msg'].removeprefix('Value error, ')}")
    return readable("; ".join(lines))
