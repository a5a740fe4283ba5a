"""Live fan-out of an attempt's output to readers on other threads, the sink
the shell executor writes to (real subprocesses), and total-size retention
across attempts on real files."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from cortex.executors import ShellExecutor
from cortex.executors.base import Execution
from cortex.output.hub import LiveLog, OutputHub, OutputLimits
from cortex.output.log import LogCursor, LogEnd, LogWriter, list_segments, read_all
from cortex.output.sweeper import LOW_WATERMARK, RetentionSweeper, Segment, choose_victims
from cortex.spec import TaskSpec
from tests.cluster import wait_until


def follow(live: LiveLog, out: list[bytes], offsets: list[int]) -> None:
    """What a follower does: read to the committed end, wait, until closed."""
    with LogCursor(live.directory, 0) as cursor:
        while True:
            # Closed first: the writer's last advance precedes its close, so the
            # end read after seeing it closed is final.
            closed = live.closed
            end = live.end
            chunks = cursor.read(end)
            for chunk in chunks:
                offsets.append(chunk.offset)
                out.append(chunk.data)
            if not chunks and closed:
                return
            if not chunks:
                live.wait_past(cursor.position, 30)


def test_followers_on_other_threads_get_every_byte_in_order(tmp_path: Path) -> None:
    hub = OutputHub(tmp_path / "attempts", OutputLimits(1 << 20, 1 << 30))
    sink = hub.open("task-1", 1)
    live = hub.live("task-1", 1)
    assert live is not None
    results = [([], []) for _ in range(3)]  # type: list[tuple[list[bytes], list[int]]]
    readers = [threading.Thread(target=follow, args=(live, *r)) for r in results]
    for reader in readers:
        reader.start()
    expected = []
    for i in range(3000):
        data = b"%d:" % i + bytes(range(256))[: i % 256]
        sink.write("stdout" if i % 3 else "stderr", data)
        expected.append(data)
    sink.close(exit_code=0)
    for reader in readers:
        reader.join(30)
        assert not reader.is_alive()
    for data, offsets in results:
        assert b"".join(data) == b"".join(expected)
        assert offsets == sorted(set(offsets))
    assert hub.live("task-1", 1) is None
    assert LogEnd.load(hub.directory("task-1", 1)) is not None


def test_a_waiting_reader_wakes_on_new_output_and_on_close(tmp_path: Path) -> None:
    hub = OutputHub(tmp_path / "attempts")
    sink = hub.open("task-1", 1)
    live = hub.live("task-1", 1)
    assert live is not None
    woke = threading.Event()

    def wait() -> None:
        live.wait_past(0, 60)
        woke.set()

    waiter = threading.Thread(target=wait)
    waiter.start()
    sink.write("stdout", b"x")
    waiter.join(10)
    assert woke.is_set() and live.end == 1
    closer = threading.Thread(target=lambda: live.wait_past(1, 60))
    closer.start()
    sink.close(exit_code=3, error="exit code 3")
    closer.join(10)
    assert not closer.is_alive()
    assert live.outcome == LogEnd(1, live.outcome.closed_at_ms, 3, "exit code 3")  # type: ignore[union-attr]


def test_a_reader_can_wait_for_an_attempt_log_to_open(tmp_path: Path) -> None:
    hub = OutputHub(tmp_path / "attempts")
    assert hub.wait_opened("task-1", 2, 0.01) is None
    found: list[LiveLog | None] = []
    waiter = threading.Thread(target=lambda: found.append(hub.wait_opened("task-1", 2, 60)))
    waiter.start()
    hub.open("task-1", 2)
    waiter.join(10)
    assert found and found[0] is not None and found[0].attempt == 2


def test_the_sink_never_raises_and_records_a_failing_disk(tmp_path: Path) -> None:
    hub = OutputHub(tmp_path / "attempts")
    sink = hub.open("task-1", 1)
    sink.write("stdout", b"before")
    writer: LogWriter = sink._writer
    os.close(writer._data_fd)  # the disk goes away under the writer
    sink.write("stdout", b"after")
    sink.write("stdout", b"more")
    writer._data_fd = -1
    sink.close(exit_code=0)
    end = LogEnd.load(hub.directory("task-1", 1))
    assert end is not None and end.write_error and "output log write failed" in end.write_error
    assert read_all(hub.directory("task-1", 1)) == b"before"
    sink.write("stdout", b"after close")  # ignored, no error


def test_output_directories_cannot_escape_the_root(tmp_path: Path) -> None:
    hub = OutputHub(tmp_path / "attempts")
    for bad in ("..", "a/b", "", "."):
        with pytest.raises(ValueError):
            hub.directory(bad, 1)


def test_shell_executor_writes_through_the_sink_in_arrival_order(tmp_path: Path) -> None:
    hub = OutputHub(tmp_path / "attempts")
    sink = hub.open("task-1", 1)
    source = (
        "import os\n"
        "for i in range(30):\n"
        "    os.write(1, b'out%d\\n' % i)\n"
        "    os.write(2, b'\\xff err%d\\n' % i)\n"
    )
    execution = Execution(
        task_id="task-1",
        attempt=1,
        spec=TaskSpec.model_validate({"command": [sys.executable, "-c", source]}),
        work_dir=str(tmp_path / "work"),
        output=sink,
    )
    result = ShellExecutor().run(execution, threading.Event())
    sink.close(result.exit_code)
    directory = hub.directory("task-1", 1)
    assert result.exit_code == 0 and result.stdout.startswith(b"out0\n")
    assert read_all(directory, "stdout") == b"".join(b"out%d\n" % i for i in range(30))
    assert read_all(directory, "stderr") == b"".join(b"\xff err%d\n" % i for i in range(30))
    # Interleaved in arrival order: each write intact (pipes keep small
    # writes whole), each stream in its own order.
    lines = read_all(directory).splitlines(keepends=True)
    assert sorted(lines) == sorted(
        [b"out%d\n" % i for i in range(30)] + [b"\xff err%d\n" % i for i in range(30)]
    )
    assert [x for x in lines if x.startswith(b"out")] == [b"out%d\n" % i for i in range(30)]
    assert not (tmp_path / "work" / "stdout").exists()


def _closed_log(root: Path, task: str, size: int, mtime: float) -> Path:
    directory = root / task / "1" / "output"
    writer = LogWriter(directory, size // 2, 1 << 30)
    writer.append("stdout", b"x" * (size // 2), 0)
    writer.append("stdout", b"y" * (size // 2), 0)
    writer.close(LogEnd(size, 0))
    for number, base in enumerate(list_segments(directory)):
        for suffix in (".data", ".index"):
            os.utime(directory / f"{base:020d}{suffix}", (mtime + number, mtime + number))
    return directory


def test_choose_victims_takes_the_oldest_and_spares_live_writers() -> None:
    old, live = Path("old"), Path("live")
    segments = [
        Segment(live, 0, 100, 1.0),
        Segment(old, 0, 100, 2.0),
        Segment(old, 100, 100, 3.0),
        Segment(live, 100, 100, 4.0),
    ]
    assert choose_victims(segments, 400, {live}) == []
    assert choose_victims(segments, 250, {live}) == segments[:2]
    # Only the live log's newest segment is out of reach.
    assert choose_victims(segments, 0, {live}) == segments[:3]
    assert choose_victims(segments, 0, set()) == segments


def test_sweep_removes_the_oldest_output_first_across_attempts(tmp_path: Path) -> None:
    root = tmp_path / "attempts"
    now = time.time()
    logs = [_closed_log(root, f"task-{i}", 200_000, now - 1000 + i * 10) for i in range(5)]
    sweeper = RetentionSweeper(root, 700_000, set)
    freed = sweeper.sweep()
    # 10 segments of 100 024 bytes; down to 90 % of the limit, oldest first.
    assert [len(list_segments(d)) for d in logs] == [0, 0, 2, 2, 2]
    assert freed == 4 * 100_024 and sweeper.total_bytes == 6 * 100_024
    assert sweeper.total_bytes <= 700_000 * LOW_WATERMARK
    assert read_all(logs[1]) == b"" and read_all(logs[2]) == b"x" * 100_000 + b"y" * 100_000


def test_writers_wake_the_sweeper_when_output_passes_the_total_limit(tmp_path: Path) -> None:
    hub = OutputHub(tmp_path / "attempts", OutputLimits(1 << 20, 1 << 20))
    hub.start()
    try:
        old = hub.open("old", 1)
        for _ in range(12):
            old.write("stdout", b"o" * 65536)
        old.close(0)
        sink = hub.open("new", 1)
        for _ in range(12):
            sink.write("stdout", b"n" * 65536)
        # Writers wake the sweeper whenever the total is over the limit.
        wait_until(lambda: hub.retention.total_bytes <= 1 << 20, 30, what="a retention sweep")
        assert hub.retention.removed_segments > 0
        # Oldest first: the finished attempt lost its oldest output, the
        # live one nothing, and it keeps writing.
        kept = read_all(hub.directory("old", 1))
        assert kept == b"o" * len(kept) and len(kept) < 12 * 65536
        sink.write("stdout", b"still here")
        sink.close(0)
        assert read_all(hub.directory("new", 1)) == b"n" * 12 * 65536 + b"still here"
    finally:
        hub.stop()


def test_output_of_purged_tasks_is_removed_but_not_while_an_attempt_writes(tmp_path: Path) -> None:
    hub = OutputHub(tmp_path / "attempts", OutputLimits(1 << 20, 1 << 30))
    for task_id in ("done", "kept"):
        sink = hub.open(task_id, 1)
        sink.write("stdout", b"out")
        sink.close(0)
    (hub.root / "done" / "1" / "context.json").write_text("{}")
    winding_down = hub.open("winding-down", 2)
    outside = tmp_path / "outside"
    outside.mkdir()
    # Ids that are no directory name are ignored, never followed.
    hub.discard(["done", "winding-down", "..", "a/b", "never-ran"])
    assert hub.retention.remove_purged() == 1
    assert not (hub.root / "done").exists()
    assert read_all(hub.directory("kept", 1)) == b"out"
    assert hub.directory("winding-down", 2).is_dir() and outside.is_dir()
    # The live attempt's directory goes on a later round, once it is closed.
    winding_down.close(0)
    assert hub.retention.remove_purged() == 1
    assert not (hub.root / "winding-down").exists()
    assert hub.retention.remove_purged() == 0


def test_the_sweeper_thread_removes_discarded_output(tmp_path: Path) -> None:
    hub = OutputHub(tmp_path / "attempts", OutputLimits(1 << 20, 1 << 30))
    sink = hub.open("done", 1)
    sink.write("stdout", b"x" * 4096)
    sink.close(0)
    hub.start()
    try:
        assert hub.retention.total_bytes > 4096
        hub.discard(["done"])
        wait_until(lambda: not (hub.root / "done").exists(), 30, what="purged output removed")
        wait_until(lambda: hub.retention.total_bytes == 0, 30, what="the total re-measured")
    finally:
        hub.stop()
