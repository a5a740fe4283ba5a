"""`cortex mcp`: the MCP server over stdio (default) or streamable HTTP."""

from __future__ import annotations

import argparse
import logging

from cortex.config import check_address
from cortex.errors import ConfigError


def serve_mcp(args: argparse.Namespace) -> int:
    from cortex.mcp import build_server

    # stdout belongs to the protocol on stdio; logs go to stderr.
    logging.basicConfig(level=logging.WARNING)
    server = build_server(args.node)
    if not args.http:
        server.run("stdio")
        return 0
    try:
        host, _, port = check_address(args.http).rpartition(":")
    except ValueError as err:
        raise ConfigError(f"--http: {err}") from None
    server.run("streamable-http", host=host, port=int(port))
    return 0
