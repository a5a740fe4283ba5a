"""A hostile peer on the Raft port: pysyncobj unpickles and buffers what
arrives there, so a peer without the cluster secret must not be able to make
a node hold more than a small frame, and the cluster keeps committing."""

from __future__ import annotations

import socket
import struct
import threading

import psutil
import pytest

from cortex.v1 import cortex_pb2 as pb
from tests.cluster import shell_spec, wait_until

pytestmark = pytest.mark.cluster

JUNK_BYTES = 64 * 1024 * 1024


def _flood(address: str, prefix: bytes, outcome: dict[str, object]) -> None:
    host, _, port = address.rpartition(":")
    sent = 0
    chunk = b"\xa5" * (1024 * 1024)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        try:
            sock.sendall(prefix)
            while sent < JUNK_BYTES:
                sock.sendall(chunk)
                sent += len(chunk)
            sock.shutdown(socket.SHUT_WR)
            outcome["closed_by_peer"] = sock.recv(1) == b""
        except OSError as err:  # reset or broken pipe: the node dropped us
            outcome["closed_by_peer"] = True
            outcome["error"] = type(err).__name__
    outcome["sent"] = sent


@pytest.mark.parametrize(
    "prefix",
    [struct.pack("i", 2**31 - 1), struct.pack("i", 60_000)],
    ids=["huge-length-prefix", "small-frames-of-junk"],
)
def test_junk_on_the_raft_port_is_dropped_without_buffering_it(make_cluster, prefix):
    cluster = make_cluster(3)
    target = cluster.leader()
    assert target.process is not None
    node = psutil.Process(target.process.pid)
    rss_before = node.memory_info().rss
    peak = [rss_before]
    outcome: dict[str, object] = {}
    flood = threading.Thread(target=_flood, args=(target.raft, prefix, outcome))
    flood.start()
    with target.client() as client:
        # The cluster keeps committing while the flood goes on.
        task_id = client.submit_task(shell_spec(["echo", "still here"])).task.id
        while flood.is_alive():
            peak.append(node.memory_info().rss)
            flood.join(0.05)
        done = client.get_task_result(task_id, wait=True, timeout_ms=60_000).task
    assert done.state == pb.TASK_STATE_COMPLETED, done
    assert outcome.get("closed_by_peer") is True, outcome
    assert int(outcome.get("sent", 0)) < JUNK_BYTES, "the node read all the junk"
    growth = max(peak) - rss_before
    assert growth < 32 * 1024 * 1024, f"RSS grew by {growth / 2**20:.1f} MiB"
    assert "dropping a connection" in target.log_text() or prefix != struct.pack("i", 2**31 - 1)
    wait_until(lambda: target.status().leader_raft_address, 30, what="a leader after the flood")
