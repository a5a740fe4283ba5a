"""The per-attempt output log on real files: offsets in the combined output,
reading from any offset (inside a chunk too), one stream only, segments,
per-attempt retention, crash leftovers, and reading while retention
removes what a reader is on."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from cortex.output.log import (
    INDEX_SUFFIX,
    RECORD,
    Chunk,
    LogCursor,
    LogEnd,
    LogWriter,
    list_segments,
    read_all,
    recovered_end,
    remove_segment,
    segment_name,
)


def write_random(writer: LogWriter, count: int, seed: int = 1) -> list[Chunk]:
    rng = random.Random(seed)
    return [
        writer.append(rng.choice(["stdout", "stderr"]), rng.randbytes(rng.randint(1, 700)), i)
        for i in range(count)
    ]


def read_from(directory: Path, offset: int, end: int, stream: str | None = None) -> list[Chunk]:
    out = []
    with LogCursor(directory, offset, stream) as cursor:
        while chunks := cursor.read(end):
            out.extend(chunks)
    return out


def test_offsets_are_byte_positions_in_the_combined_output(tmp_path: Path) -> None:
    writer = LogWriter(tmp_path / "log", 4096, 1 << 30)
    chunks = write_random(writer, 300)
    writer.close(LogEnd(writer.end, 0, 3))
    full = b"".join(c.data for c in chunks)
    assert [c.offset for c in chunks] == [sum(len(x.data) for x in chunks[:i]) for i in range(300)]
    assert len(list_segments(tmp_path / "log")) > 5
    assert recovered_end(tmp_path / "log") == writer.end == len(full)
    assert read_all(tmp_path / "log") == full
    assert LogEnd.load(tmp_path / "log") == LogEnd(len(full), 0, 3)


@pytest.mark.parametrize("offset", [0, 1, 699, 4095, 4096, 4097, 50_000, -1, -2])
def test_reading_from_any_offset_gives_exactly_the_rest(tmp_path: Path, offset: int) -> None:
    writer = LogWriter(tmp_path / "log", 4096, 1 << 30)
    full = b"".join(c.data for c in write_random(writer, 300))
    writer.close()
    start = offset if offset >= 0 else len(full) + offset + 1
    chunks = read_from(tmp_path / "log", start, len(full))
    assert b"".join(c.data for c in chunks) == full[start:]
    position = start
    for chunk in chunks:
        assert chunk.offset == position and full[chunk.offset : chunk.end] == chunk.data
        position = chunk.end


def test_one_stream_keeps_combined_offsets_and_adjacent_chunks_join(tmp_path: Path) -> None:
    writer = LogWriter(tmp_path / "log", 1 << 20, 1 << 30)
    chunks = write_random(writer, 200)
    writer.close()
    full = b"".join(c.data for c in chunks)
    for stream in ("stdout", "stderr"):
        got = read_from(tmp_path / "log", 0, len(full), stream)
        assert b"".join(c.data for c in got) == b"".join(
            c.data for c in chunks if c.stream == stream
        )
        assert all(c.stream == stream and full[c.offset : c.end] == c.data for c in got)
    # Adjacent chunks of one stream come back as fewer, larger messages.
    both = read_from(tmp_path / "log", 0, len(full))
    assert len(both) < len(chunks)
    assert all(a.stream != b.stream or a.end != b.offset or len(a.data) + len(b.data) > 65536
               for a, b in zip(both, both[1:], strict=False))  # fmt: skip


def test_many_small_chunks_join_into_messages_of_at_most_64_kib(tmp_path: Path) -> None:
    writer = LogWriter(tmp_path / "log", 1 << 20, 1 << 30)
    for i in range(20_000):
        writer.append("stdout", b"%09d\n" % i, i)
    writer.close()
    chunks = read_from(tmp_path / "log", 0, writer.end)
    assert b"".join(c.data for c in chunks) == b"".join(b"%09d\n" % i for i in range(20_000))
    assert len(chunks) == 4 and max(len(c.data) for c in chunks) <= 65536
    assert chunks[1].ts_ms == 65536 // 10  # a message carries its first chunk's time


def test_reader_stops_at_the_committed_end_and_continues_later(tmp_path: Path) -> None:
    writer = LogWriter(tmp_path / "log", 1024, 1 << 30)
    writer.append("stdout", b"a" * 1000, 1)
    with LogCursor(tmp_path / "log", 0) as cursor:
        assert [c.data for c in cursor.read(writer.end)] == [b"a" * 1000]
        assert cursor.read(writer.end) == []
        writer.append("stderr", b"b" * 100, 2)  # rolls to a new segment
        writer.append("stdout", b"c" * 10, 3)
        end_before_c = writer.end - 10
        assert [c.data for c in cursor.read(end_before_c)] == [b"b" * 100]
        assert [c.data for c in cursor.read(writer.end)] == [b"c" * 10]
        assert cursor.position == writer.end == 1110
    assert len(list_segments(tmp_path / "log")) == 2


def test_per_attempt_limit_removes_the_oldest_segments(tmp_path: Path) -> None:
    freed: list[int] = []
    writer = LogWriter(tmp_path / "log", 8192, 65536, freed.append)
    for i in range(1000):
        writer.append("stdout", b"%099d\n" % i, i)
    writer.close()
    first = list_segments(tmp_path / "log")[0]
    kept = writer.end - first
    assert 65536 - 2 * 8192 <= kept <= 65536
    chunks = read_from(tmp_path / "log", 0, writer.end)
    assert chunks[0].offset == first  # a reader from 0 starts at what is kept
    assert b"".join(c.data for c in chunks).endswith(b"%099d\n" % 999)
    # Accounting: everything added, minus what was removed, is on disk.
    on_disk = sum(os.path.getsize(tmp_path / "log" / name) for name in os.listdir(tmp_path / "log"))
    assert sum(freed) == on_disk


def test_a_crashed_writer_leaves_a_readable_log_without_end_marker(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    writer = LogWriter(directory, 1 << 20, 1 << 30)
    writer.append("stdout", b"hello ", 1)
    writer.append("stderr", b"world", 2)
    # The process dies mid-write: half an index record, then unindexed data.
    index = directory / f"{segment_name(0)}{INDEX_SUFFIX}"
    with open(index, "ab") as handle:
        handle.write(RECORD.pack(11, 3, 5, 1)[:10])
    assert LogEnd.load(directory) is None
    assert recovered_end(directory) == 11
    assert read_all(directory) == b"hello world"


def test_a_record_pointing_past_the_data_is_not_served(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    writer = LogWriter(directory, 1 << 20, 1 << 30)
    writer.append("stdout", b"kept", 1)
    writer.append("stdout", b"lost", 2)
    os.truncate(directory / f"{segment_name(0)}.data", 6)
    assert recovered_end(directory) == 4
    with LogCursor(directory, 0) as cursor:
        assert [c.data for c in cursor.read(8)] == [b"kept"]
        assert cursor.torn


def test_reader_skips_segments_removed_while_it_reads(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    writer = LogWriter(directory, 1000, 1 << 30)
    for i in range(10):
        writer.append("stdout", bytes([65 + i]) * 1000, i)
    writer.close()
    with LogCursor(directory, 500) as cursor:
        (first,) = cursor.read(1500)  # adjacent chunks of one stream join
        assert (first.offset, first.data) == (500, b"A" * 500 + b"B" * 1000)
        for base in (2000, 3000, 4000):
            remove_segment(directory, base)
        rest = []
        while chunks := cursor.read(writer.end):
            rest.extend(chunks)
    # The gap shows in the offsets: the reader goes on at 5000, not 2000.
    assert rest[0].offset == 5000
    assert b"".join(c.data for c in rest) == b"".join(bytes([70 + i]) * 1000 for i in range(5))


def test_reopening_an_attempt_log_starts_it_afresh(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    old = LogWriter(directory, 100, 1 << 30)
    for i in range(5):
        old.append("stdout", b"x" * 100, i)
    old.close(LogEnd(500, 0, 0))
    new = LogWriter(directory, 100, 1 << 30)
    new.append("stdout", b"new", 9)
    assert LogEnd.load(directory) is None and list_segments(directory) == [0]
    assert read_all(directory) == b"new"
