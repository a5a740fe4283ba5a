"""`cortex node start`: run a node in the foreground until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import gc
import logging
import signal
import sys
from typing import Any

from cortex.cli.options import parse_pairs
from cortex.config import NodeConfig, load_config
from cortex.cpu_policy import batch_policy
from cortex.errors import ConfigError


def parse_labels(items: list[str]) -> dict[str, str]:
    """`key=value` or a bare `key` (an empty value)."""
    labels = {}
    for item in items:
        key, _, value = item.partition("=")
        if not key.strip():
            raise ConfigError(f"--label {item!r} has no key: give KEY or KEY=VALUE")
        labels[key] = value
    return labels


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def parse_resources(items: list[str]) -> dict[str, Any]:
    declared: dict[str, Any] = {}
    for key, value in parse_pairs(items, "--resource").items():
        if key == "gpu":
            name, _, memory = value.partition(":")
            declared["gpu"] = {"name": name or "declared GPU", "memory_mb": memory or 0}
        elif key == "gaming":
            if value.lower() not in _TRUE + _FALSE:
                raise ConfigError(f"--resource 'gaming={value}': gaming is true or false")
            declared["gaming"] = value.lower() in _TRUE
        else:
            declared[key] = value
    return declared


# Allocations of container objects between two young-generation collections
# (Python's default is 700), and young collections between two of the middle
# generation, and those between two full ones (10 and 10). A busy node
# allocates millions of short-lived dicts, tuples and lists a second
# (entries, rows, messages), nearly all freed by reference counting:
# collecting every 700 of them spent a few per cent of the node's CPU finding
# no cycles, and a full collection, which stops every thread for as long as
# it walks every object, held reads up for 40-80 ms at a million tasks of
# history (a node's p99 listing latency).
_COLLECTION_THRESHOLDS = (20_000, 20, 100)


def tune_collector() -> None:
    """Once the node is running: what startup built (modules, the schema,
    the gRPC services) lives as long as the process, so it is moved out of
    the collector's sight (`gc.freeze`) and the older-generation passes no
    longer walk it; collections run less often (see above)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*_COLLECTION_THRESHOLDS)


def run_node(args: argparse.Namespace) -> int:
    flags: dict[str, Any] = {
        "node_id": args.node_id,
        "data_dir": args.data_dir,
        "raft": args.raft,
        "grpc": args.grpc,
        "peer": args.peer,
        "http": args.http,
        "advertise": args.advertise,
        "peers": [p.strip() for p in args.peers.split(",") if p.strip()] if args.peers else None,
        "join": args.join,
        "observer": args.observer,
        "secret": args.secret,
        "secret_file": args.secret_file,
        "api_token": args.api_token,
        "api_token_file": args.api_token_file,
        "env_passthrough": args.env_passthrough or None,
        "tls_cert": args.tls_cert,
        "tls_key": args.tls_key,
        "tls_ca": args.tls_ca,
        "tls_client_auth": args.tls_client_auth,
        "labels": parse_labels(args.label) or None,
        "capabilities": parse_pairs(args.capability, "--capability") or None,
        "resources": parse_resources(args.resource) or None,
        "executors": [t.strip() for t in args.executors.split(",") if t.strip()]
        if args.executors is not None
        else None,
        "container_runtime": args.container_runtime,
        "container_mounts": args.container_mount or None,
        "subagent_command": args.subagent_command,
        "heartbeat_interval_s": args.heartbeat_interval,
        "failure_timeout_s": args.failure_timeout,
        "election_timeout_min_s": args.election_timeout_min,
        "election_timeout_max_s": args.election_timeout_max,
        "shutdown_drain_s": args.shutdown_drain,
        "max_tasks": args.max_tasks,
        "prefetch_tasks": args.prefetch_tasks,
        "compaction_min_entries": args.compaction_min_entries,
        "compaction_log_ratio": args.compaction_log_ratio,
        "raft_sync": args.raft_sync,
        "sched_batch": args.sched_batch,
        "task_retention_s": args.task_retention,
        "otel_exporter": args.otel_exporter,
        "log_level": args.log_level,
    }
    config = load_config(args.config, flags)
    with batch_policy(config.sched_batch):
        return _run(config)


def _run(config: NodeConfig) -> int:
    """Runs the node in the foreground until it stops; the exit code."""
    from cortex.node import Node

    logging.basicConfig(
        level=config.log_level.upper(),
        format=f"%(asctime)s %(levelname)s [{config.node_id}] %(name)s: %(message)s",
        stream=sys.stderr,
    )
    node = Node(config)

    def shutdown(signum: int, frame: Any) -> None:
        node.stop()

    signal.signal(signal.SIGTERM, shutdown)
    signal.signal(signal.SIGINT, shutdown)
    node.start()
    tune_collector()
    print(
        f"cortex node {config.node_id} running: "
        f"{'observer (no raft port)' if config.observer else f'raft {config.raft}'},"
        f" grpc {config.grpc},"
        f" peer {node.peer_address}, http {node.http_address}{' (TLS)' if config.tls_cert else ''},"
        f" data {node.data_dir}",
        flush=True,
    )
    node.wait()
    if node.removed:
        print(f"cortex node {config.node_id} was removed from the cluster; stopped", flush=True)
    return 0
