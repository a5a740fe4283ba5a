"""Helpers the benchmarks share around `cortex.cli.dev` clusters: their
command-line flags and entry point, picking a free block of ports, waiting
until every node is active, finding the leader, stopping the cluster and
cleaning up after it."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import itertools
import json
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import psutil

from cortex.api.client import CortexClient
from cortex.cli.dev import DevNode, ports_free, stop_cluster
from cortex.errors import CortexError, Unavailable
from cortex.v1 import cortex_pb2 as pb


def free_base_port(count: int) -> int:
    """A base port whose raft (base+i), grpc (base+100+i) and http
    (base+200+i) ports are free, from a random start below the ephemeral
    range, so concurrent runs (and `cortex demo`, which scans from 17100)
    rarely collide."""
    start = random.randrange(20000, 30000, 10)
    for base in itertools.chain(range(start, 31000, 10), range(20000, start, 10)):
        if ports_free(base, count):
            return base
    raise CortexError("no free block of ports found between 20000 and 31000")


def wait_all_active(nodes: Sequence[DevNode], timeout_s: float) -> None:
    """Beyond `wait_ready`: every node sees a leader and every node active."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            ready = True
            for node in nodes:
                with CortexClient(node.grpc, timeout_s=2) as client:
                    status = client.get_cluster_status()
                active = [n for n in status.nodes if n.status == pb.NODE_STATUS_ACTIVE]
                ready = ready and bool(status.leader_raft_address) and len(active) >= len(nodes)
            if ready:
                return
        except CortexError:
            pass
        if time.monotonic() > deadline:
            raise Unavailable(f"cluster not ready (all nodes active) after {timeout_s:.0f}s")
        time.sleep(0.2)


def leader_index(clients: Sequence[CortexClient]) -> int:
    """The index of the client whose node reports itself Raft leader."""
    for i, client in enumerate(clients):
        if client.get_cluster_status().raft_role == pb.RAFT_ROLE_LEADER:
            return i
    raise Unavailable("no node reports itself leader")


def add_cluster_arguments(parser: argparse.ArgumentParser, data_dir: bool = True) -> None:
    parser.add_argument(
        "--ready-timeout", type=float, default=60.0, help="seconds to wait for a cluster"
    )
    if data_dir:
        parser.add_argument(
            "--data-dir", help="data directory (default: a temp dir, removed afterwards)"
        )
    parser.add_argument(
        "--keep-data", action="store_true", help="keep the temp data dir (node logs)"
    )


def stop_and_clean(data_dir: Path, args: argparse.Namespace, failed: bool = False) -> None:
    """Stops the benchmark's cluster and removes its data dir, unless the
    dir was given (`--data-dir`), asked to be kept (`--keep-data`), or the
    run `failed` (its node logs explain why)."""
    stop_cluster(data_dir)
    if getattr(args, "data_dir", None) or args.keep_data or failed:
        print(f"cluster stopped; data and node logs kept in {data_dir}")
    else:
        shutil.rmtree(data_dir, ignore_errors=True)
        print("cluster stopped")


def run_main(run: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """A benchmark's exit status: its own, 130 on Ctrl-C, 2 on a Cortex error."""
    try:
        return run(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except CortexError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def progress_to_stderr(run: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """`run(args)`; with `--json` its progress goes to stderr, so stdout holds
    only the JSON object it prints to `sys.__stdout__`."""
    if not args.json:
        return run(args)
    with contextlib.redirect_stdout(sys.stderr):
        return run(args)


def node_command(pid: int) -> tuple[list[str], dict[str, str]]:
    """The command line and environment a running node was started with, so
    it can be started again the same way (its cluster secret included)."""
    process = psutil.Process(pid)
    return process.cmdline(), process.environ()


def wait_exit(pid: int, timeout_s: float) -> bool:
    """Waits for process `pid` to end (reaping it when it is our child);
    whether it did within `timeout_s`."""
    try:
        psutil.Process(pid).wait(timeout_s)
    except psutil.NoSuchProcess:
        pass
    except psutil.TimeoutExpired:
        return False
    return True


def relaunch_node(
    data_dir: Path, node: DevNode, argv: Sequence[str], env: dict[str, str]
) -> DevNode:
    """Starts a stopped node of the dev cluster in `data_dir` again, as
    `cortex.cli.dev.start_cluster` does, and records its new pid in the
    cluster's state file so `stop_cluster` stops it."""
    log_file = open(Path(node.data_dir) / "node.log", "ab")  # noqa: SIM115 - owned by the child
    process = subprocess.Popen(
        list(argv),
        env=env,
        stdout=log_file,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    log_file.close()
    started = dataclasses.replace(node, pid=process.pid)
    state_file = data_dir / "dev-cluster.json"
    state = json.loads(state_file.read_text())
    state["nodes"] = [
        started.__dict__ if n["node_id"] == node.node_id else n for n in state["nodes"]
    ]
    state_file.write_text(json.dumps(state, indent=2))
    return started
