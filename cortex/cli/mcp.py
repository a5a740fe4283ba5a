"""`cortex mcp`: the MCP server over stdio (default) or streamable HTTP, where
every request must carry a bearer token."""

from __future__ import annotations

import argparse
import logging
import sys

from cortex.errors import ConfigError

# Flags that only mean something with --http, by argparse dest.
_HTTP_ONLY = {
    "http_token": "--http-token",
    "http_token_file": "--http-token-file",
    "http_tls_cert": "--http-tls-cert",
    "http_tls_key": "--http-tls-key",
    "allowed_hosts": "--allowed-host",
    "allowed_origins": "--allowed-origin",
    "insecure_http": "--insecure-http",
}


def add_mcp_arguments(mcp: argparse.ArgumentParser) -> None:
    mcp.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve streamable HTTP at http(s)://HOST:PORT/mcp instead of stdio; every request "
        "must carry a bearer token",
    )
    token = mcp.add_mutually_exclusive_group()
    token.add_argument(
        "--http-token",
        metavar="TOKEN",
        help="the bearer token HTTP clients must send (visible in `ps`: prefer "
        "--http-token-file or $CORTEX_MCP_TOKEN; default: the API token of --token / "
        "$CORTEX_API_TOKEN)",
    )
    token.add_argument(
        "--http-token-file", metavar="FILE", help="read the bearer token from this file"
    )
    mcp.add_argument(
        "--http-tls-cert", metavar="PEM", help="serve HTTPS with this certificate (chain)"
    )
    mcp.add_argument("--http-tls-key", metavar="PEM", help="the private key of --http-tls-cert")
    mcp.add_argument(
        "--allowed-host",
        dest="allowed_hosts",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="also accept requests whose Host header is this (repeatable; default: the listen "
        "address, localhost forms on loopback, and the names in --http-tls-cert)",
    )
    mcp.add_argument(
        "--allowed-origin",
        dest="allowed_origins",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="also accept browser requests from this origin, e.g. https://app.example.com "
        "(repeatable; default: the allowed hosts)",
    )
    mcp.add_argument(
        "--insecure-http",
        action="store_true",
        help="allow plain HTTP on an address other machines can reach (the token crosses the "
        "network in clear text; e.g. behind a TLS-terminating proxy)",
    )


def serve_mcp(args: argparse.Namespace) -> int:
    from cortex.cli.connect import read_consistency
    from cortex.mcp import build_server

    # stdout belongs to the protocol on stdio; logs go to stderr.
    logging.basicConfig(level=logging.WARNING)
    # One client serves every tool call, so session consistency already
    # lets each call see what earlier ones wrote.
    consistency = read_consistency(args, "session")
    if not args.http:
        given = [flag for dest, flag in _HTTP_ONLY.items() if getattr(args, dest)]
        if given:
            raise ConfigError(f"{', '.join(given)}: only used with --http HOST:PORT")
        build_server(args.node, consistency=consistency).run("stdio")
        return 0
    from cortex.mcp import http_listener, serve_http

    listener = http_listener(
        args.http,
        token=args.http_token,
        token_file=args.http_token_file,
        tls_cert=args.http_tls_cert,
        tls_key=args.http_tls_key,
        allowed_hosts=args.allowed_hosts,
        allowed_origins=args.allowed_origins,
        insecure_http=args.insecure_http,
    )
    print(
        f"cortex mcp: serving {listener.url}; requests need the bearer token from "
        f"{listener.token_source}",
        file=sys.stderr,
    )
    serve_http(build_server(args.node, http=listener, consistency=consistency), listener)
    return 0
