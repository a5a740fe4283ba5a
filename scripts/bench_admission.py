"""Admission-control benchmark on a local 3-node cluster of real `cortex node
start` processes. A long task runs on every node; --clients clients then
hold waits for task results (GetTaskResult with wait) and followed output
streams on one node (the leader, or a follower with --target follower) for
--hold seconds, each refused client trying again after the node's retry
hint. Meanwhile the leader's view of every node's last heartbeat is sampled.
Prints how many calls were held and refused, the refusal latency, the
oldest heartbeat the leader saw from each node, and whether any node was
marked offline or any task re-queued (there should be none).

    python scripts/bench_admission.py --clients 150 --hold 15

Exits non-zero when a node was marked offline or a task moved.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path

import grpc
from _cluster import add_cluster_arguments, free_base_port, leader_index, run_main, wait_all_active

from cortex.api.client import CortexClient
from cortex.cli.dev import start_cluster, stop_cluster, wait_ready
from cortex.errors import CortexError
from cortex.v1 import cortex_pb2 as pb
from cortex.v1 import cortex_pb2_grpc as pb_grpc

NODE_COUNT = 3
CHANNELS = 15


class Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.held = {"waits": 0, "streams": 0}
        self.refusals: list[float] = []
        self.errors: list[str] = []


def hold(index: int, channel: grpc.Channel, task_ids: list[str], end: float, tally: Tally) -> None:
    stub = pb_grpc.CortexServiceStub(channel)
    task_id = task_ids[index % len(task_ids)]
    waits = index % 2 == 0
    while (remaining := end - time.monotonic()) > 1.0:
        started = time.monotonic()
        try:
            if waits:
                request = pb.GetTaskResultRequest(
                    task_id=task_id, wait=True, timeout=timedelta(seconds=remaining)
                )
                stub.GetTaskResult(request, timeout=remaining + 10)
                with tally.lock:
                    tally.held["waits"] += 1
            else:
                request_stream = pb.StreamTaskOutputRequest(task_id=task_id, follow=True)
                for _ in stub.StreamTaskOutput(request_stream, timeout=remaining):
                    pass
        except grpc.RpcError as err:
            if err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                with tally.lock:
                    tally.refusals.append(time.monotonic() - started)
                hint = dict(err.trailing_metadata() or ()).get("cortex-retry-after-ms", "500")
                time.sleep(int(hint) / 1000)
                continue
            if err.code() == grpc.StatusCode.DEADLINE_EXCEEDED and not waits:
                with tally.lock:
                    tally.held["streams"] += 1
                continue
            with tally.lock:
                tally.errors.append(f"{err.code().name}: {err.details()}")
            return


def run(args: argparse.Namespace) -> int:
    data_dir = Path(tempfile.mkdtemp(prefix="cortex-bench-admission-"))
    extra = [
        "--heartbeat-interval", str(args.heartbeat_interval),
        "--failure-timeout", str(args.failure_timeout), "--shutdown-drain", "0",
    ]  # fmt: skip
    nodes = start_cluster(NODE_COUNT, free_base_port(NODE_COUNT), data_dir, extra)
    try:
        wait_ready(nodes, args.ready_timeout)
        wait_all_active(nodes, args.ready_timeout)
        clients = [CortexClient(n.grpc, timeout_s=10, tls=False) for n in nodes]
        leader = leader_index(clients)
        target = leader if args.target == "leader" else (leader + 1) % NODE_COUNT
        observer = clients[leader]
        task_ids = [
            observer.submit_task(
                pb.TaskSpec(
                    command=["sleep", str(int(args.hold + 60))],
                    constraints=pb.Constraints(target_node=n.node_id),
                )
            ).task.id
            for n in nodes
        ]
        deadline = time.monotonic() + 30
        while not all(observer.get_task(t).task.state == pb.TASK_STATE_RUNNING for t in task_ids):
            if time.monotonic() > deadline:
                raise CortexError("the long tasks did not start within 30 s")
            time.sleep(0.2)

        tally = Tally()
        channels = [grpc.insecure_channel(nodes[target].grpc) for _ in range(CHANNELS)]
        end = time.monotonic() + args.hold
        threads = [
            threading.Thread(
                target=hold, args=(i, channels[i % CHANNELS], task_ids, end, tally), daemon=True
            )
            for i in range(args.clients)
        ]
        for thread in threads:
            thread.start()
        oldest: dict[str, int] = {}
        while time.monotonic() < end:
            try:
                for node in observer.list_nodes().nodes:
                    if node.HasField("resources"):
                        age_ms = node.report_age.ToMilliseconds()
                        oldest[node.id] = max(oldest.get(node.id, 0), age_ms)
            except CortexError:
                pass
            time.sleep(0.25)
        for thread in threads:
            thread.join(args.hold + 30)
        for channel in channels:
            channel.close()

        statuses = observer.watch_events(
            follow=False, from_start=True, types=[pb.EVENT_TYPE_NODE_STATUS]
        )
        offline = [
            m.event for m in statuses if m.event.node_change.to_status == pb.NODE_STATUS_OFFLINE
        ]
        moved = [
            t
            for t in task_ids
            if {pb.EVENT_TYPE_REQUEUED, pb.EVENT_TYPE_RETRIED}
            & {ev.type for ev in observer.get_task(t, include_events=True).events}
        ]
        refusals = sorted(tally.refusals) or [0.0]
        print(f"{args.clients} clients on the {args.target} for {args.hold:g} s")
        print(f"  held: {tally.held['waits']} waits, {tally.held['streams']} streams")
        print(
            f"  refused: {len(tally.refusals)} (latency median"
            f" {statistics.median(refusals) * 1000:.1f} ms, p99"
            f" {refusals[int(len(refusals) * 0.99)] * 1000:.1f} ms,"
            f" max {refusals[-1] * 1000:.1f} ms)"
        )
        print(
            "  oldest heartbeat the leader held, per node (ms): "
            + ", ".join(f"{k} {v}" for k, v in sorted(oldest.items()))
        )
        print(f"  nodes marked offline: {len(offline)}; tasks moved: {len(moved)}")
        if tally.errors:
            print(f"  unexpected errors: {len(tally.errors)}, e.g. {tally.errors[0]}")
        for task_id in task_ids:
            observer.cancel_task(task_id)
        for client in clients:
            client.close()
        return 1 if offline or moved else 0
    finally:
        stop_cluster(data_dir)
        if not args.keep_data:
            shutil.rmtree(data_dir, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=150)
    parser.add_argument("--hold", type=float, default=15.0, help="seconds clients hold on")
    parser.add_argument("--target", choices=("leader", "follower"), default="leader")
    parser.add_argument("--heartbeat-interval", type=float, default=0.5)
    parser.add_argument("--failure-timeout", type=float, default=3.0)
    add_cluster_arguments(parser, data_dir=False)
    return run_main(run, parser.parse_args())


if __name__ == "__main__":
    raise SystemExit(main())
