"""Keeps all attempts' output logs on a node under a total size: removes
whole segments, least recently written first, never the segment a live
writer appends to. Per-attempt limits are the writer's job (`LogWriter`).
Also removes the whole directory of a task purged from the replicated state."""

from __future__ import annotations

import logging
import os
import shutil
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from cortex.output.log import DATA_SUFFIX, INDEX_SUFFIX, list_segments, remove_segment, segment_name

log = logging.getLogger(__name__)

# After a sweep the total is at most this share of the limit, so a node at
# its limit sweeps now and then, not on every write.
LOW_WATERMARK = 0.9
_IDLE_CHECK_S = 60.0


@dataclass(frozen=True)
class Segment:
    directory: Path
    base: int
    size: int
    mtime: float


def scan_segments(root: Path) -> list[Segment]:
    """Every output segment under `root` (`<task>/<attempt>/output/<base>.*`)."""
    found = []
    for task in _subdirs(root):
        for attempt in _subdirs(task):
            directory = attempt / "output"
            for base in list_segments(directory):
                stem = directory / segment_name(base)
                try:
                    data = os.stat(f"{stem}{DATA_SUFFIX}")
                    index_size = os.path.getsize(f"{stem}{INDEX_SUFFIX}")
                except FileNotFoundError:
                    continue
                found.append(Segment(directory, base, data.st_size + index_size, data.st_mtime))
    return found


def _subdirs(path: Path) -> list[Path]:
    try:
        return [Path(entry.path) for entry in os.scandir(path) if entry.is_dir()]
    except (FileNotFoundError, NotADirectoryError):
        return []


def choose_victims(
    segments: list[Segment], limit: int, live_directories: set[Path]
) -> list[Segment]:
    """The oldest segments to remove so the rest fit in `limit`; the newest
    segment of a live log is never chosen (its writer appends to it)."""
    total = sum(s.size for s in segments)
    if total <= limit:
        return []
    newest: dict[Path, int] = {}
    for segment in segments:
        if segment.directory in live_directories:
            newest[segment.directory] = max(newest.get(segment.directory, -1), segment.base)
    victims = []
    for segment in sorted(segments, key=lambda s: (s.mtime, s.base)):
        if total <= limit:
            break
        if newest.get(segment.directory) == segment.base:
            continue
        victims.append(segment)
        total -= segment.size
    return victims


class RetentionSweeper:
    def __init__(
        self, root: Path, max_total_bytes: int, live_directories: Callable[[], set[Path]]
    ) -> None:
        self._root = root
        self._limit = max_total_bytes
        self._live_directories = live_directories
        self._lock = threading.Lock()
        self._total: int | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="output-retention", daemon=True)
        self._purged: set[str] = set()
        self.removed_segments = 0

    @property
    def total_bytes(self) -> int:
        with self._lock:
            return self._total or 0

    def start(self) -> None:
        """Measures (and if need be trims) what is on disk before any writer
        runs, so every byte written afterwards is accounted."""
        self.sweep()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def account(self, delta: int) -> None:
        """Writers report bytes they add (or remove); wakes the sweep when
        the total passes the limit."""
        with self._lock:
            if self._total is None:
                return
            self._total += delta
            over = self._total > self._limit
        if over:
            self._wake.set()

    def discard(self, task_ids: Iterable[str]) -> None:
        """Queues the output of tasks purged from the replicated state for
        removal by the sweep thread (callers may be on the Raft thread).
        Each id must be a valid directory name (`check_path_part`)."""
        with self._lock:
            self._purged.update(task_ids)
        self._wake.set()

    def remove_purged(self) -> int:
        """Removes the directories of queued purged tasks; one with a live
        writer (an attempt still winding down) waits for a later round.
        Returns how many were removed."""
        with self._lock:
            task_ids, self._purged = self._purged, set()
        live = {directory.parent.parent for directory in self._live_directories()}
        removed = 0
        for task_id in sorted(task_ids):
            directory = self._root / task_id
            if directory in live:
                with self._lock:
                    self._purged.add(task_id)
                continue
            if directory.is_dir():
                shutil.rmtree(directory, ignore_errors=True)
                removed += 1
        return removed

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(_IDLE_CHECK_S)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                removed = self.remove_purged()
                if removed:
                    log.info("output retention: removed the output of %d purged tasks", removed)
                self.sweep()
            except Exception:
                log.exception("output retention sweep failed")

    def sweep(self) -> int:
        """Measures the logs on disk and removes the oldest segments while
        over the limit (down to the low watermark). Returns bytes freed."""
        segments = scan_segments(self._root)
        total = sum(s.size for s in segments)
        freed = 0
        if total > self._limit:
            target = int(self._limit * LOW_WATERMARK)
            for victim in choose_victims(segments, target, self._live_directories()):
                remove_segment(victim.directory, victim.base)
                freed += victim.size
                self.removed_segments += 1
            log.info("output retention: removed %d bytes of old output (limit %d)",
                     freed, self._limit)  # fmt: skip
        with self._lock:
            self._total = total - freed
        return freed
