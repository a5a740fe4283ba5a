"""MCP server: the task-engine operations as tools for agents."""

from cortex.mcp.server import build_server

__all__ = ["build_server"]
