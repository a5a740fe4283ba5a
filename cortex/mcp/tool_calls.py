"""The MCP server the tools run in: a call's arguments are checked against
the tool's published input schema before the tool runs (so a bad argument
never reaches a node), and every failure reaches the agent as a tool error
it can read: what went wrong and where, never the SDK's bare "Error
executing tool X"; the server keeps serving."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
from mcp_types import CallToolResult, InputRequiredResult
from pydantic import ConfigDict, ValidationError

from cortex.mcp.arguments import argument_problems, readable
from cortex.mcp.tool_errors import validation_text

__all__ = ["CheckedServer", "strict_tool"]

log = logging.getLogger(__name__)


def strict_tool(fn: Callable[..., Any]) -> Tool:
    """The tool for `fn`, its input schema (and the model the SDK checks
    arguments with) refusing arguments the function does not take."""
    tool = Tool.from_function(fn)
    loose = tool.fn_metadata.arg_model
    strict: type[ArgModelBase] = type(
        loose.__name__,
        (loose,),
        {"model_config": ConfigDict(extra="forbid"), "__module__": loose.__module__},
    )
    return tool.model_copy(
        update={
            "parameters": strict.model_json_schema(by_alias=True),
            "fn_metadata": tool.fn_metadata.model_copy(update={"arg_model": strict}),
        }
    )


class CheckedServer(MCPServer):
    """An `MCPServer` whose tools are `tools`, each call checked first."""

    def __init__(self, tools: Sequence[Tool], **settings: Any) -> None:
        super().__init__(tools=list(tools), **settings)
        self._checked = {tool.name: tool for tool in tools}

    def problems(self, name: str, arguments: dict[str, Any]) -> list[str]:
        """What is wrong with `arguments` for tool `name`, one line each."""
        tool = self._checked[name]
        # JSON text for a list or object argument is taken as that value, as
        # the SDK does (some clients send them so).
        return argument_problems(tool.parameters, tool.fn_metadata.pre_parse_json(arguments))

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        if name not in self._checked:
            known = ", ".join(sorted(self._checked))
            raise ToolError(readable(f"unknown tool {name!r} (tools: {known})"))
        problems = self.problems(name, arguments)
        if problems:
            raise ToolError(readable("; ".join(problems)))
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError as err:
            cause = err.__cause__
            log.error("tool %s failed", name, exc_info=cause)
            raise ToolError(
                readable(f"{name} failed: internal error ({type(cause).__name__}: {cause})")
            ) from cause
        except ToolError as err:
            # The SDK puts "Error executing tool X: " before the tool's own message.
            cause = err.__cause__
            if isinstance(cause, ValidationError):
                raise ToolError(validation_text(cause)) from cause
            if isinstance(cause, ToolError | ResourceError):
                raise ToolError(readable(str(cause))) from cause
            raise
