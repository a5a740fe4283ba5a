"""`cortex`: the command line. Parses arguments (`cortex.cli.parser`), calls
the client or starts a node, prints results; a bad value is one line and
exit 2, every other failure one readable line and exit 1."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from cortex.api.auth import TOKEN_ENV, TOKEN_FILE_ENV
from cortex.api.tls import TLS_CA_ENV
from cortex.cli.parser import build_parser, node_address
from cortex.defaults import DEFAULT_GRPC_ADDRESS, read_secret_file
from cortex.errors import ConfigError, CortexError

__all__ = ["build_parser", "main"]

NODE_ENV = "CORTEX_NODE"


def _export_client_settings(args: argparse.Namespace) -> None:
    """Every client this process makes, and a node it starts, picks up the
    token and CA given by flag; a flag overrides the environment."""
    if args.token_file and args.token:
        raise ConfigError("--token and --token-file: give one of them")
    if args.token_file:
        read_secret_file(args.token_file, "--token-file")
        os.environ[TOKEN_FILE_ENV] = args.token_file
        os.environ.pop(TOKEN_ENV, None)
    elif args.token:
        os.environ[TOKEN_ENV] = args.token
        os.environ.pop(TOKEN_FILE_ENV, None)
    if args.tls_ca:
        os.environ[TLS_CA_ENV] = args.tls_ca
    starts_a_node = args.command == "node" and args.node_command == "start"
    if args.node is None and not starts_a_node:
        args.node = _node_from_environment()


def _node_from_environment() -> str:
    given = os.environ.get(NODE_ENV, "").strip()
    if not given:
        return DEFAULT_GRPC_ADDRESS
    try:
        return node_address(given)
    except argparse.ArgumentTypeError as err:
        raise ConfigError(f"${NODE_ENV}: {err}") from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    interrupted = threading.Event()

    def on_interrupt(signum: int, frame: FrameType | None) -> None:
        # gRPC may surface Ctrl-C as a cancelled call rather than this
        # exception; the flag makes either end the same way.
        interrupted.set()
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, on_interrupt)
    try:
        _export_client_settings(args)
        if args.command == "node":
            if args.node_command != "start":
                from cortex.cli.nodes import run as run_nodes

                return run_nodes(args)
            from cortex.cli.node import run_node

            return run_node(args)
        if args.command == "dlq":
            from cortex.cli.tasks import run_dlq

            return run_dlq(args)
        if args.command == "mcp":
            from cortex.cli.mcp import serve_mcp

            return serve_mcp(args)
        if args.command == "top":
            from cortex.cli.nodes import top

            return top(args)
        if args.command == "task":
            from cortex.cli import tasks

            return tasks.run(args)
        if args.command == "workflow":
            from cortex.cli import workflows

            return workflows.run(args)
        if args.command == "schedule":
            from cortex.cli import schedules

            return schedules.run(args)
        if args.command == "limit":
            from cortex.cli import limits

            return limits.run(args)
        if args.command == "executors":
            from cortex.cli import executors

            return executors.run(args)
        if args.command == "status":
            from cortex.cli.tasks import show_status

            return show_status(args)
        if args.command == "dev":
            from cortex.cli import dev

            return dev.run(args)
        if args.command == "demo":
            from cortex.cli.dev import run_demo

            return run_demo(args)
        if args.command == "logs":
            from cortex.cli.logs import run_logs

            return run_logs(args)
        if args.command == "events":
            from cortex.cli.logs import run_events

            return run_events(args)
        if args.command == "completion":
            from cortex.cli.completion import script

            print(script(parser, args.shell), end="")
            return 0
    except CortexError as err:
        if interrupted.is_set():
            return 130
        print(f"cortex: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 2


if __name__ == "__main__":
    sys.exit(main())
