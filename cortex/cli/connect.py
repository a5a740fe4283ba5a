"""The client a command talks to the cluster with, reading at the consistency
the command defaults to unless `--consistency` says otherwise. Reads of
tasks, workflows, dead letters, logs and events default to linearizable, so
one invocation sees what an earlier one wrote through any node; status, node
list and top default to stale, so they answer without a leader."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from cortex.api.client import CortexClient

Consistency = Literal["stale", "session", "linearizable"]
CONSISTENCY_NAMES: tuple[Consistency, ...] = ("stale", "session", "linearizable")


def read_consistency(args: argparse.Namespace, default: Consistency) -> int:
    """The ReadConsistency value for `--consistency`, else for `default`."""
    from cortex.api.views import enum_value
    from cortex.v1 import cortex_pb2 as pb

    return enum_value(pb.ReadConsistency, args.consistency or default, "--consistency")


def connect(args: argparse.Namespace, default: Consistency, **options: Any) -> CortexClient:
    """A client of `--node`; `options` go to CortexClient (timeout_s ...)."""
    from cortex.api.client import CortexClient

    return CortexClient(args.node, consistency=read_consistency(args, default), **options)


def poll_in_session(client: CortexClient, args: argparse.Namespace) -> None:
    """For a command that reads the same thing again and again once a first
    read has seen it: unless `--consistency` was given, later reads ask only
    for the client's session, which never goes back in time, instead of
    each confirming the leader's read index through the log."""
    from cortex.v1 import cortex_pb2 as pb

    if not args.consistency:
        client.consistency = pb.READ_CONSISTENCY_SESSION
