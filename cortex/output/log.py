"""The on-disk output log of one attempt: stdout and stderr chunks interleaved
in arrival order, addressed by byte offset in the combined output.

A log is a directory of segments, as in Kafka: `<base>.data` holds the raw
bytes from combined offset `base` on, and `<base>.index` one fixed-size record
per chunk (offset, arrival time, length, stream). Data is written before its
index record, so after a crash a torn tail is recognisable and ignored.
Retention removes whole segments, oldest first. `end.json` is written when the
writer closes; a log without it was interrupted (its node died mid-attempt).
"""

from __future__ import annotations

import json
import logging
import os
import struct
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

STREAMS: dict[str, int] = {"stdout": 1, "stderr": 2}
STREAM_NAMES: dict[int, str] = {code: name for name, code in STREAMS.items()}

# offset, ts_ms, length, stream, padding to 24 bytes.
RECORD = struct.Struct("<qqIB3x")
DATA_SUFFIX = ".data"
INDEX_SUFFIX = ".index"
END_FILE = "end.json"
# Largest message a reader builds by joining adjacent chunks of one stream.
MAX_MESSAGE_BYTES = 64 * 1024
_RECORDS_PER_READ = 512


@dataclass(frozen=True)
class Chunk:
    stream: str
    offset: int
    data: bytes
    ts_ms: int

    @property
    def end(self) -> int:
        return self.offset + len(self.data)


@dataclass(frozen=True)
class LogEnd:
    """What the writer knew when it closed the log."""

    total_bytes: int
    closed_at_ms: int
    exit_code: int | None = None
    error: str | None = None
    write_error: str | None = None

    @classmethod
    def load(cls, directory: Path) -> LogEnd | None:
        try:
            raw = json.loads((directory / END_FILE).read_text())
            return cls(**raw)
        except (OSError, ValueError, TypeError):
            return None

    def save(self, directory: Path) -> None:
        temporary = directory / f"{END_FILE}.tmp"
        temporary.write_text(json.dumps(asdict(self)))
        os.replace(temporary, directory / END_FILE)


@dataclass(frozen=True)
class _Record:
    offset: int
    ts_ms: int
    length: int
    stream: int

    @property
    def end(self) -> int:
        return self.offset + self.length


def segment_name(base: int) -> str:
    return f"{base:020d}"


def list_segments(directory: Path) -> list[int]:
    """Base offsets of the segments present, ascending."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    bases = []
    for name in names:
        stem, dot, suffix = name.partition(".")
        if dot and f".{suffix}" == DATA_SUFFIX and stem.isdigit():
            bases.append(int(stem))
    return sorted(bases)


def _read_records(fd: int, first: int, count: int) -> list[_Record]:
    raw = os.pread(fd, count * RECORD.size, first * RECORD.size)
    whole = len(raw) // RECORD.size  # a torn last record is not a record
    return [_Record(*RECORD.unpack_from(raw, i * RECORD.size)) for i in range(whole)]


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def recovered_end(directory: Path) -> int:
    """The end offset of the valid data on disk: the last index record whose
    bytes are all present (used for logs whose writer died)."""
    for base in reversed(list_segments(directory)):
        stem = directory / segment_name(base)
        try:
            data_size = os.path.getsize(f"{stem}{DATA_SUFFIX}")
            index_size = os.path.getsize(f"{stem}{INDEX_SUFFIX}")
            fd = os.open(f"{stem}{INDEX_SUFFIX}", os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            count = index_size // RECORD.size
            for number in range(count - 1, -1, -1):
                record = _read_records(fd, number, 1)[0]
                if record.end - base <= data_size:
                    return record.end
        finally:
            os.close(fd)
        return base
    return 0


class LogWriter:
    """Appends chunks to an attempt's log. Thread-safe: stdout and stderr
    pumps write concurrently, and the order they take the lock in is the
    order of the combined output. With `resume`, carries on the log an
    earlier writer left (an attempt recovered after its node restarted)."""

    def __init__(
        self,
        directory: Path,
        segment_bytes: int,
        max_bytes: int,
        on_disk_change: Callable[[int], None] | None = None,
        resume: bool = False,
    ) -> None:
        self.directory = directory
        self._segment_bytes = max(segment_bytes, 1)
        self._max_bytes = max_bytes
        self._on_disk_change = on_disk_change or (lambda delta: None)
        self._lock = threading.Lock()
        directory.mkdir(parents=True, exist_ok=True)
        # (base, data bytes, index bytes) of every segment still on disk.
        self._segments: deque[list[int]] = deque()
        self._data_fd = -1
        self._index_fd = -1
        self.end = 0
        # Bytes of each stream the log held when resumed (segments retention
        # removed are not counted).
        self.resumed = {name: 0 for name in STREAMS}
        if resume and list_segments(directory):
            self._resume()
        else:
            self._clear()
            self._open_segment(0)

    def _clear(self) -> None:
        """An attempt's log is written once; anything left in its directory
        is from an earlier, abandoned run and would corrupt the offsets."""
        for name in os.listdir(self.directory):
            if name.endswith((DATA_SUFFIX, INDEX_SUFFIX)) or name.startswith(END_FILE):
                os.unlink(self.directory / name)

    def _resume(self) -> None:
        """Takes up the segments on disk: drops a torn tail (data its index
        does not cover, or the reverse), counts each stream's bytes, and
        appends to the last segment. The log is open again: no end marker."""
        (self.directory / END_FILE).unlink(missing_ok=True)
        freed = 0
        bases = list_segments(self.directory)
        for base in bases:
            stem = self.directory / segment_name(base)
            try:
                data_size = os.path.getsize(f"{stem}{DATA_SUFFIX}")
                fd = os.open(f"{stem}{INDEX_SUFFIX}", os.O_RDWR | os.O_CREAT, 0o644)
            except FileNotFoundError:
                continue
            try:
                index_size = os.fstat(fd).st_size
                records = _read_records(fd, 0, index_size // RECORD.size)
                # The records whose bytes are all there, up to the first that is not.
                whole = next(
                    (i for i, r in enumerate(records) if r.end - base > data_size), len(records)
                )
                valid = records[:whole]
                end = valid[-1].end if valid else base
                os.ftruncate(fd, len(valid) * RECORD.size)
            finally:
                os.close(fd)
            os.truncate(f"{stem}{DATA_SUFFIX}", end - base)
            freed += (data_size - (end - base)) + (index_size - len(valid) * RECORD.size)
            for record in valid:
                name = STREAM_NAMES.get(record.stream, "stdout")
                self.resumed[name] += record.length
            self._segments.append([base, end - base, len(valid) * RECORD.size])
            self.end = end
        if not self._segments:
            self._open_segment(0)
        else:
            stem = self.directory / segment_name(self._segments[-1][0])
            flags = os.O_WRONLY | os.O_APPEND
            self._data_fd = os.open(f"{stem}{DATA_SUFFIX}", flags)
            self._index_fd = os.open(f"{stem}{INDEX_SUFFIX}", flags)
        if freed:
            self._on_disk_change(-freed)

    def _open_segment(self, base: int) -> None:
        stem = self.directory / segment_name(base)
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC
        self._data_fd = os.open(f"{stem}{DATA_SUFFIX}", flags, 0o644)
        self._index_fd = os.open(f"{stem}{INDEX_SUFFIX}", flags, 0o644)
        self._segments.append([base, 0, 0])

    def _close_fds(self) -> None:
        for fd in (self._data_fd, self._index_fd):
            if fd >= 0:
                os.close(fd)
        self._data_fd = self._index_fd = -1

    def append(self, stream: str, data: bytes, ts_ms: int) -> Chunk:
        """Writes one chunk; returns it with its combined offset."""
        code = STREAMS[stream]
        with self._lock:
            if self._data_fd < 0:
                raise ValueError("log is closed")
            if self._segments[-1][1] >= self._segment_bytes:
                self._roll()
            offset = self.end
            _write_all(self._data_fd, data)
            _write_all(self._index_fd, RECORD.pack(offset, ts_ms, len(data), code))
            segment = self._segments[-1]
            segment[1] += len(data)
            segment[2] += RECORD.size
            self.end = offset + len(data)
        self._on_disk_change(len(data) + RECORD.size)
        return Chunk(stream, offset, data, ts_ms)

    def _roll(self) -> None:
        self._close_fds()
        self._open_segment(self.end)
        freed = 0
        # Room for the new segment to fill, so the log never exceeds its limit.
        while (
            len(self._segments) > 1
            and self.end - self._segments[0][0] + self._segment_bytes > self._max_bytes
        ):
            base, data_bytes, index_bytes = self._segments.popleft()
            freed += data_bytes + index_bytes
            remove_segment(self.directory, base)
        if freed:
            self._on_disk_change(-freed)

    def close(self, end: LogEnd | None = None) -> None:
        with self._lock:
            self._close_fds()
        if end is not None:
            end.save(self.directory)


def remove_segment(directory: Path, base: int) -> None:
    stem = directory / segment_name(base)
    for suffix in (DATA_SUFFIX, INDEX_SUFFIX):
        try:
            os.unlink(f"{stem}{suffix}")
        except FileNotFoundError:
            pass


class LogCursor:
    """Reads a log forward from a byte offset, up to an end the caller knows
    is committed. Segments removed by retention while it reads are skipped
    (the next chunk's offset shows the gap); open files stay readable."""

    def __init__(self, directory: Path, offset: int, stream: str | None = None) -> None:
        self.directory = directory
        self.position = offset
        self._stream = STREAMS[stream] if stream else None
        self._base: int | None = None
        self._data_fd = -1
        self._index_fd = -1
        self._record = 0
        # Set when the data a record points at is missing (a crash tore it).
        self.torn = False

    def close(self) -> None:
        for fd in (self._data_fd, self._index_fd):
            if fd >= 0:
                os.close(fd)
        self._data_fd = self._index_fd = -1
        self._base = None

    def __enter__(self) -> LogCursor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _open(self, base: int) -> bool:
        self.close()
        stem = self.directory / segment_name(base)
        try:
            self._data_fd = os.open(f"{stem}{DATA_SUFFIX}", os.O_RDONLY)
            self._index_fd = os.open(f"{stem}{INDEX_SUFFIX}", os.O_RDONLY)
        except FileNotFoundError:
            self.close()
            return False
        self._base = base
        return True

    def _seek(self) -> bool:
        """Opens the segment holding `position` (or the first one after it,
        when retention removed it) and finds the record there."""
        for base in self._candidates():
            if self._open(base):
                self.position = max(self.position, base)
                self._record = self._find_record(self.position)
                return True
        return False

    def _candidates(self) -> list[int]:
        bases = list_segments(self.directory)
        holding = [b for b in bases if b <= self.position]
        start = holding[-1] if holding else None
        return [b for b in bases if start is None or b >= start]

    def _find_record(self, position: int) -> int:
        """Number of the first record in the open segment ending after `position`."""
        low, high = 0, os.fstat(self._index_fd).st_size // RECORD.size
        while low < high:
            middle = (low + high) // 2
            if _read_records(self._index_fd, middle, 1)[0].end <= position:
                low = middle + 1
            else:
                high = middle
        return low

    def read(self, end: int, max_bytes: int = MAX_MESSAGE_BYTES) -> list[Chunk]:
        """The next chunks below `end`, adjacent chunks of one stream joined
        into messages of at most `max_bytes`; empty when none are there yet.
        Advances `position` past everything returned or filtered out."""
        batch = _Batch(max_bytes)
        while self.position < end and batch.room and not self.torn:
            if self._base is None and not self._seek():
                break
            records = _read_records(self._index_fd, self._record, _RECORDS_PER_READ)
            if not records:
                # A later segment exists only once the writer has rolled, so
                # this one is complete: move on. Otherwise wait for more.
                if not self._next_segment():
                    break
                continue
            for record in records:
                if record.offset >= end or not batch.room:
                    break
                self._record += 1
                if record.end <= self.position:
                    continue
                start = max(record.offset, self.position)
                if self._stream is not None and record.stream != self._stream:
                    self.position = record.end
                    continue
                assert self._base is not None
                want = record.end - start
                data = os.pread(self._data_fd, want, start - self._base)
                if len(data) < want:
                    self.torn = True
                    break
                self.position = record.end
                batch.add(STREAM_NAMES.get(record.stream, "stdout"), start, data, record.ts_ms)
            else:
                continue
            break
        return batch.chunks()

    def _next_segment(self) -> bool:
        for base in list_segments(self.directory):
            if self._base is not None and base <= self._base:
                continue
            if self._open(base):
                self.position = max(self.position, base)
                self._record = self._find_record(self.position)
                return True
        return False


class _Batch:
    """Joins adjacent chunks of one stream into messages without quadratic copying."""

    def __init__(self, max_bytes: int) -> None:
        self._max = max_bytes
        self._budget = max_bytes * 4
        self._groups: list[tuple[str, int, int, list[bytes]]] = []
        self._size = 0
        self._end = -1

    @property
    def room(self) -> bool:
        return self._budget > 0

    def add(self, stream: str, offset: int, data: bytes, ts_ms: int) -> None:
        self._budget -= len(data)
        if self._groups:
            last_stream, _, _, parts = self._groups[-1]
            if (
                last_stream == stream
                and self._end == offset
                and self._size + len(data) <= self._max
            ):
                parts.append(data)
                self._size += len(data)
                self._end = offset + len(data)
                return
        self._groups.append((stream, offset, ts_ms, [data]))
        self._size = len(data)
        self._end = offset + len(data)

    def chunks(self) -> list[Chunk]:
        out = []
        for stream, offset, ts_ms, parts in self._groups:
            data = parts[0] if len(parts) == 1 else b"".join(parts)
            out.append(Chunk(stream, offset, data, ts_ms))
        return out


def read_all(directory: Path, stream: str | None = None) -> bytes:
    """Every retained byte of a finished log (tests and tools)."""
    end = recovered_end(directory)
    parts: list[bytes] = []
    with LogCursor(directory, 0, stream) as cursor:
        while True:
            chunks = cursor.read(end)
            if not chunks:
                return b"".join(parts)
            parts.extend(c.data for c in chunks)
