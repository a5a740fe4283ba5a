"""MCP server: the task-engine operations as tools for agents."""

from cortex.mcp.http import HttpListener, http_app, http_listener, serve_http
from cortex.mcp.server import build_server

__all__ = ["HttpListener", "build_server", "http_app", "http_listener", "serve_http"]
