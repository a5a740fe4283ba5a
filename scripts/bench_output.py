"""Output streaming benchmark on a local 3-node cluster of real `cortex node
start` processes. A task pinned to one node writes --mb MB of pseudo-random
bytes (every byte value) to stdout; the benchmark follows it live through
another node (which relays from the executing one), then reads the whole
backlog again through the relay and directly from the executing node.
Every byte is checked (SHA-256 against the same generator run here). Prints
throughput per phase and the peak RSS of the executing and relaying node
processes (psutil, sampled every 20 ms), against their RSS before the task.

    python scripts/bench_output.py --mb 50

Exits non-zero when a check fails or the task does not finish in --deadline.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import psutil
from _cluster import free_base_port, wait_all_active

from cortex.api.client import CortexClient
from cortex.cli.dev import DevNode, start_cluster, stop_cluster, wait_ready
from cortex.errors import CortexError
from cortex.v1 import cortex_pb2 as pb

NODE_COUNT = 3
BLOCK = 1 << 16
SAMPLE_S = 0.02
MB = 1024 * 1024

TASK = """
import os, random, sys, time
while not os.path.exists({go!r}):  # until the follower has subscribed
    time.sleep(0.01)
rng, left = random.Random({seed}), {size}
out = sys.stdout.buffer
while left:
    block = rng.randbytes(min(left, {block}))
    out.write(block)
    left -= len(block)
"""


def expected_digest(seed: int, size: int) -> str:
    rng, left, digest = random.Random(seed), size, hashlib.sha256()
    while left:
        block = rng.randbytes(min(left, BLOCK))
        digest.update(block)
        left -= len(block)
    return digest.hexdigest()


class PeakRss:
    """Samples the resident set size of some processes until stopped."""

    def __init__(self, pids: dict[str, int]) -> None:
        self._processes = {name: psutil.Process(pid) for name, pid in pids.items()}
        self.before = {name: p.memory_info().rss for name, p in self._processes.items()}
        self.peak = dict(self.before)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            for name, process in self._processes.items():
                try:
                    self.peak[name] = max(self.peak[name], process.memory_info().rss)
                except psutil.Error:
                    pass

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@dataclass
class Phase:
    name: str
    size: int
    # From the first byte to the end message.
    seconds: float
    first_byte_s: float
    rss: PeakRss

    def line(self) -> str:
        rate = self.size / MB / self.seconds
        memory = "  ".join(
            f"{name} peak {self.rss.peak[name] / MB:.1f} MiB"
            f" (+{(self.rss.peak[name] - self.rss.before[name]) / MB:.1f})"
            for name in self.rss.peak
        )
        return (
            f"{self.name:<34} {self.size / MB:6.1f} MiB in {self.seconds:6.2f} s"
            f" = {rate:7.1f} MiB/s (first byte {self.first_byte_s * 1000:.0f} ms)  {memory}"
        )


def read_stream(
    address: str, task_id: str, follow: bool, expected: str, size: int, pids: dict[str, int],
    name: str, subscribed: Callable[[], None] = lambda: None, mib_per_s: float = 0.0,
) -> Phase:  # fmt: skip
    """Reads one whole stream, checking every byte; `mib_per_s` throttles
    the reader, so the nodes must hold back rather than buffer."""
    digest, received, first = hashlib.sha256(), 0, 0.0
    with PeakRss(pids) as rss, CortexClient(address) as client:
        start = first_at = time.monotonic()
        end: pb.OutputEnd | None = None
        chunks = client.stream_task_output(task_id, follow=follow, timeout_s=600)
        # Told to write once this stream is surely open (the call starts on
        # the first iteration below), so the follow phase is truly live.
        threading.Timer(0.2, subscribed).start()
        for chunk in chunks:
            if chunk.HasField("end"):
                end = chunk.end
                break
            if not received:
                first_at = time.monotonic()
                first = first_at - start
            if chunk.data.offset != received:
                raise CortexError(f"{name}: chunk at {chunk.data.offset}, expected {received}")
            digest.update(chunk.data.data)
            received += len(chunk.data.data)
            if mib_per_s:
                ahead = received / MB / mib_per_s - (time.monotonic() - first_at)
                if ahead > 0:
                    time.sleep(ahead)
        seconds = time.monotonic() - first_at
    if end is None or end.state != pb.TASK_STATE_COMPLETED or end.total_bytes != size:
        raise CortexError(f"{name}: bad end message {end}")
    if received != size or digest.hexdigest() != expected:
        raise CortexError(f"{name}: got {received} bytes, digest mismatch")
    return Phase(name, size, seconds, first, rss)


def run(mb: float, deadline_s: float, slow_mib_per_s: float) -> list[Phase]:
    size = int(mb * MB)
    seed = 7
    expected = expected_digest(seed, size)
    data_dir = Path(tempfile.mkdtemp(prefix="cortex-bench-output-"))
    go = data_dir / "go"
    nodes: list[DevNode] = []
    try:
        nodes = start_cluster(NODE_COUNT, free_base_port(NODE_COUNT), data_dir)
        wait_ready(nodes)
        wait_all_active(nodes, 60)
        executing, relaying = nodes[0], nodes[1]
        pids = {f"executing {executing.node_id}": executing.pid,
                f"relaying {relaying.node_id}": relaying.pid}  # fmt: skip
        spec = pb.TaskSpec(
            command=[
                sys.executable,
                "-c",
                TASK.format(go=str(go), seed=seed, size=size, block=BLOCK),
            ],  # fmt: skip
            constraints=pb.Constraints(target_node=executing.node_id),
            timeout=timedelta(seconds=deadline_s),
        )
        with CortexClient(relaying.grpc) as client:
            task_id = client.submit_task(spec).task.id
        return [
            read_stream(relaying.grpc, task_id, True, expected, size, pids,
                        "live follow via relay", subscribed=go.touch),
            read_stream(relaying.grpc, task_id, False, expected, size, pids,
                        "backlog via relay"),
            read_stream(executing.grpc, task_id, False, expected, size, pids,
                        "backlog from executing node"),
            read_stream(relaying.grpc, task_id, False, expected, size, pids,
                        f"slow reader ({slow_mib_per_s:g} MiB/s) via relay",
                        mib_per_s=slow_mib_per_s),
        ]  # fmt: skip
    finally:
        if nodes:
            try:
                stop_cluster(data_dir)
            except CortexError:
                pass
        shutil.rmtree(data_dir, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=50.0, help="output size in MiB")
    parser.add_argument("--deadline", type=float, default=300.0, help="seconds for the task")
    parser.add_argument(
        "--slow", type=float, default=25.0, help="MiB/s of the throttled reader in the last phase"
    )
    args = parser.parse_args()
    try:
        phases = run(args.mb, args.deadline, args.slow)
    except CortexError as err:
        print(f"bench_output: {err}", file=sys.stderr)
        return 1
    print(f"{args.mb:g} MiB of stdout from a task on one node of {NODE_COUNT}; all bytes verified")
    for phase in phases:
        print(phase.line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
