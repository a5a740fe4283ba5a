"""Task output and event streams on real clusters: live output relayed from
the executing node, late subscribers and exact resumption, raw bytes, a lost
executing node, `cortex logs -f` as a person runs it, and WatchEvents."""

from __future__ import annotations

import hashlib
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from cortex.errors import CortexError, InvalidArgument, NotFound, Unavailable
from cortex.v1 import cortex_pb2 as pb
from tests.cluster import Cluster, ClusterNode, shell_spec, wait_until

pytestmark = pytest.mark.cluster

PY = sys.executable
CLI = [sys.executable, "-m", "cortex.cli.main"]
FAST = ["--failure-timeout", "3", "--heartbeat-interval", "0.5", "--shutdown-drain", "0"]
NO_RETRY = pb.RetryPolicy(retryable=False)


def _python(source: str, **fields: Any) -> pb.TaskSpec:
    return shell_spec([PY, "-c", source], **fields)


def _pinned(source: str, node: ClusterNode, **fields: Any) -> pb.TaskSpec:
    return _python(source, constraints=pb.Constraints(target_node=node.node_id), **fields)


def _collect(
    node: ClusterNode, task_id: str, **request: Any
) -> tuple[list[pb.OutputData], pb.OutputEnd]:
    data: list[pb.OutputData] = []
    with node.client() as client:
        for chunk in client.stream_task_output(task_id, timeout_s=60, **request):
            if chunk.HasField("end"):
                return data, chunk.end
            data.append(chunk.data)
    raise AssertionError("stream ended without an end message")


def _check_contiguous(data: list[pb.OutputData], start: int = 0) -> int:
    """Offsets leave no gap and repeat nothing; returns the end offset."""
    position = start
    for item in data:
        assert item.offset == position, f"chunk at {item.offset}, expected {position}"
        position += len(item.data)
    return position


def _wait_state(
    node: ClusterNode, task_id: str, states: set[pb.TaskState], timeout: float = 30
) -> pb.Task:
    def check() -> pb.Task | None:
        with node.client() as client:
            task = client.get_task(task_id).task
        return task if task.state in states else None

    return wait_until(check, timeout, what=f"task {task_id} in {states}")


def _events(watched: Iterable[pb.WatchEventsResponse]) -> Iterator[pb.Event]:
    return (message.event for message in watched)


def _cli_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORTEX_")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


# The task prints its clock on each line, so the follower measures delay.
TICKER = """
import sys, time
for i in range(50):
    print(i, repr(time.time()), flush=True)
    time.sleep(0.1)
sys.exit(5)
"""


def test_live_output_is_relayed_in_order_from_the_executing_node(make_cluster) -> None:
    cluster = make_cluster(3)
    executing, follower = cluster.nodes[1], cluster.nodes[2]
    with follower.client() as client:
        task_id = client.submit_task(_pinned(TICKER, executing, retry_policy=NO_RETRY)).task.id
        received: list[tuple[float, pb.StreamTaskOutputResponse]] = []
        # Subscribed before the task is even assigned: the stream waits for it.
        for chunk in client.stream_task_output(task_id, follow=True, timeout_s=60):
            received.append((time.time(), chunk))
    *data, (end_at, last) = received
    assert last.HasField("end"), last
    chunks = [c.data for _, c in data]
    total = _check_contiguous(chunks)
    lines: list[tuple[int, float, float]] = []
    buffer = b""
    for at, chunk in data:
        buffer += chunk.data.data
        *complete, buffer = buffer.split(b"\n")
        for line in complete:
            number, printed = line.split()
            lines.append((int(number), float(printed), at))
    assert [n for n, _, _ in lines] == list(range(50))
    assert buffer == b""
    end = last.end
    assert (end.state, end.exit_code, end.attempt) == (pb.TASK_STATE_FAILED, 5, 1)
    assert end.total_bytes == total and not end.interrupted
    # Live, not at the end: the first line arrived ~5 s before the task ended.
    first_seen = lines[0][2]
    assert end_at - first_seen > 3.0, (end_at, first_seen)
    delays = [(at - printed) * 1000 for _, printed, at in lines]
    print(
        f"\nrelayed live output: first line {delays[0]:.1f} ms after print; "
        f"median {statistics.median(delays):.1f} ms, max {max(delays):.1f} ms over {len(delays)} lines"
    )
    with follower.client() as client:
        assert client.get_task(task_id).task.node_id == executing.node_id


# Raw bytes (every byte value), both streams, several writes per stream.
RAW = """
import os
for i in range(40):
    os.write(1, bytes(range(256)) + b"out%d\\n" % i)
    os.write(2, b"\\xff\\xfe\\x00err%d\\n" % i)
"""
EXPECTED_STDOUT = b"".join(bytes(range(256)) + b"out%d\n" % i for i in range(40))
EXPECTED_STDERR = b"".join(b"\xff\xfe\x00err%d\n" % i for i in range(40))


def test_late_subscribers_get_every_byte_and_resume_at_any_offset(make_cluster) -> None:
    cluster = make_cluster(3)
    executing, other = cluster.nodes[0], cluster.nodes[2]
    with other.client() as client:
        task_id = client.submit_task(_pinned(RAW, executing)).task.id
        result = client.get_task_result(task_id, wait=True, timeout_ms=30_000)
        assert result.task.state == pb.TASK_STATE_COMPLETED
    for node in (executing, other):
        data, end = _collect(node, task_id)
        assert (end.state, end.exit_code, end.interrupted) == (pb.TASK_STATE_COMPLETED, 0, False)
        full = b"".join(d.data for d in data)
        assert _check_contiguous(data) == end.total_bytes == len(full)
        by_stream = {
            s: b"".join(d.data for d in data if d.stream == s)
            for s in (pb.OUTPUT_STREAM_STDOUT, pb.OUTPUT_STREAM_STDERR)
        }
        assert by_stream == {
            pb.OUTPUT_STREAM_STDOUT: EXPECTED_STDOUT,
            pb.OUTPUT_STREAM_STDERR: EXPECTED_STDERR,
        }
    combined = data
    # Resume anywhere, even inside a chunk, and get exactly the rest.
    for offset in (1, 255, 260, len(full) // 2 + 3, len(full) - 1, len(full)):
        data, end = _collect(other, task_id, from_offset=offset)
        assert b"".join(d.data for d in data) == full[offset:], offset
        assert _check_contiguous(data, offset) == len(full)
    # One stream only: its bytes, at their offsets in the combined output.
    data, end = _collect(other, task_id, stream=pb.OUTPUT_STREAM_STDERR, from_offset=100)
    stderr_from_100 = b"".join(
        d.data[max(100 - d.offset, 0) :] for d in combined if d.stream == pb.OUTPUT_STREAM_STDERR
    )
    assert b"".join(d.data for d in data) == stderr_from_100
    for item in data:
        assert item.stream == pb.OUTPUT_STREAM_STDERR
        assert full[item.offset : item.offset + len(item.data)] == item.data
    # An explicit attempt number is the same attempt.
    data, end = _collect(other, task_id, attempt=1)
    assert b"".join(d.data for d in data) == full and end.attempt == 1


def test_bad_requests_and_tasks_that_have_not_run(make_cluster) -> None:
    cluster = make_cluster(3)
    node = cluster.nodes[0]
    with node.client() as client:
        with pytest.raises(NotFound, match="no task with id nope"):
            list(client.stream_task_output("nope"))
        done = client.submit_task(shell_spec(["echo", "hi"])).task.id
        client.get_task_result(done, wait=True, timeout_ms=30_000)
        with pytest.raises(NotFound, match="has no attempt 7"):
            list(client.stream_task_output(done, attempt=7))
        with pytest.raises(InvalidArgument, match="stream"):
            list(client.stream_task_output(done, stream=7))
        with pytest.raises(InvalidArgument, match="from_offset"):
            list(client.stream_task_output(done, from_offset=-1))
        # A task no node can run yet: ends at once, or with follow waits.
        for n in cluster.nodes:
            client.cordon_node(n.node_id)
        waiting = client.submit_task(shell_spec(["echo", "finally"])).task.id
        (chunk,) = list(client.stream_task_output(waiting))
        assert chunk.end.attempt == 0 and chunk.end.state == pb.TASK_STATE_QUEUED
        assert not chunk.end.HasField("exit_code")
        followed: list[pb.StreamTaskOutputResponse] = []
        follower = threading.Thread(
            target=lambda: followed.extend(
                client.stream_task_output(waiting, follow=True, timeout_s=60)
            )
        )
        follower.start()
        for n in cluster.nodes:
            client.uncordon_node(n.node_id)
        follower.join(60)
        assert not follower.is_alive()
        assert [c.data.data for c in followed if c.HasField("data")] == [b"finally\n"]
        assert followed[-1].end.attempt == 1
        assert followed[-1].end.state == pb.TASK_STATE_COMPLETED
        # An executor that writes no output (noop): the follower waits for the end.
        noop = client.submit_task(pb.TaskSpec(type="noop", options={"duration_ms": 300}))
        chunks = list(client.stream_task_output(noop.task.id, follow=True, timeout_s=60))
        assert [(c.WhichOneof("kind"), c.end.state, c.end.total_bytes) for c in chunks] == [
            ("end", pb.TASK_STATE_COMPLETED, 0)
        ]
        # Cancelled before it ever ran: the follower's stream ends with that.
        for n in cluster.nodes:
            client.cordon_node(n.node_id)
        never = client.submit_task(shell_spec(["echo", "never"])).task.id
        ended: list[pb.StreamTaskOutputResponse] = []
        follower = threading.Thread(
            target=lambda: ended.extend(client.stream_task_output(never, follow=True, timeout_s=60))
        )
        follower.start()
        client.cancel_task(never)
        follower.join(60)
        assert not follower.is_alive()
        assert [c.end.state for c in ended] == [pb.TASK_STATE_CANCELLED]


def test_watch_events_live_and_filtered(make_cluster) -> None:
    cluster = make_cluster(3)
    node = cluster.nodes[1]
    with node.client() as client:
        with pytest.raises(NotFound, match="no task"):
            next(iter(client.watch_events(task_id="nope")))
        with pytest.raises(NotFound, match="no workflow"):
            next(iter(client.watch_events(workflow_id="nope")))
        first = client.submit_task(shell_spec(["true"])).task.id
        client.get_task_result(first, wait=True, timeout_ms=30_000)
        # "From now": only what happens after the watch starts.
        _, live = client.watch_events_backlog(timeout_s=60)
        second = client.submit_task(shell_spec(["sh", "-c", "exit 2"], retry_policy=NO_RETRY))
        seen = []
        for event in _events(live):
            seen.append(event)
            if event.type == pb.EVENT_TYPE_FAILED:
                break
        assert {e.task_id for e in seen if e.task_id} == {second.task.id}
        seen = [e for e in seen if e.task_id]
        assert [e.type for e in seen] == [
            pb.EVENT_TYPE_SUBMITTED, pb.EVENT_TYPE_ASSIGNED, pb.EVENT_TYPE_STARTED,
            pb.EVENT_TYPE_ATTEMPT_FAILED, pb.EVENT_TYPE_FAILED,
        ]  # fmt: skip
        assert [e.seq for e in seen] == sorted({e.seq for e in seen})
        assert seen[1].node_id and seen[1].attempt == 1 and seen[0].entry_type == "TASK_SUBMIT"
        assert seen[-1].task_change.to_state == pb.TASK_STATE_FAILED
        # From the start, filtered by task and by event name; resumable by seq.
        backlog_end, events = client.watch_events_backlog(task_id=first, from_start=True)
        history = []
        for event in _events(events):
            history.append(event)
            if event.seq >= backlog_end:
                break
        assert [e.type for e in history] == [
            pb.EVENT_TYPE_SUBMITTED, pb.EVENT_TYPE_ASSIGNED, pb.EVENT_TYPE_STARTED,
            pb.EVENT_TYPE_COMPLETED,
        ]  # fmt: skip
        # Without follow the stream ends by itself after what already exists.
        unfollowed = list(client.watch_events(task_id=first, from_start=True, follow=False))
        assert [m.event.seq for m in unfollowed] == [e.seq for e in history]
        everything = list(client.watch_events(from_start=True, follow=False))
        assert len(everything) > len(history) and everything[-1].event.seq >= backlog_end
        watched = client.watch_events(types=[pb.EVENT_TYPE_COMPLETED], from_start=True)
        completed = list(_take(_events(watched), 1))
        assert completed[0].task_id == first and completed[0].seq == history[-1].seq
        after = list(
            _take(_events(client.watch_events(task_id=first, after_seq=history[1].seq)), 2)
        )
        assert [e.seq for e in after] == [e.seq for e in history[2:]]
        # Node events carry no task.
        watched = client.watch_events(types=[pb.EVENT_TYPE_NODE_JOINED], from_start=True)
        nodes = list(_take(_events(watched), 3))
        assert {e.node_id for e in nodes} == {n.node_id for n in cluster.nodes}
        assert not any(e.task_id for e in nodes)


def _take(events: Any, count: int) -> Any:
    for number, event in enumerate(events, start=1):
        yield event
        if number == count:
            return


# Endless output on attempt 1; attempt 2 finishes at once.
LOSES_ITS_NODE = """
import os, sys, time
if os.environ["CORTEX_ATTEMPT"] == "1":
    i = 0
    while True:
        print("first", i, flush=True)
        i += 1
        time.sleep(0.05)
print("second attempt", flush=True)
"""


def test_follower_gets_a_clear_end_when_the_executing_node_dies(make_cluster) -> None:
    cluster: Cluster = make_cluster(3, extra_args=FAST)
    leader = cluster.leader()
    victim, spare = cluster.followers()
    with leader.client() as client:
        client.cordon_node(spare.node_id)
        spec = _python(
            LOSES_ITS_NODE,
            constraints=pb.Constraints(forbidden_nodes=[leader.node_id]),
            retry_policy=pb.RetryPolicy(backoff=timedelta(milliseconds=200)),
        )
        task_id = client.submit_task(spec).task.id
        _wait_state(leader, task_id, {pb.TASK_STATE_RUNNING})
        client.uncordon_node(spare.node_id)
    relayed: list[pb.StreamTaskOutputResponse] = []
    direct_error: list[BaseException] = []

    def follow_relayed() -> None:
        with leader.client() as c:
            relayed.extend(c.stream_task_output(task_id, follow=True, timeout_s=60))

    def follow_direct() -> None:
        try:
            with victim.client() as c:
                for _ in c.stream_task_output(task_id, follow=True, timeout_s=60):
                    pass
        except CortexError as err:
            direct_error.append(err)

    threads = [threading.Thread(target=follow_relayed), threading.Thread(target=follow_direct)]
    for thread in threads:
        thread.start()
    wait_until(lambda: len(relayed) >= 5, 30, what="relayed output")
    victim.kill9()
    killed_at = time.monotonic()
    for thread in threads:
        thread.join(30)
    assert not any(t.is_alive() for t in threads), "a follower hangs after its source died"
    end = relayed[-1]
    assert end.HasField("end") and end.end.interrupted, end
    assert victim.node_id in end.end.error and end.end.attempt == 1
    data = [c.data for c in relayed if c.HasField("data")]
    assert end.end.total_bytes == _check_contiguous(data)
    print(f"\nrelay ended {time.monotonic() - killed_at:.2f} s after kill -9: {end.end.error}")
    assert len(direct_error) == 1 and isinstance(direct_error[0], Unavailable)
    # The retry runs elsewhere; its output is there by attempt number.
    done = _wait_state(leader, task_id, {pb.TASK_STATE_COMPLETED}, timeout=60)
    assert done.attempt == 2 and done.node_id == spare.node_id
    data, last = _collect(leader, task_id, attempt=2)
    assert b"".join(d.data for d in data) == b"second attempt\n"
    assert (last.state, last.exit_code, last.interrupted) == (pb.TASK_STATE_COMPLETED, 0, False)
    # Attempt 1's output went down with its node: a clear UNAVAILABLE.
    with pytest.raises(Unavailable, match=f"node {victim.node_id}"):
        _collect(leader, task_id, attempt=1)


def test_large_output_streams_through_a_relay_byte_for_byte(make_cluster) -> None:
    cluster = make_cluster(3)
    executing, relaying = cluster.nodes[0], cluster.nodes[1]
    size = 20 * 1024 * 1024
    source = f"""
import random, sys
rng = random.Random(7)
left = {size}
while left:
    block = rng.randbytes(min(left, 1 << 16))
    sys.stdout.buffer.write(block)
    left -= len(block)
"""
    rng_expected = hashlib.sha256()
    import random

    rng, left = random.Random(7), size
    while left:
        block = rng.randbytes(min(left, 1 << 16))
        rng_expected.update(block)
        left -= len(block)
    with relaying.client() as client:
        task_id = client.submit_task(_pinned(source, executing)).task.id
        digest, received, end = hashlib.sha256(), 0, None
        for chunk in client.stream_task_output(task_id, follow=True, timeout_s=120):
            if chunk.HasField("end"):
                end = chunk.end
                break
            assert chunk.data.offset == received
            digest.update(chunk.data.data)
            received += len(chunk.data.data)
    assert end is not None and end.state == pb.TASK_STATE_COMPLETED and end.total_bytes == size
    assert received == size and digest.hexdigest() == rng_expected.hexdigest()


# -------------------------------------------------------------- the CLI


def _read_line(stream: Any, timeout: float) -> bytes:
    result: list[bytes] = []
    reader = threading.Thread(target=lambda: result.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    assert result, f"no line within {timeout} s"
    return result[0]


def test_cortex_logs_follow_as_a_person_uses_it(make_cluster) -> None:
    cluster = make_cluster(3)
    executing, asked = cluster.nodes[0], cluster.nodes[2]
    source = """
import sys, time
for i in range(20):
    print("line", i, flush=True)
    # Long enough (6 s) that the first line is read while it runs, even
    # on a loaded machine where the CLI takes seconds to start.
    time.sleep(0.3)
print("oops", file=sys.stderr, flush=True)
sys.exit(3)
"""
    with asked.client() as client:
        task_id = client.submit_task(_pinned(source, executing, retry_policy=NO_RETRY)).task.id
    follow = subprocess.Popen(
        [*CLI, "--node", asked.grpc, "logs", "-f", task_id],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_cli_env(),
    )
    try:
        assert follow.stdout is not None
        assert _read_line(follow.stdout, 30) == b"line 0\n"
        # Live: the first line is out while the task still runs.
        with asked.client() as client:
            assert client.get_task(task_id).task.state in (
                pb.TASK_STATE_ASSIGNED, pb.TASK_STATE_RUNNING
            )  # fmt: skip
        rest = follow.stdout.read()
        code = follow.wait(30)
    finally:
        follow.kill()
    assert rest.decode().splitlines() == [f"line {i}" for i in range(1, 20)]
    assert code == 3, follow.stderr.read() if follow.stderr else ""
    assert follow.stderr is not None and follow.stderr.read() == b"oops\n"
    # After the end: the whole output, one stream, JSON lines; exit 0.
    done = subprocess.run(
        [*CLI, "--node", asked.grpc, "logs", task_id, "--stderr"],
        capture_output=True, env=_cli_env(), timeout=30,
    )  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"oops\n")
    missing = subprocess.run(
        [*CLI, "--node", asked.grpc, "logs", "nope"],
        capture_output=True,
        env=_cli_env(),
        timeout=30,
    )
    assert missing.returncode == 1 and b"no task with id nope" in missing.stderr
    events = subprocess.run(
        [*CLI, "--node", asked.grpc, "events", "--task", task_id],
        capture_output=True, env=_cli_env(), timeout=30,
    )  # fmt: skip
    names = [line.split()[2] for line in events.stdout.decode().splitlines()]
    assert names == ["submitted", "assigned", "started", "attempt_failed", "failed"]


def test_cortex_logs_follow_stops_cleanly_on_ctrl_c(make_cluster) -> None:
    cluster = make_cluster(3)
    node = cluster.nodes[1]
    with node.client() as client:
        task_id = client.submit_task(
            _python("import time\nwhile True:\n    print('tick', flush=True)\n    time.sleep(0.1)")
        ).task.id
    follow = subprocess.Popen(
        [*CLI, "--node", node.grpc, "logs", "-f", task_id],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_cli_env(),
    )
    try:
        assert follow.stdout is not None
        assert _read_line(follow.stdout, 30) == b"tick\n"
        follow.send_signal(signal.SIGINT)
        code = follow.wait(10)
    finally:
        follow.kill()
    assert code == 130
    assert follow.stderr is not None and b"Traceback" not in follow.stderr.read()
    # Every event, not one task's: following one task ends by itself when it ends.
    events = subprocess.Popen(
        [*CLI, "--node", node.grpc, "events", "-f", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_cli_env(),
    )
    try:
        assert events.stdout is not None
        while b'"submitted"' not in (line := _read_line(events.stdout, 30)):
            assert line, "events -f ended early"
        with node.client() as client:
            client.cancel_task(task_id)
        while b'"cancelled"' not in _read_line(events.stdout, 30):
            pass
        events.send_signal(signal.SIGINT)
        assert events.wait(10) == 130
    finally:
        events.kill()


def test_output_retention_keeps_the_newest_bytes(make_cluster, tmp_path: Path) -> None:
    cluster = make_cluster(1, start=False)
    cluster.nodes[0].env = {"CORTEX_OUTPUT_MAX_BYTES_PER_ATTEMPT": "1MiB"}
    cluster.start()
    cluster.wait_ready()
    node = cluster.nodes[0]
    source = "import sys\nfor i in range(40000): sys.stdout.write('%099d\\n' % i)"
    with node.client() as client:
        task_id = client.submit_task(_python(source)).task.id
        client.get_task_result(task_id, wait=True, timeout_ms=30_000)
    data, end = _collect(node, task_id)
    assert end.total_bytes == 4_000_000 and end.state == pb.TASK_STATE_COMPLETED
    kept = b"".join(d.data for d in data)
    # Whole segments (1/8 of the limit) go, oldest first; the newest bytes
    # stay. A segment closes with the write that takes it past 1/8, and one
    # write is up to 64 KiB of the task's output (more of it in one read when
    # the node is busy): so at least the limit less two segments and a write.
    assert 768 * 1024 - 65536 <= len(kept) <= 1024 * 1024 + 65536, len(kept)
    assert data[0].offset == end.total_bytes - len(kept)
    _check_contiguous(data, data[0].offset)
    assert kept.endswith(b"%099d\n" % 39999)
