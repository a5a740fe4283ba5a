#!/usr/bin/env python3
"""What one unary gRPC call costs in Python on this machine, with nothing
of Cortex in it: a server process serving the standard health check from a
thread pool, as a node serves its API (`cortex.api.server.serve`), and
client threads in this process calling it over loopback, each waiting for
its answer before the next call, as `bench_core.py --mode single` does.
Prints calls per second and the CPU each call costs the server process and
the client process. It is the floor under the single-call submit path: a
SubmitTask costs its node at least this much beside the work it asks for.

    python scripts/bench_grpc.py --calls 20000 --concurrency 32
    python scripts/bench_grpc.py --json"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import sys
import threading
import time
from collections.abc import Sequence
from concurrent import futures
from typing import Any

import grpc
import psutil
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

SERVERS = ("pool", "aio", "aio-pool")


def _serve(kind: str, threads: int, ports: Any) -> None:
    if kind != "pool":
        asyncio.run(_serve_aio(kind == "aio-pool", threads, ports))
        return
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=threads), maximum_concurrent_rpcs=threads
    )
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    ports.put(server.add_insecure_port("127.0.0.1:0"))
    server.start()
    server.wait_for_termination()


class _AsyncHealth(health_pb2_grpc.HealthServicer):  # type: ignore[misc]
    """The health check's answer from a coroutine: at once, or from a thread
    of `pool` (where a blocking handler would run)."""

    def __init__(self, pool: futures.ThreadPoolExecutor | None) -> None:
        self._pool = pool

    async def Check(self, request: Any, context: Any) -> Any:  # noqa: N802 (gRPC's name)
        if self._pool is None:
            return _serving()
        return await asyncio.get_running_loop().run_in_executor(self._pool, _serving)


def _serving() -> Any:
    return health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)


async def _serve_aio(pooled: bool, threads: int, ports: Any) -> None:
    server = grpc.aio.server(maximum_concurrent_rpcs=threads)
    pool = futures.ThreadPoolExecutor(max_workers=threads) if pooled else None
    health_pb2_grpc.add_HealthServicer_to_server(_AsyncHealth(pool), server)
    ports.put(server.add_insecure_port("127.0.0.1:0"))
    await server.start()
    await server.wait_for_termination()


def _cpu_seconds(times: Any) -> float:
    return float(times.user + times.system)


def measure(calls: int, concurrency: int, kind: str = "pool") -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    ports = context.Queue()
    server = context.Process(target=_serve, args=(kind, concurrency + 8, ports), daemon=True)
    server.start()
    try:
        port = ports.get(timeout=30)
        process = psutil.Process(server.pid)
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            request = health_pb2.HealthCheckRequest()
            stub.Check(request, timeout=30)
            each = max(1, calls // concurrency)

            def call() -> None:
                for _ in range(each):
                    stub.Check(request, timeout=30)

            workers = [threading.Thread(target=call) for _ in range(concurrency)]
            server_before, client_before = process.cpu_times(), os.times()
            began = time.monotonic()
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
            elapsed = time.monotonic() - began
            server_after, client_after = process.cpu_times(), os.times()
    finally:
        server.kill()
        server.join(5)
    made = each * concurrency
    return {
        "server": kind,
        "calls": made,
        "concurrency": concurrency,
        "calls_per_s": round(made / elapsed),
        "server_cpu_us_per_call": round(
            (_cpu_seconds(server_after) - _cpu_seconds(server_before)) / made * 1e6
        ),
        "client_cpu_us_per_call": round(
            (_cpu_seconds(client_after) - _cpu_seconds(client_before)) / made * 1e6
        ),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20000, help="calls in all (default 20000)")
    parser.add_argument("--concurrency", type=int, default=32, help="client threads (default 32)")
    parser.add_argument(
        "--server",
        choices=SERVERS,
        default="pool",
        help="pool: the sync server a node runs (default); aio: the asyncio server, its"
        " handler a coroutine; aio-pool: the asyncio server handing each call to a thread pool",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.calls < 1 or args.concurrency < 1:
        parser.error("--calls and --concurrency must be at least 1")
    figures = measure(args.calls, args.concurrency, args.server)
    if args.json:
        print(json.dumps(figures))
        return 0
    print(
        f"unary gRPC health checks over loopback: {figures['calls']} calls from"
        f" {figures['concurrency']} client threads, server {figures['server']}"
    )
    print(f"  calls per second            {figures['calls_per_s']}")
    print(f"  server CPU per call         {figures['server_cpu_us_per_call']} us")
    print(f"  client CPU per call         {figures['client_cpu_us_per_call']} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
